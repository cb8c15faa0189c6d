//! Messages between the page and the sweep worker. Each message is one JSON string posted with
//! `postMessage` (documented in docs/web.md). Every message carries the run `id` the page chose,
//! so late messages from a cancelled run are recognised and dropped.

use crate::core_api::{LevelRow, OperatingPoint};
use serde::{Deserialize, Serialize};

/// Page -> worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run the whole sweep of this scenario (JSON as in the share link).
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
    /// Progress inside level `index` (0-based) of `levels`; `fraction` in 0..=1.
    Progress {
        id: u32,
        index: usize,
        levels: usize,
        fraction: f64,
    },
    /// Level `index` finished.
    Level {
        id: u32,
        index: usize,
        row: LevelRow,
    },
    /// Every level finished.
    Done {
        id: u32,
        operating_point: Option<OperatingPoint>,
    },
    /// The run stopped after a Cancel.
    Cancelled { id: u32 },
    /// The run failed; `message` is for the user.
    Error { id: u32, message: String },
}

impl ToWorker {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("message serialises")
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("bad message to worker: {e}"))
    }
}

impl FromWorker {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("message serialises")
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("bad message from worker: {e}"))
    }
    /// The run this message belongs to (None for `Ready`).
    pub fn run_id(&self) -> Option<u32> {
        match self {
            FromWorker::Ready => None,
            FromWorker::Progress { id, .. }
            | FromWorker::Level { id, .. }
            | FromWorker::Done { id, .. }
            | FromWorker::Cancelled { id }
            | FromWorker::Error { id, .. } => Some(*id),
        }
    }
}

/// Overall sweep progress in 0..=1 from a level index and the fraction done inside it.
pub fn sweep_fraction(index: usize, levels: usize, fraction: f64) -> f64 {
    if levels == 0 {
        return 1.0;
    }
    ((index as f64 + fraction.clamp(0.0, 1.0)) / levels as f64).clamp(0.0, 1.0)
}

/// One sweep being run, level by level. The worker calls [`SweepRun::step`] once per level and
/// yields to its event loop in between, so a `Cancel` message can be seen between levels.
pub struct SweepRun {
    id: u32,
    scenario: crate::core_api::Scenario,
    rows: Vec<LevelRow>,
}

impl SweepRun {
    /// Parses the scenario; a bad one becomes the `Error` message to send.
    pub fn new(id: u32, scenario_json: &str) -> Result<SweepRun, FromWorker> {
        crate::core_api::Scenario::from_json(scenario_json)
            .map(|scenario| SweepRun {
                id,
                scenario,
                rows: Vec::new(),
            })
            .map_err(|message| FromWorker::Error { id, message })
    }

    pub fn levels(&self) -> usize {
        self.scenario.levels.len()
    }

    /// Runs the next level, sending its progress and result; at the end sends `Done`.
    /// Returns false when nothing is left to run (after `Done` or `Error`).
    pub fn step(&mut self, send: &mut dyn FnMut(FromWorker)) -> bool {
        let (id, index, levels) = (self.id, self.rows.len(), self.levels());
        if index >= levels {
            let operating_point = crate::core_api::operating_point(&self.scenario, &self.rows);
            send(FromWorker::Done {
                id,
                operating_point,
            });
            return false;
        }
        let mut progress = |fraction: f64| {
            send(FromWorker::Progress {
                id,
                index,
                levels,
                fraction,
            })
        };
        match crate::core_api::run_level(&self.scenario, index, &mut progress) {
            Ok(row) => {
                self.rows.push(row.clone());
                send(FromWorker::Level { id, index, row });
                true
            }
            Err(message) => {
                send(FromWorker::Error { id, message });
                false
            }
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
    let mut run = match SweepRun::new(id, scenario_json) {
        Ok(r) => r,
        Err(m) => return send(m),
    };
    loop {
        if cancelled() {
            return send(FromWorker::Cancelled { id });
        }
        if !run.step(send) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::Scenario;

    fn small_scenario() -> Scenario {
        Scenario {
            levels: vec![1, 4, 16],
            duration_s: 1.0,
            ..Scenario::default()
        }
    }

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            FromWorker::Ready,
            FromWorker::Progress {
                id: 3,
                index: 1,
                levels: 4,
                fraction: 0.5,
            },
            FromWorker::Cancelled { id: 3 },
            FromWorker::Error {
                id: 3,
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
    fn sweep_reports_each_level_in_order_then_done() {
        let mut got = Vec::new();
        run_sweep(
            9,
            &small_scenario().to_json(),
            &mut |m| got.push(m),
            &mut || false,
        );
        let levels: Vec<(usize, u32)> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { index, row, .. } => Some((*index, row.concurrency)),
                _ => None,
            })
            .collect();
        assert_eq!(levels, vec![(0, 1), (1, 4), (2, 16)]);
        assert!(matches!(got.last(), Some(FromWorker::Done { id: 9, .. })));
        assert!(got.iter().all(|m| m.run_id() == Some(9)));
        // Progress inside a level is monotone and ends at 1 before the level's result.
        let first_level_pos = got
            .iter()
            .position(|m| matches!(m, FromWorker::Level { .. }))
            .unwrap();
        let fr: Vec<f64> = got[..first_level_pos]
            .iter()
            .filter_map(|m| match m {
                FromWorker::Progress { fraction, .. } => Some(*fraction),
                _ => None,
            })
            .collect();
        assert!(fr.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(fr.last(), Some(&1.0));
    }

    #[test]
    fn cancel_between_levels_stops_the_sweep() {
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
        assert_eq!(got.last(), Some(&FromWorker::Cancelled { id: 1 }));
    }

    #[test]
    fn bad_scenario_json_is_an_error_message_not_a_panic() {
        let mut got = Vec::new();
        run_sweep(2, "{not json", &mut |m| got.push(m), &mut || false);
        assert!(
            matches!(&got[..], [FromWorker::Error { id: 2, message }] if message.contains("not valid"))
        );
    }

    #[test]
    fn sweep_fraction_combines_level_and_inner_progress() {
        assert_eq!(sweep_fraction(0, 4, 0.0), 0.0);
        assert_eq!(sweep_fraction(1, 4, 0.5), 0.375);
        assert_eq!(sweep_fraction(3, 4, 1.0), 1.0);
        assert_eq!(sweep_fraction(0, 0, 0.0), 1.0);
    }
}
