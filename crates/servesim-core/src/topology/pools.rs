//! The scenario's disaggregated pools as written (`topology.prefill`, `topology.decode`,
//! `topology.kv_transfer`), and the single-pool scenario each pool resolves as: the scenario with
//! the pool's GPU, parallelism, replica count and engine overrides, so every pool gets its own
//! capacity report and step-time model from the one `Scenario::resolve` path
//! (docs/topology.md, "Disaggregated prefill/decode").

use super::transfer::KvPath;
use super::{RawRouter, RawTopology};
use crate::deploy::RawEngineSettings;
use crate::scenario::{GpuRef, Scenario};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One pool of a disaggregated deployment. Absent fields take the scenario's top-level value
/// (`gpu`, `tp`, `dp`, `ep`, `engine`); `engine` overrides the top-level engine settings field
/// by field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<u32>,
    /// Workers (replicas) in the pool, each `tp x dp` GPUs with its own API server (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Engine settings of this pool's workers over the top-level `engine` (e.g. the prefill
    /// worker's own `max_num_batched_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<RawEngineSettings>,
    /// Decode pool only: the router that picks the decode worker (default round-robin; the
    /// prefill pool's router is `topology.router`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RawRouter>,
}

/// The KV transfer between the pools (vLLM `NixlConnector`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKvTransfer {
    /// `auto` (default: NVLink inside one NVLink domain, else RDMA), `nvlink` or `rdma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<KvPath>,
    /// RDMA rate per GPU, Gb/s (default 400: one ConnectX-7 per GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_gbps_per_gpu: Option<f64>,
    /// NVLink rate per GPU, GB/s (default: the GPU's unidirectional scale-up bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gb_s: Option<f64>,
    /// Fixed latency per transfer, ms (default 0.05, the peer BLIS's value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

/// Which pool of a disaggregated deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolRole {
    Prefill,
    Decode,
}

impl PoolRole {
    pub fn name(self) -> &'static str {
        match self {
            PoolRole::Prefill => "prefill",
            PoolRole::Decode => "decode",
        }
    }
}

/// `top` with `over`'s members replacing its own (one level deep: engine settings are flat).
fn merge_engine(top: &RawEngineSettings, over: Option<&RawEngineSettings>) -> RawEngineSettings {
    let Some(over) = over else {
        return top.clone();
    };
    let (Ok(Value::Object(mut a)), Ok(Value::Object(b))) =
        (serde_json::to_value(top), serde_json::to_value(over))
    else {
        return top.clone();
    };
    for (k, v) in b {
        if !v.is_null() {
            a.insert(k, v);
        }
    }
    serde_json::from_value(Value::Object(a)).unwrap_or_else(|_| top.clone())
}

/// The single-pool scenario pool `role` of `s` resolves as: its GPU, TP/DP/EP, replicas and
/// merged engine settings, no `num_gpus`, an aggregated topology with the pool's replicas and
/// router. The prefill pool runs no drafter (its requests produce one token; the recipe's NIXL
/// handshake note, issue 10): its `speculative_config` is dropped.
pub fn pool_scenario(s: &Scenario, pool: &RawPool, role: PoolRole, router: Option<RawRouter>) -> Scenario {
    let mut p = s.clone();
    if let Some(g) = &pool.gpu {
        p.gpu = g.clone();
    }
    p.tp = pool.tp.unwrap_or(s.tp);
    p.dp = pool.dp.unwrap_or(s.dp);
    p.ep = pool.ep.unwrap_or(s.ep);
    p.num_gpus = None;
    p.engine = merge_engine(&s.engine, pool.engine.as_ref());
    if role == PoolRole::Prefill {
        p.engine.speculative_config = None;
        p.engine.speculative_acceptance = None;
    }
    p.topology = Some(RawTopology {
        replicas: Some(pool.replicas.unwrap_or(1)),
        router,
        ..RawTopology::default()
    });
    p
}
