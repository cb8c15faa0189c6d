//! `servesim sweep` topology flags: `--replicas`, `--router`, the router's refresh interval and
//! saturation guard. They set the scenario's `topology` section (version 2); the router spelling
//! is parsed by the core (`topology::parse_router`), the same parser the page uses.

use anyhow::{bail, Result};
use clap::Args;
use servesim_core::scenario::Scenario;
use servesim_core::topology::{parse_router, RawTopology};

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
}

impl TopologyArgs {
    fn any(&self) -> bool {
        self.replicas.is_some()
            || self.router.is_some()
            || self.router_refresh_ms.is_some()
            || self.max_outstanding_per_replica.is_some()
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
        Ok(())
    }
}
