//! vLLM's data-parallel lockstep for MoE models: the DP ranks of one replica step together.
//!
//! vLLM (`vllm/v1/engine/core.py`): `run_engine_core` starts a `DPEngineCoreProc` per rank when
//! `data_parallel_size > 1` and the model is MoE ("Non-MoE DP ranks are completely independent,
//! so treat like DP=1" otherwise). Its `run_busy_loop` steps every rank each iteration; a rank
//! with nothing scheduled runs `execute_dummy_batch` (a one-token forward) so the MoE layers'
//! collectives line up, while `_has_global_unfinished_reqs` (an all-reduce over the DP group)
//! says any rank still has work; when none has, the wave ends and the ranks pause until a
//! request starts the next wave. Every MoE layer's dispatch/combine is a collective over all
//! ranks, so a step ends when the slowest rank's ends.
//!
//! [`LockstepGroup`] wraps one replica's DP-rank engines behind the driving interface the
//! simulation uses for one engine (`submit`, `next_event_time`, `process_next_event`): a group
//! step starts when any rank has work; every rank with work starts its own step; a rank
//! without work runs a dummy step (a one-token decode priced by the step-time model); the group
//! step lasts the longest of them, and every rank's step is extended to that end
//! (`Engine::extend_step_to`). Requests that reach a rank during a group step wait for the next
//! one. Approximation: vLLM checks for the end of a wave every 32 steps, so ranks may run up to
//! 31 dummy steps after the last request finishes; here the group stops at once (a request
//! arriving then would otherwise wait up to one dummy step). docs/topology.md, "DP + EP".

use crate::engine::{Engine, Observer, RejectReason, Request, SimError, StepBatch, StepTimeModel};
use crate::units::Ticks;

/// The lockstep state of one replica's DP ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupState {
    /// End of the group step in flight.
    in_flight_end: Option<Ticks>,
    /// The group's clock when idle (the last group step's end, or the last arrival).
    now: Ticks,
    /// Duration of a dummy step (vLLM `execute_dummy_batch`: one token).
    dummy: Ticks,
    /// Per rank: its own step duration in the group step in flight (0 = dummy step).
    own: Vec<Ticks>,
    /// Group steps started.
    steps: u64,
    /// When no rank could schedule anything (only CPU KV loads in flight, `engine/offload`),
    /// the earliest time one of them can.
    wake: Option<Ticks>,
}

impl GroupState {
    /// The state of a group of `dp` ranks whose steps `model` prices.
    pub fn new(dp: u32, model: &dyn StepTimeModel) -> GroupState {
        let dummy = model.step_time(&StepBatch {
            num_seqs: 1,
            num_decode_seqs: 1,
            decode_ctx_sum: 0,
            prefills: &[],
            num_prefill_tokens: 0,
            prefill_ctx_sum: 0,
            prefill_attn_pairs: 0,
            num_tokens: 1,
            decode_ctx_max: 0,
        });
        GroupState {
            in_flight_end: None,
            now: Ticks::ZERO,
            dummy: Ticks(dummy.0.max(1)),
            own: vec![Ticks::ZERO; dp as usize],
            steps: 0,
            wake: None,
        }
    }

    /// The dummy step's duration.
    pub fn dummy_step(&self) -> Ticks {
        self.dummy
    }

    /// Per rank, its own duration in the group step in flight or last run (0 = dummy).
    pub fn own_durations(&self) -> &[Ticks] {
        &self.own
    }

    /// Group steps started so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }
}

/// One replica's DP ranks driven in lockstep (borrowing the engines and their group state).
pub struct LockstepGroup<'a, 'm> {
    state: &'a mut GroupState,
    ranks: &'a mut [Engine<'m>],
}

impl<'a, 'm> LockstepGroup<'a, 'm> {
    pub fn new(state: &'a mut GroupState, ranks: &'a mut [Engine<'m>]) -> LockstepGroup<'a, 'm> {
        debug_assert_eq!(state.own.len(), ranks.len());
        LockstepGroup { state, ranks }
    }

    /// Submits a request to DP rank `rank` at `t`; it is scheduled from the next group step.
    pub fn submit(
        &mut self,
        rank: usize,
        req: Request,
        t: Ticks,
        obs: &mut dyn Observer,
    ) -> Result<(), RejectReason> {
        if self.state.in_flight_end.is_none() && t > self.state.now {
            self.state.now = t;
        }
        // New work may be schedulable at once (as `Engine::submit` clears its own wake-up).
        self.state.wake = None;
        self.ranks[rank].submit(req, t, obs)
    }

    /// Submits a request whose KV was transferred in (`Engine::submit_transferred`, a
    /// disaggregated decode rank) to DP rank `rank` at `t`; it is scheduled from the next group
    /// step.
    pub fn submit_transferred(
        &mut self,
        rank: usize,
        req: Request,
        t: Ticks,
        reserved: u64,
        obs: &mut dyn Observer,
    ) -> Result<(), RejectReason> {
        if self.state.in_flight_end.is_none() && t > self.state.now {
            self.state.now = t;
        }
        self.state.wake = None;
        self.ranks[rank].submit_transferred(req, t, reserved, obs)
    }

    fn has_work(e: &Engine) -> bool {
        e.num_waiting() > 0 || e.num_running() > 0
    }

    /// The group's next event: the end of the group step in flight, or now when a rank has
    /// work; `None` when every rank is idle and empty.
    pub fn next_event_time(&self) -> Option<Ticks> {
        if let Some(end) = self.state.in_flight_end {
            return Some(end);
        }
        let now = self
            .state
            .wake
            .map_or(self.state.now, |w| w.max(self.state.now));
        self.ranks.iter().any(Self::has_work).then_some(now)
    }

    /// Completes the group step in flight (every rank's step ends at its end), or starts the
    /// next one.
    pub fn process_next_event(&mut self, obs: &mut dyn Observer) -> Result<(), SimError> {
        if let Some(end) = self.state.in_flight_end.take() {
            for e in self.ranks.iter_mut() {
                if e.step_end().is_some() {
                    e.process_next_event(obs)?;
                }
            }
            self.state.now = end;
            return Ok(());
        }
        let now = match self.state.wake.take() {
            Some(w) => w.max(self.state.now),
            None => self.state.now,
        };
        self.state.now = now;
        let mut longest: Option<Ticks> = None;
        let mut dummies = false;
        for (i, e) in self.ranks.iter_mut().enumerate() {
            self.state.own[i] = Ticks::ZERO;
            if !Self::has_work(e) {
                dummies = true;
                continue;
            }
            e.idle_until(now);
            e.process_next_event(obs)?;
            match e.step_end() {
                Some(end) => {
                    let d = Ticks(end.0.saturating_sub(now.0));
                    self.state.own[i] = d;
                    longest = Some(longest.map_or(d, |l| l.max(d)));
                }
                None => dummies = true,
            }
        }
        let Some(mut d) = longest else {
            // No rank scheduled anything (with work: only KV loads in flight): the group waits
            // for the earliest rank that can.
            if let Some(e) = self.ranks.iter().find(|e| Self::has_work(e)) {
                self.state.wake = self
                    .ranks
                    .iter()
                    .filter_map(|e| e.next_event_time())
                    .filter(|&t| t > now)
                    .min();
                if self.state.wake.is_none() {
                    return Err(SimError::Stalled {
                        engine: e.index(),
                        t_ns: now.0,
                        waiting: e.num_waiting() as u32,
                    });
                }
            }
            return Ok(());
        };
        if dummies {
            d = d.max(self.state.dummy);
        }
        let end = Ticks(now.0.saturating_add(d.0));
        for e in self.ranks.iter_mut() {
            e.extend_step_to(end);
        }
        self.state.in_flight_end = Some(end);
        self.state.steps += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineConfig, KvFootprint, LinearStepTime, StepRecord};

    fn cfg() -> EngineConfig {
        EngineConfig {
            max_num_seqs: 64,
            max_num_batched_tokens: 2048,
            block_size: 16,
            num_gpu_blocks: 4096,
            max_model_len: 8192,
            enable_prefix_caching: true,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            mamba_align: false,
            v0_prefill_first: false,
            num_scheduler_steps: 1,
            kv: KvFootprint::uniform(),
            spec: None,
            offload: None,
        }
    }

    #[derive(Default)]
    struct Steps(Vec<StepRecord>);
    impl Observer for Steps {
        fn on_step(&mut self, s: &StepRecord) {
            self.0.push(*s)
        }
    }

    #[test]
    fn the_slowest_rank_sets_every_step_and_idle_ranks_wait() {
        let model = LinearStepTime {
            per_step_ns: 1000.0,
            per_token_ns: 10.0,
            per_ctx_token_ns: 0.0,
        };
        let mut engines: Vec<Engine> = (0..2)
            .map(|i| Engine::new(i, cfg(), &model).unwrap())
            .collect();
        let mut st = GroupState::new(2, &model);
        let mut obs = Steps::default();
        // Rank 0: a long prompt; rank 1: a short one arriving later.
        {
            let mut g = LockstepGroup::new(&mut st, &mut engines);
            g.submit(0, Request::unique(1, Ticks(0), 1500, 4), Ticks(0), &mut obs)
                .unwrap();
        }
        let mut t = Ticks(0);
        let mut submitted = false;
        loop {
            let mut g = LockstepGroup::new(&mut st, &mut engines);
            let Some(next) = g.next_event_time() else {
                break;
            };
            assert!(next >= t, "time went back");
            t = next;
            if !submitted && t > Ticks(0) {
                g.submit(1, Request::unique(2, t, 10, 20), t, &mut obs)
                    .unwrap();
                submitted = true;
            }
            let was_idle = g.state.in_flight_end.is_none();
            g.process_next_event(&mut obs).unwrap();
            if let (true, Some(end)) = (was_idle, g.state.in_flight_end) {
                let own = g.state.own.clone();
                let max = own.iter().copied().max().unwrap();
                let want = if own.contains(&Ticks::ZERO) {
                    max.max(g.state.dummy)
                } else {
                    max
                };
                assert_eq!(end.0 - t.0, want.0, "group step = max of its ranks'");
            }
        }
        // Both requests finished; every step record of a group step has the group's bounds.
        let (_, f0, _, _) = engines[0].counters();
        let (_, f1, _, _) = engines[1].counters();
        assert_eq!((f0, f1), (1, 1));
        for a in &obs.0 {
            for b in &obs.0 {
                if a.start == b.start {
                    assert_eq!(a.end, b.end);
                }
            }
        }
        // Rank 1's first step waited for rank 0's long prefill to finish.
        let first1 = obs.0.iter().find(|s| s.engine == 1).unwrap();
        let first0 = obs.0.iter().find(|s| s.engine == 0).unwrap();
        assert!(first1.start >= first0.end);
    }
}
