//! `servesim capacity` / `sweep` take vLLM's own spellings (the core's argument registry) and a
//! pasted `vllm serve` command. Commands are the public recipes of `vllm-project/recipes`
//! (snapshot 8959cf6, `DeepSeek/DeepSeek-V3.md`: DeepSeek-R1-0528 on 8x H200 with TP8 + EP and
//! DP8 + EP), as in `servesim-core`'s `vllm/recipe_tests.rs`.

mod common;

use common::servesim;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = servesim(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

const LLAMA: [&str; 5] = [
    "capacity",
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpu",
    "NVIDIA H100 80GB HBM3",
];

#[test]
fn every_spelling_of_tensor_parallel_size_gives_the_same_report() {
    let mut reports = Vec::new();
    for tp in [
        &["--tensor-parallel-size", "2"][..],
        &["--tensor-parallel-size=2"],
        &["-tp", "2"],
        &["--tp", "2"],
        &["--tensor_parallel_size", "2"],
    ] {
        let mut a: Vec<&str> = LLAMA.to_vec();
        a.extend(tp);
        a.push("--json");
        let v = json(&a);
        assert_eq!(v["par"]["tp"], 2, "{tp:?}");
        reports.push(v);
    }
    assert!(reports.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn vllm_engine_flags_set_the_engine() {
    let mut a: Vec<&str> = LLAMA.to_vec();
    a.extend([
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "8k",
        "--max-model-len",
        "32K",
        "--gpu-memory-utilization",
        "0.85",
        "--quantization",
        "fp8",
        "--json",
    ]);
    let v = json(&a);
    assert_eq!(v["max_num_seqs"], 64);
    assert_eq!(v["max_num_batched_tokens"], 8000);
    assert_eq!(v["max_model_len"], 32768);
    assert_eq!(v["gpu_memory_utilization"], 0.85);
    // --quantization fp8 on a bf16 checkpoint: fp8 weights (~8 GB instead of ~16 GB)
    let w = v["breakdown"]["weights"]["gib"].as_f64().unwrap();
    assert!(w < 10.0, "weights {w} GiB");
}

#[test]
fn the_recipes_dp8_ep_command_line_runs_as_flags_and_as_a_pasted_command() {
    let flags = json(&[
        "capacity",
        "--model",
        "deepseek-ai/DeepSeek-R1-0528",
        "--gpu",
        "NVIDIA H200",
        "--trust-remote-code",
        "--data-parallel-size",
        "8",
        "--enable-expert-parallel",
        "--json",
    ]);
    assert_eq!(
        (
            flags["par"]["tp"].as_u64(),
            flags["par"]["dp"].as_u64(),
            flags["par"]["ep"].as_u64()
        ),
        (Some(1), Some(8), Some(8))
    );
    let pasted = json(&[
        "capacity",
        "--vllm-command",
        "vllm serve deepseek-ai/DeepSeek-R1-0528 \\\n  --trust-remote-code \\\n  --data-parallel-size 8 \\\n  --enable-expert-parallel",
        "--gpu",
        "NVIDIA H200",
        "--json",
    ]);
    assert_eq!(flags, pasted);
}

#[test]
fn arguments_that_change_nothing_are_listed_not_refused() {
    let mut a: Vec<&str> = LLAMA.to_vec();
    a.extend(["--swap-space", "16", "--disable-log-requests", "--json"]);
    let (code, _, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note: --swap-space 16: ignored"), "{err}");
    assert!(
        err.contains("note: --disable-log-requests: ignored"),
        "{err}"
    );
}

#[test]
fn pipeline_parallelism_is_refused_with_the_fix() {
    let mut a: Vec<&str> = LLAMA.to_vec();
    a.extend(["--pipeline-parallel-size", "2"]);
    let (code, _, err) = servesim(&a);
    assert_eq!(code, 1);
    assert!(err.contains("--pipeline-parallel-size 2"), "{err}");
    assert!(err.contains("not modelled"), "{err}");
}

#[test]
fn sweep_carries_speculative_config_into_the_scenario() {
    let (code, out, err) = servesim(&[
        "sweep",
        "--model",
        "deepseek-ai/DeepSeek-V4-Flash",
        "--gpu",
        "H200",
        "-tp",
        "8",
        "--speculative-config",
        r#"{"method": "mtp", "num_speculative_tokens": 3}"#,
        "--speculative-acceptance",
        r#"{"accepted_values": [2, 3], "mean_acceptance_length": 3.51}"#,
        "--print-scenario",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tp"], 8);
    assert_eq!(v["engine"]["speculative_config"]["method"], "mtp");
    assert_eq!(
        v["engine"]["speculative_config"]["num_speculative_tokens"],
        3
    );
    assert!(v["engine"]["speculative_acceptance"].is_object(), "{v}");
}

#[test]
fn a_pasted_command_without_a_gpu_asks_for_one() {
    let (code, _, err) = servesim(&[
        "capacity",
        "--vllm-command",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--gpu"), "{err}");
}

#[test]
fn help_lists_vllm_arguments_from_the_registry() {
    let (code, out, err) = servesim(&["capacity", "--help"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("--tensor-parallel-size, -tp, --tp V"), "{out}");
    assert!(out.contains("--enable-expert-parallel"), "{out}");
}
