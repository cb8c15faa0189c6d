//! Importers on every fixture format, the header alias table, units, and every bad-input case.

use servesim_core::compare::{
    alias_table, classify_header, import_files, import_text, parse_kv_cache_tokens, HeaderClass,
    ImportError, ImportOptions, Imported, LevelKind, MeasuredRun, SourceFormat,
};
use servesim_core::metric::{MetricId, Stat};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/imports/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

fn value(run: &MeasuredRun, level: f64, m: MetricId) -> f64 {
    let l = run
        .levels
        .iter()
        .find(|l| l.level == level)
        .unwrap_or_else(|| panic!("no level {level}"));
    *l.metrics
        .get(&m)
        .unwrap_or_else(|| panic!("no {m} at {level}"))
}

fn unmatched_names(i: &Imported) -> Vec<String> {
    i.unmatched.iter().map(|u| u.name.clone()).collect()
}

fn opts() -> ImportOptions {
    ImportOptions::default()
}

// ---------- header aliases ----------

#[test]
fn every_documented_alias_matches_its_metric() {
    for (header, metric) in alias_table() {
        match classify_header(header) {
            HeaderClass::Metric { metric: m, .. } => assert_eq!(m, metric, "{header}"),
            other => panic!("{header}: {other:?}"),
        }
    }
}

#[test]
fn level_arm_and_ambiguous_headers_are_classified() {
    for (h, k) in [
        ("concurrency", LevelKind::Concurrency),
        ("c", LevelKind::Concurrency),
        ("max_concurrency", LevelKind::Concurrency),
        ("request_rate", LevelKind::RequestRate),
        ("rate", LevelKind::RequestRate),
        ("qps", LevelKind::RequestRate),
        ("RPS", LevelKind::RequestRate),
        ("burst", LevelKind::Burst),
    ] {
        assert_eq!(classify_header(h), HeaderClass::Level(k), "{h}");
    }
    assert_eq!(classify_header("arm"), HeaderClass::Arm);
    // No statistic: not guessed.
    assert!(matches!(
        classify_header("TTFT (ms)"),
        HeaderClass::Unmatched(_)
    ));
    // A statistic ServeSim does not have.
    assert!(matches!(
        classify_header("p95_ttft_ms"),
        HeaderClass::Unmatched(_)
    ));
    assert!(matches!(
        classify_header("p95_tpot_ms"),
        HeaderClass::Unmatched(_)
    ));
    // Per-request TPOT percentiles, and a TPOT header without a statistic is the mean.
    for (h, s) in [
        ("median_tpot_ms", Stat::P50),
        ("p90_tpot_ms", Stat::P90),
        ("TPOT (ms)", Stat::Mean),
    ] {
        match classify_header(h) {
            HeaderClass::Metric { metric, .. } => assert_eq!(metric, MetricId::TpotMs(s), "{h}"),
            other => panic!("{h}: {other:?}"),
        }
    }
    assert!(matches!(
        classify_header("total_token_throughput"),
        HeaderClass::Unmatched(_)
    ));
    assert!(matches!(
        classify_header("tput_per_gpu"),
        HeaderClass::Unmatched(_)
    ));
    assert!(matches!(
        classify_header("gpu_type"),
        HeaderClass::Unmatched(_)
    ));
}

// ---------- vLLM ----------

#[test]
fn vllm_save_result_files_become_one_concurrency_sweep() {
    let a = fixture("vllm_c8.json");
    let b = fixture("vllm_c16.json");
    let imp = import_files(&[("c16.json", &b), ("c8.json", &a)], &opts()).unwrap();
    assert_eq!(imp.runs.len(), 1);
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::VllmBenchJson);
    assert_eq!(run.level_kind, LevelKind::Concurrency);
    assert_eq!(run.arm, "measured");
    assert_eq!(
        run.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
        vec![8.0, 16.0]
    );
    close(value(run, 8.0, MetricId::OutputTokensPerS), 1988.3);
    close(value(run, 16.0, MetricId::OutputTokensPerS), 3700.0);
    close(value(run, 8.0, MetricId::TtftMs(Stat::P50)), 58.2);
    close(value(run, 8.0, MetricId::TtftMs(Stat::P90)), 73.0);
    close(value(run, 8.0, MetricId::ItlMs(Stat::P99)), 5.2);
    close(value(run, 16.0, MetricId::ItlMs(Stat::Mean)), 4.25);
    close(value(run, 8.0, MetricId::TpotMs(Stat::Mean)), 3.96);
    close(value(run, 8.0, MetricId::TpotMs(Stat::P50)), 3.95);
    close(value(run, 8.0, MetricId::TpotMs(Stat::P90)), 4.01);
    close(value(run, 8.0, MetricId::TpotMs(Stat::P99)), 4.1);
    close(value(run, 8.0, MetricId::RequestsPerS), 1.94);
    close(value(run, 8.0, MetricId::CompletedRequests), 80.0);
    // E2E in ms -> s.
    close(value(run, 8.0, MetricId::E2eS(Stat::Mean)), 4.112);
    close(value(run, 8.0, MetricId::E2eS(Stat::P99)), 4.21);
    let names = unmatched_names(&imp);
    for n in ["total_token_throughput", "std_tpot_ms", "std_ttft_ms"] {
        assert!(
            names.contains(&n.to_string()),
            "{n} not reported: {names:?}"
        );
    }
}

#[test]
fn vllm_jsonl_gives_the_same_levels_as_separate_files() {
    let imp = import_text(&fixture("vllm_append.jsonl"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.levels.len(), 2);
    close(value(run, 16.0, MetricId::TtftMs(Stat::P50)), 66.0);
}

#[test]
fn vllm_infinite_rate_without_concurrency_is_a_burst_of_num_prompts() {
    let imp = import_text(&fixture("vllm_burst.json"), &opts()).unwrap();
    assert_eq!(imp.runs[0].level_kind, LevelKind::Burst);
    assert_eq!(imp.runs[0].levels[0].level, 64.0);
    assert!(imp.notes.iter().any(|n| n.contains("burst")));
}

// ---------- AIPerf ----------

#[test]
fn aiperf_json_reads_concurrency_units_and_itl_as_tpot() {
    let imp = import_text(&fixture("aiperf_profile_export_aiperf.json"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::AiperfJson);
    assert_eq!(run.level_kind, LevelKind::Concurrency);
    assert_eq!(run.levels[0].level, 32.0);
    close(value(run, 32.0, MetricId::TtftMs(Stat::Mean)), 180.5);
    close(value(run, 32.0, MetricId::TtftMs(Stat::P99)), 320.0);
    close(value(run, 32.0, MetricId::E2eS(Stat::P50)), 10.2); // 10200 ms
    close(value(run, 32.0, MetricId::TpotMs(Stat::Mean)), 9.85);
    close(value(run, 32.0, MetricId::TpotMs(Stat::P50)), 9.8);
    close(value(run, 32.0, MetricId::TpotMs(Stat::P99)), 11.0);
    close(value(run, 32.0, MetricId::OutputTokensPerS), 3174.4);
    close(value(run, 32.0, MetricId::RequestsPerS), 3.1);
    close(value(run, 32.0, MetricId::CompletedRequests), 300.0);
    assert!(!run.levels[0]
        .metrics
        .contains_key(&MetricId::ItlMs(Stat::Mean)));
    assert!(!run.levels[0]
        .metrics
        .contains_key(&MetricId::OutputTokensPerSPerUser));
    assert!(unmatched_names(&imp).contains(&"output_token_throughput_per_user".to_string()));
}

#[test]
fn aiperf_records_nested_under_records_are_read_too() {
    let old = r#"{"records": {"time_to_first_token": {"tag": "time_to_first_token", "header": "Time to First Token", "unit": "ms", "avg": 12.0, "p50": 11.0}},
                  "input_config": {"loadgen": {"concurrency": 4}}}"#;
    let imp = import_text(old, &opts()).unwrap();
    close(value(&imp.runs[0], 4.0, MetricId::TtftMs(Stat::P50)), 11.0);
}

#[test]
fn aiperf_csv_needs_the_level_and_then_matches_the_json() {
    let csv = fixture("aiperf_profile_export_aiperf.csv");
    let e = import_text(&csv, &opts()).unwrap_err();
    assert!(matches!(e, ImportError::MissingField { .. }), "{e}");
    assert!(e.to_string().contains("concurrency"));
    let o = ImportOptions {
        level: Some((LevelKind::Concurrency, 32.0)),
        ..opts()
    };
    let from_csv = import_text(&csv, &o).unwrap();
    let from_json = import_text(&fixture("aiperf_profile_export_aiperf.json"), &opts()).unwrap();
    assert_eq!(from_csv.runs[0].source_format, SourceFormat::AiperfCsv);
    assert_eq!(from_csv.runs[0].levels, from_json.runs[0].levels);
}

// ---------- GuideLLM ----------

#[test]
fn guidellm_report_gives_one_level_per_benchmark() {
    let imp = import_text(&fixture("guidellm_benchmarks.json"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::GuidellmJson);
    assert_eq!(run.level_kind, LevelKind::Concurrency);
    assert_eq!(
        run.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
        vec![4.0, 8.0]
    );
    close(value(run, 4.0, MetricId::TtftMs(Stat::Mean)), 45.0);
    close(value(run, 4.0, MetricId::TtftMs(Stat::P50)), 45.0 * 0.95); // `median`
    close(value(run, 8.0, MetricId::TtftMs(Stat::P99)), 52.0 * 1.6);
    close(value(run, 8.0, MetricId::E2eS(Stat::Mean)), 3.5); // seconds already
    close(value(run, 8.0, MetricId::TpotMs(Stat::Mean)), 13.5);
    close(value(run, 8.0, MetricId::OutputTokensPerS), 585.0);
    close(value(run, 8.0, MetricId::InputTokensPerS), 1170.0);
    close(value(run, 8.0, MetricId::RequestsPerS), 2.28);
    assert!(unmatched_names(&imp).contains(&"time_per_output_token_ms".to_string()));
    assert!(!imp.notes.is_empty());
}

// ---------- InferenceX ----------

#[test]
fn inferencex_agg_json_converts_seconds_and_names_the_arm() {
    let imp = import_text(&fixture("inferencex_agg.json"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::InferenceXJson);
    assert_eq!(run.arm, "h200 vllm fp8 tp8 ep1");
    close(value(run, 4.0, MetricId::TtftMs(Stat::Mean)), 80.0);
    close(value(run, 4.0, MetricId::TtftMs(Stat::P50)), 80.0 * 0.98);
    close(value(run, 16.0, MetricId::TpotMs(Stat::Mean)), 10.0);
    close(value(run, 16.0, MetricId::Interactivity), 100.0);
    close(value(run, 16.0, MetricId::E2eS(Stat::P99)), 10.5 * 1.5);
    close(value(run, 16.0, MetricId::OutputTokensPerSPerGpu), 1900.0);
    let names = unmatched_names(&imp);
    for n in ["tput_per_gpu", "median_intvty", "std_ttft"] {
        assert!(names.contains(&n.to_string()), "{n}: {names:?}");
    }
}

#[test]
fn inferencex_summary_table_reads_medians() {
    let imp = import_text(&fixture("inferencex_summary.md"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::InferenceXTable);
    close(value(run, 4.0, MetricId::TtftMs(Stat::P50)), 78.4);
    close(value(run, 16.0, MetricId::E2eS(Stat::P50)), 10.29);
    close(value(run, 16.0, MetricId::OutputTokensPerSPerGpu), 1900.0);
    assert!(!run.levels[0].metrics.contains_key(&MetricId::Interactivity));
    // Its TPOT column is the median per-request TPOT.
    assert!(!run.levels[0]
        .metrics
        .contains_key(&MetricId::TpotMs(Stat::Mean)));
    close(value(run, 4.0, MetricId::TpotMs(Stat::P50)), 7.84);
    let names = unmatched_names(&imp);
    for n in ["Interactivity (tok/s/user)", "TPUT per GPU", "Hardware"] {
        assert!(names.contains(&n.to_string()), "{n}: {names:?}");
    }
}

#[test]
fn inferencex_agg_keys_in_a_csv_are_seconds() {
    let csv =
        "conc,median_ttft,mean_tpot,output_tput_per_gpu,tput_per_gpu\n4,0.08,0.008,600,1200\n";
    let imp = import_text(csv, &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::InferenceXTable);
    close(value(run, 4.0, MetricId::TtftMs(Stat::P50)), 80.0);
    close(value(run, 4.0, MetricId::TpotMs(Stat::Mean)), 8.0);
}

// ---------- generic tables ----------

#[test]
fn csv_with_arm_and_excluded_columns_splits_arms() {
    let imp = import_text(&fixture("table_arms.csv"), &opts()).unwrap();
    assert_eq!(imp.runs.len(), 2);
    let tp8 = &imp.runs[0];
    assert_eq!(tp8.arm, "TP8");
    assert_eq!(imp.runs[1].arm, "TP4, tuned");
    close(value(tp8, 16.0, MetricId::OutputTokensPerS), 1800.0);
    close(value(tp8, 16.0, MetricId::TtftMs(Stat::P50)), 60.0);
    close(value(tp8, 16.0, MetricId::ItlMs(Stat::Mean)), 11.0);
    close(value(tp8, 16.0, MetricId::E2eS(Stat::P90)), 2.8);
    close(value(tp8, 16.0, MetricId::OutputTokensPerSPerUser), 88.0);
    assert_eq!(
        tp8.levels[2].excluded.as_deref(),
        Some("CPU-tier hits above zero")
    );
    assert_eq!(imp.runs[1].levels[0].excluded, None); // "no"
    let gpu = imp.unmatched.iter().find(|u| u.name == "gpu_type").unwrap();
    assert_eq!(gpu.column, Some(8));
}

#[test]
fn tsv_units_are_converted_to_the_metric_units() {
    let imp = import_text(&fixture("table_units.tsv"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::Tsv);
    close(value(run, 8.0, MetricId::TtftMs(Stat::P50)), 250.0); // 0.25 s
    close(value(run, 8.0, MetricId::E2eS(Stat::P50)), 1.5); // 1500 ms
    close(value(run, 16.0, MetricId::ItlMs(Stat::P99)), 14.0);
    close(value(run, 16.0, MetricId::OutputTokensPerS), 1900.0);
}

#[test]
fn markdown_table_with_prose_around_it() {
    let imp = import_text(&fixture("table_report.md"), &opts()).unwrap();
    let run = &imp.runs[0];
    assert_eq!(run.source_format, SourceFormat::Markdown);
    close(value(run, 8.0, MetricId::TtftMs(Stat::P50)), 58.2);
    close(value(run, 16.0, MetricId::Interactivity), 222.2);
    close(value(run, 16.0, MetricId::OutputTokensPerSPerGpu), 460.0);
    close(value(run, 16.0, MetricId::TpotMs(Stat::Mean)), 4.5);
}

#[test]
fn column_mapping_overrides_auto_matching() {
    let csv = "concurrency,lat_x (s),TTFT p50 (ms),junk\n8,0.5,40,1\n";
    let mut o = opts();
    o.mapping
        .insert("lat_x (s)".into(), Some(MetricId::TtftMs(Stat::P99)));
    o.mapping.insert("TTFT p50 (ms)".into(), None);
    o.mapping.insert("not a header".into(), None);
    let imp = import_text(csv, &o).unwrap();
    let l = &imp.runs[0].levels[0];
    close(l.metrics[&MetricId::TtftMs(Stat::P99)], 500.0);
    assert!(!l.metrics.contains_key(&MetricId::TtftMs(Stat::P50)));
    let names = unmatched_names(&imp);
    assert!(names.contains(&"TTFT p50 (ms)".to_string()));
    assert!(names.contains(&"junk".to_string()));
    assert!(imp.notes.iter().any(|n| n.contains("not a header")));
}

#[test]
fn concurrency_cells_may_carry_a_c_prefix_and_rate_columns_give_rate_levels() {
    let imp = import_text("concurrency,output_throughput\nc8,100\nc16,180\n", &opts()).unwrap();
    assert_eq!(imp.runs[0].levels[1].level, 16.0);
    let imp = import_text("request_rate,output_throughput\n2.5,100\n", &opts()).unwrap();
    assert_eq!(imp.runs[0].level_kind, LevelKind::RequestRate);
    assert_eq!(imp.runs[0].levels[0].level, 2.5);
}

// ---------- KV log ----------

#[test]
fn kv_cache_line_is_parsed_from_a_pasted_log() {
    assert_eq!(
        parse_kv_cache_tokens(&fixture("vllm_startup.log")).unwrap(),
        Some(878_592)
    );
    assert_eq!(
        parse_kv_cache_tokens("GPU KV cache size: 12345 tokens").unwrap(),
        Some(12_345)
    );
    assert_eq!(parse_kv_cache_tokens("no such line").unwrap(), None);
    let two = "(EngineCore_0) GPU KV cache size: 1,000 tokens\n(EngineCore_1) GPU KV cache size: 1,000 tokens\n";
    assert_eq!(parse_kv_cache_tokens(two).unwrap(), Some(1000));
    let e = parse_kv_cache_tokens(
        "GPU KV cache size: 1,000 tokens\nx\nGPU KV cache size: 2,000 tokens",
    )
    .unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
    assert!(parse_kv_cache_tokens("GPU KV cache size: lots").is_err());
}

// ---------- bad input ----------

fn err(text: &str) -> ImportError {
    import_text(text, &opts()).unwrap_err()
}

#[test]
fn ragged_row_names_the_line_as_the_user_sees_it() {
    let e = err("# comment\n\nconcurrency,output_throughput\n8,100\n16\n");
    match &e {
        ImportError::RaggedRow {
            line,
            header_line,
            expected,
            found,
            ..
        } => {
            assert_eq!((*line, *header_line, *expected, *found), (5, 3, 2, 1));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("Fix:"));
}

#[test]
fn text_in_a_numeric_column_names_line_and_column() {
    let e = err("concurrency,TTFT p50 (ms)\n8,40\n16,fast\n");
    match &e {
        ImportError::NotANumber {
            line,
            column,
            header,
            value,
            ..
        } => {
            assert_eq!((*line, *column), (3, 2));
            assert_eq!(header, "TTFT p50 (ms)");
            assert_eq!(value, "fast");
        }
        other => panic!("{other:?}"),
    }
    let e = err("concurrency,TTFT p50 (ms)\neight,40\n");
    assert!(
        matches!(e, ImportError::NotANumber { column: 1, .. }),
        "{e:?}"
    );
}

#[test]
fn unknown_or_missing_units_are_errors() {
    let e = err("concurrency,TTFT p50 (furlongs)\n8,40\n");
    match &e {
        ImportError::UnknownUnit {
            line, column, unit, ..
        } => {
            assert_eq!((*line, *column), (1, 2));
            assert_eq!(unit, "furlongs");
        }
        other => panic!("{other:?}"),
    }
    // A time unit on a throughput.
    assert!(matches!(
        err("concurrency,output throughput (ms)\n8,40\n"),
        ImportError::UnknownUnit { .. }
    ));
    assert!(matches!(
        err("concurrency,TTFT p50\n8,40\n"),
        ImportError::MissingUnit { column: 2, .. }
    ));
}

#[test]
fn duplicate_levels_name_both_lines() {
    let e = err("concurrency,output_throughput\n8,100\n16,200\n8,110\n");
    match e {
        ImportError::DuplicateLevel {
            line, first_line, ..
        } => assert_eq!((line, first_line), (4, 2)),
        other => panic!("{other:?}"),
    }
    // Across files too.
    let a = fixture("vllm_c8.json");
    let e = import_files(&[("a.json", &a), ("b.json", &a)], &opts()).unwrap_err();
    assert!(matches!(e, ImportError::DuplicateLevel { .. }), "{e:?}");
    // The same level in two arms is fine.
    let ok = import_text("arm,c,output_throughput\nx,8,1\ny,8,2\n", &opts()).unwrap();
    assert_eq!(ok.runs.len(), 2);
}

#[test]
fn zero_and_negative_values_are_rejected() {
    assert!(matches!(
        err("concurrency,output_throughput\n8,0\n"),
        ImportError::OutOfRange {
            line: 2,
            column: 2,
            ..
        }
    ));
    assert!(matches!(
        err("concurrency,output_throughput\n8,-3\n"),
        ImportError::OutOfRange { .. }
    ));
    assert!(matches!(
        err("concurrency,output_throughput\n0,10\n"),
        ImportError::OutOfRange { column: 1, .. }
    ));
    assert!(matches!(
        err("concurrency,output_throughput\n-8,10\n"),
        ImportError::OutOfRange { .. }
    ));
    let mut v = fixture("vllm_c8.json");
    v = v.replace("\"mean_ttft_ms\": 61.5", "\"mean_ttft_ms\": 0");
    let e = import_text(&v, &opts()).unwrap_err();
    match e {
        ImportError::OutOfRange { line, header, .. } => {
            assert_eq!(header, "mean_ttft_ms");
            assert_eq!(line, 23); // the line of "mean_ttft_ms" in the file
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_formats_are_typed_errors() {
    assert!(matches!(err(""), ImportError::Empty { .. }));
    assert!(matches!(err("   \n\n"), ImportError::Empty { .. }));
    assert!(matches!(
        err("just some prose without a table"),
        ImportError::UnknownFormat { .. }
    ));
    assert!(matches!(
        err("{\"hello\": 1}"),
        ImportError::UnknownFormat { .. }
    ));
    assert!(matches!(
        err("model,gpu\nllama,h200\n"),
        ImportError::NoLevelColumn { .. }
    ));
    assert!(matches!(
        err("concurrency,gpu\n8,h200\n"),
        ImportError::NoMetricColumns { .. }
    ));
    assert!(matches!(
        err("concurrency,output_throughput\n"),
        ImportError::NoLevels { .. }
    ));
    assert!(matches!(
        err("concurrency,\"output_throughput\n8,1\n"),
        ImportError::UnbalancedQuote { line: 1, .. }
    ));
    let a = fixture("vllm_c8.json");
    let t = fixture("table_arms.csv");
    assert!(matches!(
        import_files(&[("a.json", &a), ("t.csv", &t)], &opts()).unwrap_err(),
        ImportError::MixedFormats { .. }
    ));
}

#[test]
fn truncated_json_reports_where_it_stops() {
    let a = fixture("vllm_c8.json");
    let cut = &a[..a.find("\"mean_itl_ms\"").unwrap()];
    match import_text(cut, &opts()).unwrap_err() {
        ImportError::InvalidJson { line, .. } => assert!(line >= 30, "line {line}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_fixtures_and_random_bytes_never_panic() {
    let names = [
        "vllm_c8.json",
        "vllm_append.jsonl",
        "aiperf_profile_export_aiperf.json",
        "aiperf_profile_export_aiperf.csv",
        "guidellm_benchmarks.json",
        "inferencex_agg.json",
        "inferencex_summary.md",
        "table_arms.csv",
        "table_units.tsv",
        "table_report.md",
    ];
    let o = ImportOptions {
        level: Some((LevelKind::Concurrency, 4.0)),
        ..opts()
    };
    for n in names {
        let text = fixture(n);
        let bytes = text.as_bytes();
        let step = (bytes.len() / 97).max(1);
        let mut cut = 0;
        while cut <= bytes.len() {
            if let Ok(s) = std::str::from_utf8(&bytes[..cut]) {
                let _ = import_text(s, &o);
                let _ = parse_kv_cache_tokens(s);
            }
            cut += step;
        }
    }
    // Deterministic pseudo-random bytes (xorshift), lossily decoded.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for len in [1usize, 7, 64, 300, 2000] {
        for _ in 0..40 {
            let mut buf = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push((x & 0xff) as u8);
            }
            let s = String::from_utf8_lossy(&buf);
            let _ = import_text(&s, &o);
            let _ = parse_kv_cache_tokens(&s);
            // Printable noise shaped like a table.
            let table: String = buf
                .iter()
                .map(|b| match b % 8 {
                    0 => ',',
                    1 => '\n',
                    2 => '|',
                    3 => '"',
                    4 => '-',
                    _ => (b'0' + b % 10) as char,
                })
                .collect();
            let _ = import_text(&table, &o);
        }
    }
}

/// An import over the size limit is refused before parsing, with the limit named.
#[test]
fn imports_over_the_size_limit_are_refused_naming_the_limit() {
    use servesim_core::compare::MAX_IMPORT_BYTES;
    let mut big = String::from("concurrency,output_throughput (tok/s)\n");
    while big.len() <= MAX_IMPORT_BYTES {
        big.push_str("1,2\n");
    }
    let e = import_text(&big, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, ImportError::TooLarge { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("MAX_IMPORT_BYTES") && msg.contains(&MAX_IMPORT_BYTES.to_string()));
}
