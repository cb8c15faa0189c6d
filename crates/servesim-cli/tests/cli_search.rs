//! `servesim search`: the JSON report ranks candidates, prunes what cannot start with the
//! reason, and gives the same report whatever the thread count; disaggregated candidates run
//! and each opens as a `servesim sweep --scenario` run with the same numbers.

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

#[test]
fn disaggregated_candidates_run_and_each_opens_as_a_sweep_scenario() {
    // --prefill-max-num-batched-tokens makes the base P/D: its prefill pool is the template
    let (code, out, err) = servesim(&[
        "search",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100",
        "--max-gpus",
        "3",
        "--tp",
        "1",
        "--pd-ratios",
        "1:1,1:2,2:1",
        "--pd-decode-tp",
        "1,2",
        "--prefill-max-num-batched-tokens",
        "4096",
        "--sla",
        "e2e_tokens_per_s_per_user>=50,ttft_ms_p50<5000",
        "--concurrency",
        "1,8,32",
        "--duration",
        "20",
        "--warmup",
        "2",
        "--refine-steps",
        "2",
        "--stop-at-crossing",
        "--threads",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let c = v["candidates"].as_array().unwrap();
    // aggregated TP1, then 3 ratios x decode TP1/TP2
    assert_eq!(c.len(), 7);
    assert!(c[0].get("prefill").is_none());
    // 1:2 with decode TP2 (5 GPUs) and 2:1 with decode TP2 (4 GPUs) are over the budget
    assert_eq!(v["summary"]["budget"], 2, "{}", v["summary"]);
    let pd: Vec<&Value> = c
        .iter()
        .filter(|x| x.get("prefill").is_some() && x["outcome"]["status"] == "evaluated")
        .collect();
    assert!(pd.len() >= 3, "{}", v["summary"]);
    for x in pd.iter().take(2) {
        let pre = &x["prefill"];
        assert_eq!(
            x["scenario"]["topology"]["prefill"]["engine"]["max_num_batched_tokens"],
            4096
        );
        assert_eq!(
            x["scenario"]["topology"]["prefill"]["replicas"],
            pre["replicas"]
        );
        // the candidate's scenario through `servesim sweep --scenario` gives its numbers
        let dir = std::env::temp_dir().join(format!(
            "servesim-cli-search-pd-{}-{}",
            std::process::id(),
            x["index"]
        ));
        std::fs::write(&dir, x["scenario"].to_string()).unwrap();
        let (code, out, err) = servesim(&["sweep", "--scenario", dir.to_str().unwrap(), "--json"]);
        let _ = std::fs::remove_file(&dir);
        assert_eq!(code, 0, "{err}");
        let s: Value = serde_json::from_str(&out).unwrap();
        assert!(s["disaggregated"].is_object(), "{}", s["disaggregated"]);
        let levels = s["levels"].as_array().unwrap();
        let mine = x["outcome"]["levels"].as_array().unwrap();
        let skipped = x["outcome"]["skipped_levels"]
            .as_array()
            .map_or(0, |v| v.len());
        assert_eq!(levels.len(), mine.len() + skipped);
        for (a, b) in levels.iter().zip(mine) {
            assert_eq!(
                a["output_tokens_per_s_per_gpu"], b["output_tokens_per_s_per_gpu"],
                "{}",
                x["label"]
            );
            assert_eq!(
                a["e2e_tokens_per_s_per_user"],
                b["e2e_tokens_per_s_per_user"]
            );
        }
    }
}

#[test]
fn a_bad_pd_ratio_names_the_flag_field() {
    let (code, _, err) = servesim(&[
        "search",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100",
        "--max-gpus",
        "4",
        "--pd-ratios",
        "1-2",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("disagg.pd_ratios") && err.contains("PREFILL:DECODE"),
        "{err}"
    );
}

#[test]
fn weight_precision_and_batched_tokens_flags_write_the_search_json_and_prune_with_the_reason() {
    let flags: Vec<&str> = vec![
        "search",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100",
        "--max-gpus",
        "2",
        "--tp",
        "1",
        "--weight-precisions",
        "checkpoint,bf16,fp8,int4",
        "--max-num-batched-tokens-options",
        "4096,1024",
        "--pd-ratios",
        "1:1",
        "--pd-prefill-max-num-batched-tokens",
        "8192",
        "--pd-decode-max-num-batched-tokens",
        "2048",
        "--sla",
        "e2e_tokens_per_s_per_user>=50,ttft_ms_p50<5000",
        "--concurrency",
        "1,8",
        "--duration",
        "10",
        "--warmup",
        "1",
        "--refine-steps",
        "1",
        "--threads",
        "2",
    ];
    let mut a = flags.clone();
    a.push("--json");
    let (code, out, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let c = v["candidates"].as_array().unwrap();
    // aggregated: 3 precisions (bf16 is the checkpoint: merged) x 2 budgets; P/D 1:1: 3
    assert_eq!(c.len(), 9, "{}", v["summary"]);
    assert_eq!(v["summary"]["merged"], 1);
    assert!(v["notes"][0]
        .as_str()
        .unwrap()
        .contains("bf16 merged with checkpoint"));
    assert_eq!(c[0]["max_num_batched_tokens"], 1024);
    assert_eq!(c[0]["scenario"]["engine"]["max_num_batched_tokens"], 1024);
    assert_eq!(c[2]["weight_precision"], "fp8");
    assert_eq!(c[2]["scenario"]["weight_precision"], "fp8");
    for x in c {
        if x["weight_precision"] == "int4" {
            assert_eq!(x["outcome"]["status"], "pruned");
            let why = x["outcome"]["reason"].as_str().unwrap();
            assert!(why.contains("quantizes online only to fp8"), "{why}");
        }
    }
    let pd = &c[6];
    assert_eq!(pd["prefill"]["max_num_batched_tokens"], 8192);
    assert_eq!(pd["max_num_batched_tokens"], 2048);
    let topo = &pd["scenario"]["topology"];
    assert_eq!(topo["prefill"]["engine"]["max_num_batched_tokens"], 8192);
    assert_eq!(topo["decode"]["engine"]["max_num_batched_tokens"], 2048);
    // --print-search writes the core's search JSON; --search FILE gives the same report
    let mut p = flags.clone();
    p.push("--print-search");
    let (code, search_json, err) = servesim(&p);
    assert_eq!(code, 0, "{err}");
    let s: Value = serde_json::from_str(&search_json).unwrap();
    assert_eq!(s["weight_precisions"][2], "fp8");
    assert_eq!(s["max_num_batched_tokens"][0], 4096);
    assert_eq!(s["disagg"]["decode_max_num_batched_tokens"][0], 2048);
    let path = std::env::temp_dir().join(format!("servesim-cli-search-wp-{}", std::process::id()));
    std::fs::write(&path, &search_json).unwrap();
    let (code, out2, err) = servesim(&[
        "search",
        "--search",
        path.to_str().unwrap(),
        "--threads",
        "1",
        "--json",
    ]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, out2);
    // the CSV names the new dimensions
    let mut a = flags.clone();
    a.push("--csv");
    let (code, csv, err) = servesim(&a);
    assert_eq!(code, 0, "{err}");
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(
        "weight_precision,max_num_seqs,max_num_batched_tokens,prefill_max_num_batched_tokens"
    ));
    assert!(csv.contains(",fp8,,1024,"), "{csv}");
    assert!(csv.contains(",checkpoint,,2048,8192"), "{csv}");
    // a bad precision names the flag
    let mut b = flags.clone();
    b[10] = "checkpoint,fp6";
    let (code, _, err) = servesim(&b);
    assert_ne!(code, 0);
    assert!(err.contains("--weight-precisions fp6"), "{err}");
}
