//! `--kv-transfer-config` (vLLM's JSON) on the CLI: the CPU KV tier in the capacity report, the
//! sweep report equal to the core golden, the decode worker's stack of the deployment recipe
//! (SimpleCPUOffloadConnector stacked with NIXL via MultiConnector; /work/shared/seeds
//! deployment-recipe-notes.md, "Engine knobs that mattered"), and errors naming the field.

mod common;

use common::servesim;
use serde_json::Value;
use std::path::PathBuf;

const DSV4: [&str; 7] = [
    "capacity",
    "--model",
    "deepseek-ai/DeepSeek-V4-Flash",
    "--gpu",
    "H200",
    "-tp",
    "8",
];

fn golden(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden")
        .join(p)
}

#[test]
fn capacity_reports_the_cpu_tier_per_rank_and_node() {
    let mut a = DSV4.to_vec();
    a.extend([
        "--kv-transfer-config",
        r#"{"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"cpu_bytes_to_use": 107374182400, "blocks_per_chunk": 4}}"#,
        "--json",
    ]);
    let (code, out, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let t = &v["cpu_tier"];
    assert_eq!(t["connector"], "OffloadingConnector");
    assert_eq!(t["blocks_per_chunk"], 4);
    let chunks = t["chunks"].as_u64().unwrap();
    let chunk = t["chunk_bytes_per_rank"].as_u64().unwrap();
    // cpu_bytes_to_use is the engine's total over its 8 ranks.
    assert_eq!(chunks, 107_374_182_400 / (chunk * 8));
    assert_eq!(t["host_bytes_per_rank"].as_u64().unwrap(), chunks * chunk);
    assert_eq!(
        t["host_bytes_per_node"].as_u64().unwrap(),
        chunks * chunk * 8
    );
    assert_eq!(t["host_link"], "PCIe Gen5 x16");
    // The text report says it too.
    a.pop();
    let (code, out, _) = servesim(&a);
    assert_eq!(code, 0);
    assert!(out.contains("CPU KV tier (OffloadingConnector)"), "{out}");
}

#[test]
fn the_recipe_decode_worker_stack_parses() {
    let mut a = DSV4.to_vec();
    a.extend([
        "--kv-transfer-config",
        r#"{"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"}, {"kv_connector": "SimpleCPUOffloadConnector", "kv_role": "kv_both"}]}}"#,
        "--json",
    ]);
    let (code, out, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cpu_tier"]["connector"], "SimpleCPUOffloadConnector");
    // 8 GiB per rank by default.
    assert!(v["cpu_tier"]["host_bytes_per_rank"].as_u64().unwrap() <= 8 << 30);
}

#[test]
fn bad_kv_transfer_config_names_the_field() {
    for (json, field) in [
        (
            r#"{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes": 1}}"#,
            "cpu_bytes",
        ),
        (
            r#"{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 1e9, "blocks_per_chunk": 0}}"#,
            "blocks_per_chunk",
        ),
        (
            r#"{"kv_connector": "OffloadingConnector"}"#,
            "cpu_bytes_to_use",
        ),
        (r#"{"kv_connector": "Foo"}"#, "kv_connector"),
    ] {
        let mut a = DSV4.to_vec();
        a.extend(["--kv-transfer-config", json]);
        let (code, _, err) = servesim(&a);
        assert_eq!(code, 1, "{json}");
        assert!(err.contains(field), "{json}: {err}");
    }
}

#[test]
fn sweep_json_equals_the_core_golden_and_prints_the_tier() {
    let name = "dsv4flash_tp8_h200_mtp_cpu_offload";
    let file = golden(&format!("scenarios/{name}.json"));
    let (code, out, err) = servesim(&["sweep", "--scenario", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let want = std::fs::read_to_string(golden(&format!("scenario_{name}.json"))).unwrap();
    assert_eq!(out, want);
    let (code, out, err) = servesim(&["sweep", "--scenario", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("CPU KV offload tier"), "{out}");
}
