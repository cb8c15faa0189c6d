//! `servesim step --scenario S.json`: the step-time model's breakdown of one engine step
//! (docs/step-time.md), so any ITL or TTFT the simulator reports can be traced to its terms.

use anyhow::{bail, Context, Result};
use clap::Args;
use servesim_core::bounds::{MAX_NUM_SEQS, TOKENS};
use servesim_core::perf::PrefillChunk;
use servesim_core::scenario::Scenario;
use std::path::PathBuf;

#[derive(Args, Clone, Debug)]
pub struct StepArgs {
    /// The scenario JSON (`servesim sweep --print-scenario`, `servesim validate --scenario-of`).
    #[arg(long)]
    pub scenario: PathBuf,
    /// Sequences decoding one token in the step.
    #[arg(long, default_value_t = 0)]
    pub decode: u64,
    /// Mean context (tokens in the KV cache) of the decoding sequences.
    #[arg(long, default_value_t = 0)]
    pub ctx: u64,
    /// A prefill chunk as NEW or NEW:PAST (tokens computed now : tokens already cached);
    /// repeatable.
    #[arg(long, value_name = "NEW[:PAST]")]
    pub prefill: Vec<String>,
    /// Disaggregated scenarios: the pool whose engine step to break down (prefill | decode,
    /// default decode).
    #[arg(long)]
    pub pool: Option<String>,
    /// Disaggregated scenarios: also break down the KV transfer of this many tokens (prefill
    /// worker 0 to decode worker 0; docs/topology.md "KV transfer"). Alone, only the transfer.
    #[arg(long, value_name = "TOKENS")]
    pub transfer: Option<u64>,
    /// Another DP rank's batch in the same lockstep step (DP + EP on a MoE model), as
    /// DECODE[:CTX] decode sequences at mean context CTX; repeatable, one per other rank
    /// (ranks not given run vLLM's one-token dummy batch).
    #[arg(long, value_name = "DECODE[:CTX]")]
    pub rank: Vec<String>,
    /// Print the breakdown as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--transfer TOKENS`: every term of one KV transfer.
fn print_transfer(
    r: &servesim_core::scenario::ResolvedScenario,
    tokens: u64,
    json: bool,
) -> Result<()> {
    let Some(d) = &r.disagg else {
        bail!("--transfer needs a disaggregated scenario (topology.prefill and topology.decode)");
    };
    if let Err(fix) = TOKENS.check_u64(tokens.max(1)) {
        bail!("--transfer {tokens}: {fix}");
    }
    let m = &d.transfer;
    let path = m.path_between(0, 0);
    let b = m.breakdown(tokens, path);
    if json {
        println!("{}", serde_json::to_string_pretty(&b)?);
        return Ok(());
    }
    println!(
        "KV transfer of {tokens} tokens, prefill worker 0 (TP{}) -> decode worker 0 (TP{}), path {:?}:",
        m.prefill_tp, m.decode_tp, path
    );
    println!(
        "  bytes per token per decode rank {:>14.1} B",
        m.recv_bytes_per_token
    );
    println!(
        "  per-request state per rank      {:>14} B",
        m.recv_fixed_bytes
    );
    println!(
        "  received per decode rank        {:>14.0} B  (tokens x bytes/token + state)",
        b.recv_bytes_per_decode_rank
    );
    println!(
        "  sent per prefill rank           {:>14.0} B  (decode TP x received / prefill TP)",
        b.send_bytes_per_prefill_rank
    );
    println!(
        "  total over all ranks            {:>14.0} B",
        b.total_bytes
    );
    println!(
        "  link rate per GPU               {:>14.3} GB/s",
        b.link_gb_s
    );
    println!(
        "  wire time                       {:>14.4} ms  (max(sent, received) / rate)",
        b.wire_ms
    );
    println!(
        "  latency                         {:>14.4} ms",
        b.latency_ms
    );
    println!("  total                           {:>14.4} ms", b.total_ms);
    Ok(())
}

fn parse_rank(s: &str) -> Result<(u64, u64)> {
    let (d, c) = s.split_once(':').unwrap_or((s, "0"));
    let d: u64 = d
        .trim()
        .parse()
        .with_context(|| format!("--rank `{s}`: DECODE must be a whole number of sequences"))?;
    let c: u64 = c
        .trim()
        .parse()
        .with_context(|| format!("--rank `{s}`: CTX must be a whole number of tokens"))?;
    if let Err(fix) = MAX_NUM_SEQS.check_u64(d.max(1)) {
        bail!("--rank `{s}`: DECODE {fix}");
    }
    if let Err(fix) = TOKENS.check_u64(c.max(1)) {
        bail!("--rank `{s}`: CTX {fix}");
    }
    Ok((d, c))
}

fn parse_chunk(s: &str) -> Result<PrefillChunk> {
    let (new, past) = match s.split_once(':') {
        Some((n, p)) => (n, p),
        None => (s, "0"),
    };
    let new: u64 = new
        .trim()
        .parse()
        .with_context(|| format!("--prefill `{s}`: NEW must be a whole number of tokens"))?;
    let past: u64 = past
        .trim()
        .parse()
        .with_context(|| format!("--prefill `{s}`: PAST must be a whole number of tokens"))?;
    if new == 0 {
        bail!("--prefill `{s}`: NEW must be at least 1 token");
    }
    for (what, v) in [("NEW", new), ("PAST", past)] {
        if v > TOKENS.max as u64 {
            bail!("--prefill `{s}`: {what} {}", TOKENS.fix());
        }
    }
    Ok(PrefillChunk { past, new })
}

pub fn run_step(a: &StepArgs) -> Result<()> {
    let text = crate::input::read_text(&a.scenario)?;
    let sc = Scenario::from_json(&text)?;
    let resolved = sc.resolve()?;
    if let Some(n) = a.transfer {
        print_transfer(&resolved, n, a.json)?;
        if a.prefill.is_empty() && a.decode == 0 {
            return Ok(());
        }
        if !a.json {
            println!();
        }
    }
    let r = match (a.pool.as_deref(), &resolved.disagg) {
        (None | Some("decode"), _) => &resolved,
        (Some("prefill"), Some(d)) => &d.prefill,
        (Some("prefill"), None) => {
            bail!("--pool prefill needs a disaggregated scenario (topology.prefill and topology.decode)")
        }
        (Some(other), _) => bail!("--pool {other}: give prefill or decode"),
    };
    let chunks = a
        .prefill
        .iter()
        .map(|s| parse_chunk(s))
        .collect::<Result<Vec<_>>>()?;
    if chunks.is_empty() && a.decode == 0 {
        bail!("the step is empty: give --decode N (with --ctx C) and/or --prefill NEW[:PAST]");
    }
    if let Err(fix) = MAX_NUM_SEQS.check_u64(a.decode.max(1)) {
        bail!("--decode {}: {fix}", a.decode);
    }
    if let Err(fix) = TOKENS.check_u64(a.ctx.max(1)) {
        bail!("--ctx {}: {fix}", a.ctx);
    }
    if a.decode == 0 && a.ctx > 0 {
        bail!(
            "--ctx {} is the mean context of decoding sequences: give --decode N too",
            a.ctx
        );
    }
    // Every decode at `--ctx`: the longest context is `--ctx` (V0's graph limit reads it).
    let b =
        r.cost
            .breakdown_with_ctx_max(chunks.iter().copied(), a.decode, a.decode * a.ctx, a.ctx);
    // Lockstep (DP + EP on a MoE model): the other ranks' steps and the group's.
    let dp = r.deployment.par.dp as usize;
    let lockstep = r.deployment.dp_lockstep();
    if !a.rank.is_empty() && !lockstep {
        bail!("--rank describes other DP ranks of a lockstep step: the scenario needs a MoE model with dp > 1 and enable_expert_parallel stated");
    }
    if a.rank.len() + 1 > dp.max(1) {
        bail!(
            "--rank given {} times: the replica has {dp} DP ranks, so at most {} other ranks",
            a.rank.len(),
            dp.saturating_sub(1)
        );
    }
    let ranks = a
        .rank
        .iter()
        .map(|s| parse_rank(s))
        .collect::<Result<Vec<_>>>()?;
    let mut rank_s = vec![b.total()];
    if lockstep {
        let dummy = r.cost.breakdown_iter(std::iter::empty(), 1, 0).total();
        for i in 1..dp {
            rank_s.push(match ranks.get(i - 1) {
                Some(&(d, c)) if d > 0 => {
                    r.cost.breakdown_iter(std::iter::empty(), d, d * c).total()
                }
                _ => dummy,
            });
        }
    }
    let lockstep_s = rank_s.iter().copied().fold(0.0, f64::max);
    // vLLM V0 without chunked prefill never mixes them: the prompts run in a step of their own,
    // then the decodes (docs/engine.md, "V0 prefill-first steps").
    let v0_split = (r.engine.v0_prefill_first && a.decode > 0 && !chunks.is_empty()).then(|| {
        let prompts = r
            .cost
            .breakdown_with_ctx_max(chunks.iter().copied(), 0, 0, 0)
            .total();
        let decodes = r
            .cost
            .breakdown_with_ctx_max(std::iter::empty(), a.decode, a.decode * a.ctx, a.ctx)
            .total();
        (prompts, decodes)
    });
    if a.json {
        let mut v = serde_json::to_value(b)?;
        if let Some((p, d)) = v0_split {
            v["v0_prefill_first"] = serde_json::json!({
                "prompt_step_s": p,
                "decode_step_s": d,
            });
        }
        if lockstep {
            v["lockstep"] = serde_json::json!({
                "rank_step_s": rank_s,
                "step_s": lockstep_s,
            });
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let ms = |s: f64| s * 1e3;
    println!(
        "step: {} decode seqs at mean context {}, {} prefill chunk(s) ({} tokens); {:?}, {} tokens padded to {}",
        a.decode,
        a.ctx,
        chunks.len(),
        chunks.iter().map(|c| c.new).sum::<u64>(),
        b.mode,
        b.work.tokens,
        b.work.padded_tokens
    );
    println!("total            {:9.3} ms", ms(b.total()));
    for (name, v) in [
        ("gemm compute", b.gemm_compute),
        ("weight reads", b.weight_reads),
        ("attention comp", b.attention_compute),
        ("kv reads", b.kv_reads),
        ("activations", b.activations),
        ("tp all-reduce", b.tp_allreduce),
        ("ep all-to-all", b.ep_alltoall),
        ("overhead", b.overhead),
        ("moe floor", b.moe_floor),
        ("mla floor", b.mla_floor),
    ] {
        println!("  {name:<15}{:9.3} ms", ms(v));
    }
    println!("raw (before the roofline max):");
    let raw = &b.raw;
    for (name, v) in [
        ("dense gemm", raw.dense_gemm_compute),
        ("dense weights", raw.dense_weight_reads),
        ("expert gemm", raw.expert_gemm_compute),
        ("expert weights", raw.expert_weight_reads),
        ("prefill attn", raw.prefill_attention_compute),
        ("prefill kv", raw.prefill_kv_reads),
        ("decode attn", raw.decode_attention_compute),
        ("decode kv", raw.decode_kv_reads),
        ("launch (cpu)", raw.launch),
    ] {
        println!("  {name:<15}{:9.3} ms", ms(v));
    }
    if raw.gdn_prefill > 0.0 {
        println!(
            "  {:<15}{:9.3} ms (in prefill attn: the Gated DeltaNet prefill kernels' chunk chain beyond their FLOPs, docs/step-time.md §3)",
            "gdn chunks",
            ms(raw.gdn_prefill)
        );
    }
    if raw.unfused_fp8 > 0.0 {
        println!(
            "  {:<15}{:9.3} ms (in overhead: vLLM V0's unfused fp8 calls on ROCm, docs/step-time.md §6)",
            "unfused fp8",
            ms(raw.unfused_fp8)
        );
    }
    if let (Some(l), Some(m)) = (&b.all2all, r.cost.all2all_model()) {
        let layers = r.cost.num_moe_layers();
        println!(
            "all-to-all per MoE layer (EP {}, {} tokens per GPU, {}; x {layers} MoE layers per step):",
            m.ep_size(),
            l.tokens_per_gpu,
            if l.internode { "across nodes" } else { "inside the NVLink domain" }
        );
        println!(
            "  {:<24}{:>10}{:>12}{:>10}{:>12}{:>12}",
            "backend", "dispatch", "bytes", "combine", "bytes", "per step"
        );
        for bk in servesim_core::deploy::All2AllBackend::ALL {
            let t = m.with_backend(bk).layer(b.work.padded_tokens);
            println!(
                "  {:<24}{:>7.1} us{:>12}{:>7.1} us{:>12}{:>9.3} ms{}",
                bk.name(),
                t.dispatch_s * 1e6,
                fmt_bytes(t.dispatch_bytes),
                t.combine_s * 1e6,
                fmt_bytes(t.combine_bytes),
                ms(layers * (t.dispatch_s + t.combine_s)),
                if bk == m.backend {
                    "  <- this scenario"
                } else {
                    ""
                }
            );
        }
        println!(
            "  TP all-gather after the sequence-parallel MoE: {:.1} us per layer",
            l.tp_allgather_s * 1e6
        );
    }
    if let Some((p, d)) = v0_split {
        println!("vLLM V0 without chunked prefill does not run this mixed step: the prompts run alone, then the decodes:");
        println!(
            "  prompt step    {:9.3} ms  (--prefill alone; no decode advances)",
            ms(p)
        );
        println!("  decode step    {:9.3} ms  (--decode alone)", ms(d));
        println!(
            "  together       {:9.3} ms  (the decodes' gap across the prompts)",
            ms(p + d)
        );
    }
    if lockstep {
        println!("lockstep (vLLM DP + EP: the slowest rank sets the step; idle ranks run a one-token dummy batch):");
        for (i, s) in rank_s.iter().enumerate() {
            let what = if i == 0 {
                "this step".to_string()
            } else {
                match ranks.get(i - 1) {
                    Some(&(d, c)) if d > 0 => format!("{d} decode seqs at context {c}"),
                    _ => "dummy batch".to_string(),
                }
            };
            println!("  rank {i:<3} {:9.3} ms  ({what})", ms(*s));
        }
        println!(
            "  step      {:9.3} ms  (max over the {dp} ranks)",
            ms(lockstep_s)
        );
    }
    Ok(())
}

fn fmt_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}
