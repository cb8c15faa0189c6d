//! Deployments as topologies: the scenario's `topology` section (version 2), its validated form
//! ([`TopologySpec`]: replicas per pool and the router), and the [`Simulation`] that runs a plan
//! of pools of engines behind routers, with one API-server front-end per replica.
//!
//! Boundaries: the engine (`engine/`) knows nothing of routing, replicas or pools; this module
//! drives engines through their public API (`submit`, `next_event_time`, `process_next_event`)
//! and observes them. `sweep.rs` runs levels and calls [`Simulation`]. Formulas and constants:
//! `docs/topology.md`.
//!
//! Architecture invariant: the cost of one event does not grow with the number of engines or
//! replicas (indexed heaps for every event source, ordered sets for router state, no scans).

mod disagg;
mod guard;
mod heap;
pub mod lockstep;
mod plan;
pub mod pools;
pub mod router;
mod sim;
pub mod transfer;

pub use disagg::{run_disagg_level_logged, DisaggPlan, HandoffLog, PoolResult, TransferStats};
pub use heap::IndexedHeap;
pub use lockstep::{GroupState, LockstepGroup};
pub use plan::{PlanPool, ReplicaResult, SimPlan, TopologyLevel};
pub use pools::{RawKvTransfer, RawPool};
pub use router::{parse_router, EngineCacheInfo, EppWeights, RouterPolicy, RouterSpec};
pub use sim::{earliest, run_plan_level, Source};
pub use transfer::{KvPath, KvTransferModel, TransferBreakdown};

use serde::{Deserialize, Serialize};

/// The most engines (DP ranks over all replicas and pools) one simulation holds. A stated limit:
/// a scenario above it is refused with this number in the message (no silent cap).
pub const MAX_ENGINES: u32 = 65_536;

/// llm-d's metrics refresh interval (`RefreshMetricsInterval`, default 50 ms; gateway-api
/// inference extension `pkg/epp` datastore flags).
pub const DEFAULT_REFRESH_INTERVAL_MS: f64 = 50.0;

/// The `topology` section of a scenario (version 2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    /// Replicas of the aggregated deployment (each `tp x dp` GPUs, its own API server).
    /// Default: `num_gpus / (tp x dp)`, one replica when `num_gpus` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// The router in front of the replicas (default round-robin); with `prefill`/`decode`
    /// pools, the router in front of the prefill pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RawRouter>,
    /// Disaggregated serving: the prefill pool (with `decode`; docs/topology.md,
    /// "Disaggregated prefill/decode").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<RawPool>,
    /// Disaggregated serving: the decode pool (with `prefill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<RawPool>,
    /// Disaggregated serving: the KV transfer between the pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_transfer: Option<RawKvTransfer>,
}

/// The router as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouter {
    /// `round_robin` (default), `least_requests` or `llm_d`.
    #[serde(default)]
    pub policy: RouterPolicy,
    /// llm-d scorer weights by name; absent: the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<EppWeights>,
    /// llm-d weight preset: `default` (queue 2, kv-cache 2, prefix 3) or `precise-prefix`
    /// (prefix 2, kv-cache 1, queue 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// How often the router refreshes its view of the replicas' queues and KV use (ms,
    /// default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval_ms: Option<f64>,
    /// Saturation guard: at most this many outstanding requests per replica; above it requests
    /// wait at the router (default: no guard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_outstanding_per_replica: Option<u32>,
    /// Tokens per block of the router's approximate prefix index (default: llm-d's auto-tune,
    /// the engines' block size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_block_tokens: Option<u32>,
    /// Blocks the approximate prefix index remembers per replica, LRU (default: llm-d's
    /// auto-tune, the engines' `num_gpu_blocks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_lru_blocks_per_replica: Option<u64>,
}

/// A topology field at fault: its JSON path under `topology`, the value, the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`topology.{field}` = {value} is invalid: {fix}")]
pub struct TopologyError {
    pub field: String,
    pub value: String,
    pub fix: String,
}

fn terr(field: &str, value: impl ToString, fix: impl Into<String>) -> TopologyError {
    TopologyError {
        field: field.into(),
        value: value.to_string(),
        fix: fix.into(),
    }
}

/// The validated topology of an aggregated deployment.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologySpec {
    pub replicas: u32,
    pub router: RouterSpec,
}

impl RawTopology {
    /// Validates against the deployment's replica count from `num_gpus` (`None` when
    /// `num_gpus` was not given).
    pub fn validate(
        &self,
        replicas_from_gpus: Option<u32>,
        dp: u32,
    ) -> Result<TopologySpec, TopologyError> {
        let replicas = match (self.replicas, replicas_from_gpus) {
            (Some(0), _) => return Err(terr("replicas", 0, "must be at least 1")),
            (Some(r), Some(g)) if r != g => {
                return Err(terr(
                    "replicas",
                    r,
                    format!("num_gpus gives {g} replicas; drop num_gpus (it is replicas x tp x dp) or make them agree"),
                ))
            }
            (Some(r), _) => r,
            (None, g) => g.unwrap_or(1),
        };
        let engines = replicas as u64 * dp.max(1) as u64;
        if engines > MAX_ENGINES as u64 {
            return Err(terr(
                "replicas",
                replicas,
                format!("{replicas} replicas x dp {dp} = {engines} engines, above the simulator's limit of {MAX_ENGINES} engines; use fewer replicas"),
            ));
        }
        let router = RouterSpec::from_raw(self.router.as_ref())?;
        Ok(TopologySpec { replicas, router })
    }
}
