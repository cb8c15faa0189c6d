//! Scoring against hand-worked examples (expected values computed by hand in each test).

use servesim_core::compare::{
    score_all, score_arm, LevelKind, MeasuredLevel, MeasuredRun, PredictedSeries, ScoreError,
    ScoreOptions, SignPattern, SourceFormat,
};
use servesim_core::metric::{MetricId, Stat};
use std::collections::BTreeMap;

const TPUT: MetricId = MetricId::OutputTokensPerS;
const TTFT: MetricId = MetricId::TtftMs(Stat::P50);

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

fn measured(arm: &str, points: &[(f64, f64)]) -> MeasuredRun {
    MeasuredRun {
        arm: arm.into(),
        level_kind: LevelKind::Concurrency,
        levels: points
            .iter()
            .map(|(l, v)| MeasuredLevel {
                level: *l,
                metrics: BTreeMap::from([(TPUT, *v)]),
                excluded: None,
            })
            .collect(),
        kv_cache_tokens_logged: None,
        source_format: SourceFormat::Csv,
    }
}

fn predicted(points: &[(f64, f64)]) -> PredictedSeries {
    PredictedSeries {
        level_kind: LevelKind::Concurrency,
        points: points
            .iter()
            .map(|(l, v)| (*l, BTreeMap::from([(TPUT, *v)])))
            .collect(),
        kv_capacity_tokens: None,
        evidence: None,
    }
}

#[test]
fn uniform_ten_percent_overprediction_has_zero_shape_error() {
    let s = score_arm(
        &measured("a", &[(8.0, 100.0), (16.0, 200.0)]),
        &predicted(&[(8.0, 110.0), (16.0, 220.0)]),
        &ScoreOptions::default(),
    )
    .unwrap();
    let m = &s.metrics[0];
    close(m.points[0].signed_error_pct, 10.0);
    close(m.points[1].signed_error_pct, 10.0);
    close(m.signed_mean_pct, 10.0);
    close(m.mape_pct, 10.0);
    close(m.shape_error_pct.unwrap(), 0.0);
    assert_eq!(m.sign.describe("ServeSim"), "ServeSim high at every level");
}

#[test]
fn mixed_errors_give_signed_mean_mape_and_ratio_of_ratios_shape() {
    // e = [-10, +20]: signed mean 5, MAPE 15.
    // shape: (240/90) / (200/100) = 1.3333.. -> |133.33.. - 100| = 33.33..
    let s = score_arm(
        &measured("a", &[(8.0, 100.0), (16.0, 200.0)]),
        &predicted(&[(8.0, 90.0), (16.0, 240.0)]),
        &ScoreOptions::default(),
    )
    .unwrap();
    let m = &s.metrics[0];
    close(m.signed_mean_pct, 5.0);
    close(m.mape_pct, 15.0);
    close(m.shape_error_pct.unwrap(), 100.0 / 3.0);
    assert_eq!(m.sign.describe("ServeSim"), "mixed (1 high / 1 low)");
}

#[test]
fn shape_error_averages_over_all_levels_above_the_lowest() {
    // m = [100, 200, 400], p = [50, 150, 200]
    // level 2: (150/50)/(200/100) = 1.5 -> 50; level 3: (200/50)/(400/100) = 1.0 -> 0; mean 25.
    let s = score_arm(
        &measured("a", &[(1.0, 100.0), (2.0, 200.0), (4.0, 400.0)]),
        &predicted(&[(1.0, 50.0), (2.0, 150.0), (4.0, 200.0)]),
        &ScoreOptions::default(),
    )
    .unwrap();
    close(s.metrics[0].shape_error_pct.unwrap(), 25.0);
    // e = [-50, -25, -50] -> signed mean -41.66.., MAPE 41.66..
    close(s.metrics[0].signed_mean_pct, -125.0 / 3.0);
    assert_eq!(
        s.metrics[0].sign.describe("BLIS"),
        "BLIS low at every level"
    );
}

#[test]
fn single_scored_level_has_no_shape_error() {
    let s = score_arm(
        &measured("a", &[(8.0, 100.0)]),
        &predicted(&[(8.0, 120.0)]),
        &ScoreOptions::default(),
    )
    .unwrap();
    assert_eq!(s.metrics[0].shape_error_pct, None);
    let md = score_all(
        &[(measured("a", &[(8.0, 100.0)]), predicted(&[(8.0, 120.0)]))],
        &ScoreOptions::default(),
    )
    .unwrap()
    .to_markdown();
    assert!(
        md.contains("| a | output tok/s | +20.0% | 20.0 | n/a | ServeSim high at every level |")
    );
}

#[test]
fn sign_pattern_words_match_the_report() {
    let p = SignPattern {
        high: 5,
        low: 1,
        exact: 0,
    };
    assert_eq!(p.describe("BLIS"), "mixed (5 high / 1 low)");
    let p = SignPattern {
        high: 1,
        low: 5,
        exact: 0,
    };
    assert_eq!(p.describe("BLIS"), "mixed (1 high / 5 low)");
    let p = SignPattern {
        high: 6,
        low: 0,
        exact: 0,
    };
    assert_eq!(p.describe("BLIS"), "BLIS high at every level");
    let p = SignPattern {
        high: 0,
        low: 4,
        exact: 0,
    };
    assert_eq!(p.describe("ServeSim"), "ServeSim low at every level");
    let p = SignPattern {
        high: 2,
        low: 1,
        exact: 1,
    };
    assert_eq!(p.describe("ServeSim"), "mixed (2 high / 1 low / 1 exact)");
}

#[test]
fn excluded_and_unpredicted_levels_are_listed_with_reasons_and_not_scored() {
    let mut m = measured(
        "Agg-1r",
        &[
            (8.0, 100.0),
            (16.0, 200.0),
            (128.0, 300.0),
            (256.0, 300.0),
            (512.0, 300.0),
        ],
    );
    assert!(m.exclude(128.0, "CPU-tier hits"));
    assert!(m.exclude(256.0, "CPU-tier hits"));
    assert!(!m.exclude(1024.0, "no such level"));
    // 512 has no prediction; the 8 prediction is off by 1e-12 relative (matches).
    let p = predicted(&[
        (8.000000000008, 110.0),
        (16.0, 220.0),
        (128.0, 1.0),
        (256.0, 1.0),
    ]);
    let s = score_arm(&m, &p, &ScoreOptions::default()).unwrap();
    assert_eq!(s.scored_levels, vec![8.0, 16.0]);
    assert_eq!(
        s.levels_line(),
        "Scored levels: c8, c16. Excluded: c128, c256 (CPU-tier hits); c512 (no prediction at this level)."
    );
    // The excluded levels' wild predictions (1.0) do not enter the score.
    close(s.metrics[0].signed_mean_pct, 10.0);
}

#[test]
fn level_tolerance_is_relative_1e9() {
    let s = score_arm(
        &measured("a", &[(8.0, 100.0)]),
        &predicted(&[(8.0001, 110.0)]),
        &ScoreOptions::default(),
    )
    .unwrap();
    assert!(s.scored_levels.is_empty());
    assert!(s.metrics.is_empty());
}

#[test]
fn metric_missing_on_one_side_is_skipped_per_level_and_reported() {
    let mut m = measured("a", &[(8.0, 100.0), (16.0, 200.0)]);
    m.levels[0].metrics.insert(TTFT, 50.0);
    m.levels[1].metrics.insert(TTFT, 60.0);
    let mut p = predicted(&[(8.0, 110.0), (16.0, 220.0)]);
    p.points[0].1.insert(TTFT, 40.0); // no TTFT predicted at 16
    let s = score_arm(&m, &p, &ScoreOptions::default()).unwrap();
    let ttft = s.metrics.iter().find(|x| x.metric == TTFT).unwrap();
    assert_eq!(ttft.points.len(), 1);
    close(ttft.signed_mean_pct, -20.0);
    assert_eq!(
        ttft.skipped,
        vec![(16.0, servesim_core::compare::NO_PREDICTION.to_string())]
    );
}

#[test]
fn zero_measured_count_is_skipped_not_divided_by() {
    let mut m = measured("a", &[(8.0, 100.0)]);
    m.levels[0].metrics.insert(MetricId::Preemptions, 0.0);
    let mut p = predicted(&[(8.0, 100.0)]);
    p.points[0].1.insert(MetricId::Preemptions, 3.0);
    let s = score_arm(&m, &p, &ScoreOptions::default()).unwrap();
    assert!(s.metrics.iter().all(|x| x.metric != MetricId::Preemptions));
    assert_eq!(s.unscored_metrics.len(), 1);
    assert_eq!(s.unscored_metrics[0].0, MetricId::Preemptions);
    // exact prediction of throughput
    assert_eq!(
        s.metrics[0].sign.describe("ServeSim"),
        "ServeSim exact at every level"
    );
}

#[test]
fn kv_pool_ratio_is_predicted_over_logged() {
    let mut m = measured("TP4", &[(8.0, 100.0)]);
    m.kv_cache_tokens_logged = Some(200_000);
    let mut p = predicted(&[(8.0, 100.0)]);
    p.kv_capacity_tokens = Some(314_000);
    let r = score_all(
        &[
            (m, p),
            (measured("Agg", &[(8.0, 1.0)]), predicted(&[(8.0, 1.0)])),
        ],
        &ScoreOptions::default(),
    )
    .unwrap();
    close(r.arms[0].kv_pool_ratio.unwrap(), 1.57);
    let md = r.to_markdown();
    assert!(md.contains("| TP4 | 1.57 |"));
    assert!(md.contains("| Agg | not logged |"));
    assert!(md.contains("| arm | ServeSim / vLLM-logged |"));
}

#[test]
fn markdown_and_csv_exports_carry_the_scored_numbers() {
    let opts = ScoreOptions {
        simulator_name: "BLIS".into(),
    };
    let r = score_all(
        &[(
            measured("a,b", &[(8.0, 100.0), (16.0, 200.0)]),
            predicted(&[(8.0, 110.0), (16.0, 220.0)]),
        )],
        &opts,
    )
    .unwrap();
    let md = r.to_markdown();
    assert!(md.contains("Signed error 100 * (BLIS / measured - 1)."));
    assert!(md.contains("| arm | metric | signed mean | MAPE % | shape error % | sign |"));
    assert!(md.contains("| a,b | output tok/s | +10.0% | 10.0 | 0.0 | BLIS high at every level |"));
    assert!(md.contains("Scored levels: c8, c16."));
    let csv = r.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "arm,metric,level_kind,level,level_label,predicted,measured,signed_error_pct"
    );
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with("\"a,b\",output_tokens_per_s,concurrency,8,c8,110,100,"));
    let err: f64 = lines[2].rsplit(',').next().unwrap().parse().unwrap();
    close(err, 10.0);
}

#[test]
fn level_kind_mismatch_is_an_error() {
    let mut p = predicted(&[(8.0, 1.0)]);
    p.level_kind = LevelKind::RequestRate;
    let e = score_arm(&measured("a", &[(8.0, 1.0)]), &p, &ScoreOptions::default()).unwrap_err();
    assert!(matches!(e, ScoreError::LevelKindMismatch { .. }));
    assert!(e.to_string().contains("Fix:"));
}

#[test]
fn duplicate_or_non_finite_predictions_are_errors() {
    let e = score_arm(
        &measured("a", &[(8.0, 1.0)]),
        &predicted(&[(8.0, 1.0), (8.0, 2.0)]),
        &ScoreOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, ScoreError::DuplicatePredictedLevel { .. }));
    let e = score_arm(
        &measured("a", &[(8.0, 1.0)]),
        &predicted(&[(8.0, f64::NAN)]),
        &ScoreOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, ScoreError::NonFinitePrediction { .. }));
}
