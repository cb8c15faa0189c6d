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
pub fn pool_scenario(
    s: &Scenario,
    pool: &RawPool,
    role: PoolRole,
    router: Option<RawRouter>,
) -> Scenario {
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

/// The transfer model between the resolved pools: bytes per token from the decode pool's KV
/// spec (its TP, dtype, block size), the NVLink domain when both pools run the same GPU type,
/// the per-GPU rates and the latency (defaults and sources: `transfer.rs`).
pub fn transfer_model(
    raw: Option<&RawKvTransfer>,
    pre: &crate::deploy::Deployment,
    dec: &crate::deploy::Deployment,
    prefill_replicas: u32,
) -> Result<super::KvTransferModel, crate::scenario::ScenarioError> {
    use super::transfer::{DEFAULT_RDMA_GBPS_PER_GPU, DEFAULT_TRANSFER_LATENCY_MS};
    use crate::scenario::ScenarioError;
    let bad = |field: &str, v: f64, fix: &str| ScenarioError::Invalid {
        field: format!("topology.kv_transfer.{field}"),
        value: crate::bounds::fmt_num(v),
        fix: fix.into(),
    };
    let raw = raw.cloned().unwrap_or_default();
    let gbps = raw.rdma_gbps_per_gpu.unwrap_or(DEFAULT_RDMA_GBPS_PER_GPU);
    if !(gbps.is_finite() && gbps > 0.0 && gbps <= 1e9) {
        return Err(bad(
            "rdma_gbps_per_gpu",
            gbps,
            "give the per-GPU RDMA rate in Gb/s, above 0 and at most 1e9 (e.g. 400 for one ConnectX-7 per GPU)",
        ));
    }
    let same_gpu = pre.gpu.name == dec.gpu.name;
    let nv_default = pre
        .gpu
        .scaleup_unidir_bytes_s
        .min(dec.gpu.scaleup_unidir_bytes_s)
        / 1e9;
    let nv = raw.nvlink_gb_s.unwrap_or(nv_default);
    if !(nv.is_finite() && nv > 0.0 && nv <= 1e9) {
        return Err(bad(
            "nvlink_gb_s",
            nv,
            "give the per-GPU NVLink rate in GB/s, above 0 and at most 1e9 (absent: the GPU's unidirectional scale-up bandwidth)",
        ));
    }
    let lat = raw.latency_ms.unwrap_or(DEFAULT_TRANSFER_LATENCY_MS);
    if !(lat.is_finite() && (0.0..=60_000.0).contains(&lat)) {
        return Err(bad(
            "latency_ms",
            lat,
            "give the per-transfer latency in ms, from 0 to 60000",
        ));
    }
    let path = raw.path.unwrap_or_default();
    if path == KvPath::Nvlink && !same_gpu {
        return Err(ScenarioError::Invalid {
            field: "topology.kv_transfer.path".into(),
            value: "nvlink".into(),
            fix: format!(
                "the pools run different GPUs ({} and {}), which share no NVLink domain; use \"rdma\" or \"auto\"",
                pre.gpu.name, dec.gpu.name
            ),
        });
    }
    let spec = dec
        .model
        .kv_cache_spec(dec.kv_cache_dtype, dec.par.tp, dec.engine.block_size)
        .map_err(ScenarioError::Model)?;
    Ok(super::KvTransferModel {
        prefill_tp: pre.par.tp.max(1),
        decode_tp: dec.par.tp.max(1),
        recv_bytes_per_token: spec.bytes_per_token(),
        recv_fixed_bytes: spec.per_request_fixed_bytes,
        path,
        nvlink_domain: if same_gpu {
            pre.gpu.scaleup_domain.min(dec.gpu.scaleup_domain)
        } else {
            0
        },
        prefill_gpus: prefill_replicas as u64 * pre.par.tp.max(1) as u64 * pre.par.dp.max(1) as u64,
        nvlink_bytes_s: nv * 1e9,
        rdma_bytes_s: gbps / 8.0 * 1e9,
        latency: crate::units::Ticks::from_secs_f64(lat / 1e3),
    })
}
