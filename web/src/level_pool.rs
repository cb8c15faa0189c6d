//! A sweep's levels on several Web Workers (docs/web.md "Levels on several workers"), without
//! the browser: the messages between the sweep worker and its level workers, what a level worker
//! does with one ([`run_level`]), and the sweep worker's bookkeeping ([`Assembly`]: which level
//! to hand out next, the page's messages in level order, the report at the end).
//!
//! Each level starts from an empty deployment, so level `i` gives the same output whichever
//! worker runs it (`SweepRunner::run_at`); the sweep worker assembles the outputs in level order
//! with `SweepRunner::finish_with` and sends the page exactly the messages, and the report
//! bytes, one worker stepping through the levels would send. Level outputs travel between
//! workers in [`exact`](crate::protocol::exact) form (every float as its shortest round-trip
//! decimal), because serde_json's default float parser is not exact to the last bit.
//! The page's protocol (`protocol::ToWorker` / `FromWorker`) does not change: the page talks to
//! the sweep worker only.

use crate::protocol::exact;
use crate::protocol::{prepare_job, start_job, FromWorker, SweepRun, ToWorker};
use serde::{Deserialize, Serialize};
use servesim_core::sweep::LevelOutput;

/// At most this many level workers per sweep (each holds one level's simulation in memory).
pub const MAX_LEVEL_WORKERS: usize = 4;

/// Sweep worker -> level worker (externally tagged: `{"run_level":{…}}`, distinct from
/// `ToWorker` and the search messages).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToLevel {
    /// Run level `index` (of the sorted levels) of `job`, a `Run` or `Predict` message as the
    /// page sent it.
    RunLevel {
        id: u32,
        job: ToWorker,
        index: usize,
    },
}

/// Level worker -> sweep worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromLevel {
    /// Level `index` is this far along (as `FromWorker::LevelProgress`).
    LevelProgress {
        id: u32,
        index: usize,
        fraction: f64,
    },
    /// Level `index` finished: the core's `LevelOutput` in [`exact`](crate::protocol::exact) form.
    LevelDone {
        id: u32,
        index: usize,
        output: String,
    },
    /// Level `index` could not run: the `Error` message for the page.
    LevelFailed {
        id: u32,
        index: usize,
        error: Box<FromWorker>,
    },
}

impl ToLevel {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Option<ToLevel> {
        serde_json::from_str(s).ok()
    }
}

impl FromLevel {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Option<FromLevel> {
        serde_json::from_str(s).ok()
    }
}

/// The level worker's side: runs the level and sends its progress and output (or why not).
pub fn run_level(msg: &ToLevel, send: &mut dyn FnMut(FromLevel)) {
    let ToLevel::RunLevel { id, job, index } = msg;
    let (id, index) = (*id, *index);
    let failed = |error: Box<FromWorker>| FromLevel::LevelFailed { id, index, error };
    let (s, r) = match prepare_job(job) {
        Some(Ok(x)) => x,
        Some(Err(m)) => return send(failed(m)),
        None => {
            return send(failed(Box::new(FromWorker::Error {
                id,
                field: None,
                message: "a level worker was given a message that is not a sweep".into(),
            })))
        }
    };
    let mut run = match start_job(job, &s, &r) {
        Ok(x) => x,
        Err(m) => return send(failed(m)),
    };
    let out = run.run_at(index, &mut |fraction| {
        send(FromLevel::LevelProgress {
            id,
            index,
            fraction,
        })
    });
    send(match out {
        Some(Ok(o)) => match exact::to_string(&o) {
            Ok(output) => FromLevel::LevelDone { id, index, output },
            Err(e) => failed(Box::new(FromWorker::Error {
                id,
                field: None,
                message: format!("level {} could not be written: {e}", index + 1),
            })),
        },
        Some(Err(m)) => failed(m),
        None => failed(Box::new(FromWorker::Error {
            id,
            field: None,
            message: format!("the sweep has no level {}", index + 1),
        })),
    });
}

/// The sweep worker's bookkeeping for one run spread over level workers. The highest level
/// (usually the longest: most clients or the highest rate) is handed out first, then the others
/// lowest first, so the longest level does not run alone at the end while the lowest unfinished
/// level is always running on another worker: the page's "level k of n" and its progress are
/// that level's, as with one worker.
pub struct Assembly<'r> {
    run: SweepRun<'r>,
    id: u32,
    total: usize,
    next: usize,
    /// Level outputs by index, or the error of a level that failed.
    outputs: Vec<Option<Result<LevelOutput, Box<FromWorker>>>>,
    /// Levels up to here have been reported to the page (in order).
    released: usize,
    over: bool,
}

impl<'r> Assembly<'r> {
    /// Starts the bookkeeping; `send` gets the page's `Started` and first `Progress`.
    pub fn new(id: u32, run: SweepRun<'r>, send: &mut dyn FnMut(FromWorker)) -> Assembly<'r> {
        let total = run.total_levels();
        send(run.started());
        send(FromWorker::Progress {
            id,
            index: 0,
            levels: total,
        });
        Assembly {
            run,
            id,
            total,
            next: 0,
            outputs: (0..total).map(|_| None).collect(),
            released: 0,
            over: false,
        }
    }

    pub fn total_levels(&self) -> usize {
        self.total
    }

    /// The next level to hand to a free level worker (None when every level is handed out or
    /// the run is over): the highest level, then the others lowest first.
    pub fn next_level(&mut self) -> Option<usize> {
        if self.over || self.next >= self.total {
            return None;
        }
        self.next += 1;
        Some(match self.next - 1 {
            0 => self.total - 1,
            k => k - 1,
        })
    }

    /// True once `Done`, `Predicted` or `Error` has been sent.
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// A level worker's message; sends the page what follows from it.
    pub fn on_message(&mut self, msg: FromLevel, send: &mut dyn FnMut(FromWorker)) {
        if self.over {
            return;
        }
        match msg {
            FromLevel::LevelProgress {
                id,
                index,
                fraction,
            } => {
                if id == self.id && index == self.released {
                    send(FromWorker::LevelProgress {
                        id,
                        index,
                        fraction,
                    });
                }
            }
            FromLevel::LevelDone { id, index, output } => {
                if id != self.id || index >= self.total {
                    return;
                }
                let out = exact::from_str::<LevelOutput>(&output)
                    .map_err(|e| {
                        Box::new(FromWorker::Error {
                            id,
                            field: None,
                            message: format!("level {} came back unreadable: {e}", index + 1),
                        })
                    })
                    .and_then(|o| {
                        if o.index == index {
                            Ok(o)
                        } else {
                            Err(Box::new(FromWorker::Error {
                                id,
                                field: None,
                                message: format!("level {} came back as another level", index + 1),
                            }))
                        }
                    });
                self.outputs[index] = Some(out);
                self.release(send);
            }
            FromLevel::LevelFailed { id, index, error } => {
                if id != self.id || index >= self.total {
                    return;
                }
                self.outputs[index] = Some(Err(error));
                self.release(send);
            }
        }
    }

    /// Reports the finished levels at the front, in order (a failed one ends the run with its
    /// error, as one worker stepping in order would); after the last, `Done` or `Predicted`.
    fn release(&mut self, send: &mut dyn FnMut(FromWorker)) {
        while self.released < self.total {
            match &self.outputs[self.released] {
                None => return,
                Some(Err(e)) => {
                    send((**e).clone());
                    self.over = true;
                    return;
                }
                Some(Ok(o)) => {
                    if let Some(m) = self.run.level_message(self.released, &o.result) {
                        send(m);
                    }
                    self.released += 1;
                    if self.released < self.total {
                        send(FromWorker::Progress {
                            id: self.id,
                            index: self.released,
                            levels: self.total,
                        });
                    }
                }
            }
        }
        let outputs = self.finished();
        self.over = true;
        self.run.conclude_with(outputs, send);
    }

    fn finished(&mut self) -> Vec<LevelOutput> {
        self.outputs
            .iter_mut()
            .filter_map(|o| match o.take() {
                Some(Ok(o)) => Some(o),
                _ => None,
            })
            .collect()
    }

    /// Cancel: the `Cancelled` message with the report of the levels that finished.
    pub fn cancel(mut self) -> FromWorker {
        let outputs = self.finished();
        self.run.cancel_with(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::run_job;

    fn scenario(replicas: u32, sla: &str) -> String {
        format!(
            r#"{{
  "version": 2,
  "model": {{"catalog": "meta-llama/Meta-Llama-3.1-8B"}},
  "gpu": {{"catalog": "H100-SXM"}},
  "topology": {{"replicas": {replicas}, "router": {{"policy": "least_requests"}}}},
  "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
               "requests": {{"type": "synthetic",
                            "input": {{"type": "uniform", "min": 64, "max": 900}},
                            "output": {{"type": "uniform", "min": 16, "max": 300}}}}}},
  "sweep": {{"concurrency": [1, 4, 16, 64, 256], "duration_s": 30, "warmup_s": 3,
            "sla": [{sla}]}}
}}"#
        )
    }

    /// The messages one worker stepping through `job` sends.
    fn one_worker(job: &ToWorker) -> Vec<FromWorker> {
        let mut sent = Vec::new();
        run_job(job, &mut |m| sent.push(m), &mut || false);
        sent
    }

    /// A level worker runs level `i` of `job`; its messages reach `a` through the wire (JSON, as
    /// between workers), and what `a` sends the page is appended to `sent`.
    fn answer(a: &mut Assembly, job: &ToWorker, i: usize, sent: &mut Vec<FromWorker>) {
        let mut answers = Vec::new();
        run_level(
            &ToLevel::RunLevel {
                id: 7,
                job: job.clone(),
                index: i,
            },
            &mut |m| answers.push(m),
        );
        for m in answers {
            let m = FromLevel::from_json(&m.to_json()).expect("reads back");
            a.on_message(m, &mut |m| sent.push(m));
        }
    }

    /// The messages the sweep worker sends when its level workers answer in `order`.
    fn spread(job: &ToWorker, order: &[usize]) -> Vec<FromWorker> {
        let mut sent = Vec::new();
        let (s, r) = prepare_job(job).expect("a sweep").expect("prepares");
        let run = start_job(job, &s, &r).expect("starts");
        let mut a = Assembly::new(7, run, &mut |m| sent.push(m));
        let mut handed = Vec::new();
        while let Some(i) = a.next_level() {
            handed.push(i);
        }
        let n = a.total_levels();
        let mut want = vec![n - 1];
        want.extend(0..n - 1);
        assert_eq!(handed, want, "the highest first, then in order");
        for &i in order {
            answer(&mut a, job, i, &mut sent);
        }
        assert!(a.is_over());
        sent
    }

    /// Drops progress messages (their number depends on who ran what).
    fn settled(v: Vec<FromWorker>) -> Vec<FromWorker> {
        v.into_iter()
            .filter(|m| !matches!(m, FromWorker::LevelProgress { .. }))
            .collect()
    }

    #[test]
    fn levels_answered_in_any_order_send_the_one_worker_messages_and_report() {
        let mut refinements = 0;
        for (replicas, sla) in [
            (1, r#"{"metric": "ttft_ms_p50", "op": "<=", "value": 60}"#),
            (
                3,
                r#"{"metric": "e2e_tokens_per_s_per_user", "op": ">=", "value": 120}"#,
            ),
        ] {
            let job = ToWorker::Run {
                id: 7,
                scenario: scenario(replicas, sla),
            };
            let want = settled(one_worker(&job));
            let Some(FromWorker::Done { refined, .. }) = want.last() else {
                panic!("{:?}", want.last())
            };
            refinements += usize::from(refined.is_some());
            for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 4, 0, 3, 1]] {
                let got = settled(spread(&job, &order));
                assert_eq!(got, want, "{replicas} replica(s), order {order:?}");
            }
        }
        assert!(
            refinements > 0,
            "an SLA crossing is refined after the levels"
        );
    }

    #[test]
    fn a_comparisons_prediction_spread_over_workers_is_the_same_series() {
        let job = ToWorker::Predict {
            id: 7,
            scenario: scenario(2, ""),
            level_kind: servesim_core::compare::LevelKind::Concurrency,
            levels: vec!["3".into(), "24".into(), "96".into()],
        };
        let want = settled(one_worker(&job));
        assert!(matches!(want.last(), Some(FromWorker::Predicted { .. })));
        assert_eq!(settled(spread(&job, &[2, 0, 1])), want);
    }

    #[test]
    fn a_failed_level_is_reported_when_the_levels_below_it_are_in() {
        let mut sent = Vec::new();
        let job = ToWorker::Run {
            id: 7,
            scenario: scenario(1, ""),
        };
        let (s, r) = prepare_job(&job).unwrap().unwrap();
        let run = start_job(&job, &s, &r).unwrap();
        let mut a = Assembly::new(7, run, &mut |m| sent.push(m));
        let failed = FromWorker::Error {
            id: 7,
            field: Some("sweep".into()),
            message: "level 3 is too big".into(),
        };
        a.on_message(
            FromLevel::LevelFailed {
                id: 7,
                index: 2,
                error: Box::new(failed.clone()),
            },
            &mut |m| sent.push(m),
        );
        assert!(!a.is_over(), "levels 1 and 2 are still out");
        for i in [1, 0] {
            answer(&mut a, &job, i, &mut sent);
        }
        assert!(a.is_over());
        assert_eq!(a.next_level(), None, "nothing more is handed out");
        let levels: Vec<usize> = sent
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(levels, vec![0, 1]);
        assert_eq!(sent.last(), Some(&failed));
    }

    #[test]
    fn cancel_reports_the_levels_that_finished() {
        let job = ToWorker::Run {
            id: 7,
            scenario: scenario(1, ""),
        };
        let (s, r) = prepare_job(&job).unwrap().unwrap();
        let run = start_job(&job, &s, &r).unwrap();
        let mut a = Assembly::new(7, run, &mut |_| {});
        answer(&mut a, &job, 3, &mut Vec::new());
        let FromWorker::Cancelled {
            report: Some(report),
            ..
        } = a.cancel()
        else {
            panic!("a cancelled sweep has a report")
        };
        let v: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(v["cancelled"], true);
        assert_eq!(v["levels"].as_array().unwrap().len(), 1);
        assert_eq!(v["levels"][0]["concurrency"], 64.0);
    }
}
