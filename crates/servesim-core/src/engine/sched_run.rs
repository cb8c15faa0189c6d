//! Decode runs: an engine whose next steps are all pure decode plans them at once and hands
//! the driver one event for all of them instead of a start and an end per step.
//!
//! After scheduling step `k` as a pure decode step (no prefill chunk, nobody waiting or
//! prefilling, no preemption, no sliding window, CPU tier, speculative decoding or a model that
//! reads the longest decode context), the steps
//! `k + 1, k + 2, ...` are known in advance until something outside changes the batch: each
//! has the same decodes, its context sum grows by the number of decodes per step, and its KV
//! allocations are the decodes that enter a new block at that step. The plan stops at
//! - the step in which the first decode finishes (the finish heap's earliest entry), so no
//!   request leaves inside a run;
//! - the engine's plan length (4 to [`RUN_MAX_STEPS`] steps after the one in flight, adapted to
//!   how much of its recent runs arrivals left it);
//! - the first step whose allocation the pool cannot give without preempting (that step is
//!   scheduled on its own, with its preemptions). A decode at a block boundary holds exactly
//!   the blocks of its context (`fp(ctx)`, allocated at its previous boundary or by its
//!   prefill), so its need there is `fp(ctx + 1) - fp(ctx)` however many boundaries the run
//!   crosses.
//!
//! Each planned step's duration comes from the same step-time call with the same batch as if
//! it were scheduled on its own, so the step times are identical. The steps are carried out (KV
//! allocations, prefix-cache registrations, finishes, `on_step` reports) when the run's last
//! step ends ([`Engine::complete_run`]), or up to the step in flight when a request arrives
//! before that ([`Engine::cut_run`]): the engine's state after it equals stepping one by one,
//! because nothing else reads or changes the engine in between. Only the order in which
//! different engines' steps reach the observer changes (one engine's steps stay in order).
//!
//! Architecture invariant: runs are planned only when the driver allows them
//! ([`Engine::allow_decode_runs`]): when nothing changes the engine from outside between its
//! events (no lockstep DP group, no disaggregated reservations), and a driver that reads its
//! state in between (the llm-d router's refresh) first cuts its run at that time
//! ([`Engine::cut_decode_run`]).

use super::*;

/// Most and fewest steps a run plans after the step in flight. Each engine adapts its plan length
/// (`Engine::run_len`, starting at 32): it doubles after a run that ended, and becomes about twice
/// the steps used after a run an arrival cut, so little planning is thrown away
/// (`topology_bench sweep64 16 30`: 1.685 G instructions with 4-64; a fixed 32: 1.725 G, 64:
/// 1.756 G, 16: 1.779 G).
const RUN_MAX_STEPS: u64 = 64;
const RUN_MIN_STEPS: u64 = 4;

impl<'m> Engine<'m> {
    /// Lets the engine plan decode runs (see the module comment). A driver that reads the
    /// engine's KV use or step ends between its events, or changes its pool from outside
    /// (lockstep groups, disaggregated reservations), must not allow them.
    pub fn allow_decode_runs(&mut self, on: bool) {
        debug_assert!(self.run.is_empty());
        self.runs_allowed = on;
    }

    /// The engine events (a step's start and its end) that decode runs stood in for since the
    /// last call: a driver that counts events adds them.
    pub fn take_elided_events(&mut self) -> u64 {
        std::mem::take(&mut self.elided_events)
    }

    /// Carries out the decode run planned, if any, up to `t` (see [`Engine::cut_run`]): for a
    /// driver that stops at `t - 1` with the run's later steps still due, or that reads the
    /// engine's state at `t`. Returns whether a run was cut: the engine's next event time is
    /// then earlier (the driver re-keys it).
    pub fn cut_decode_run(&mut self, t: Ticks, obs: &mut dyn Observer) -> bool {
        if self.run.is_empty() {
            return false;
        }
        self.cut_run(t, obs);
        true
    }

    /// After step `k` was scheduled (in flight): plans the pure-decode steps that follow it.
    pub(super) fn plan_run(&mut self, k: u64) {
        if !self.chunks.is_empty()
            || !self.waiting.is_empty()
            || !self.prefilling.is_empty()
            || self.n_dec == 0
            || !self.windows.is_empty()
            || self.offload.is_some()
            || self.cfg.spec.is_some()
            || self.track_ctx_max
        {
            return;
        }
        // The earliest step in which a decode ends (stale entries only shorten the run).
        let Some(&Reverse((fin, _, _))) = self.finish_heap.peek() else {
            return;
        };
        let last = fin.min(k + self.run_len);
        if last <= k {
            return;
        }
        let Some(f) = &self.in_flight else {
            return;
        };
        let first_end = f.end;
        // Steps `k + 1 ..= k + m` whose allocations the pool gives without preempting.
        let mut avail = self.pool.available();
        let mut m = 0u64;
        for j in k + 1..=last {
            let bidx = self.mod_bs(j) as usize;
            let mut need = 0;
            for &s in &self.buckets[bidx] {
                let l = self.slots[s as usize].as_ref().expect("live slot");
                // At its block boundary a decode holds exactly `fp(ctx)` blocks (the last
                // boundary allocated up to it), also at a second boundary inside the run.
                let ctx = Self::decode_ctx(l, j);
                need += self.fp(ctx + 1) - self.fp(ctx);
            }
            if need > avail {
                break;
            }
            avail -= need;
            m += 1;
        }
        if m == 0 {
            return;
        }
        // Their durations: the same values `start_step` gets from `step_time_windowed` (no
        // windows here), then their ends.
        let n = self.n_dec;
        debug_assert!(self.run.is_empty());
        self.model
            .decode_run_ticks(n, self.sum_dec_ctx + n, m as usize, &mut self.run);
        let mut end = first_end;
        for t in &mut self.run {
            end = Ticks(end.0.saturating_add(t.0.max(1)));
            *t = end;
        }
    }

    /// Schedules planned step `self.step` (its start is the previous step's end, `self.now`):
    /// what `start_step` does for a pure decode step.
    #[inline]
    fn start_planned(&mut self, end: Ticks) {
        let k = self.step;
        self.decode_allocs(k);
        self.in_flight = Some(self.planned(end));
    }

    /// Planned step `self.step` as scheduled (after its allocations), ending at `end`.
    #[inline]
    fn planned(&self, end: Ticks) -> InFlight {
        InFlight {
            start: self.now,
            end,
            prefill_only: false,
            n_dec: self.n_dec,
            num_seqs: self.n_dec as u32,
            prefill_tokens: 0,
            kv_used: self.pool.used(),
            running: self.n_running as u32,
            waiting: 0,
        }
    }

    /// Carries out the planned steps from `self.step` on that end at `ends` and are not the
    /// run's last: `start_planned` then `complete_step` for each, without their no-ops here (no
    /// request finishes before the run's last step, no prefill completes, no windows), reported
    /// to the observer in one call.
    fn run_steps(&mut self, ends: &[Ticks], obs: &mut dyn Observer) {
        let Some(&last) = ends.last() else {
            return;
        };
        let first = self.step;
        let mut used = std::mem::take(&mut self.run_used);
        used.clear();
        for k in first..first + ends.len() as u64 {
            debug_assert!(self.finish_heap.peek().is_none_or(|r| r.0 .0 > k));
            self.decode_allocs(k);
            used.push(self.pool.used());
        }
        let steps = DecodeSteps {
            engine: self.index,
            first_index: first,
            start: self.now,
            ends,
            kv_used_blocks: &used,
            num_seqs: self.n_dec as u32,
            kv_total_blocks: self.pool.total(),
            running: self.n_running as u32,
        };
        self.now = last;
        self.sum_dec_ctx += self.n_dec * ends.len() as u64;
        self.step += ends.len() as u64;
        obs.on_decode_steps(&steps);
        self.run_used = used;
    }

    /// The run's last step ended: carries out every step of the run.
    pub(super) fn complete_run(&mut self, obs: &mut dyn Observer) {
        let run = std::mem::take(&mut self.run);
        self.complete_step(obs);
        if let Some((&last, steps)) = run.split_last() {
            self.run_steps(steps, obs);
            self.start_planned(last);
            self.complete_step(obs);
        }
        self.elided_events += 2 * run.len() as u64;
        // Ran to its end: the next run may plan longer.
        self.run_len = (self.run_len * 2).min(RUN_MAX_STEPS);
        self.run = run;
        self.run.clear();
    }

    /// A request arrives at `t` during a run: carries out the steps that ended before `t` and
    /// schedules the one in flight at `t` (its end at or after `t`: at a tie the arrival comes
    /// first, as events from outside do), which then ends as a single step.
    pub(super) fn cut_run(&mut self, t: Ticks, obs: &mut dyn Observer) {
        let run = std::mem::take(&mut self.run);
        let first_end = self.in_flight.as_ref().map_or(t, |f| f.end);
        if first_end < t {
            self.complete_step(obs);
            // The steps that ended before `t` (never the run's last: its end is the engine's
            // next event, which the driver takes before an arrival after it).
            let done = run.partition_point(|&e| e < t);
            debug_assert!(done < run.len());
            let done = done.min(run.len() - 1);
            self.run_steps(&run[..done], obs);
            self.start_planned(run[done]);
            self.elided_events += 2 + 2 * done as u64;
        }
        // Cut after `done + 1` of its steps: plan about twice that next time.
        let used = run.partition_point(|&e| e < t) as u64 + 1;
        self.run_len = (2 * used).clamp(RUN_MIN_STEPS, RUN_MAX_STEPS);
        self.run = run;
        self.run.clear();
    }
}
