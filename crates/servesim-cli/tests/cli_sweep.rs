//! `servesim sweep`: the --json shape, --print-scenario / --scenario round trip, flag overrides,
//! CSV, CLI output equal to the core's golden report, and bad input.

use std::path::PathBuf;

mod common;

use common::servesim;

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn golden(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden")
        .join(p)
}

const SMALL: &[&str] = &[
    "sweep",
    "--model",
    "meta-llama/Meta-Llama-3.1-8B",
    "--gpu",
    "h100",
    "--max-num-seqs",
    "64",
    "--isl",
    "512",
    "--osl",
    "64",
    "--osl-dist",
    "uniform:0.5-1.0",
    "--concurrency",
    "1,4,16",
    "--duration",
    "30",
    "--warmup",
    "5",
    "--sla",
    "e2e_tokens_per_s_per_user>=50,ttft_ms_p50<5000",
];

#[test]
fn sweep_json_has_scenario_capacity_levels_and_operating_point() {
    let mut args = SMALL.to_vec();
    args.push("--json");
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON object");
    assert_eq!(v["scenario"]["version"], 1);
    assert_eq!(v["scenario"]["engine"]["max_num_seqs"], 64);
    assert_eq!(v["capacity"]["fits"], true);
    assert!(v["capacity"]["num_gpu_blocks"].as_u64().unwrap() > 0);
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    let conc: Vec<u64> = levels
        .iter()
        .map(|l| l["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(conc, [1, 4, 16]);
    for l in levels {
        for k in [
            "completed_requests",
            "output_tokens_per_s",
            "output_tokens_per_s_per_gpu",
            "output_tokens_per_s_per_user",
            "e2e_tokens_per_s_per_user",
            "tpot_ms_mean",
            "preemptions",
            "prefix_cache_hit_rate",
            "rejected_requests",
        ] {
            assert!(l[k].is_number(), "{k} missing in {l}");
        }
        for d in ["ttft_ms", "itl_ms", "e2e_s"] {
            for s in ["mean", "p50", "p90", "p99"] {
                assert!(l[d][s].is_number(), "{d}.{s} missing");
            }
            assert!(l[d]["p50"].as_f64() <= l[d]["p99"].as_f64());
        }
        assert_eq!(l["window_s"]["start"], 5.0);
        assert_eq!(l["window_s"]["end"], 30.0);
        // one GPU: per-GPU throughput equals the total
        assert_eq!(l["output_tokens_per_s"], l["output_tokens_per_s_per_gpu"]);
    }
    assert!(v["operating_point"]["summary"].is_string());
    // progress goes to stderr, one line per level
    assert_eq!(
        err.lines().filter(|l| l.starts_with('[')).count(),
        3,
        "{err}"
    );
}

#[test]
fn print_scenario_then_run_from_it_gives_identical_output() {
    let mut p = SMALL.to_vec();
    p.push("--print-scenario");
    let (code, scen, err) = servesim(&p);
    assert_eq!(code, 0, "{err}");
    let file = tmp("roundtrip.json");
    std::fs::write(&file, &scen).unwrap();
    let mut a = SMALL.to_vec();
    a.push("--json");
    let (c1, direct, e1) = servesim(&a);
    assert_eq!(c1, 0, "{e1}");
    let (c2, from_file, e2) = servesim(&["sweep", "--scenario", file.to_str().unwrap(), "--json"]);
    assert_eq!(c2, 0, "{e2}");
    assert_eq!(direct, from_file);
    // and printing it again gives the same scenario
    let (_, again, _) = servesim(&[
        "sweep",
        "--scenario",
        file.to_str().unwrap(),
        "--print-scenario",
    ]);
    assert_eq!(again, scen);
}

#[test]
fn flags_given_with_a_scenario_override_only_their_fields() {
    let file = golden("scenarios/llama8b_h100_random_closed_loop.json");
    let (code, out, err) = servesim(&[
        "sweep",
        "--scenario",
        file.to_str().unwrap(),
        "--max-num-seqs",
        "32",
        "--tp",
        "2",
        "--print-scenario",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["engine"]["max_num_seqs"], 32);
    assert_eq!(v["tp"], 2);
    // untouched fields come from the file
    assert_eq!(v["engine"]["max_num_batched_tokens"], 2048);
    assert_eq!(v["workload"]["seed"], 3);
    assert_eq!(
        v["sweep"]["concurrency"],
        serde_json::json!([1.0, 8.0, 64.0])
    );
    assert_eq!(v["model"]["catalog"], "meta-llama/Meta-Llama-3.1-8B");
}

#[test]
fn cli_json_equals_the_core_golden_report() {
    let name = "llama8b_h100_random_closed_loop";
    let file = golden(&format!("scenarios/{name}.json"));
    let (code, out, err) = servesim(&["sweep", "--scenario", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let want = std::fs::read_to_string(golden(&format!("scenario_{name}.json"))).unwrap();
    assert_eq!(out, want);
}

#[test]
fn csv_has_one_row_per_level_with_metric_columns() {
    let mut a = SMALL.to_vec();
    a.push("--csv");
    let (code, out, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4);
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[0], "level");
    assert!(header.contains(&"ttft_ms_p50"));
    assert!(header.contains(&"output_tokens_per_s_per_gpu"));
    for row in &lines[1..] {
        assert_eq!(row.split(',').count(), header.len());
        assert!(row.starts_with("concurrency,"));
    }
}

#[test]
fn table_output_shows_levels_and_operating_point() {
    let (code, out, err) = servesim(SMALL);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("c=16"), "{out}");
    assert!(out.contains("SLA operating point"), "{out}");
}

#[test]
fn request_rate_and_shared_prefix_flags_build_the_workload() {
    let (code, out, err) = servesim(&[
        "sweep",
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100",
        "--workload",
        "shared-prefix",
        "--isl",
        "2000",
        "--prefix-reuse",
        "0.75",
        "--prefix-groups",
        "4",
        "--prefix-prompts",
        "25",
        "--request-rate",
        "1,2",
        "--print-scenario",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["workload"]["requests"];
    assert_eq!(r["shared_prefix"]["tokens"], 1500.0);
    assert_eq!(r["shared_prefix"]["groups"], 4.0);
    assert_eq!(r["shared_prefix"]["prompts_per_group"], 25.0);
    assert_eq!(r["input"]["tokens"], 500.0);
    assert_eq!(v["workload"]["arrival"]["type"], "poisson");
    assert_eq!(v["sweep"]["request_rates"], serde_json::json!([1.0, 2.0]));
    assert!(v["sweep"].get("concurrency").is_none());
}

#[test]
fn bad_input_is_reported_with_the_fix() {
    let (code, _, err) = servesim(&["sweep", "--concurrency", "1"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--model") && err.contains("--scenario"),
        "{err}"
    );

    let mut a = SMALL[..SMALL.len() - 2].to_vec();
    a.extend(["--sla", "speed>=3"]);
    let (code, _, err) = servesim(&a);
    assert_ne!(code, 0);
    assert!(err.contains("unknown metric `speed`"), "{err}");

    let file = tmp("v3.json");
    std::fs::write(&file, r#"{"version": 3}"#).unwrap();
    let (code, _, err) = servesim(&["sweep", "--scenario", file.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("version 3") && err.contains("versions 1 to 2"),
        "{err}"
    );

    let (code, _, err) = servesim(&[
        "sweep",
        "--model",
        "meta-llama/Meta-Llama-3.1-70B",
        "--gpu",
        "h100",
        "--concurrency",
        "1",
        "--duration",
        "10",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("does not fit"), "{err}");
    assert!(err.contains("tp = "), "a fix is named: {err}");

    let mut a = SMALL.to_vec();
    a.extend(["--isl-dist", "weibull:3"]);
    let (code, _, err) = servesim(&a);
    assert_ne!(code, 0);
    assert!(err.contains("weibull"), "{err}");
}
