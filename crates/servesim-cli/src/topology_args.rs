//! `servesim sweep` topology flags: `--replicas`, `--router`, the router's refresh interval and
//! saturation guard. They set the scenario's `topology` section (version 2); the router spelling
//! is parsed by the core (`topology::parse_router`), the same parser the page uses.
//! Disaggregated serving: `--prefill-*` / `--decode-*` set `topology.prefill` / `.decode`
//! (each pool's GPU, TP, DP, replicas and engine overrides) and `--kv-*` set
//! `topology.kv_transfer` (docs/topology.md, "Disaggregated prefill/decode").

use anyhow::{bail, Result};
use clap::Args;
use servesim_core::scenario::{GpuRef, Scenario};
use servesim_core::topology::{parse_router, KvPath, RawPool, RawTopology};

#[derive(Args, Debug, Default)]
pub struct TopologyArgs {
    /// Replicas of the deployment (each tp x dp GPUs with its own API server) behind the router.
    #[arg(long)]
    pub replicas: Option<u32>,
    /// round-robin | least-requests | llm-d[:default|precise-prefix|queue=Q,kv=K,prefix=P].
    #[arg(long)]
    pub router: Option<String>,
    /// How often the llm-d router refreshes the replicas' queue and KV figures (ms, default 50).
    #[arg(long)]
    pub router_refresh_ms: Option<f64>,
    /// Saturation guard: at most this many outstanding requests per replica; the rest wait at
    /// the router.
    #[arg(long)]
    pub max_outstanding_per_replica: Option<u32>,
    #[command(flatten)]
    pub pd: PdArgs,
}

/// Disaggregated prefill/decode flags.
#[derive(Args, Debug, Default)]
pub struct PdArgs {
    /// Prefill pool GPU (default: --gpu). Giving any --prefill-* or --decode-* flag makes the
    /// deployment disaggregated.
    #[arg(long)]
    pub prefill_gpu: Option<String>,
    /// Prefill workers' tensor-parallel size (default: --tensor-parallel-size).
    #[arg(long)]
    pub prefill_tp: Option<u32>,
    #[arg(long)]
    pub prefill_dp: Option<u32>,
    /// Prefill workers (replicas), default 1.
    #[arg(long)]
    pub prefill_replicas: Option<u32>,
    #[arg(long)]
    pub prefill_max_num_batched_tokens: Option<i64>,
    #[arg(long)]
    pub prefill_max_num_seqs: Option<i64>,
    #[arg(long)]
    pub prefill_gpu_memory_utilization: Option<f64>,
    /// Decode pool GPU (default: --gpu).
    #[arg(long)]
    pub decode_gpu: Option<String>,
    #[arg(long)]
    pub decode_tp: Option<u32>,
    #[arg(long)]
    pub decode_dp: Option<u32>,
    /// Decode workers (replicas), default 1.
    #[arg(long)]
    pub decode_replicas: Option<u32>,
    #[arg(long)]
    pub decode_max_num_batched_tokens: Option<i64>,
    #[arg(long)]
    pub decode_max_num_seqs: Option<i64>,
    #[arg(long)]
    pub decode_gpu_memory_utilization: Option<f64>,
    /// The router that picks the decode worker (same spellings as --router; default
    /// round-robin). --router routes to the prefill workers.
    #[arg(long)]
    pub decode_router: Option<String>,
    /// KV transfer path: auto (NVLink inside one NVLink domain, else RDMA) | nvlink | rdma.
    #[arg(long)]
    pub kv_path: Option<String>,
    /// RDMA rate per GPU for the KV transfer, Gb/s (default 400).
    #[arg(long)]
    pub kv_link_gbps: Option<f64>,
    /// NVLink rate per GPU for the KV transfer, GB/s (default: the GPU's scale-up bandwidth).
    #[arg(long)]
    pub kv_nvlink_gb_s: Option<f64>,
    /// Fixed latency per KV transfer, ms (default 0.05).
    #[arg(long)]
    pub kv_transfer_latency_ms: Option<f64>,
}

struct PoolFlags<'a> {
    gpu: &'a Option<String>,
    tp: Option<u32>,
    dp: Option<u32>,
    replicas: Option<u32>,
    mnbt: Option<i64>,
    mns: Option<i64>,
    gmu: Option<f64>,
}

impl PoolFlags<'_> {
    fn any(&self) -> bool {
        self.gpu.is_some()
            || self.tp.is_some()
            || self.dp.is_some()
            || self.replicas.is_some()
            || self.mnbt.is_some()
            || self.mns.is_some()
            || self.gmu.is_some()
    }

    fn apply(&self, p: &mut RawPool) {
        if let Some(g) = self.gpu {
            p.gpu = Some(GpuRef::Catalog(g.clone()));
        }
        p.tp = self.tp.or(p.tp);
        p.dp = self.dp.or(p.dp);
        p.replicas = self.replicas.or(p.replicas);
        if self.mnbt.is_some() || self.mns.is_some() || self.gmu.is_some() {
            let e = p.engine.get_or_insert_with(Default::default);
            e.max_num_batched_tokens = self.mnbt.or(e.max_num_batched_tokens);
            e.max_num_seqs = self.mns.or(e.max_num_seqs);
            e.gpu_memory_utilization = self.gmu.or(e.gpu_memory_utilization);
        }
    }
}

impl PdArgs {
    fn pools(&self) -> (PoolFlags<'_>, PoolFlags<'_>) {
        (
            PoolFlags {
                gpu: &self.prefill_gpu,
                tp: self.prefill_tp,
                dp: self.prefill_dp,
                replicas: self.prefill_replicas,
                mnbt: self.prefill_max_num_batched_tokens,
                mns: self.prefill_max_num_seqs,
                gmu: self.prefill_gpu_memory_utilization,
            },
            PoolFlags {
                gpu: &self.decode_gpu,
                tp: self.decode_tp,
                dp: self.decode_dp,
                replicas: self.decode_replicas,
                mnbt: self.decode_max_num_batched_tokens,
                mns: self.decode_max_num_seqs,
                gmu: self.decode_gpu_memory_utilization,
            },
        )
    }

    fn kv_any(&self) -> bool {
        self.kv_path.is_some()
            || self.kv_link_gbps.is_some()
            || self.kv_nvlink_gb_s.is_some()
            || self.kv_transfer_latency_ms.is_some()
    }

    fn any(&self) -> bool {
        let (p, d) = self.pools();
        p.any() || d.any() || self.decode_router.is_some() || self.kv_any()
    }

    /// Sets `topology.prefill`, `.decode` and `.kv_transfer` from the flags given (both pools
    /// are created as soon as one flag is given).
    fn apply(&self, t: &mut RawTopology) -> Result<()> {
        if !self.any() {
            return Ok(());
        }
        let (pf, df) = self.pools();
        pf.apply(t.prefill.get_or_insert_with(Default::default));
        let dec = t.decode.get_or_insert_with(Default::default);
        df.apply(dec);
        if let Some(spec) = &self.decode_router {
            let raw =
                parse_router(spec).map_err(|e| anyhow::anyhow!("--decode-router {spec}: {e}"))?;
            dec.router = Some(raw);
        }
        if self.kv_any() {
            let k = t.kv_transfer.get_or_insert_with(Default::default);
            if let Some(p) = &self.kv_path {
                k.path = Some(match p.as_str() {
                    "auto" => KvPath::Auto,
                    "nvlink" => KvPath::Nvlink,
                    "rdma" => KvPath::Rdma,
                    other => bail!("--kv-path {other}: give auto, nvlink or rdma"),
                });
            }
            k.rdma_gbps_per_gpu = self.kv_link_gbps.or(k.rdma_gbps_per_gpu);
            k.nvlink_gb_s = self.kv_nvlink_gb_s.or(k.nvlink_gb_s);
            k.latency_ms = self.kv_transfer_latency_ms.or(k.latency_ms);
        }
        Ok(())
    }
}

impl TopologyArgs {
    fn any(&self) -> bool {
        self.replicas.is_some()
            || self.router.is_some()
            || self.router_refresh_ms.is_some()
            || self.max_outstanding_per_replica.is_some()
            || self.pd.any()
    }

    /// Applies the flags given to `s` (creating its `topology` section when needed).
    pub fn apply(&self, s: &mut Scenario) -> Result<()> {
        if !self.any() {
            return Ok(());
        }
        let t = s.topology.get_or_insert_with(RawTopology::default);
        if let Some(r) = self.replicas {
            if r == 0 {
                bail!("--replicas 0: give at least 1 replica");
            }
            t.replicas = Some(r);
        }
        if let Some(spec) = &self.router {
            let raw = parse_router(spec).map_err(|e| anyhow::anyhow!("--router {spec}: {e}"))?;
            let keep = t.router.take().unwrap_or_default();
            t.router = Some(servesim_core::topology::RawRouter {
                refresh_interval_ms: keep.refresh_interval_ms,
                max_outstanding_per_replica: keep.max_outstanding_per_replica,
                prefix_block_tokens: keep.prefix_block_tokens,
                prefix_lru_blocks_per_replica: keep.prefix_lru_blocks_per_replica,
                ..raw
            });
        }
        if self.router_refresh_ms.is_some() || self.max_outstanding_per_replica.is_some() {
            let r = t.router.get_or_insert_with(Default::default);
            if let Some(ms) = self.router_refresh_ms {
                r.refresh_interval_ms = Some(ms);
            }
            if let Some(m) = self.max_outstanding_per_replica {
                r.max_outstanding_per_replica = Some(m);
            }
        }
        self.pd.apply(t)
    }
}
