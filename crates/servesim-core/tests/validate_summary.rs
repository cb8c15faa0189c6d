//! The accuracy summary the page shows (data/calibration/accuracy-summary.json) must match a fresh
//! validation run with the shipped table. Regenerate the in-sample figures with
//! `UPDATE_GOLDEN=1 cargo test -p servesim-core --test validate_summary` or
//! `servesim validate <csv> --write-summary`; `servesim validate <csv> --fit` rewrites all figures
//! (including the held-out ones, which need one fit per source and per model family).

use servesim_core::validate::{self, AccuracySummary, Family, ValidateOptions};

const CSV_A: &str = include_str!("../data/calibration/measured-points.csv");
const CSV_B: &str = include_str!("../data/calibration/measured-points-more.csv");
/// The validation set (never fitted): its cells ride in the summary.
const CSV_VALIDATION: &str = include_str!("../data/validation/measured-points-validation.csv");

fn combined() -> String {
    validate::combine_csvs(&[CSV_A, CSV_B]).unwrap()
}

#[test]
fn committed_summary_matches_a_fresh_validation_run() {
    let r = validate::run(&combined(), &ValidateOptions::default()).unwrap();
    let shipped = validate::accuracy_summary();
    let table = validate::fitted_efficiencies().unwrap();
    let v = validate::run(
        &validate::combine_csvs(&[CSV_VALIDATION]).unwrap(),
        &ValidateOptions::default(),
    )
    .unwrap();
    let fresh = AccuracySummary::from_report(&r, &shipped.held_out_aggregates())
        .with_validation(&v, &table);
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

/// The per-(calibration key, model family) cells a scenario is quoted (`evidence`) partition the
/// scored rows: per metric their runs add up to the metric's, each cell names a known family and
/// a key of the shipped table, and each has its held-out figure from the family's fold.
#[test]
fn evidence_cells_partition_the_scored_rows_and_carry_held_out_figures() {
    let s = validate::accuracy_summary();
    assert!(!s.evidence.is_empty());
    let table = validate::fitted_efficiencies().unwrap();
    for m in &s.metrics {
        let cells: Vec<_> = s.evidence.iter().filter(|c| c.metric == m.metric).collect();
        let n: usize = cells.iter().map(|c| c.n).sum();
        assert_eq!(
            n, m.n,
            "{}: the cells' runs add up to the metric's",
            m.metric
        );
        for c in cells {
            assert!(
                validate::FAMILIES.contains(&c.model_family.as_str()),
                "{c:?}"
            );
            assert!(table.generations.contains_key(&c.key), "{c:?}");
            assert!(c.n > 0 && (1..=c.n).contains(&c.sources), "{c:?}");
            assert!(c.held_out_median_abs_pct.is_some(), "{c:?}");
            // Every key's runs have synthetic prompts whose lengths the cell quotes.
            match (c.prompt_tokens_min, c.prompt_tokens_max) {
                (Some(lo), Some(hi)) => assert!(0 < lo && lo <= hi, "{c:?}"),
                _ => panic!("no prompt range: {c:?}"),
            }
        }
    }
}

/// A scenario is quoted its own cell: the Llama-3.1-8B on one H100 with a current vLLM is a dense
/// model in `hopper@vllm-0.15`, and the line gives that cell's figures.
#[test]
fn a_scenario_is_quoted_the_cell_of_its_key_and_family() {
    let sc = servesim_core::scenario::Scenario::from_json(
        r#"{"version": 1, "model": {"catalog": "meta-llama/Llama-3.1-8B-Instruct"},
            "gpu": {"catalog": "H100-SXM"}, "num_gpus": 1, "tp": 1,
            "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
                         "requests": {"type": "synthetic", "input": {"type": "constant", "tokens": 512},
                         "output": {"type": "constant", "tokens": 128}}},
            "sweep": {"concurrency": [1]}}"#,
    )
    .unwrap();
    let e = sc.resolve().unwrap().evidence();
    assert!(!e.summary.contains("efficiency field"), "{}", e.summary);
    // A scenario that sets efficiency fields is told the runs did not test them.
    let mut tuned = sc.clone();
    tuned.efficiencies =
        Some(serde_json::from_str(r#"{"gemm_bf16": 0.5, "hbm_kv": 0.7}"#).unwrap());
    let t = tuned.resolve().unwrap().evidence();
    assert_eq!(t.cells, e.cells);
    assert!(
        t.summary.ends_with(
            "the scenario sets 2 efficiency field(s) itself, which these runs did not test"
        ),
        "{}",
        t.summary
    );
    let s = validate::accuracy_summary();
    let want: Vec<_> = s
        .evidence
        .iter()
        .filter(|c| c.key == "hopper@vllm-0.15" && c.model_family == "dense")
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(e.cells.len(), want.len());
    // The sentence gives the prompt lengths those runs cover (inference-sim's short prompts).
    let lo = want
        .iter()
        .filter_map(|c| c.prompt_tokens_min)
        .min()
        .unwrap();
    let hi = want
        .iter()
        .filter_map(|c| c.prompt_tokens_max)
        .max()
        .unwrap();
    assert!(hi < 4096, "{lo}-{hi}");
    assert!(
        e.summary
            .contains(&format!("(prompts of {lo} to {hi} tokens)")),
        "{}",
        e.summary
    );
    // Within those lengths (512 tokens is within 1.5x of the shortest) no extrapolation is
    // claimed; 32,000-token prompts are told they are one.
    assert!(!e.summary.contains("extrapolation"), "{}", e.summary);
    let mut long = sc.clone();
    long.workload.requests = servesim_core::workload::RawContent::Synthetic {
        input: servesim_core::workload::RawLengthDist::Constant { tokens: 32000.0 },
        output: servesim_core::workload::RawLengthDist::Constant { tokens: 128.0 },
        shared_prefix: None,
    };
    let l = long.resolve().unwrap().evidence();
    assert_eq!(l.cells, e.cells);
    assert!(
        l.summary.ends_with(&format!(
            "; this scenario's prompts (about 32000 tokens) lie outside those runs' {lo} to {hi}, so its prefill and first tokens are an extrapolation"
        )),
        "{}",
        l.summary
    );
    for c in &want {
        assert!(e.cells.contains(c));
        assert!(
            e.summary.contains(&format!(
                "{} {:.1} % ({} runs)",
                c.metric, c.median_abs_pct, c.n
            )),
            "{}",
            e.summary
        );
    }
}

/// A disaggregated deployment whose pools run on different GPU generations is quoted each pool's
/// evidence; with one key for both, one line.
#[test]
fn pools_on_different_keys_are_quoted_each() {
    let json = |prefill_gpu: &str| {
        format!(
            r#"{{"version": 2, "model": {{"catalog": "meta-llama/Llama-3.1-8B-Instruct"}},
                "gpu": {{"catalog": "B200"}}, "tp": 1,
                "topology": {{"prefill": {{"gpu": {{"catalog": "{prefill_gpu}"}}}}, "decode": {{}}}},
                "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
                             "requests": {{"type": "synthetic", "input": {{"type": "constant", "tokens": 512}},
                             "output": {{"type": "constant", "tokens": 128}}}}}},
                "sweep": {{"concurrency": [1]}}}}"#
        )
    };
    let mixed = servesim_core::scenario::Scenario::from_json(&json("H100-SXM"))
        .unwrap()
        .resolve()
        .unwrap()
        .evidence();
    assert!(
        mixed.summary.starts_with("decode pool: measured evidence: no public run of a dense model is fitted in blackwell@vllm-0.15"),
        "{}",
        mixed.summary
    );
    assert!(
        mixed
            .summary
            .contains("; prefill pool: measured evidence: dense models in hopper@vllm-0.15"),
        "{}",
        mixed.summary
    );
    let same = servesim_core::scenario::Scenario::from_json(&json("B200"))
        .unwrap()
        .resolve()
        .unwrap()
        .evidence();
    assert!(!same.summary.contains("pool"), "{}", same.summary);
}

/// The validation set's cells (runs no fit read) partition its simulated, scored rows that a
/// fitted entry predicts: each cell names an entry of the shipped table and carries no held-out
/// figure; the rows the literature table predicts (no entry for their GPU generation) are in none.
#[test]
fn validation_cells_partition_the_never_fitted_rows_by_the_entry_they_read() {
    let s = validate::accuracy_summary();
    let table = validate::fitted_efficiencies().unwrap();
    let v = validate::run(
        &validate::combine_csvs(&[CSV_VALIDATION]).unwrap(),
        &ValidateOptions::default(),
    )
    .unwrap();
    assert!(!s.validation.is_empty());
    for f in Family::ALL {
        let scored = |with_key: bool| {
            v.points
                .iter()
                .filter(|p| p.error.is_none())
                .filter(|p| validate::validation_key(p, &table).is_some() == with_key)
                .filter(|p| {
                    p.comparisons.iter().any(|c| {
                        c.family == f && c.excluded.is_none() && c.signed_error_pct.is_some()
                    })
                })
                .count()
        };
        let n: usize = s
            .validation
            .iter()
            .filter(|c| c.metric == f.name())
            .map(|c| c.n)
            .sum();
        assert_eq!(n, scored(true), "{f:?}");
    }
    for c in &s.validation {
        assert!(table.generations.contains_key(&c.key), "{c:?}");
        assert!(c.held_out_median_abs_pct.is_none(), "{c:?}");
        assert!(c.n > 0 && (1..=c.n).contains(&c.sources), "{c:?}");
    }
    // A row of an era without its own entry reads the nearest era's: gpt-oss-120b on 8 B200 under
    // a 0.10 build (line 14) is in the `blackwell@vllm-0.15` cell.
    let row = v.points.iter().find(|p| p.line == 14).unwrap();
    assert_eq!(row.calibration_key.as_deref(), Some("blackwell@vllm-0.11"));
    assert_eq!(
        validate::validation_key(row, &table).as_deref(),
        Some("blackwell@vllm-0.15")
    );
}

/// A scenario whose key and family have validation-set runs is quoted them after the fitted
/// runs: an MoE model on B200 with a current vLLM (fitted on MiniMax-M2.5 alone) is told what the
/// never-fitted B200 MoE runs measured, sign included.
#[test]
fn a_scenario_is_quoted_the_never_fitted_runs_of_its_key_and_family() {
    let sc = servesim_core::scenario::Scenario::from_json(
        r#"{"version": 1, "model": {"catalog": "openai/gpt-oss-120b"},
            "gpu": {"catalog": "B200"}, "num_gpus": 1, "tp": 1,
            "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
                         "requests": {"type": "synthetic", "input": {"type": "constant", "tokens": 1024},
                         "output": {"type": "constant", "tokens": 128}}},
            "sweep": {"concurrency": [1]}}"#,
    )
    .unwrap();
    let e = sc.resolve().unwrap().evidence();
    let s = validate::accuracy_summary();
    let want: Vec<_> = s
        .validation
        .iter()
        .filter(|c| c.key == "blackwell@vllm-0.15" && c.model_family == "MoE")
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(e.validation, want);
    assert!(
        !e.cells.is_empty(),
        "MiniMax-M2.5 runs are fitted in the key"
    );
    let runs = want.iter().map(|c| c.n).max().unwrap();
    assert!(
        e.summary.contains(&format!(
            "; {runs} run(s) of MoE models from {} source(s) that no fit read (the validation set) give median |error| ",
            want.iter().map(|c| c.sources).max().unwrap()
        )),
        "{}",
        e.summary
    );
    for c in &want {
        assert!(
            e.summary.contains(&format!(
                "{} {:.1} % (mean signed {:+.1} %)",
                c.metric, c.median_abs_pct, c.mean_signed_pct
            )),
            "{}",
            e.summary
        );
    }
    // A key and family with no validation-set run get no such clause.
    let dense = servesim_core::scenario::Scenario::from_json(
        &sc.to_json_pretty()
            .replace("openai/gpt-oss-120b", "meta-llama/Llama-3.1-8B-Instruct")
            .replace("\"B200\"", "\"H100-SXM\""),
    )
    .unwrap()
    .resolve()
    .unwrap()
    .evidence();
    assert!(dense.validation.is_empty());
    assert!(!dense.summary.contains("no fit read"), "{}", dense.summary);
}
