//! Hostile and sloppy command lines (issue 13): each gets a one-line error naming the flag or
//! field and the fix (exit 1, no panic), or a correct answer.

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod common;

use common::servesim;

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

const BASE: [&str; 5] = [
    "sweep",
    "--model",
    "meta-llama/Meta-Llama-3.1-8B",
    "--gpu",
    "h100",
];

fn scenario_file(name: &str) -> PathBuf {
    let (code, out, err) = servesim(&[
        "sweep",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "h100",
        "--concurrency",
        "1",
        "--duration",
        "10",
        "--print-scenario",
    ]);
    assert_eq!(code, 0, "{err}");
    let p = tmp(name);
    std::fs::write(&p, out).unwrap();
    p
}

fn refused(args: &[&str], words: &[&str]) {
    let (code, out, err) = servesim(args);
    assert_eq!(code, 1, "{args:?} should fail: {out}{err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    let line = err.trim();
    assert!(!line.contains('\n'), "{args:?}: one line: {err}");
    assert!(line.len() < 700, "{args:?}: short: {err}");
    for w in words {
        assert!(line.contains(w), "{args:?}: `{w}` not in: {err}");
    }
}

#[test]
fn out_of_range_flags_are_refused_naming_the_field() {
    let rows: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--max-num-batched-tokens", "9223372036854775807"],
            vec!["max_num_batched_tokens", "between"],
        ),
        (
            vec![
                "--max-model-len",
                "1000000000000000",
                "--allow-long-max-model-len",
            ],
            vec!["max_model_len", "between"],
        ),
        (
            vec!["--concurrency", "1000000000"],
            vec!["concurrency", "between"],
        ),
        (
            vec!["--request-rate", "1e-300", "--num-requests", "10"],
            vec!["rate", "1e-300"],
        ),
        (
            vec!["--isl-dist", "exponential", "--isl", "100000000000"],
            vec!["input", "tokens"],
        ),
        (vec!["--duration", "1e300"], vec!["duration_s", "between"]),
    ];
    for (extra, words) in rows {
        let mut args: Vec<&str> = BASE.to_vec();
        args.extend(extra);
        refused(&args, &words);
    }
}

#[test]
fn threads_outside_one_to_sixty_four_are_refused_naming_the_flag() {
    for t in [
        "--threads=0",
        "--threads=65",
        "--threads=-1",
        "--threads=many",
    ] {
        let mut args: Vec<&str> = BASE.to_vec();
        args.push(t);
        let (code, out, err) = servesim(&args);
        assert_eq!(code, 2, "{t} should be refused: {out}{err}");
        assert!(err.contains("--threads"), "{t}: {err}");
        assert!(!err.contains("panicked"), "{t}: {err}");
    }
}

#[test]
fn kv_cache_memory_larger_than_the_gpu_does_not_fit() {
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend(["--kv-cache-memory", "100000000000", "--concurrency", "1"]);
    refused(&args, &["kv_cache_memory", "does not fit"]);
}

#[test]
fn step_with_u64_max_decode_is_refused() {
    let s = scenario_file("hostile_step.json");
    refused(
        &[
            "step",
            "--scenario",
            s.to_str().unwrap(),
            "--decode",
            "18446744073709551615",
            "--ctx",
            "1000",
        ],
        &["--decode", "between"],
    );
    refused(
        &[
            "step",
            "--scenario",
            s.to_str().unwrap(),
            "--decode",
            "4",
            "--ctx",
            "18446744073709551615",
        ],
        &["--ctx", "between"],
    );
}

#[test]
fn a_scenario_with_a_utf8_bom_is_read() {
    let s = scenario_file("bom_src.json");
    let text = std::fs::read_to_string(&s).unwrap();
    let p = tmp("bom.json");
    std::fs::write(&p, format!("\u{feff}{text}")).unwrap();
    let (code, out, err) = servesim(&[
        "sweep",
        "--scenario",
        p.to_str().unwrap(),
        "--print-scenario",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, text);
}

#[test]
fn endless_files_are_refused_with_a_size_limit() {
    if !std::path::Path::new("/dev/zero").exists() {
        return;
    }
    refused(
        &["sweep", "--scenario", "/dev/zero", "--print-scenario"],
        &["/dev/zero", "MiB"],
    );
    let s = scenario_file("zero_step.json");
    let _ = s;
    refused(
        &["step", "--scenario", "/dev/zero", "--decode", "1"],
        &["/dev/zero", "MiB"],
    );
}

#[test]
fn a_ten_megabyte_model_id_gets_a_short_answer() {
    let id = "m".repeat(10 << 20);
    let p = tmp("huge_id.json");
    let s = scenario_file("huge_id_src.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
    v["model"] = serde_json::json!({ "catalog": id });
    std::fs::write(&p, v.to_string()).unwrap();
    refused(
        &["sweep", "--scenario", p.to_str().unwrap()],
        &["not in the catalog", "characters"],
    );
}

#[test]
fn errors_do_not_repeat_their_prefix() {
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend(["--tp", "3", "--concurrency", "1"]);
    let (code, _, err) = servesim(&args);
    assert_eq!(code, 1);
    assert!(!err.contains("tp: tp:"), "{err}");
    let words: Vec<&str> = err.split_whitespace().collect();
    for w in words.windows(2) {
        assert!(!(w[0].ends_with(':') && w[0] == w[1]), "{err}");
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(["models"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end at once: the first write fails with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.trim().is_empty(), "quiet: {err}");
}

/// Tiny accepted values are printed compactly (`1e-300`, not a 300-digit decimal), in the
/// capacity report, the does-not-fit reason and the printed vLLM command.
#[test]
fn tiny_values_are_printed_compactly() {
    let (code, out, err) = servesim(&[
        "capacity",
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
        "--gpu",
        "h100",
        "--gpu-memory-utilization",
        "1e-300",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("gpu_memory_utilization 1e-300"), "{out}");
    assert!(!out.contains("0.00000000000000000000"), "{out}");
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend(["--gpu-memory-utilization", "1e-300", "--concurrency", "1"]);
    let (code, _, err) = servesim(&args);
    assert_eq!(code, 1);
    assert!(err.contains("x 1e-300)"), "{err}");
    assert!(err.len() < 700, "{err}");
}

/// A range with no unit reads "between 0.001 and 100 (got ...)", without a doubled space.
#[test]
fn range_messages_have_no_doubled_space() {
    let dir = tmp("gamma-cv");
    let p = scenario_file("gamma-cv-base.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["workload"]["arrival"] = serde_json::json!({"type": "gamma", "rate": 2, "cv": 1e-160});
    v["sweep"] = serde_json::json!({"request_rates": [2], "duration_s": 20});
    std::fs::write(&dir, v.to_string()).unwrap();
    refused(
        &["sweep", "--scenario", dir.to_str().unwrap()],
        &["workload.arrival.cv", "between 0.001 and 100 (got 1e-160)"],
    );
}

/// A level whose window holds no completed request shows "no value" (with the reason) in the
/// table, `null` in the JSON and an empty cell in the CSV, never 0 tok/s.
#[test]
fn an_empty_window_gives_no_value_in_table_json_and_csv() {
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend([
        "--max-model-len",
        "2048",
        "--isl",
        "4096",
        "--concurrency",
        "1",
        "--num-requests",
        "3",
    ]);
    let (code, out, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("c=1 "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("no value"), "{row}");
    assert!(!row.contains(" 0.0 "), "{row}");
    assert!(
        out.contains("c=1: no value: no request completed: the engine rejected the requests"),
        "{out}"
    );
    assert!(err.contains("no value output tok/s"), "{err}");
    let mut json_args = args.clone();
    json_args.push("--json");
    let (code, out, err) = servesim(&json_args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let l = &v["levels"][0];
    assert!(l["output_tokens_per_s"].is_null(), "{l}");
    assert!(l["output_tokens_per_s_per_gpu"].is_null(), "{l}");
    assert!(l["requests_per_s"].is_null(), "{l}");
    assert!(l["no_value"]
        .as_str()
        .unwrap()
        .contains("no request completed"));
    let mut csv_args = args.clone();
    csv_args.push("--csv");
    let (code, out, _) = servesim(&csv_args);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    let col = lines[0]
        .split(',')
        .position(|h| h == "output_tokens_per_s")
        .unwrap();
    assert_eq!(lines[1].split(',').nth(col), Some(""));
}

/// A measured file with 200,000 distinct levels is refused at once (each level is a whole
/// simulation: it would run for hours), naming the sweep's level list and the limit.
#[test]
fn a_measured_file_with_too_many_levels_is_refused_at_once() {
    let scenario = scenario_file("many-levels-base.json");
    let csv = tmp("many-levels.csv");
    let mut text = String::from("concurrency,output_tokens_per_s\n");
    for i in 1..=200_000 {
        text.push_str(&format!("{i},{}\n", 1000 + i % 7));
    }
    std::fs::write(&csv, text).unwrap();
    let t = std::time::Instant::now();
    let (code, _, err) = servesim(&[
        "compare",
        "--scenario",
        scenario.to_str().unwrap(),
        "--measured",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or(&err);
    for w in ["sweep.concurrency", "at most 1000 levels", "200000"] {
        assert!(line.contains(w), "`{w}` not in: {err}");
    }
    assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
}
