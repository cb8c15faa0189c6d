//! The form's CPU KV offload tier (docs/engine.md "CPU KV offload tier"): the scenario's
//! `engine.kv_transfer_config` (vLLM's `--kv-transfer-config`) as a connector choice and the two
//! sizes people set, `cpu_bytes_to_use` and `blocks_per_chunk`, with an exact round trip. Other
//! keys of the config are kept from the scenario the form was loaded from; a config the form has
//! no controls for (a `MultiConnector` stack, `NixlConnector` alone) is kept as it is and edited in
//! the Scenario JSON box. A disaggregated pool's tier is the same fields over the recipe's stack,
//! `MultiConnector` of `NixlConnector` then the offload connector ([`OffloadForm::of_stacked`],
//! [`OffloadForm::apply_stacked`]). Only syntax is checked here; the core validates the rest.

use crate::core_api::offload::{RawKvTransferConfig, RawOffloadExtra};
use crate::form::FieldErrors;

pub const CONNECTOR: &str = "offload_connector";
pub const CPU_BYTES: &str = "offload_cpu_bytes";
pub const BLOCKS_PER_CHUNK: &str = "offload_blocks_per_chunk";

/// The connector choices: (value, label). `keep` = the scenario's own config, untouched.
pub const CONNECTORS: [(&str, &str); 3] = [
    ("", "none (no CPU tier)"),
    (
        "OffloadingConnector",
        "OffloadingConnector (cpu_bytes_to_use per engine)",
    ),
    (
        "SimpleCPUOffloadConnector",
        "SimpleCPUOffloadConnector (per rank; 8 GiB default)",
    ),
];
pub const KEEP: &str = "keep";

/// The form keys of one offload tier's fields (the engine's, or a pool's).
pub struct OffloadKeys {
    pub connector: &'static str,
    pub cpu_bytes: &'static str,
    pub blocks_per_chunk: &'static str,
}

/// The engine's tier (`engine.kv_transfer_config`).
pub const ENGINE_KEYS: OffloadKeys = OffloadKeys {
    connector: CONNECTOR,
    cpu_bytes: CPU_BYTES,
    blocks_per_chunk: BLOCKS_PER_CHUNK,
};

/// The P/D transfer connector a pool's tier is stacked on.
pub const NIXL: &str = "NixlConnector";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffloadForm {
    /// "", a connector of [`CONNECTORS`], or [`KEEP`].
    pub connector: String,
    /// Bytes; blank = the connector's default (SimpleCPUOffloadConnector: 8 GiB).
    pub cpu_bytes_to_use: String,
    /// Blank = 1.
    pub blocks_per_chunk: String,
    /// The kept config's connector name, for the select's label.
    pub kept: String,
}

fn is_offload(name: &str) -> bool {
    CONNECTORS.iter().skip(1).any(|(v, _)| *v == name)
}

impl OffloadForm {
    pub fn of(c: Option<&RawKvTransferConfig>) -> OffloadForm {
        let Some(c) = c else {
            return OffloadForm::default();
        };
        let name = c.kv_connector.clone().unwrap_or_default();
        if !is_offload(&name) {
            return OffloadForm {
                connector: KEEP.into(),
                kept: if name.is_empty() {
                    "unnamed".into()
                } else {
                    name
                },
                ..OffloadForm::default()
            };
        }
        let x = c.kv_connector_extra_config.clone().unwrap_or_default();
        let text = |v: Option<String>| v.unwrap_or_default();
        OffloadForm {
            connector: name,
            cpu_bytes_to_use: text(x.cpu_bytes_to_use.map(|b| b.to_string())),
            blocks_per_chunk: text(x.blocks_per_chunk.map(|b| b.to_string())),
            kept: String::new(),
        }
    }

    /// The config with these fields over `old`.
    pub fn apply(
        &self,
        old: Option<RawKvTransferConfig>,
        e: &mut FieldErrors,
    ) -> Option<RawKvTransferConfig> {
        self.apply_keyed(old, &ENGINE_KEYS, e)
    }

    /// The fields of a disaggregated pool's `kv_transfer_config`: the offload connector of a
    /// `MultiConnector` stack of exactly `NixlConnector` then an offload connector (the recipe's
    /// decode worker); no config = no tier; any other config is kept as it is ([`KEEP`]).
    pub fn of_stacked(c: Option<&RawKvTransferConfig>) -> OffloadForm {
        let Some(c) = c else {
            return OffloadForm::default();
        };
        match stacked_offload(c) {
            Some(inner) => OffloadForm::of(Some(inner)),
            None => OffloadForm {
                connector: KEEP.into(),
                kept: c.kv_connector.clone().unwrap_or_else(|| "unnamed".into()),
                ..OffloadForm::default()
            },
        }
    }

    /// A pool's `kv_transfer_config` with these fields over `old`: the offload connector stacked
    /// on `NixlConnector` under `MultiConnector` (both `kv_both`, as the recipe writes it); the
    /// stack's other keys are kept when `old` is such a stack.
    pub fn apply_stacked(
        &self,
        old: Option<RawKvTransferConfig>,
        k: &OffloadKeys,
        e: &mut FieldErrors,
    ) -> Option<RawKvTransferConfig> {
        let name = self.connector.trim();
        if name == KEEP {
            return old;
        }
        if name.is_empty() {
            return None;
        }
        let old_inner = old.as_ref().and_then(stacked_offload).cloned();
        let inner = self.apply_keyed(old_inner, k, e)?;
        let mut stack = old
            .filter(|o| stacked_offload(o).is_some())
            .unwrap_or_else(|| RawKvTransferConfig {
                kv_connector: Some("MultiConnector".into()),
                kv_role: Some("kv_both".into()),
                kv_connector_extra_config: Some(RawOffloadExtra {
                    connectors: Some(vec![RawKvTransferConfig {
                        kv_connector: Some(NIXL.into()),
                        kv_role: Some("kv_both".into()),
                        ..RawKvTransferConfig::default()
                    }]),
                    ..RawOffloadExtra::default()
                }),
                ..RawKvTransferConfig::default()
            });
        if let Some(list) = stack
            .kv_connector_extra_config
            .as_mut()
            .and_then(|x| x.connectors.as_mut())
        {
            list.truncate(1);
            list.push(inner);
        }
        Some(stack)
    }

    /// The config with these fields over `old`, errors on `k`'s keys.
    pub fn apply_keyed(
        &self,
        old: Option<RawKvTransferConfig>,
        k: &OffloadKeys,
        e: &mut FieldErrors,
    ) -> Option<RawKvTransferConfig> {
        let name = self.connector.trim();
        if name == KEEP {
            return old;
        }
        if name.is_empty() {
            return None;
        }
        if !is_offload(name) {
            e.insert(k.connector, "choose a connector".into());
            return old;
        }
        let mut c = old
            .filter(|o| o.kv_connector.as_deref() == Some(name))
            .unwrap_or_else(|| RawKvTransferConfig {
                kv_connector: Some(name.into()),
                kv_role: Some("kv_both".into()),
                ..RawKvTransferConfig::default()
            });
        let mut x = c.kv_connector_extra_config.take().unwrap_or_default();
        x.cpu_bytes_to_use = match self.cpu_bytes_to_use.trim() {
            "" => None,
            t => match t.parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => {
                    e.insert(
                        k.cpu_bytes,
                        "a number of bytes (e.g. 68719476736 for 64 GiB)".into(),
                    );
                    None
                }
            },
        };
        x.blocks_per_chunk = match self.blocks_per_chunk.trim() {
            "" => None,
            t => match t.parse::<i64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    e.insert(k.blocks_per_chunk, "a whole number".into());
                    None
                }
            },
        };
        c.kv_connector_extra_config = (x != RawOffloadExtra::default()).then_some(x);
        Some(c)
    }
}

/// The offload connector of a `MultiConnector` stack of exactly `NixlConnector` then an offload
/// connector (None for any other config).
fn stacked_offload(c: &RawKvTransferConfig) -> Option<&RawKvTransferConfig> {
    if c.kv_connector.as_deref() != Some("MultiConnector") {
        return None;
    }
    let x = c.kv_connector_extra_config.as_ref()?;
    let only_connectors = RawOffloadExtra {
        connectors: x.connectors.clone(),
        ..RawOffloadExtra::default()
    };
    if *x != only_connectors {
        return None;
    }
    match x.connectors.as_deref()? {
        [nixl, inner]
            if nixl.kv_connector.as_deref() == Some(NIXL)
                && inner.kv_connector.as_deref().is_some_and(is_offload) =>
        {
            Some(inner)
        }
        _ => None,
    }
}

/// The form key of a core error under `engine.kv_transfer_config` (None for other paths).
pub fn offload_form_key(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("engine.kv_transfer_config")?;
    Some(offload_key_of(rest, &ENGINE_KEYS))
}

/// The key of `k` a core error path below a `kv_transfer_config` names.
pub fn offload_key_of(rest: &str, k: &OffloadKeys) -> &'static str {
    if rest.ends_with("cpu_bytes_to_use") {
        k.cpu_bytes
    } else if rest.ends_with("blocks_per_chunk") {
        k.blocks_per_chunk
    } else {
        k.connector
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::scenario::Scenario;
    use crate::form::Form;

    fn with_config(json: &str) -> Scenario {
        let mut s = Scenario::default_scenario();
        s.engine.kv_transfer_config = Some(serde_json::from_str(json).unwrap());
        s
    }

    #[test]
    fn offload_configs_round_trip_and_stacks_are_kept() {
        for json in [
            r#"{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":68719476736,"blocks_per_chunk":4}}"#,
            r#"{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}"#,
            r#"{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}]}}"#,
        ] {
            let s = with_config(json);
            assert_eq!(Form::from_scenario(&s).to_scenario(), Ok(s), "{json}");
        }
        let f = OffloadForm::of(
            with_config(r#"{"kv_connector":"MultiConnector"}"#)
                .engine
                .kv_transfer_config
                .as_ref(),
        );
        assert_eq!(
            (f.connector.as_str(), f.kept.as_str()),
            (KEEP, "MultiConnector")
        );
    }

    #[test]
    fn choosing_a_connector_writes_vllms_config() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.offload.connector = "OffloadingConnector".into();
        f.offload.cpu_bytes_to_use = "68719476736".into();
        f.offload.blocks_per_chunk = "4".into();
        let s = f.to_scenario().unwrap();
        let c = s.engine.kv_transfer_config.clone().unwrap();
        assert_eq!(c.kv_connector.as_deref(), Some("OffloadingConnector"));
        assert_eq!(c.kv_role.as_deref(), Some("kv_both"));
        let x = c.kv_connector_extra_config.unwrap();
        assert_eq!(
            (x.cpu_bytes_to_use, x.blocks_per_chunk),
            (Some(68719476736.0), Some(4))
        );
        assert!(s.resolve().is_ok(), "the core accepts it");
        f.offload.connector = String::new();
        assert_eq!(f.to_scenario().unwrap().engine.kv_transfer_config, None);
        f.offload.connector = "OffloadingConnector".into();
        f.offload.cpu_bytes_to_use = "lots".into();
        assert!(f.to_scenario().unwrap_err().contains_key(CPU_BYTES));
        assert_eq!(
            offload_form_key(
                "engine.kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use"
            ),
            Some(CPU_BYTES)
        );
        assert_eq!(offload_form_key("engine.max_num_seqs"), None);
    }
}
