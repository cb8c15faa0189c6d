//! The fit's objective (`validate::objective`): every source weighs the same, and within a source
//! every model it measures weighs the same, whatever their row counts and families; within a cell
//! (source, model) each metric family measured weighs the same.

use servesim_core::validate::{objective, Family, MetricComparison, PointResult, ValidationReport};

fn point(line: usize, source: &str, model: &str, family: &str, tok_s_err: f64) -> PointResult {
    PointResult {
        line,
        source: source.into(),
        model: model.into(),
        gpu: "H100-SXM-80GB".into(),
        tp: 1,
        model_family: family.into(),
        calibration_key: Some("hopper@vllm-0.15".into()),
        workload: "w".into(),
        comparisons: vec![MetricComparison {
            family: Family::Throughput,
            metric: "output_tokens_per_s".into(),
            measured: 100.0,
            predicted: Some(100.0 + tok_s_err),
            signed_error_pct: Some(tok_s_err),
            excluded: None,
        }],
        notes: vec![],
        error: None,
        waits_for: None,
        prompt_tokens: None,
    }
}

fn report(points: Vec<PointResult>) -> ValidationReport {
    ValidationReport {
        points,
        aggregates: vec![],
        excluded: vec![],
        efficiencies: "test".into(),
    }
}

#[test]
fn a_model_weighs_the_same_within_its_source_whatever_its_row_count() {
    // Source A: nine rows of model m1 at 10 % and one of m2 at 50 %: (10 + 50) / 2 = 30.
    let mut pts: Vec<PointResult> = (0..9).map(|i| point(i, "A", "m1", "MoE", 10.0)).collect();
    pts.push(point(9, "A", "m2", "dense", -50.0));
    let one_source = objective(&report(pts.clone()));
    assert!((one_source - 30.0).abs() < 1e-9, "{one_source}");

    // Source B, one model at 20 %, weighs as much as all of A: (30 + 20) / 2 = 25.
    pts.push(point(10, "B", "m1", "dense", 20.0));
    let two_sources = objective(&report(pts));
    assert!((two_sources - 25.0).abs() < 1e-9, "{two_sources}");
}

#[test]
fn models_of_one_family_each_weigh_one_model() {
    // Source A: three MoE models at 10, 20 and 30 % (one row each) and one dense model at 60 %:
    // (10 + 20 + 30 + 60) / 4 = 30, where cells by family would give (median 20 + 60) / 2 = 40.
    let pts = vec![
        point(0, "A", "moe-a", "MoE", 10.0),
        point(1, "A", "moe-b", "MoE", -20.0),
        point(2, "A", "moe-c", "MoE", 30.0),
        point(3, "A", "dense-a", "dense", 60.0),
    ];
    let o = objective(&report(pts));
    assert!((o - 30.0).abs() < 1e-9, "{o}");

    // Rows of one model pool into one median: m1 at 10, 10 and 40 % is 10; with m2 at 50 %, 30.
    let pts = vec![
        point(0, "A", "m1", "MoE", 10.0),
        point(1, "A", "m1", "MoE", -10.0),
        point(2, "A", "m1", "MoE", 40.0),
        point(3, "A", "m2", "MoE", 50.0),
    ];
    let o = objective(&report(pts));
    assert!((o - 30.0).abs() < 1e-9, "{o}");
}

#[test]
fn metric_families_weigh_the_same_within_a_cell() {
    let mut p = point(0, "A", "m", "MoE", 10.0);
    p.comparisons.push(MetricComparison {
        family: Family::Ttft,
        metric: "ttft_ms_p50".into(),
        measured: 100.0,
        predicted: Some(170.0),
        signed_error_pct: Some(70.0),
        excluded: None,
    });
    // An excluded comparison counts nowhere.
    p.comparisons.push(MetricComparison {
        family: Family::InterToken,
        metric: "tpot_ms_mean".into(),
        measured: 10.0,
        predicted: Some(100.0),
        signed_error_pct: Some(900.0),
        excluded: Some("source caveat".into()),
    });
    let o = objective(&report(vec![p]));
    assert!((o - 40.0).abs() < 1e-9, "{o}");
}
