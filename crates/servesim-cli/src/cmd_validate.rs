//! `servesim validate POINTS.csv`: simulate every measured run of a calibration CSV and report
//! the error per point and in aggregate; `--fit` refits the efficiency table (docs/accuracy.md).

use anyhow::{Context, Result};
use clap::Args;
use servesim_core::validate::{self, FittedEfficiencies, ValidateOptions};
use std::path::PathBuf;

#[derive(Args, Clone, Debug)]
pub struct ValidateArgs {
    /// Calibration CSV(s) (header as in crates/servesim-core/data/calibration/measured-points.csv);
    /// several files are one combined run (line numbers continue from file to file).
    #[arg(required = true, num_args = 1..)]
    pub points: Vec<PathBuf>,
    /// Print the report as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
    /// Only rows whose `source` starts with this text (e.g. `gpustack`, `inference-sim`).
    #[arg(long)]
    pub only: Option<String>,
    /// A fitted efficiency table (JSON, the format of data/calibration/efficiencies.json)
    /// instead of the shipped one.
    #[arg(long)]
    pub efficiencies: Option<PathBuf>,
    /// Use the step-time model's defaults (no fitted table).
    #[arg(long, conflicts_with = "efficiencies")]
    pub defaults: bool,
    /// Refit the efficiency table on every row (all of POINTS.csv; --only is ignored) and write it.
    #[arg(long)]
    pub fit: bool,
    /// Where --fit writes the table.
    #[arg(
        long,
        default_value = "crates/servesim-core/data/calibration/efficiencies.json"
    )]
    pub fit_out: PathBuf,
    /// Coordinate-descent passes of --fit, at most (a pass that moves nothing ends the descent).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Coordinate-descent passes of each held-out fold's refit (leave-one-source-out,
    /// leave-one-family-out), at most; the default is the in-sample fit's, so the held-out
    /// figures measure the procedure that fits the shipped table.
    #[arg(long, default_value_t = 2)]
    pub held_out_rounds: usize,
    /// With --fit: how the fitted fields are grouped. `per-release` (the shipped table): every
    /// field per GPU generation and vLLM release line. `shared-kernels`: kernel and link
    /// efficiencies per GPU generation, shared by its release lines, and per release line only
    /// the engine's software costs (scheduling, inputs, sampling, the API server).
    /// `per-generation`: every field per GPU generation. docs/accuracy.md ("Calibration:
    /// Method") compares them.
    #[arg(long, default_value = "per-release", requires = "fit", value_parser = fit_shape_parser())]
    pub fit_shape: validate::FitShape,
    /// With --fit: CSVs the fit never reads, validated after it with the new table and with the
    /// table this binary ships, side by side (repeatable). Default: the validation set,
    /// crates/servesim-core/data/validation/measured-points-validation.csv, when it is there.
    #[arg(long, value_name = "CSV", requires = "fit")]
    pub check: Vec<PathBuf>,
    /// Threads that run --fit's jobs (one coordinate descent per calibration key and fold);
    /// the result does not depend on it. Default: the cores available.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Rewrite the accuracy summary's in-sample figures from this run (held-out figures are
    /// kept from the shipped summary; --fit rewrites all of them).
    #[arg(long, conflicts_with_all = ["defaults", "efficiencies", "only"])]
    pub write_summary: bool,
    /// Where --fit / --write-summary write the accuracy summary.
    #[arg(
        long,
        default_value = "crates/servesim-core/data/calibration/accuracy-summary.json"
    )]
    pub summary_out: PathBuf,
    /// Print the scenario JSON that the row on this CSV line (as numbered in the report) runs,
    /// with the efficiency table it uses, and exit: rerun or vary it with
    /// `servesim sweep --scenario FILE`.
    #[arg(long, value_name = "LINE", conflicts_with_all = ["fit", "write_summary", "json"])]
    pub scenario_of: Option<usize>,
}

/// Whether `p` is the validation set, which no fit may read: the file
/// `data/validation/measured-points-validation.csv` (docs/accuracy.md "Validation set (never fitted)").
pub fn is_validation_set(p: &std::path::Path) -> bool {
    let s = p.to_string_lossy().replace('\\', "/");
    s.contains("data/validation/")
        || p.file_name().is_some_and(|n| {
            n.to_string_lossy()
                .starts_with("measured-points-validation")
        })
}

pub fn run_validate(a: &ValidateArgs) -> Result<()> {
    if a.fit || a.write_summary {
        if let Some(p) = a.points.iter().find(|p| is_validation_set(p)) {
            anyhow::bail!(
                "{} is the validation set, which no fit reads: --fit and --write-summary take only the calibration CSVs in crates/servesim-core/data/calibration. Fix: validate it without --fit / --write-summary (docs/accuracy.md \"Validation set (never fitted)\")",
                p.display()
            );
        }
    }
    let mut texts = Vec::new();
    for p in &a.points {
        texts.push(crate::input::read_text(p)?);
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let csv = validate::combine_csvs(&refs)?;
    if a.fit {
        // Read before the fit, so a wrong path fails in a second, not after the fit's minutes.
        let check = load_check(a)?;
        let rep = fit_on_threads(&csv, a.rounds, a.held_out_rounds, a.fit_shape, a.threads)?;
        std::fs::write(&a.fit_out, rep.table_json())
            .with_context(|| format!("writing {}", a.fit_out.display()))?;
        eprintln!("wrote {}", a.fit_out.display());
        if a.json {
            println!("{}", serde_json::to_string_pretty(&rep)?);
        } else {
            println!("{}", rep.to_markdown());
        }
        let opts = ValidateOptions {
            efficiencies: Some(rep.table.clone()),
            ..Default::default()
        };
        let r = validate::run(&csv, &opts)?;
        let mut held = rep.held_out.clone();
        held.extend(validate::evidence_held_out(&rep.held_out_by_family));
        let summary = with_validation_set(
            validate::AccuracySummary::from_report(&r, &held),
            &rep.table,
        )?;
        std::fs::write(&a.summary_out, summary.to_json())
            .with_context(|| format!("writing {}", a.summary_out.display()))?;
        eprintln!("wrote {}", a.summary_out.display());
        if !a.json {
            println!("{}", r.to_markdown());
        }
        if let Some((names, check_csv)) = check {
            check_refit(a, &names, &check_csv, &rep.table)?;
        }
        return Ok(());
    }
    let efficiencies = if a.defaults {
        Some(FittedEfficiencies {
            description: "the step-time model's defaults (no fitted values)".into(),
            ..Default::default()
        })
    } else if let Some(p) = &a.efficiencies {
        let t = crate::input::read_text(p)?;
        Some(FittedEfficiencies::from_json(&t)?)
    } else {
        None
    };
    if let Some(line) = a.scenario_of {
        let fitted = match &efficiencies {
            Some(f) => f.clone(),
            None => validate::fitted_efficiencies()?,
        };
        let sc = validate::scenario_of_line(&csv, line, &fitted)?;
        println!("{}", sc.to_json_pretty());
        return Ok(());
    }
    let opts = ValidateOptions {
        only_source: a.only.clone(),
        efficiencies,
        only_lines: None,
    };
    let r = validate::run(&csv, &opts)?;
    if a.write_summary {
        let table = match &opts.efficiencies {
            Some(t) => t.clone(),
            None => validate::fitted_efficiencies()?,
        };
        let held = validate::accuracy_summary().held_out_aggregates();
        let summary =
            with_validation_set(validate::AccuracySummary::from_report(&r, &held), &table)?;
        std::fs::write(&a.summary_out, summary.to_json())
            .with_context(|| format!("writing {}", a.summary_out.display()))?;
        eprintln!("wrote {}", a.summary_out.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", r.to_markdown());
    }
    Ok(())
}

/// The validation set's default path (relative to the repository root).
const VALIDATION_SET: &str = "crates/servesim-core/data/validation/measured-points-validation.csv";

/// `summary` with the validation set's cells (`AccuracySummary::with_validation`), the set run
/// with `table`, the table the summary describes; unchanged, with a note, when the validation
/// set is not here (run from elsewhere than the repository root).
fn with_validation_set(
    summary: validate::AccuracySummary,
    table: &FittedEfficiencies,
) -> Result<validate::AccuracySummary> {
    let p = PathBuf::from(VALIDATION_SET);
    if !p.exists() {
        eprintln!("note: no {VALIDATION_SET} here: the summary carries no validation-set cells");
        return Ok(summary);
    }
    let csv = validate::combine_csvs(&[&crate::input::read_text(&p)?]).context(VALIDATION_SET)?;
    let r = validate::run(
        &csv,
        &ValidateOptions {
            efficiencies: Some(table.clone()),
            ..Default::default()
        },
    )?;
    Ok(summary.with_validation(&r, table))
}

/// The `--check` CSVs (default: the validation set, when it is there), read and combined:
/// (their names, the combined CSV), or `None` when there is nothing to check. A file that is also
/// one of the fitted CSVs is refused: its rows would not be out of sample.
fn load_check(a: &ValidateArgs) -> Result<Option<(Vec<String>, String)>> {
    let paths: Vec<PathBuf> = if a.check.is_empty() {
        let p = PathBuf::from(VALIDATION_SET);
        if !p.exists() {
            eprintln!("note: no --check CSV and no {VALIDATION_SET} here: the refit is not checked on rows it never read");
            return Ok(None);
        }
        vec![p]
    } else {
        a.check.clone()
    };
    let mut texts = Vec::new();
    for p in &paths {
        let same = |q: &PathBuf| match (p.canonicalize(), q.canonicalize()) {
            (Ok(x), Ok(y)) => x == y,
            _ => p == q,
        };
        if a.points.iter().any(same) {
            anyhow::bail!(
                "--check {}: the fit reads this file, so its rows are not out of sample. Fix: give --check only CSVs that are not among the fitted ones (e.g. the validation set)",
                p.display()
            );
        }
        texts.push(crate::input::read_text(p).with_context(|| format!("--check {}", p.display()))?);
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let csv = validate::combine_csvs(&refs).context("--check")?;
    let names = paths.iter().map(|p| p.display().to_string()).collect();
    Ok(Some((names, csv)))
}

/// After a refit: the `--check` rows validated with the new table and with the shipped one;
/// Markdown on stdout (stderr with `--json`). The fit has already run: these rows never reach it.
fn check_refit(
    a: &ValidateArgs,
    names: &[String],
    csv: &str,
    table: &FittedEfficiencies,
) -> Result<()> {
    let run = |t: FittedEfficiencies| {
        validate::run(
            csv,
            &ValidateOptions {
                efficiencies: Some(t),
                ..Default::default()
            },
        )
    };
    let after = run(table.clone())?;
    let before = run(validate::fitted_efficiencies()?)?;
    let md = validate::refit_check_markdown(
        &format!(
            "Never fitted ({}): this fit against the shipped table",
            names.join(" + ")
        ),
        &after,
        &before,
        8,
    );
    if a.json {
        eprint!("{md}");
    } else {
        print!("{md}");
    }
    Ok(())
}

/// `--fit-shape`: the core's [`validate::FitShape`] names, one list.
fn fit_shape_parser() -> impl clap::builder::TypedValueParser<Value = validate::FitShape> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(validate::FitShape::ALL.map(|s| s.name()))
        .map(|n| validate::FitShape::from_name(&n).unwrap_or_default())
}

/// `validate --fit` on threads: the core's plan ([`validate::plan_fit`]) lists independent jobs;
/// each thread takes the next job (longest first) and runs it with its own simulator; the report
/// is assembled by job index, so it is the same as [`validate::fit_all`]'s for any thread count.
pub fn fit_on_threads(
    csv: &str,
    rounds: usize,
    held_out_rounds: usize,
    shape: validate::FitShape,
    threads: Option<u32>,
) -> Result<validate::FitReport> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let plan = validate::plan_fit_shaped(csv, rounds, held_out_rounds, shape)?;
    let n = plan.jobs.len();
    let threads = threads
        .map(|t| t as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, n.max(1));
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(plan.jobs[i].cost()));
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<validate::KeyFitResult, validate::ValidateError>>>> =
        Mutex::new(vec![None; n]);
    let done = AtomicUsize::new(0);
    let start = std::time::Instant::now();
    eprintln!(
        "fit: {n} jobs ({} in-sample keys, {} held-out folds) on {threads} thread(s)",
        plan.in_sample.len(),
        plan.folds.len()
    );
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let job = &plan.jobs[i];
                let r = validate::run_fit_job(csv, job, &mut |s, e| validate::simulate(s, e));
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                eprintln!(
                    "fit: job {d}/{n} done ({}, {} rows, {:.0} s elapsed)",
                    job.key,
                    job.lines.len(),
                    start.elapsed().as_secs_f64()
                );
                if let Ok(mut v) = slots.lock() {
                    v[i] = Some(r);
                }
            });
        }
    });
    let slots = slots
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a fit thread panicked"))?;
    let mut results = Vec::with_capacity(n);
    for (i, r) in slots.into_iter().enumerate() {
        match r {
            Some(r) => results.push(r?),
            None => anyhow::bail!("fit job {i} did not run"),
        }
    }
    let rep = validate::assemble_fit(csv, &plan, &results, &mut |s, e| validate::simulate(s, e))?;
    eprintln!("fit: done in {:.0} s", start.elapsed().as_secs_f64());
    Ok(rep)
}
