//! The calibrated efficiency table is what scenarios (CLI, page) use: the fitted fields of
//! data/calibration/efficiencies.json over the literature defaults, per GPU generation.

use servesim_core::gpu::Generation;
use servesim_core::perf::{generation_key, Efficiencies, EfficiencyBasis};
use servesim_core::scenario::Scenario;
use servesim_core::validate;

#[test]
fn calibrated_table_carries_every_fitted_field_of_its_generation() {
    let fit = validate::fitted_efficiencies().unwrap();
    assert!(!fit.generations.is_empty());
    for g in [Generation::Hopper, Generation::Ampere] {
        let fields = &fit.generations[&generation_key(g)];
        let cal = Efficiencies::calibrated_for(g);
        let lit = Efficiencies::default_for(g);
        for (name, _, v) in cal.fields() {
            match fields.get(name) {
                Some(f) => assert_eq!(v, *f, "{g:?} {name}"),
                None => {
                    let l = lit.fields().into_iter().find(|x| x.0 == name).unwrap().2;
                    assert_eq!(
                        v, l,
                        "{g:?} {name}: unfitted fields keep the literature value"
                    )
                }
            }
        }
        match Efficiencies::calibrated_basis(g) {
            EfficiencyBasis::Calibrated { fitted, note } => {
                assert_eq!(&fitted, fields);
                assert!(note.contains("calibrated"));
            }
            b => panic!("{g:?}: expected calibrated, got {b:?}"),
        }
    }
}

#[test]
fn generations_without_measured_runs_keep_the_literature_table_and_say_so() {
    for g in [Generation::Blackwell, Generation::Cdna3, Generation::Ada] {
        assert_eq!(
            Efficiencies::calibrated_for(g),
            Efficiencies::default_for(g)
        );
        match Efficiencies::calibrated_basis(g) {
            EfficiencyBasis::Literature { note } => assert!(note.contains("not calibrated")),
            b => panic!("{g:?}: expected literature, got {b:?}"),
        }
    }
}

#[test]
fn scenarios_resolve_with_the_calibrated_table() {
    let s = Scenario::default_scenario(); // H100 (Hopper)
    let r = s.resolve().unwrap();
    assert_eq!(
        *r.cost.efficiencies(),
        Efficiencies::calibrated_for(Generation::Hopper)
    );
    assert_ne!(
        *r.cost.efficiencies(),
        Efficiencies::default_for(Generation::Hopper)
    );
}
