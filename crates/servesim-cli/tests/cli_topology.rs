//! `servesim sweep` topology flags (`--replicas`, `--router`, `--router-refresh-ms`,
//! `--max-outstanding-per-replica`): they write the scenario's version-2 `topology` section, the
//! report carries per-replica results, the table prints them, and bad values name the flag.

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

#[test]
fn replicas_and_router_flags_write_a_version_two_scenario() {
    let (code, out, err) = servesim(&with(&[
        "--replicas",
        "2",
        "--router",
        "llm-d:precise-prefix",
        "--router-refresh-ms",
        "20",
        "--max-outstanding-per-replica",
        "64",
        "--print-scenario",
    ]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], 2);
    assert_eq!(v["topology"]["replicas"], 2);
    assert_eq!(v["topology"]["router"]["policy"], "llm_d");
    assert_eq!(v["topology"]["router"]["preset"], "precise-prefix");
    assert_eq!(v["topology"]["router"]["refresh_interval_ms"], 20.0);
    assert_eq!(v["topology"]["router"]["max_outstanding_per_replica"], 64);
}

#[test]
fn report_and_table_show_per_replica_results() {
    let (code, out, err) = servesim(&with(&[
        "--replicas",
        "2",
        "--router",
        "least-requests",
        "--json",
    ]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["capacity"]["num_gpus"], 2);
    let t = v["topology"].as_array().expect("per-replica results");
    assert_eq!(t.len(), 2);
    for level in t {
        assert_eq!(level["replicas"].as_array().unwrap().len(), 2);
        assert!(level["imbalance"].as_f64().unwrap() >= 1.0);
    }
    let (code, out, err) = servesim(&with(&["--replicas", "2"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Per replica (round-robin"), "{out}");
    assert!(out.contains("imbalance"), "{out}");
    // one replica: no per-replica section, version-1 scenario
    let (code, out, err) = servesim(&with(&["--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["scenario"]["version"], 1);
    assert!(v.get("topology").is_none());
}

#[test]
fn bad_topology_flags_name_the_fix() {
    let (code, _, err) = servesim(&with(&["--router", "random"]));
    assert_ne!(code, 0);
    assert!(
        err.contains("--router random") && err.contains("least-requests"),
        "{err}"
    );
    let (code, _, err) = servesim(&with(&["--replicas", "0"]));
    assert_ne!(code, 0);
    assert!(err.contains("--replicas"), "{err}");
    let (code, _, err) = servesim(&with(&["--replicas", "2", "--num-gpus", "4"]));
    assert_ne!(code, 0);
    assert!(err.contains("topology.replicas"), "{err}");
}

#[test]
fn levels_on_threads_print_the_same_report_as_one_thread() {
    let run = |threads: &'static str| {
        let mut args: Vec<&str> = BASE.iter().copied().filter(|a| *a != "8,32").collect();
        args.retain(|a| *a != "--concurrency");
        args.extend([
            "--concurrency",
            "1,8,32,64",
            "--replicas",
            "3",
            "--router",
            "least-requests",
            "--sla",
            "ttft_ms_p50<=60",
            "--refine-sla",
            "3",
            "--threads",
            threads,
            "--json",
        ]);
        let (code, out, err) = servesim(&args);
        assert_eq!(code, 0, "{err}");
        out
    };
    let one = run("1");
    let three = run("3");
    assert_eq!(one, three, "the report does not depend on --threads");
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["levels"].as_array().unwrap().len(), 4, "{v}");
    assert_eq!(v["topology"].as_array().unwrap().len(), 4);
}
