//! The `servesim` binary: capacity --json, failing configurations, bad input, catalogs.

mod common;

use common::servesim;

#[test]
fn capacity_json_reports_tokens_breakdown_and_fit() {
    let (code, out, err) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "h100",
        "--tp",
        "1",
        "--max-model-len",
        "16000",
        "--block-size",
        "128",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], true);
    let tokens = v["kv_cache_tokens"].as_u64().unwrap();
    assert_eq!(tokens % 128, 0);
    // public log (llm-d, vLLM 0.11, H100): 51.38 GiB available
    let avail = v["breakdown"]["kv_available"]["gib"].as_f64().unwrap();
    assert!((avail - 51.38).abs() < 0.75, "{avail}");
    let b = &v["breakdown"];
    let sum = b["weights"]["bytes"].as_i64().unwrap()
        + b["activation"]["bytes"].as_i64().unwrap()
        + b["non_torch"]["bytes"].as_i64().unwrap()
        + b["kv_available"]["bytes"].as_i64().unwrap();
    assert_eq!(sum, b["budget"]["bytes"].as_i64().unwrap());
    let lines: Vec<String> = v["log_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert!(lines
        .iter()
        .any(|l| l.starts_with("GPU KV cache size: ") && l.ends_with(" tokens")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("Maximum concurrency for 16,000 tokens per request: ")));
}

#[test]
fn a_config_that_cannot_start_exits_zero_with_fits_false() {
    let (code, out, _) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-405B",
        "--gpu",
        "H100",
        "--tp",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fits"], false);
    assert_eq!(v["kv_cache_tokens"], 0);
    assert!(!v["fixes"].as_array().unwrap().is_empty());
}

#[test]
fn isl_osl_reports_requests_at_once() {
    let (code, out, _) = servesim(&[
        "capacity",
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "H200",
        "--max-model-len",
        "8192",
        "--isl",
        "2000",
        "--osl",
        "500",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = &v["requests_fit"];
    assert!(f["at_once"].as_u64().unwrap() <= v["max_num_seqs"].as_u64().unwrap());
    assert!(f["by_kv"].as_u64().unwrap() > 0);
}

#[test]
fn human_output_prints_gib_breakdown_and_log_lines() {
    let (code, out, _) = servesim(&["capacity", "--model", "openai/gpt-oss-20b", "--gpu", "B200"]);
    assert_eq!(code, 0);
    assert!(out.contains("available for KV"));
    assert!(out.contains("GPU KV cache size: "));
    assert!(out.contains("fits: true"));
}

#[test]
fn invalid_input_exits_nonzero_naming_the_problem() {
    let (code, _, err) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "V100",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("unknown GPU `V100`") && err.contains("H100-SXM"),
        "{err}"
    );
    let (code, _, err) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "H100",
        "--tp",
        "3",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("`tp` = 3"), "{err}");
    let (code, _, err) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "H100",
        "--gpu-memory-utilization",
        "NaN",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("gpu_memory_utilization"), "{err}");
}

#[test]
fn catalogs_list_gpus_and_models() {
    let (code, out, _) = servesim(&["gpus", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.as_array().unwrap().iter().any(|g| g["id"] == "MI300X"));
    let (code, out, _) = servesim(&["models"]);
    assert_eq!(code, 0);
    assert!(out.contains("deepseek-ai/DeepSeek-R1") && out.contains("MLA"));
    // The known releases follow, with the config each runs on.
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("MiniMaxAI/MiniMax-M2.5 "))
        .expect("MiniMax-M2.5 listed among the releases");
    assert!(line.ends_with("-> MiniMaxAI/MiniMax-M2.7"), "{line}");
    assert!(out.contains("moonshotai/Kimi-K2-Thinking"));
}

#[test]
fn model_from_config_json_path() {
    let dir = std::env::temp_dir().join(format!("servesim-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("MyModel")).unwrap();
    let p = dir.join("MyModel").join("config.json");
    std::fs::write(
        &p,
        servesim_core::model::catalog::config_json("Qwen/Qwen3-8B").unwrap(),
    )
    .unwrap();
    let (code, out, err) = servesim(&[
        "capacity",
        "--model",
        p.to_str().unwrap(),
        "--gpu",
        "H100",
        "--json",
    ]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["model"], "MyModel");
}
