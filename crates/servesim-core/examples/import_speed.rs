//! Measures the measured-data importers on large generated inputs: a 200,000-row CSV table and
//! 40,000 `vllm bench serve --save-result` objects (JSON lines), each imported through
//! `compare::import_text` (docs/performance.md, "Imports").
//! Run: `cargo run --release -p servesim-core --example import_speed [ROWS] [OBJECTS]`

use servesim_core::compare::{import_text, ImportOptions};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let objects: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(40_000);

    let mut csv =
        String::from("concurrency,output_throughput (tok/s),ttft_p50 (ms),itl_p50 (ms)\n");
    for i in 0..rows {
        csv.push_str(&format!(
            "{},{}.5,{}.25,{}.125\n",
            i + 1,
            1000 + i % 977,
            50 + i % 311,
            10 + i % 37
        ));
    }
    let t0 = Instant::now();
    let got = import_text(&csv, &ImportOptions::default()).expect("CSV imports");
    let dt = t0.elapsed().as_secs_f64();
    let levels: usize = got.runs.iter().map(|r| r.levels.len()).sum();
    println!(
        "csv: {rows} rows, {:.1} MB, {levels} levels in {dt:.3} s",
        csv.len() as f64 / 1e6
    );

    let mut jsonl = String::new();
    for i in 0..objects {
        jsonl.push_str(&format!(
            "{{\"date\": \"20260101-000000\", \"max_concurrency\": {}, \"completed\": 100, \"request_throughput\": {}.5, \"output_throughput\": {}.5, \"mean_ttft_ms\": {}.25, \"median_ttft_ms\": {}.5, \"mean_itl_ms\": {}.125, \"mean_tpot_ms\": {}.125}}\n",
            i + 1,
            1 + i % 13,
            1000 + i % 977,
            50 + i % 311,
            49 + i % 311,
            10 + i % 37,
            11 + i % 37
        ));
    }
    let t0 = Instant::now();
    let got = import_text(&jsonl, &ImportOptions::default()).expect("JSON lines import");
    let dt = t0.elapsed().as_secs_f64();
    let levels: usize = got.runs.iter().map(|r| r.levels.len()).sum();
    println!(
        "vllm jsonl: {objects} objects, {:.1} MB, {levels} levels in {dt:.3} s",
        jsonl.len() as f64 / 1e6
    );
}
