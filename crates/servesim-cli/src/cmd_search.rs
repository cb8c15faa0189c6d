//! `servesim search`: which deployment meets the SLA with the most tok/s per GPU or at the
//! lowest cost? The base scenario comes from the `sweep` flags (or `--scenario FILE`), the options
//! to try from the flags below (or a whole `--search FILE`); candidates run on `--threads`
//! threads, collected by candidate index so the report does not depend on the thread count.
//! docs/search.md.

use crate::cmd_sweep::{build_scenario, SweepArgs};
use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Args};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::search::{
    self, CandidateResult, Outcome, RawDisaggSpace, RawSearch, SearchReport,
};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Flags of `servesim search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// A whole search as JSON (`base` scenario plus the options; docs/search.md); the flags
    /// below are then not used.
    #[arg(long)]
    pub search: Option<String>,
    /// GPU types to try, comma-separated (default: --gpu).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<String>>,
    /// GPU budget: candidates needing more GPUs are pruned.
    #[arg(long)]
    pub max_gpus: Option<u32>,
    /// Tensor-parallel sizes to try (default 1,2,4,8 up to the budget).
    #[arg(long, value_delimiter = ',')]
    pub tp: Option<Vec<u32>>,
    /// Data-parallel sizes to try (default 1).
    #[arg(long, value_delimiter = ',')]
    pub dp: Option<Vec<u32>>,
    /// Expert parallelism: off, on or off,on (default: both for MoE models).
    #[arg(long, value_delimiter = ',')]
    pub expert_parallel: Option<Vec<String>>,
    /// Speculative decoding: off, on or off,on (on = the base's --speculative-config).
    #[arg(long, value_delimiter = ',')]
    pub speculative: Option<Vec<String>>,
    /// KV cache dtypes to try (default the base's).
    #[arg(long, value_delimiter = ',')]
    pub kv_cache_dtypes: Option<Vec<String>>,
    /// max_num_seqs values to try (default the base's).
    #[arg(long, value_delimiter = ',')]
    pub max_num_seqs_options: Option<Vec<u32>>,
    /// Weight precisions to try: checkpoint, bf16, fp8, fp4, int4, int8 (default the base's);
    /// each as vLLM serves the checkpoint at it (one it cannot is pruned with the reason).
    #[arg(long, value_delimiter = ',')]
    pub weight_precisions: Option<Vec<String>>,
    /// max_num_batched_tokens values to try for the aggregated candidates and the prefill pool
    /// (default the base's).
    #[arg(long, value_delimiter = ',')]
    pub max_num_batched_tokens_options: Option<Vec<u32>>,
    /// Replica counts to try (default 1).
    #[arg(long, value_delimiter = ',')]
    pub replica_options: Option<Vec<u32>>,
    /// $ per GPU-hour, comma-separated GPU=PRICE (defaults: docs/search.md "Cost").
    #[arg(long, value_delimiter = ',')]
    pub gpu_hour_usd: Option<Vec<String>>,
    /// Bisection steps refining each candidate's operating point (default 6).
    #[arg(long)]
    pub refine_steps: Option<usize>,
    /// Stop a candidate's sweep at its first failing level after a passing first level (the
    /// later levels cannot move its operating point; they are listed as skipped and are missing
    /// from the frontier). Default: every level.
    #[arg(long)]
    pub stop_at_crossing: bool,
    /// Simulate every candidate that starts (no cheap-bound pruning).
    #[arg(long)]
    pub no_prune: bool,
    /// Add disaggregated prefill/decode candidates (both pools on each GPU type; the base's
    /// --prefill-* / --decode-* / --kv-* settings are the pools' template). Any --pd-*
    /// flag implies it.
    #[arg(long)]
    pub disagg: bool,
    /// Prefill:decode replica counts to try, e.g. 1:1,1:2,2:1 (default 1:1).
    #[arg(long, value_delimiter = ',')]
    pub pd_ratios: Option<Vec<String>>,
    /// Prefill pool TP sizes to try (default: --tp's).
    #[arg(long, value_delimiter = ',')]
    pub pd_prefill_tp: Option<Vec<u32>>,
    /// Prefill pool DP sizes to try (default: --dp's).
    #[arg(long, value_delimiter = ',')]
    pub pd_prefill_dp: Option<Vec<u32>>,
    /// Prefill pool expert parallelism: off, on or off,on (default: --expert-parallel's).
    #[arg(long, value_delimiter = ',')]
    pub pd_prefill_ep: Option<Vec<String>>,
    /// Decode pool TP sizes to try (default: --tp's).
    #[arg(long, value_delimiter = ',')]
    pub pd_decode_tp: Option<Vec<u32>>,
    /// Decode pool DP sizes to try (default: --dp's).
    #[arg(long, value_delimiter = ',')]
    pub pd_decode_dp: Option<Vec<u32>>,
    /// Decode pool expert parallelism: off, on or off,on (default: --expert-parallel's).
    #[arg(long, value_delimiter = ',')]
    pub pd_decode_ep: Option<Vec<String>>,
    /// Prefill pool max_num_batched_tokens values (default: --max-num-batched-tokens-options,
    /// else the template's).
    #[arg(long, value_delimiter = ',')]
    pub pd_prefill_max_num_batched_tokens: Option<Vec<u32>>,
    /// Decode pool max_num_batched_tokens values (default: the template's).
    #[arg(long, value_delimiter = ',')]
    pub pd_decode_max_num_batched_tokens: Option<Vec<u32>>,
    /// Disaggregated candidates only (no aggregated ones).
    #[arg(long)]
    pub pd_only: bool,
    /// Print the search JSON and exit without simulating.
    #[arg(long)]
    pub print_search: bool,
}

fn on_off(flag: &str, v: &[String]) -> Result<Vec<bool>> {
    v.iter()
        .map(|s| match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "1" | "yes" => Ok(true),
            "off" | "false" | "0" | "no" => Ok(false),
            _ => bail!("--{flag} {s}: write off, on or off,on"),
        })
        .collect()
}

/// The search the flags (or `--search FILE`) describe.
pub fn build_search(a: &SearchArgs, m: &ArgMatches) -> Result<RawSearch> {
    if let Some(path) = &a.search {
        let text = crate::input::read_text(Path::new(path))?;
        let mut raw = RawSearch::from_json(&text).with_context(|| format!("search {path}"))?;
        if a.stop_at_crossing {
            raw.stop_at_crossing = Some(true);
        }
        return Ok(raw);
    }
    let base = build_scenario(&a.sweep, m)?;
    let Some(max_gpus) = a.max_gpus else {
        bail!("give --max-gpus N (the GPU budget), or --search FILE");
    };
    let kv = match &a.kv_cache_dtypes {
        None => None,
        Some(v) => Some(
            v.iter()
                .map(|s| {
                    KvCacheDtype::parse(s).with_context(|| {
                        format!(
                            "--kv-cache-dtypes {s}: use {}",
                            KvCacheDtype::NAMES.join(", ")
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let wps = match &a.weight_precisions {
        None => None,
        Some(v) => Some(
            v.iter()
                .map(|s| {
                    WeightPrecision::parse(s).with_context(|| {
                        format!(
                            "--weight-precisions {s}: use {}",
                            WeightPrecision::NAMES.join(", ")
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let mut prices = std::collections::BTreeMap::new();
    for p in a.gpu_hour_usd.iter().flatten() {
        let Some((g, v)) = p.split_once('=') else {
            bail!("--gpu-hour-usd {p}: write GPU=PRICE, e.g. H200=3.5");
        };
        let v: f64 = v
            .trim()
            .parse()
            .with_context(|| format!("--gpu-hour-usd {p}: PRICE must be a number of dollars"))?;
        prices.insert(g.trim().to_string(), v);
    }
    let any_pd = a.disagg
        || a.pd_only
        || a.pd_ratios.is_some()
        || a.pd_prefill_tp.is_some()
        || a.pd_prefill_dp.is_some()
        || a.pd_prefill_ep.is_some()
        || a.pd_decode_tp.is_some()
        || a.pd_decode_dp.is_some()
        || a.pd_decode_ep.is_some()
        || a.pd_prefill_max_num_batched_tokens.is_some()
        || a.pd_decode_max_num_batched_tokens.is_some();
    let disagg = if any_pd {
        Some(RawDisaggSpace {
            pd_ratios: a.pd_ratios.clone(),
            prefill_tp: a.pd_prefill_tp.clone(),
            prefill_dp: a.pd_prefill_dp.clone(),
            prefill_expert_parallel: a
                .pd_prefill_ep
                .as_ref()
                .map(|v| on_off("pd-prefill-ep", v))
                .transpose()?,
            decode_tp: a.pd_decode_tp.clone(),
            decode_dp: a.pd_decode_dp.clone(),
            decode_expert_parallel: a
                .pd_decode_ep
                .as_ref()
                .map(|v| on_off("pd-decode-ep", v))
                .transpose()?,
            prefill_max_num_batched_tokens: a.pd_prefill_max_num_batched_tokens.clone(),
            decode_max_num_batched_tokens: a.pd_decode_max_num_batched_tokens.clone(),
            aggregated: a.pd_only.then_some(false),
        })
    } else {
        None
    };
    Ok(RawSearch {
        disagg,
        stop_at_crossing: a.stop_at_crossing.then_some(true),
        base,
        gpus: a.gpus.clone(),
        max_gpus,
        tp: a.tp.clone(),
        dp: a.dp.clone(),
        expert_parallel: a
            .expert_parallel
            .as_ref()
            .map(|v| on_off("expert-parallel", v))
            .transpose()?,
        replicas: a.replica_options.clone(),
        speculative: a
            .speculative
            .as_ref()
            .map(|v| on_off("speculative", v))
            .transpose()?,
        kv_cache_dtypes: kv,
        max_num_seqs: a.max_num_seqs_options.clone(),
        weight_precisions: wps,
        max_num_batched_tokens: a.max_num_batched_tokens_options.clone(),
        gpu_hour_usd: prices,
        refine_steps: a.refine_steps,
    })
}

pub fn run_search(a: &SearchArgs, m: &ArgMatches) -> Result<()> {
    let raw = build_search(a, m)?;
    if a.print_search {
        println!("{}", serde_json::to_string_pretty(&raw)?);
        return Ok(());
    }
    let space = raw.validate()?;
    let n = space.candidates.len();
    let threads = crate::cmd_sweep::threads_for(a.sweep.threads.map(usize::from), 64, n);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<CandidateResult>>> = Mutex::new(vec![None; n]);
    let prune = !a.no_prune;
    let t0 = std::time::Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = search::evaluate(&space, &space.candidates[i], prune);
                let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                eprintln!(
                    "[{k}/{n}] {}: {} ({:.1} s)",
                    r.candidate.label,
                    r.outcome.summary(),
                    t0.elapsed().as_secs_f64()
                );
                if let Ok(mut s) = slots.lock() {
                    s[i] = Some(r);
                }
            });
        }
    });
    let results: Vec<CandidateResult> = slots
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a search thread failed"))?
        .into_iter()
        .flatten()
        .collect();
    if results.len() != n {
        bail!("a search thread failed before finishing its candidates");
    }
    let report = search::assemble(&space, results);
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if a.sweep.csv {
        print_csv(&report);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn opt(v: Option<f64>, d: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.d$}"))
}

fn print_table(r: &SearchReport) {
    let s = &r.summary;
    println!(
        "{} candidates: {} simulated, pruned {} over the {}-GPU budget, {} that cannot start, {} by the per-user bound; {} failed",
        r.candidates.len(),
        s.evaluated,
        s.budget,
        r.max_gpus,
        s.capacity,
        s.bound,
        s.failed
    );
    if s.merged > 0 {
        println!(
            "{} option value(s) merged into another (the same candidates)",
            s.merged
        );
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    let skipped: usize = r
        .candidates
        .iter()
        .map(|c| match &c.outcome {
            Outcome::Evaluated { skipped_levels, .. } => skipped_levels.len(),
            _ => 0,
        })
        .sum();
    if skipped > 0 {
        println!("{skipped} sweep level(s) past a candidate's first failing level not simulated (--stop-at-crossing; they cannot move its operating point)");
    }
    for (g, p) in &r.prices {
        println!("price {g}: {} ({})", opt(p.usd_per_gpu_hour, 2), p.source);
    }
    for (g, e) in &r.evidence {
        println!("evidence {g}: {e}");
    }
    println!();
    println!(
        "{:>4}  {:<64} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "rank",
        "candidate (by tok/s/GPU at the SLA)",
        "GPUs",
        "level",
        "tok/s/GPU",
        "tok/s/user",
        "TTFT p50",
        "$/M out"
    );
    for (k, i) in r.ranking_by_throughput.iter().enumerate() {
        let c = &r.candidates[*i];
        let Some(o) = c.operating_point() else {
            continue;
        };
        println!(
            "{:>4}  {:<64} {:>5} {:>8} {:>10.1} {:>10} {:>10} {:>10}",
            k + 1,
            c.candidate.label,
            c.candidate.num_gpus,
            format!("{}{}", o.level, if o.basis == "refined" { "" } else { "+" }),
            o.output_tokens_per_s_per_gpu,
            opt(o.e2e_tokens_per_s_per_user, 1),
            opt(o.ttft_ms_p50, 0),
            opt(o.usd_per_m_output_tokens, 3)
        );
    }
    if let Some(b) = r.best_cost() {
        println!(
            "\nlowest cost at the SLA: {} ({} $/M output tokens)",
            b.candidate.label,
            opt(
                b.operating_point().and_then(|o| o.usd_per_m_output_tokens),
                3
            )
        );
    }
    println!("(level+ : every sweep level passes; the operating point is at least this)");
    let other: Vec<&CandidateResult> = r
        .candidates
        .iter()
        .filter(|c| c.operating_point().is_none())
        .collect();
    if !other.is_empty() {
        println!("\nnot at the SLA:");
        for c in other {
            println!("  {}: {}", c.candidate.label, c.outcome.summary());
        }
    }
}

fn print_csv(r: &SearchReport) {
    println!("index,label,gpu,tp,dp,ep,replicas,prefill_tp,prefill_dp,prefill_ep,prefill_replicas,speculative,kv_cache_dtype,num_gpus,status,level,basis,output_tokens_per_s_per_gpu,e2e_tokens_per_s_per_user,ttft_ms_p50,usd_per_m_output_tokens,usd_per_m_input_tokens,weight_precision,max_num_seqs,max_num_batched_tokens,prefill_max_num_batched_tokens");
    for c in &r.candidates {
        let k = &c.candidate;
        let status = match &c.outcome {
            Outcome::Pruned { stage, .. } => format!("pruned_{stage:?}").to_lowercase(),
            Outcome::Failed { .. } => "failed".into(),
            Outcome::Evaluated { .. } => "evaluated".into(),
        };
        let o = c.operating_point();
        let pf = |f: fn(&search::PoolShape) -> u32| {
            k.prefill
                .as_ref()
                .map_or(String::new(), |p| f(p).to_string())
        };
        println!(
            "{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            k.index,
            k.label,
            k.gpu,
            k.tp,
            k.dp,
            k.ep,
            k.replicas,
            pf(|p| p.tp),
            pf(|p| p.dp),
            pf(|p| p.ep),
            pf(|p| p.replicas),
            k.speculative,
            k.kv_cache_dtype.name(),
            k.num_gpus,
            status,
            o.map_or(String::new(), |o| o.level.to_string()),
            o.map_or("", |o| o.basis.as_str()),
            o.map_or(String::new(), |o| o.output_tokens_per_s_per_gpu.to_string()),
            o.and_then(|o| o.e2e_tokens_per_s_per_user)
                .map_or(String::new(), |x| x.to_string()),
            o.and_then(|o| o.ttft_ms_p50)
                .map_or(String::new(), |x| x.to_string()),
            o.and_then(|o| o.usd_per_m_output_tokens)
                .map_or(String::new(), |x| x.to_string()),
            o.and_then(|o| o.usd_per_m_input_tokens)
                .map_or(String::new(), |x| x.to_string()),
            k.weight_precision.map_or("", |p| p.name()),
            k.max_num_seqs.map_or(String::new(), |x| x.to_string()),
            k.max_num_batched_tokens
                .map_or(String::new(), |x| x.to_string()),
            k.prefill
                .and_then(|p| p.max_num_batched_tokens)
                .map_or(String::new(), |x| x.to_string()),
        );
    }
}
