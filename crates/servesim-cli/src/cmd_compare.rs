//! `servesim compare`: run the scenario (the `servesim sweep` flags, or `--scenario FILE`) at the
//! levels of measured benchmark results and print the scoring tables (signed mean, MAPE, shape
//! error, sign) per arm and metric, as in docs/compare.md.

use crate::cmd_sweep::{build_scenario, SweepArgs};
use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Args};
use servesim_core::compare::{
    import_files, parse_kv_cache_tokens, score_all, ImportOptions, MeasuredRun, PredictedSeries,
    ScoreOptions,
};
use servesim_core::scenario::Scenario;
use std::path::PathBuf;

/// Flags of `servesim compare`: every `servesim sweep` flag plus the measured inputs.
#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Measured results: CSV / TSV / Markdown tables or vLLM / AIPerf / GuideLLM / InferenceX
    /// exports (repeatable; several files of one format are merged, e.g. one vLLM JSON per level).
    #[arg(long, required = true)]
    pub measured: Vec<PathBuf>,
    /// Arm name for inputs without an `arm` column; with one, score only this arm.
    #[arg(long)]
    pub arm: Option<String>,
    /// Exclude a measured level from scoring: LEVEL:REASON (repeatable), e.g. '512:preemption storm'.
    #[arg(long)]
    pub exclude: Vec<String>,
    /// vLLM start-up log with "GPU KV cache size: N tokens" (for the KV pool ratio).
    #[arg(long)]
    pub kv_log: Option<PathBuf>,
    /// Print the report as Markdown (the default unless --json or --csv).
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    pub markdown: bool,
}

/// Parses `LEVEL:REASON`.
pub fn parse_exclude(s: &str) -> Result<(f64, String)> {
    let Some((l, r)) = s.split_once(':') else {
        bail!("--exclude {s}: write LEVEL:REASON, e.g. '512:preemption storm'");
    };
    let l = l.trim().trim_start_matches(['c', 'C']);
    let level: f64 = l
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .with_context(|| format!("--exclude {s}: the level `{l}` is not a number > 0"))?;
    let reason = r.trim();
    if reason.is_empty() {
        bail!("--exclude {s}: give a reason after the colon");
    }
    Ok((level, reason.to_string()))
}

/// Simulates one arm at its measured levels (the core's `compare::predict`, as the page).
fn predict(base: &Scenario, run: &MeasuredRun) -> Result<PredictedSeries> {
    let levels: Vec<f64> = run.levels.iter().map(|l| l.level).collect();
    servesim_core::compare::predict::predict(base, run.level_kind, &levels)
        .map_err(anyhow::Error::msg)
}

pub fn run_compare(a: &CompareArgs, m: &ArgMatches) -> Result<()> {
    let base = build_scenario(&a.sweep, m)?;
    let mut texts = Vec::new();
    for p in &a.measured {
        let t = crate::input::read_text(p)?;
        texts.push((p.display().to_string(), t));
    }
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let opts = ImportOptions {
        arm: a.arm.clone(),
        ..Default::default()
    };
    let imported = import_files(&files, &opts)?;
    let mut runs = imported.runs;
    if let Some(arm) = &a.arm {
        if runs.len() > 1 || runs.iter().all(|r| &r.arm != arm) {
            runs.retain(|r| &r.arm == arm);
            if runs.is_empty() {
                bail!("--arm {arm}: no arm of that name in the measured input");
            }
        }
    }
    if let Some(p) = &a.kv_log {
        let log = crate::input::read_text(p)?;
        let tokens = parse_kv_cache_tokens(&log)?;
        if tokens.is_none() {
            bail!(
                "--kv-log {}: no \"GPU KV cache size: N tokens\" line found",
                p.display()
            );
        }
        for r in &mut runs {
            r.kv_cache_tokens_logged = tokens;
        }
    }
    for e in &a.exclude {
        let (level, reason) = parse_exclude(e)?;
        let mut hit = false;
        for r in &mut runs {
            hit |= r.exclude(level, &reason);
        }
        if !hit {
            bail!("--exclude {e}: no measured level {level}");
        }
    }
    for u in &imported.unmatched {
        eprintln!("note: not used: {} ({})", u.name, u.reason);
    }
    for n in &imported.notes {
        eprintln!("note: {n}");
    }
    let mut pairs = Vec::new();
    for r in runs {
        eprintln!(
            "simulating arm \"{}\" at {} {} level(s)",
            r.arm,
            r.levels.len(),
            r.level_kind.name()
        );
        let p = predict(&base, &r).with_context(|| format!("arm \"{}\"", r.arm))?;
        pairs.push((r, p));
    }
    let report = score_all(&pairs, &ScoreOptions::default())?;
    if a.sweep.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if a.sweep.csv {
        print!("{}", report.to_csv());
    } else {
        print!("{}", report.to_markdown());
    }
    Ok(())
}
