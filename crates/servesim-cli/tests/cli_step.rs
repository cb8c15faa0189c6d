//! `servesim step` (one step's breakdown), `servesim validate --scenario-of LINE` and
//! `servesim sweep --vllm-version`.

use std::path::PathBuf;

mod common;

use common::servesim;

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn points() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../servesim-core/data/calibration/measured-points.csv")
        .to_string_lossy()
        .into_owned()
}

fn small_scenario() -> PathBuf {
    scenario_with(&[])
}

/// Llama-3.1-8B on one H100 with the `servesim sweep` flags `extra`, written to a file.
fn scenario_with(extra: &[&str]) -> PathBuf {
    let mut args = vec!["--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "h100"];
    args.extend_from_slice(extra);
    scenario_file(&args)
}

/// The scenario `servesim sweep ARGS --print-scenario` prints, written to a file.
fn scenario_file(args: &[&str]) -> PathBuf {
    let mut sweep = vec!["sweep"];
    sweep.extend_from_slice(args);
    sweep.push("--print-scenario");
    let (code, out, err) = servesim(&sweep);
    assert_eq!(code, 0, "{err}");
    // One file per test thread and argument list: the tests run in parallel and would otherwise
    // race, and one test may hold several scenarios.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    args.hash(&mut h);
    let f = tmp(&format!(
        "step-scenario-{:x}-{:?}.json",
        h.finish(),
        std::thread::current().id()
    ));
    std::fs::write(&f, out).unwrap();
    f
}

fn total_ms(out: &str) -> f64 {
    let line = out.lines().find(|l| l.starts_with("total")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn step_breakdown_grows_with_the_batch_and_its_terms_sum_to_the_total() {
    let f = small_scenario();
    let f = f.to_str().unwrap();
    let (c1, small, e1) = servesim(&["step", "--scenario", f, "--decode", "8", "--ctx", "1000"]);
    assert_eq!(c1, 0, "{e1}");
    let (c2, big, e2) = servesim(&["step", "--scenario", f, "--decode", "256", "--ctx", "4000"]);
    assert_eq!(c2, 0, "{e2}");
    assert!(total_ms(&big) > total_ms(&small), "{small}\n{big}");
    let mixed = [
        "step",
        "--scenario",
        f,
        "--decode",
        "64",
        "--ctx",
        "2000",
        "--prefill",
        "1024:0",
        "--prefill",
        "512:4096",
    ];
    let (c3, json, e3) = servesim(&[&mixed[..], &["--json"]].concat());
    assert_eq!(c3, 0, "{e3}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let sum: f64 = [
        "gemm_compute",
        "attention_compute",
        "weight_reads",
        "kv_reads",
        "activations",
        "tp_allreduce",
        "ep_alltoall",
        "overhead",
    ]
    .iter()
    .map(|k| v[k].as_f64().unwrap())
    .sum();
    let (c4, text, e4) = servesim(&mixed);
    assert_eq!(c4, 0, "{e4}");
    assert!(sum > 0.0);
    assert!(
        (sum * 1e3 - total_ms(&text)).abs() < 1e-3,
        "terms {} ms vs total {} ms",
        sum * 1e3,
        total_ms(&text)
    );
    assert_eq!(v["work"]["tokens"], 64 + 1024 + 512);
}

#[test]
fn step_refuses_an_empty_step_and_bad_chunks_with_the_fix() {
    let f = small_scenario();
    let f = f.to_str().unwrap();
    let (code, _, err) = servesim(&["step", "--scenario", f]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--decode") && err.contains("--prefill"),
        "{err}"
    );
    let (code, _, err) = servesim(&["step", "--scenario", f, "--prefill", "8", "--ctx", "100"]);
    assert_eq!(code, 1);
    assert!(err.contains("give --decode N too"), "{err}");
    let (code, _, err) = servesim(&["step", "--scenario", f, "--prefill", "12:abc"]);
    assert_eq!(code, 1);
    assert!(err.contains("PAST must be a whole number"), "{err}");
}

#[test]
fn scenario_of_a_calibration_line_runs_as_a_sweep_with_the_rows_settings() {
    let (code, out, err) = servesim(&["validate", &points(), "--scenario-of", "10"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Line 10: Llama-2-7B on one H100 at a constant 20 req/s, vLLM 0.15.1, max_num_seqs 128.
    assert_eq!(v["model"]["catalog"], "meta-llama/Llama-2-7b-hf");
    assert_eq!(v["engine"]["max_num_seqs"], 128);
    assert_eq!(v["vllm_version"], "0.15.1");
    assert_eq!(v["sweep"]["request_rates"], serde_json::json!([20.0]));
    assert!(v["efficiencies"]["gemm_bf16"].as_f64().is_some());
    let f = tmp("line10.json");
    std::fs::write(&f, &out).unwrap();
    let (code, _, err) = servesim(&["sweep", "--scenario", f.to_str().unwrap(), "--csv"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = servesim(&["validate", &points(), "--scenario-of", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("lines 2..=64"), "{err}");
}

#[test]
fn vllm_version_flag_selects_the_release_lines_calibration() {
    let base = [
        "sweep",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "h100",
        "--concurrency",
        "16",
        "--duration",
        "20",
        "--warmup",
        "2",
        "--json",
    ];
    let run = |v: Option<&str>| {
        let mut a = base.to_vec();
        if let Some(v) = v {
            a.extend(["--vllm-version", v]);
        }
        let (code, out, err) = servesim(&a);
        assert_eq!(code, 0, "{err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        j["levels"][0]["itl_ms"]["mean"].as_f64().unwrap()
    };
    let newest = run(None);
    assert_eq!(run(Some("0.15.1")), newest);
    assert_ne!(run(Some("0.11.0")), newest);
    let (code, _, err) = servesim(&[
        "sweep",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "h100",
        "--vllm-version",
        "new",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--vllm-version new") && err.contains("0.15.1"),
        "{err}"
    );
}

fn seed(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/scenarios")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn step_of_a_dp_ep_scenario_shows_every_backend_and_the_lockstep_max() {
    let f = seed("agg-2r-dsv4-flash-h200-tp8-dp2-ll.json");
    let args = [
        "step",
        "--scenario",
        &f,
        "--decode",
        "64",
        "--ctx",
        "8000",
        "--rank",
        "128:4000",
    ];
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    for b in [
        "allgather_reducescatter",
        "deepep_high_throughput",
        "deepep_low_latency",
        "naive",
    ] {
        assert!(out.contains(b), "{out}");
    }
    assert!(
        out.contains("EP 16, 8 tokens per GPU, across nodes"),
        "{out}"
    );
    assert!(out.contains("<- this scenario"), "{out}");
    // The lockstep step is the larger of the two ranks' own steps.
    let rank_ms = |i: usize| -> f64 {
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("rank {i} ")))
            .unwrap_or_else(|| panic!("{out}"));
        l.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let step: f64 = out
        .lines()
        .find(|l| l.trim_start().starts_with("step ") && l.contains("max over"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(step, rank_ms(0).max(rank_ms(1)));
    assert!(
        rank_ms(1) > rank_ms(0),
        "128 sequences take longer than 64: {out}"
    );
    // JSON carries the same.
    let mut j = args.to_vec();
    j.push("--json");
    let (code, out, err) = servesim(&j);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["all2all"]["dispatch_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["lockstep"]["rank_step_s"].as_array().unwrap().len(), 2);
    // --rank on a deployment without lockstep is refused with the reason.
    let dense = small_scenario();
    let (code, _, err) = servesim(&[
        "step",
        "--scenario",
        dense.to_str().unwrap(),
        "--decode",
        "8",
        "--rank",
        "8",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("enable_expert_parallel"), "{err}");
}

/// A V0 scenario without chunked prefill (`--vllm-version 0.6.3 --no-enable-chunked-prefill`)
/// never mixes prompts and decodes: the breakdown adds the prompt step and the decode step, each
/// equal to its own breakdown, and a V1 scenario shows no such split.
#[test]
fn step_of_a_v0_scenario_without_chunked_prefill_splits_prompts_from_decodes() {
    let v0 = scenario_with(&[
        "--max-model-len",
        "8192",
        "--vllm-version",
        "0.6.3",
        "--no-enable-chunked-prefill",
    ]);
    let v0 = v0.to_str().unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["step", "--json"];
        a.extend_from_slice(args);
        let (code, out, err) = servesim(&a);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    // One step of 32 decodes at context 2,000 and a 4,000-token prompt.
    fn mixed_step(scenario: &str) -> [&str; 8] {
        [
            "--scenario",
            scenario,
            "--decode",
            "32",
            "--ctx",
            "2000",
            "--prefill",
            "4000",
        ]
    }
    let mixed = json(&mixed_step(v0));
    let prompts = json(&["--scenario", v0, "--prefill", "4000"]);
    let decodes = json(&["--scenario", v0, "--decode", "32", "--ctx", "2000"]);
    let split = &mixed["v0_prefill_first"];
    // The step's total is the sum of its time terms (`StepBreakdown::total`), in that order.
    let total = |v: &serde_json::Value| {
        [
            "gemm_compute",
            "attention_compute",
            "weight_reads",
            "kv_reads",
            "activations",
            "tp_allreduce",
            "ep_alltoall",
            "overhead",
            "moe_floor",
            "mla_floor",
        ]
        .iter()
        .map(|k| v[*k].as_f64().unwrap())
        .sum::<f64>()
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-9);
    assert!(
        close(split["prompt_step_s"].as_f64().unwrap(), total(&prompts)),
        "{split}"
    );
    assert!(
        close(split["decode_step_s"].as_f64().unwrap(), total(&decodes)),
        "{split}"
    );
    // Two steps cost more than the one mixed step V1 would run (one more fixed overhead).
    assert!(total(&prompts) + total(&decodes) > total(&mixed), "{mixed}");
    let mut text_args = vec!["step"];
    text_args.extend_from_slice(&mixed_step(v0));
    let (code, text, err) = servesim(&text_args);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("vLLM V0 without chunked prefill does not run this mixed step"),
        "{text}"
    );
    // V1 (the default version) mixes them: no split.
    let v1 = scenario_with(&["--max-model-len", "8192", "--no-enable-chunked-prefill"]);
    let v1_mixed = json(&mixed_step(v1.to_str().unwrap()));
    assert!(v1_mixed.get("v0_prefill_first").is_none(), "{v1_mixed}");
}

/// The milliseconds of the breakdown line starting with `name`, if it is printed.
fn line_ms(out: &str, name: &str) -> Option<f64> {
    out.lines()
        .find(|l| l.trim_start().starts_with(name))
        .map(|l| {
            l.trim_start()[name.len()..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
}

#[test]
fn step_prints_the_gated_deltanet_chunk_chain_for_hybrid_models_only() {
    // Qwen3.5-397B at TP 8 on H200: 45 Gated DeltaNet layers, FlashInfer's SM90 kernel at 2.9 us
    // per 64-token chunk of the longest sequence (docs/step-time.md §3).
    let f = scenario_file(&[
        "--model",
        "Qwen/Qwen3.5-397B-A17B",
        "--gpu",
        "H200",
        "--num-gpus",
        "8",
        "--tp",
        "8",
    ]);
    let f = f.to_str().unwrap();
    let (code, one, err) = servesim(&["step", "--scenario", f, "--prefill", "8192"]);
    assert_eq!(code, 0, "{err}");
    let chain = line_ms(&one, "gdn chunks").unwrap_or_else(|| panic!("{one}"));
    // At most the chain itself (45 x 128 x 2.9 us), less the FLOP time the attention term has.
    assert!(chain > 0.8 * 16.7 && chain < 16.71, "{chain}\n{one}");
    assert!(chain < total_ms(&one));
    // Two sequences of 4,096 tokens: their chains run side by side, about half.
    let (code, two, err) = servesim(&[
        "step",
        "--scenario",
        f,
        "--prefill",
        "4096",
        "--prefill",
        "4096",
    ]);
    assert_eq!(code, 0, "{err}");
    let half = line_ms(&two, "gdn chunks").unwrap_or_else(|| panic!("{two}"));
    assert!(half < 0.55 * chain, "{half} vs {chain}");
    // A model without Gated DeltaNet layers prints no such line.
    let llama = small_scenario();
    let (code, out, err) = servesim(&[
        "step",
        "--scenario",
        llama.to_str().unwrap(),
        "--prefill",
        "8192",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(line_ms(&out, "gdn chunks").is_none(), "{out}");
}
