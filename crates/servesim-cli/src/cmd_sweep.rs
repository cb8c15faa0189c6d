//! `servesim sweep`: build a [`Scenario`] from flags (or `--scenario FILE` plus overriding flags),
//! resolve it, run the sweep level by level and print a table, CSV or the JSON report.
//! The flag -> scenario mapping is documented in docs/scenario.md ("CLI").

use crate::args::{given, DeploymentArgs};
use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Args};
use servesim_core::metric::MetricId;
use servesim_core::metrics::LevelResult;
use servesim_core::scenario::{CapacitySummary, Scenario, SweepReport};
use servesim_core::settings::{self, SettingValue, ValueKind};
use servesim_core::workload::{
    RawArrival, RawContent, RawLengthDist, RawSharedPrefix, MOONCAKE_BLOCK_TOKENS,
};
use std::path::Path;
use std::time::Instant;

/// Flags of `servesim sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    #[command(flatten)]
    pub topology: crate::topology_args::TopologyArgs,
    // Workload and sweep flags: help, range and how each lands on the scenario come from the
    // core's table, `servesim_core::settings` (applied by `build_scenario`).
    #[arg(long, help = settings::help("workload"))]
    pub workload: Option<String>,
    /// The vLLM version served (e.g. 0.15.1, 0.11.0): selects the calibration of its release line
    /// (docs/accuracy.md). Default: the newest calibrated line.
    #[arg(long)]
    pub vllm_version: Option<String>,
    #[arg(long, help = settings::help("isl"))]
    pub isl: Option<f64>,
    #[arg(long, help = settings::help("osl"))]
    pub osl: Option<f64>,
    #[arg(long, help = settings::help("isl-dist"))]
    pub isl_dist: Option<String>,
    #[arg(long, help = settings::help("osl-dist"))]
    pub osl_dist: Option<String>,
    #[arg(long, conflicts_with = "prefix_reuse", help = settings::help("prefix-tokens"))]
    pub prefix_tokens: Option<f64>,
    #[arg(long, help = settings::help("prefix-groups"))]
    pub prefix_groups: Option<f64>,
    #[arg(long, help = settings::help("prefix-prompts"))]
    pub prefix_prompts: Option<f64>,
    #[arg(long, help = settings::help("prefix-reuse"))]
    pub prefix_reuse: Option<f64>,
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["request_rate", "burst"], help = settings::help("concurrency"))]
    pub concurrency: Option<Vec<f64>>,
    #[arg(long, value_delimiter = ',', conflicts_with = "burst", help = settings::help("request-rate"))]
    pub request_rate: Option<Vec<f64>>,
    #[arg(long, value_delimiter = ',', help = settings::help("burst"))]
    pub burst: Option<Vec<f64>>,
    #[arg(long, conflicts_with = "duration", help = settings::help("num-requests"))]
    pub num_requests: Option<f64>,
    #[arg(long, help = settings::help("duration"))]
    pub duration: Option<f64>,
    #[arg(long, help = settings::help("warmup"))]
    pub warmup: Option<f64>,
    #[arg(long, help = settings::help("seed"))]
    pub seed: Option<u64>,
    #[arg(long, help = settings::help("trace"))]
    pub trace: Option<String>,
    #[arg(long, help = settings::help("sla"))]
    pub sla: Option<String>,
    /// Start from this scenario JSON; flags given alongside override its fields.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Print the scenario JSON (canonical) and exit without simulating.
    #[arg(long)]
    pub print_scenario: bool,
    /// Print one JSON object (scenario, capacity, levels, operating_point).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print one CSV row per level (columns are metric names).
    #[arg(long)]
    pub csv: bool,
    /// Refine the SLA operating point by simulation: bisect between the last passing and the
    /// first failing level with at most N extra level simulations (docs/metrics.md).
    #[arg(long, value_name = "N")]
    pub refine_sla: Option<usize>,
    /// Threads to run on: a sweep's levels (each level is independent; default: the cores
    /// available, at most 4, as each running level may hold up to the 4 GiB level memory budget)
    /// or a search's candidates (default: the cores available); 1 to 64. The output does not
    /// depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: Option<u16>,
    /// The GPU used when none is stated (`servesim search`: the first of --gpus).
    #[arg(skip)]
    pub default_gpu: Option<String>,
}

/// Parses a length distribution flag around `mean`.
pub fn parse_dist(flag: &str, spec: &str, mean: f64) -> Result<RawLengthDist> {
    let spec = spec.trim();
    let (kind, rest) = match spec.split_once(':') {
        Some((k, r)) => (k, Some(r)),
        None => (spec, None),
    };
    let num = |s: &str, what: &str| -> Result<f64> {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .with_context(|| format!("--{flag} {spec}: {what} `{s}` is not a number"))
    };
    let range = |s: &str| -> Result<(f64, f64)> {
        let (a, b) = s
            .split_once('-')
            .with_context(|| format!("--{flag} {spec}: expected MIN-MAX, got `{s}`"))?;
        Ok((num(a, "MIN")?, num(b, "MAX")?))
    };
    Ok(match kind {
        "constant" => {
            if rest.is_some() {
                bail!("--{flag} {spec}: constant takes no parameters");
            }
            RawLengthDist::Constant { tokens: mean }
        }
        "uniform" => {
            let (lo, hi) = range(rest.with_context(|| {
                format!("--{flag} {spec}: use uniform:LO-HI with ratios of the mean, e.g. uniform:0.8-1.0")
            })?)?;
            RawLengthDist::UniformRatio {
                nominal: mean,
                min_ratio: lo,
                max_ratio: hi,
            }
        }
        "normal" => {
            let r = rest.with_context(|| format!("--{flag} {spec}: use normal:STD[:MIN-MAX]"))?;
            let (std, clamp) = match r.split_once(':') {
                Some((s, c)) => (num(s, "STD")?, Some(range(c)?)),
                None => (num(r, "STD")?, None),
            };
            let (min, max) = clamp.unwrap_or((1.0, libm::round(mean + 4.0 * std)));
            RawLengthDist::Normal {
                mean,
                std,
                min,
                max,
            }
        }
        "lognormal" => {
            let r = rest.with_context(|| format!("--{flag} {spec}: use lognormal:SIGMA[:MIN-MAX]"))?;
            let (sigma, clamp) = match r.split_once(':') {
                Some((s, c)) => (num(s, "SIGMA")?, Some(range(c)?)),
                None => (num(r, "SIGMA")?, None),
            };
            if sigma <= 0.0 {
                bail!("--{flag} {spec}: SIGMA must be > 0");
            }
            // std of a lognormal with log-space sigma and the given mean.
            let std = mean * libm::sqrt(libm::exp(sigma * sigma) - 1.0);
            RawLengthDist::Lognormal {
                mean,
                std,
                min: clamp.map(|c| c.0),
                max: clamp.map(|c| c.1),
            }
        }
        "exponential" => {
            let clamp = rest.map(range).transpose()?;
            RawLengthDist::Exponential {
                mean,
                min: clamp.map(|c| c.0),
                max: clamp.map(|c| c.1),
            }
        }
        other => bail!(
            "--{flag} {other}: use constant, uniform:LO-HI, normal:STD[:MIN-MAX], lognormal:SIGMA[:MIN-MAX] or exponential[:MIN-MAX]"
        ),
    })
}

/// The scenario the flags describe: `--scenario FILE` (or the default scenario) with every flag
/// given on the command line applied on top.
pub fn build_scenario(a: &SweepArgs, m: &ArgMatches) -> Result<Scenario> {
    let mut s = match &a.scenario {
        Some(path) => {
            let text = crate::input::read_text(Path::new(path))?;
            Scenario::from_json(&text).with_context(|| format!("scenario {path}"))?
        }
        None => {
            let cmd = a.deployment.vllm_command.is_some() || a.deployment.from_manifest.is_some();
            if !cmd && !given(m, "model") {
                bail!("give --model and --gpu, --vllm-command 'vllm serve ...' and --gpu, --from-manifest FILE, or --scenario FILE");
            }
            Scenario::default_scenario()
        }
    };
    if let Some(v) = &a.vllm_version {
        servesim_core::perf::VllmVersion::parse(v).map_err(|e| {
            anyhow::anyhow!("--vllm-version {v}: {e}; write MAJOR.MINOR[.PATCH], e.g. 0.15.1")
        })?;
        s.vllm_version = Some(v.clone());
    }
    let gpu_stated = crate::args::apply_deployment(&mut s, &a.deployment, m)?;
    if let (None, false, Some(g)) = (&a.scenario, gpu_stated, &a.default_gpu) {
        s.gpu = servesim_core::scenario::GpuRef::Catalog(g.clone());
    } else if a.scenario.is_none() && !gpu_stated {
        bail!("give --gpu (a catalog id or the name nvidia-smi prints, e.g. --gpu \"NVIDIA H100 80GB HBM3\"; see `servesim gpus`)");
    }

    // Request content.
    let content_flags = a.workload.is_some()
        || a.isl.is_some()
        || a.osl.is_some()
        || a.isl_dist.is_some()
        || a.osl_dist.is_some()
        || a.prefix_tokens.is_some()
        || a.prefix_groups.is_some()
        || a.prefix_prompts.is_some()
        || a.prefix_reuse.is_some()
        || a.trace.is_some();
    if content_flags {
        let kind = match &a.workload {
            Some(w) => w.as_str(),
            None if a.trace.is_some() => "trace",
            None if a.prefix_tokens.is_some() || a.prefix_reuse.is_some() => "shared-prefix",
            None => "random",
        };
        s.workload.requests = content_from_flags(a, kind)?;
        if kind == "trace" && a.concurrency.is_none() && a.burst.is_none() {
            s.workload.arrival = RawArrival::Trace { rate: None };
            s.sweep.concurrency = None;
        }
    }

    // Levels, stop rule, warm-up, seed and SLA: every other flag of the settings table, in
    // the table's order.
    for st in settings::settings() {
        let Some(flag) = st.flag else { continue };
        if st.target == settings::Target::Content {
            continue;
        }
        let id = flag.replace('-', "_");
        let bad = |e: clap::parser::MatchesError| anyhow::anyhow!("--{flag}: {e}");
        let list: Vec<f64>;
        let v = match st.kind {
            ValueKind::Number => m
                .try_get_one::<f64>(&id)
                .map_err(bad)?
                .map(|x| SettingValue::Number(*x)),
            ValueKind::Whole => m
                .try_get_one::<u64>(&id)
                .map_err(bad)?
                .map(|x| SettingValue::Whole(*x)),
            ValueKind::Text => m
                .try_get_one::<String>(&id)
                .map_err(bad)?
                .map(|x| SettingValue::Text(x)),
            ValueKind::Numbers => match m.try_get_many::<f64>(&id).map_err(bad)? {
                Some(xs) => {
                    list = xs.copied().collect();
                    Some(SettingValue::Numbers(&list))
                }
                None => None,
            },
        };
        if let Some(v) = v {
            settings::apply(&mut s, st, v).map_err(|e| anyhow::anyhow!("--{flag} {e}"))?;
        }
    }
    a.topology.apply(&mut s)?;
    Ok(s)
}

fn content_from_flags(a: &SweepArgs, kind: &str) -> Result<RawContent> {
    let isl = a.isl.unwrap_or(1024.0);
    let osl = a.osl.unwrap_or(128.0);
    let dist = |flag: &str, d: &Option<String>, mean: f64| -> Result<RawLengthDist> {
        match d {
            None => Ok(RawLengthDist::Constant { tokens: mean }),
            Some(spec) => parse_dist(flag, spec, mean),
        }
    };
    let prefix_flags = a.prefix_tokens.is_some()
        || a.prefix_groups.is_some()
        || a.prefix_prompts.is_some()
        || a.prefix_reuse.is_some();
    Ok(match kind {
        "random" => {
            if prefix_flags {
                bail!("--prefix-* flags need --workload shared-prefix");
            }
            RawContent::Synthetic {
                input: dist("isl-dist", &a.isl_dist, isl)?,
                output: dist("osl-dist", &a.osl_dist, osl)?,
                shared_prefix: None,
            }
        }
        "shared-prefix" => {
            let prefix = match (a.prefix_tokens, a.prefix_reuse) {
                (Some(t), None) => t,
                (None, Some(f)) => {
                    if !(f > 0.0 && f < 1.0) {
                        bail!("--prefix-reuse {f}: must be a fraction in (0, 1)");
                    }
                    libm::round(f * isl)
                }
                _ => bail!("--workload shared-prefix needs --prefix-tokens N or --prefix-reuse F"),
            };
            if prefix >= isl {
                bail!("--prefix-tokens {prefix}: must be below --isl {isl} (the prompt includes the prefix)");
            }
            RawContent::Synthetic {
                input: dist("isl-dist", &a.isl_dist, isl - prefix)?,
                output: dist("osl-dist", &a.osl_dist, osl)?,
                shared_prefix: Some(RawSharedPrefix {
                    groups: a.prefix_groups.unwrap_or(1.0),
                    tokens: prefix,
                    prompts_per_group: a.prefix_prompts,
                }),
            }
        }
        "agentic" => {
            if a.isl.is_some()
                || a.osl.is_some()
                || a.isl_dist.is_some()
                || a.osl_dist.is_some()
                || prefix_flags
            {
                bail!("--workload agentic is the agentic-coding preset (64K input, 400 output, ~90% prefix reuse); its lengths are fixed. For other sessions write a scenario file with requests.type = agentic (docs/workloads.md)");
            }
            RawContent::Preset {
                name: "agentic-coding".into(),
            }
        }
        "trace" => {
            let path = a
                .trace
                .as_ref()
                .context("--workload trace needs --trace FILE (Mooncake JSONL)")?;
            if a.isl.is_some()
                || a.osl.is_some()
                || a.isl_dist.is_some()
                || a.osl_dist.is_some()
                || prefix_flags
            {
                bail!("--workload trace takes lengths and prefixes from the trace; drop --isl/--osl/--*-dist/--prefix-*");
            }
            let jsonl = crate::input::read_text(Path::new(path))?;
            RawContent::Mooncake {
                jsonl,
                block_tokens: Some(MOONCAKE_BLOCK_TOKENS as f64),
            }
        }
        other => bail!("--workload {other}: use random, shared-prefix, agentic or trace"),
    })
}

fn level_label(l: &LevelResult) -> String {
    match l.level {
        servesim_core::workload::Level::Concurrency(c) => format!("c={c}"),
        servesim_core::workload::Level::RequestRate(r) => format!("rate={r}"),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// A window rate: "no value" when absent (the level's `no_value` says why, below the table).
fn rate(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "no value".into(),
    }
}

pub fn run_sweep(a: &SweepArgs, m: &ArgMatches) -> Result<()> {
    let scenario = build_scenario(a, m)?;
    if a.print_scenario {
        println!("{}", scenario.to_json_pretty());
        return Ok(());
    }
    let resolved = scenario.resolve()?;
    for w in resolved.warnings() {
        eprintln!("warning: {w}");
    }
    let mut result = run_levels(&resolved, a.threads.map(usize::from))?;
    if let Some(n) = a.refine_sla {
        resolved.refine(&mut result, n.min(64))?;
        match &result.refined_operating_point {
            Some(r) => {
                for s in &r.steps {
                    eprintln!(
                        "refine: level {} {} ({} tok/s/GPU)",
                        s.level,
                        match s.passes {
                            Some(true) => "passes",
                            Some(false) => "fails",
                            None => "has no value for a gate (neither passes nor fails)",
                        },
                        rate(s.output_tokens_per_s_per_gpu, 2)
                    );
                }
                eprintln!("SLA operating point (refined): {}", r.summary);
            }
            None => eprintln!("SLA operating point: no crossing between the levels to refine"),
        }
    }
    if a.json {
        print!(
            "{}",
            SweepReport::new(&scenario, &resolved, &result).to_json_pretty()
        );
    } else if a.csv {
        let metrics = MetricId::all();
        let mut header = vec!["level".to_string(), "value".to_string()];
        header.extend(metrics.iter().map(|m| m.name()));
        println!("{}", header.join(","));
        for l in &result.levels {
            let kind = match l.level {
                servesim_core::workload::Level::Concurrency(_) => "concurrency",
                servesim_core::workload::Level::RequestRate(_) => "request_rate",
            };
            let mut row = vec![kind.to_string(), l.level.value().to_string()];
            row.extend(
                metrics
                    .iter()
                    .map(|m| l.get(*m).map(|v| v.to_string()).unwrap_or_default()),
            );
            println!("{}", row.join(","));
        }
    } else {
        print_table(&CapacitySummary::of(&resolved.capacity), &resolved, &result);
    }
    Ok(())
}

/// `servesim sweep` without `--threads` runs at most this many levels at once (each may hold up to
/// the per-level memory budget).
pub const MAX_DEFAULT_SWEEP_THREADS: usize = 4;

/// The threads to use: `--threads` (1 to 64, checked by the flag), else the cores available up
/// to `default_cap`; at most one per job.
pub fn threads_for(asked: Option<usize>, default_cap: usize, jobs: usize) -> usize {
    asked
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |x| x.get().min(default_cap))
        })
        .clamp(1, 64)
        .min(jobs.max(1))
}

/// Runs every level of the sweep on `threads` threads (`SweepRunner::run_at` on a runner per
/// thread, the next level index to whichever thread is free, highest level first as they take
/// longest) and assembles them in level order (`finish_with`): the same result as one thread.
fn run_levels(
    resolved: &servesim_core::scenario::ResolvedScenario,
    threads: Option<usize>,
) -> Result<servesim_core::sweep::SweepResult> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let runner = resolved.runner()?;
    let total = runner.total_levels();
    // Each thread holds one level (up to the level memory budget, `budget::DEFAULT_MEMORY_BUDGET`),
    // so without --threads at most MAX_DEFAULT_SWEEP_THREADS levels run at once.
    let threads = threads_for(threads, MAX_DEFAULT_SWEEP_THREADS, total);
    let t0 = Instant::now();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let outputs = Mutex::new(Vec::with_capacity(total));
    // A level that fails is reported by its index; the lowest one is the sweep's error, as
    // one thread stepping in order would report it.
    let errors = Mutex::new(Vec::new());
    let work = || {
        let mut mine = match resolved.runner() {
            Ok(r) => r,
            Err(e) => {
                if let Ok(mut v) = errors.lock() {
                    v.push((0, e));
                }
                return;
            }
        };
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= total {
                return;
            }
            // One thread runs the levels in order; several start from the highest (the
            // longest), so no thread is left with a long level at the end.
            let i = if threads == 1 { k } else { total - 1 - k };
            let Some(out) = mine.run_at(i, &mut |_| {}) else {
                return;
            };
            let out = match out {
                Ok(o) => o,
                Err(e) => {
                    if let Ok(mut v) = errors.lock() {
                        v.push((i, servesim_core::scenario::ScenarioError::Sweep(e)));
                    }
                    if threads == 1 {
                        return;
                    }
                    continue;
                }
            };
            let l = &out.result;
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            eprintln!(
                "[{}/{}] {}: {} output tok/s, TTFT p50 {} ms, ITL p50 {} ms ({:.2} s elapsed)",
                n,
                total,
                level_label(l),
                rate(l.output_tokens_per_s, 0),
                opt(l.ttft_ms.map(|d| d.p50), 1),
                opt(l.itl_ms.map(|d| d.p50), 2),
                t0.elapsed().as_secs_f64()
            );
            if let Ok(mut o) = outputs.lock() {
                o.push(out);
            }
        }
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|sc| {
            for _ in 0..threads {
                sc.spawn(work);
            }
        });
    }
    let mut errors = errors
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a sweep thread failed"))?;
    errors.sort_by_key(|(i, _)| *i);
    if let Some((_, e)) = errors.into_iter().next() {
        return Err(e.into());
    }
    let outputs = outputs
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a sweep thread failed"))?;
    if outputs.len() != total {
        bail!("a sweep thread failed before finishing its levels");
    }
    Ok(runner.finish_with(outputs))
}

fn print_table(
    c: &CapacitySummary,
    r: &servesim_core::scenario::ResolvedScenario,
    res: &servesim_core::sweep::SweepResult,
) {
    if let Some(dis) = &r.disagg {
        let p = &dis.prefill;
        let pc = servesim_core::scenario::CapacitySummary::of(&p.capacity);
        println!(
            "disaggregated: {} GPUs; prefill pool {} x{} (tp {}, dp {}; {} worker(s); {} blocks per engine, max_num_batched_tokens {}, no drafter), decode pool below; KV transfer {}",
            r.sweep.gpus,
            p.deployment.gpu.id,
            p.deployment.num_gpus,
            p.deployment.par.tp,
            p.deployment.par.dp,
            p.topology.replicas,
            pc.num_gpu_blocks,
            pc.max_num_batched_tokens,
            match dis.transfer.path_between(0, 0) {
                servesim_core::topology::KvPath::Nvlink => format!(
                    "over NVLink ({:.0} GB/s per GPU)",
                    dis.transfer.nvlink_bytes_s / 1e9
                ),
                _ => format!(
                    "over RDMA ({:.0} Gb/s per GPU)",
                    dis.transfer.rdma_bytes_s * 8.0 / 1e9
                ),
            }
        );
        print!("decode pool: ");
    }
    let d = &r.deployment;
    println!(
        "{} on {} x{} (tp {}, dp {}, ep {}; {} engine(s)), KV {} ({} blocks x {} tokens per engine, {:.2} GiB)",
        d.model.name,
        d.gpu.id,
        d.num_gpus,
        d.par.tp,
        d.par.dp,
        d.par.ep,
        c.engines,
        d.kv_cache_dtype.name(),
        c.num_gpu_blocks,
        c.block_size,
        c.kv_cache_memory_gib
    );
    println!(
        "max_num_seqs {}, max_num_batched_tokens {}, max_model_len {}",
        c.max_num_seqs, c.max_num_batched_tokens, c.max_model_len
    );
    println!("{}", r.calibration.summary);
    println!("{}", r.evidence().summary);
    println!();
    println!(
        "{:>10} {:>9} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>7} {:>6}",
        "level",
        "completed",
        "out tok/s",
        "tok/s/GPU",
        "tok/s/usr",
        "e2e t/s/u",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "preempt",
        "hit"
    );
    for l in &res.levels {
        println!(
            "{:>10} {:>9} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>7} {:>6}",
            level_label(l),
            l.completed_requests,
            rate(l.output_tokens_per_s, 1),
            rate(l.output_tokens_per_s_per_gpu, 1),
            opt(l.output_tokens_per_s_per_user, 1),
            opt(l.e2e_tokens_per_s_per_user, 1),
            opt(l.ttft_ms.map(|d| d.p50), 1),
            opt(l.ttft_ms.map(|d| d.p99), 1),
            opt(l.itl_ms.map(|d| d.p50), 2),
            opt(l.itl_ms.map(|d| d.p99), 2),
            l.preemptions,
            opt(l.prefix_cache_hit_rate, 2),
        );
    }
    let window = match r.sweep.stop {
        servesim_core::sweep::Stop::Duration { .. } => "warm-up excluded",
        servesim_core::sweep::Stop::Requests(_) => "the whole run, until every request finished",
        servesim_core::sweep::Stop::Burst => "the whole run, until the burst finished",
    };
    println!("(TTFT and ITL in ms; window per level: {window})");
    for l in &res.levels {
        if let Some(why) = &l.no_value {
            println!("{}: no value: {why}", level_label(l));
        }
    }
    if res.levels.iter().any(|l| l.cpu_offload.is_some()) {
        println!();
        println!("CPU KV offload tier (bytes per rank over the host link):");
        println!(
            "{:>10} {:>12} {:>8} {:>7} {:>12} {:>12} {:>11} {:>9}",
            "level",
            "CPU hit tok",
            "CPU hit",
            "loads",
            "loaded GB",
            "stored GB",
            "wait ms",
            "link GB/s"
        );
        for l in &res.levels {
            let Some(c) = &l.cpu_offload else { continue };
            println!(
                "{:>10} {:>12} {:>8} {:>7} {:>12.3} {:>12.3} {:>11} {:>9}",
                level_label(l),
                c.cpu_hit_tokens,
                opt(c.cpu_hit_rate, 3),
                c.loads,
                c.loaded_bytes_per_rank as f64 / 1e9,
                c.stored_bytes_per_rank as f64 / 1e9,
                opt(c.load_wait_ms_mean, 2),
                rate(c.host_link_gb_s_mean, 2),
            );
        }
    }
    if let Some(op) = &res.operating_point {
        println!("SLA operating point: {}", op.summary);
    }
    print_replicas(res);
}

/// Per-replica table (plans with more than one replica).
fn print_replicas(res: &servesim_core::sweep::SweepResult) {
    let Some(first) = res.topology.first() else {
        return;
    };
    println!();
    println!(
        "Per replica ({}; routed = whole run, the rest over the window):",
        first.router
    );
    println!(
        "{:>10} {:>8} {:>8} {:>10} {:>10} {:>8} {:>6}",
        "level", "replica", "routed", "completed", "out tok/s", "KV use", "hit"
    );
    let pools = first.pools.len() > 1;
    for t in &res.topology {
        for r in &t.replicas {
            let name = if pools {
                format!("{}/{}", r.pool, r.replica)
            } else {
                r.replica.to_string()
            };
            println!(
                "{:>10} {:>8} {:>8} {:>10} {:>10.1} {:>8.3} {:>6}",
                t.level,
                name,
                r.routed_requests,
                r.completed_requests,
                r.output_tokens_per_s,
                r.kv_utilization_mean,
                opt(r.prefix_cache_hit_rate, 2)
            );
        }
        println!(
            "{:>10} imbalance (max / mean output tok/s): {}",
            t.level,
            opt(t.imbalance, 3)
        );
    }
    if pools {
        print_pools(res);
    }
}

/// Per-pool and KV-transfer tables of a disaggregated deployment.
fn print_pools(res: &servesim_core::sweep::SweepResult) {
    println!();
    println!("Per pool (over the window):");
    println!(
        "{:>10} {:>8} {:>5} {:>10} {:>6} {:>12} {:>10} {:>12} {:>7} {:>7} {:>6}",
        "level",
        "pool",
        "GPUs",
        "completed",
        "busy",
        "prefill tok/s",
        "out tok/s",
        "out tok/s/GPU",
        "KV use",
        "KV peak",
        "hit"
    );
    for t in &res.topology {
        for p in &t.pools {
            println!(
                "{:>10} {:>8} {:>5} {:>10} {:>6.3} {:>12.1} {:>10.1} {:>12.1} {:>7.3} {:>7.3} {:>6}",
                t.level,
                p.pool,
                p.gpus,
                p.completed_requests,
                p.busy_fraction,
                p.prefill_tokens_per_s,
                p.output_tokens_per_s,
                p.output_tokens_per_s_per_gpu,
                p.kv_utilization_mean,
                p.kv_utilization_peak,
                opt(p.prefix_cache_hit_rate, 2)
            );
        }
    }
    println!();
    println!("KV transfers (completed in the window; ms):");
    println!(
        "{:>10} {:>9} {:>7} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "level",
        "transfers",
        "NVLink",
        "RDMA",
        "MB/transfer",
        "xfer mean",
        "xfer p99",
        "link-q p99",
        "blocks mean",
        "blocks p99",
        "handoff p99"
    );
    let d = |x: &Option<servesim_core::metrics::Dist>,
             f: fn(&servesim_core::metrics::Dist) -> f64| {
        x.as_ref()
            .map_or("-".to_string(), |v| format!("{:.3}", f(v)))
    };
    for t in &res.topology {
        let Some(x) = &t.transfer else { continue };
        println!(
            "{:>10} {:>9} {:>7} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            t.level,
            x.transfers,
            x.nvlink_transfers,
            x.rdma_transfers,
            x.bytes_per_transfer_mean
                .map_or("-".to_string(), |b| format!("{:.2}", b / 1e6)),
            d(&x.transfer_ms, |v| v.mean),
            d(&x.transfer_ms, |v| v.p99),
            d(&x.link_queue_ms, |v| v.p99),
            d(&x.block_wait_ms, |v| v.mean),
            d(&x.block_wait_ms, |v| v.p99),
            d(&x.handoff_ms, |v| v.p99),
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_setting_with_a_flag_is_a_sweep_flag_with_the_tables_help() {
        let cmd = crate::Cli::command();
        let sweep = cmd.find_subcommand("sweep").unwrap();
        for st in servesim_core::settings::settings() {
            let Some(flag) = st.flag else { continue };
            let arg = sweep
                .get_arguments()
                .find(|a| a.get_long() == Some(flag))
                .unwrap_or_else(|| panic!("--{flag} is in the settings table but not a flag"));
            assert_eq!(arg.get_id().as_str(), flag.replace('-', "_"));
            assert_eq!(
                arg.get_help().map(|h| h.to_string()),
                Some(st.help_text()),
                "--{flag}"
            );
        }
    }
}
