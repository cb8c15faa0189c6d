//! Memory budget of one sweep level: an estimate of the bytes a level will hold, checked before
//! the level starts (from concurrency, rate, duration and request caps) and while it runs (from
//! the records actually held: clients, requests, step records), so that a run too large for its
//! host stops with a message naming the setting to lower instead of exhausting memory.
//! docs/metrics.md "Memory budget" gives the per-item sizes.

use crate::engine::{FinishedRequest, Request, Segment};
use crate::units::GIB;
use crate::workload::{Arrival, Level, WorkloadSpec};

/// Default budget per level natively (the CLI): 4 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 * GIB;
/// The page's Web Worker budget: 1 GiB (a wasm32 worker has at most 4 GiB of address space and
/// browsers kill tabs far earlier).
pub const WORKER_MEMORY_BUDGET: u64 = GIB;

/// Bytes held per finished request: its record, one decode run, and the collector's per-request
/// side tables (admission, ITL weights) — an estimate, rounded up.
pub const BYTES_PER_FINISHED: u64 = (std::mem::size_of::<FinishedRequest>() + 16 + 64) as u64;
/// Bytes per request in flight (in the front end, waiting or running): the request, two prompt
/// segments, the engine's per-request state and the generator's owner entry (estimate).
pub const BYTES_PER_IN_FLIGHT: u64 =
    (std::mem::size_of::<Request>() + 2 * std::mem::size_of::<Segment>() + 256) as u64;
/// Bytes per closed-loop client (its pending-arrival entry and owner record).
pub const BYTES_PER_CLIENT: u64 = 96;
/// Bytes per engine step record kept for the level's metrics.
pub const BYTES_PER_STEP: u64 = 64;
/// Streaming collectors (duration mode, `metrics::Collector::streaming`): bytes per measured
/// request's sample (the sample, twice for a growing vector, and the TTFT / E2E sort buffers
/// at the level's end).
pub const BYTES_PER_SAMPLE: u64 = (2 * std::mem::size_of::<crate::metrics::Sample>() + 24) as u64;
/// Streaming collectors: bytes per step kept for the pooled ITL (its end time and weight,
/// twice for a growing vector, and the (gap, weight) pair at the level's end).
pub const BYTES_PER_STREAMED_STEP: u64 = 2 * (8 + 4) + 16;

/// Bytes the records held so far take (the running check).
pub fn held_bytes(finished: u64, in_flight: u64, steps: u64, clients: u64) -> u64 {
    finished
        .saturating_mul(BYTES_PER_FINISHED)
        .saturating_add(in_flight.saturating_mul(BYTES_PER_IN_FLIGHT))
        .saturating_add(steps.saturating_mul(BYTES_PER_STEP))
        .saturating_add(clients.saturating_mul(BYTES_PER_CLIENT))
}

/// [`held_bytes`] for a streaming collector: measured requests' samples and the window's steps.
pub fn held_bytes_streamed(samples: u64, in_flight: u64, steps: u64, clients: u64) -> u64 {
    samples
        .saturating_mul(BYTES_PER_SAMPLE)
        .saturating_add(in_flight.saturating_mul(BYTES_PER_IN_FLIGHT))
        .saturating_add(steps.saturating_mul(BYTES_PER_STREAMED_STEP))
        .saturating_add(clients.saturating_mul(BYTES_PER_CLIENT))
}

/// The pre-run estimate of a level's bytes: clients, plus every request the level can issue
/// (`num_requests`, or an open-loop rate x duration, or a burst) kept as a finished record.
/// Closed-loop request counts depend on the simulated throughput and are caught by the running
/// check instead. Returns (bytes, the setting that drives them).
pub fn level_estimate(
    w: &WorkloadSpec,
    level: Level,
    duration_s: Option<f64>,
    num_requests: Option<u64>,
) -> (u64, &'static str) {
    let (clients, requests, what): (f64, f64, &'static str) = match (&w.arrival, level) {
        (Arrival::ClosedLoop { .. }, Level::Concurrency(c)) => (
            c as f64,
            num_requests.map(|n| n as f64).unwrap_or(0.0),
            "sweep.concurrency",
        ),
        (Arrival::Burst { .. }, Level::Concurrency(c)) => (0.0, c as f64, "sweep.concurrency"),
        (_, Level::RequestRate(r)) => match (num_requests, duration_s) {
            (Some(n), _) => (0.0, n as f64, "sweep.num_requests"),
            (None, Some(d)) => (0.0, r * d, "sweep.request_rates"),
            (None, None) => (0.0, 0.0, "sweep.request_rates"),
        },
        (_, Level::Concurrency(c)) => (c as f64, 0.0, "sweep.concurrency"),
    };
    // Duration mode streams its records: a finished request leaves at most a sample.
    let per_request = if num_requests.is_some() {
        BYTES_PER_FINISHED
    } else {
        BYTES_PER_SAMPLE
    };
    let bytes =
        clients * (BYTES_PER_CLIENT + BYTES_PER_IN_FLIGHT) as f64 + requests * per_request as f64;
    let what = if num_requests.is_some() && requests > clients {
        "sweep.num_requests"
    } else {
        what
    };
    (bytes.min(u64::MAX as f64) as u64, what)
}

/// The message of a level that does not fit its budget.
pub fn over_budget_message(bytes: u64, budget: u64, setting: &str, before: bool) -> String {
    format!(
        "the level {} about {:.1} GiB of simulation records, over the {:.1} GiB memory budget per run; lower {setting} (or shorten sweep.duration_s)",
        if before { "would hold" } else { "holds" },
        bytes as f64 / GIB as f64,
        budget as f64 / GIB as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_grow_with_the_settings() {
        assert_eq!(held_bytes(0, 0, 0, 0), 0);
        assert!(held_bytes(10, 0, 0, 0) < held_bytes(20, 0, 0, 0));
        assert_eq!(held_bytes(u64::MAX, 1, 1, 1), u64::MAX);
        let m = over_budget_message(3 * GIB, GIB, "sweep.concurrency", true);
        assert!(
            m.contains("sweep.concurrency") && m.contains("1.0 GiB"),
            "{m}"
        );
    }
}
