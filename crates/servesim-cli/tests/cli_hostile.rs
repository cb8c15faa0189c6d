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
