//! Seeded property tests ("fuzzing" in the normal suite, bounded so CI stays fast) over every
//! text input: scenario JSON, share links, `config.json` and the measured-run importers. Each
//! case must return (no panic) and, when accepted, give finite, plausible values. Plus the scale
//! checks of issue 13: imports linear in their size, strict JSON types.

use serde_json::{json, Value};
use servesim_core::compare::{import_text, ImportOptions};
use servesim_core::model::{catalog, ModelConfig};
use servesim_core::rng::Rng;
use servesim_core::scenario::Scenario;
use servesim_core::share;

const CASES: usize = 300;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/imports")
            .join(name),
    )
    .unwrap()
}

/// A hostile replacement for a JSON value: extremes, wrong types, huge or empty strings.
fn hostile(r: &mut Rng) -> Value {
    match r.range_u64(0, 13) {
        0 => json!(0),
        1 => json!(-1),
        2 => json!(1e-300),
        3 => json!(1e300),
        4 => json!(u64::MAX),
        5 => json!(i64::MIN),
        6 => json!(0.5),
        7 => json!("8"),
        8 => json!(""),
        9 => json!(null),
        10 => json!([]),
        11 => json!({}),
        12 => json!(true),
        _ => json!("x".repeat(5000)),
    }
}

/// Every (path) to a leaf of `v`.
fn leaves(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                path.push(k.clone());
                leaves(x, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(i.to_string());
                leaves(x, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

fn set_path(v: &mut Value, path: &[String], x: Value) {
    let mut cur = v;
    for p in &path[..path.len() - 1] {
        cur = match cur {
            Value::Object(m) => m.get_mut(p).unwrap(),
            Value::Array(a) => &mut a[p.parse::<usize>().unwrap()],
            _ => return,
        };
    }
    let last = &path[path.len() - 1];
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), x);
        }
        Value::Array(a) => a[last.parse::<usize>().unwrap()] = x,
        _ => {}
    }
}

fn small_base() -> Value {
    let mut v: Value = serde_json::from_str(&Scenario::default_scenario().to_json()).unwrap();
    v["sweep"] = json!({"concurrency": [1, 4], "duration_s": 5, "warmup_s": 1,
                        "sla": [{"metric": "ttft_ms_p50", "op": "<", "value": 500}]});
    v["efficiencies"] = json!({"gemm_bf16": 0.6, "api_serial_per_request_s": 0.001});
    v["engine"] = json!({"max_num_seqs": 64, "max_model_len": 4096});
    v
}

fn assert_finite(v: &Value, what: &str) {
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap();
            assert!(x.is_finite() && x.abs() < 1e18, "{what}: {x}");
        }
        Value::Array(a) => a.iter().for_each(|x| assert_finite(x, what)),
        Value::Object(o) => o.values().for_each(|x| assert_finite(x, what)),
        _ => {}
    }
}

#[test]
fn scenario_json_with_any_field_replaced_never_panics() {
    let base = small_base();
    let mut paths = Vec::new();
    leaves(&base, &mut Vec::new(), &mut paths);
    let mut r = Rng::new(13);
    let mut ran = 0;
    for case in 0..CASES {
        let mut v = base.clone();
        // one to three fields replaced
        for _ in 0..=r.range_u64(0, 2) {
            let p = &paths[r.range_u64(0, paths.len() as u64 - 1) as usize];
            set_path(&mut v, p, hostile(&mut r));
        }
        let text = v.to_string();
        let Ok(s) = Scenario::from_json(&text) else {
            continue;
        };
        let resolved = match s.resolve() {
            Ok(x) => x,
            Err(e) => {
                let m = e.to_string();
                assert!(m.len() < 2000 && !m.is_empty(), "case {case}: {m}");
                continue;
            }
        };
        // accepted: a few run, and give finite results
        if case % 10 == 0 {
            if let Ok(res) = resolved.run() {
                ran += 1;
                for l in &res.levels {
                    assert_finite(&serde_json::to_value(l).unwrap(), "level");
                }
            }
        }
    }
    assert!(ran > 0, "some mutated scenarios still run");
}

#[test]
fn random_bytes_and_truncations_are_refused_cleanly() {
    let text = small_base().to_string();
    let mut r = Rng::new(5);
    for _ in 0..CASES {
        let cut = r.range_u64(0, text.len() as u64) as usize;
        let mut t: String = text.chars().take(cut).collect();
        // flip a character somewhere
        if !t.is_empty() {
            let i = r.range_u64(0, t.len() as u64 - 1) as usize;
            if t.is_char_boundary(i) && t.is_char_boundary(i + 1) {
                t.replace_range(i..i + 1, "\u{0}");
            }
        }
        let _ = Scenario::from_json(&t).map(|s| s.resolve().map(|_| ()));
    }
}

#[test]
fn share_links_round_trip_and_damaged_links_are_errors() {
    let s = Scenario::default_scenario();
    let link = share::encode(&s.to_json());
    assert_eq!(
        Scenario::from_json(&share::decode(&link).unwrap()).unwrap(),
        s
    );
    let mut r = Rng::new(7);
    let bytes: Vec<char> = link.chars().collect();
    for _ in 0..CASES {
        let mut b = bytes.clone();
        match r.range_u64(0, 2) {
            0 => {
                let n = r.range_u64(0, b.len() as u64) as usize;
                b.truncate(n);
            }
            1 => {
                let i = r.range_u64(0, b.len() as u64 - 1) as usize;
                b[i] = ['A', '-', '_', '!', '.', 'z'][r.range_u64(0, 5) as usize];
            }
            _ => {
                let i = r.range_u64(0, b.len() as u64 - 1) as usize;
                b.insert(i, 'Q');
            }
        }
        let l: String = b.into_iter().collect();
        if let Ok(dec) = share::decode(&l) {
            // a link that still decodes is read as a scenario (which may fail, cleanly)
            let _ = Scenario::from_json(&dec).map(|s| s.resolve().map(|_| ()));
        }
    }
}

#[test]
fn config_json_with_hostile_values_never_panics() {
    let cfg: Value = serde_json::from_str(
        catalog::config_json("Qwen/Qwen3-30B-A3B")
            .unwrap_or(catalog::config_json("meta-llama/Meta-Llama-3.1-8B").unwrap()),
    )
    .unwrap();
    let mut paths = Vec::new();
    leaves(&cfg, &mut Vec::new(), &mut paths);
    let mut r = Rng::new(11);
    for _ in 0..CASES {
        let mut c = cfg.clone();
        for _ in 0..=r.range_u64(0, 2) {
            let p = &paths[r.range_u64(0, paths.len() as u64 - 1) as usize];
            set_path(&mut c, p, hostile(&mut r));
        }
        if let Ok(m) = ModelConfig::from_hf_json("fuzz", &c.to_string()) {
            let p = m.params();
            assert!(p.total > 0 && (p.total as f64) < 1e15, "{}", p.total);
        }
    }
}

#[test]
fn importers_with_hostile_values_never_panic() {
    let mut r = Rng::new(3);
    for name in [
        "vllm_append.jsonl",
        "aiperf_profile_export_aiperf.json",
        "guidellm_benchmarks.json",
        "inferencex_agg.json",
    ] {
        let text = fixture(name);
        let mut values: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map(|v| v.unwrap())
            .collect();
        let mut paths = Vec::new();
        leaves(&values[0], &mut Vec::new(), &mut paths);
        for _ in 0..CASES / 4 {
            let mut v = values[0].clone();
            let p = &paths[r.range_u64(0, paths.len() as u64 - 1) as usize];
            set_path(&mut v, p, hostile(&mut r));
            values[0] = v.clone();
            let t: String = values.iter().map(|x| x.to_string() + "\n").collect();
            if let Ok(imp) = import_text(&t, &ImportOptions::default()) {
                for run in &imp.runs {
                    for l in &run.levels {
                        assert!(l.level.is_finite() && l.level > 0.0);
                        for x in l.metrics.values() {
                            assert!(x.is_finite(), "{name}: {x}");
                        }
                    }
                }
            }
            values[0] = serde_json::Deserializer::from_str(&text)
                .into_iter::<Value>()
                .next()
                .unwrap()
                .unwrap();
        }
    }
    for name in [
        "table_arms.csv",
        "table_units.tsv",
        "table_report.md",
        "inferencex_summary.md",
    ] {
        let text = fixture(name);
        let chars: Vec<char> = text.chars().collect();
        for _ in 0..CASES / 4 {
            let mut c = chars.clone();
            let i = r.range_u64(0, c.len() as u64 - 1) as usize;
            c[i] = [',', '|', '\t', '\n', '-', 'e', '9', '"'][r.range_u64(0, 7) as usize];
            let t: String = c.into_iter().collect();
            let _ = import_text(&t, &ImportOptions::default());
        }
    }
}

#[test]
fn strict_json_types_in_the_vllm_importer() {
    let line = fixture("vllm_append.jsonl");
    let first = line.lines().next().unwrap();
    // a quoted max_concurrency is not read as a burst
    let mut v: Value = serde_json::from_str(first).unwrap();
    v["max_concurrency"] = json!("8");
    let e = import_text(&v.to_string(), &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("max_concurrency"), "{e}");
    // a quoted metric gets a note instead of vanishing
    let mut v: Value = serde_json::from_str(first).unwrap();
    v["mean_ttft_ms"] = json!("61.5");
    let imp = import_text(&v.to_string(), &ImportOptions::default()).unwrap();
    assert!(
        imp.unmatched
            .iter()
            .any(|u| u.name == "mean_ttft_ms" && u.reason.contains("not a number")),
        "{:?}",
        imp.unmatched
    );
    // a numeric field vllm bench serve does not write (a misspelt metric) gets a note too,
    // while the run's own settings and counts get none
    let mut v: Value = serde_json::from_str(first).unwrap();
    v["mean_ttft_msec"] = json!(61.5);
    let imp = import_text(&v.to_string(), &ImportOptions::default()).unwrap();
    assert!(
        imp.unmatched
            .iter()
            .any(|u| u.name == "mean_ttft_msec" && u.reason.contains("not a field")),
        "{:?}",
        imp.unmatched
    );
    assert!(
        !imp.unmatched
            .iter()
            .any(|u| ["num_prompts", "duration", "total_input_tokens"].contains(&u.name.as_str())),
        "{:?}",
        imp.unmatched
    );
}

#[test]
fn large_imports_are_read_whole() {
    // 20,000 CSV rows and 4,000 vLLM JSONL objects (10% of the sizes that were quadratic; the
    // time is measured in docs/performance.md, not asserted here).
    let mut csv = String::from("concurrency,Output token throughput (tok/s),TTFT p50 (ms)\n");
    for i in 1..=20_000 {
        csv.push_str(&format!("{i},{},{}\n", 10 * i, 50 + i % 7));
    }
    let imp = import_text(&csv, &ImportOptions::default()).unwrap();
    assert_eq!(imp.runs[0].levels.len(), 20_000);
    let first = fixture("vllm_append.jsonl");
    let first: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let mut jsonl = String::new();
    for i in 1..=4_000 {
        let mut v = first.clone();
        v["max_concurrency"] = json!(i);
        jsonl.push_str(&v.to_string());
        jsonl.push('\n');
    }
    let imp = import_text(&jsonl, &ImportOptions::default()).unwrap();
    assert_eq!(imp.runs[0].levels.len(), 4_000);
    // a duplicate level is still found, naming both lines
    csv.push_str("7,1,1\n");
    let e = import_text(&csv, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains('7'), "{e}");
}
