//! `servesim validate --fit --threads N`: the fit's jobs run on threads and the written table, the
//! accuracy summary and the printed report are the same bytes for any thread count. Runs on a
//! small subset of the shipped calibration rows with one pass so it stays fast.

mod common;
use common::servesim;
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servesim-cli-fit-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Header plus the inference-sim Llama-2-7B and Mixtral rows and the gpustack Qwen3-8B rows.
fn subset() -> PathBuf {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../servesim-core/data/calibration/measured-points.csv"
    ))
    .unwrap();
    let mut out = String::new();
    for (i, line) in src.lines().enumerate() {
        if i == 0
            || (line.starts_with("inference-sim/training")
                && (line.contains("Llama-2-7b-hf") || line.contains("Mixtral")))
            || (line.starts_with("gpustack") && line.contains("Qwen/Qwen3-8B,"))
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    let p = tmp("subset.csv");
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn fit_on_two_threads_writes_the_same_bytes_as_on_one() {
    let csv = subset();
    let run = |threads: &str| {
        let table = tmp(&format!("eff-{threads}.json"));
        let summary = tmp(&format!("summary-{threads}.json"));
        let (code, out, err) = servesim(&[
            "validate",
            csv.to_str().unwrap(),
            "--fit",
            "--rounds",
            "1",
            "--held-out-rounds",
            "1",
            "--threads",
            threads,
            "--fit-out",
            table.to_str().unwrap(),
            "--summary-out",
            summary.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&format!("on {threads} thread(s)")), "{err}");
        (
            out,
            std::fs::read_to_string(table).unwrap(),
            std::fs::read_to_string(summary).unwrap(),
        )
    };
    let one = run("1");
    let two = run("2");
    assert_eq!(one, two);
    assert!(one.1.contains("hopper@vllm-0.15"), "{}", one.1);
    assert!(one.0.contains("leave-one-family-out"));
}

#[test]
fn a_thread_count_out_of_range_is_refused_naming_the_flag() {
    let (code, _, err) = servesim(&["validate", "x.csv", "--fit", "--threads", "0"]);
    assert_ne!(code, 0);
    assert!(err.contains("--threads"), "{err}");
}
