//! The calibration CSV parser and the row -> scenario mapping rules (docs/accuracy.md).

use servesim_core::dtype::WeightPrecision;
use servesim_core::scenario::{ModelRef, Scenario};
use servesim_core::validate::{
    self, parse_points, setup_for, split_csv, Family, ValidateError, REQUIRED_COLUMNS,
};
use servesim_core::workload::{RawArrival, RawContent, RawLengthDist};

const SHIPPED: &str = include_str!("../data/calibration/measured-points.csv");

#[test]
fn shipped_file_has_63_points_from_two_sources() {
    let pts = parse_points(SHIPPED).unwrap();
    assert_eq!(pts.len(), 63);
    let sim = pts
        .iter()
        .filter(|p| p.source == "inference-sim/training")
        .count();
    let gs = pts
        .iter()
        .filter(|p| p.source.starts_with("gpustack"))
        .count();
    assert_eq!((sim, gs), (20, 43));
    // The first data row is line 2 and its quoted workload text keeps its commas.
    assert_eq!(pts[0].line, 2);
    assert!(pts[0]
        .workload
        .contains("11 system prompts x 4 users, system 100"));
}

#[test]
fn every_shipped_row_maps_to_a_scenario() {
    for p in parse_points(SHIPPED).unwrap() {
        let s = setup_for(&p).unwrap_or_else(|e| panic!("line {}: {e}", p.line));
        assert!(
            !s.targets.is_empty(),
            "line {} has nothing to compare",
            p.line
        );
        // The typed scenario is a scenario document: written and read back, it is the same.
        let back = Scenario::from_json(&s.scenario.to_json())
            .unwrap_or_else(|e| panic!("line {}: {e}", p.line));
        assert_eq!(back, s.scenario, "line {}", p.line);
    }
}

#[test]
fn arrival_follows_rate_and_concurrency_columns() {
    for p in parse_points(SHIPPED).unwrap() {
        let s = setup_for(&p).unwrap();
        let w = &s.scenario.workload;
        match (p.request_rate, p.concurrency) {
            (None, None) => {
                assert_eq!(
                    w.arrival,
                    RawArrival::Burst {
                        count: p.num_requests.unwrap()
                    },
                    "line {}",
                    p.line
                );
                assert_eq!(s.scenario.sweep.num_requests, p.num_requests);
            }
            (_, Some(c)) => {
                let RawArrival::ClosedLoop { concurrency, .. } = w.arrival else {
                    panic!("line {}: {:?}", p.line, w.arrival)
                };
                assert_eq!(concurrency, c);
            }
            (Some(r), None) => {
                let (RawArrival::Constant { rate } | RawArrival::Poisson { rate }) = w.arrival
                else {
                    panic!("line {}: {:?}", p.line, w.arrival)
                };
                assert_eq!(rate, r);
                let RawContent::Synthetic {
                    input,
                    shared_prefix,
                    ..
                } = &w.requests
                else {
                    panic!("line {}: {:?}", p.line, w.requests)
                };
                if let Some(sp) = shared_prefix {
                    // inference-perf v0.2's pool: its default 10 groups x 10 prompts, cycled
                    // (the runs' effective results/config.yaml), whatever the profile text says.
                    assert!(p.source.starts_with("inference-sim"), "line {}", p.line);
                    assert_eq!((sp.groups, sp.prompts_per_group), (10.0, Some(10.0)));
                    // prefix + question = the prompt the server counted (re-tokenized), else
                    // the configured isl.
                    let RawLengthDist::Constant { tokens } = input else {
                        panic!("line {}: {input:?}", p.line)
                    };
                    let measured = p
                        .notes
                        .split("Measured prompt_len mean=")
                        .nth(1)
                        .and_then(|r| r.split(|c: char| c != '.' && !c.is_ascii_digit()).next())
                        .and_then(|x| x.parse::<f64>().ok());
                    let want =
                        measured.map_or(p.isl.unwrap(), |m| (m - sp.tokens).round() + sp.tokens);
                    assert_eq!(tokens + sp.tokens, want, "line {}", p.line);
                    assert!(
                        measured.is_some_and(|m| m > p.isl.unwrap()),
                        "line {}",
                        p.line
                    );
                } else {
                    // Request-count open loop: every request measured.
                    assert_eq!(s.scenario.sweep.num_requests, p.num_requests);
                }
            }
        }
    }
}

#[test]
fn sharegpt_rows_use_the_mean_lengths_from_the_notes() {
    let pts = parse_points(SHIPPED).unwrap();
    let p = pts
        .iter()
        .find(|p| {
            p.model == "deepseek-ai/DeepSeek-R1-0528" && p.isl.is_none() && p.concurrency.is_none()
        })
        .unwrap();
    let s = setup_for(p).unwrap();
    let RawContent::Synthetic { input, output, .. } = &s.scenario.workload.requests else {
        panic!("{:?}", s.scenario.workload.requests)
    };
    assert!(matches!(input, RawLengthDist::Lognormal { mean, .. } if *mean == 219.2));
    assert!(matches!(output, RawLengthDist::Lognormal { mean, .. } if *mean == 200.8));
    // The release runs as itself, on the config that stands in for it (as the page and the CLI
    // resolve the id), with nothing that differs.
    assert_eq!(
        s.scenario.model,
        ModelRef::Catalog("deepseek-ai/DeepSeek-R1-0528".into())
    );
    let (_, r) = servesim_core::model::ids::resolve("deepseek-ai/DeepSeek-R1-0528").unwrap();
    assert_eq!(r.config_id, "deepseek-ai/DeepSeek-R1");
    assert!(r.differences.is_empty(), "{:?}", r.differences);
    assert_eq!(s.scenario.weight_precision, WeightPrecision::Checkpoint);
}

#[test]
fn stated_engine_limits_are_passed_through() {
    let pts = parse_points(SHIPPED).unwrap();
    let a100 = pts.iter().find(|p| p.gpu.starts_with("A100")).unwrap();
    let s = setup_for(a100).unwrap();
    assert_eq!(s.scenario.engine.max_num_seqs, Some(256));
    assert_eq!(s.scenario.engine.max_num_batched_tokens, Some(2048));
    let gpt = pts
        .iter()
        .find(|p| p.model == "openai/gpt-oss-120b" && p.tp == 1)
        .unwrap();
    assert_eq!(
        setup_for(gpt).unwrap().scenario.engine.max_model_len,
        Some(32768)
    );
    let sim = &pts[0];
    assert_eq!(
        setup_for(sim).unwrap().scenario.engine.max_model_len,
        Some(4096)
    );
}

#[test]
fn source_caveats_choose_and_exclude_metrics() {
    let pts = parse_points(SHIPPED).unwrap();
    for p in &pts {
        let s = setup_for(p).unwrap();
        let it = s
            .targets
            .iter()
            .find(|t| t.0 == Family::InterToken)
            .unwrap();
        let tput = s
            .targets
            .iter()
            .find(|t| t.0 == Family::Throughput)
            .unwrap();
        if p.source.starts_with("inference-sim") {
            // derived (e2e - ttft)/(osl - 1) is a TPOT
            assert_eq!(it.1.name(), "tpot_ms_mean");
            let excluded = tput.3.is_some();
            assert_eq!(
                excluded,
                p.model == "meta-llama/Llama-2-7b-hf",
                "line {}",
                p.line
            );
        } else {
            assert_eq!(it.1.name(), "itl_ms_mean");
            assert!(tput.3.is_none());
        }
    }
}

#[test]
fn errors_name_row_and_column() {
    let header = REQUIRED_COLUMNS.join(",");
    let mut cells: Vec<&str> = vec![""; REQUIRED_COLUMNS.len()];
    let set = |cells: &mut Vec<&'static str>, c: &str, v: &'static str| {
        let i = REQUIRED_COLUMNS.iter().position(|x| *x == c).unwrap();
        cells[i] = v;
    };
    for (c, v) in [
        ("source", "x"),
        ("model", "Qwen/Qwen3-8B"),
        ("gpu", "H100"),
        ("num_gpus", "1"),
        ("tp", "0"),
        ("dp", "1"),
        ("ep", "1"),
        ("request_rate", "inf"),
    ] {
        set(&mut cells, c, v);
    }
    let text = format!("{header}\n{}\n", cells.join(","));
    match parse_points(&text).unwrap_err() {
        ValidateError::BadCell { line, column, .. } => {
            assert_eq!((line, column.as_str()), (2, "tp"));
        }
        e => panic!("{e}"),
    }
    set(&mut cells, "tp", "1");
    set(&mut cells, "ttft_p50_ms", "fast");
    let text = format!("{header}\n{}\n", cells.join(","));
    let e = parse_points(&text).unwrap_err();
    assert!(
        matches!(&e, ValidateError::BadCell { column, .. } if column == "ttft_p50_ms"),
        "{e}"
    );
    let e = parse_points("source,model\nx,y\n").unwrap_err();
    assert!(matches!(e, ValidateError::MissingColumn { .. }));
    let e = split_csv("a,b\n\"open,x\n").unwrap_err();
    assert!(matches!(e, ValidateError::Csv { line: 2, .. }), "{e}");
}

/// Every row of the second file parses, and each either maps to a scenario or names the
/// capability it waits for (none is dropped silently).
#[test]
fn more_rows_run_or_name_what_they_wait_for() {
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let points = parse_points(text).expect("measured-points-more.csv parses");
    assert_eq!(points.len(), 614);
    let mut waiting = 0;
    for p in &points {
        match servesim_core::validate::waits_for(p) {
            Some(why) => {
                assert!(!why.is_empty());
                waiting += 1;
            }
            None => {
                setup_for(p).unwrap_or_else(|e| panic!("line {}: {e}", p.line));
            }
        }
    }
    // MTP (GLM-5-FP8, 52 rows) and DP+EP (MiniMax DP8+EP8, 7 rows) run: MTP with its stated
    // number of speculative tokens and the documented acceptance, DP+EP in lockstep.
    let mtp: Vec<_> = points
        .iter()
        .filter(|p| servesim_core::validate::mtp_tokens(p).is_some())
        .collect();
    assert_eq!(mtp.len(), 52);
    for p in &mtp {
        assert!(
            servesim_core::validate::waits_for(p).is_none(),
            "line {}",
            p.line
        );
        let s = setup_for(p).unwrap();
        let spec = s.scenario.engine.speculative_config.as_ref().unwrap();
        assert_eq!(spec.method.as_deref(), Some("mtp"));
        assert_eq!(spec.num_speculative_tokens, Some(1));
        assert_eq!(
            s.scenario
                .engine
                .speculative_acceptance
                .as_ref()
                .unwrap()
                .mean_acceptance_length,
            Some(1.0 + servesim_core::validate::MTP_ACCEPTANCE_PER_TOKEN)
        );
    }
    let dpep: Vec<_> = points.iter().filter(|p| p.dp > 1 && p.ep > 1).collect();
    assert_eq!(dpep.len(), 7);
    for p in &dpep {
        let s = setup_for(p).unwrap();
        assert_eq!(
            s.scenario.enable_expert_parallel,
            Some(true),
            "line {}",
            p.line
        );
        assert_eq!(s.scenario.written_version(), 2);
    }
    // InferenceX rows compare TPOT from tok/s/user (1000 / median TPOT).
    let per_user = points
        .iter()
        .filter(|p| p.source.starts_with("SemiAnalysis"))
        .filter(|p| servesim_core::validate::waits_for(p).is_none())
        .filter(|p| {
            setup_for(p)
                .unwrap()
                .targets
                .iter()
                .any(|t| t.0 == servesim_core::validate::Family::InterToken)
        })
        .count();
    assert_eq!(per_user, 196);
    assert!(waiting < points.len() / 2, "{waiting} rows wait");
    // The combined file numbers the second file's rows after the first file's.
    let first = include_str!("../data/calibration/measured-points.csv");
    let both = servesim_core::validate::combine_csvs(&[first, text]).unwrap();
    let all = parse_points(&both).unwrap();
    assert_eq!(all.len(), 63 + 614);
    // gpustack's GLM-4.5-Air A100 and H100 pages repeat four runs figure for figure: those eight
    // rows pair up (A100 line l with H100 line l + 5) and wait; no other row repeats another GPU's.
    let repeated: Vec<(usize, usize)> = all
        .iter()
        .filter_map(|p| p.repeats_line.map(|l| (p.line, l)))
        .collect();
    assert_eq!(
        repeated,
        vec![
            (272, 277),
            (273, 278),
            (274, 279),
            (275, 280),
            (277, 272),
            (278, 273),
            (279, 274),
            (280, 275)
        ]
    );
    for p in all.iter().filter(|p| p.repeats_line.is_some()) {
        let why = servesim_core::validate::waits_for(p).unwrap();
        assert!(
            why.contains("repeats another row"),
            "line {}: {why}",
            p.line
        );
        assert!(p.model.contains("GLM-4.5-Air"));
    }
    // The GLM-4.5-Air ShareGPT rows (their own figures on each page) and the GLM-4.6 rows run.
    for l in [271, 276, 281, 286, 287, 292] {
        let p = all.iter().find(|p| p.line == l).unwrap();
        assert!(servesim_core::validate::waits_for(p).is_none(), "line {l}");
        setup_for(p).unwrap_or_else(|e| panic!("line {l}: {e}"));
    }
}

#[test]
fn a_row_repeating_another_gpus_figures_waits_but_the_same_gpu_does_not() {
    let header = REQUIRED_COLUMNS.join(",");
    let row = |gpu: &str, tok: &str| {
        REQUIRED_COLUMNS
            .iter()
            .map(|c| match *c {
                "source" => "s".to_string(),
                "model" => "Qwen/Qwen3-8B".to_string(),
                "gpu" => gpu.to_string(),
                "num_gpus" | "tp" | "dp" | "ep" => "1".to_string(),
                "request_rate" => "inf".to_string(),
                "isl" => "100".to_string(),
                "osl" => "10".to_string(),
                "output_tok_s" => tok.to_string(),
                "ttft_p50_ms" => "50".to_string(),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let text = format!(
        "{header}\n{}\n{}\n{}\n{}\n",
        row("H100-SXM-80GB", "100"),
        row("A100-SXM-80GB", "100"),
        row("H100-SXM-80GB", "200"),
        row("H100-SXM-80GB", "200"),
    );
    let pts = parse_points(&text).unwrap();
    assert_eq!(pts[0].repeats_line, Some(3));
    assert_eq!(pts[1].repeats_line, Some(2));
    assert_eq!((pts[2].repeats_line, pts[3].repeats_line), (None, None));
    assert!(servesim_core::validate::waits_for(&pts[0]).is_some());
}

#[test]
fn engine_flags_recorded_in_the_notes_are_applied() {
    use servesim_core::validate::engine_flags_in_notes;
    // The InferenceX blog's serve flags (benchmarks/single_node/minimaxm2.5_fp4_b200.sh, as the
    // CSV quotes them): engine flags read, client flags and flags with a CSV column not.
    let notes =
        "serve flags (x.sh @d4948f9937): --gpu-memory-utilization 0.90 --max-model-len 9472 \
                 (isl+osl+256) --kv-cache-dtype fp8 --max-num-batched-tokens 16384 (2*ISL) \
                 --no-enable-prefix-caching --block-size=32; client --num-prompts 40";
    assert_eq!(
        engine_flags_in_notes(notes),
        [
            "--gpu-memory-utilization=0.90",
            "--max-model-len=9472",
            "--no-enable-prefix-caching",
            "--block-size=32"
        ]
    );
    // gpustack's quoted parameter list, and dstack's offline engine arguments.
    assert_eq!(
        engine_flags_in_notes("`[params: --reasoning-parser=qwen3 --max-model-len=32768]`;"),
        ["--max-model-len=32768"]
    );
    assert_eq!(
        engine_flags_in_notes(
            "benchmark_throughput.py --input-len 128 --max-model-len 91680 --enforce-eager --num-scheduler-step 15"
        ),
        ["--max-model-len=91680", "--enforce-eager"]
    );
    // V0's boolean switches take a value (`StoreBoolean`): False is the `--no-` form, in either
    // spelling (the MI300X serve command of dstack's H100 vs MI300X study). Multi-step
    // scheduling is not an engine flag here (docs/accuracy.md says why).
    assert_eq!(
        engine_flags_in_notes("--enable-chunked-prefill False --num-scheduler-steps 15"),
        ["--no-enable-chunked-prefill"]
    );
    assert_eq!(
        engine_flags_in_notes(
            "vllm serve ... -tp 8 --enable-chunked-prefill=False --num-scheduler-step 15"
        ),
        ["--no-enable-chunked-prefill"]
    );
    assert_eq!(
        engine_flags_in_notes("--enable-chunked-prefill --max-model-len 8192"),
        ["--enable-chunked-prefill", "--max-model-len=8192"]
    );
    // A compilation config is one JSON value over several words, quoted or (transcribed without
    // its quotes) bare; its keys come out quoted.
    assert_eq!(
        engine_flags_in_notes(
            r#"`vllm serve m --compilation-config '{"cudagraph_mode": "PIECEWISE"}' --max-model-len 2248`"#
        ),
        [
            r#"--compilation-config={"cudagraph_mode": "PIECEWISE"}"#,
            "--max-model-len=2248"
        ]
    );
    assert_eq!(
        engine_flags_in_notes(
            "--compilation-config {mode:3, pass_config:{fuse_minimax_qk_norm:true}} --gpu-memory-utilization 0.9"
        ),
        [
            r#"--compilation-config={"mode":3, "pass_config":{"fuse_minimax_qk_norm":true}}"#,
            "--gpu-memory-utilization=0.9"
        ]
    );
    // An object that never closes is not taken whole: its first word is passed on, and the
    // argument registry names the flag when it refuses it.
    assert_eq!(
        engine_flags_in_notes("--compilation-config {mode:3"),
        ["--compilation-config={mode:3"]
    );
    // The multi-step count is read only to say, per row, that it is not modelled.
    use servesim_core::validate::scheduler_steps_in_notes;
    assert_eq!(
        scheduler_steps_in_notes("knobs: num-scheduler-steps=15, enable-chunked-prefill=TRUE"),
        Some(15)
    );
    assert_eq!(
        scheduler_steps_in_notes("... --enforce-eager --num-scheduler-step 1; all 4 prompts"),
        Some(1)
    );
    assert_eq!(scheduler_steps_in_notes("--max-model-len 8192"), None);

    // On the shipped rows: the 18 multi-step rows of dstack's sweep and the 28 rows of its H100 vs
    // MI300X study that ran with 15 scheduler steps run with them (`engine.num_scheduler_steps`),
    // but for the 9 sweep rows whose chunked-prefill setting cannot be applied (multi-step admits
    // differently with it on and off), which say so.
    let both = servesim_core::validate::combine_csvs(&[
        include_str!("../data/calibration/measured-points.csv"),
        include_str!("../data/calibration/measured-points-more.csv"),
    ])
    .unwrap();
    let mut multi = 0;
    let mut multi_applied = 0;
    let mut chunked_knob = 0;
    for p in parse_points(&both).unwrap() {
        // dstack's sweep records chunked prefill off next to a 512-token budget, a pair vLLM
        // refuses at the model's context: each such row says it runs with the scenario's settings
        // (the H100 vs MI300X study states no budget and runs with chunked prefill off).
        if p.notes.contains("enable-chunked-prefill=FALSE") && p.max_num_batched_tokens.is_some() {
            let s = setup_for(&p).unwrap();
            assert!(
                s.notes
                    .iter()
                    .any(|n| n.starts_with("enable-chunked-prefill=FALSE recorded, not applied")),
                "line {}",
                p.line
            );
            chunked_knob += 1;
        }
        if scheduler_steps_in_notes(&p.notes).is_some_and(|n| n > 1)
            && servesim_core::validate::waits_for(&p).is_none()
        {
            let s = setup_for(&p).unwrap();
            let n = scheduler_steps_in_notes(&p.notes).unwrap() as i64;
            let unappliable = s
                .notes
                .iter()
                .any(|x| x.starts_with("enable-chunked-prefill=FALSE recorded, not applied"));
            if unappliable {
                assert_eq!(
                    s.scenario.engine.num_scheduler_steps, None,
                    "line {}",
                    p.line
                );
                assert!(
                    s.notes.iter().any(|x| x
                        .starts_with(&format!("num-scheduler-steps {n} recorded, not applied"))),
                    "line {}",
                    p.line
                );
            } else {
                assert_eq!(
                    s.scenario.engine.num_scheduler_steps,
                    Some(n),
                    "line {}",
                    p.line
                );
                assert!(s.scenario.resolve().is_ok(), "line {}", p.line);
                multi_applied += 1;
            }
            multi += 1;
        }
    }
    assert_eq!(multi, 18 + 28);
    assert_eq!(multi_applied, 9 + 28);
    assert_eq!(chunked_knob, 12);

    // On the shipped rows: every row stating them runs with them.
    let more = include_str!("../data/calibration/measured-points-more.csv");
    let mut with_len = 0;
    let mut eager = 0;
    let mut no_chunked = 0;
    for p in parse_points(more).unwrap() {
        let flags = engine_flags_in_notes(&p.notes);
        if flags.is_empty() || servesim_core::validate::waits_for(&p).is_some() {
            continue;
        }
        let s = setup_for(&p).unwrap_or_else(|e| panic!("line {}: {e}", p.line));
        assert!(
            s.notes.iter().any(|n| n.contains(&flags.join(" "))),
            "line {}: {:?}",
            p.line,
            s.notes
        );
        if let Some(v) = flags
            .iter()
            .find_map(|f| f.strip_prefix("--max-model-len="))
        {
            assert_eq!(
                s.scenario.engine.max_model_len,
                v.parse().ok(),
                "line {}",
                p.line
            );
            with_len += 1;
        }
        if flags.iter().any(|f| f == "--enforce-eager") {
            assert_eq!(s.scenario.engine.enforce_eager, Some(true));
            eager += 1;
        }
        if flags.iter().any(|f| f == "--no-enable-chunked-prefill") {
            assert_eq!(s.scenario.engine.enable_chunked_prefill, Some(false));
            no_chunked += 1;
        }
    }
    // 178 rows state a context length; gpustack's `-pp 2` row (line 314) waits.
    assert_eq!((with_len, eager, no_chunked), (177, 57, 9));
}

#[test]
fn a_flag_whose_value_is_a_shell_variable_is_named_and_not_applied() {
    use servesim_core::validate::{engine_flags_in_notes, unresolved_flags_in_notes};
    // SemiAnalysis InferenceX PR #1061's serve line, as the validation CSV quotes it.
    let notes = "--gpu-memory-utilization 0.95 --max-model-len $MAX_MODEL_LEN --block-size=64 \
                 --no-enable-prefix-caching`; client: ...";
    assert_eq!(
        engine_flags_in_notes(notes),
        [
            "--gpu-memory-utilization=0.95",
            "--block-size=64",
            "--no-enable-prefix-caching"
        ]
    );
    assert_eq!(
        unresolved_flags_in_notes(notes),
        ["--max-model-len=$MAX_MODEL_LEN"]
    );
}

#[test]
fn the_eager_step_overhead_and_the_prefill_attention_rate_are_fitted_only_for_the_v0_era() {
    use servesim_core::validate::{fit_params_for, FIT_PARAMS};
    // V0 runs every step with a prefill without a CUDA graph; in V1 eager steps are the
    // exception (`--enforce-eager` rows), too few to fit the overhead on. V1's prefill attention
    // runs FlashAttention / FlashInfer kernels whose published rate is the literature value; the
    // V1 keys' rows (short prompts, or a harness with its own entry) do not identify it.
    for key in ["hopper@vllm-0.7", "cdna3@vllm-0.7"] {
        let p = fit_params_for(key, 5);
        assert!(p.contains(&"step_overhead_eager_s"), "{key}");
        assert!(p.contains(&"prefill_attention"), "{key}");
    }
    for key in ["hopper@vllm-0.11", "hopper@vllm-0.15", "ampere@vllm-0.11"] {
        let p = fit_params_for(key, 5);
        assert!(!p.contains(&"step_overhead_eager_s"), "{key}");
        assert!(!p.contains(&"prefill_attention"), "{key}");
        assert_eq!(p.len(), FIT_PARAMS.len() - 2, "{key}");
    }
    // A key with fewer than 3 models fits the four broad factors only.
    assert_eq!(fit_params_for("blackwell@vllm-0.15", 2).len(), 4);
}

/// The endpoint is chat where the row names the chat endpoint (`vllm bench serve --backend
/// openai-chat`) or its client is guidellm (GPUStack's benchmark-runner, whose requests are
/// guidellm's default `chat_completions`); completions elsewhere (docs/accuracy.md "How a row
/// becomes a simulation").
#[test]
fn sharegpt_lengths_are_clamped_as_the_client_filtered_them() {
    use servesim_core::validate::{
        GUIDELLM_SHAREGPT_MAX, SHAREGPT_MAX_OUTPUT, SHAREGPT_MAX_PROMPT,
    };
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let (mut guidellm, mut vllm_bench) = (0, 0);
    for p in parse_points(text).unwrap() {
        if p.isl.is_some() || servesim_core::validate::waits_for(&p).is_some() {
            continue;
        }
        let s = setup_for(&p).unwrap();
        let RawContent::Synthetic { input, output, .. } = &s.scenario.workload.requests else {
            continue;
        };
        let (
            RawLengthDist::Lognormal { max: Some(pi), .. },
            RawLengthDist::Lognormal { max: Some(po), .. },
        ) = (input, output)
        else {
            continue;
        };
        // GPUStack's benchmark-runner hands guidellm every first turn of ShareGPT (its
        // `sharegpt_to_guidellm.py` filters nothing by default); `vllm bench serve` keeps
        // prompts of at most 1,024 tokens.
        let expected = if p.workload.to_ascii_lowercase().contains("guidellm") {
            guidellm += 1;
            (GUIDELLM_SHAREGPT_MAX, GUIDELLM_SHAREGPT_MAX)
        } else {
            vllm_bench += 1;
            (SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_OUTPUT)
        };
        assert_eq!((*pi, *po), expected, "line {}", p.line);
    }
    assert!(
        guidellm > 0 && vllm_bench > 0,
        "{guidellm} guidellm, {vllm_bench} vllm bench"
    );
}

#[test]
fn the_endpoint_is_chat_where_the_row_or_its_client_says_so() {
    use servesim_core::scenario::Endpoint;
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let (mut guidellm, mut chat, mut completions) = (0, 0, 0);
    for p in parse_points(text).unwrap() {
        if servesim_core::validate::waits_for(&p).is_some() {
            continue;
        }
        let s = setup_for(&p).unwrap();
        let w = p.workload.to_ascii_lowercase();
        let is_chat = s.scenario.endpoint == Some(Endpoint::Chat);
        assert_eq!(
            is_chat,
            w.contains("chat endpoint") || w.contains("guidellm"),
            "line {}: {}",
            p.line,
            p.workload
        );
        if w.contains("guidellm") {
            guidellm += 1;
            assert!(
                s.notes.iter().any(|n| n
                    == "API endpoint: chat (guidellm's default request type, chat_completions)"),
                "line {}: {:?}",
                p.line,
                s.notes
            );
        }
        if is_chat {
            chat += 1;
        } else if !p.offline {
            completions += 1;
        }
    }
    // The mapped guidellm rows: gpustack's Qwen3.5-35B-A3B pages on one H200 (vLLM 0.17.1, 27)
    // and GLM-5.2-FP8 on 8 H200 (vLLM 0.24, 5; they do not start in the capacity model).
    assert_eq!(guidellm, 32);
    assert!(
        chat > guidellm && completions > 0,
        "{chat} chat, {completions} completions"
    );
}

/// The simulated rows of `text` with `isl` and `osl`, each with its setup and its scenario's input
/// and output length distributions.
fn fixed_length_rows(
    text: &str,
) -> Vec<(
    servesim_core::validate::CalibrationPoint,
    servesim_core::validate::PointSetup,
    RawLengthDist,
    RawLengthDist,
)> {
    parse_points(text)
        .unwrap()
        .into_iter()
        .filter(|p| p.isl.is_some() && p.osl.is_some())
        .filter(|p| servesim_core::validate::waits_for(p).is_none())
        .filter_map(|p| {
            let s = setup_for(&p).unwrap();
            let RawContent::Synthetic { input, output, .. } = s.scenario.workload.requests.clone()
            else {
                return None;
            };
            Some((p, s, input, output))
        })
        .collect()
}

/// Fixed-length rows whose client did not ignore EOS: `osl` is `max_tokens`, and where the notes'
/// totals say the run generated fewer tokens per request, the scenario's outputs have that mean
/// (what the row's output tok/s counts), with a note saying so; other rows keep `osl`.
#[test]
fn fixed_length_rows_generate_the_tokens_the_run_generated() {
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let (mut early, mut full) = (0, 0);
    for (p, s, _, output) in fixed_length_rows(text) {
        let osl = p.osl.unwrap();
        let output = &output;
        let RawLengthDist::Constant { tokens } = output else {
            // A stated random range (the next test) draws lengths instead.
            assert!(p.workload.contains("-1.0x)"), "line {}: {output:?}", p.line);
            continue;
        };
        let noted = s
            .notes
            .iter()
            .any(|n| n.starts_with("outputs stopped early: "));
        if noted {
            early += 1;
            assert!(*tokens < osl && *tokens >= 1.0, "line {}", p.line);
        } else {
            full += 1;
            assert_eq!(*tokens, osl.round(), "line {}", p.line);
        }
    }
    // gpustack's random-dataset bursts of gpt-oss, Qwen3 and GLM-4.6 (`vllm bench serve`
    // without --ignore-eos) and the TGI-vs-vLLM study's sonnet runs.
    assert!(early >= 40, "{early} rows stopped early");
    assert!(full > early, "{full} rows at osl");
    // gpt-oss-20b on one H100, random 4000/200 burst of 500: 52,309 tokens generated, 104.6 per
    // request (gpustack's page), so 105 per request, not 200.
    let p = parse_points(text)
        .unwrap()
        .into_iter()
        .find(|p| p.model == "openai/gpt-oss-20b" && p.notes.contains("out 104.6"))
        .unwrap();
    let s = setup_for(&p).unwrap();
    let RawContent::Synthetic { output, .. } = &s.scenario.workload.requests else {
        panic!()
    };
    assert_eq!(output, &RawLengthDist::Constant { tokens: 105.0 });
    assert!(
        s.notes.iter().any(|n| n
            == "outputs stopped early: 104.6 generated tokens per request on average of at most 200 (the notes' totals); every request generates 105"),
        "{:?}",
        s.notes
    );
}

/// A fixed-length workload that states its client's random range (`(0.8-1.0x)`, the InferenceX
/// blog rows) draws input and output lengths uniformly in that range of `isl` / `osl`, as
/// InferenceX's client does; without one the lengths stay constant.
#[test]
fn a_stated_random_range_gives_uniform_lengths() {
    use servesim_core::validate::range_ratio_in;
    assert_eq!(
        range_ratio_in("fixed-seq-len random 8192/1024 (0.8-1.0x), closed-loop concurrency 4"),
        Some((0.8, 1.0))
    );
    for w in [
        "random 1024/128, closed loop c=16",
        "random 8192/1024 (1.0-0.8x)",
        "random 8192/1024 (0-1.0x)",
        "(ab-cdx)",
    ] {
        assert_eq!(range_ratio_in(w), None, "{w}");
    }
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let mut ranged = 0;
    for (p, _, input, output) in fixed_length_rows(text) {
        let (isl, osl) = (p.isl.unwrap(), p.osl.unwrap());
        let (input, output) = (&input, &output);
        if p.workload.contains("(0.8-1.0x)") {
            ranged += 1;
            for (d, n) in [(input, isl), (output, osl)] {
                assert_eq!(
                    d,
                    &RawLengthDist::UniformRatio {
                        nominal: n,
                        min_ratio: 0.8,
                        max_ratio: 1.0
                    },
                    "line {}",
                    p.line
                );
            }
        } else {
            assert!(
                matches!(input, RawLengthDist::Constant { .. }),
                "line {}",
                p.line
            );
        }
    }
    assert_eq!(ranged, 27, "the InferenceX blog rows");
}

/// A row served with pipeline parallelism waits (ServeSim does not model it) instead of running
/// as something else: the parser reads every spelling, and in the shipped files exactly gpustack's
/// gpt-oss-120b `-pp 2` row on 2 H100 carries one.
#[test]
fn a_pipeline_parallel_row_waits() {
    use servesim_core::validate::{pipeline_parallel_in_notes, waits_for};
    assert_eq!(
        pipeline_parallel_in_notes("serve cmd: `vllm serve m --async-scheduling -pp 2`; section"),
        Some(2)
    );
    assert_eq!(
        pipeline_parallel_in_notes("vllm serve m --pipeline-parallel-size=4 --tp 2"),
        Some(4)
    );
    assert_eq!(
        pipeline_parallel_in_notes("vllm serve m --pipeline-parallel-size 1"),
        Some(1)
    );
    assert_eq!(pipeline_parallel_in_notes("vllm serve m -tp 8"), None);
    assert_eq!(pipeline_parallel_in_notes("vllm serve m -pp"), None);
    let both = servesim_core::validate::combine_csvs(&[
        include_str!("../data/calibration/measured-points.csv"),
        include_str!("../data/calibration/measured-points-more.csv"),
    ])
    .unwrap();
    let all = parse_points(&both).unwrap();
    let pp: Vec<usize> = all
        .iter()
        .filter(|p| pipeline_parallel_in_notes(&p.notes).is_some_and(|n| n > 1))
        .map(|p| p.line)
        .collect();
    assert_eq!(pp, [314]);
    let why = waits_for(&all[314 - 2]).expect("the -pp 2 row waits");
    assert!(why.contains("pipeline parallelism"), "{why}");
}

/// gpustack's gpt-oss-20b H100 page has one serve command naming gpt-oss-120b (section 5, copied
/// from the 120b page); its client requests gpt-oss-20b, so the row runs the page's model and says
/// why. Pages whose path names no catalog model (`glm-4.x`, `references`) keep the row's model.
#[test]
fn a_row_runs_the_model_its_page_is_about() {
    use servesim_core::validate::{page_model, resolve_model};
    let both = servesim_core::validate::combine_csvs(&[
        include_str!("../data/calibration/measured-points.csv"),
        include_str!("../data/calibration/measured-points-more.csv"),
    ])
    .unwrap();
    let all = parse_points(&both).unwrap();
    let moved: Vec<(usize, &str)> = all
        .iter()
        .filter_map(|p| page_model(p).map(|(id, _)| (p.line, id)))
        .collect();
    assert_eq!(moved, [(330, "openai/gpt-oss-20b")]);
    let p = &all[330 - 2];
    assert_eq!(p.model, "openai/gpt-oss-120b");
    let r = resolve_model(p).unwrap();
    assert_eq!(r.catalog_id, "openai/gpt-oss-20b");
    assert!(r.notes[0].contains("its client requests openai/gpt-oss-20b"));
    let s = setup_for(p).unwrap();
    assert_eq!(
        s.scenario.model,
        ModelRef::Catalog("openai/gpt-oss-20b".into())
    );
    // A family page keeps the row's model.
    let glm = all
        .iter()
        .find(|p| p.source_ref.contains("performance-lab/glm-4.x/"))
        .unwrap();
    assert!(page_model(glm).is_none());
}

/// One resolution of model ids: every calibration and validation row whose model the page and the
/// CLI resolve (`model::ids`) runs that resolution (the release itself, with its own context and
/// quantization), unless the row's name is one of the listed file aliases (checkpoints the page does
/// not know, each with its reason) or its gpustack page names another model.
#[test]
fn rows_resolve_their_models_as_the_page_does() {
    let files = [
        SHIPPED,
        include_str!("../data/calibration/measured-points-more.csv"),
        include_str!("../data/validation/measured-points-validation.csv"),
    ];
    let mut checked = 0;
    for f in files {
        for p in parse_points(f).unwrap() {
            let name = p.model.split_whitespace().next().unwrap_or("");
            if validate::MODEL_FILE_ALIASES
                .iter()
                .any(|(a, _, _)| *a == name)
                || validate::page_model(&p).is_some()
            {
                continue;
            }
            let Ok((_, r)) = servesim_core::model::ids::resolve(name) else {
                continue;
            };
            let Ok(m) = validate::resolve_model(&p) else {
                continue;
            };
            // The same config with the same differences (an org-less `Qwen3-8B` runs the catalog's
            // `Qwen/Qwen3-8B`, which the page resolves to that config with nothing differing).
            let (_, got) = servesim_core::model::ids::resolve(&m.catalog_id).unwrap();
            assert_eq!(
                (&got.config_id, &got.differences),
                (&r.config_id, &r.differences),
                "line {} ({}) runs {}",
                p.line,
                p.model,
                m.catalog_id
            );
            checked += 1;
        }
    }
    assert!(checked >= 550, "only {checked} rows checked");
}

#[test]
fn ttft_is_not_compared_where_the_client_counted_empty_completions_as_zero() {
    use servesim_core::validate::{ttft_counts_empty_completions, EMPTY_COMPLETION_CHECKPOINT};
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let (mut base, mut other_405b) = (0, 0);
    for p in parse_points(text).unwrap() {
        if servesim_core::validate::waits_for(&p).is_some() {
            continue;
        }
        let s = setup_for(&p).unwrap();
        let ttft = s.targets.iter().find(|t| t.0 == Family::Ttft);
        // The client's result file names the served model: `<backend>-<rate>qps-<model>-<date>`.
        let file = p
            .notes
            .split("raw file ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("");
        let of_base = file.contains(&format!("qps-{EMPTY_COMPLETION_CHECKPOINT}-20"));
        assert_eq!(
            ttft_counts_empty_completions(&p).is_some(),
            of_base,
            "line {}",
            p.line
        );
        if of_base {
            base += 1;
            let (_, _, _, excluded) = ttft.expect("these rows report a TTFT p50");
            assert!(
                excluded.as_deref().is_some_and(|e| e.contains("TTFT 0")),
                "line {}: {excluded:?}",
                p.line
            );
            // Only the TTFT is affected: output tok/s and ITL / TPOT skip empty outputs.
            assert!(s
                .targets
                .iter()
                .filter(|t| t.0 != Family::Ttft)
                .all(|t| t.3.is_none()));
        } else if p.model.contains("405B") && p.notes.contains("raw file ") {
            other_405b += 1;
            if let Some(t) = ttft {
                assert!(t.3.is_none(), "line {}: {:?}", p.line, t.3);
            }
        }
    }
    // dstack's 8xH100 sweep (36 rows) and the H100 vs MI300X study's Meta-checkpoint rows (6);
    // the study's rows of AMD's Instruct checkpoint keep their TTFT.
    assert_eq!(base, 42);
    assert!(other_405b > 0);
}

#[test]
fn batch_limits_the_source_inferred_are_left_to_the_release_defaults() {
    use servesim_core::validate::batch_limits_inferred;
    let text = include_str!("../data/calibration/measured-points-more.csv");
    let (mut inferred, mut partly, mut doubled) = (0, 0, 0);
    for p in parse_points(text).unwrap() {
        if servesim_core::validate::waits_for(&p).is_some() {
            continue;
        }
        let s = setup_for(&p).unwrap();
        let e = &s.scenario.engine;
        let as_given = |v: Option<f64>| v.map(|v| v as i64);
        if !batch_limits_inferred(&p.notes) {
            assert_eq!(e.max_num_seqs, as_given(p.max_num_seqs), "line {}", p.line);
            assert_eq!(
                e.max_num_batched_tokens,
                as_given(p.max_num_batched_tokens),
                "line {}",
                p.line
            );
            continue;
        }
        if p.notes.contains("max_num_batched_tokens partly") {
            // gpustack's "partly" rows state one of the pair in the page's recorded command.
            partly += 1;
            assert!(
                e.max_num_seqs.is_some() || e.max_num_batched_tokens.is_some(),
                "line {}",
                p.line
            );
        } else {
            inferred += 1;
            assert_eq!(
                (e.max_num_seqs, e.max_num_batched_tokens),
                (None, None),
                "line {}",
                p.line
            );
        }
        // vLLM doubles its defaults under `--performance-mode throughput` (>= 0.17).
        if p.notes.contains("--performance-mode=throughput") && e.max_num_seqs.is_none() {
            let d = s.scenario.deployment().unwrap().engine;
            let limits = (d.max_num_seqs, d.max_num_batched_tokens);
            assert_eq!(limits, (2048, 16384), "line {}", p.line);
            doubled += 1;
        }
    }
    assert!(
        inferred > 250 && partly > 20 && doubled >= 5,
        "{inferred} inferred, {partly} partly, {doubled} doubled"
    );
}
