//! Several engine instances on one clock behind a router: DP ranks of one deployment (vLLM
//! data-parallel attention: each rank has its own scheduler and KV cache) or independent replicas.
//!
//! Routing follows vLLM's internal DP load balancer (`vllm/v1/engine/core_client.py`,
//! `DPLBAsyncMPClient.get_core_engine_for_request`): the engine with the lowest
//! `4 * waiting + running` gets the request, ties to the lowest index. vLLM computes this score
//! from slightly stale stats published by a coordinator; we use the exact current counts.
//! Approximation: DP ranks step independently (vLLM keeps MoE DP ranks in lock-step with dummy
//! batches; the integrator's step-time model accounts for the synchronisation if needed).

use super::{Engine, EngineConfig, Observer, RejectReason, Request, SimError, StepTimeModel};
use crate::units::Ticks;

pub struct Cluster<'m> {
    engines: Vec<Engine<'m>>,
}

impl<'m> Cluster<'m> {
    /// `n` identical engines sharing one step-time model.
    pub fn new(
        n: u32,
        cfg: &EngineConfig,
        model: &'m dyn StepTimeModel,
    ) -> Result<Cluster<'m>, SimError> {
        let n = n.max(1);
        let engines = (0..n)
            .map(|i| Engine::new(i, cfg.clone(), model))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster { engines })
    }

    pub fn engines(&self) -> &[Engine<'m>] {
        &self.engines
    }

    /// The engine the router picks for the next request.
    pub fn route(&self) -> usize {
        let mut best = 0;
        let mut best_score = u64::MAX;
        for (i, e) in self.engines.iter().enumerate() {
            let score = 4 * e.num_waiting() as u64 + e.num_running() as u64;
            if score < best_score {
                best = i;
                best_score = score;
            }
        }
        best
    }

    /// Routes and submits a request arriving at `t`.
    pub fn submit(
        &mut self,
        req: Request,
        t: Ticks,
        obs: &mut dyn Observer,
    ) -> Result<(), RejectReason> {
        let i = self.route();
        self.engines[i].submit(req, t, obs)
    }

    /// The earliest engine event and its engine (ties: lowest index).
    pub fn next_event(&self) -> Option<(Ticks, usize)> {
        let mut best: Option<(Ticks, usize)> = None;
        for (i, e) in self.engines.iter().enumerate() {
            if let Some(t) = e.next_event_time() {
                if best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, i));
                }
            }
        }
        best
    }

    pub fn process_engine_event(
        &mut self,
        i: usize,
        obs: &mut dyn Observer,
    ) -> Result<(), SimError> {
        self.engines[i].process_next_event(obs)
    }

    /// Requests admitted or waiting, over all engines.
    pub fn in_flight(&self) -> u64 {
        self.engines
            .iter()
            .map(|e| (e.num_waiting() + e.num_running()) as u64)
            .sum()
    }

    pub fn kv_used_blocks(&self) -> u64 {
        self.engines.iter().map(|e| e.kv_used_blocks()).sum()
    }
}
