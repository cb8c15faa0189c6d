//! The fit as independent jobs: [`plan_fit`] lists every coordinate descent the fit and its
//! held-out folds need (one [`KeyFitJob`] per calibration key and training set), [`run_fit_job`]
//! runs one, and [`assemble_fit`] builds the [`FitReport`] from their results by job index.
//! The jobs share nothing, so a caller with threads (the CLI's `validate --fit --threads N`) can
//! run them in any order on any number of threads and get the same report as
//! [`fit_all`], which runs them one after another.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// One coordinate descent: calibration key `key` fitted on the rows `lines` (all of that key),
/// over the parameters `params`, and for each harness entry in `harness` ([`HARNESS_KEYS`]: rows
/// of that harness among `lines`) the [`HARNESS_PARAMS`] of that entry, `rounds` passes, from the
/// literature table.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyFitJob {
    pub key: String,
    pub lines: Vec<usize>,
    pub params: Vec<&'static str>,
    /// Harness entries (`<key>+<tag>`) fitted in the same descent.
    pub harness: Vec<String>,
    /// The release lines of a generation job (`key` a plain generation): each era entry's rows
    /// and the [`ERA_PARAMS`] fitted on it, over the generation entry's shared fields. Empty for
    /// a job that fits one entry.
    pub eras: Vec<EraFit>,
    pub rounds: usize,
}

/// One release line inside a generation job: the entry `<generation>@<era>`, its rows, and the
/// fields fitted on it.
#[derive(Clone, Debug, PartialEq)]
pub struct EraFit {
    pub key: String,
    pub lines: Vec<usize>,
    pub params: Vec<&'static str>,
}

impl KeyFitJob {
    /// A rough cost (row-simulations), for scheduling the longest jobs first.
    pub fn cost(&self) -> usize {
        let grid = |params: &[&str]| -> usize {
            FIT_PARAMS
                .iter()
                .filter(|f| params.contains(&f.field))
                .map(|f| f.grid.len())
                .sum()
        };
        let shared = self.lines.len() * grid(&self.params)
            + self.harness.len() * self.lines.len() * grid(HARNESS_PARAMS);
        let eras: usize = self
            .eras
            .iter()
            .map(|e| e.lines.len() * grid(&e.params))
            .sum();
        self.lines.len() + (shared + eras) * self.rounds
    }
}

/// How a held-out fold groups the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Leave one source out.
    Source,
    /// Leave one model family out ([`model_family`]).
    Family,
}

impl Grouping {
    /// The held-out aggregates' scope of this grouping, pooled (`<scope>: <group>` per group).
    pub fn scope(self) -> &'static str {
        match self {
            Grouping::Source => "leave-one-source-out",
            Grouping::Family => "leave-one-family-out",
        }
    }
}

/// How the fit groups its parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FitShape {
    /// Every `<generation>@<era>` entry fits all its fields on its own rows ([`fit_params_for`]):
    /// the shipped table.
    #[default]
    PerRelease,
    /// A plain `<generation>` entry fits the kernel and link efficiencies on the rows of all its
    /// release lines ([`shared_params_for`]), and each `<generation>@<era>` entry only the
    /// engine's software costs on its own rows ([`era_params_for`]); a scenario's table layers
    /// the second over the first (`perf::lookup_calibration`). Fewer parameters per row; not
    /// shipped (docs/accuracy.md "Calibration: Method").
    SharedKernels,
    /// One plain `<generation>` entry fits every field on the rows of all its release lines
    /// (`step_overhead_eager_s` included, since V0 rows may be among them): no release line of
    /// its own. Not shipped (docs/accuracy.md "Calibration: Method").
    PerGeneration,
}

impl FitShape {
    /// Every shape, the shipped one first.
    pub const ALL: [FitShape; 3] = [
        FitShape::PerRelease,
        FitShape::SharedKernels,
        FitShape::PerGeneration,
    ];

    /// The name a user types (`servesim validate --fit-shape NAME`).
    pub fn name(self) -> &'static str {
        match self {
            FitShape::PerRelease => "per-release",
            FitShape::SharedKernels => "shared-kernels",
            FitShape::PerGeneration => "per-generation",
        }
    }

    /// The shape of a [`FitShape::name`].
    pub fn from_name(name: &str) -> Option<FitShape> {
        FitShape::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One held-out fold: the group left out, the calibration keys refitted without it (the keys
/// holding its rows), the jobs that refit them, and the rows it predicts.
#[derive(Clone, Debug, PartialEq)]
pub struct FoldPlan {
    pub grouping: Grouping,
    pub group: String,
    pub keys: Vec<String>,
    /// Indexes into [`FitPlan::jobs`].
    pub jobs: Vec<usize>,
    pub test: Vec<usize>,
}

/// Every job of a fit, in the order [`fit_all`] runs them.
#[derive(Clone, Debug, PartialEq)]
pub struct FitPlan {
    pub shape: FitShape,
    pub rounds: usize,
    pub held_out_rounds: usize,
    pub jobs: Vec<KeyFitJob>,
    /// The in-sample jobs (one per key, all rows), indexes into `jobs`.
    pub in_sample: Vec<usize>,
    pub folds: Vec<FoldPlan>,
}

/// A row as the plan sees it: (line, calibration key, model, source, model family, harness
/// entry).
type PlanRow<'a> = (
    usize,
    Option<String>,
    &'a str,
    &'a str,
    &'a str,
    Option<String>,
);

/// A row a job trains on: (line, key, model, harness entry).
type TrainRow<'a> = (usize, String, &'a str, Option<String>);

/// The jobs of `shape` for the keys among `rows`:
/// - [`FitShape::PerRelease`]: one per calibration key, every field ([`fit_params_for`]);
/// - [`FitShape::PerGeneration`]: one per GPU generation, every field;
/// - [`FitShape::SharedKernels`]: one per GPU generation, the shared fields
///   ([`shared_params_for`]) on the generation's entry and, per release line among its rows, the
///   [`ERA_PARAMS`] ([`era_params_for`]) on the `<generation>@<era>` entry.
///
/// Each in key order, on that key's rows, with the harness entries of those rows.
fn key_jobs(rows: &[TrainRow], rounds: usize, shape: FitShape) -> Vec<KeyFitJob> {
    let gen_rows: Vec<TrainRow> = rows
        .iter()
        .map(|(l, k, m, h)| (*l, generation_of(k).to_string(), *m, h.clone()))
        .collect();
    match shape {
        FitShape::PerRelease => grouped_jobs(rows, rounds, &fit_params_for),
        FitShape::PerGeneration => grouped_jobs(&gen_rows, rounds, &fit_params_for),
        FitShape::SharedKernels => {
            let eras = grouped_jobs(rows, rounds, &era_params_for);
            let mut jobs = grouped_jobs(&gen_rows, rounds, &|_, n| shared_params_for(n));
            for job in &mut jobs {
                job.eras = eras
                    .iter()
                    .filter(|e| generation_of(&e.key) == job.key)
                    .map(|e| EraFit {
                        key: e.key.clone(),
                        lines: e.lines.clone(),
                        params: e.params.clone(),
                    })
                    .collect();
            }
            jobs
        }
    }
}

/// The GPU generation of a calibration key (`hopper@vllm-0.15` -> `hopper`).
pub(super) fn generation_of(key: &str) -> &str {
    key.split('@').next().unwrap_or(key)
}

/// One job per key among `rows`, in key order, on that key's rows (with the harness entries of
/// those rows), fitting `params(key, number of models among its rows)`.
fn grouped_jobs(
    rows: &[TrainRow],
    rounds: usize,
    params: &dyn Fn(&str, usize) -> Vec<&'static str>,
) -> Vec<KeyFitJob> {
    type Acc<'a> = (Vec<usize>, Vec<&'a str>, Vec<String>);
    let mut by_key: BTreeMap<&str, Acc> = BTreeMap::new();
    for (line, key, model, harness) in rows {
        let e = by_key.entry(key.as_str()).or_default();
        e.0.push(*line);
        if !e.1.contains(model) {
            e.1.push(model);
        }
        if let Some(h) = harness {
            if !e.2.contains(h) {
                e.2.push(h.clone());
            }
        }
    }
    by_key
        .into_iter()
        .map(|(key, (lines, models, harness))| KeyFitJob {
            key: key.to_string(),
            lines,
            params: params(key, models.len()),
            harness,
            eras: Vec::new(),
            rounds,
        })
        .collect()
}

/// Lists the fit's jobs: the in-sample fit of every key on all rows, then per held-out fold
/// (sources in first-appearance order, then model families likewise) the keys holding the left-out
/// rows, refitted on their other rows.
pub fn plan_fit(
    points_csv: &str,
    rounds: usize,
    held_out_rounds: usize,
) -> Result<FitPlan, ValidateError> {
    plan_fit_shaped(points_csv, rounds, held_out_rounds, FitShape::PerRelease)
}

/// [`plan_fit`] with the parameters grouped as `shape` says. A fold refits the entries of the
/// jobs holding the left-out rows: their keys ([`FitShape::PerRelease`]) or their generations
/// ([`FitShape::SharedKernels`]).
pub fn plan_fit_shaped(
    points_csv: &str,
    rounds: usize,
    held_out_rounds: usize,
    shape: FitShape,
) -> Result<FitPlan, ValidateError> {
    let pts = parse_points(points_csv)?;
    // (line, key, model, source, family, harness entry) of every row that is simulated. A row
    // waiting for a capability (`waits_for`, which also covers a GPU not in the catalog) trains
    // nothing and does not count as one of its key's models.
    let rows: Vec<PlanRow> = pts
        .iter()
        .filter(|p| super::waits_for(p).is_none())
        .map(|p| {
            (
                p.line,
                point_key(p),
                p.model.as_str(),
                p.source.as_str(),
                model_family(p),
                harness_key(p),
            )
        })
        .collect();
    let keyed = |keep: &dyn Fn(&PlanRow) -> bool| {
        rows.iter()
            .filter(|r| keep(r))
            .filter_map(|r| r.1.clone().map(|k| (r.0, k, r.2, r.5.clone())))
            .collect::<Vec<_>>()
    };
    let mut jobs = key_jobs(&keyed(&|_| true), rounds, shape);
    let in_sample: Vec<usize> = (0..jobs.len()).collect();
    let mut folds = Vec::new();
    for grouping in [Grouping::Source, Grouping::Family] {
        let group_of = |r: &PlanRow| -> String {
            match grouping {
                Grouping::Source => r.3.to_string(),
                Grouping::Family => r.4.to_string(),
            }
        };
        let mut groups: Vec<String> = Vec::new();
        for r in &rows {
            let g = group_of(r);
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for g in groups {
            let mut keys: Vec<String> = Vec::new();
            let gen_of = |k: &str| match shape {
                FitShape::PerRelease => k.to_string(),
                FitShape::SharedKernels | FitShape::PerGeneration => generation_of(k).to_string(),
            };
            for r in rows.iter().filter(|r| group_of(r) == g) {
                if let Some(k) = &r.1 {
                    let k = gen_of(k);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
            let train = keyed(&|r| {
                group_of(r) != g && r.1.as_ref().is_some_and(|k| keys.contains(&gen_of(k)))
            });
            let first = jobs.len();
            jobs.extend(key_jobs(&train, held_out_rounds, shape));
            folds.push(FoldPlan {
                grouping,
                test: rows
                    .iter()
                    .filter(|r| group_of(r) == g)
                    .map(|r| r.0)
                    .collect(),
                group: g,
                keys,
                jobs: (first..jobs.len()).collect(),
            });
        }
    }
    Ok(FitPlan {
        shape,
        rounds,
        held_out_rounds,
        jobs,
        in_sample,
        folds,
    })
}

/// The result of one job: the fitted overrides of its key and of its harness entries (entry ->
/// field -> value), and the log of accepted steps.
pub type KeyFitResult = (BTreeMap<String, BTreeMap<String, f64>>, Vec<FitStep>);

/// Runs one job: coordinate descent over its parameters, from the literature table of its key
/// ([`fit_generation`]'s method).
pub fn run_fit_job(
    points_csv: &str,
    job: &KeyFitJob,
    sim: &mut Simulator,
) -> Result<KeyFitResult, ValidateError> {
    if job.lines.is_empty() {
        return Err(ValidateError::NoPoints {
            filter: format!(" on {} GPUs", job.key),
        });
    }
    // Each row's result depends on its own entries only, so a move is simulated on the rows its
    // entry reaches (the generation entry: all; an era or harness entry: its rows) whose
    // simulation reads the field ([`FieldReach`]), and the objective taken over those results
    // merged with the current ones of the other rows. Rows are mapped to scenarios once.
    let prepared: BTreeMap<usize, (PreparedRow, Option<FieldReach>)> = prepare_rows(
        parse_points(points_csv)?
            .into_iter()
            .filter(|p| job.lines.contains(&p.line))
            .collect(),
    )
    .into_iter()
    .map(|r| {
        let reach = r.setup.as_ref().and_then(FieldReach::of);
        (r.point.line, (r, reach))
    })
    .collect();
    let run = |table: &FittedEfficiencies, lines: &[usize], sim: &mut Simulator| {
        let rows = lines.iter().filter_map(|l| prepared.get(l).map(|(r, _)| r));
        run_prepared(rows, table, sim)
    };
    // The rows of `lines` whose simulation `field` can change (rows without a scenario: none).
    let reached = |field: &str, lines: &[usize]| -> Vec<usize> {
        lines
            .iter()
            .copied()
            .filter(|l| {
                prepared.get(l).is_some_and(|(r, reach)| {
                    r.setup.is_some() && field_reaches(reach.as_ref(), field)
                })
            })
            .collect()
    };
    let score = |pts: &BTreeMap<usize, PointResult>| -> (usize, f64) {
        let r = ValidationReport {
            points: pts.values().cloned().collect(),
            aggregates: Vec::new(),
            excluded: Vec::new(),
            efficiencies: String::new(),
        };
        (failures(&r), objective(&r))
    };
    // Every entry of the job exists from the start, empty (literature values), so a row reads
    // its own release line's entry and never falls back to another era's
    // (`perf::lookup_calibration`): a move of one era's entry then reaches that era's rows only.
    let mut cur = FittedEfficiencies::default();
    for e in &job.eras {
        cur.generations.entry(e.key.clone()).or_default();
    }
    let mut cur_pts: BTreeMap<usize, PointResult> = run(&cur, &job.lines, sim)
        .into_iter()
        .map(|p| (p.line, p))
        .collect();
    let mut best = score(&cur_pts);
    let mut log = vec![FitStep {
        round: 0,
        field: "(start)".into(),
        value: 0.0,
        objective: best.1,
    }];
    let harness_lines = |h: &str| -> Vec<usize> {
        prepared
            .values()
            .filter(|(r, _)| harness_key(&r.point).as_deref() == Some(h))
            .map(|(r, _)| r.point.line)
            .collect()
    };
    // (entry, parameter, rows the entry reaches, whether the entry fits the eager overhead) in
    // the order they are tried: each harness entry's first, so what only a harness shows lands
    // in its entry before the shared fields move, then the key's own, then each era's.
    let mut steps: Vec<(&str, &FitParam, Vec<usize>, bool)> = Vec::new();
    for h in &job.harness {
        let lines = harness_lines(h);
        steps.extend(
            FIT_PARAMS
                .iter()
                .filter(|f| HARNESS_PARAMS.contains(&f.field))
                .map(|f| (h.as_str(), f, reached(f.field, &lines), false)),
        );
    }
    let eager = |params: &[&str]| params.contains(&"step_overhead_eager_s");
    steps.extend(
        FIT_PARAMS
            .iter()
            .filter(|f| job.params.contains(&f.field))
            .map(|f| {
                (
                    job.key.as_str(),
                    f,
                    reached(f.field, &job.lines),
                    eager(&job.params),
                )
            }),
    );
    for e in &job.eras {
        steps.extend(
            FIT_PARAMS
                .iter()
                .filter(|f| e.params.contains(&f.field))
                .map(|f| {
                    (
                        e.key.as_str(),
                        f,
                        reached(f.field, &e.lines),
                        eager(&e.params),
                    )
                }),
        );
    }
    for round in 1..=job.rounds {
        let accepted_before = log.len();
        for (entry, fp, lines, fits_eager) in &steps {
            for &v in fp.grid_for(entry) {
                let mut t = cur.clone();
                t.generations
                    .entry(entry.to_string())
                    .or_default()
                    .insert(fp.field.to_string(), v);
                // No row reads the field: every value gives the current results.
                if lines.is_empty()
                    || t == cur
                    || (*fits_eager && !overheads_ordered(t.generations.get(*entry)))
                {
                    continue;
                }
                let mut trial = cur_pts.clone();
                for p in run(&t, lines, sim) {
                    trial.insert(p.line, p);
                }
                let obj = score(&trial);
                if obj.0 < best.0 || (obj.0 == best.0 && obj.1 < best.1 - 1e-9) {
                    best = obj;
                    cur = t;
                    cur_pts = trial;
                    log.push(FitStep {
                        round,
                        field: match entry.split_once('+') {
                            Some((_, tag)) if *entry != job.key => {
                                format!("{} [{tag}]", fp.field)
                            }
                            _ => match entry.split_once('@') {
                                Some((_, era)) if *entry != job.key => {
                                    format!("{} [{era}]", fp.field)
                                }
                                _ => fp.field.to_string(),
                            },
                        },
                        value: v,
                        objective: obj.1,
                    });
                }
            }
        }
        // A pass that moved nothing has converged: the next pass would try the same moves from
        // the same table and accept none, so stopping here changes no result, only the time.
        if log.len() == accepted_before {
            break;
        }
    }
    let mut tables = BTreeMap::new();
    tables.insert(
        job.key.clone(),
        cur.generations.get(&job.key).cloned().unwrap_or_default(),
    );
    for k in job.harness.iter().chain(job.eras.iter().map(|e| &e.key)) {
        if let Some(m) = cur.generations.get(k) {
            tables.insert(k.clone(), m.clone());
        }
    }
    Ok((tables, log))
}

/// A step without a CUDA graph does all the CPU work of a step with one (scheduling, inputs,
/// sampling, outputs) and launches its kernels besides, so a key that fits
/// `step_overhead_eager_s` never has it below its `step_overhead_graph_s`; a field not fitted
/// counts at its literature value (the same for every generation, docs/step-time.md §7).
fn overheads_ordered(fields: Option<&BTreeMap<String, f64>>) -> bool {
    let lit = crate::perf::Efficiencies::default_for(crate::gpu::Generation::Hopper);
    let get = |k: &str, d: f64| fields.and_then(|f| f.get(k)).copied().unwrap_or(d);
    get("step_overhead_eager_s", lit.step_overhead_eager_s)
        >= get("step_overhead_graph_s", lit.step_overhead_graph_s)
}

/// Builds the report from every job's result (`results[i]` is job `i`'s): the in-sample table
/// and logs, then each fold's table (the in-sample table without the fold's keys, plus its
/// refits) predicting the fold's rows, pooled into the held-out aggregates.
pub fn assemble_fit(
    points_csv: &str,
    plan: &FitPlan,
    results: &[KeyFitResult],
    sim: &mut Simulator,
) -> Result<FitReport, ValidateError> {
    if results.len() != plan.jobs.len() {
        return Err(ValidateError::Fitted(format!(
            "{} job results for {} jobs",
            results.len(),
            plan.jobs.len()
        )));
    }
    let pts = parse_points(points_csv)?;
    let mut sources: Vec<&str> = Vec::new();
    for p in &pts {
        if !sources.contains(&p.source.as_str()) {
            sources.push(p.source.as_str());
        }
    }
    let mut table = FittedEfficiencies {
        description: format!(
            "fitted by `servesim validate --fit` on {} points ({}), coordinate descent per {}; {}), {} rounds (held-out folds {}), objective = mean over sources of the mean over their model families of the mean over output tok/s, ITL/TPOT and TTFT p50 of the median absolute error; a kernel-family field no row of an entry reads (routed experts, latent attention) is taken from the nearest entries whose fit identified it (`borrowed`)",
            pts.len(),
            sources.join(" + "),
            match plan.shape {
                FitShape::PerRelease => "GPU generation and vLLM release line (`<generation>@<era>`",
                FitShape::SharedKernels => "GPU generation (`<generation>`: kernel and link efficiencies shared by its release lines; `<generation>@<era>`: the engine's software costs of one release line",
                FitShape::PerGeneration => "GPU generation, every field shared by its release lines (`<generation>`",
            },
            HARNESS_KEYS
                .iter()
                .map(|(prefix, tag)| {
                    format!(
                        "the {prefix} rows also fit {} for themselves, `<key>+{tag}`, never used for a scenario",
                        HARNESS_PARAMS.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            plan.rounds,
            plan.held_out_rounds
        ),
        ..Default::default()
    };
    let mut logs = BTreeMap::new();
    for &i in &plan.in_sample {
        let key = plan.jobs[i].key.clone();
        table.generations.extend(results[i].0.clone());
        logs.insert(key, results[i].1.clone());
    }
    // Which kernel-family fields each job's rows read: a field an entry's rows never read is
    // taken from the nearest entry whose rows do ([`borrow_unidentified`]), in the shipped table
    // and in every fold's (from the fold's own entries). A row that cannot start (the capacity
    // model refuses it, whatever the efficiencies) reads nothing: its result is the same error
    // under every value, so it identifies no field.
    let cannot_start: Vec<usize> = run_with(
        points_csv,
        &ValidateOptions {
            efficiencies: Some(table.clone()),
            ..Default::default()
        },
        sim,
    )?
    .points
    .iter()
    .filter(|p| p.error.is_some())
    .map(|p| p.line)
    .collect();
    let reach: BTreeMap<usize, Option<FieldReach>> = prepare_rows(pts.clone())
        .into_iter()
        .filter(|r| !cannot_start.contains(&r.point.line))
        .filter_map(|r| r.setup.as_ref().map(|s| (r.point.line, FieldReach::of(s))))
        .collect();
    // A harness entry's fields are read from its entry, not the key's: its rows do not count as
    // reading them for the key (docs/accuracy.md, "Kernel-family fields an entry's rows never
    // read are borrowed").
    let harness_lines: BTreeSet<usize> = pts
        .iter()
        .filter(|p| harness_key(p).is_some())
        .map(|p| p.line)
        .collect();
    let reads_of = |jobs: &[usize]| -> BTreeMap<String, EntryReads> {
        jobs.iter()
            .map(|&i| {
                let j = &plan.jobs[i];
                let own: Vec<usize> = j
                    .lines
                    .iter()
                    .copied()
                    .filter(|l| !harness_lines.contains(l))
                    .collect();
                let (all, own) = (
                    kernel_fields_read(&j.lines, &reach),
                    kernel_fields_read(&own, &reach),
                );
                let read = all
                    .into_iter()
                    .filter(|f| !HARNESS_PARAMS.contains(f) || own.contains(f))
                    .collect();
                let r = EntryReads {
                    read,
                    fitted: j.params.iter().copied().collect(),
                };
                (j.key.clone(), r)
            })
            .collect()
    };
    let in_sample_reads = reads_of(&plan.in_sample);
    let raw = table;
    let table = borrow_unidentified(&raw, &in_sample_reads);
    let mut by_source = Vec::new();
    let mut by_family = Vec::new();
    let mut held_out_refits = BTreeMap::new();
    let mut held_out_borrowed = BTreeMap::new();
    for fold in &plan.folds {
        let mut t = raw.clone();
        // The fold's keys and their harness entries go; the refits (with theirs) come in.
        let dropped = |k: &String| {
            fold.keys.iter().any(|f| {
                k == f
                    || k.strip_prefix(f.as_str())
                        .is_some_and(|r| r.starts_with('+') || r.starts_with('@'))
            })
        };
        t.generations.retain(|k, _| !dropped(k));
        let mut refit = BTreeMap::new();
        for &i in &fold.jobs {
            refit.extend(results[i].0.clone());
        }
        t.generations.extend(refit.clone());
        if !refit.is_empty() {
            held_out_refits.insert(format!("{}: {}", fold.grouping.scope(), fold.group), refit);
        }
        let mut reads = in_sample_reads.clone();
        reads.retain(|k, _| !dropped(k));
        reads.extend(reads_of(&fold.jobs));
        let t = borrow_unidentified(&t, &reads);
        let lent: BTreeMap<String, BTreeMap<String, f64>> = t
            .borrowed
            .iter()
            .map(|(entry, fields)| {
                let values = fields
                    .keys()
                    .filter_map(|f| Some((f.clone(), *t.generations.get(entry)?.get(f)?)))
                    .collect();
                (entry.clone(), values)
            })
            .collect();
        if !lent.is_empty() {
            held_out_borrowed.insert(format!("{}: {}", fold.grouping.scope(), fold.group), lent);
        }
        let o = ValidateOptions {
            only_lines: Some(fold.test.clone()),
            efficiencies: Some(t),
            ..Default::default()
        };
        let predicted = run_with(points_csv, &o, sim)?.points;
        match fold.grouping {
            Grouping::Source => by_source.extend(predicted),
            Grouping::Family => by_family.extend(predicted),
        }
    }
    by_source.sort_by_key(|p| p.line);
    by_family.sort_by_key(|p| p.line);
    let (src_scope, fam_scope) = (Grouping::Source.scope(), Grouping::Family.scope());
    let mut held_out = aggregate(&by_source, src_scope, &|_| true);
    held_out.extend(aggregate(&by_family, fam_scope, &|_| true));
    for fam in FAMILIES {
        held_out.extend(aggregate(
            &by_family,
            &format!("{fam_scope}: {fam}"),
            &|p| p.model_family == *fam,
        ));
    }
    // The same pooled over the rows of the V1 engine's release lines (vLLM >= 0.8), without the
    // V0 runs of 2024-25: what a deployment planned on today's vLLM is closest to.
    let v1_lines: Vec<usize> = pts
        .iter()
        .filter(|p| point_era(p) != crate::perf::EngineEra::Vllm07)
        .map(|p| p.line)
        .collect();
    let v1 = |p: &PointResult| v1_lines.contains(&p.line);
    held_out.extend(aggregate(
        &by_source,
        &format!("{src_scope} (vLLM V1 rows)"),
        &v1,
    ));
    held_out.extend(aggregate(
        &by_family,
        &format!("{fam_scope} (vLLM V1 rows)"),
        &v1,
    ));
    // Per source, what a fit that never saw the source predicts for it: a harness or era
    // setting only that source has shows here, pooled it hides in the others.
    for src in &sources {
        held_out.extend(aggregate(
            &by_source,
            &format!("{src_scope}: {src}"),
            &|p| p.source == *src,
        ));
    }
    Ok(FitReport {
        table,
        logs,
        held_out,
        held_out_by_source: by_source,
        held_out_by_family: by_family,
        held_out_refits,
        held_out_borrowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fitted_eager_overhead_is_never_below_the_graph_overhead() {
        let t = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        // Literature: graph 0.6 ms, eager 1.5 ms.
        assert!(overheads_ordered(None));
        assert!(overheads_ordered(Some(&t(&[(
            "step_overhead_graph_s",
            1.0e-3
        )]))));
        assert!(!overheads_ordered(Some(&t(&[(
            "step_overhead_graph_s",
            6e-3
        )]))));
        assert!(overheads_ordered(Some(&t(&[
            ("step_overhead_graph_s", 4e-3),
            ("step_overhead_eager_s", 4e-3)
        ]))));
        assert!(!overheads_ordered(Some(&t(&[
            ("step_overhead_graph_s", 6e-3),
            ("step_overhead_eager_s", 0.6e-3)
        ]))));
    }
}
