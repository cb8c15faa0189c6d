//! The accuracy summary the page shows (data/calibration/accuracy-summary.json) must match a fresh
//! validation run with the shipped table. Regenerate the in-sample figures with
//! `UPDATE_GOLDEN=1 cargo test -p servesim-core --test validate_summary` or
//! `servesim validate <csv> --write-summary`; `servesim validate <csv> --fit` rewrites all figures
//! (including the held-out ones, which need one fit per source and per model family).

use servesim_core::validate::{self, AccuracySummary, Family, ValidateOptions};

const CSV_A: &str = include_str!("../data/calibration/measured-points.csv");
const CSV_B: &str = include_str!("../data/calibration/measured-points-more.csv");

fn combined() -> String {
    validate::combine_csvs(&[CSV_A, CSV_B]).unwrap()
}

#[test]
fn committed_summary_matches_a_fresh_validation_run() {
    let r = validate::run(&combined(), &ValidateOptions::default()).unwrap();
    let shipped = validate::accuracy_summary();
    let fresh = AccuracySummary::from_report(&r, &shipped.held_out_aggregates());
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/data/calibration/accuracy-summary.json"
        );
        std::fs::write(path, fresh.to_json()).unwrap();
        return;
    }
    assert_eq!(
        shipped, fresh,
        "data/calibration/accuracy-summary.json is stale; regenerate it (UPDATE_GOLDEN=1 or `servesim validate --write-summary`) and update docs/accuracy.md"
    );
}

#[test]
fn summary_covers_every_metric_with_held_out_figures() {
    let s = validate::accuracy_summary();
    assert_eq!(s.points, 63 + 614);
    let fams: Vec<Family> = s.metrics.iter().map(|m| m.family).collect();
    assert_eq!(fams, Family::ALL.to_vec());
    for m in &s.metrics {
        assert!(m.n > 0);
        assert_eq!(m.target_pct, m.family.target_pct());
        assert_eq!(m.met, m.median_abs_pct <= m.target_pct);
        assert!(m.held_out_source_median_abs_pct.is_some(), "{}", m.metric);
        assert!(m.held_out_family_median_abs_pct.is_some(), "{}", m.metric);
        assert_eq!(m.held_out_target_pct, Some(m.family.held_out_target_pct()));
    }
    // Every model family has in-sample and held-out figures for the metrics it measures.
    for fam in validate::FAMILIES {
        let rows: Vec<_> = s
            .families
            .iter()
            .filter(|f| f.model_family == *fam)
            .collect();
        assert!(!rows.is_empty(), "{fam}");
        for f in rows {
            assert!(f.n > 0 && f.held_out_median_abs_pct.is_some(), "{fam}");
        }
    }
}
