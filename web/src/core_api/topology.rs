//! The adapter's topology part: reading and editing a scenario's `topology` section for the
//! page's controls, the summary its picture draws, and the per-replica results of a report.
//! Router names and presets are the core's (`topology::RouterPolicy`, `EppWeights::preset`).

pub use servesim_core::metrics::Dist;
use servesim_core::scenario::Scenario;
pub use servesim_core::topology::{KvPath, RawKvTransfer, RawPool, RawTopology};
pub use servesim_core::topology::{PoolResult, ReplicaResult, TopologyLevel, TransferStats};
use servesim_core::topology::{RawRouter, RouterPolicy, RouterSpec};

/// The router choices the page offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterChoice {
    RoundRobin,
    LeastRequests,
    LlmDDefault,
    LlmDPrecisePrefix,
}

impl RouterChoice {
    pub const ALL: [RouterChoice; 4] = [
        RouterChoice::RoundRobin,
        RouterChoice::LeastRequests,
        RouterChoice::LlmDDefault,
        RouterChoice::LlmDPrecisePrefix,
    ];

    /// The select's value: the CLI's `--router` spelling.
    pub fn value(self) -> &'static str {
        match self {
            RouterChoice::RoundRobin => "round-robin",
            RouterChoice::LeastRequests => "least-requests",
            RouterChoice::LlmDDefault => "llm-d:default",
            RouterChoice::LlmDPrecisePrefix => "llm-d:precise-prefix",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RouterChoice::RoundRobin => "round-robin",
            RouterChoice::LeastRequests => "least outstanding requests",
            RouterChoice::LlmDDefault => "llm-d EPP (queue 2, kv 2, prefix 3)",
            RouterChoice::LlmDPrecisePrefix => "llm-d EPP precise-prefix (prefix 2, kv 1, queue 1)",
        }
    }

    pub fn from_value(v: &str) -> RouterChoice {
        RouterChoice::ALL
            .into_iter()
            .find(|c| c.value() == v)
            .unwrap_or(RouterChoice::RoundRobin)
    }
}

/// The replicas field's text: the scenario's `topology.replicas`, blank when absent.
pub fn topology_replicas_text(s: &Scenario) -> String {
    s.topology
        .as_ref()
        .and_then(|t| t.replicas)
        .map(|r| r.to_string())
        .unwrap_or_default()
}

/// Drops an empty `topology` so that a scenario without version-2 settings stays version 1.
fn tidy(s: &mut Scenario) {
    if s.topology
        .as_ref()
        .is_some_and(|t| *t == RawTopology::default())
    {
        s.topology = None;
    }
}

/// Sets `topology.replicas` from the field's text (blank: absent). Text that is not a whole
/// number is kept out of the scenario (the field shows the last valid value).
pub fn set_topology_replicas(s: &mut Scenario, text: &str) {
    let t = text.trim();
    if t.is_empty() {
        if let Some(top) = s.topology.as_mut() {
            top.replicas = None;
        }
    } else if let Ok(n) = t.parse::<u32>() {
        s.topology.get_or_insert_with(RawTopology::default).replicas = Some(n);
    }
    tidy(s);
}

/// The router choice of a scenario (round-robin when it has none).
pub fn router_choice(s: &Scenario) -> RouterChoice {
    let Some(r) = s.topology.as_ref().and_then(|t| t.router.as_ref()) else {
        return RouterChoice::RoundRobin;
    };
    match r.policy {
        RouterPolicy::RoundRobin => RouterChoice::RoundRobin,
        RouterPolicy::LeastRequests => RouterChoice::LeastRequests,
        RouterPolicy::LlmD => match r.preset.as_deref() {
            Some(p) if p.contains("precise") => RouterChoice::LlmDPrecisePrefix,
            _ => RouterChoice::LlmDDefault,
        },
    }
}

/// Sets the router from a choice, keeping its other settings (refresh, guard, index size).
pub fn set_router_choice(s: &mut Scenario, c: RouterChoice) {
    let parsed = servesim_core::topology::parse_router(c.value()).unwrap_or_default();
    let top = s.topology.get_or_insert_with(RawTopology::default);
    let old = top.router.take().unwrap_or_default();
    let r = RawRouter {
        policy: parsed.policy,
        preset: parsed.preset,
        weights: None,
        ..old
    };
    top.router = (r != RawRouter::default()).then_some(r);
    tidy(s);
}

/// What the topology picture shows.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologySummary {
    pub replicas: u32,
    pub gpus_per_replica: u32,
    /// The router in words (`RouterSpec::describe`).
    pub router: String,
    /// A short name for the picture's box.
    pub router_short: String,
    /// Disaggregated serving: the two pools and the transfer path, as written.
    pub pd: Option<PdSummary>,
}

/// One pool of a disaggregated topology, as written (blank fields take the top-level values).
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSummary {
    pub replicas: u32,
    pub gpus_per_replica: u32,
    /// The pool's GPU (catalog id or custom name).
    pub gpu: String,
}

/// What the picture shows of a disaggregated topology.
#[derive(Clone, Debug, PartialEq)]
pub struct PdSummary {
    pub prefill: PoolSummary,
    pub decode: PoolSummary,
    /// `auto`, `nvlink` or `rdma` as written (`auto` when absent).
    pub path: &'static str,
}

fn gpu_name(g: &servesim_core::scenario::GpuRef) -> String {
    match g {
        servesim_core::scenario::GpuRef::Catalog(id) => id.clone(),
        servesim_core::scenario::GpuRef::Custom(c) => c.name.clone(),
    }
}

fn pool_summary(s: &Scenario, p: &servesim_core::topology::RawPool) -> PoolSummary {
    let tp = p.tp.unwrap_or(s.tp).max(1);
    let dp = p.dp.unwrap_or(s.dp).max(1);
    PoolSummary {
        replicas: p.replicas.unwrap_or(1),
        gpus_per_replica: tp.saturating_mul(dp),
        gpu: gpu_name(p.gpu.as_ref().unwrap_or(&s.gpu)),
    }
}

fn pd_summary(s: &Scenario) -> Option<PdSummary> {
    use servesim_core::topology::KvPath;
    let t = s.topology.as_ref()?;
    let (pre, dec) = (t.prefill.as_ref()?, t.decode.as_ref()?);
    Some(PdSummary {
        prefill: pool_summary(s, pre),
        decode: pool_summary(s, dec),
        path: match t.kv_transfer.as_ref().and_then(|k| k.path) {
            None | Some(KvPath::Auto) => "auto",
            Some(KvPath::Nvlink) => "nvlink",
            Some(KvPath::Rdma) => "rdma",
        },
    })
}

/// The topology of a scenario as written (replicas from `topology.replicas`, else `num_gpus /
/// (tp x dp)`, else 1), without resolving it.
pub fn topology_summary(s: &Scenario) -> TopologySummary {
    let per = s.tp.max(1).saturating_mul(s.dp.max(1));
    let replicas = s
        .topology
        .as_ref()
        .and_then(|t| t.replicas)
        .or(s.num_gpus.map(|g| (g / per).max(1)))
        .unwrap_or(1);
    let spec = RouterSpec::from_raw(s.topology.as_ref().and_then(|t| t.router.as_ref()))
        .unwrap_or_default();
    TopologySummary {
        replicas,
        gpus_per_replica: per,
        router: spec.describe(),
        router_short: format!("router: {}", spec.policy.name()),
        pd: pd_summary(s),
    }
}

/// The per-replica results in a `SweepReport` JSON (empty for one replica or bad JSON).
pub fn report_topology(report_json: &str) -> Vec<TopologyLevel> {
    serde_json::from_str::<serde_json::Value>(report_json)
        .ok()
        .and_then(|v| v.get("topology").cloned())
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_edit_the_topology_and_leave_version_one_alone() {
        let mut s = Scenario::default_scenario();
        set_topology_replicas(&mut s, "");
        set_router_choice(&mut s, RouterChoice::RoundRobin);
        assert_eq!(s.topology, None, "defaults keep the scenario at version 1");
        set_topology_replicas(&mut s, "4");
        set_router_choice(&mut s, RouterChoice::LlmDPrecisePrefix);
        assert_eq!(topology_replicas_text(&s), "4");
        assert_eq!(router_choice(&s), RouterChoice::LlmDPrecisePrefix);
        assert!(s.to_json().contains("\"version\":2"));
        let t = topology_summary(&s);
        assert_eq!(t.replicas, 4);
        assert!(t.router.contains("prefix 2"), "{}", t.router);
        assert_eq!(t.pd, None);
        let seed = Scenario::from_json(include_str!(
            "../../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"
        ))
        .unwrap();
        let pd = topology_summary(&seed).pd.expect("the 1P1D seed has pools");
        assert_eq!((pd.prefill.replicas, pd.prefill.gpus_per_replica), (1, 8));
        assert_eq!((pd.decode.replicas, pd.decode.gpus_per_replica), (1, 8));
        assert_eq!((pd.prefill.gpu.as_str(), pd.path), ("H200", "auto"));
        set_topology_replicas(&mut s, "x");
        assert_eq!(topology_replicas_text(&s), "4", "bad text is kept out");
        for c in RouterChoice::ALL {
            assert_eq!(RouterChoice::from_value(c.value()), c);
        }
    }

    #[test]
    fn per_replica_results_come_from_the_report() {
        let mut s = Scenario::default_scenario();
        s.sweep.concurrency = Some(vec![8.0]);
        s.sweep.duration_s = Some(10.0);
        s.sweep.warmup_s = Some(1.0);
        set_topology_replicas(&mut s, "2");
        let r = s.resolve().unwrap();
        let res = r.run().unwrap();
        let json = servesim_core::scenario::SweepReport::new(&s, &r, &res).to_json_pretty();
        let t = report_topology(&json);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].replicas.len(), 2);
        // The page reads the report's JSON: integers exactly, floats to JSON's text precision
        // (serde_json's default parser may differ from the simulated f64 in the last ulp).
        assert_eq!(t.len(), res.topology.len());
        for (a, b) in t.iter().zip(&res.topology) {
            assert_eq!(
                (a.level, &a.router, a.imbalance),
                (b.level, &b.router, b.imbalance)
            );
            assert_eq!(a.replicas.len(), b.replicas.len());
            for (x, y) in a.replicas.iter().zip(&b.replicas) {
                assert_eq!(
                    (x.replica, x.routed_requests, x.completed_requests),
                    (y.replica, y.routed_requests, y.completed_requests)
                );
                assert_eq!(x.output_tokens_per_s, y.output_tokens_per_s);
                assert!((x.kv_utilization_mean - y.kv_utilization_mean).abs() <= 1e-15);
                assert_eq!(x.prefix_cache_hit_rate, y.prefix_cache_hit_rate);
            }
        }
        assert!(report_topology("{}").is_empty());
    }
}
