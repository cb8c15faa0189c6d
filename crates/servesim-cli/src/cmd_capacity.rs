//! `servesim capacity`, `servesim gpus`, `servesim models`.

use crate::args::DeploymentArgs;
use anyhow::{bail, Result};
use clap::Args;
use servesim_core::capacity::{compute, CapacityReport, RequestShape};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::catalog as gpu_catalog;
use servesim_core::model::{catalog, AttentionSpec, LayerAttn};

/// Flags of `servesim capacity`.
#[derive(Args, Debug)]
pub struct CapacityArgs {
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    /// Input tokens per request (with --osl: how many such requests fit at once).
    #[arg(long)]
    pub isl: Option<i64>,
    /// Output tokens per request.
    #[arg(long)]
    pub osl: Option<i64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `servesim gpus` / `servesim models`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The deployment the flags state goes through the scenario (the same path as `sweep` and the
/// page: `Scenario::deployment`), starting from the default scenario's vLLM defaults.
pub fn run_capacity(a: &CapacityArgs, m: &clap::ArgMatches) -> Result<()> {
    let mut s = servesim_core::scenario::Scenario::default_scenario();
    if a.deployment.vllm_command.is_none()
        && a.deployment.from_manifest.is_none()
        && !crate::args::given(m, "model")
    {
        bail!("give --model and --gpu, --vllm-command 'vllm serve ...' and --gpu, or --from-manifest FILE");
    }
    if !crate::args::apply_deployment(&mut s, &a.deployment, m)? {
        bail!("give --gpu (a catalog id or the name nvidia-smi prints, e.g. --gpu \"NVIDIA H100 80GB HBM3\"; see `servesim gpus`)");
    }
    let d = s.deployment()?;
    let request = match (a.isl, a.osl) {
        (None, None) => None,
        (Some(i), Some(o)) if i >= 0 && o >= 0 && i + o > 0 => Some(RequestShape {
            isl: i as u64,
            osl: o as u64,
        }),
        (Some(_), Some(_)) => bail!("--isl and --osl must be non-negative and not both 0"),
        _ => bail!("give both --isl and --osl"),
    };
    let r = compute(&d, request)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_report(&r);
    }
    Ok(())
}

fn print_report(r: &CapacityReport) {
    print_main(r);
    if let Some(t) = &r.cpu_tier {
        println!("{}", t.summary_line());
        match t.host_memory_bytes_per_node {
            Some(m) => println!(
                "  node host memory {:.0} GiB ({})",
                m as f64 / (1u64 << 30) as f64,
                t.host_memory_source
            ),
            None => println!("  node host memory: {}", t.host_memory_source),
        }
    }
}

fn print_main(r: &CapacityReport) {
    let b = &r.breakdown;
    println!(
        "{} on {} x{} (tp {}, dp {}, ep {}; {} replica(s), {} engine(s))",
        r.model, r.gpu, r.num_gpus, r.par.tp, r.par.dp, r.par.ep, r.replicas, r.engines
    );
    println!(
        "kv_cache_dtype {}, block_size {}, max_model_len {}, max_num_batched_tokens {}, max_num_seqs {}, gpu_memory_utilization {}",
        r.kv_cache_dtype,
        r.block_size,
        r.max_model_len,
        r.max_num_batched_tokens,
        r.max_num_seqs,
        servesim_core::bounds::fmt_num(r.gpu_memory_utilization)
    );
    println!();
    println!("Per GPU                      GiB");
    let row = |name: &str, gib: f64| println!("  {name:<26} {gib:>9.2}");
    row("visible memory", b.visible.gib);
    row("budget (x utilization)", b.budget.gib);
    row("- weights", b.weights.gib);
    if let Some(v) = b.drafter_weights {
        row("  (of which MTP drafter)", v.gib);
    }
    if let Some(v) = b.vision_weights {
        row("  (of which vision encoder)", v.gib);
    }
    if let Some(v) = b.kernel_padding {
        row("  (of which MXFP4 padding)", v.gib);
    }
    row("- peak activation", b.activation.gib);
    row("- non-torch", b.non_torch.gib);
    if b.cudagraph_in_budget {
        row("- CUDA graphs (estimated)", b.cudagraph.gib);
    }
    row("= available for KV", b.kv_available.gib);
    row("KV pool (whole blocks)", b.kv_pool.gib);
    if !b.cudagraph_in_budget {
        row("CUDA graphs (in headroom)", b.cudagraph.gib);
    }
    row("headroom (1 - util)", b.headroom.gib);
    println!();
    println!("vLLM would log:");
    for l in &r.log_lines {
        println!("  {l}");
    }
    println!();
    println!("fits: {} — {}", r.fits, r.reason);
    if let Some(f) = &r.requests_fit {
        println!(
            "requests of {}+{} tokens at once: {} (KV allows {}, max_num_seqs {})",
            f.isl, f.osl, f.at_once, f.by_kv, r.max_num_seqs
        );
    }
    if !r.fixes.is_empty() {
        println!("deficit: {:.2} GiB. Fixes:", r.deficit.gib);
        for f in &r.fixes {
            println!(
                "  --{} {}: {}",
                f.setting.replace('_', "-"),
                f.value,
                f.effect
            );
        }
    }
    for w in &r.warnings {
        println!("warning: {w}");
    }
    for n in &r.notes {
        println!("note: {n}");
    }
}

pub fn run_gpus(a: &ListArgs) -> Result<()> {
    let gpus = gpu_catalog();
    if a.json {
        println!("{}", serde_json::to_string_pretty(gpus)?);
        return Ok(());
    }
    println!(
        "{:<13} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>6}  aliases",
        "id", "mem GiB", "TB/s", "bf16 TF", "fp8 TF", "fp4 TF", "link GB/s", "domain"
    );
    let opt = |v: Option<f64>| {
        v.map(|x| format!("{:.0}", x / 1e12))
            .unwrap_or_else(|| "-".into())
    };
    for g in gpus {
        println!(
            "{:<13} {:>9.2} {:>7.2} {:>8.0} {:>8} {:>8} {:>8.0} {:>6}  {}{}",
            g.id,
            g.memory_visible_gib(),
            g.hbm_bandwidth_bytes_s / 1e12,
            g.bf16_flops / 1e12,
            opt(g.fp8_flops),
            opt(g.fp4_flops),
            g.scaleup_unidir_bytes_s / 1e9,
            g.scaleup_domain,
            g.aliases.join(", "),
            if g.memory_visible_basis == servesim_core::gpu::MemoryBasis::Assumed {
                " (memory assumed)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

fn attention_kind(a: &AttentionSpec, layers: &[servesim_core::model::LayerSpec]) -> String {
    let sliding = layers
        .iter()
        .filter(|l| matches!(l.attn, LayerAttn::SlidingWindow { .. }))
        .count();
    let base = match a {
        AttentionSpec::Gqa {
            num_heads,
            num_kv_heads,
            ..
        } if num_heads == num_kv_heads => "MHA".to_string(),
        AttentionSpec::Gqa { num_kv_heads, .. } => format!("GQA({num_kv_heads}kv)"),
        AttentionSpec::Mla { .. } => "MLA".into(),
        AttentionSpec::DeepseekV4 { .. } => "DSV4-CSA".into(),
    };
    if sliding > 0 {
        format!("{base}+SWA")
    } else {
        base
    }
}

pub fn run_models(a: &ListArgs) -> Result<()> {
    #[derive(serde::Serialize)]
    struct Row {
        id: String,
        family: String,
        params_total: u64,
        params_active: u64,
        attention: String,
        kv_bytes_per_token_bf16: f64,
        weight_gib_checkpoint: f64,
    }
    let mut rows = Vec::new();
    for id in catalog::ids() {
        let m = catalog::load(id)?;
        let p = m.params();
        let kv = match m.kv_cache_spec(KvCacheDtype::Auto, 1, 16) {
            Ok(s) => s.bytes_per_token(),
            Err(_) => f64::NAN,
        };
        rows.push(Row {
            id: id.to_string(),
            family: format!("{:?}", m.family),
            params_total: p.total,
            params_active: p.active,
            attention: attention_kind(&m.attention, &m.layers),
            kv_bytes_per_token_bf16: kv,
            weight_gib_checkpoint: m.weight_bytes(WeightPrecision::Checkpoint).total.gib(),
        });
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<36} {:<11} {:>9} {:>9} {:<13} {:>12} {:>10}",
        "id", "family", "total B", "active B", "attention", "KV B/token", "weights GiB"
    );
    for r in rows {
        println!(
            "{:<36} {:<11} {:>9.1} {:>9.1} {:<13} {:>12.0} {:>10.1}",
            r.id,
            r.family,
            r.params_total as f64 / 1e9,
            r.params_active as f64 / 1e9,
            r.attention,
            r.kv_bytes_per_token_bf16,
            r.weight_gib_checkpoint
        );
    }
    println!("KV B/token: whole model, one GPU (TP 1), KV dtype auto (the model dtype; DeepSeek-V4 forces fp8_ds_mla).");
    println!();
    println!("Known releases (each runs on the shipped config named, with its own context and quantization; docs/inputs.md \"Model ids\"):");
    for (id, config) in servesim_core::model::ids::releases() {
        println!("  {id:<44} -> {config}");
    }
    println!("Re-quantized copies (-FP8, -FP4, -NVFP4, -AWQ, -GPTQ-Int4, ...) of these and of the table resolve too.");
    Ok(())
}
