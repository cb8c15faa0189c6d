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

/// `servesim validate CSV --fit` with one pass per descent, writing the table and the summary
/// to `tag`-named temporary files; more arguments follow.
fn one_pass_fit(csv: &std::path::Path, tag: &str) -> (Vec<String>, PathBuf, PathBuf) {
    let table = tmp(&format!("eff-{tag}.json"));
    let summary = tmp(&format!("summary-{tag}.json"));
    let args = [
        "validate",
        csv.to_str().unwrap(),
        "--fit",
        "--rounds",
        "1",
        "--held-out-rounds",
        "1",
        "--fit-out",
        table.to_str().unwrap(),
        "--summary-out",
        summary.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    (args, table, summary)
}

#[test]
fn fit_on_two_threads_writes_the_same_bytes_as_on_one() {
    let csv = subset();
    let run = |threads: &str| {
        let (mut args, table, summary) = one_pass_fit(&csv, threads);
        args.extend(["--threads".to_string(), threads.to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = servesim(&args);
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

/// `--fit-shape shared-kernels` writes a plain generation entry holding only kernel and link
/// fields and release-line entries holding only the engine's software costs; a scenario then
/// reads both layered (the report's own validation of the new table says so in its description).
/// `--fit-shape` without `--fit` is refused naming `--fit`.
#[test]
fn a_shared_kernels_fit_writes_a_generation_entry_under_its_release_lines() {
    let csv = subset();
    let (mut args, table, _) = one_pass_fit(&csv, "shared");
    args.extend(["--fit-shape".to_string(), "shared-kernels".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = servesim(&args);
    assert_eq!(code, 0, "{err}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(table).unwrap()).unwrap();
    assert!(t["description"]
        .as_str()
        .unwrap()
        .contains("shared by its release lines"));
    let gens = t["generations"].as_object().unwrap();
    assert!(gens.contains_key("hopper"), "{gens:?}");
    assert!(gens.contains_key("hopper@vllm-0.11") && gens.contains_key("hopper@vllm-0.15"));
    for (k, m) in gens {
        for f in m.as_object().unwrap().keys() {
            assert_eq!(
                k.contains('@'),
                servesim_core::validate::ERA_PARAMS.contains(&f.as_str()),
                "{k}: {f}"
            );
        }
    }
    let (code, _, err) = servesim(&["validate", "x.csv", "--fit-shape", "per-generation"]);
    assert_ne!(code, 0);
    assert!(err.contains("--fit"), "{err}");
}

/// The validation set (rows no fit reads), as shipped.
fn validation_set() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../servesim-core/data/validation/measured-points-validation.csv"
    ))
}

/// After a refit, `--check CSV` validates rows the fit never read with the new table and with
/// the shipped one, side by side: the same aggregates `servesim validate CSV` gives for the
/// shipped table, and the rows that moved most. With `--json` it goes to stderr, so stdout stays
/// one JSON document. Without `--fit` the flag is refused, naming what it needs.
#[test]
fn a_refit_is_checked_on_rows_it_never_read() {
    let csv = subset();
    let v = validation_set();
    let shipped = {
        let (code, out, err) = servesim(&["validate", v.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        r["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["scope"] == "all points" && a["family"] == "Throughput")
            .cloned()
            .unwrap()
    };
    let fit = |json: bool| {
        let (mut args, _, _) = one_pass_fit(&csv, &format!("check-{json}"));
        args.extend(["--check".to_string(), v.to_str().unwrap().to_string()]);
        if json {
            args.push("--json".to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = servesim(&args);
        assert_eq!(code, 0, "{err}");
        (out, err)
    };
    let (out, _) = fit(false);
    let section = out
        .split("### Never fitted (")
        .nth(1)
        .unwrap_or_else(|| panic!("no check section:\n{out}"));
    assert!(
        section.contains("this fit against the shipped table"),
        "{section}"
    );
    // The shipped table's column is `servesim validate CSV`'s aggregate.
    let row = section
        .lines()
        .find(|l| l.starts_with("| output tok/s |"))
        .unwrap();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[2], shipped["n"].to_string(), "{row}");
    assert_eq!(
        cells[4],
        format!("{:.1}%", shipped["median_abs_pct"].as_f64().unwrap()),
        "{row}"
    );
    assert!(section.contains("Largest moves"), "{section}");
    // --json: stdout is one JSON document, the check on stderr.
    let (out, err) = fit(true);
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    assert!(err.contains("### Never fitted ("), "{err}");
    // Without --fit there is no refit to check.
    let (code, _, err) = servesim(&["validate", csv.to_str().unwrap(), "--check", "x.csv"]);
    assert_ne!(code, 0);
    assert!(err.contains("--fit"), "{err}");
    // A missing file, or one the fit reads, is refused before the fit runs: no table written.
    for (check, says) in [
        ("no-such-file.csv", "--check no-such-file.csv"),
        (csv.to_str().unwrap(), "not out of sample"),
    ] {
        let (mut args, table, summary) = one_pass_fit(&csv, "refused");
        args.extend(["--check".to_string(), check.to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = servesim(&args);
        assert_ne!(code, 0);
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("fit: job"), "the fit ran: {err}");
        assert!(!table.exists() && !summary.exists());
    }
}
