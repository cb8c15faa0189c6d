//! The plan a level's simulation runs (pools of replicas, the routers in front of them, the
//! handoff between pools) and the per-replica / per-level topology results it reports
//! (docs/topology.md).

use super::router::{EngineCacheInfo, RouterSpec};
use super::MAX_ENGINES;
use crate::engine::{EngineConfig, SimError, StepTimeModel};
use crate::sweep::{FrontEnd, SweepError};
use serde::{Deserialize, Serialize};

/// One pool of identical replicas.
#[derive(Clone)]
pub struct PlanPool<'m> {
    /// `aggregated` (prefill and decode in one engine).
    pub name: String,
    /// One engine (= one DP rank) of a replica.
    pub cfg: EngineConfig,
    pub model: &'m dyn StepTimeModel,
    pub replicas: u32,
    /// DP ranks (engines) per replica.
    pub dp: u32,
    /// Each replica's API server.
    pub frontend: FrontEnd,
    /// The DP ranks of a replica step in lockstep (vLLM DP + EP for MoE; `lockstep.rs`).
    pub lockstep: bool,
}

/// What a simulation runs: its pools and the router in front of them.
#[derive(Clone)]
pub struct SimPlan<'m> {
    pub pools: Vec<PlanPool<'m>>,
    pub router: RouterSpec,
    /// Disaggregated serving: `pools` are `[prefill, decode]`, run by `disagg.rs`.
    pub disagg: Option<super::DisaggPlan>,
    /// Let engines advance pure-decode steps as one event where the simulation allows it
    /// (engine/sched_run.rs; on by default). Results are identical either way: off is for the
    /// differential tests and benchmarks that compare the two.
    pub decode_runs: bool,
}

impl<'m> SimPlan<'m> {
    /// One replica of `engines` DP ranks behind one front-end (the plan of a version-1 scenario
    /// with one replica, and of the engine-level tests).
    pub fn single(
        cfg: &EngineConfig,
        model: &'m dyn StepTimeModel,
        engines: u32,
        frontend: FrontEnd,
    ) -> SimPlan<'m> {
        SimPlan {
            pools: vec![PlanPool {
                name: "aggregated".into(),
                cfg: cfg.clone(),
                model,
                replicas: 1,
                dp: engines.max(1),
                frontend,
                lockstep: false,
            }],
            router: RouterSpec::default(),
            disagg: None,
            decode_runs: true,
        }
    }

    pub fn total_engines(&self) -> u64 {
        self.pools
            .iter()
            .map(|p| p.replicas as u64 * p.dp as u64)
            .sum()
    }

    pub fn total_replicas(&self) -> u64 {
        self.pools.iter().map(|p| p.replicas as u64).sum()
    }

    /// Checks the engine settings and the stated engine limit.
    pub fn validate(&self) -> Result<(), SweepError> {
        if self.pools.is_empty() {
            return Err(SweepError::Spec {
                field: "topology".into(),
                problem: "a plan needs at least one pool".into(),
            });
        }
        for p in &self.pools {
            p.cfg.validate().map_err(SimError::from)?;
        }
        let n = self.total_engines();
        if n > MAX_ENGINES as u64 {
            return Err(SweepError::Spec {
                field: "engines".into(),
                problem: format!(
                    "{n} engines exceed the simulator's limit of {MAX_ENGINES}; use fewer replicas or DP ranks"
                ),
            });
        }
        Ok(())
    }
}

/// One replica's share of a level (routing counts over the whole run; the rest over the
/// measurement window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaResult {
    pub pool: String,
    pub replica: u32,
    /// Requests the router sent to this replica during the whole run.
    pub routed_requests: u64,
    /// Requests that finished on it inside the window.
    pub completed_requests: u64,
    pub output_tokens_per_s: f64,
    /// Time-averaged KV use over the window, mean over its DP ranks.
    pub kv_utilization_mean: f64,
    /// Prompt tokens found in its prefix cache / prompt tokens looked up, at admissions in the
    /// window.
    pub prefix_cache_hit_rate: Option<f64>,
}

/// Per-replica results of one level (reported when a plan has more than one replica).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologyLevel {
    /// The level value (concurrency or request rate).
    pub level: f64,
    pub router: String,
    pub replicas: Vec<ReplicaResult>,
    /// Load imbalance: max over replicas of output tokens/s divided by their mean (1 = even;
    /// `null` when nothing was produced).
    pub imbalance: Option<f64>,
    /// Disaggregated plans: per-pool results (prefill, decode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<super::PoolResult>,
    /// Disaggregated plans: the KV transfers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<super::TransferStats>,
}

/// What a pool's engines report to the router's auto-tune (vLLM `cache_config_info`).
pub(super) fn cache_info(cfg: &EngineConfig) -> EngineCacheInfo {
    EngineCacheInfo {
        block_size: cfg.block_size,
        num_gpu_blocks: cfg.num_gpu_blocks,
    }
}
