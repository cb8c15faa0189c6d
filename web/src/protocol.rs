//! Messages between the page and the sweep worker. Each message is one JSON string posted with
//! `postMessage` (documented in docs/web.md). Every message carries the run `id` the page chose,
//! so late messages from a cancelled run are recognised and dropped.
//!
//! The worker runs `Scenario::from_json(..)?.resolve()?.runner()?` and steps it level by level
//! ([`SweepRun`]); the report it sends at the end is the core's `SweepReport`, the same bytes
//! `servesim sweep --scenario S --json` prints.

use crate::core_api::{
    Level, LevelResult, OperatingPoint, ResolvedScenario, Scenario, SweepReport,
};
use serde::{Deserialize, Serialize};
use servesim_core::sweep::SweepRunner;

/// Page -> worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run the whole sweep of this scenario (canonical JSON, as in the share link).
    Run { id: u32, scenario: String },
    /// Stop after the current level (the page also terminates a worker that does not answer).
    Cancel { id: u32 },
}

/// Worker -> page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker's wasm is loaded and its message handler installed; sent once at start-up.
    Ready,
    /// The scenario resolved; these levels (sorted) will run.
    Started { id: u32, levels: Vec<Level> },
    /// Level `index` (0-based) of `levels` is starting.
    Progress {
        id: u32,
        index: usize,
        levels: usize,
    },
    /// Level `index` finished.
    Level {
        id: u32,
        index: usize,
        result: Box<LevelResult>,
    },
    /// Every level finished. `report` is the `SweepReport` JSON (`servesim sweep --json`),
    /// `csv` the same rows as `servesim sweep --csv`.
    Done {
        id: u32,
        operating_point: Option<OperatingPoint>,
        report: String,
        csv: String,
    },
    /// The run stopped after a Cancel; the report holds the levels that ran (`cancelled: true`).
    Cancelled {
        id: u32,
        report: Option<String>,
        csv: Option<String>,
    },
    /// The run failed; `message` is for the user, `field` the scenario's JSON path at fault.
    Error {
        id: u32,
        field: Option<String>,
        message: String,
    },
}

impl ToWorker {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("bad message to worker: {e}"))
    }
}

impl FromWorker {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("bad message from worker: {e}"))
    }
    /// The run this message belongs to (None for `Ready`).
    pub fn run_id(&self) -> Option<u32> {
        match self {
            FromWorker::Ready => None,
            FromWorker::Started { id, .. }
            | FromWorker::Progress { id, .. }
            | FromWorker::Level { id, .. }
            | FromWorker::Done { id, .. }
            | FromWorker::Cancelled { id, .. }
            | FromWorker::Error { id, .. } => Some(*id),
        }
    }
}

/// Overall sweep progress in 0..=1 after `done` of `levels` levels.
pub fn sweep_fraction(done: usize, levels: usize) -> f64 {
    if levels == 0 {
        return 1.0;
    }
    (done as f64 / levels as f64).clamp(0.0, 1.0)
}

/// Reads and resolves a scenario; a bad one becomes the `Error` message to send.
pub fn prepare(
    id: u32,
    scenario_json: &str,
) -> Result<(Scenario, ResolvedScenario), Box<FromWorker>> {
    let err = |e: servesim_core::scenario::ScenarioError| {
        Box::new(FromWorker::Error {
            id,
            field: Some(e.field()),
            message: e.to_string(),
        })
    };
    let s = Scenario::from_json(scenario_json).map_err(err)?;
    let r = s.resolve().map_err(err)?;
    Ok((s, r))
}

/// The rows of `servesim sweep --csv`: `level,value,` then every metric of `MetricId::all()`.
pub fn csv(levels: &[LevelResult]) -> String {
    crate::table::to_csv(levels)
}

/// One sweep being run, level by level. The worker calls [`SweepRun::step`] once per level and
/// yields to its event loop in between, so a `Cancel` message is seen between levels.
pub struct SweepRun<'r> {
    id: u32,
    scenario: &'r Scenario,
    resolved: &'r ResolvedScenario,
    runner: Option<SweepRunner<'r>>,
}

impl<'r> SweepRun<'r> {
    /// Builds the runner (`ResolvedScenario::runner`); a deployment that does not fit is the
    /// `Error` message to send.
    pub fn new(
        id: u32,
        scenario: &'r Scenario,
        resolved: &'r ResolvedScenario,
    ) -> Result<SweepRun<'r>, Box<FromWorker>> {
        let runner = resolved.runner().map_err(|e| {
            Box::new(FromWorker::Error {
                id,
                field: Some(e.field()),
                message: e.to_string(),
            })
        })?;
        Ok(SweepRun {
            id,
            scenario,
            resolved,
            runner: Some(runner),
        })
    }

    pub fn started(&self) -> FromWorker {
        FromWorker::Started {
            id: self.id,
            levels: self
                .runner
                .as_ref()
                .map(|r| r.levels().to_vec())
                .unwrap_or_default(),
        }
    }

    fn report(&self, result: &servesim_core::sweep::SweepResult) -> (String, String) {
        (
            SweepReport::new(self.scenario, self.resolved, result).to_json_pretty(),
            csv(&result.levels),
        )
    }

    /// Runs the next level and sends its result; after the last one sends `Done`.
    /// Returns false when nothing is left to run (after `Done` or `Error`).
    pub fn step(&mut self, send: &mut dyn FnMut(FromWorker)) -> bool {
        let id = self.id;
        let Some(runner) = self.runner.as_mut() else {
            return false;
        };
        let (index, levels) = (runner.done_levels(), runner.total_levels());
        if index < levels {
            send(FromWorker::Progress { id, index, levels });
            match runner.step() {
                Some(Ok(r)) => {
                    send(FromWorker::Level {
                        id,
                        index,
                        result: Box::new(r.clone()),
                    });
                    if index + 1 < levels {
                        return true;
                    }
                }
                Some(Err(e)) => {
                    let e = servesim_core::scenario::ScenarioError::Sweep(e);
                    send(FromWorker::Error {
                        id,
                        field: Some(e.field()),
                        message: e.to_string(),
                    });
                    self.runner = None;
                    return false;
                }
                None => {}
            }
        }
        let Some(runner) = self.runner.take() else {
            return false;
        };
        let result = runner.finish();
        let (report, csv) = self.report(&result);
        send(FromWorker::Done {
            id,
            operating_point: result.operating_point,
            report,
            csv,
        });
        false
    }

    /// Stops the run; the message carries the report of the levels that ran.
    pub fn cancel(mut self) -> FromWorker {
        let (report, csv) = match self.runner.take() {
            Some(r) => {
                let (a, b) = self.report(&r.finish());
                (Some(a), Some(b))
            }
            None => (None, None),
        };
        FromWorker::Cancelled {
            id: self.id,
            report,
            csv,
        }
    }
}

/// The worker's run loop without the browser (tested natively): runs every level, polling
/// `cancelled()` before each one.
pub fn run_sweep(
    id: u32,
    scenario_json: &str,
    send: &mut dyn FnMut(FromWorker),
    cancelled: &mut dyn FnMut() -> bool,
) {
    let (s, r) = match prepare(id, scenario_json) {
        Ok(x) => x,
        Err(m) => return send(*m),
    };
    let mut run = match SweepRun::new(id, &s, &r) {
        Ok(x) => x,
        Err(m) => return send(*m),
    };
    send(run.started());
    loop {
        if cancelled() {
            return send(run.cancel());
        }
        if !run.step(send) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick scenario: 3 levels of 20 simulated seconds.
    pub(crate) fn small_scenario() -> Scenario {
        let mut s = Scenario::default_scenario();
        s.sweep.concurrency = Some(vec![1.0, 4.0, 16.0]);
        s.sweep.duration_s = Some(20.0);
        s.sweep.warmup_s = Some(2.0);
        s
    }

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            FromWorker::Ready,
            FromWorker::Started {
                id: 3,
                levels: vec![Level::Concurrency(1), Level::RequestRate(0.5)],
            },
            FromWorker::Progress {
                id: 3,
                index: 1,
                levels: 4,
            },
            FromWorker::Cancelled {
                id: 3,
                report: None,
                csv: None,
            },
            FromWorker::Error {
                id: 3,
                field: Some("tp".into()),
                message: "x".into(),
            },
        ];
        for m in msgs {
            assert_eq!(FromWorker::from_json(&m.to_json()).unwrap(), m);
        }
        let run = ToWorker::Run {
            id: 7,
            scenario: small_scenario().to_json(),
        };
        assert_eq!(ToWorker::from_json(&run.to_json()).unwrap(), run);
        assert!(run.to_json().contains("\"type\":\"run\""));
    }

    #[test]
    fn sweep_reports_each_level_in_order_then_the_cli_report() {
        let mut got = Vec::new();
        let json = small_scenario().to_json();
        run_sweep(9, &json, &mut |m| got.push(m), &mut || false);
        assert!(matches!(&got[0], FromWorker::Started { levels, .. } if levels.len() == 3));
        let levels: Vec<(usize, f64)> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { index, result, .. } => Some((*index, result.level.value())),
                _ => None,
            })
            .collect();
        assert_eq!(levels, vec![(0, 1.0), (1, 4.0), (2, 16.0)]);
        assert!(got.iter().all(|m| m.run_id() == Some(9)));
        let Some(FromWorker::Done { report, csv, .. }) = got.last() else {
            panic!("last message is Done: {:?}", got.last());
        };
        // The report is the core's SweepReport of the same scenario: what the CLI prints.
        let s = Scenario::from_json(&json).unwrap();
        let r = s.resolve().unwrap();
        let native = r.run().unwrap();
        assert_eq!(
            report,
            &SweepReport::new(&s, &r, &native).to_json_pretty(),
            "worker report == servesim sweep --json"
        );
        assert_eq!(csv.lines().count(), 4);
        // Levels sent one by one are the report's levels.
        let sent: Vec<LevelResult> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { result, .. } => Some((**result).clone()),
                _ => None,
            })
            .collect();
        assert_eq!(sent, native.levels);
    }

    #[test]
    fn cancel_between_levels_stops_the_sweep_with_a_partial_report() {
        let mut got = Vec::new();
        let mut polls = 0;
        run_sweep(
            1,
            &small_scenario().to_json(),
            &mut |m| got.push(m),
            &mut || {
                polls += 1;
                polls > 1
            },
        );
        let n_levels = got
            .iter()
            .filter(|m| matches!(m, FromWorker::Level { .. }))
            .count();
        assert_eq!(n_levels, 1);
        let Some(FromWorker::Cancelled {
            id: 1,
            report: Some(report),
            ..
        }) = got.last()
        else {
            panic!("ends with Cancelled: {:?}", got.last());
        };
        let v: serde_json::Value = serde_json::from_str(report).unwrap();
        assert_eq!(v["cancelled"], true);
        assert_eq!(v["levels"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn bad_scenario_json_is_an_error_message_not_a_panic() {
        let mut got = Vec::new();
        run_sweep(2, "{not json", &mut |m| got.push(m), &mut || false);
        assert!(matches!(&got[..], [FromWorker::Error { id: 2, .. }]));
    }

    #[test]
    fn a_deployment_that_does_not_fit_is_an_error_naming_the_fix() {
        let mut s = small_scenario();
        s.model = crate::core_api::ModelRef::Catalog("meta-llama/Meta-Llama-3.1-405B".into());
        let mut got = Vec::new();
        run_sweep(4, &s.to_json(), &mut |m| got.push(m), &mut || false);
        match &got[..] {
            [FromWorker::Error { field, message, .. }] => {
                assert_eq!(field.as_deref(), Some("deployment"));
                assert!(message.contains("does not fit"), "{message}");
                assert!(message.contains("Fixes"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sweep_fraction_counts_finished_levels() {
        assert_eq!(sweep_fraction(0, 4), 0.0);
        assert_eq!(sweep_fraction(1, 4), 0.25);
        assert_eq!(sweep_fraction(4, 4), 1.0);
        assert_eq!(sweep_fraction(0, 0), 1.0);
    }
}
