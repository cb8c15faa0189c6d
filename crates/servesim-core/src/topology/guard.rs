//! The checks every level makes while it runs (`LevelGuard`): the memory budget before the level
//! and while it runs, the simulated-time horizon, the event cap, progress, a clock that never
//! goes back.

use crate::engine::SimError;
use crate::metrics::Collector;
use crate::sweep::{Stop, SweepError, SweepSpec, PROGRESS_EVERY_EVENTS};
use crate::units::Ticks;
use crate::workload::{Level, WorkloadSpec};

/// What the level's event loop (`sim.rs`) checks: the memory budget before the level and every
/// [`PROGRESS_EVERY_EVENTS`] events while it runs, the simulated-time horizon, the event cap,
/// progress, and a clock that never goes back.
pub(super) struct LevelGuard {
    /// Requests to issue (`num_requests` levels).
    pub limit: Option<u64>,
    /// The level's end (duration levels).
    pub end: Option<Ticks>,
    /// The time of the last event.
    pub now: Ticks,
    /// Events so far (with the engine events decode runs stood in for), and the count at which
    /// progress and memory are next checked.
    events: u64,
    next_progress: u64,
    clients: u64,
    horizon: Ticks,
}

impl LevelGuard {
    /// Refuses a level whose settings alone exceed the memory budget (crate::budget).
    pub(super) fn new(
        w: &WorkloadSpec,
        level: Level,
        spec: &SweepSpec,
    ) -> Result<LevelGuard, SweepError> {
        let limit = match spec.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration { .. } => None,
            // Resolved per level by `Stop::at` before the guard is built.
            Stop::Burst => match w.arrival {
                crate::workload::Arrival::Burst { count } => Some(count),
                _ => None,
            },
        };
        let (estimate, setting) = crate::budget::level_estimate(
            w,
            level,
            match spec.stop {
                Stop::Duration { duration, .. } => Some(duration.as_secs_f64()),
                Stop::Requests(_) | Stop::Burst => None,
            },
            limit,
        );
        if estimate > spec.memory_budget {
            return Err(budget_err(
                setting,
                crate::budget::over_budget_message(estimate, spec.memory_budget, setting, true),
            ));
        }
        Ok(LevelGuard {
            limit,
            end: match spec.stop {
                Stop::Duration { duration, .. } => Some(duration),
                Stop::Requests(_) | Stop::Burst => None,
            },
            now: Ticks::ZERO,
            events: 0,
            next_progress: PROGRESS_EVERY_EVENTS,
            clients: match w.arrival {
                crate::workload::Arrival::ClosedLoop { concurrency, .. } => concurrency as u64,
                _ => 0,
            },
            horizon: Ticks::from_secs_f64(crate::bounds::SIM_TIME_MAX_S),
        })
    }

    /// Takes the next event at `t`: `Ok(false)` when it lies past the level's end (stop),
    /// an error when the level outgrows its horizon, memory budget or event cap.
    #[inline]
    pub(super) fn event(
        &mut self,
        t: Ticks,
        spec: &SweepSpec,
        w: &WorkloadSpec,
        col: &Collector,
        in_flight: impl FnOnce() -> u64,
        progress: &mut dyn FnMut(f64),
    ) -> Result<bool, SweepError> {
        if self.end.is_some_and(|d| t > d) {
            return Ok(false);
        }
        if t > self.horizon {
            return Err(budget_err(
                "num_requests",
                format!(
                    "the level ran past {} simulated seconds (the longest a level may cover) before its requests finished; lower num_requests or raise the request rate",
                    crate::bounds::fmt_num(crate::bounds::SIM_TIME_MAX_S)
                ),
            ));
        }
        debug_assert!(t >= self.now, "clock went back");
        self.now = t;
        self.events += 1;
        if self.events >= self.next_progress {
            self.next_progress = (self.events / PROGRESS_EVERY_EVENTS + 1) * PROGRESS_EVERY_EVENTS;
            let fraction = match spec.stop {
                Stop::Duration { duration, .. } => self.now.0 as f64 / duration.0.max(1) as f64,
                Stop::Requests(n) => col.finished_count() as f64 / n.max(1) as f64,
                Stop::Burst => col.finished_count() as f64 / self.limit.unwrap_or(1).max(1) as f64,
            };
            progress(fraction.clamp(0.0, 1.0));
            let held = col.held_bytes(in_flight(), self.clients);
            if held > spec.memory_budget {
                let setting = match (&w.arrival, spec.stop) {
                    (_, Stop::Requests(_)) => "sweep.num_requests",
                    (_, Stop::Burst) => "sweep.concurrency",
                    (
                        crate::workload::Arrival::ClosedLoop { .. }
                        | crate::workload::Arrival::Burst { .. },
                        _,
                    ) => "sweep.concurrency",
                    _ => "sweep.request_rates",
                };
                return Err(budget_err(
                    setting,
                    crate::budget::over_budget_message(held, spec.memory_budget, setting, false),
                ));
            }
        }
        if self.events > spec.max_events {
            return Err(SimError::EventCap {
                cap: spec.max_events,
            }
            .into());
        }
        Ok(true)
    }
}

impl LevelGuard {
    /// Counts `n` engine events that decode runs stood in for (engine/sched_run.rs): the event
    /// cap and the progress cadence count the events stepping one by one would have taken.
    #[inline]
    pub(super) fn elided(&mut self, n: u64) {
        self.events += n;
    }
}

pub(super) fn budget_err(field: &str, problem: String) -> SweepError {
    SweepError::Spec {
        field: field.into(),
        problem,
    }
}
