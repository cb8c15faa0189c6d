//! The calibrated efficiency table is what scenarios (CLI, page) use: the fitted fields of
//! data/calibration/efficiencies.json over the literature defaults, per GPU generation and vLLM
//! release line (calibration era).

use servesim_core::gpu::Generation;
use servesim_core::perf::{
    calibration_key, lookup_calibration, Efficiencies, EfficiencyBasis, EngineEra, VllmVersion,
};
use servesim_core::scenario::Scenario;
use servesim_core::validate;
use std::collections::BTreeMap;

#[test]
fn calibrated_table_carries_every_fitted_field_of_its_generation_and_era() {
    let fit = validate::fitted_efficiencies().unwrap();
    assert!(!fit.generations.is_empty());
    for g in [
        Generation::Hopper,
        Generation::Ampere,
        Generation::Blackwell,
        Generation::Cdna3,
    ] {
        for era in EngineEra::ALL {
            let (_, fields) = lookup_calibration(&fit.generations, g, era)
                .unwrap_or_else(|| panic!("{g:?} {era:?}: no calibration"));
            let cal = Efficiencies::calibrated_for(g, era);
            let lit = Efficiencies::default_for(g);
            for (name, _, v) in cal.fields() {
                match fields.get(name) {
                    Some(f) => assert_eq!(v, *f, "{g:?} {era:?} {name}"),
                    None => {
                        let l = lit.fields().into_iter().find(|x| x.0 == name).unwrap().2;
                        assert_eq!(
                            v, l,
                            "{g:?} {name}: unfitted fields keep the literature value"
                        )
                    }
                }
            }
            match Efficiencies::calibrated_basis(g, era) {
                EfficiencyBasis::Calibrated { fitted, note } => {
                    assert_eq!(fitted, fields);
                    assert!(note.contains("calibrated"));
                }
                b => panic!("{g:?}: expected calibrated, got {b:?}"),
            }
        }
    }
}

/// A field borrowed because no row of its key reads it (`validate::borrow_unidentified`) is in
/// the scenario's table, and the basis a user sees says it was borrowed, and from where, rather
/// than counting it as fitted.
#[test]
fn borrowed_fields_are_used_and_said_to_be_borrowed() {
    let fit = validate::fitted_efficiencies().unwrap();
    assert!(!fit.borrowed.is_empty(), "the shipped table borrows");
    for (key, fields) in &fit.borrowed {
        let (g, era) = [
            Generation::Hopper,
            Generation::Ampere,
            Generation::Ada,
            Generation::Blackwell,
            Generation::Cdna3,
        ]
        .into_iter()
        .flat_map(|g| EngineEra::ALL.map(|e| (g, e)))
        .find(|(g, e)| calibration_key(*g, *e) == *key)
        .unwrap_or_else(|| panic!("{key}: not a generation and release line"));
        let cal = Efficiencies::calibrated_for(g, era);
        let note = match Efficiencies::calibrated_basis(g, era) {
            EfficiencyBasis::Calibrated { note, .. } => note,
            b => panic!("{key}: expected calibrated, got {b:?}"),
        };
        assert!(note.contains("borrowed"), "{key}: {note}");
        // The one line a report shows (CLI, page) says it too.
        let line = servesim_core::scenario::Calibration::of(g, era, None).summary;
        for (field, from) in fields {
            assert!(validate::KERNEL_FAMILY_FIELDS.contains(&field.as_str()));
            let v = cal.fields().into_iter().find(|x| x.0 == field).unwrap().2;
            assert_eq!(v, fit.generations[key][field], "{key} {field}");
            assert!(note.contains(&format!("{field} from {from}")), "{note}");
            assert!(line.contains(&format!("{field} from {from}")), "{line}");
            assert!(from
                .split(", ")
                .all(|d| d != key && fit.generations.contains_key(d)));
        }
    }
}

#[test]
fn hopper_has_its_own_fit_for_each_vllm_release_line() {
    let fit = validate::fitted_efficiencies().unwrap();
    for era in EngineEra::ALL {
        let key = calibration_key(Generation::Hopper, era);
        assert!(fit.generations.contains_key(&key), "missing {key}");
    }
    assert_ne!(
        Efficiencies::calibrated_for(Generation::Hopper, EngineEra::Vllm011),
        Efficiencies::calibrated_for(Generation::Hopper, EngineEra::Vllm015)
    );
}

#[test]
fn harness_entries_of_the_fit_are_never_a_scenarios_table() {
    // `<key>+<tag>` entries (validate::HARNESS_KEYS) hold what one measurement harness alone
    // shows; scenarios look a table up by generation and era and must never land on one.
    let fit = validate::fitted_efficiencies().unwrap();
    assert!(fit.generations.keys().any(|k| k.contains('+')));
    for g in [
        Generation::Hopper,
        Generation::Ampere,
        Generation::Blackwell,
        Generation::Cdna3,
        Generation::Ada,
    ] {
        for era in EngineEra::ALL {
            if let Some((key, _)) = lookup_calibration(&fit.generations, g, era) {
                assert!(!key.contains('+'), "{g:?} {era:?} -> {key}");
            }
            if let Some(key) = Efficiencies::calibration_entry(g, era) {
                assert!(!key.contains('+'), "{g:?} {era:?} -> {key}");
            }
        }
    }
}

#[test]
fn lookup_layers_the_release_line_over_the_generation() {
    let mut t: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let one = |f: &str, v: f64| BTreeMap::from([(f.to_string(), v)]);
    t.insert("hopper@vllm-0.11".into(), one("gemm_bf16", 0.3));
    // Only the old era: the new era falls back to it, and says which key it used.
    let (k, m) = lookup_calibration(&t, Generation::Hopper, EngineEra::Vllm015).unwrap();
    assert_eq!((k.as_str(), m["gemm_bf16"]), ("hopper@vllm-0.11", 0.3));
    // A plain generation entry (a `--shared-kernels` fit) lies under the release line's.
    let mut gen = one("gemm_bf16", 0.5);
    gen.insert("hbm_weights".into(), 0.8);
    t.insert("hopper".into(), gen);
    let (k, m) = lookup_calibration(&t, Generation::Hopper, EngineEra::Vllm015).unwrap();
    assert_eq!(k, "hopper + hopper@vllm-0.11");
    assert_eq!((m["gemm_bf16"], m["hbm_weights"]), (0.3, 0.8));
    t.insert(
        "hopper@vllm-0.15".into(),
        one("step_overhead_graph_s", 1e-3),
    );
    let (k, m) = lookup_calibration(&t, Generation::Hopper, EngineEra::Vllm015).unwrap();
    assert_eq!(k, "hopper + hopper@vllm-0.15");
    assert_eq!(
        (m["gemm_bf16"], m["hbm_weights"], m["step_overhead_graph_s"]),
        (0.5, 0.8, 1e-3)
    );
    t.remove("hopper@vllm-0.11");
    t.remove("hopper@vllm-0.15");
    let (k, m) = lookup_calibration(&t, Generation::Hopper, EngineEra::Vllm011).unwrap();
    assert_eq!((k.as_str(), m.len()), ("hopper", 2));
    assert!(lookup_calibration(&t, Generation::Ampere, EngineEra::Vllm015).is_none());
}

#[test]
fn vllm_versions_map_to_their_release_line() {
    let era = |s: &str| EngineEra::of_version(VllmVersion::parse(s).unwrap());
    assert_eq!(era("0.6.3"), EngineEra::Vllm07);
    assert_eq!(era("0.7.3"), EngineEra::Vllm07);
    assert_eq!(era("0.8.0"), EngineEra::Vllm011);
    assert_eq!(era("0.10.2"), EngineEra::Vllm011);
    assert_eq!(era("v0.11.0"), EngineEra::Vllm011);
    assert_eq!(era("0.13"), EngineEra::Vllm011);
    assert_eq!(era("0.14.0"), EngineEra::Vllm015);
    assert_eq!(era("0.15.1"), EngineEra::Vllm015);
    assert_eq!(era("0.20.2rc1"), EngineEra::Vllm015);
    assert_eq!(era("1.0.0"), EngineEra::Vllm015);
    for bad in ["", "eleven", "0", "0.x", "0.11a.0", ".11"] {
        assert!(
            VllmVersion::parse(bad).is_err(),
            "{bad:?} should be refused"
        );
    }
}

#[test]
fn generations_without_measured_runs_keep_the_literature_table_and_say_so() {
    for g in [
        Generation::Cdna4,
        Generation::BlackwellUltra,
        Generation::BlackwellRtx,
    ] {
        for era in EngineEra::ALL {
            assert_eq!(
                Efficiencies::calibrated_for(g, era),
                Efficiencies::default_for(g)
            );
            match Efficiencies::calibrated_basis(g, era) {
                EfficiencyBasis::Literature { note } => assert!(note.contains("not calibrated")),
                b => panic!("{g:?}: expected literature, got {b:?}"),
            }
        }
    }
}

#[test]
fn scenarios_resolve_with_the_calibrated_table_of_their_vllm_version() {
    let mut s = Scenario::default_scenario(); // H100 (Hopper), no version: newest era
    let r = s.resolve().unwrap();
    assert_eq!(
        *r.cost.efficiencies(),
        Efficiencies::calibrated_for(Generation::Hopper, EngineEra::Vllm015)
    );
    assert_ne!(
        *r.cost.efficiencies(),
        Efficiencies::default_for(Generation::Hopper)
    );
    s.vllm_version = Some("0.11.0".into());
    let r = s.resolve().unwrap();
    assert_eq!(
        *r.cost.efficiencies(),
        Efficiencies::calibrated_for(Generation::Hopper, EngineEra::Vllm011)
    );
    // The field survives the JSON round trip; a bad version names the field and the fix.
    let back = Scenario::from_json(&s.to_json()).unwrap();
    assert_eq!(back.vllm_version.as_deref(), Some("0.11.0"));
    s.vllm_version = Some("latest".into());
    let e = s.resolve().unwrap_err().to_string();
    assert!(e.contains("vllm_version") && e.contains("0.15.1"), "{e}");
}

#[test]
fn resolved_scenarios_report_which_calibration_they_run_with() {
    let mut s = Scenario::default_scenario(); // H100
    let c = s.resolve().unwrap().calibration;
    assert_eq!(
        (c.generation.as_str(), c.era.as_str(), c.basis.as_str()),
        ("hopper", "vllm-0.15", "calibrated")
    );
    assert_eq!(c.fit.as_deref(), Some("hopper@vllm-0.15"));
    assert!(c.overridden.is_empty());
    assert!(c.summary.contains("hopper@vllm-0.15"), "{}", c.summary);

    // A100 at a new vLLM: no fit for that line, the nearest (older) one is used and named.
    s.gpu = servesim_core::scenario::GpuRef::Catalog("A100-80GB".into());
    let c = s.resolve().unwrap().calibration;
    assert_eq!(c.fit.as_deref(), Some("ampere@vllm-0.11"));
    assert!(c.summary.contains("nearest"), "{}", c.summary);

    // An L40S is Ada, fitted on the RTX 4090 runs (vLLM 0.9 / 0.10): the nearest line is used.
    s.gpu = servesim_core::scenario::GpuRef::Catalog("L40S".into());
    let c = s.resolve().unwrap().calibration;
    assert_eq!(c.fit.as_deref(), Some("ada@vllm-0.11"));
    assert!(c.summary.contains("nearest"), "{}", c.summary);

    // A generation without measured runs: the literature table, said so.
    s.gpu = servesim_core::scenario::GpuRef::Catalog("MI355X".into());
    let c = s.resolve().unwrap().calibration;
    assert_eq!((c.basis.as_str(), c.fit.as_deref()), ("literature", None));
    assert!(c.summary.contains("literature"), "{}", c.summary);

    // Scenario overrides are listed.
    s.gpu = servesim_core::scenario::GpuRef::Catalog("H100-SXM".into());
    s.efficiencies = Some(serde_json::from_str(r#"{"gemm_bf16": 0.5, "hbm_kv": 0.7}"#).unwrap());
    let c = s.resolve().unwrap().calibration;
    assert_eq!(c.overridden, ["gemm_bf16", "hbm_kv"]);
    assert!(
        c.summary.contains("2 field(s) set by the scenario"),
        "{}",
        c.summary
    );
}

/// Where the calibrated table prices fp8 GEMMs at no more FLOP/s than bf16 ones and the deployment
/// runs fp8 GEMMs, the calibration line says so (docs/accuracy.md "Misses" 9); a bf16 deployment,
/// a table that keeps fp8 ahead, and a GPU without fp8 tensor cores get no such note.
#[test]
fn an_fp8_deployment_is_told_when_its_table_prices_fp8_no_faster_than_bf16() {
    let with = |patch: serde_json::Value| -> String {
        let mut v: serde_json::Value =
            serde_json::from_str(&Scenario::default_scenario().to_json()).unwrap();
        for (k, x) in patch.as_object().unwrap() {
            v[k] = x.clone();
        }
        Scenario::from_json(&v.to_string())
            .unwrap()
            .resolve()
            .unwrap()
            .calibration
            .summary
    };
    let note = "fp8 GEMMs at";
    let cal = Efficiencies::calibrated_for(Generation::Hopper, EngineEra::Vllm015);
    assert!(
        cal.gemm_fp8 * 2.0 <= cal.gemm_bf16 * 1.01,
        "the shipped hopper@vllm-0.15 table prices fp8 no faster than bf16: {} / {}",
        cal.gemm_fp8,
        cal.gemm_bf16
    );
    let fp8 = with(serde_json::json!({ "weight_precision": "fp8" }));
    assert!(fp8.contains(note) && fp8.contains("Misses"), "{fp8}");
    let bf16 = with(serde_json::json!({}));
    assert!(!bf16.contains(note), "{bf16}");
    let fixed = with(serde_json::json!({
        "weight_precision": "fp8",
        "efficiencies": { "gemm_fp8": 0.65 }
    }));
    assert!(!fixed.contains(note), "{fixed}");
    let a100 = with(serde_json::json!({
        "weight_precision": "fp8",
        "gpu": { "catalog": "A100-80GB" }
    }));
    assert!(!a100.contains(note), "{a100}");
}
