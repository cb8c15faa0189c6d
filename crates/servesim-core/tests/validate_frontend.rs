//! The API-server front-end terms (docs/accuracy.md "Front-end terms"): a fixed per-request
//! latency by endpoint kind, a serial CPU time per request and per prompt token, and rounds of chat
//! template renders on the event loop (vLLM before 0.19), all seen by the
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

/// A burst of 200 chat requests of 256 tokens at t = 0 on `model` served by vLLM `version`,
/// through an API server with only a render time per request (no latency, no serial time).
fn render_burst(model: &str, endpoint: &str, version: Option<&str>, render_s: f64) -> Scenario {
    let mut v = json!({
        "version": 1,
        "model": {"catalog": model},
        "gpu": {"catalog": "H100-SXM"},
        "engine": {"max_model_len": 4096},
        "workload": {"arrival": {"type": "burst", "count": 200},
                     "requests": {"type": "synthetic",
                                  "input": {"type": "constant", "tokens": 256},
                                  "output": {"type": "constant", "tokens": 32}},
                     "seed": 1},
        "sweep": {"concurrency": [200], "num_requests": 200},
        "endpoint": endpoint,
        "efficiencies": {"api_latency_completions_s": 0.0, "api_latency_chat_s": 0.0,
                         "api_serial_per_request_s": 0.0, "api_render_chat_s": render_s},
    });
    if let Some(version) = version {
        v["vllm_version"] = json!(version);
    }
    Scenario::from_json(&v.to_string()).unwrap()
}

const LLAMA: &str = "meta-llama/Meta-Llama-3.1-8B";

#[test]
fn chat_render_rounds_shift_a_burst_by_the_whole_round() {
    // vLLM 0.11 renders the Jinja chat template on the event loop: the 200 requests sent at
    // t = 0 form one round of 200 x 10 ms and all reach the engine at 2 s together, so the
    // engine runs exactly the burst it would have run at t = 0, 2 s later.
    let zero = level(&render_burst(LLAMA, "chat", Some("0.11.0"), 0.0));
    let with = level(&render_burst(LLAMA, "chat", Some("0.11.0"), 0.010));
    for s in Stat::ALL {
        let d = with.get(MetricId::TtftMs(s)).unwrap() - zero.get(MetricId::TtftMs(s)).unwrap();
        assert!((d - 2000.0).abs() < 1e-6, "TTFT {s:?} differs by {d} ms");
        assert_eq!(
            with.get(MetricId::TpotMs(s)),
            zero.get(MetricId::TpotMs(s)),
            "TPOT {s:?}"
        );
    }
    assert_eq!(with.completed_requests, 200);
    // A serial front end of the same 10 ms per request releases them one by one instead: the
    // median request starts about 1 s in, not 2 s.
    let mut serial = render_burst(LLAMA, "chat", Some("0.11.0"), 0.0);
    serial
        .efficiencies
        .as_mut()
        .unwrap()
        .api_serial_per_request_s = Some(0.010);
    let serial = level(&serial);
    assert!(
        serial.get(MetricId::TtftMs(Stat::P50)).unwrap()
            < with.get(MetricId::TtftMs(Stat::P50)).unwrap() - 500.0
    );
}

#[test]
fn chat_render_rounds_only_where_vllm_renders_on_the_event_loop() {
    let cases = [
        (LLAMA, "chat", Some("0.11.0"), true),
        (LLAMA, "chat", Some("0.18.1"), true),
        // PR #34789 moved the render off the loop; the newest line renders off it.
        (LLAMA, "chat", Some("0.19.0"), false),
        (LLAMA, "chat", None, false),
        // The completions endpoint renders nothing.
        (LLAMA, "completions", Some("0.11.0"), false),
        // gpt-oss is rendered by openai_harmony, not a Jinja template.
        ("openai/gpt-oss-20b", "chat", Some("0.11.0"), false),
    ];
    for (model, endpoint, version, renders) in cases {
        let s = render_burst(model, endpoint, version, 0.010);
        let m = s.model_config().unwrap();
        assert_eq!(
            s.renders_chat_on_event_loop(&m).unwrap(),
            renders,
            "{model} {endpoint} {version:?}"
        );
        // The run's calibration line says when the rounds apply, with their time.
        let summary = s.resolve().unwrap().calibration.summary;
        assert_eq!(
            summary.contains("event loop in rounds (vLLM before 0.19): 10 ms per request"),
            renders,
            "{model} {endpoint} {version:?}: {summary}"
        );
        if !renders {
            // The render time changes nothing where it does not apply.
            let zero = level(&render_burst(model, endpoint, version, 0.0));
            assert_eq!(
                level(&s).get(MetricId::TtftMs(Stat::P50)),
                zero.get(MetricId::TtftMs(Stat::P50)),
                "{model} {endpoint} {version:?}"
            );
        }
    }
}
