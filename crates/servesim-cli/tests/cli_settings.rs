//! The workload and sweep flags (`--isl --osl --concurrency --request-rate --burst --num-requests
//! --duration --warmup --seed --sla --trace ...`, applied through the core's settings table):
//! `servesim sweep ... --print-scenario` gives, byte for byte, the scenario (or the error) that
//! `tests/golden/cli_flag_scenarios.json` records. The file was written by the build before the
//! flags moved to the table; regenerate with `UPDATE_GOLDEN=1` only for a change meant to move
//! a scenario, and say why.

use std::path::PathBuf;

mod common;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn flags_build_the_recorded_scenarios_byte_for_byte() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        tmp.join("trace.jsonl"),
        "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n\
         {\"timestamp\": 500, \"input_length\": 700, \"output_length\": 20, \"hash_ids\": [1, 2]}\n",
    )
    .unwrap();
    let path = repo().join("tests/golden/cli_flag_scenarios.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert!(cases.len() >= 20);
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for case in cases.iter_mut() {
        let args: Vec<String> = case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                a.as_str()
                    .unwrap()
                    .replace("@REPO@", &repo().to_string_lossy())
                    .replace("@TMP@", &tmp.to_string_lossy())
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::servesim(&refs);
        if update {
            case["code"] = code.into();
            case["stdout"] = out.into();
            case["stderr"] = err.into();
            continue;
        }
        assert_eq!(
            code as i64,
            case["code"].as_i64().unwrap(),
            "{args:?}: {err}"
        );
        assert_eq!(out, case["stdout"].as_str().unwrap(), "{args:?}");
        assert_eq!(err, case["stderr"].as_str().unwrap(), "{args:?}");
    }
    if update {
        std::fs::write(&path, serde_json::to_string_pretty(&cases).unwrap()).unwrap();
    }
}
