//! The fit as independent jobs (`validate::plan_fit` / `run_fit_job` / `assemble_fit`): the jobs
//! run in any order give exactly `validate::fit_all`'s report, and the plan has one in-sample job
//! per calibration key and per fold the keys that hold the left-out rows; the held-out
//! aggregates come pooled and per left-out source. Runs on a small subset
//! of the shipped calibration rows (two sources, two calibration keys, dense and MoE models) with
//! one coordinate-descent pass, so it stays fast.

use servesim_core::validate::{self, Grouping};

const CSV_A: &str = include_str!("../data/calibration/measured-points.csv");

/// Header plus the inference-sim Llama-2-7B and Mixtral rows (H100, vLLM 0.15.1) and the gpustack
/// Qwen3-8B rows (H100, vLLM 0.10/0.11).
fn subset() -> String {
    let mut out = String::new();
    for (i, line) in CSV_A.lines().enumerate() {
        let keep = i == 0
            || (line.starts_with("inference-sim/training")
                && (line.contains("Llama-2-7b-hf") || line.contains("Mixtral")))
            || (line.starts_with("gpustack") && line.contains("Qwen/Qwen3-8B,"));
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn sim() -> impl FnMut(
    &validate::PointSetup,
    &serde_json::Value,
) -> Result<servesim_core::metrics::LevelResult, String> {
    |s, e| validate::simulate(s, e)
}

#[test]
fn the_plan_lists_one_job_per_key_and_the_keys_of_each_fold() {
    let csv = subset();
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    let keys: Vec<&str> = plan
        .in_sample
        .iter()
        .map(|&i| plan.jobs[i].key.as_str())
        .collect();
    assert_eq!(keys, ["hopper@vllm-0.11", "hopper@vllm-0.15"]);
    // Every row is in exactly one in-sample job.
    let rows = validate::parse_points(&csv).unwrap();
    let mut covered: Vec<usize> = plan
        .in_sample
        .iter()
        .flat_map(|&i| plan.jobs[i].lines.clone())
        .collect();
    covered.sort_unstable();
    assert_eq!(covered, rows.iter().map(|p| p.line).collect::<Vec<_>>());
    // Leave-one-source-out: each source is alone on its key, so its fold refits nothing and
    // predicts its rows with the key dropped (another release line's entry, or the literature).
    let sources: Vec<&validate::FoldPlan> = plan
        .folds
        .iter()
        .filter(|f| f.grouping == Grouping::Source)
        .collect();
    assert_eq!(sources.len(), 2);
    assert!(sources
        .iter()
        .all(|f| f.jobs.is_empty() && f.keys.len() == 1));
    // Leave-one-family-out: the MoE fold (Mixtral) refits hopper@vllm-0.15 on the Llama rows only.
    let moe = plan
        .folds
        .iter()
        .find(|f| f.grouping == Grouping::Family && f.group == "MoE")
        .unwrap();
    assert_eq!(moe.keys, ["hopper@vllm-0.15"]);
    assert_eq!(moe.jobs.len(), 1);
    let job = &plan.jobs[moe.jobs[0]];
    assert!(job.lines.iter().all(|l| !moe.test.contains(l)));
    assert!(!job.lines.is_empty());
    // Two models at most per fold key: only the broad factors are fitted.
    assert_eq!(job.params.len(), 4);
    assert!(plan.jobs.iter().all(|j| j.cost() > 0));
}

#[test]
fn jobs_run_in_any_order_give_fit_alls_report() {
    let csv = subset();
    let sequential = validate::fit_all(&csv, 1, 1, &mut sim()).unwrap();
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    // Run the jobs last to first, each with its own simulator, as threads would.
    let mut results: Vec<Option<validate::KeyFitResult>> = vec![None; plan.jobs.len()];
    for i in (0..plan.jobs.len()).rev() {
        results[i] = Some(validate::run_fit_job(&csv, &plan.jobs[i], &mut sim()).unwrap());
    }
    let results: Vec<validate::KeyFitResult> = results.into_iter().map(Option::unwrap).collect();
    let assembled = validate::assemble_fit(&csv, &plan, &results, &mut sim()).unwrap();
    assert_eq!(assembled, sequential);
    // The fit changed something and the held-out scopes are all there.
    assert!(sequential.table.generations.values().any(|m| !m.is_empty()));
    for scope in ["leave-one-source-out", "leave-one-family-out"] {
        assert!(sequential
            .held_out
            .iter()
            .any(|a| a.scope == scope && a.n > 0));
    }
    // Per source, the pooled leave-one-source-out rows, split without loss or overlap.
    for pooled in sequential
        .held_out
        .iter()
        .filter(|a| a.scope == "leave-one-source-out")
    {
        let split: usize = sequential
            .held_out
            .iter()
            .filter(|a| a.scope.starts_with("leave-one-source-out: ") && a.family == pooled.family)
            .map(|a| a.n)
            .sum();
        assert_eq!(split, pooled.n, "{:?}", pooled.family);
    }
    for src in [
        "inference-sim/training",
        "gpustack/gpustack performance-lab",
    ] {
        let scope = format!("leave-one-source-out: {src}");
        assert!(
            sequential
                .held_out
                .iter()
                .any(|a| a.scope == scope && a.n > 0),
            "{scope}"
        );
    }
    // A wrong number of results is an error, not a panic.
    assert!(validate::assemble_fit(&csv, &plan, &results[1..], &mut sim()).is_err());
}

/// The report carries every held-out prediction behind its aggregates: each simulated row once
/// per grouping, by line, predicted by its fold's table. Here each source is alone on its key, so
/// its fold refits nothing: its rows are predicted by the in-sample table without their key (a
/// row then reads another release line's entry, `perf::lookup_calibration`); a family fold
/// refits its keys on the other family.
#[test]
fn the_held_out_points_are_each_folds_predictions() {
    let csv = subset();
    let rep = validate::fit_all(&csv, 1, 1, &mut sim()).unwrap();
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    let simulated: Vec<usize> = validate::run(&csv, &validate::ValidateOptions::default())
        .unwrap()
        .points
        .iter()
        .filter(|p| p.error.is_none() && p.waits_for.is_none())
        .map(|p| p.line)
        .collect();
    for held in [&rep.held_out_by_source, &rep.held_out_by_family] {
        let lines: Vec<usize> = held.iter().map(|p| p.line).collect();
        assert_eq!(lines, simulated);
    }
    // A fold's table: the in-sample table without the fold's keys, plus what the fold refitted
    // (`held_out_refits`; a source fold here refits nothing, and a key left without training rows
    // has no refit: its rows read another release line).
    assert!(rep
        .held_out_refits
        .keys()
        .all(|k| k.starts_with("leave-one-family-out: ")));
    for fold in &plan.folds {
        let held = match fold.grouping {
            Grouping::Source => &rep.held_out_by_source,
            Grouping::Family => &rep.held_out_by_family,
        };
        let scope = format!("{}: {}", fold.grouping.scope(), fold.group);
        let mut t = rep.table.without_borrowed();
        t.generations.retain(|k, _| !fold.keys.contains(k));
        if let Some(refit) = rep.held_out_refits.get(&scope) {
            assert!(refit.keys().all(|k| fold.keys.contains(k)));
            t.generations.extend(refit.clone());
        } else {
            assert!(fold.jobs.is_empty(), "{scope}");
        }
        // Kernel-family fields no row of an entry reads, borrowed from the fold's entries
        // (`validate::borrow_unidentified`).
        for (entry, fields) in rep.held_out_borrowed.get(&scope).into_iter().flatten() {
            for (f, v) in fields {
                assert!(validate::KERNEL_FAMILY_FIELDS.contains(&f.as_str()));
                t.generations
                    .entry(entry.clone())
                    .or_default()
                    .insert(f.clone(), *v);
            }
        }
        let expected = validate::run(
            &csv,
            &validate::ValidateOptions {
                efficiencies: Some(t),
                only_lines: Some(fold.test.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        for p in expected.points {
            let h = held.iter().find(|q| q.line == p.line).unwrap();
            assert_eq!(h.comparisons, p.comparisons, "{scope} line {}", p.line);
        }
    }
    // The pooled aggregates count exactly these points' comparisons.
    for (scope, held) in [
        ("leave-one-source-out", &rep.held_out_by_source),
        ("leave-one-family-out", &rep.held_out_by_family),
    ] {
        for a in rep.held_out.iter().filter(|a| a.scope == scope) {
            let n = held
                .iter()
                .flat_map(|p| &p.comparisons)
                .filter(|c| {
                    c.family == a.family && c.excluded.is_none() && c.signed_error_pct.is_some()
                })
                .count();
            assert_eq!(n, a.n, "{scope} {:?}", a.family);
        }
    }
    // Every row of the subset runs a V1 engine (vLLM 0.10-0.15), so the V1-only scopes pool
    // exactly the same comparisons as the full ones.
    for scope in ["leave-one-source-out", "leave-one-family-out"] {
        let v1 = format!("{scope} (vLLM V1 rows)");
        for a in rep.held_out.iter().filter(|a| a.scope == scope) {
            let b = rep
                .held_out
                .iter()
                .find(|b| b.scope == v1 && b.family == a.family)
                .unwrap();
            assert_eq!((b.n, b.median_abs_pct), (a.n, a.median_abs_pct), "{v1}");
        }
    }
    // The groupings predict differently: a family fold refits its key on the other family.
    assert_ne!(rep.held_out_by_source, rep.held_out_by_family);
}

const CSV_B: &str = include_str!("../data/calibration/measured-points-more.csv");

/// The inference-sim Llama-2-7B rows plus two InferenceX experimental rows (MiniMax-M2.5 on 8
/// H200, vLLM nightly): one calibration key, one harness.
fn harness_subset() -> String {
    let mut out = String::new();
    for (i, line) in CSV_A.lines().enumerate() {
        if i == 0 || (line.starts_with("inference-sim/training") && line.contains("Llama-2-7b-hf"))
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    let experimental = CSV_B
        .lines()
        .filter(|l| {
            l.starts_with("SemiAnalysis InferenceX experimental")
                && l.contains("MiniMax")
                && l.contains("_conc4.json")
        })
        .take(2);
    for line in experimental {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn a_harness_fits_its_own_entry_in_its_keys_descent_and_only_its_rows_read_it() {
    let csv = harness_subset();
    let rows = validate::parse_points(&csv).unwrap();
    let harness: Vec<&validate::CalibrationPoint> = rows
        .iter()
        .filter(|p| validate::harness_key(p).is_some())
        .collect();
    assert_eq!(harness.len(), 2);
    let entry = "hopper@vllm-0.15+inferencex-experimental";
    assert_eq!(validate::harness_key(harness[0]).as_deref(), Some(entry));
    // Both sources' rows are in the key's one in-sample job, which also fits the harness entry.
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    assert_eq!(plan.in_sample.len(), 1);
    let job = &plan.jobs[plan.in_sample[0]];
    assert_eq!(job.key, "hopper@vllm-0.15");
    assert_eq!(job.lines.len(), rows.len());
    assert_eq!(job.harness, [entry]);
    // Held out, the harness source's fold refits the key on the other rows, without the entry.
    let fold = plan
        .folds
        .iter()
        .find(|f| f.grouping == Grouping::Source && f.group.starts_with("SemiAnalysis"))
        .unwrap();
    assert_eq!(fold.jobs.len(), 1);
    assert!(plan.jobs[fold.jobs[0]].harness.is_empty());
    // The fit writes the entry, its log names the harness, and its fields are harness fields.
    let report = validate::fit_all(&csv, 1, 1, &mut sim()).unwrap();
    let own = &report.table.generations[entry];
    assert!(own
        .keys()
        .all(|f| validate::HARNESS_PARAMS.contains(&f.as_str())));
    // A table read for a row: the entry's fields for the harness rows only.
    let mut t = validate::FittedEfficiencies::default();
    t.generations.insert(
        "hopper@vllm-0.15".into(),
        [("gemm_fp8".to_string(), 0.7)].into_iter().collect(),
    );
    t.generations.insert(
        entry.into(),
        [("gemm_fp8".to_string(), 0.2)].into_iter().collect(),
    );
    let other = rows
        .iter()
        .find(|p| validate::harness_key(p).is_none())
        .unwrap();
    assert_eq!(t.full_table_for_point(harness[0])["gemm_fp8"], 0.2);
    assert_eq!(t.full_table_for_point(other)["gemm_fp8"], 0.7);
}

/// A row that waits for a capability (`validate::waits_for`: here the source states no tp) trains
/// nothing: it is in no job, and its model does not count towards its key's models, so a key
/// whose simulated rows are one model keeps the broad fields only (`validate::fit_params_for`).
#[test]
fn rows_that_wait_train_nothing_and_are_not_one_of_their_keys_models() {
    let one_model: Vec<&str> = CSV_A
        .lines()
        .filter(|l| l.starts_with("gpustack") && l.contains("Qwen/Qwen3-8B,"))
        .collect();
    assert!(one_model.len() >= 3, "the gpustack Qwen3-8B rows");
    let mut csv = format!("{}\n", CSV_A.lines().next().unwrap());
    for l in &one_model {
        csv.push_str(l);
        csv.push('\n');
    }
    // The same run twice more under other models' names, without a tp: both wait.
    for other in ["Qwen/Qwen3-14B", "Qwen/Qwen3-32B"] {
        let f: Vec<&str> = one_model[0].splitn(7, ',').collect();
        csv.push_str(&format!(
            "{},{},{other},{},{},,{}\n",
            f[0], f[1], f[3], f[4], f[6]
        ));
    }
    let rows = validate::parse_points(&csv).unwrap();
    let waiting: Vec<usize> = rows
        .iter()
        .filter(|p| validate::waits_for(p).is_some())
        .map(|p| p.line)
        .collect();
    assert_eq!(waiting.len(), 2);
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    assert_eq!(plan.in_sample.len(), 1);
    let job = &plan.jobs[plan.in_sample[0]];
    assert_eq!(job.key, "hopper@vllm-0.11");
    assert!(job.lines.iter().all(|l| !waiting.contains(l)));
    assert_eq!(job.lines.len(), one_model.len());
    assert_eq!(job.params, validate::fit_params_for(&job.key, 1));
    assert!(job.params.len() < validate::fit_params_for(&job.key, 3).len());
}

/// A pass of the coordinate descent that accepts no move ends it: the next pass would try the
/// same moves from the same table. So a job allowed far more passes than it needs returns the
/// same table and log as one allowed just enough, and finishes (a million passes of the four
/// broad fields over these rows would take days without the stop).
#[test]
fn the_descent_stops_once_a_pass_moves_nothing() {
    let csv = subset();
    let plan = validate::plan_fit(&csv, 1, 1).unwrap();
    let mut job = plan
        .jobs
        .iter()
        .find(|j| j.key == "hopper@vllm-0.11")
        .unwrap()
        .clone();
    job.rounds = 1_000_000;
    let (table, log) = validate::run_fit_job(&csv, &job, &mut sim()).unwrap();
    let last = log.iter().map(|s| s.round).max().unwrap();
    assert!(last >= 1, "the descent moved something: {log:?}");
    // Allowed exactly the passes that moved something plus the one that found nothing to move.
    job.rounds = last + 1;
    let (table2, log2) = validate::run_fit_job(&csv, &job, &mut sim()).unwrap();
    assert_eq!(table2, table);
    assert_eq!(log2, log);
    // Allowed only the passes that moved something, it ends on the same table: the extra pass
    // only confirms it.
    job.rounds = last;
    let (table3, _) = validate::run_fit_job(&csv, &job, &mut sim()).unwrap();
    assert_eq!(table3, table, "the last accepted move is in pass {last}");
}

/// The fitted-values table marks a value on its grid's edge (a factor the fit could not move
/// further), but not a zero lower edge (a cost term that is off) nor a value inside the grid.
#[test]
fn the_fitted_values_table_marks_grid_edges() {
    let grid = |f: &str| {
        validate::FIT_PARAMS
            .iter()
            .find(|p| p.field == f)
            .unwrap()
            .grid
    };
    let gemm = grid("gemm_bf16");
    let floor = grid("moe_layer_floor_s");
    assert_eq!(
        floor[0], 0.0,
        "the MoE floor's grid starts where the term is off"
    );
    let mut t = validate::FittedEfficiencies::default();
    t.generations.insert(
        "hopper@vllm-0.15".into(),
        [
            ("gemm_bf16".to_string(), gemm[0]),
            (
                "hbm_weights".to_string(),
                *grid("hbm_weights").last().unwrap(),
            ),
            ("hbm_kv".to_string(), grid("hbm_kv")[1]),
            ("moe_layer_floor_s".to_string(), 0.0),
        ]
        .into_iter()
        .collect(),
    );
    let md = validate::fitted_values_table(&t);
    let edge = |field: &str| {
        let row = md
            .lines()
            .find(|l| l.contains(&format!("| {field} |")))
            .unwrap();
        row.split('|').map(str::trim).nth(4).unwrap().to_string()
    };
    assert_eq!(edge("gemm_bf16"), "lowest");
    assert_eq!(edge("hbm_weights"), "highest");
    assert_eq!(edge("hbm_kv"), "");
    assert_eq!(edge("moe_layer_floor_s"), "");
    assert!(md.starts_with("| generation | field | value | grid edge |"));
}

/// `FitShape::SharedKernels` (`servesim validate --fit --shared-kernels`): one job per GPU
/// generation, its release lines as parts that split its rows; the generation's entry fits only
/// kernel and link efficiencies, each release line's entry only the engine's software costs
/// (`validate::ERA_PARAMS`); a fold refits the whole generation. The job simulates a move on the
/// rows its entry reaches only, so its last logged objective must equal the objective of its
/// table simulated on all of its rows.
#[test]
fn a_shared_kernels_fit_has_one_job_per_generation_over_its_release_lines() {
    let csv = subset();
    let plan = validate::plan_fit_shaped(&csv, 1, 1, validate::FitShape::SharedKernels).unwrap();
    assert_eq!(plan.shape, validate::FitShape::SharedKernels);
    let keys: Vec<&str> = plan
        .in_sample
        .iter()
        .map(|&i| plan.jobs[i].key.as_str())
        .collect();
    assert_eq!(keys, ["hopper"]);
    let job = &plan.jobs[plan.in_sample[0]];
    let eras: Vec<&str> = job.eras.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(eras, ["hopper@vllm-0.11", "hopper@vllm-0.15"]);
    let mut split: Vec<usize> = job.eras.iter().flat_map(|e| e.lines.clone()).collect();
    split.sort_unstable();
    let mut all = job.lines.clone();
    all.sort_unstable();
    assert_eq!(split, all);
    // Three models in the generation: every shared field; one and two per release line: the
    // graph overhead alone.
    assert_eq!(job.params, validate::shared_params_for(3));
    assert!(job.params.iter().all(|p| !validate::ERA_PARAMS.contains(p)));
    for e in &job.eras {
        assert_eq!(e.params, ["step_overhead_graph_s"], "{}", e.key);
    }
    assert!(plan
        .folds
        .iter()
        .all(|f| f.keys.iter().all(|k| !k.contains('@'))));
    // The per-release plan of the same rows has one job per release line instead.
    let flat = validate::plan_fit(&csv, 1, 1).unwrap();
    assert_eq!(flat.in_sample.len(), 2);
    assert!(flat.jobs.iter().all(|j| j.eras.is_empty()));

    let (tables, log) = validate::run_fit_job(&csv, job, &mut sim()).unwrap();
    assert!(tables.contains_key("hopper"));
    for (k, m) in &tables {
        for f in m.keys() {
            assert_eq!(
                k.contains('@'),
                validate::ERA_PARAMS.contains(&f.as_str()),
                "{k}: {f}"
            );
        }
    }
    let table = validate::FittedEfficiencies {
        generations: tables,
        ..Default::default()
    };
    let o = validate::ValidateOptions {
        only_lines: Some(job.lines.clone()),
        efficiencies: Some(table),
        ..Default::default()
    };
    let r = validate::run_with(&csv, &o, &mut sim()).unwrap();
    let last = log.last().unwrap().objective;
    assert!(
        (validate::objective(&r) - last).abs() < 1e-9,
        "{} vs {last}",
        validate::objective(&r)
    );
    assert!(log.len() > 1, "the fit moved something");
}

/// The names `--fit-shape` takes come from the core, one list: each names one shape, and the
/// default is the shipped per-release shape.
#[test]
fn every_fit_shape_has_one_name() {
    for s in validate::FitShape::ALL {
        assert_eq!(validate::FitShape::from_name(s.name()), Some(s));
    }
    assert_eq!(validate::FitShape::from_name("per-key"), None);
    assert_eq!(
        validate::FitShape::ALL[0],
        validate::FitShape::default(),
        "the shipped shape comes first"
    );
}

/// The shared tables' serial front end stops at the per-request time gpustack's gpt-oss-20b
/// 128/4 burst bounds for every model (about 4 ms, docs/accuracy.md "A bound on the shared serial
/// front end"); only a harness entry, read by its own rows, may go to 24 ms.
#[test]
fn the_shared_serial_front_end_grid_stops_at_the_measured_bound() {
    let f = validate::FIT_PARAMS
        .iter()
        .find(|f| f.field == "api_serial_per_request_s")
        .unwrap();
    assert_eq!(f.grid_for("hopper@vllm-0.11").last(), Some(&4e-3));
    assert_eq!(
        f.grid_for("hopper@vllm-0.15+inferencex-experimental")
            .last(),
        Some(&24e-3)
    );
    // `gemm_bf16` goes down to 0.1 in a harness entry only (a release line's table is every
    // user's); every other field tries the same grid in every entry.
    let bf16 = validate::FIT_PARAMS
        .iter()
        .find(|p| p.field == "gemm_bf16")
        .unwrap();
    assert_eq!(bf16.grid_for("cdna3@vllm-0.7").first(), Some(&0.2));
    // The harness grid is the shared one with lower values in front (no drift between the two).
    assert!(validate::HARNESS_GEMM_BF16_GRID.ends_with(bf16.grid));
    assert_eq!(
        bf16.grid_for("hopper@vllm-0.15+inferencex-experimental")
            .first(),
        Some(&0.1)
    );
    for p in validate::FIT_PARAMS
        .iter()
        .filter(|p| p.field != f.field && p.field != bf16.field)
    {
        assert_eq!(
            p.grid_for("hopper@vllm-0.15+inferencex-experimental"),
            p.grid
        );
    }
    // The shipped table keeps every shared key at or above the shared `gemm_bf16` floor.
    for (key, fields) in &validate::fitted_efficiencies().unwrap().generations {
        if let Some(v) = fields.get("gemm_bf16") {
            assert!(*v >= bf16.grid_for(key)[0], "{key}: gemm_bf16 {v}");
        }
    }
    // The shipped table keeps every shared key inside the bound.
    let fit = validate::fitted_efficiencies().unwrap();
    for (key, fields) in &fit.generations {
        if let Some(v) = fields.get(f.field) {
            let top = *f.grid_for(key).last().unwrap();
            assert!(*v <= top, "{key}: {v} above {top}");
        }
    }
}

/// A kernel-family field no row of an entry reads is borrowed from the nearest entry whose fit
/// identified it (`validate::borrow_unidentified`), and so moves none of the fitted rows: here
/// gpustack's Qwen3-8B (dense) alone on `hopper@vllm-0.11` takes the MoE fields of
/// `hopper@vllm-0.15` (inference-sim's four models, Mixtral among them: enough models to fit
/// every field), and every row's prediction is the same with and without them.
#[test]
fn borrowed_fields_move_no_row_the_fit_saw() {
    let mut csv = String::new();
    for (i, line) in CSV_A.lines().enumerate() {
        if i == 0
            || line.starts_with("inference-sim/training")
            || (line.starts_with("gpustack") && line.contains("Qwen/Qwen3-8B,"))
        {
            csv.push_str(line);
            csv.push('\n');
        }
    }
    let rep = validate::fit_all(&csv, 1, 1, &mut sim()).unwrap();
    let lent = &rep.table.borrowed["hopper@vllm-0.11"];
    for f in [
        "grouped_gemm_vs_dense",
        "hbm_expert_weights",
        "moe_layer_floor_s",
    ] {
        assert_eq!(lent[f], "hopper@vllm-0.15", "{f}");
        let v = rep.table.generations["hopper@vllm-0.11"][f];
        let donor = rep.table.generations["hopper@vllm-0.15"].get(f).copied();
        let lit = serde_json::to_value(servesim_core::perf::Efficiencies::default_for(
            servesim_core::gpu::Generation::Hopper,
        ))
        .unwrap()[f]
            .as_f64()
            .unwrap();
        assert_eq!(v, donor.unwrap_or(lit), "{f}");
    }
    assert!(!lent.contains_key("mla_layer_floor_s"), "no row reads it");
    let run = |t: validate::FittedEfficiencies| {
        validate::run(
            &csv,
            &validate::ValidateOptions {
                efficiencies: Some(t),
                ..Default::default()
            },
        )
        .unwrap()
        .points
    };
    let with = run(rep.table.clone());
    let without = run(rep.table.without_borrowed());
    assert_eq!(with.len(), without.len());
    for (a, b) in with.iter().zip(&without) {
        assert_eq!(a.comparisons, b.comparisons, "line {}", a.line);
    }
}

/// A harness entry's fields ([`validate::HARNESS_PARAMS`]) are read from the entry for the
/// harness's rows, so those rows do not count as reading them for their key: a kernel-family
/// field among them that no other row of the key reads is borrowed from the nearest key that
/// measures it. Here `hopper@vllm-0.15` holds inference-sim's Llama-2-7B (dense) and two
/// InferenceX experimental MiniMax-M2.5 rows: the MoE routing chain (a harness field) comes from
/// `hopper@vllm-0.11` (gpustack's MoE models), while the expert streaming rate (not a harness
/// field), which the harness rows read through the key's table, stays the key's own.
#[test]
fn a_harness_does_not_make_its_key_read_the_harness_fields() {
    let mut csv = harness_subset();
    for line in CSV_A.lines().filter(|l| {
        l.starts_with("gpustack")
            && (l.contains(",H100-SXM-80GB,") || l.contains(",H200-SXM-141GB,"))
    }) {
        csv.push_str(line);
        csv.push('\n');
    }
    let rep = validate::fit_all(&csv, 1, 1, &mut sim()).unwrap();
    let lent = &rep.table.borrowed["hopper@vllm-0.15"];
    assert!(validate::HARNESS_PARAMS.contains(&"moe_layer_floor_s"));
    assert_eq!(lent["moe_layer_floor_s"], "hopper@vllm-0.11");
    assert!(!lent.contains_key("hbm_expert_weights"), "{lent:?}");
    assert!(!validate::HARNESS_PARAMS.contains(&"hbm_expert_weights"));
}
