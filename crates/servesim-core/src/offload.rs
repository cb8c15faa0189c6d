//! vLLM's `--kv-transfer-config` JSON ([`RawKvTransferConfig`]) validated into
//! [`KvTransferSettings`]: the CPU KV offload tier (`OffloadingConnector`,
//! `SimpleCPUOffloadConnector`), alone or stacked with the P/D transfer connector
//! (`NixlConnector`) under `MultiConnector`; the host link that prices its loads and stores
//! ([`HostLink`]); and the tier's size per rank ([`CpuTierSize`]). The engine's tier is
//! `engine/offload.rs`. Rules and the vLLM files they come from: docs/engine.md ("CPU KV offload
//! tier"); link rates and sources: docs/step-time.md ("Host link").

use crate::deploy::DeployError;
use serde::{Deserialize, Serialize};

/// vLLM's `SimpleCPUOffloadConnector` default `cpu_bytes_to_use`: 8 GiB
/// (`DEFAULT_CPU_CAPACITY_BYTES = 8 * (1024**3)`, simple_cpu_offload_connector.py).
pub const SIMPLE_DEFAULT_CPU_BYTES: u64 = 8 << 30;
/// Largest `cpu_bytes_to_use` accepted: 64 TiB (far above any host's memory; keeps sizes exact).
pub const MAX_CPU_BYTES: u64 = 64 << 40;
/// Largest `blocks_per_chunk` accepted (vLLM sets no cap; public configs use 1-16).
pub const MAX_BLOCKS_PER_CHUNK: u64 = 1024;
/// Largest `store_threshold` accepted (vLLM sets no cap).
pub const MAX_STORE_THRESHOLD: u64 = 1_000;
/// vLLM's default `max_tracker_size` of the store-threshold filter (cpu/spec.py).
pub const DEFAULT_MAX_TRACKER_SIZE: u64 = 64_000;
/// Largest `max_tracker_size` accepted.
pub const MAX_TRACKER_SIZE: u64 = 10_000_000;

/// `kv_connector_extra_config` of the offload connectors: the keys vLLM reads
/// (`kv_offload/cpu/spec.py`, `offloading/config.py`, `simple_cpu_offload_connector.py`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOffloadExtra {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_bytes_to_use: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_chunk: Option<i64>,
    /// Tokens per offloaded chunk (the alternative to `blocks_per_chunk`; a multiple of the
    /// GPU block size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_threshold: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tracker_size: Option<i64>,
    /// Only `lru` is modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_policy: Option<String>,
    /// SimpleCPUOffloadConnector: lazy (default) or eager stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lazy_offload: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_lookahead_blocks: Option<i64>,
    /// `CPUOffloadingSpec` (the default) is the only spec modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_name: Option<String>,
    /// MultiConnector: the stacked connectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectors: Option<Vec<RawKvTransferConfig>>,
    /// NixlConnector's own keys (accepted; the P/D transfer is modelled by the topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<String>>,
}

/// vLLM's `KVTransferConfig` as given to `--kv-transfer-config` (vllm/config/kv_transfer.py).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKvTransferConfig {
    pub kv_connector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_connector_extra_config: Option<RawOffloadExtra>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_buffer_device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_load_failure_policy: Option<String>,
}

/// Which offload connector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffloadConnector {
    /// `OffloadingConnector` with `CPUOffloadingSpec`: `cpu_bytes_to_use` is the budget of the
    /// whole engine (all `world_size` ranks).
    Offloading,
    /// `SimpleCPUOffloadConnector`: `cpu_bytes_to_use` per rank (scaled from the GPU pool).
    SimpleCpu,
}

impl OffloadConnector {
    pub fn name(self) -> &'static str {
        match self {
            OffloadConnector::Offloading => "OffloadingConnector",
            OffloadConnector::SimpleCpu => "SimpleCPUOffloadConnector",
        }
    }
}

/// A validated CPU offload tier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OffloadSettings {
    pub connector: OffloadConnector,
    pub cpu_bytes_to_use: u64,
    /// GPU blocks per offloaded chunk (1 for SimpleCPUOffloadConnector).
    pub blocks_per_chunk: u64,
    /// 0 or 1 = no filter; >= 2: a chunk is stored only after this many lookups.
    pub store_threshold: u64,
    pub max_tracker_size: u64,
}

/// The validated `--kv-transfer-config`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvTransferSettings {
    /// The CPU tier (`None`: no offload connector, or SimpleCPUOffloadConnector disabled
    /// because prefix caching is off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadSettings>,
    /// A NixlConnector is stacked (the P/D KV transfer, modelled by the topology).
    pub nixl: bool,
    pub notes: Vec<String>,
    /// The JSON as given (reproduces the setting).
    #[serde(skip)]
    pub raw: RawKvTransferConfig,
}

fn invalid(field: &'static str, value: impl ToString, fix: impl Into<String>) -> DeployError {
    DeployError::InvalidField {
        field,
        value: value.to_string(),
        fix: fix.into(),
    }
}

fn bounded(
    field: &'static str,
    v: Option<i64>,
    lo: u64,
    hi: u64,
) -> Result<Option<u64>, DeployError> {
    match v {
        None => Ok(None),
        Some(x) if x >= lo as i64 && (x as u64) <= hi => Ok(Some(x as u64)),
        Some(x) => Err(invalid(
            field,
            x,
            format!("must be an integer in {lo}..={hi}"),
        )),
    }
}

/// Validates a `--kv-transfer-config` (`block_size` = the GPU block size, tokens;
/// `prefix_caching` = `--enable-prefix-caching`).
pub fn resolve(
    raw: &RawKvTransferConfig,
    block_size: u32,
    prefix_caching: bool,
) -> Result<KvTransferSettings, DeployError> {
    let mut out = KvTransferSettings {
        offload: None,
        nixl: false,
        notes: Vec::new(),
        raw: raw.clone(),
    };
    walk(raw, block_size, prefix_caching, 0, &mut out)?;
    Ok(out)
}

fn walk(
    raw: &RawKvTransferConfig,
    block_size: u32,
    prefix_caching: bool,
    depth: u32,
    out: &mut KvTransferSettings,
) -> Result<(), DeployError> {
    if let Some(r) = &raw.kv_role {
        if !matches!(r.as_str(), "kv_both" | "kv_producer" | "kv_consumer") {
            return Err(invalid(
                "kv_transfer_config.kv_role",
                r,
                "use kv_both, kv_producer or kv_consumer",
            ));
        }
    }
    let name = raw.kv_connector.as_deref().ok_or_else(|| {
        invalid(
            "kv_transfer_config.kv_connector",
            "missing",
            "name the connector: OffloadingConnector, SimpleCPUOffloadConnector, NixlConnector or MultiConnector",
        )
    })?;
    let extra = raw.kv_connector_extra_config.clone().unwrap_or_default();
    let offload_only = |field: &'static str, set: bool| -> Result<(), DeployError> {
        if set {
            Err(invalid(
                field,
                "set",
                format!("{name} does not read this key; remove it"),
            ))
        } else {
            Ok(())
        }
    };
    match name {
        "MultiConnector" => {
            if depth > 0 {
                return Err(invalid(
                    "kv_transfer_config.kv_connector_extra_config.connectors",
                    "MultiConnector",
                    "a MultiConnector cannot be nested in another",
                ));
            }
            let list = extra.connectors.as_ref().filter(|c| !c.is_empty()).ok_or_else(|| {
                invalid(
                    "kv_transfer_config.kv_connector_extra_config.connectors",
                    "missing",
                    "MultiConnector needs a non-empty `connectors` list",
                )
            })?;
            if list.len() > 4 {
                return Err(invalid(
                    "kv_transfer_config.kv_connector_extra_config.connectors",
                    list.len(),
                    "at most 4 stacked connectors",
                ));
            }
            for c in list {
                walk(c, block_size, prefix_caching, depth + 1, out)?;
            }
            Ok(())
        }
        "NixlConnector" => {
            offload_only(
                "kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use",
                extra.cpu_bytes_to_use.is_some(),
            )?;
            out.nixl = true;
            Ok(())
        }
        "OffloadingConnector" | "SimpleCPUOffloadConnector" => {
            if out.offload.is_some() {
                return Err(invalid(
                    "kv_transfer_config.kv_connector",
                    name,
                    "only one CPU offload connector can be stacked",
                ));
            }
            if extra.connectors.is_some() {
                return Err(invalid(
                    "kv_transfer_config.kv_connector_extra_config.connectors",
                    "set",
                    "only MultiConnector takes `connectors`",
                ));
            }
            if let Some(p) = &extra.eviction_policy {
                if p != "lru" {
                    return Err(invalid(
                        "kv_transfer_config.kv_connector_extra_config.eviction_policy",
                        p,
                        "only vLLM's default `lru` is modelled",
                    ));
                }
            }
            if let Some(s) = &extra.spec_name {
                if s != "CPUOffloadingSpec" {
                    return Err(invalid(
                        "kv_transfer_config.kv_connector_extra_config.spec_name",
                        s,
                        "only the default CPUOffloadingSpec is modelled",
                    ));
                }
            }
            let simple = name == "SimpleCPUOffloadConnector";
            let bytes = match extra.cpu_bytes_to_use {
                None if simple => SIMPLE_DEFAULT_CPU_BYTES,
                None => {
                    return Err(invalid(
                        "kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use",
                        "missing",
                        "OffloadingConnector requires it (vLLM raises \"cpu_bytes_to_use must be specified\"); give bytes, e.g. 107374182400",
                    ))
                }
                Some(b) if b.is_finite() && b >= 1.0 && b <= MAX_CPU_BYTES as f64 => b as u64,
                Some(b) => {
                    return Err(invalid(
                        "kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use",
                        b,
                        format!("give a byte count in 1..={MAX_CPU_BYTES}"),
                    ))
                }
            };
            let bpc = bounded(
                "kv_transfer_config.kv_connector_extra_config.blocks_per_chunk",
                extra.blocks_per_chunk,
                1,
                MAX_BLOCKS_PER_CHUNK,
            )?;
            let chunk_tokens = bounded(
                "kv_transfer_config.kv_connector_extra_config.block_size",
                extra.block_size,
                1,
                MAX_BLOCKS_PER_CHUNK * block_size as u64,
            )?;
            let blocks_per_chunk = match (bpc, chunk_tokens) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "kv_transfer_config.kv_connector_extra_config.block_size",
                        "set with blocks_per_chunk",
                        "specify only one of 'block_size' or 'blocks_per_chunk' (vLLM)",
                    ))
                }
                (Some(b), None) => b,
                (None, Some(t)) => {
                    if t % block_size as u64 != 0 {
                        return Err(invalid(
                            "kv_transfer_config.kv_connector_extra_config.block_size",
                            t,
                            format!("must be a multiple of the GPU block size ({block_size})"),
                        ));
                    }
                    t / block_size as u64
                }
                (None, None) => 1,
            };
            if simple && blocks_per_chunk != 1 {
                return Err(invalid(
                    "kv_transfer_config.kv_connector_extra_config.blocks_per_chunk",
                    blocks_per_chunk,
                    "SimpleCPUOffloadConnector offloads single GPU blocks; use OffloadingConnector for chunks",
                ));
            }
            if !simple {
                offload_only(
                    "kv_transfer_config.kv_connector_extra_config.lazy_offload",
                    extra.lazy_offload.is_some(),
                )?;
                offload_only(
                    "kv_transfer_config.kv_connector_extra_config.min_lookahead_blocks",
                    extra.min_lookahead_blocks.is_some(),
                )?;
            } else {
                offload_only(
                    "kv_transfer_config.kv_connector_extra_config.store_threshold",
                    extra.store_threshold.is_some(),
                )?;
                bounded(
                    "kv_transfer_config.kv_connector_extra_config.min_lookahead_blocks",
                    extra.min_lookahead_blocks,
                    0,
                    1 << 20,
                )?;
            }
            let store_threshold = bounded(
                "kv_transfer_config.kv_connector_extra_config.store_threshold",
                extra.store_threshold,
                0,
                MAX_STORE_THRESHOLD,
            )?
            .unwrap_or(0);
            let max_tracker_size = bounded(
                "kv_transfer_config.kv_connector_extra_config.max_tracker_size",
                extra.max_tracker_size,
                1,
                MAX_TRACKER_SIZE,
            )?
            .unwrap_or(DEFAULT_MAX_TRACKER_SIZE);
            if !prefix_caching {
                if simple {
                    out.notes.push(
                        "SimpleCPUOffloadConnector is disabled without prefix caching (vLLM): no CPU tier".into(),
                    );
                    return Ok(());
                }
                return Err(invalid(
                    "engine.enable_prefix_caching",
                    false,
                    "the simulated OffloadingConnector keys chunks by prefix-cache block hashes; turn prefix caching on",
                ));
            }
            if simple && extra.lazy_offload != Some(false) {
                out.notes.push("SimpleCPUOffloadConnector lazy mode is simulated as eager stores of every full block (docs/engine.md, \"CPU KV offload tier\")".into());
            }
            out.offload = Some(OffloadSettings {
                connector: if simple {
                    OffloadConnector::SimpleCpu
                } else {
                    OffloadConnector::Offloading
                },
                cpu_bytes_to_use: bytes,
                blocks_per_chunk,
                store_threshold,
                max_tracker_size,
            });
            Ok(())
        }
        other => Err(invalid(
            "kv_transfer_config.kv_connector",
            other,
            "simulated connectors: OffloadingConnector, SimpleCPUOffloadConnector, NixlConnector, MultiConnector",
        )),
    }
}

/// Parses the JSON text of `--kv-transfer-config` (unknown keys are errors naming the key).
pub fn parse(json: &str) -> Result<RawKvTransferConfig, String> {
    serde_json::from_str(json).map_err(|e| {
        format!("{e}; give vLLM's JSON, e.g. '{{\"kv_connector\": \"OffloadingConnector\", \"kv_role\": \"kv_both\", \"kv_connector_extra_config\": {{\"cpu_bytes_to_use\": 107374182400, \"blocks_per_chunk\": 4}}}}'")
    })
}

/// The link between a GPU and host memory that carries the tier's loads and stores.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HostLink {
    pub name: &'static str,
    /// Bytes per second per GPU, one direction; loads and stores share it (docs/step-time.md).
    pub bytes_per_s: u64,
    pub source: &'static str,
}

/// PCIe Gen5 x16 as achieved: 52.8 GB/s per direction (link peak 32 GT/s x 16 lanes x
/// 128b/130b = 63.0 GB/s).
pub const PCIE_GEN5_X16: HostLink = HostLink {
    name: "PCIe Gen5 x16",
    bytes_per_s: 52_770_000_000,
    source: "measured: nvbandwidth device_to_host_memcpy_sm on an 8x H100 node, 52.77 GB/s per GPU (https://github.com/NVIDIA/nvbandwidth/issues/24; the same report's host_to_device_memcpy_sm 35.2 GB/s is the anomaly that issue asks about); link peak 63.0 GB/s (PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b)",
};
/// PCIe Gen4 x16 as achieved: 26.0 GB/s per direction (link peak 31.5 GB/s).
pub const PCIE_GEN4_X16: HostLink = HostLink {
    name: "PCIe Gen4 x16",
    bytes_per_s: 26_000_000_000,
    source: "measured: nvbandwidth host_to_device_memcpy_ce 23.9-26.4 GB/s per GPU on PCIe Gen4 x16 (https://github.com/NVIDIA/nvbandwidth/issues/15; A100-SXM4 host_to_device_memcpy_sm 25.13 GB/s, https://github.com/NVIDIA/nvbandwidth/issues/42); link peak 31.5 GB/s (PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b)",
};
/// NVLink-C2C (Grace) as achieved: 346 GB/s host to device (link 450 GB/s per direction).
pub const NVLINK_C2C: HostLink = HostLink {
    name: "NVLink-C2C (Grace)",
    bytes_per_s: 346_000_000_000,
    source: "measured: nvbandwidth host_to_device_memcpy_ce 346 GB/s on GH200 (https://github.com/NVIDIA/nvbandwidth/issues/23); link 900 GB/s total, 450 GB/s per direction (NVIDIA Grace Hopper Superchip Architecture whitepaper)",
};

/// The host memory of the node a catalog GPU ships in, and the GPUs sharing it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HostMemory {
    pub bytes_per_node: u64,
    pub gpus_per_node: u32,
    pub source: &'static str,
}

/// Host memory per node of the systems of the catalog's GPUs where a public system description
/// states it: DGX / HGX H100 and H200 (2 TB: 32 x 64 GB DIMMs per 8-GPU node) and GB200 NVL72 (per
/// 4-GPU compute tray, two Grace CPUs with 480 GB LPDDR5X each). `None` for the others: the
/// scenario states it (`engine.host_memory_gb_per_node`).
pub fn host_memory_for(gpu_id: &str) -> Option<HostMemory> {
    match gpu_id.to_ascii_uppercase().as_str() {
        "H100-SXM" => Some(HostMemory {
            bytes_per_node: 2048 << 30,
            gpus_per_node: 8,
            source: "8x H100-SXM node: host_memory_capacity 2 TB (MLPerf Inference v3.1 system description, https://github.com/mlcommons/inference_results_v3.1/blob/main/closed/Dell/systems/XE9680_H100_SXM_80GBx8_TRT.json); NVIDIA DGX H100: 2 TB system memory",
        }),
        "H200" => Some(HostMemory {
            bytes_per_node: 2048 << 30,
            gpus_per_node: 8,
            source: "8x H200-SXM node: host_memory_capacity 2 TB, 32x 64GB DIMMs (MLPerf Inference v4.1 NVIDIA system description, https://raw.githubusercontent.com/mlcommons/inference_results_v4.1/main/closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json)",
        }),
        "GB200" => Some(HostMemory {
            bytes_per_node: 960_000_000_000,
            gpus_per_node: 4,
            source: "GB200 NVL72 compute tray: 2 GB200 superchips of 1 Grace (480 GB LPDDR5X) + 2 GPUs, 4 GPUs per tray (NVIDIA GB200 NVL72 specifications: 36 Grace CPUs, up to 17 TB LPDDR5X per rack); one MLPerf v6.1 system description (Crusoe) lists 1.87 TB per 4-GPU node, so the tray figure is the conservative one",
        }),
        _ => None,
    }
}

/// The host link of a catalog GPU: NVLink-C2C for Grace superchips (GB200, GB300, GH200),
/// PCIe Gen4 x16 for Ampere, otherwise PCIe Gen5 x16.
pub fn host_link_for(gpu_id: &str, generation: crate::gpu::Generation) -> HostLink {
    let id = gpu_id.to_ascii_uppercase();
    if id.starts_with("GB2") || id.starts_with("GB3") || id.starts_with("GH2") {
        NVLINK_C2C
    } else if matches!(generation, crate::gpu::Generation::Ampere) {
        PCIE_GEN4_X16
    } else {
        PCIE_GEN5_X16
    }
}

/// The CPU tier's size, as vLLM computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuTierSize {
    /// Chunks (of `blocks_per_chunk` GPU blocks) the tier holds.
    pub chunks: u64,
    /// Bytes of one chunk on one rank.
    pub chunk_bytes_per_rank: u64,
    /// Host memory the tier pins per rank (`chunks * chunk_bytes_per_rank`).
    pub host_bytes_per_rank: u64,
}

/// The tier size: `OffloadingConnector`: `chunks = cpu_bytes_to_use // (block_bytes x
/// world_size x blocks_per_chunk)` (kv_offload/cpu/spec.py: `kv_bytes_per_block = page_size x
/// tensors x world_size`); `SimpleCPUOffloadConnector`: `num_cpu_blocks = max(1, num_gpu_blocks
/// x cpu_bytes_to_use // gpu_total_bytes)` per rank (simple_kv_offload/manager.py
/// `_derive_cpu_config`). `unit_bytes` = bytes per rank of one cached block (all full-attention
/// groups), `world_size` = tp x pp of the engine.
pub fn tier_size(s: &OffloadSettings, unit_bytes: u64, world_size: u64) -> CpuTierSize {
    let unit_bytes = unit_bytes.max(1);
    let chunk = unit_bytes.saturating_mul(s.blocks_per_chunk);
    let chunks = match s.connector {
        OffloadConnector::Offloading => {
            s.cpu_bytes_to_use / chunk.saturating_mul(world_size.max(1))
        }
        OffloadConnector::SimpleCpu => (s.cpu_bytes_to_use / unit_bytes).max(1),
    };
    CpuTierSize {
        chunks,
        chunk_bytes_per_rank: chunk,
        host_bytes_per_rank: chunks.saturating_mul(chunk),
    }
}

/// The CPU tier in the capacity report: its size per rank and the host memory it pins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuTierReport {
    pub connector: String,
    pub cpu_bytes_to_use: u64,
    pub blocks_per_chunk: u64,
    /// Chunks, GPU blocks and tokens the tier holds per rank (every rank holds its shard of
    /// every chunk).
    pub chunks: u64,
    pub blocks: u64,
    pub tokens: u64,
    pub host_bytes_per_rank: u64,
    pub chunk_bytes_per_rank: u64,
    /// Ranks of one engine (`world_size` = tp) and GPUs assumed per node.
    pub ranks_per_engine: u32,
    pub gpus_per_node: u32,
    pub gpus_per_node_basis: String,
    /// Host memory the tier pins on one node: `host_bytes_per_rank x gpus_per_node`.
    pub host_bytes_per_node: u64,
    /// The node's host memory (the tier must fit in it): stated
    /// (`engine.host_memory_gb_per_node`) or from the system table ([`host_memory_for`]);
    /// `None` when neither gives it.
    pub host_memory_bytes_per_node: Option<u64>,
    pub host_memory_source: String,
    pub host_link: String,
    pub host_link_gb_s: f64,
    pub host_link_bytes_per_s: u64,
    pub host_link_source: String,
}

/// GPUs per node that share host memory: the system table's ([`host_memory_for`]), else 4 per
/// Grace compute tray (GB200/GB300 NVL72: 18 trays of 4 GPUs), otherwise 8 (HGX/DGX boards);
/// capped by the deployment's GPUs.
pub fn gpus_per_node(gpu_id: &str, num_gpus: u32) -> (u32, &'static str) {
    let id = gpu_id.to_ascii_uppercase();
    let (n, why) = if let Some(h) = host_memory_for(gpu_id) {
        (
            h.gpus_per_node,
            "the node of the host-memory table (offload::host_memory_for)",
        )
    } else if id.starts_with("GB2") || id.starts_with("GB3") {
        (
            4,
            "assumed: 4 GPUs per Grace compute tray (NVL72 = 18 trays x 4 GPUs)",
        )
    } else {
        (8, "assumed: 8 GPUs per node (HGX/DGX baseboard)")
    };
    (n.min(num_gpus.max(1)), why)
}

/// The CPU tier of a deployment (`None` without one): `unit_bytes` = bytes per rank of one
/// cached block (all full-attention KV groups).
pub fn cpu_tier_report(d: &crate::deploy::Deployment, unit_bytes: u64) -> Option<CpuTierReport> {
    let e = &d.engine;
    let o = e.kv_transfer.as_ref()?.offload.as_ref()?;
    let world = d.par.tp as u64;
    let size = tier_size(o, unit_bytes, world);
    let gpu_link = host_link_for(&d.gpu.id, d.gpu.generation);
    let (bps, name, source) = match e.host_link_bytes_per_s {
        Some(b) => (
            b,
            "stated (engine.host_link_gb_s)".to_string(),
            "the scenario".to_string(),
        ),
        None => (
            gpu_link.bytes_per_s,
            gpu_link.name.to_string(),
            gpu_link.source.to_string(),
        ),
    };
    let (per_node, basis) = gpus_per_node(&d.gpu.id, d.num_gpus);
    let (host_mem, host_mem_source) =
        match (e.host_memory_bytes_per_node, host_memory_for(&d.gpu.id)) {
            (Some(b), _) => (
                Some(b),
                "stated (engine.host_memory_gb_per_node)".to_string(),
            ),
            (None, Some(h)) => (Some(h.bytes_per_node), h.source.to_string()),
            (None, None) => (
                None,
                "not known for this GPU: state engine.host_memory_gb_per_node".to_string(),
            ),
        };
    Some(CpuTierReport {
        connector: o.connector.name().into(),
        cpu_bytes_to_use: o.cpu_bytes_to_use,
        blocks_per_chunk: o.blocks_per_chunk,
        chunks: size.chunks,
        blocks: size.chunks.saturating_mul(o.blocks_per_chunk),
        tokens: size
            .chunks
            .saturating_mul(o.blocks_per_chunk)
            .saturating_mul(e.block_size as u64),
        host_bytes_per_rank: size.host_bytes_per_rank,
        chunk_bytes_per_rank: size.chunk_bytes_per_rank,
        ranks_per_engine: d.par.tp,
        gpus_per_node: per_node,
        gpus_per_node_basis: basis.into(),
        host_bytes_per_node: size.host_bytes_per_rank.saturating_mul(per_node as u64),
        host_memory_bytes_per_node: host_mem,
        host_memory_source: host_mem_source,
        host_link: name,
        host_link_gb_s: bps as f64 / 1e9,
        host_link_bytes_per_s: bps,
        host_link_source: source,
    })
}

impl CpuTierReport {
    /// The tier in one line (`servesim capacity` prints it; the page's capacity card shows it).
    pub fn summary_line(&self) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        format!(
            "CPU KV tier ({}): {} chunks of {} blocks = {} tokens per rank, {:.2} GiB host memory per rank, {:.2} GiB per node ({} GPUs per node, {}); host link {} at {:.1} GB/s per GPU",
            self.connector,
            self.chunks,
            self.blocks_per_chunk,
            self.tokens,
            gib(self.host_bytes_per_rank),
            gib(self.host_bytes_per_node),
            self.gpus_per_node,
            self.gpus_per_node_basis,
            self.host_link,
            self.host_link_gb_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(j: &str) -> Result<KvTransferSettings, String> {
        let raw = parse(j)?;
        resolve(&raw, 64, true).map_err(|e| e.to_string())
    }

    #[test]
    fn offloading_connector_with_chunks() {
        let s = p(r#"{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":1e11,"blocks_per_chunk":4}}"#).unwrap();
        let o = s.offload.unwrap();
        assert_eq!(o.blocks_per_chunk, 4);
        assert_eq!(o.cpu_bytes_to_use, 100_000_000_000);
        assert_eq!(o.connector, OffloadConnector::Offloading);
    }

    #[test]
    fn block_size_form_and_exclusivity() {
        let s = p(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9,"block_size":256}}"#).unwrap();
        assert_eq!(s.offload.unwrap().blocks_per_chunk, 4);
        let e = p(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9,"block_size":256,"blocks_per_chunk":4}}"#).unwrap_err();
        assert!(e.contains("block_size"), "{e}");
        let e = p(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9,"block_size":100}}"#).unwrap_err();
        assert!(e.contains("multiple"), "{e}");
    }

    #[test]
    fn multiconnector_with_nixl_and_simple_default() {
        let s = p(r#"{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}]}}"#).unwrap();
        assert!(s.nixl);
        let o = s.offload.unwrap();
        assert_eq!(o.cpu_bytes_to_use, SIMPLE_DEFAULT_CPU_BYTES);
        assert_eq!(o.connector, OffloadConnector::SimpleCpu);
    }

    #[test]
    fn errors_name_the_field() {
        let e = p(
            r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes":1}}"#,
        )
        .unwrap_err();
        assert!(e.contains("cpu_bytes"), "{e}");
        let e = p(r#"{"kv_connector":"OffloadingConnector"}"#).unwrap_err();
        assert!(e.contains("cpu_bytes_to_use"), "{e}");
        let e = p(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9,"blocks_per_chunk":0}}"#).unwrap_err();
        assert!(e.contains("blocks_per_chunk"), "{e}");
        let e = p(r#"{"kv_connector":"LMCacheConnectorV1"}"#).unwrap_err();
        assert!(e.contains("kv_connector"), "{e}");
        let e = p(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":-5}}"#).unwrap_err();
        assert!(e.contains("cpu_bytes_to_use"), "{e}");
    }

    #[test]
    fn simple_disabled_without_prefix_caching() {
        let raw = parse(r#"{"kv_connector":"SimpleCPUOffloadConnector"}"#).unwrap();
        let s = resolve(&raw, 16, false).unwrap();
        assert!(s.offload.is_none());
        assert!(!s.notes.is_empty());
        let raw = parse(r#"{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9}}"#).unwrap();
        assert!(resolve(&raw, 16, false).is_err());
    }

    #[test]
    fn tier_sizes_follow_vllm() {
        let s = OffloadSettings {
            connector: OffloadConnector::Offloading,
            cpu_bytes_to_use: 8 * 1000 * 4 * 10 + 5,
            blocks_per_chunk: 4,
            store_threshold: 0,
            max_tracker_size: DEFAULT_MAX_TRACKER_SIZE,
        };
        // 8 ranks, 1000 B per block per rank, 4 blocks per chunk: 10 chunks.
        let t = tier_size(&s, 1000, 8);
        assert_eq!(t.chunks, 10);
        assert_eq!(t.chunk_bytes_per_rank, 4000);
        let s = OffloadSettings {
            connector: OffloadConnector::SimpleCpu,
            blocks_per_chunk: 1,
            cpu_bytes_to_use: 10_500,
            ..s
        };
        assert_eq!(tier_size(&s, 1000, 8).chunks, 10);
    }
}
