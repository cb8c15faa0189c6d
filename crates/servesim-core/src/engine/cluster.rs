//! vLLM's internal data-parallel load balancer: which DP rank of one replica (`vllm serve
//! --data-parallel-size N`: one API server, N engine cores, each with its own scheduler and KV
//! cache) gets a request. Replicas, routers and pools live in `topology/`, not here.
//!
//! Routing follows `vllm/v1/engine/core_client.py`, `DPLBAsyncMPClient.get_core_engine_for_request`:
//! the rank with the lowest `4 * waiting + running` gets the request, ties to the lowest rank.
//! vLLM computes this score from slightly stale stats published by a coordinator; we use the
//! exact current counts. The scan is over the DP ranks of one replica only.
//! Stepping: independent ranks, or lockstep for MoE DP + EP (`topology/lockstep.rs`,
//! docs/topology.md "DP + EP").

use super::Engine;

/// The DP rank (index into `ranks`) that gets the next request.
pub fn dp_route(ranks: &[Engine<'_>]) -> usize {
    let mut best = 0;
    let mut best_score = u64::MAX;
    for (i, e) in ranks.iter().enumerate() {
        let score = 4 * e.num_waiting() as u64 + e.num_running() as u64;
        if score < best_score {
            best = i;
            best_score = score;
        }
    }
    best
}
