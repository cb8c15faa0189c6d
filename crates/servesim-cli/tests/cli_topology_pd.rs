//! `servesim sweep` disaggregated prefill/decode flags (`--prefill-*`, `--decode-*`, `--kv-*`):
//! they write `topology.prefill` / `.decode` / `.kv_transfer`, the same scenario a file gives
//! runs to the same bytes, the report carries per-pool and transfer results, the table prints
//! them, and bad values name the field.

mod common;

use common::servesim;

const BASE: &[&str] = &[
    "sweep",
    "--model",
    "meta-llama/Meta-Llama-3.1-8B",
    "--gpu",
    "h100",
    "--isl",
    "512",
    "--osl",
    "64",
    "--concurrency",
    "8,32",
    "--duration",
    "20",
    "--warmup",
    "2",
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = BASE.to_vec();
    v.extend_from_slice(extra);
    v
}

const PD: &[&str] = &[
    "--prefill-replicas",
    "2",
    "--prefill-max-num-batched-tokens",
    "16384",
    "--decode-replicas",
    "1",
    "--decode-max-num-seqs",
    "128",
    "--decode-router",
    "least-requests",
    "--kv-link-gbps",
    "200",
    "--kv-transfer-latency-ms",
    "0.1",
];

#[test]
fn pd_flags_write_the_pools() {
    let mut args = with(PD);
    args.push("--print-scenario");
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], 2);
    let t = &v["topology"];
    assert_eq!(t["prefill"]["replicas"], 2);
    assert_eq!(t["prefill"]["engine"]["max_num_batched_tokens"], 16384);
    assert_eq!(t["decode"]["replicas"], 1);
    assert_eq!(t["decode"]["engine"]["max_num_seqs"], 128);
    assert_eq!(t["decode"]["router"]["policy"], "least_requests");
    assert_eq!(t["kv_transfer"]["rdma_gbps_per_gpu"], 200.0);
    assert_eq!(t["kv_transfer"]["latency_ms"], 0.1);
}

#[test]
fn pd_report_has_pools_and_transfers_and_the_file_gives_the_same_bytes() {
    let mut args = with(PD);
    args.push("--json");
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let d = &v["disaggregated"];
    assert_eq!(d["prefill_capacity"]["max_num_batched_tokens"], 16384);
    assert_eq!(d["decode_capacity"]["max_num_seqs"], 128);
    assert_eq!(d["kv_transfer"]["rdma_bytes_s"], 25e9);
    for level in v["topology"].as_array().expect("per-level topology") {
        let pools = level["pools"].as_array().unwrap();
        assert_eq!(pools[0]["pool"], "prefill");
        assert_eq!(pools[0]["gpus"], 2);
        assert_eq!(pools[1]["pool"], "decode");
        assert!(level["transfer"]["transfers"].as_u64().unwrap() > 0);
        assert!(level["transfer"]["transfer_ms"]["mean"].as_f64().unwrap() > 0.1);
        assert_eq!(level["replicas"].as_array().unwrap().len(), 3);
    }
    // the scenario printed by the flags, run from a file, gives the same report
    let mut p = with(PD);
    p.push("--print-scenario");
    let (_, scen, _) = servesim(&p);
    let path = std::env::temp_dir().join(format!("servesim-pd-{}.json", std::process::id()));
    std::fs::write(&path, scen).unwrap();
    let (code, out2, err) = servesim(&["sweep", "--scenario", path.to_str().unwrap(), "--json"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, out2);
    // the table
    let (code, out, err) = servesim(&with(PD));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Per pool"), "{out}");
    assert!(out.contains("KV transfers"), "{out}");
    assert!(out.contains("prefill/1"), "{out}");
}

#[test]
fn bad_pd_values_name_the_field() {
    let (code, _, err) = servesim(&with(&["--prefill-tp", "0"]));
    assert_ne!(code, 0);
    assert!(err.contains("topology.prefill.tp"), "{err}");
    let (code, _, err) = servesim(&with(&["--decode-replicas", "1", "--kv-link-gbps=-5"]));
    assert_ne!(code, 0);
    assert!(
        err.contains("topology.kv_transfer.rdma_gbps_per_gpu"),
        "{err}"
    );
    let (code, _, err) = servesim(&with(&["--decode-replicas", "1", "--kv-path", "pcie"]));
    assert_ne!(code, 0);
    assert!(err.contains("--kv-path"), "{err}");
}

/// `servesim step --transfer TOKENS` prints every term of one KV transfer (and `--pool prefill`
/// the prefill worker's step), for the recipe's 1P1D H200 seed (RDMA between two 8-GPU nodes).
#[test]
fn step_transfer_prints_every_term() {
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"
    );
    let (code, out, err) = servesim(&["step", "--scenario", f, "--transfer", "6400", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["path"], "rdma");
    assert_eq!(v["link_gb_s"], 50.0);
    let recv = v["recv_bytes_per_decode_rank"].as_f64().unwrap();
    let wire = v["wire_ms"].as_f64().unwrap();
    assert!((wire - recv / 50e9 * 1e3).abs() < 1e-9, "{v}");
    let total = v["total_ms"].as_f64().unwrap();
    assert!((total - wire - 0.05).abs() < 1e-9, "{v}");
    let (code, out, err) = servesim(&[
        "step",
        "--scenario",
        f,
        "--transfer",
        "6400",
        "--pool",
        "prefill",
        "--prefill",
        "6400:57600",
    ]);
    assert_eq!(code, 0, "{err}");
    for term in [
        "received per decode rank",
        "sent per prefill rank",
        "wire time",
        "latency",
        "gemm compute",
    ] {
        assert!(out.contains(term), "{term}: {out}");
    }
    let (code, _, err) = servesim(&["step", "--scenario", f, "--pool", "middle", "--decode", "1"]);
    assert_ne!(code, 0);
    assert!(err.contains("--pool middle"), "{err}");
}
