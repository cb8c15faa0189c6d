//! `servesim sweep|capacity --from-manifest FILE` (and `-` for stdin) reads public deployment
//! manifests (tests/manifests/, each cited there) with the same per-field notes on stderr as
//! `--vllm-command`; flags given beside it win.

mod common;

use common::servesim;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn manifest(name: &str) -> String {
    format!(
        "{}/../../tests/manifests/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn printed(args: &[&str]) -> (Value, String) {
    let (code, out, err) = servesim(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    (
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")),
        err,
    )
}

#[test]
fn llm_d_pd_values_fill_the_pools_and_list_every_field() {
    let f = manifest("llm-d-pd-disaggregation-values.yaml");
    let (v, err) = printed(&["sweep", "--from-manifest", &f, "--print-scenario"]);
    assert_eq!(v["model"]["catalog"], "openai/gpt-oss-120b");
    assert_eq!(v["gpu"]["catalog"], "H200");
    assert_eq!(v["tp"], 4);
    assert_eq!(v["topology"]["prefill"]["replicas"], 2);
    assert_eq!(v["topology"]["prefill"]["tp"], 1);
    assert_eq!(v["topology"]["decode"]["replicas"], 1);
    assert!(
        err.contains("note: --from-manifest: decode: --kv-events-config"),
        "{err}"
    );
    assert!(err.contains("unknown"), "{err}");
    assert!(err.contains("disaggregated: 2 prefill worker(s)"), "{err}");
}

#[test]
fn explicit_flags_win_over_the_manifest() {
    let f = manifest("llm-d-inference-scheduling-values.yaml");
    let (v, _) = printed(&[
        "sweep",
        "--from-manifest",
        &f,
        "--gpu",
        "H200",
        "--max-num-seqs",
        "64",
        "--replicas",
        "2",
        "--print-scenario",
    ]);
    assert_eq!(v["tp"], 2, "from the manifest");
    assert_eq!(
        v["engine"]["gpu_memory_utilization"], 0.95,
        "from the manifest"
    );
    assert_eq!(v["gpu"]["catalog"], "H200");
    assert_eq!(v["engine"]["max_num_seqs"], 64);
    assert_eq!(
        v["topology"]["replicas"], 2,
        "--replicas beats the manifest's 8"
    );
}

#[test]
fn stdin_and_capacity() {
    let text =
        std::fs::read_to_string(manifest("production-stack-values-02-basic-config.yaml")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args([
            "capacity",
            "--from-manifest",
            "-",
            "--gpu",
            "H100",
            "--json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["max_model_len"], 4096, "{v}");
    assert_eq!(v["gpu_memory_utilization"], 0.8, "{v}");
    // The chart's `enableChunkedPrefill: false` is modelled: vLLM raises the default budget
    // to max_model_len only when that is larger (4096 < H100's 8192 here).
    assert_eq!(v["max_num_batched_tokens"], 8192, "{v}");
    assert!(!err.contains("chunked-prefill: not modelled"), "{err}");
}

#[test]
fn refusals_and_bad_files_are_errors_naming_the_fix() {
    let (code, _, err) = servesim(&[
        "sweep",
        "--from-manifest",
        &manifest("dynamo-vllm-disagg.yaml"),
        "--print-scenario",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Qwen/Qwen3-0.6B") && err.contains("config.json"),
        "{err}"
    );
    let (code, _, err) = servesim(&[
        "sweep",
        "--from-manifest",
        &manifest("README.md"),
        "--print-scenario",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--from-manifest"), "{err}");
}
