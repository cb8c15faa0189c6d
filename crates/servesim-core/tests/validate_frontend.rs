//! The API-server front-end terms (docs/accuracy.md "Front-end terms"): a fixed per-request
//! latency by endpoint kind and a serial CPU time per request and per prompt token, all seen by the
//! client.

use serde_json::{json, Value};
use servesim_core::metric::{MetricId, Stat};
use servesim_core::metrics::LevelResult;
use servesim_core::scenario::Scenario;

fn scenario(arrival: Value, sweep: Value, endpoint: &str, eff: Value) -> Scenario {
    let v = json!({
        "version": 1,
        "model": {"catalog": "meta-llama/Meta-Llama-3.1-8B"},
        "gpu": {"catalog": "H100-SXM"},
        "engine": {"max_model_len": 4096},
        "workload": {"arrival": arrival,
                     "requests": {"type": "synthetic",
                                  "input": {"type": "constant", "tokens": 256},
                                  "output": {"type": "constant", "tokens": 32}},
                     "seed": 1},
        "sweep": sweep,
        "endpoint": endpoint,
        "efficiencies": eff,
    });
    Scenario::from_json(&v.to_string()).unwrap()
}

fn level(s: &Scenario) -> LevelResult {
    s.resolve().unwrap().run().unwrap().levels.remove(0)
}

fn closed_loop_c1(endpoint: &str, eff: Value) -> LevelResult {
    level(&scenario(
        json!({"type": "closed_loop", "concurrency": 1}),
        json!({"concurrency": [1], "num_requests": 20}),
        endpoint,
        eff,
    ))
}

#[test]
fn endpoint_latency_adds_exactly_to_ttft_and_e2e_at_concurrency_one() {
    let eff = json!({"api_latency_completions_s": 0.004, "api_latency_chat_s": 0.054,
                     "api_serial_per_request_s": 0.001});
    let comp = closed_loop_c1("completions", eff.clone());
    let chat = closed_loop_c1("chat", eff);
    // One request at a time: the engine work is identical, the client sees 50 ms more.
    for s in [Stat::Mean, Stat::P50, Stat::P99] {
        let d = chat.get(MetricId::TtftMs(s)).unwrap() - comp.get(MetricId::TtftMs(s)).unwrap();
        assert!((d - 50.0).abs() < 1e-6, "TTFT {s:?} differs by {d} ms");
        let d = chat.get(MetricId::E2eS(s)).unwrap() - comp.get(MetricId::E2eS(s)).unwrap();
        assert!((d - 0.050).abs() < 1e-9, "E2E {s:?} differs by {d} s");
    }
    // Inter-token gaps are engine-side: unchanged.
    assert_eq!(
        chat.get(MetricId::TpotMs(Stat::Mean)),
        comp.get(MetricId::TpotMs(Stat::Mean))
    );
    // The closed-loop client waits longer per request: lower throughput.
    assert!(chat.output_tokens_per_s < comp.output_tokens_per_s);
}

#[test]
fn zero_front_end_gives_engine_side_ttft() {
    let zero = json!({"api_latency_completions_s": 0.0, "api_serial_per_request_s": 0.0});
    let with = json!({"api_latency_completions_s": 0.010, "api_serial_per_request_s": 0.002});
    let a = closed_loop_c1("completions", zero);
    let b = closed_loop_c1("completions", with);
    let d =
        b.get(MetricId::TtftMs(Stat::Mean)).unwrap() - a.get(MetricId::TtftMs(Stat::Mean)).unwrap();
    assert!((d - 12.0).abs() < 1e-6, "{d}");
}

#[test]
fn serial_front_end_queues_a_burst() {
    // 200 requests at t = 0 through a server that needs 20 ms each: the last one reaches the
    // engine after 200 x 20 ms = 4 s, so the TTFT p99 is at least 0.99 x 4 s, whatever the GPU.
    let eff = json!({"api_latency_completions_s": 0.0, "api_serial_per_request_s": 0.020});
    let r = level(&scenario(
        json!({"type": "burst", "count": 200}),
        json!({"concurrency": [200], "num_requests": 200}),
        "completions",
        eff,
    ));
    let p99 = r.get(MetricId::TtftMs(Stat::P99)).unwrap();
    assert!(p99 >= 0.99 * 3980.0, "TTFT p99 {p99} ms");
    let p50 = r.get(MetricId::TtftMs(Stat::P50)).unwrap();
    assert!(p50 >= 0.99 * 2000.0, "TTFT p50 {p50} ms");
    assert_eq!(r.completed_requests, 200);
}

#[test]
fn serial_time_per_prompt_token_adds_exactly_at_concurrency_one() {
    // 256-token prompts through a server that tokenises at 10 us per token: one request at a
    // time, each reaches the engine 2.56 ms later, so TTFT and E2E grow by exactly that.
    let base = json!({"api_latency_completions_s": 0.002, "api_serial_per_request_s": 0.001});
    let per_token = json!({"api_latency_completions_s": 0.002, "api_serial_per_request_s": 0.001,
                           "api_serial_per_input_token_s": 10e-6});
    let a = closed_loop_c1("completions", base);
    let b = closed_loop_c1("completions", per_token);
    for s in [Stat::Mean, Stat::P50, Stat::P99] {
        let d = b.get(MetricId::TtftMs(s)).unwrap() - a.get(MetricId::TtftMs(s)).unwrap();
        assert!((d - 2.56).abs() < 1e-6, "TTFT {s:?} differs by {d} ms");
    }
    assert_eq!(
        a.get(MetricId::TpotMs(Stat::Mean)),
        b.get(MetricId::TpotMs(Stat::Mean))
    );
}

#[test]
fn serial_time_per_prompt_token_queues_a_burst_by_prompt_length() {
    // 100 requests of 256 tokens at t = 0, 200 us per token and nothing per request: 51.2 ms
    // each, so the last reaches the engine after 100 x 51.2 ms = 5.12 s and the median after
    // about half of that, whatever the GPU.
    let eff = json!({"api_latency_completions_s": 0.0, "api_serial_per_request_s": 0.0,
                     "api_serial_per_input_token_s": 200e-6});
    let r = level(&scenario(
        json!({"type": "burst", "count": 100}),
        json!({"concurrency": [100], "num_requests": 100}),
        "completions",
        eff,
    ));
    let p99 = r.get(MetricId::TtftMs(Stat::P99)).unwrap();
    assert!(p99 >= 0.99 * 5068.8, "TTFT p99 {p99} ms");
    let p50 = r.get(MetricId::TtftMs(Stat::P50)).unwrap();
    assert!(p50 >= 0.99 * 2560.0, "TTFT p50 {p50} ms");
    assert_eq!(r.completed_requests, 100);
}
