//! `servesim search`: the JSON report ranks candidates, prunes what cannot start with the
//! reason, and gives the same report whatever the thread count.

mod common;

use common::servesim;
use serde_json::Value;

const ARGS: [&str; 21] = [
    "search",
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpus",
    "H100,A100",
    "--max-gpus",
    "2",
    "--tp",
    "1,2,4",
    "--sla",
    "e2e_tokens_per_s_per_user>=50,ttft_ms_p50<5000",
    "--concurrency",
    "1,8,32,128",
    "--duration",
    "20",
    "--warmup",
    "2",
    "--refine-steps",
    "3",
    "--gpu-hour-usd",
    "A100=1.79",
];

fn report(threads: &str) -> Value {
    let mut a: Vec<&str> = ARGS.to_vec();
    a.extend(["--threads", threads, "--json"]);
    let (code, out, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn search_ranks_prunes_and_does_not_depend_on_threads() {
    let one = report("1");
    let two = report("2");
    assert_eq!(one, two);
    let c = one["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 6);
    assert_eq!(one["summary"]["budget"], 2, "{}", one["summary"]);
    let best = one["ranking_by_throughput"][0].as_u64().unwrap() as usize;
    let op = &c[best]["outcome"]["operating_point"];
    assert!(
        op["output_tokens_per_s_per_gpu"].as_f64().unwrap() > 0.0,
        "{op}"
    );
    assert!(
        op["e2e_tokens_per_s_per_user"].as_f64().unwrap() >= 50.0,
        "{op}"
    );
    // the A100 price was given, the H100's is the documented default
    assert_eq!(one["prices"]["A100-80GB"]["source"], "given");
    assert_eq!(one["prices"]["H100-SXM"]["usd_per_gpu_hour"], 2.69);
    let pruned: Vec<&Value> = c
        .iter()
        .filter(|x| x["outcome"]["status"] == "pruned")
        .collect();
    assert!(pruned
        .iter()
        .all(|x| x["outcome"]["reason"].as_str().unwrap().contains("budget")));
}

#[test]
fn search_needs_a_budget() {
    let (code, _, err) = servesim(&[
        "search",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--max-gpus"), "{err}");
}
