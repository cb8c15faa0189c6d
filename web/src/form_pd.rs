//! The form's disaggregated prefill/decode part (docs/topology.md "Disaggregated prefill/decode"):
//! the scenario's `topology.prefill`, `topology.decode` and `topology.kv_transfer` as text fields,
//! with an exact round trip (`PdForm::of(t).apply(t) == t`). Only syntax is checked here; ranges and
//! combinations are the core's (`Scenario::resolve`), whose errors come back on these keys
//! (`form_keys::form_key`). A pool's CPU KV offload tier is `form_offload`'s fields over the
//! pool's `kv_transfer_config`, stacked on the NIXL transfer connector (`MultiConnector`, as the
//! recipe's decode worker runs it). What a pool has and the form does not show (its router, its
//! other engine settings) is kept from the scenario the form was loaded from.

use crate::core_api::deploy::RawEngineSettings;
use crate::core_api::scenario::GpuRef;
use crate::core_api::topology::{KvPath, RawKvTransfer, RawPool, RawTopology};
use crate::form::FieldErrors;
use crate::form_offload::{offload_key_of, OffloadForm, OffloadKeys};

/// The text fields of one pool; blank = the top-level value (GPU, TP, DP, EP, engine), or 1 replica.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolForm {
    /// A catalog GPU id; blank = the scenario's GPU.
    pub gpu: String,
    pub tp: String,
    pub dp: String,
    pub ep: String,
    pub replicas: String,
    /// The pool's own `--max-num-batched-tokens` (the recipe's prefill worker runs 16384).
    pub max_num_batched_tokens: String,
    /// The pool's CPU KV offload tier, stacked on NIXL (`OffloadForm::of_stacked`).
    pub offload: OffloadForm,
}

/// The form keys of a pool's fields, in display order: (field, key, label).
pub struct PoolKeys {
    pub role: &'static str,
    pub gpu: &'static str,
    pub tp: &'static str,
    pub dp: &'static str,
    pub ep: &'static str,
    pub replicas: &'static str,
    pub max_num_batched_tokens: &'static str,
    /// The pool's offload tier fields.
    pub offload: OffloadKeys,
    /// Errors about the pool that no single field holds.
    pub pool: &'static str,
}

pub const PREFILL_KEYS: PoolKeys = PoolKeys {
    role: "prefill",
    gpu: "prefill_gpu",
    tp: "prefill_tp",
    dp: "prefill_dp",
    ep: "prefill_ep",
    replicas: "prefill_replicas",
    max_num_batched_tokens: "prefill_max_num_batched_tokens",
    offload: OffloadKeys {
        connector: "prefill_offload_connector",
        cpu_bytes: "prefill_offload_cpu_bytes",
        blocks_per_chunk: "prefill_offload_blocks_per_chunk",
    },
    pool: "prefill_pool",
};

pub const DECODE_KEYS: PoolKeys = PoolKeys {
    role: "decode",
    gpu: "decode_gpu",
    tp: "decode_tp",
    dp: "decode_dp",
    ep: "decode_ep",
    replicas: "decode_replicas",
    max_num_batched_tokens: "decode_max_num_batched_tokens",
    offload: OffloadKeys {
        connector: "decode_offload_connector",
        cpu_bytes: "decode_offload_cpu_bytes",
        blocks_per_chunk: "decode_offload_blocks_per_chunk",
    },
    pool: "decode_pool",
};

/// The KV transfer's form keys.
pub const KV_PATH: &str = "kv_path";
pub const KV_RDMA: &str = "kv_rdma_gbps_per_gpu";
pub const KV_NVLINK: &str = "kv_nvlink_gb_s";
pub const KV_LATENCY: &str = "kv_latency_ms";

/// The prefill/decode part of the form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PdForm {
    /// Disaggregated serving on (both pools present).
    pub enabled: bool,
    pub prefill: PoolForm,
    pub decode: PoolForm,
    /// "" (auto), "nvlink", "rdma".
    pub kv_path: String,
    pub kv_rdma_gbps_per_gpu: String,
    pub kv_nvlink_gb_s: String,
    pub kv_latency_ms: String,
}

fn text<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl PoolForm {
    fn of(p: &RawPool) -> PoolForm {
        PoolForm {
            gpu: match &p.gpu {
                Some(GpuRef::Catalog(id)) => id.clone(),
                _ => String::new(),
            },
            tp: text(p.tp),
            dp: text(p.dp),
            ep: text(p.ep),
            replicas: text(p.replicas),
            max_num_batched_tokens: text(p.engine.as_ref().and_then(|e| e.max_num_batched_tokens)),
            offload: OffloadForm::of_stacked(
                p.engine
                    .as_ref()
                    .and_then(|e| e.kv_transfer_config.as_ref()),
            ),
        }
    }

    /// The pool with these fields over `old` (what the form does not show is kept).
    fn apply(&self, old: Option<&RawPool>, k: &PoolKeys, e: &mut FieldErrors) -> RawPool {
        let mut p = old.cloned().unwrap_or_default();
        let custom_gpu = matches!(p.gpu, Some(GpuRef::Custom(_)));
        if !custom_gpu || !self.gpu.trim().is_empty() {
            p.gpu = non_blank(&self.gpu).map(|g| GpuRef::Catalog(g.to_string()));
        }
        p.tp = opt_u32(e, k.tp, &self.tp);
        p.dp = opt_u32(e, k.dp, &self.dp);
        p.ep = opt_u32(e, k.ep, &self.ep);
        p.replicas = opt_u32(e, k.replicas, &self.replicas);
        let mnbt = opt_i64(e, k.max_num_batched_tokens, &self.max_num_batched_tokens);
        let mut engine = p.engine.take().unwrap_or_default();
        engine.max_num_batched_tokens = mnbt;
        engine.kv_transfer_config =
            self.offload
                .apply_stacked(engine.kv_transfer_config.take(), &k.offload, e);
        p.engine = (engine != RawEngineSettings::default()).then_some(engine);
        p
    }
}

fn non_blank(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|t| !t.is_empty())
}

fn opt_u32(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<u32> {
    let t = non_blank(t)?;
    match t.parse::<u32>() {
        Ok(v) => Some(v),
        Err(_) => {
            e.insert(key, "a whole number (blank: the scenario's value)".into());
            None
        }
    }
}

fn opt_i64(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<i64> {
    let t = non_blank(t)?;
    match t.parse::<i64>() {
        Ok(v) => Some(v),
        Err(_) => {
            e.insert(key, "a whole number (blank: the scenario's value)".into());
            None
        }
    }
}

fn opt_f64(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<f64> {
    let t = non_blank(t)?;
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Some(v),
        _ => {
            e.insert(key, "a number (blank: the default)".into());
            None
        }
    }
}

impl PdForm {
    /// The fields of a scenario's topology.
    pub fn of(t: Option<&RawTopology>) -> PdForm {
        let Some(t) = t else {
            return PdForm::default();
        };
        let kv = t.kv_transfer.clone().unwrap_or_default();
        PdForm {
            enabled: t.prefill.is_some() || t.decode.is_some(),
            prefill: t.prefill.as_ref().map(PoolForm::of).unwrap_or_default(),
            decode: t.decode.as_ref().map(PoolForm::of).unwrap_or_default(),
            kv_path: match kv.path {
                None => String::new(),
                Some(KvPath::Auto) => "auto".into(),
                Some(KvPath::Nvlink) => "nvlink".into(),
                Some(KvPath::Rdma) => "rdma".into(),
            },
            kv_rdma_gbps_per_gpu: text(kv.rdma_gbps_per_gpu),
            kv_nvlink_gb_s: text(kv.nvlink_gb_s),
            kv_latency_ms: text(kv.latency_ms),
        }
    }

    /// Turns disaggregated serving on (one worker per pool until edited) or off.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if on {
            for p in [&mut self.prefill, &mut self.decode] {
                if p.replicas.trim().is_empty() {
                    p.replicas = "1".into();
                }
            }
        }
    }

    /// The topology with these fields over `old` (`None` when nothing is left).
    pub fn apply(&self, old: Option<RawTopology>, e: &mut FieldErrors) -> Option<RawTopology> {
        let mut t = old.unwrap_or_default();
        if self.enabled {
            t.prefill = Some(self.prefill.apply(t.prefill.as_ref(), &PREFILL_KEYS, e));
            t.decode = Some(self.decode.apply(t.decode.as_ref(), &DECODE_KEYS, e));
            let path = match self.kv_path.trim() {
                "" => None,
                "auto" => Some(KvPath::Auto),
                "nvlink" => Some(KvPath::Nvlink),
                "rdma" => Some(KvPath::Rdma),
                _ => {
                    e.insert(KV_PATH, "auto, nvlink or rdma".into());
                    None
                }
            };
            let kv = RawKvTransfer {
                path,
                rdma_gbps_per_gpu: opt_f64(e, KV_RDMA, &self.kv_rdma_gbps_per_gpu),
                nvlink_gb_s: opt_f64(e, KV_NVLINK, &self.kv_nvlink_gb_s),
                latency_ms: opt_f64(e, KV_LATENCY, &self.kv_latency_ms),
            };
            t.kv_transfer = (kv != RawKvTransfer::default()).then_some(kv);
        } else {
            t.prefill = None;
            t.decode = None;
            t.kv_transfer = None;
        }
        (t != RawTopology::default()).then_some(t)
    }
}

/// The form key of a core error under `topology.prefill.` / `topology.decode.` /
/// `topology.kv_transfer.` (None for other paths).
pub fn pd_form_key(path: &str) -> Option<&'static str> {
    if let Some(rest) = path.strip_prefix("topology.kv_transfer") {
        return Some(match rest.trim_start_matches('.') {
            "rdma_gbps_per_gpu" => KV_RDMA,
            "nvlink_gb_s" => KV_NVLINK,
            "latency_ms" => KV_LATENCY,
            _ => KV_PATH,
        });
    }
    let (k, rest) = if let Some(r) = path.strip_prefix("topology.prefill") {
        (&PREFILL_KEYS, r)
    } else if let Some(r) = path.strip_prefix("topology.decode") {
        (&DECODE_KEYS, r)
    } else {
        return None;
    };
    let rest = rest.trim_start_matches('.');
    let head = rest.split('.').next().unwrap_or("");
    Some(match head {
        "gpu" => k.gpu,
        "tp" => k.tp,
        "dp" => k.dp,
        "ep" => k.ep,
        "replicas" => k.replicas,
        "engine" if rest.ends_with("max_num_batched_tokens") => k.max_num_batched_tokens,
        "engine" if rest.starts_with("engine.kv_transfer_config") => {
            offload_key_of(rest, &k.offload)
        }
        _ => k.pool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::scenario::Scenario;

    fn seed() -> Scenario {
        let text = include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json");
        Scenario::from_json(text).unwrap()
    }

    #[test]
    fn the_1p1d_seed_round_trips_through_the_fields() {
        let s = seed();
        let f = PdForm::of(s.topology.as_ref());
        assert!(f.enabled);
        assert_eq!(f.prefill.replicas, "1");
        assert_eq!(f.prefill.max_num_batched_tokens, "16384");
        assert_eq!(f.decode.max_num_batched_tokens, "");
        let mut e = FieldErrors::new();
        assert_eq!(f.apply(s.topology.clone(), &mut e), s.topology);
        assert!(e.is_empty());
    }

    #[test]
    fn the_whole_form_round_trips_the_seeds_with_pools() {
        for text in [
            include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"),
            include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xgb200.json"),
            include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200-offload.json"),
        ] {
            let s = Scenario::from_json(text).unwrap();
            let f = crate::form::Form::from_scenario(&s);
            assert_eq!(f.to_scenario(), Ok(s));
        }
    }

    fn offload_seed() -> Scenario {
        let text = include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200-offload.json");
        Scenario::from_json(text).unwrap()
    }

    #[test]
    fn the_offload_seeds_decode_tier_shows_in_its_pool_fields_and_round_trips() {
        let s = offload_seed();
        let f = crate::form::Form::from_scenario(&s);
        assert_eq!(f.pd.decode.offload.connector, "SimpleCPUOffloadConnector");
        assert_eq!(f.pd.decode.offload.cpu_bytes_to_use, "");
        assert_eq!(
            f.pd.prefill.offload.connector, "",
            "the prefill pool has no tier"
        );
        assert_eq!(f.offload.connector, "", "the engine's own tier is separate");
        assert_eq!(f.to_scenario(), Ok(s.clone()));
        // Form -> scenario -> form is the identity too.
        let back = crate::form::Form::from_scenario(&f.to_scenario().unwrap());
        assert_eq!(back.pd, f.pd);
    }

    #[test]
    fn choosing_the_decode_tier_on_the_1p1d_seed_writes_the_recipes_stack() {
        let mut f = crate::form::Form::from_scenario(&seed());
        f.pd.decode.offload.connector = "SimpleCPUOffloadConnector".into();
        assert_eq!(
            f.to_scenario(),
            Ok(offload_seed()),
            "the offload seed, exactly"
        );
        // Sizes go to the stacked offload connector; NIXL stays first.
        f.pd.decode.offload.connector = "OffloadingConnector".into();
        f.pd.decode.offload.cpu_bytes_to_use = "68719476736".into();
        f.pd.decode.offload.blocks_per_chunk = "4".into();
        let s = f.to_scenario().unwrap();
        let c = s.topology.as_ref().unwrap().decode.as_ref().unwrap();
        let cfg = c
            .engine
            .as_ref()
            .unwrap()
            .kv_transfer_config
            .clone()
            .unwrap();
        assert_eq!(cfg.kv_connector.as_deref(), Some("MultiConnector"));
        let list = cfg.kv_connector_extra_config.unwrap().connectors.unwrap();
        assert_eq!(list[0].kv_connector.as_deref(), Some("NixlConnector"));
        assert_eq!(list[1].kv_connector.as_deref(), Some("OffloadingConnector"));
        let x = list[1].kv_connector_extra_config.clone().unwrap();
        assert_eq!(
            (x.cpu_bytes_to_use, x.blocks_per_chunk),
            (Some(68719476736.0), Some(4))
        );
        assert!(s.resolve().is_ok(), "the core accepts the stack");
        // Off again: the pool is the seed's.
        f.pd.decode.offload.connector = String::new();
        assert_eq!(f.to_scenario(), Ok(seed()));
        // Bad text names the pool's field.
        f.pd.decode.offload.connector = "OffloadingConnector".into();
        f.pd.decode.offload.blocks_per_chunk = "four".into();
        let e = f.to_scenario().unwrap_err();
        assert!(e.contains_key("decode_offload_blocks_per_chunk"), "{e:?}");
        assert_eq!(
            pd_form_key(
                "topology.decode.engine.kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use"
            ),
            Some("decode_offload_cpu_bytes")
        );
        assert_eq!(
            pd_form_key("topology.decode.engine.kv_transfer_config.kv_connector"),
            Some("decode_offload_connector")
        );
    }

    #[test]
    fn a_pool_stack_the_fields_cannot_show_is_kept() {
        let mut s = offload_seed();
        let pool = s.topology.as_mut().unwrap().decode.as_mut().unwrap();
        let cfg = pool
            .engine
            .as_mut()
            .unwrap()
            .kv_transfer_config
            .as_mut()
            .unwrap();
        let x = cfg.kv_connector_extra_config.as_mut().unwrap();
        x.connectors.as_mut().unwrap().reverse();
        let f = crate::form::Form::from_scenario(&s);
        assert_eq!(f.pd.decode.offload.connector, crate::form_offload::KEEP);
        assert_eq!(f.pd.decode.offload.kept, "MultiConnector");
        assert_eq!(f.to_scenario(), Ok(s));
    }

    #[test]
    fn turning_pd_on_and_off_edits_only_the_pools() {
        let mut s = seed();
        s.topology.as_mut().unwrap().replicas = Some(2);
        let mut f = PdForm::of(s.topology.as_ref());
        f.set_enabled(false);
        let mut e = FieldErrors::new();
        let t = f.apply(s.topology.clone(), &mut e).unwrap();
        assert_eq!((t.prefill, t.decode, t.kv_transfer), (None, None, None));
        assert_eq!(t.replicas, Some(2));
        let mut g = PdForm::default();
        g.set_enabled(true);
        let t = g.apply(None, &mut e).unwrap();
        assert_eq!(t.prefill.unwrap().replicas, Some(1));
        assert_eq!(t.decode.unwrap().replicas, Some(1));
        assert_eq!(t.kv_transfer, None);
        assert!(PdForm::default().apply(None, &mut e).is_none());
    }

    #[test]
    fn bad_text_names_its_field_and_core_paths_map_back() {
        let mut f = PdForm::of(seed().topology.as_ref());
        f.decode.tp = "eight".into();
        f.kv_latency_ms = "fast".into();
        f.kv_path = "pigeon".into();
        let mut e = FieldErrors::new();
        f.apply(seed().topology, &mut e);
        assert!(e.contains_key("decode_tp"), "{e:?}");
        assert!(e.contains_key(KV_LATENCY), "{e:?}");
        assert!(e.contains_key(KV_PATH), "{e:?}");
        assert_eq!(pd_form_key("topology.prefill.tp"), Some("prefill_tp"));
        assert_eq!(
            pd_form_key("topology.prefill.engine.max_num_batched_tokens"),
            Some("prefill_max_num_batched_tokens")
        );
        assert_eq!(pd_form_key("topology.decode.gpu"), Some("decode_gpu"));
        assert_eq!(
            pd_form_key("topology.decode.deployment"),
            Some("decode_pool")
        );
        assert_eq!(
            pd_form_key("topology.kv_transfer.latency_ms"),
            Some(KV_LATENCY)
        );
        assert_eq!(pd_form_key("topology.replicas"), None);
    }
}
