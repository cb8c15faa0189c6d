//! `servesim compare` (simulate at the measured levels, score) and `servesim validate`
//! (calibration CSV), end to end through the binary. Fixtures: crates/servesim-core/tests/data/imports/
//! (provenance in its README) and the shipped calibration CSV.

use std::path::PathBuf;

mod common;

use common::servesim;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../servesim-core/tests/data/imports")
        .join(name)
        .display()
        .to_string()
}

fn calibration() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../servesim-core/data/calibration/measured-points.csv")
        .display()
        .to_string()
}

const DEPLOY: [&str; 8] = [
    "--model",
    "meta-llama/Meta-Llama-3.1-8B",
    "--gpu",
    "H100",
    "--isl",
    "1024",
    "--osl",
    "1024",
];

#[test]
fn compare_scores_vllm_jsons_at_their_concurrency_levels() {
    let (c8, c16) = (fixture("vllm_c8.json"), fixture("vllm_c16.json"));
    let mut args = vec!["compare"];
    args.extend(DEPLOY);
    args.extend([
        "--num-requests",
        "40",
        "--measured",
        &c8,
        "--measured",
        &c16,
        "--json",
    ]);
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let arm = &v["arms"][0];
    assert_eq!(arm["level_kind"], "Concurrency");
    assert_eq!(arm["scored_levels"], serde_json::json!([8.0, 16.0]));
    // Every scored metric has one point per level, and its signed error is 100 (p/m - 1).
    let metrics = arm["metrics"].as_array().unwrap();
    assert!(metrics.iter().any(|m| m["metric"] == "OutputTokensPerS"));
    for m in metrics {
        for p in m["points"].as_array().unwrap() {
            let (pr, me) = (
                p["predicted"].as_f64().unwrap(),
                p["measured"].as_f64().unwrap(),
            );
            let e = p["signed_error_pct"].as_f64().unwrap();
            assert!((e - 100.0 * (pr / me - 1.0)).abs() < 1e-9);
        }
    }
    // Unused vLLM fields are reported, not dropped silently.
    assert!(err.contains("total_token_throughput"), "{err}");
}

#[test]
fn compare_markdown_has_the_report_shape_and_kv_ratio() {
    let (c8, log) = (fixture("vllm_c8.json"), fixture("vllm_startup.log"));
    let mut args = vec!["compare"];
    args.extend(DEPLOY);
    args.extend([
        "--num-requests",
        "20",
        "--measured",
        &c8,
        "--kv-log",
        &log,
        "--arm",
        "h100-tp1",
        "--markdown",
    ]);
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("### h100-tp1"), "{out}");
    assert!(out.contains("| arm | metric | signed mean | MAPE % | shape error % | sign |"));
    assert!(out.contains("Scored levels: c8."));
    // The log's KV size is used: the KV table has a ratio, not "not logged".
    let kv = out.split("## KV pool").nth(1).unwrap();
    assert!(!kv.contains("not logged"), "{kv}");
    // The arm quotes the calibration runs behind its predictions: the sentence `servesim sweep`
    // prints for the same deployment (the line after its calibration line).
    let mut sweep = vec!["sweep"];
    sweep.extend(DEPLOY);
    sweep.extend(["--concurrency", "1", "--num-requests", "4"]);
    let (code, sweep_out, err) = servesim(&sweep);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("measured evidence: "))
        .unwrap_or_else(|| panic!("no evidence line: {out}"));
    assert!(
        sweep_out.lines().any(|l| l == line),
        "{line}\nnot in\n{sweep_out}"
    );
    assert!(line.contains("hopper@vllm-0.15"), "{line}");
}

#[test]
fn compare_exclude_and_csv() {
    let t = fixture("table_report.md");
    let mut args = vec!["compare"];
    args.extend(DEPLOY);
    args.extend([
        "--num-requests",
        "32",
        "--measured",
        &t,
        "--exclude",
        "16:warm-up run",
        "--csv",
    ]);
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "arm,metric,level_kind,level,level_label,predicted,measured,signed_error_pct"
    );
    let rows: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    assert!(!rows.is_empty());
    // Level 16 is excluded, so every scored row is c8.
    assert!(rows.iter().all(|r| r.contains(",c8,")), "{out}");
    let (code, _, err) = servesim(&[
        "compare",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "H100",
        "--measured",
        &t,
        "--exclude",
        "999:nope",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("no measured level 999"), "{err}");
    let (code, _, err) = servesim(&[
        "compare",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "H100",
        "--measured",
        &t,
        "--exclude",
        "16",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("LEVEL:REASON"), "{err}");
}

#[test]
fn compare_burst_export_runs_one_burst_per_level() {
    let b = fixture("vllm_burst.json");
    let mut args = vec!["compare"];
    args.extend(DEPLOY);
    args.extend(["--measured", &b, "--json"]);
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["arms"][0]["level_kind"], "Burst");
    assert_eq!(v["arms"][0]["scored_levels"].as_array().unwrap().len(), 1);
}

#[test]
fn validate_reports_per_point_and_aggregates_for_one_source() {
    let csv = calibration();
    let (code, out, err) = servesim(&["validate", &csv, "--only", "inference-sim", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 20);
    let aggs = v["aggregates"].as_array().unwrap();
    assert!(aggs
        .iter()
        .any(|a| a["scope"] == "all points" && a["family"] == "InterToken"));
    let (code, out, _) = servesim(&["validate", &csv, "--only", "gpustack"]);
    assert_eq!(code, 0);
    assert!(out.contains("| scope | metric | n | median abs error |"));
    let (code, _, err) = servesim(&["validate", &csv, "--only", "nosuchsource"]);
    assert_ne!(code, 0);
    assert!(err.contains("nosuchsource"), "{err}");
}

#[test]
fn validate_never_fits_on_the_validation_set() {
    let holdout = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../servesim-core/data/validation/measured-points-validation.csv")
        .display()
        .to_string();
    let out_dir = std::env::temp_dir().join(format!("servesim-holdout-{}", std::process::id()));
    let fit_out = out_dir.join("efficiencies.json").display().to_string();
    let summary_out = out_dir.join("summary.json").display().to_string();
    // Alone or combined with the calibration CSV, --fit and --write-summary refuse it before
    // reading anything, and write nothing.
    for args in [
        vec!["validate", &holdout, "--fit", "--fit-out", &fit_out],
        vec![
            "validate",
            &calibration(),
            &holdout,
            "--fit",
            "--fit-out",
            &fit_out,
        ],
        vec![
            "validate",
            &holdout,
            "--write-summary",
            "--summary-out",
            &summary_out,
        ],
    ] {
        let (code, _, err) = servesim(&args);
        assert_ne!(code, 0, "{args:?} must fail");
        assert!(err.contains("validation set, which no fit reads"), "{err}");
        assert!(err.contains("Fix:"), "{err}");
    }
    assert!(!out_dir.exists(), "nothing may be written");
    // Validating it (no fit) works.
    let (code, out, err) = servesim(&["validate", &holdout, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"points\""), "{out}");
}
