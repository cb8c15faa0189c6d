//! Hostile and sloppy scenario inputs (issue 13): every one gets a one-line error naming the field
//! and the fix, or a correct answer, quickly and in bounded memory. Table-driven: each row edits
//! the default scenario's JSON and states the field the error must name.

use serde_json::{json, Value};
use servesim_core::model::catalog;
use servesim_core::scenario::Scenario;

const LLAMA: &str = "meta-llama/Meta-Llama-3.1-8B";

fn base() -> Value {
    serde_json::from_str(&Scenario::default_scenario().to_json()).unwrap()
}

fn custom_gpu() -> Value {
    json!({"name": "my-gpu", "memory_visible_mib": 81559.0, "hbm_bandwidth_tb_s": 3.35,
           "bf16_dense_tflops": 989.0, "scaleup_unidir_gb_s": 450.0, "scaleup_domain": 8})
}

fn custom_model(edit: &dyn Fn(&mut Value)) -> Value {
    let mut cfg: Value = serde_json::from_str(catalog::config_json(LLAMA).unwrap()).unwrap();
    edit(&mut cfg);
    json!({"custom": {"name": "edited", "config_json": cfg.to_string()}})
}

fn set(v: &mut Value, path: &str, x: Value) {
    let mut cur = v;
    let parts: Vec<&str> = path.split('/').collect();
    for p in &parts[..parts.len() - 1] {
        if cur.get(*p).is_none() {
            cur[*p] = json!({});
        }
        cur = cur.get_mut(*p).unwrap();
    }
    cur[*parts.last().unwrap()] = x;
}

/// Resolves the edited scenario; returns (field, message) of the error, or None when it resolves.
fn outcome(v: &Value) -> Option<(String, String)> {
    match Scenario::from_json(&v.to_string()).and_then(|s| s.resolve().map(|_| ())) {
        Ok(()) => None,
        Err(e) => Some((e.field(), e.to_string())),
    }
}

type Edit = fn(&mut Value);

/// (what, edit, the field the error names, a word the fix must contain)
fn rows() -> Vec<(&'static str, Edit, &'static str, &'static str)> {
    vec![
        (
            "efficiency 1e-300",
            |v| set(v, "efficiencies/gemm_bf16", json!(1e-300)),
            "efficiencies.gemm_bf16",
            "between",
        ),
        (
            "step overhead 1e300 s",
            |v| set(v, "efficiencies/step_overhead_graph_s", json!(1e300)),
            "efficiencies.step_overhead_graph_s",
            "between",
        ),
        (
            "API serial cost 1e10 s",
            |v| set(v, "efficiencies/api_serial_per_request_s", json!(1e10)),
            "efficiencies.api_serial_per_request_s",
            "between",
        ),
        (
            "API serial cost 1 s per prompt token",
            |v| set(v, "efficiencies/api_serial_per_input_token_s", json!(1.0)),
            "efficiencies.api_serial_per_input_token_s",
            "per token",
        ),
        (
            "custom GPU bandwidth 1e-300",
            |v| {
                let mut g = custom_gpu();
                g["hbm_bandwidth_tb_s"] = json!(1e-300);
                v["gpu"] = json!({ "custom": g });
            },
            "gpu.custom.hbm_bandwidth_tb_s",
            "TB/s",
        ),
        (
            "custom GPU memory 1e300 MiB (budget would overflow i64)",
            |v| {
                let mut g = custom_gpu();
                g["memory_visible_mib"] = json!(1e300);
                v["gpu"] = json!({ "custom": g });
            },
            "gpu.custom.memory_visible_mib",
            "MiB",
        ),
        (
            "think time 3e10 s",
            |v| set(v, "workload/arrival/think_time_s", json!(3e10)),
            "workload.arrival.think_time_s",
            "between",
        ),
        (
            "exponential input mean 1e300",
            |v| v["workload"]["requests"]["input"] = json!({"type": "exponential", "mean": 1e300}),
            "workload.requests.input.mean",
            "tokens",
        ),
        (
            "Poisson rate 1e-300 with num_requests",
            |v| {
                v["workload"]["arrival"] = json!({"type": "poisson", "rate": 1e-300});
                v["sweep"] = json!({"num_requests": 10});
            },
            "workload.arrival.rate",
            "requests/s",
        ),
        (
            "request_rates level 1e-300",
            |v| {
                v["workload"]["arrival"] = json!({"type": "poisson", "rate": 1});
                v["sweep"] = json!({"request_rates": [1e-300], "num_requests": 10});
            },
            "sweep.request_rates",
            "requests/s",
        ),
        (
            "gamma cv 1e-160 (the sampler used to hang)",
            |v| v["workload"]["arrival"] = json!({"type": "gamma", "rate": 1, "cv": 1e-160}),
            "workload.arrival.cv",
            "between",
        ),
        (
            "concurrency 1e9",
            |v| set(v, "sweep/concurrency", json!([1e9])),
            "sweep.concurrency",
            "clients",
        ),
        (
            "config.json hidden_size 1e9",
            |v| v["model"] = custom_model(&|c| c["hidden_size"] = json!(1e9)),
            "model",
            "hidden_size",
        ),
        (
            "config.json vocab_size 9e15",
            |v| v["model"] = custom_model(&|c| c["vocab_size"] = json!(9e15)),
            "model",
            "vocab_size",
        ),
        (
            "config.json dimensions in range but a 10^20-parameter model",
            |v| {
                v["model"] = custom_model(&|c| {
                    c["hidden_size"] = json!(900000);
                    c["intermediate_size"] = json!(900000);
                    c["num_hidden_layers"] = json!(100000);
                })
            },
            "model",
            "parameters",
        ),
        (
            "max_num_batched_tokens i64::MAX",
            |v| {
                set(
                    v,
                    "engine/max_num_batched_tokens",
                    json!(9223372036854775807i64),
                )
            },
            "engine.max_num_batched_tokens",
            "tokens",
        ),
        (
            "max_model_len 1e15 with allow_long_max_model_len",
            |v| {
                set(v, "engine/max_model_len", json!(1000000000000000i64));
                set(v, "engine/allow_long_max_model_len", json!(true));
            },
            "engine.max_model_len",
            "tokens",
        ),
        (
            "duration 1e300 s",
            |v| set(v, "sweep/duration_s", json!(1e300)),
            "sweep.duration_s",
            "between",
        ),
        (
            "num_requests 1e12",
            |v| {
                v["sweep"] = json!({"num_requests": 1e12});
            },
            "sweep.num_requests",
            "requests",
        ),
    ]
}

#[test]
fn every_hostile_input_is_refused_naming_the_field_and_the_fix() {
    for (what, edit, field, word) in rows() {
        let mut v = base();
        edit(&mut v);
        let (f, msg) = outcome(&v).unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(f, field, "{what}: {msg}");
        assert!(msg.contains(word), "{what}: `{word}` not in: {msg}");
        assert!(!msg.contains('\n'), "{what}: one line: {msg}");
        assert!(msg.len() < 600, "{what}: short message: {msg}");
        // no 300-digit decimals
        assert!(!msg.contains("00000000000000000000"), "{what}: {msg}");
    }
}

#[test]
fn errors_do_not_repeat_their_prefix() {
    let cases: Vec<Edit> = vec![
        |v| v["tp"] = json!(3),
        |v| set(v, "engine/max_num_seqs", json!(0)),
        |v| set(v, "sweep/duration_s", json!(-1)),
        |v| set(v, "sweep/warmup_s", json!(1e9)),
        |v| v["workload"]["arrival"] = json!({"type": "poisson", "rate": -1}),
        |v| set(v, "efficiencies/hbm_kv", json!(2.0)),
        |v| v["gpu"] = json!({"catalog": "V100-imaginary"}),
    ];
    for edit in cases {
        let mut v = base();
        edit(&mut v);
        let (_, msg) = outcome(&v).expect("refused");
        let words: Vec<&str> = msg.split_whitespace().collect();
        for w in words.windows(2) {
            assert!(
                !(w[0].ends_with(':') && w[0] == w[1]),
                "repeated prefix `{}` in: {msg}",
                w[0]
            );
        }
        let first = msg.split(':').next().unwrap_or("");
        let rest = &msg[first.len()..];
        assert!(
            !rest.starts_with(&format!(": {first}:")),
            "repeated prefix in: {msg}"
        );
    }
}

#[test]
fn ten_megabyte_strings_are_not_echoed() {
    let huge = "x".repeat(10 << 20);
    for edit in [
        |v: &mut Value, h: &str| v["model"] = json!({ "catalog": h }),
        |v: &mut Value, h: &str| v["gpu"] = json!({ "catalog": h }),
        |v: &mut Value, h: &str| v["vllm_version"] = json!(h),
        |v: &mut Value, h: &str| v["kv_cache_dtype"] = json!(h),
    ] {
        let mut v = base();
        edit(&mut v, &huge);
        let (_, msg) = outcome(&v).expect("refused");
        assert!(msg.len() < 2000, "message of {} bytes", msg.len());
    }
}

#[test]
fn a_utf8_bom_is_accepted() {
    let text = format!("\u{feff}{}", Scenario::default_scenario().to_json_pretty());
    let s = Scenario::from_json(&text).expect("BOM accepted");
    assert_eq!(s, Scenario::default_scenario());
}

#[test]
fn kv_cache_memory_larger_than_the_gpu_does_not_fit() {
    let mut v = base();
    set(
        &mut v,
        "engine/kv_cache_memory_bytes",
        json!(100_000_000_000i64),
    );
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let r = s.resolve().unwrap();
    assert!(!r.capacity.fits, "{}", r.capacity.reason);
    assert!(
        r.capacity.reason.contains("kv_cache_memory"),
        "{}",
        r.capacity.reason
    );
    let e = r.runner().err().expect("refused to run");
    assert_eq!(e.field(), "deployment");
    // a kv_cache_memory that fits still works
    set(
        &mut v,
        "engine/kv_cache_memory_bytes",
        json!(20_000_000_000i64),
    );
    let r = Scenario::from_json(&v.to_string())
        .unwrap()
        .resolve()
        .unwrap();
    assert!(r.capacity.fits, "{}", r.capacity.reason);
}

/// The largest accepted values still run to a finite answer (no overflow, no hang).
#[test]
fn extreme_accepted_values_run_to_finite_results() {
    let cases: Vec<Edit> = vec![
        // nearly constant gamma arrivals
        |v| {
            v["workload"]["arrival"] = json!({"type": "gamma", "rate": 2, "cv": 0.001});
            v["sweep"] = json!({"request_rates": [2], "duration_s": 20});
        },
        // extremely bursty gamma arrivals
        |v| {
            v["workload"]["arrival"] = json!({"type": "gamma", "rate": 2, "cv": 100});
            v["sweep"] = json!({"request_rates": [2], "duration_s": 20});
        },
        // slowest efficiency, longest overhead
        |v| {
            set(v, "efficiencies/gemm_bf16", json!(0.001));
            set(v, "efficiencies/step_overhead_graph_s", json!(60));
            v["sweep"] = json!({"concurrency": [2], "duration_s": 300});
        },
        // longest think time
        |v| {
            set(v, "workload/arrival/think_time_s", json!(86400));
            v["sweep"] = json!({"concurrency": [2], "duration_s": 100});
        },
        // the slowest rate with a request count: the run ends at the simulated-time horizon
        |v| {
            v["workload"]["arrival"] = json!({"type": "constant", "rate": 1e-6});
            v["sweep"] = json!({"num_requests": 2});
        },
    ];
    for (i, edit) in cases.into_iter().enumerate() {
        let mut v = base();
        edit(&mut v);
        let s = Scenario::from_json(&v.to_string()).unwrap();
        let r = s.resolve().unwrap_or_else(|e| panic!("case {i}: {e}"));
        match r.run() {
            Ok(res) => {
                for l in &res.levels {
                    let j = serde_json::to_value(l).unwrap();
                    assert_all_finite(&j, i);
                }
            }
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains("simulated seconds"), "case {i}: {m}");
            }
        }
    }
}

fn assert_all_finite(v: &Value, case: usize) {
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap();
            assert!(x.is_finite() && x.abs() < 1e15, "case {case}: {x}");
        }
        Value::Array(a) => a.iter().for_each(|x| assert_all_finite(x, case)),
        Value::Object(o) => o.values().for_each(|x| assert_all_finite(x, case)),
        _ => {}
    }
}

#[test]
fn prompts_over_max_model_len_are_rejected_and_counted_not_truncated() {
    let mut v = base();
    set(&mut v, "engine/max_model_len", json!(2048));
    v["workload"]["requests"]["input"] = json!({"type": "constant", "tokens": 4096});
    v["sweep"] = json!({"concurrency": [4], "duration_s": 30});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let res = s.resolve().unwrap().run().unwrap();
    let l = &res.levels[0];
    assert_eq!(l.completed_requests, 0, "nothing is truncated into running");
    assert!(l.rejected_requests > 0);
    assert_eq!(l.totals.over_max_model_len, l.totals.submitted);
    // prompt fits but prompt + output does not: rejected too (vLLM checks prompt + max_tokens)
    v["workload"]["requests"]["input"] = json!({"type": "constant", "tokens": 2000});
    v["workload"]["requests"]["output"] = json!({"type": "constant", "tokens": 100});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let res = s.resolve().unwrap().run().unwrap();
    assert_eq!(res.levels[0].completed_requests, 0);
    assert!(res.levels[0].rejected_requests > 0);
}

#[test]
fn runs_over_the_memory_budget_stop_naming_the_setting_to_lower() {
    // Before the run: Poisson 100,000 req/s for 300 s in the page's worker budget.
    let mut v = base();
    v["workload"]["arrival"] = json!({"type": "poisson", "rate": 100000});
    v["sweep"] = json!({"request_rates": [100000], "duration_s": 300});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let mut r = s.resolve().unwrap();
    r.sweep.memory_budget = servesim_core::budget::WORKER_MEMORY_BUDGET;
    let e = r.run().expect_err("over budget");
    assert_eq!(e.field(), "sweep.request_rates", "{e}");
    assert!(e.to_string().contains("memory budget"), "{e}");
    // While it runs: a closed loop whose records outgrow a small budget.
    let mut v = base();
    v["sweep"] = json!({"concurrency": [64], "duration_s": 3600});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let mut r = s.resolve().unwrap();
    r.sweep.memory_budget = 1 << 20;
    let e = r.run().expect_err("over budget");
    assert_eq!(e.field(), "sweep.concurrency", "{e}");
    assert!(e.to_string().contains("memory budget"), "{e}");
}

#[test]
fn mooncake_traces_with_equal_timestamps_are_not_relabelled_as_a_rate() {
    let line =
        |ts: u64| format!("{{\"timestamp\": {ts}, \"input_length\": 100, \"output_length\": 10}}");
    let jsonl: String = (0..20).map(|_| line(0) + "\n").collect();
    let mut v = base();
    v["workload"] = json!({"arrival": {"type": "trace"},
        "requests": {"type": "mooncake", "jsonl": jsonl}, "seed": 0});
    v["sweep"] = json!({"request_rates": [5], "duration_s": 60});
    let (field, msg) = outcome(&v)
        .or_else(|| {
            Scenario::from_json(&v.to_string())
                .unwrap()
                .resolve()
                .unwrap()
                .run()
                .err()
                .map(|e| (e.field(), e.to_string()))
        })
        .expect("refused");
    assert_eq!(field, "sweep.request_rates", "{msg}");
    assert!(msg.contains("same timestamp"), "{msg}");
}

#[test]
fn requests_longer_than_max_model_len_are_warned_about() {
    let mut v = base();
    set(&mut v, "engine/max_model_len", json!(2048));
    v["workload"]["requests"]["input"] = json!({"type": "constant", "tokens": 200000});
    let r = Scenario::from_json(&v.to_string())
        .unwrap()
        .resolve()
        .unwrap();
    let w = r.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("max_model_len 2048"), "{w:?}");
    // the default scenario has none
    let r = Scenario::default_scenario().resolve().unwrap();
    assert!(r.warnings().is_empty());
}

/// A level whose window holds no completed request, or has zero length, reports no value for
/// its window rates (JSON `null`, with the reason), not 0 tok/s; an SLA gate on such a metric
/// neither passes nor fails it.
#[test]
fn an_empty_window_gives_no_value_not_zero() {
    use servesim_core::metrics::{NO_VALUE_EMPTY_WINDOW, NO_VALUE_NO_COMPLETED, NO_VALUE_REJECTED};
    use servesim_core::sweep::{level_verdict, operating_point};
    // Every request is rejected (prompt over max_model_len), so nothing completes.
    let mut v = base();
    set(&mut v, "engine/max_model_len", json!(2048));
    v["workload"]["requests"]["input"] = json!({"type": "constant", "tokens": 4096});
    v["sweep"] = json!({"concurrency": [1, 2], "num_requests": 4,
                        "sla": [{"metric": "output_tokens_per_s_per_gpu", "op": ">=", "value": 1}]});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let r = s.resolve().unwrap();
    let res = r.run().unwrap();
    let l = &res.levels[0];
    assert_eq!(l.completed_requests, 0);
    assert!(
        l.window_s.end > l.window_s.start,
        "front-end latency: non-empty window"
    );
    assert_eq!(l.output_tokens_per_s, None);
    assert_eq!(l.output_tokens_per_s_per_gpu, None);
    assert_eq!(l.requests_per_s, None);
    assert_eq!(l.input_tokens_per_s, None);
    // The reason names the rejections, not the run's length.
    assert_eq!(l.no_value.as_deref(), Some(NO_VALUE_REJECTED));
    assert!(l.rejected_requests > 0);
    // kv use and batch are time averages over a non-empty window: 0 is a measured value
    assert_eq!(l.kv_utilization_mean, Some(0.0));
    let j: Value = serde_json::from_str(
        &servesim_core::scenario::SweepReport::new(&s, &r, &res).to_json_pretty(),
    )
    .unwrap();
    let jl = &j["levels"][0];
    assert!(jl["output_tokens_per_s"].is_null(), "{jl}");
    assert!(jl["requests_per_s"].is_null());
    assert_eq!(jl["no_value"], json!(NO_VALUE_REJECTED));
    // the gate has no value at either level: no verdict, and the operating point says so
    let gates = &r.sweep.sla;
    assert_eq!(level_verdict(gates, l), None);
    let op = operating_point(&res.levels, gates).unwrap();
    assert_eq!(op.highest_passing, None);
    assert_eq!(op.undecided, vec![1.0, 2.0]);
    assert!(
        op.summary.contains("neither passes nor fails"),
        "{}",
        op.summary
    );

    // Requests that fit but cannot finish in a short run: the run's length is the reason.
    let mut w = base();
    w["workload"]["requests"]["output"] = json!({"type": "constant", "tokens": 4096});
    w["sweep"] = json!({"concurrency": [1], "duration_s": 1.0, "warmup_s": 0.0});
    let res = Scenario::from_json(&w.to_string())
        .unwrap()
        .resolve()
        .unwrap()
        .run()
        .unwrap();
    let l = &res.levels[0];
    assert_eq!((l.completed_requests, l.rejected_requests), (0, 0));
    assert_eq!(l.no_value.as_deref(), Some(NO_VALUE_NO_COMPLETED));

    // With no front-end delay and every request rejected at t = 0, the window [0, 0] is empty.
    set(&mut v, "efficiencies/api_latency_completions_s", json!(0));
    set(&mut v, "efficiencies/api_latency_chat_s", json!(0));
    set(&mut v, "efficiencies/api_serial_per_request_s", json!(0));
    v["workload"]["arrival"] = json!({"type": "burst", "count": 4});
    v["sweep"] = json!({"concurrency": [4], "num_requests": 4});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let res = s.resolve().unwrap().run().unwrap();
    let l = &res.levels[0];
    assert_eq!(l.window_s.start, l.window_s.end, "{:?}", l.window_s);
    assert_eq!(l.output_tokens_per_s, None);
    assert_eq!(l.kv_utilization_mean, None);
    assert_eq!(l.mean_running_batch, None);
    assert_eq!(l.no_value.as_deref(), Some(NO_VALUE_EMPTY_WINDOW));
}

/// Levels with values keep them and serialise no `no_value` (goldens unchanged).
#[test]
fn a_window_with_completed_requests_has_rates_and_no_reason() {
    let mut v = base();
    v["sweep"] = json!({"concurrency": [2], "duration_s": 20});
    let s = Scenario::from_json(&v.to_string()).unwrap();
    let r = s.resolve().unwrap();
    let res = r.run().unwrap();
    let l = &res.levels[0];
    assert!(l.completed_requests > 0);
    assert!(l.output_tokens_per_s.unwrap() > 0.0);
    assert!(l.no_value.is_none());
    assert!(!servesim_core::scenario::SweepReport::new(&s, &r, &res)
        .to_json_pretty()
        .contains("no_value"));
}
