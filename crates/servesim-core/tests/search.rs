//! Configuration search (issue 14): the best candidate is never beaten by any candidate it
//! evaluated; pruning never drops a candidate that would have passed (against the unpruned
//! search on a small space); costs follow the formula; each candidate reruns as a normal
//! scenario with the same numbers; the frontier is undominated; bad options are refused naming
//! the field. The same for disaggregated (P/D) spaces: per-pool capacity pruning, the decode
//! pool's bound, both pools' GPUs in the cost. Weight precision and `max_num_batched_tokens`
//! (per pool) as dimensions: the same invariants, a precision the checkpoint cannot be served
//! at pruned with the reason, one it already is merged.

use servesim_core::dtype::WeightPrecision;
use servesim_core::scenario::Scenario;
use servesim_core::search::{self, Outcome, PruneStage, RawSearch, SearchReport};
use servesim_core::sweep::{GateOp, RawGate};

fn base(gate_tok_s_user: f64) -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![1.0, 8.0, 32.0, 128.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    s.sweep.sla = vec![
        RawGate {
            metric: "e2e_tokens_per_s_per_user".into(),
            op: GateOp::Ge,
            value: gate_tok_s_user,
        },
        RawGate {
            metric: "ttft_ms_p50".into(),
            op: GateOp::Lt,
            value: 5000.0,
        },
    ];
    s
}

fn small(gate: f64) -> RawSearch {
    RawSearch {
        base: base(gate),
        gpus: Some(vec!["H100-SXM".into(), "A100-80GB".into()]),
        max_gpus: 2,
        tp: Some(vec![1, 2, 4]),
        dp: None,
        expert_parallel: None,
        replicas: None,
        speculative: None,
        kv_cache_dtypes: None,
        max_num_seqs: None,
        weight_precisions: None,
        max_num_batched_tokens: None,
        gpu_hour_usd: [("A100-80GB".to_string(), 1.79)].into_iter().collect(),
        refine_steps: Some(3),
        stop_at_crossing: None,
        disagg: None,
    }
}

#[test]
fn pruning_never_drops_a_candidate_that_would_pass_and_the_best_is_never_beaten() {
    // A demanding per-user gate: the slowest layouts cannot reach it even alone.
    let raw = small(130.0);
    let space = raw.validate().unwrap();
    assert_eq!(space.candidates.len(), 6);
    let pruned = search::run(&space, true);
    let full = search::run(&space, false);
    assert_eq!(pruned.summary.budget, 2, "{:?}", pruned.summary); // TP4 on a 2-GPU budget
    assert!(pruned.summary.bound >= 1, "{:?}", pruned.summary);
    for (p, f) in pruned.candidates.iter().zip(&full.candidates) {
        match &p.outcome {
            Outcome::Pruned {
                stage: PruneStage::Bound,
                ..
            } => assert!(
                f.operating_point().is_none(),
                "{}: pruned by the bound but passes unpruned",
                p.candidate.label
            ),
            _ => assert_eq!(p, f, "{}", p.candidate.label),
        }
    }
    assert_eq!(pruned.ranking_by_throughput, full.ranking_by_throughput);
    // the best is never beaten by an evaluated candidate
    let best = pruned.best_throughput().expect("a candidate passes");
    let b = best.operating_point().unwrap().output_tokens_per_s_per_gpu;
    for c in &pruned.candidates {
        if let Some(o) = c.operating_point() {
            assert!(o.output_tokens_per_s_per_gpu <= b, "{}", c.candidate.label);
        }
    }
    let cheapest = pruned.best_cost().unwrap();
    let cc = cheapest
        .operating_point()
        .unwrap()
        .usd_per_m_output_tokens
        .unwrap();
    for c in &pruned.candidates {
        if let Some(x) = c.operating_point().and_then(|o| o.usd_per_m_output_tokens) {
            assert!(x >= cc, "{}", c.candidate.label);
        }
    }
}

#[test]
fn costs_follow_the_formula_and_candidates_rerun_as_scenarios() {
    let raw = small(30.0);
    let space = raw.validate().unwrap();
    let rep = search::run(&space, true);
    let mut checked = 0;
    for c in &rep.candidates {
        let Outcome::Evaluated {
            levels,
            operating_point,
            skipped_levels,
        } = &c.outcome
        else {
            continue;
        };
        let price = c.candidate.usd_per_gpu_hour.unwrap();
        assert_eq!(
            price,
            if c.candidate.gpu == "A100-80GB" {
                1.79
            } else {
                2.69
            }
        );
        if let Some(o) = operating_point {
            let want = c.candidate.num_gpus as f64 * price / (o.output_tokens_per_s * 3600.0) * 1e6;
            let got = o.usd_per_m_output_tokens.unwrap();
            assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
            assert_eq!(
                o.level_in_budget,
                o.level * (2 / c.candidate.num_gpus) as f64
            );
        }
        // the candidate's own scenario, run as a normal sweep, gives the same levels
        let r = c.candidate.scenario.resolve().unwrap();
        let res = r.run().unwrap();
        // every sweep level by default
        assert!(skipped_levels.is_empty());
        assert_eq!(res.levels.len(), levels.len());
        for (a, b) in res.levels.iter().zip(levels) {
            assert_eq!(a.output_tokens_per_s_per_gpu, b.output_tokens_per_s_per_gpu);
            assert_eq!(a.e2e_tokens_per_s_per_user, b.e2e_tokens_per_s_per_user);
        }
        checked += 1;
    }
    assert!(checked >= 3, "{checked}");
    // the frontier: no simulated level beats a frontier point on both axes
    assert!(!rep.frontier.is_empty());
    for f in &rep.frontier {
        for c in &rep.candidates {
            if let Outcome::Evaluated { levels, .. } = &c.outcome {
                for l in levels {
                    if let Some(u) = l.e2e_tokens_per_s_per_user {
                        assert!(
                            !(u > f.e2e_tokens_per_s_per_user
                                && l.output_tokens_per_s_per_gpu
                                    .is_some_and(|t| t > f.output_tokens_per_s_per_gpu)),
                            "{f:?} dominated by {} level {}",
                            c.candidate.label,
                            l.level
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn bad_options_are_refused_naming_the_field() {
    let mut r = small(50.0);
    r.expert_parallel = Some(vec![true]);
    let e = r.validate().unwrap_err();
    assert_eq!(e.field, "expert_parallel", "{e}");
    let mut r = small(50.0);
    r.speculative = Some(vec![true]);
    assert_eq!(r.validate().unwrap_err().field, "speculative");
    let mut r = small(50.0);
    r.max_gpus = 0;
    assert_eq!(r.validate().unwrap_err().field, "max_gpus");
    let mut r = small(50.0);
    r.tp = Some((1..=64).collect());
    r.max_num_seqs = Some((1..=40).collect());
    let e = r.validate().unwrap_err();
    assert!(e.to_string().contains("candidates"), "{e}");
    let mut r = small(50.0);
    r.gpus = Some(vec!["H9000".into()]);
    assert_eq!(r.validate().unwrap_err().field, "gpus");
    let mut r = small(50.0);
    r.gpu_hour_usd.insert("H100-SXM".into(), -1.0);
    assert!(r.validate().unwrap_err().field.starts_with("gpu_hour_usd"));
}

#[test]
fn a_moe_model_tries_expert_parallelism_and_a_spec_base_tries_both() {
    let mut sb = base(30.0);
    sb.engine.speculative_config =
        Some(serde_json::from_str(r#"{"method": "ngram", "num_speculative_tokens": 3}"#).unwrap());
    sb.engine.speculative_acceptance =
        Some(serde_json::from_str(r#"{"mean_acceptance_length": 2.0}"#).unwrap());
    let mut raw = small(30.0);
    raw.base = sb;
    raw.gpus = None;
    raw.tp = Some(vec![1]);
    let space = raw.validate().unwrap();
    let specs: Vec<bool> = space.candidates.iter().map(|c| c.speculative).collect();
    assert_eq!(specs, [false, true]);
    assert!(space.candidates[0]
        .scenario
        .engine
        .speculative_config
        .is_none());
    assert!(space.candidates[1]
        .scenario
        .resolve()
        .unwrap()
        .engine
        .spec
        .is_some());

    let mut b = base(30.0);
    b.model = servesim_core::scenario::ModelRef::Catalog("Qwen/Qwen3-30B-A3B".into());
    let raw = RawSearch {
        base: b,
        gpus: None,
        max_gpus: 2,
        tp: Some(vec![2]),
        dp: None,
        expert_parallel: None,
        replicas: None,
        speculative: None,
        kv_cache_dtypes: None,
        max_num_seqs: None,
        weight_precisions: None,
        max_num_batched_tokens: None,
        gpu_hour_usd: Default::default(),
        refine_steps: None,
        stop_at_crossing: None,
        disagg: None,
    };
    let space = raw.validate().unwrap();
    let eps: Vec<u32> = space.candidates.iter().map(|c| c.ep).collect();
    assert_eq!(eps, [1, 2]);
}

/// A P/D space on one GPU type: aggregated TP1/TP2 plus 1:1, 1:2, 2:1 with prefill and decode
/// pools of TP1 or TP2, on a 4-GPU budget. The base's prefill pool (the template) reserves too
/// little memory for TP1 weights, so prefill TP1 pools cannot start.
fn pd_space(gate: f64) -> RawSearch {
    let mut raw = small(gate);
    raw.gpus = None;
    raw.max_gpus = 4;
    raw.tp = Some(vec![1, 2]);
    raw.base.topology = Some(
        serde_json::from_str(
            r#"{"prefill": {"engine": {"gpu_memory_utilization": 0.3, "max_num_batched_tokens": 4096}}, "decode": {}}"#,
        )
        .unwrap(),
    );
    raw.disagg = Some(search::RawDisaggSpace {
        pd_ratios: Some(vec!["1:1".into(), "1:2".into(), "2:1".into()]),
        ..Default::default()
    });
    raw
}

#[test]
fn pd_candidates_prune_per_pool_and_pruning_never_drops_one_that_would_pass() {
    // The gate between the decode pools' bounds (one step at context 1, `servesim step --decode 1
    // --ctx 1`: with the shipped Hopper table 175 tok/s at TP1, 194 at TP2): decode TP1 pools are
    // pruned by the bound, TP2 pools are not.
    let probe = pd_space(0.0).validate().unwrap();
    let decode_bound = |tp: u32| {
        let c = probe
            .candidates
            .iter()
            .find(|c| c.prefill.is_some() && c.tp == tp)
            .unwrap();
        search::tokens_per_s_per_user_bound(&c.scenario.resolve().unwrap())
    };
    let (b1, b2) = (decode_bound(1), decode_bound(2));
    assert!(b1 < b2, "decode TP1 bound {b1} vs TP2 {b2}");
    let space = pd_space((b1 + b2) / 2.0).validate().unwrap();
    assert_eq!(space.candidates.len(), 2 + 3 * 2 * 2);
    let pruned = search::run(&space, true);
    let full = search::run(&space, false);
    // 1:2 with decode TP2 (5, 6 GPUs) and 2:1 with prefill TP2 (5, 6 GPUs)
    assert_eq!(pruned.summary.budget, 4, "{:?}", pruned.summary);
    let mut prefill_cannot_start = 0;
    for (p, f) in pruned.candidates.iter().zip(&full.candidates) {
        let c = &p.candidate;
        if let Some(pre) = &c.prefill {
            assert_eq!(
                c.num_gpus,
                pre.replicas * pre.tp * pre.dp + c.replicas * c.tp * c.dp
            );
        }
        match &p.outcome {
            Outcome::Pruned {
                stage: PruneStage::Capacity,
                reason,
            } => {
                assert!(
                    reason.starts_with("the prefill pool does not start"),
                    "{}: {reason}",
                    c.label
                );
                assert_eq!(c.prefill.map(|x| x.tp), Some(1), "{}", c.label);
                prefill_cannot_start += 1;
                assert_eq!(p, f);
            }
            Outcome::Pruned {
                stage: PruneStage::Bound,
                reason,
            } => {
                if c.prefill.is_some() {
                    assert!(reason.contains("decode step"), "{reason}");
                }
                assert!(
                    f.operating_point().is_none(),
                    "{}: pruned by the bound but passes unpruned",
                    c.label
                );
            }
            _ => assert_eq!(p, f, "{}", c.label),
        }
    }
    // prefill TP1 within the budget: 1:1 x decode TP1/TP2, 1:2 x TP1, 2:1 x TP1/TP2
    assert_eq!(prefill_cannot_start, 5, "{:?}", pruned.summary);
    assert!(pruned.summary.bound >= 1, "{:?}", pruned.summary);
    assert_eq!(pruned.ranking_by_throughput, full.ranking_by_throughput);
    let best = pruned.best_throughput().expect("a candidate passes");
    let b = best.operating_point().unwrap().output_tokens_per_s_per_gpu;
    for c in &pruned.candidates {
        if let Some(o) = c.operating_point() {
            assert!(o.output_tokens_per_s_per_gpu <= b, "{}", c.candidate.label);
        }
    }
}

#[test]
fn pd_candidates_open_as_scenarios_with_the_same_numbers_and_costs() {
    let space = pd_space(30.0).validate().unwrap();
    let rep = search::run(&space, true);
    let mut checked = 0;
    for c in &rep.candidates {
        let Some(pre) = c.candidate.prefill else {
            continue;
        };
        // the scenario as JSON (what the report and links carry), read back
        let text = serde_json::to_string(&c.candidate.scenario).unwrap();
        let s = Scenario::from_json(&text).unwrap();
        let t = s.topology.as_ref().unwrap();
        let (pp, dp) = (t.prefill.as_ref().unwrap(), t.decode.as_ref().unwrap());
        assert_eq!(
            (pp.tp, pp.replicas, dp.tp, dp.replicas),
            (
                Some(pre.tp),
                Some(pre.replicas),
                Some(c.candidate.tp),
                Some(c.candidate.replicas)
            )
        );
        // the template pool's engine override carries over
        assert_eq!(
            pp.engine.as_ref().unwrap().max_num_batched_tokens,
            Some(4096)
        );
        let Outcome::Evaluated {
            levels,
            operating_point,
            skipped_levels,
        } = &c.outcome
        else {
            continue;
        };
        let r = s.resolve().unwrap();
        assert!(r.disagg.is_some());
        let res = r.run().unwrap();
        // every sweep level by default
        assert!(skipped_levels.is_empty());
        assert_eq!(res.levels.len(), levels.len());
        for (a, b) in res.levels.iter().zip(levels) {
            assert_eq!(a.output_tokens_per_s_per_gpu, b.output_tokens_per_s_per_gpu);
            assert_eq!(a.e2e_tokens_per_s_per_user, b.e2e_tokens_per_s_per_user);
            assert_eq!(a.ttft_ms.map(|d| d.p50), b.ttft_ms_p50);
        }
        if let Some(o) = operating_point {
            // both pools' GPUs are paid for
            let want = c.candidate.num_gpus as f64 * 2.69 / (o.output_tokens_per_s * 3600.0) * 1e6;
            let got = o.usd_per_m_output_tokens.unwrap();
            assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
            assert_eq!(
                o.output_tokens_per_s_per_gpu,
                o.output_tokens_per_s / c.candidate.num_gpus as f64
            );
        }
        checked += 1;
    }
    assert!(checked >= 3, "{checked}");
    // aggregated candidates of a P/D base drop the pools
    for c in rep
        .candidates
        .iter()
        .filter(|c| c.candidate.prefill.is_none())
    {
        let t = c.candidate.scenario.topology.as_ref();
        assert!(t.is_none_or(|t| t.prefill.is_none() && t.decode.is_none()));
        assert!(c.operating_point().is_some(), "{}", c.candidate.label);
    }
}

#[test]
fn pd_options_are_refused_naming_the_field_and_the_recipe_base_keeps_its_pools() {
    for bad in ["0:1", "1-2", "1:", "x:1", "1:5000"] {
        let mut r = pd_space(50.0);
        r.disagg.as_mut().unwrap().pd_ratios = Some(vec![bad.into()]);
        let e = r.validate().unwrap_err();
        assert_eq!(e.field, "disagg.pd_ratios", "{bad}: {e}");
        assert!(e.to_string().contains("PREFILL:DECODE"), "{e}");
    }
    let mut r = pd_space(50.0);
    r.disagg.as_mut().unwrap().decode_tp = Some(vec![0]);
    assert_eq!(r.validate().unwrap_err().field, "disagg.decode_tp");
    let mut r = pd_space(50.0);
    r.disagg.as_mut().unwrap().prefill_expert_parallel = Some(vec![true]);
    assert_eq!(
        r.validate().unwrap_err().field,
        "disagg.prefill_expert_parallel"
    );
    // P/D only
    let mut r = pd_space(50.0);
    r.disagg.as_mut().unwrap().aggregated = Some(false);
    let space = r.validate().unwrap();
    assert_eq!(space.candidates.len(), 12);
    assert!(space.candidates.iter().all(|c| c.prefill.is_some()));

    // The recipe's 1P1D scenario as the base (tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json):
    // the P/D candidates keep its prefill pool's max_num_batched_tokens, and the aggregated ones
    // run without pools; every candidate resolves with its own GPU count.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"
    ))
    .unwrap();
    let raw = RawSearch {
        base: Scenario::from_json(&text).unwrap(),
        gpus: Some(vec!["H200".into(), "GB200".into()]),
        max_gpus: 16,
        tp: Some(vec![8]),
        dp: None,
        expert_parallel: Some(vec![false]),
        replicas: None,
        speculative: None,
        kv_cache_dtypes: None,
        max_num_seqs: None,
        weight_precisions: None,
        max_num_batched_tokens: None,
        gpu_hour_usd: Default::default(),
        refine_steps: None,
        stop_at_crossing: None,
        disagg: Some(search::RawDisaggSpace::default()),
    };
    let space = raw.validate().unwrap();
    assert_eq!(space.candidates.len(), 4);
    for c in &space.candidates {
        let r = c.scenario.resolve().unwrap();
        assert_eq!(r.sweep.gpus, c.num_gpus, "{}", c.label);
        match &c.prefill {
            Some(_) => {
                assert_eq!(c.num_gpus, 16);
                let pp = c
                    .scenario
                    .topology
                    .as_ref()
                    .unwrap()
                    .prefill
                    .as_ref()
                    .unwrap();
                assert_eq!(
                    pp.engine.as_ref().unwrap().max_num_batched_tokens,
                    Some(16384)
                );
                assert!(r.disagg.is_some());
            }
            None => {
                assert_eq!(c.num_gpus, 8);
                assert!(r.disagg.is_none());
            }
        }
    }
}

#[test]
fn stopping_at_the_first_failing_level_never_moves_an_operating_point() {
    // aggregated and P/D candidates, a gate that some cross inside the sweep
    for mut raw in [small(60.0), pd_space(60.0)] {
        // a level past the crossing (at 128 clients for several candidates)
        raw.base.sweep.concurrency = Some(vec![1.0, 8.0, 32.0, 128.0, 256.0]);
        let full = search::run(&raw.validate().unwrap(), true);
        let mut stop = raw.clone();
        stop.stop_at_crossing = Some(true);
        let quick = search::run(&stop.validate().unwrap(), true);
        let mut skipped_any = false;
        for (q, f) in quick.candidates.iter().zip(&full.candidates) {
            let label = &q.candidate.label;
            assert_eq!(q.operating_point(), f.operating_point(), "{label}");
            match (&q.outcome, &f.outcome) {
                (
                    Outcome::Evaluated {
                        levels: ql,
                        skipped_levels: qs,
                        ..
                    },
                    Outcome::Evaluated {
                        levels: fl,
                        skipped_levels: fs,
                        ..
                    },
                ) => {
                    assert!(fs.is_empty());
                    assert_eq!(ql[..], fl[..ql.len()], "{label}");
                    let rest: Vec<f64> = fl[ql.len()..].iter().map(|l| l.level).collect();
                    assert_eq!(*qs, rest, "{label}");
                    if !qs.is_empty() {
                        skipped_any = true;
                        // stopped at a failing level after a passing first level
                        assert!(ql[0].passes_sla && !ql.last().unwrap().passes_sla);
                    }
                }
                (a, b) => assert_eq!(a, b, "{label}"),
            }
        }
        assert!(
            skipped_any,
            "no candidate crossed the gate inside the sweep"
        );
        assert_eq!(quick.ranking_by_throughput, full.ranking_by_throughput);
        assert_eq!(quick.ranking_by_cost, full.ranking_by_cost);
    }
}

/// Pruned and unpruned reports agree: every candidate not pruned by the bound is the same, no
/// candidate pruned by the bound passes unpruned, the rankings (so the passing set and the
/// best) are equal, and the best is never beaten by any evaluated candidate.
fn pruning_agrees(pruned: &SearchReport, full: &SearchReport) {
    for (p, f) in pruned.candidates.iter().zip(&full.candidates) {
        match &p.outcome {
            Outcome::Pruned {
                stage: PruneStage::Bound,
                ..
            } => assert!(
                f.operating_point().is_none(),
                "{}: pruned by the bound but passes unpruned",
                p.candidate.label
            ),
            _ => assert_eq!(p, f, "{}", p.candidate.label),
        }
    }
    assert_eq!(pruned.ranking_by_throughput, full.ranking_by_throughput);
    assert_eq!(pruned.ranking_by_cost, full.ranking_by_cost);
    if let Some(best) = pruned.best_throughput() {
        let b = best.operating_point().unwrap().output_tokens_per_s_per_gpu;
        for c in &full.candidates {
            if let Some(o) = c.operating_point() {
                assert!(o.output_tokens_per_s_per_gpu <= b, "{}", c.candidate.label);
            }
        }
    }
}

#[test]
fn weight_precision_and_batched_tokens_keep_pruning_exact_and_the_best_unbeaten() {
    // Llama-3.1-8B (a bf16 checkpoint) on H100 and A100: checkpoint, bf16 (the checkpoint itself:
    // merged), fp8 (online --quantization fp8), int4 (needs another checkpoint: pruned);
    // max_num_batched_tokens 32 (below max_num_seqs 64: vLLM refuses), 256 and 4096.
    let mut raw = small(130.0);
    raw.tp = Some(vec![1, 2]);
    raw.max_num_seqs = Some(vec![64]);
    raw.weight_precisions = Some(vec![
        WeightPrecision::Checkpoint,
        WeightPrecision::Bf16,
        WeightPrecision::Fp8,
        WeightPrecision::Int4,
    ]);
    raw.max_num_batched_tokens = Some(vec![4096, 32, 256]);
    let space = raw.validate().unwrap();
    assert_eq!(space.merged, 1);
    assert!(
        space
            .notes
            .iter()
            .any(|n| n.contains("bf16 merged with checkpoint")),
        "{:?}",
        space.notes
    );
    // 2 GPUs x 2 TP x 3 precisions x 3 budgets
    assert_eq!(space.candidates.len(), 36);
    let c = &space.candidates[3];
    assert_eq!(c.weight_precision, Some(WeightPrecision::Fp8));
    assert_eq!(c.scenario.weight_precision, WeightPrecision::Fp8);
    assert_eq!(c.max_num_batched_tokens, Some(32));
    assert_eq!(c.scenario.engine.max_num_batched_tokens, Some(32));
    assert!(
        c.label.contains("weights fp8") && c.label.contains("max_num_batched_tokens 32"),
        "{}",
        c.label
    );
    let pruned = search::run(&space, true);
    let full = search::run(&space, false);
    assert_eq!(pruned.summary.merged, 1);
    for r in &pruned.candidates {
        let c = &r.candidate;
        if c.weight_precision == Some(WeightPrecision::Int4) {
            match &r.outcome {
                Outcome::Pruned {
                    stage: PruneStage::Capacity,
                    reason,
                } => assert!(
                    reason.starts_with("weight precision int4:")
                        && reason.contains("quantizes online only to fp8"),
                    "{reason}"
                ),
                o => panic!("{}: {o:?}", c.label),
            }
        } else if c.max_num_batched_tokens == Some(32) {
            match &r.outcome {
                Outcome::Pruned {
                    stage: PruneStage::Capacity,
                    reason,
                } => assert!(reason.contains("max_num_batched_tokens"), "{reason}"),
                o => panic!("{}: {o:?}", c.label),
            }
        }
    }
    assert!(pruned.summary.bound >= 1, "{:?}", pruned.summary);
    assert!(pruned.best_throughput().is_some(), "{:?}", pruned.summary);
    pruning_agrees(&pruned, &full);
    // fp8 weights read half the bytes per decode step: a faster fastest step, a higher bound
    let bound = |i: usize| {
        search::tokens_per_s_per_user_bound(&space.candidates[i].scenario.resolve().unwrap())
    };
    assert!(
        bound(5) > bound(2),
        "fp8 {} vs checkpoint {}",
        bound(5),
        bound(2)
    );
    // the budget is the scheduler's: a different result at 256 than at 4096
    let op = |i: usize| full.candidates[i].outcome.clone();
    assert_ne!(op(1), op(2));
}

#[test]
fn pd_pools_take_their_own_batched_tokens_and_pruning_stays_exact() {
    let mut raw = pd_space(130.0);
    raw.tp = Some(vec![2]);
    raw.weight_precisions = Some(vec![WeightPrecision::Checkpoint, WeightPrecision::Fp8]);
    raw.max_num_batched_tokens = Some(vec![2048]);
    raw.disagg = Some(search::RawDisaggSpace {
        pd_ratios: Some(vec!["1:1".into()]),
        prefill_tp: Some(vec![2]),
        decode_tp: Some(vec![1, 2]),
        prefill_max_num_batched_tokens: Some(vec![1024, 8192]),
        ..Default::default()
    });
    let space = raw.validate().unwrap();
    // aggregated: TP2 x 2 precisions; P/D: 2 decode TPs x 2 precisions x 2 prefill budgets
    assert_eq!(space.candidates.len(), 2 + 8);
    let agg = &space.candidates[0];
    assert_eq!(agg.scenario.engine.max_num_batched_tokens, Some(2048));
    let pd = &space.candidates[3];
    let p = pd.prefill.unwrap();
    assert_eq!(p.max_num_batched_tokens, Some(8192));
    // the decode pool keeps the template's (the base's) budget
    assert_eq!(pd.max_num_batched_tokens, None);
    let topo = pd.scenario.topology.as_ref().unwrap();
    let pe = topo.prefill.as_ref().unwrap().engine.as_ref().unwrap();
    assert_eq!(pe.max_num_batched_tokens, Some(8192));
    // the template's other overrides carry over
    assert_eq!(pe.gpu_memory_utilization, Some(0.3));
    assert!(topo
        .decode
        .as_ref()
        .unwrap()
        .engine
        .as_ref()
        .is_none_or(|e| e.max_num_batched_tokens.is_none()));
    assert!(
        pd.label.contains("prefill max_num_batched_tokens 8192"),
        "{}",
        pd.label
    );
    let r = pd.scenario.resolve().unwrap();
    assert_eq!(
        r.disagg
            .as_ref()
            .unwrap()
            .prefill
            .deployment
            .engine
            .max_num_batched_tokens,
        8192
    );
    // a decode list given: the decode pool's own
    let mut raw2 = raw.clone();
    if let Some(d) = raw2.disagg.as_mut() {
        d.decode_max_num_batched_tokens = Some(vec![512]);
    }
    let s2 = raw2.validate().unwrap();
    assert_eq!(s2.candidates[3].max_num_batched_tokens, Some(512));
    assert!(
        s2.candidates[3]
            .label
            .ends_with("decode max_num_batched_tokens 512"),
        "{}",
        s2.candidates[3].label
    );
    let pruned = search::run(&space, true);
    let full = search::run(&space, false);
    pruning_agrees(&pruned, &full);
}

#[test]
fn a_checkpoint_is_served_only_at_the_precisions_vllm_serves_it_at() {
    use servesim_core::model::catalog;
    let ck = |id: &str| catalog::load(id).unwrap().checkpoint;
    let bf16 = ck("meta-llama/Meta-Llama-3.1-8B");
    assert_eq!(
        bf16.serving_precision(WeightPrecision::Fp8),
        Ok(WeightPrecision::Fp8)
    );
    assert_eq!(
        bf16.serving_precision(WeightPrecision::Bf16),
        Ok(WeightPrecision::Checkpoint)
    );
    for p in [
        WeightPrecision::Fp4,
        WeightPrecision::Int4,
        WeightPrecision::Int8,
    ] {
        let e = bf16.serving_precision(p).unwrap_err();
        assert!(e.contains("quantizes online only to fp8"), "{e}");
    }
    let fp8 = ck("sgl-project/DeepSeek-V4-Flash-FP8");
    assert!(fp8.is_fp8_serialized());
    assert_eq!(
        fp8.serving_precision(WeightPrecision::Fp8),
        Ok(WeightPrecision::Checkpoint)
    );
    let e = fp8.serving_precision(WeightPrecision::Bf16).unwrap_err();
    assert!(e.contains("does not dequantize"), "{e}");
    // gpt-oss: mxfp4 experts, bf16 attention: only its own quantization
    let oss = ck("openai/gpt-oss-20b");
    assert!(oss.is_quantized());
    for p in [
        WeightPrecision::Fp4,
        WeightPrecision::Fp8,
        WeightPrecision::Bf16,
    ] {
        assert!(oss.serving_precision(p).is_err(), "{p:?}");
    }

    // In a search over the fp8 checkpoint: fp8 merges with checkpoint, bf16 is pruned with
    // the reason (before anything is simulated).
    let mut b = base(30.0);
    b.model =
        servesim_core::scenario::ModelRef::Catalog("sgl-project/DeepSeek-V4-Flash-FP8".into());
    b.gpu = servesim_core::scenario::GpuRef::Catalog("H200".into());
    let mut raw = small(30.0);
    raw.base = b;
    raw.gpus = None;
    raw.max_gpus = 8;
    raw.tp = Some(vec![8]);
    raw.expert_parallel = Some(vec![true]);
    raw.weight_precisions = Some(vec![
        WeightPrecision::Fp8,
        WeightPrecision::Checkpoint,
        WeightPrecision::Bf16,
    ]);
    let space = raw.validate().unwrap();
    assert_eq!(space.merged, 1, "{:?}", space.notes);
    let wps: Vec<_> = space
        .candidates
        .iter()
        .map(|c| c.weight_precision)
        .collect();
    assert_eq!(
        wps,
        [
            Some(WeightPrecision::Checkpoint),
            Some(WeightPrecision::Bf16)
        ]
    );
    match search::evaluate(&space, &space.candidates[1], true).outcome {
        Outcome::Pruned {
            stage: PruneStage::Capacity,
            reason,
        } => assert!(
            reason.starts_with("weight precision bf16:") && reason.contains("does not dequantize"),
            "{reason}"
        ),
        o => panic!("{o:?}"),
    }

    // A GPU that cannot run a precision: fp8 on a TPU is the deployment's refusal
    let mut raw = small(30.0);
    raw.gpus = Some(vec!["TPU-v5e".into()]);
    raw.tp = Some(vec![1]);
    raw.weight_precisions = Some(vec![WeightPrecision::Fp8]);
    let space = raw.validate().unwrap();
    match search::evaluate(&space, &space.candidates[0], true).outcome {
        Outcome::Pruned {
            stage: PruneStage::Capacity,
            reason,
        } => assert!(reason.contains("fp8"), "{reason}"),
        o => panic!("{o:?}"),
    }
}

/// With `--max-model-len auto` each layout gets the context its KV memory holds; a layout whose
/// fitted length is below every request would have vLLM reject them all, so it is pruned as
/// one that cannot serve the workload, and the pruning is exact: run anyway, it completes
/// nothing.
#[test]
fn an_auto_fitted_context_below_every_request_prunes_the_layout() {
    let mut s = base(1.0);
    s.model = servesim_core::scenario::ModelRef::Catalog("Qwen/Qwen3-32B".into());
    s.engine.max_model_len = Some(-1);
    s.workload = serde_json::from_str(
        r#"{"arrival": {"concurrency": 1.0, "type": "closed_loop"}, "requests": {"input": {"tokens": 30000.0, "type": "constant"}, "output": {"tokens": 200.0, "type": "constant"}, "type": "synthetic"}, "seed": 0}"#,
    )
    .unwrap();
    s.sweep.concurrency = Some(vec![1.0, 2.0]);
    s.sweep.sla.truncate(1);
    let raw = RawSearch {
        gpus: Some(vec!["H100-SXM".into()]),
        tp: Some(vec![1, 2]),
        ..small(1.0)
    };
    let raw = RawSearch { base: s, ..raw };
    let space = raw.validate().unwrap();
    let report = search::run(&space, true);
    let tp1 = report
        .candidates
        .iter()
        .find(|c| c.candidate.tp == 1)
        .unwrap();
    match &tp1.outcome {
        Outcome::Pruned {
            stage: PruneStage::Capacity,
            reason,
        } => assert!(
            reason.contains("every request (30200+ tokens")
                && reason.contains("auto-fitted to this layout's KV memory"),
            "{reason}"
        ),
        other => panic!("TP1 should be pruned: {other:?}"),
    }
    // Exact: the pruned layout, run as a scenario, rejects every request.
    let run = tp1.candidate.scenario.resolve().unwrap().run().unwrap();
    for l in &run.levels {
        assert_eq!(l.completed_requests, 0);
        assert!(l.rejected_requests > 0);
    }
    // TP2 holds a longer context and serves the workload.
    let tp2 = report
        .candidates
        .iter()
        .find(|c| c.candidate.tp == 2)
        .unwrap();
    assert!(
        matches!(tp2.outcome, Outcome::Evaluated { .. }),
        "{:?}",
        tp2.outcome
    );
}

/// Each GPU of a search is quoted the measured evidence its candidates are predicted on: the
/// same line a scenario on that GPU gets (`ResolvedScenario::evidence`), in the space and the
/// report; a GPU generation without a fit says no error can be quoted.
#[test]
fn every_gpu_is_quoted_the_evidence_its_candidates_get() {
    let mut raw = small(10.0);
    raw.gpus = Some(vec!["H100-SXM".into(), "MI355X".into()]);
    raw.tp = Some(vec![1]);
    let space = raw.validate().unwrap();
    assert_eq!(
        space.evidence.keys().collect::<Vec<_>>(),
        ["H100-SXM", "MI355X"]
    );
    for c in &space.candidates {
        let want = c.scenario.resolve().unwrap().evidence().summary;
        assert_eq!(space.evidence[&c.gpu], want, "{}", c.label);
    }
    assert!(space.evidence["H100-SXM"].contains("hopper@vllm-0.15"));
    assert!(space.evidence["MI355X"].contains("no error can be quoted"));
    let report = search::assemble(&space, Vec::new());
    assert_eq!(report.evidence, space.evidence);
}

/// A GPU whose candidates run fp8 GEMMs on a table that prices them no faster than bf16 ones (current
/// vLLM on Hopper, docs/accuracy.md "Misses" 9) is quoted that caveat with its evidence, since
/// the search ranks the precisions against each other there; a bf16-only search and a GPU
/// without fp8 tensor cores are not.
#[test]
fn a_search_over_fp8_on_hopper_is_told_its_table_prices_fp8_no_faster_than_bf16() {
    let note = "fp8 GEMMs at";
    let mut raw = small(10.0);
    raw.tp = Some(vec![1]);
    let plain = raw.validate().unwrap();
    assert!(plain.evidence.values().all(|e| !e.contains(note)));
    raw.weight_precisions = Some(vec![WeightPrecision::Checkpoint, WeightPrecision::Fp8]);
    let space = raw.validate().unwrap();
    assert!(
        space.evidence["H100-SXM"].contains(note),
        "{}",
        space.evidence["H100-SXM"]
    );
    assert!(!space.evidence["A100-80GB"].contains(note));
    // The line a scenario of the fp8 candidate resolves with says the same.
    let fp8 = space
        .candidates
        .iter()
        .find(|c| c.gpu == "H100-SXM" && c.weight_precision == Some(WeightPrecision::Fp8))
        .unwrap();
    let summary = fp8.scenario.resolve().unwrap().calibration.summary;
    let n = fp8.scenario.fp8_no_faster_than_bf16_note().unwrap();
    assert!(summary.ends_with(&n), "{summary}");
    assert!(space.evidence["H100-SXM"].ends_with(&n));
}
