//! Speculative decoding settings: vLLM's `--speculative-config` JSON ([`RawSpeculativeConfig`])
//! and the acceptance the simulation draws from ([`RawSpecAcceptance`]), validated into
//! [`SpeculativeSettings`]. The engine draws the accepted drafts per request and step from the
//! distribution ([`crate::engine::SpecDecode`]); the step-time model prices verification and the
//! drafter (`perf/spec.rs`). Rules and sources: docs/engine.md ("Speculative decoding").

use crate::deploy::DeployError;
use crate::model::ModelConfig;
use serde::{Deserialize, Serialize};

/// Largest `num_speculative_tokens` accepted (vLLM sets no hard cap; every public recipe uses
/// at most 8; the engine stores tokens per chunk in a byte).
pub const MAX_SPECULATIVE_TOKENS: u32 = 32;

/// vLLM's `--speculative-config` as JSON (`vllm/config/speculative.py`, `SpeculativeConfig`).
/// Only the keys the simulation uses or that do not change its numbers are accepted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpeculativeConfig {
    /// `mtp`, `eagle`, `eagle3`, `draft_model` or `ngram`.
    pub method: Option<String>,
    pub num_speculative_tokens: Option<i64>,
    /// The drafter checkpoint (EAGLE head or draft model), a catalog id for `draft_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// n-gram window bounds (accepted; the acceptance is stated separately).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_lookup_max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_lookup_min: Option<i64>,
    /// Draft model tensor parallelism (vLLM: 1 or the target's TP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tensor_parallel_size: Option<i64>,
}

/// How many drafts are accepted, stated one of three ways (servesim's own setting: vLLM does
/// not take an acceptance, it measures one):
/// - `mean_acceptance_length` alone (vLLM's "Mean acceptance length" = 1 + accepted / drafts):
///   each draft position accepted with the same probability `a`, a draft accepted only if all
///   before it were (the chained model of Leviathan et al. 2023), `a` solved from the mean;
/// - `acceptance_rate_per_pos`: vLLM's per-position rates
///   (`vllm:spec_decode_num_accepted_tokens_per_pos / num_drafts`, `rate_i` = P(at least `i + 1`
///   accepted)), `num_speculative_tokens` values, non-increasing, in [0, 1];
/// - `accepted_pmf`: P(accepted = j) for j = 0..=k (sums to 1); or `accepted_values` (one value,
///   or two adjacent values) with `mean_acceptance_length`, e.g. "2 or 3 accepted, mean 3.51" =
///   `{"accepted_values": [2, 3], "mean_acceptance_length": 3.51}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpecAcceptance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_acceptance_length: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_rate_per_pos: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_pmf: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_values: Option<Vec<i64>>,
}

/// The drafter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecMethod {
    /// The model's own multi-token-prediction layers (`num_nextn_predict_layers`).
    Mtp,
    /// An EAGLE head (one decoder layer at the target's width).
    Eagle,
    /// An EAGLE-3 head (one decoder layer at the target's width, fused low/mid/high features).
    Eagle3,
    /// A separate draft model.
    DraftModel,
    /// Prompt lookup (n-gram) on the CPU: no drafter on the GPU.
    Ngram,
}

impl SpecMethod {
    /// Every drafter, in the order the page offers them.
    pub const ALL: [SpecMethod; 5] = [
        SpecMethod::Mtp,
        SpecMethod::Eagle,
        SpecMethod::Eagle3,
        SpecMethod::DraftModel,
        SpecMethod::Ngram,
    ];
    pub fn name(self) -> &'static str {
        match self {
            SpecMethod::Mtp => "mtp",
            SpecMethod::Eagle => "eagle",
            SpecMethod::Eagle3 => "eagle3",
            SpecMethod::DraftModel => "draft_model",
            SpecMethod::Ngram => "ngram",
        }
    }
    /// vLLM's `SpeculativeConfig.use_eagle()`: EAGLE, EAGLE-3 and MTP run the EAGLE proposer
    /// (lookahead KV slots, the last prefix-cache block recomputed).
    pub fn uses_eagle_proposer(self) -> bool {
        matches!(
            self,
            SpecMethod::Mtp | SpecMethod::Eagle | SpecMethod::Eagle3
        )
    }
    /// KV slots allocated beyond the scheduled tokens (vLLM `Scheduler.num_lookahead_tokens`:
    /// `num_speculative_tokens` for EAGLE-style and draft-model drafters, 0 for n-gram).
    pub fn lookahead(self, k: u32) -> u32 {
        match self {
            SpecMethod::Ngram => 0,
            _ => k,
        }
    }
}

/// Validated speculative decoding settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpeculativeSettings {
    pub method: SpecMethod,
    pub num_speculative_tokens: u32,
    /// The draft model's catalog id (`draft_model` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    /// MTP layers the model has (`mtp` only; each draft position runs them once).
    pub mtp_layers: u32,
    /// P(accepted = j), j = 0..=k.
    pub accepted_pmf: Vec<f64>,
    /// Mean acceptance length `1 + sum_j j P(j)`.
    pub mean_acceptance_length: f64,
    /// The settings as given (to reproduce them).
    #[serde(skip)]
    pub raw: RawSpeculativeConfig,
    #[serde(skip)]
    pub raw_acceptance: RawSpecAcceptance,
}

impl SpeculativeSettings {
    /// Per-position rates `rate_i = P(accepted >= i + 1)`, i = 0..k-1.
    pub fn rates_per_pos(&self) -> Vec<f64> {
        pmf_to_rates(&self.accepted_pmf)
    }
}

fn inv(field: &'static str, value: impl ToString, fix: impl Into<String>) -> DeployError {
    DeployError::InvalidField {
        field,
        value: value.to_string(),
        fix: fix.into(),
    }
}

/// `rate_i = sum_{j > i} P(j)`.
pub fn pmf_to_rates(pmf: &[f64]) -> Vec<f64> {
    let k = pmf.len().saturating_sub(1);
    (0..k).map(|i| pmf[i + 1..].iter().sum::<f64>()).collect()
}

/// Mean accepted drafts `sum_j j P(j)` of the chained model with per-position rate `a`:
/// `a + a^2 + ... + a^k`.
fn chained_mean(a: f64, k: u32) -> f64 {
    let mut s = 0.0;
    let mut p = 1.0;
    for _ in 0..k {
        p *= a;
        s += p;
    }
    s
}

/// Resolves and validates `raw` for `model`; `None` when speculation is off.
pub fn resolve(
    raw: Option<&RawSpeculativeConfig>,
    acc: Option<&RawSpecAcceptance>,
    model: &ModelConfig,
) -> Result<Option<SpeculativeSettings>, DeployError> {
    let Some(raw) = raw else {
        if acc.is_some() {
            return Err(inv(
                "speculative_acceptance",
                "set",
                "acceptance without speculative_config; add speculative_config (e.g. {\"method\": \"mtp\", \"num_speculative_tokens\": 3}) or drop speculative_acceptance",
            ));
        }
        return Ok(None);
    };
    let method = match raw.method.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
        Some(m) => match m.as_str() {
            "mtp" | "deepseek_mtp" | "glm4_moe_mtp" | "qwen3_next_mtp" | "mimo_mtp" => {
                SpecMethod::Mtp
            }
            "eagle" => SpecMethod::Eagle,
            "eagle3" => SpecMethod::Eagle3,
            "draft_model" => SpecMethod::DraftModel,
            "ngram" => SpecMethod::Ngram,
            _ => {
                return Err(inv(
                    "speculative_config.method",
                    m,
                    "use one of mtp, eagle, eagle3, draft_model, ngram",
                ))
            }
        },
        None => {
            return Err(inv(
                "speculative_config.method",
                "missing",
                "state the drafter: \"method\": \"mtp\" | \"eagle\" | \"eagle3\" | \"draft_model\" | \"ngram\"",
            ))
        }
    };
    let k = match raw.num_speculative_tokens {
        Some(k) if (1..=MAX_SPECULATIVE_TOKENS as i64).contains(&k) => k as u32,
        Some(k) => {
            return Err(inv(
                "speculative_config.num_speculative_tokens",
                k,
                format!("must be an integer from 1 to {MAX_SPECULATIVE_TOKENS}"),
            ))
        }
        None => {
            return Err(inv(
                "speculative_config.num_speculative_tokens",
                "missing",
                "state how many drafts are proposed per step, e.g. 3",
            ))
        }
    };
    for (field, v) in [
        (
            "speculative_config.prompt_lookup_max",
            raw.prompt_lookup_max,
        ),
        (
            "speculative_config.prompt_lookup_min",
            raw.prompt_lookup_min,
        ),
        (
            "speculative_config.draft_tensor_parallel_size",
            raw.draft_tensor_parallel_size,
        ),
    ] {
        if let Some(x) = v {
            if x < 1 {
                return Err(inv(field, x, "must be a positive integer"));
            }
        }
    }
    let mtp_layers = model.num_mtp_layers;
    let draft_model = match method {
        SpecMethod::Mtp => {
            if mtp_layers == 0 {
                return Err(inv(
                    "speculative_config.method",
                    "mtp",
                    format!(
                        "{} has no MTP layers (config.json num_nextn_predict_layers is 0 or absent); use eagle, draft_model or ngram",
                        model.name
                    ),
                ));
            }
            None
        }
        SpecMethod::DraftModel => match raw.model.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => {
                crate::model::catalog::load(m).map_err(|e| {
                    inv(
                        "speculative_config.model",
                        m,
                        format!("the draft model must be a catalog model ({e})"),
                    )
                })?;
                Some(m.to_string())
            }
            _ => {
                return Err(inv(
                    "speculative_config.model",
                    "missing",
                    "a draft_model drafter needs \"model\": a catalog model id, e.g. \"meta-llama/Meta-Llama-3.1-8B\"",
                ))
            }
        },
        _ => None,
    };
    let Some(acc) = acc else {
        return Err(inv(
            "speculative_acceptance",
            "missing",
            "state the acceptance: {\"mean_acceptance_length\": 2.8}, {\"acceptance_rate_per_pos\": [0.8, 0.6, 0.4]}, {\"accepted_pmf\": [...]} or {\"accepted_values\": [2, 3], \"mean_acceptance_length\": 3.51}",
        ));
    };
    let pmf = acceptance_pmf(acc, k)?;
    let mean = 1.0
        + pmf
            .iter()
            .enumerate()
            .map(|(j, p)| j as f64 * p)
            .sum::<f64>();
    Ok(Some(SpeculativeSettings {
        method,
        num_speculative_tokens: k,
        draft_model,
        mtp_layers,
        accepted_pmf: pmf,
        mean_acceptance_length: mean,
        raw: raw.clone(),
        raw_acceptance: acc.clone(),
    }))
}

/// The distribution of accepted drafts, P(j) for j = 0..=k.
pub fn acceptance_pmf(acc: &RawSpecAcceptance, k: u32) -> Result<Vec<f64>, DeployError> {
    let kk = k as usize;
    let forms = [
        acc.acceptance_rate_per_pos.is_some(),
        acc.accepted_pmf.is_some(),
        acc.accepted_values.is_some() || acc.mean_acceptance_length.is_some(),
    ];
    if forms.iter().filter(|&&f| f).count() != 1 {
        return Err(inv(
            "speculative_acceptance",
            "ambiguous",
            "give exactly one of mean_acceptance_length (optionally with accepted_values), acceptance_rate_per_pos, accepted_pmf",
        ));
    }
    let mut pmf = vec![0.0; kk + 1];
    if let Some(r) = &acc.acceptance_rate_per_pos {
        if r.len() != kk {
            return Err(inv(
                "speculative_acceptance.acceptance_rate_per_pos",
                format!("{} values", r.len()),
                format!("give one rate per draft position ({k} = num_speculative_tokens)"),
            ));
        }
        let mut prev = 1.0;
        for (i, &x) in r.iter().enumerate() {
            if !(x.is_finite() && (0.0..=1.0).contains(&x)) {
                return Err(inv(
                    "speculative_acceptance.acceptance_rate_per_pos",
                    x,
                    "every rate must be in [0, 1]",
                ));
            }
            if x > prev {
                return Err(inv(
                    "speculative_acceptance.acceptance_rate_per_pos",
                    format!("{x} at position {i}"),
                    "rates must be non-increasing (rate_i = P(at least i + 1 drafts accepted))",
                ));
            }
            pmf[i] = prev - x;
            prev = x;
        }
        pmf[kk] = prev;
    } else if let Some(p) = &acc.accepted_pmf {
        if p.len() != kk + 1 {
            return Err(inv(
                "speculative_acceptance.accepted_pmf",
                format!("{} values", p.len()),
                format!("give P(accepted = j) for j = 0..={k} ({} values)", kk + 1),
            ));
        }
        for &x in p {
            if !(x.is_finite() && x >= 0.0) {
                return Err(inv(
                    "speculative_acceptance.accepted_pmf",
                    x,
                    "probabilities must be >= 0",
                ));
            }
        }
        let s: f64 = p.iter().sum();
        if (s - 1.0).abs() > 1e-6 {
            return Err(inv(
                "speculative_acceptance.accepted_pmf",
                format!("sum {s}"),
                "probabilities must sum to 1",
            ));
        }
        pmf.copy_from_slice(p);
    } else {
        let Some(m) = acc.mean_acceptance_length else {
            return Err(inv(
                "speculative_acceptance.mean_acceptance_length",
                "missing",
                "accepted_values needs the mean acceptance length too",
            ));
        };
        if !(m.is_finite() && (1.0..=1.0 + k as f64).contains(&m)) {
            return Err(inv(
                "speculative_acceptance.mean_acceptance_length",
                m,
                format!("must be in [1, {}] (1 + num_speculative_tokens)", 1 + k),
            ));
        }
        let acc_mean = m - 1.0;
        match &acc.accepted_values {
            None => {
                // Chained model: solve a + ... + a^k = m - 1 by bisection (monotone in a).
                let (mut lo, mut hi) = (0.0f64, 1.0f64);
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if chained_mean(mid, k) < acc_mean {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                let a = 0.5 * (lo + hi);
                let mut reach = 1.0;
                for p in pmf.iter_mut().take(kk) {
                    *p = reach * (1.0 - a);
                    reach *= a;
                }
                pmf[kk] = reach;
            }
            Some(vals) => {
                let mut v = vals.clone();
                v.sort_unstable();
                v.dedup();
                let bad = v.iter().any(|&x| x < 0 || x > k as i64);
                if bad || v.is_empty() || v.len() > 2 || (v.len() == 2 && v[1] != v[0] + 1) {
                    return Err(inv(
                        "speculative_acceptance.accepted_values",
                        format!("{vals:?}"),
                        format!("give one value or two adjacent values in 0..={k}; for other shapes give accepted_pmf"),
                    ));
                }
                let lo = v[0] as f64;
                if v.len() == 1 {
                    if (acc_mean - lo).abs() > 1e-9 {
                        return Err(inv(
                            "speculative_acceptance.mean_acceptance_length",
                            m,
                            format!(
                                "with one accepted value {lo} the mean acceptance length is {}",
                                lo + 1.0
                            ),
                        ));
                    }
                    pmf[v[0] as usize] = 1.0;
                } else {
                    let f = acc_mean - lo;
                    if !(0.0..=1.0).contains(&f) {
                        return Err(inv(
                            "speculative_acceptance.mean_acceptance_length",
                            m,
                            format!(
                                "with {} or {} accepted the mean acceptance length lies in [{}, {}]",
                                v[0],
                                v[1],
                                lo + 1.0,
                                lo + 2.0
                            ),
                        ));
                    }
                    pmf[v[0] as usize] = 1.0 - f;
                    pmf[v[1] as usize] = f;
                }
            }
        }
    }
    Ok(pmf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_point_schedule_of_the_report() {
        let acc = RawSpecAcceptance {
            mean_acceptance_length: Some(3.51),
            accepted_values: Some(vec![2, 3]),
            ..Default::default()
        };
        let p = acceptance_pmf(&acc, 3).unwrap();
        assert_eq!(p[0], 0.0);
        assert_eq!(p[1], 0.0);
        assert!((p[2] - 0.49).abs() < 1e-12 && (p[3] - 0.51).abs() < 1e-12);
        let r = pmf_to_rates(&p);
        assert!((r[0] - 1.0).abs() < 1e-12 && (r[1] - 1.0).abs() < 1e-12);
        assert!((r[2] - 0.51).abs() < 1e-12);
    }

    #[test]
    fn rates_and_mean_forms_agree() {
        let acc = RawSpecAcceptance {
            acceptance_rate_per_pos: Some(vec![0.8, 0.6, 0.3]),
            ..Default::default()
        };
        let p = acceptance_pmf(&acc, 3).unwrap();
        let mean = p.iter().enumerate().map(|(j, x)| j as f64 * x).sum::<f64>();
        assert!((mean - 1.7).abs() < 1e-12, "mean accepted = sum of rates");
        let acc = RawSpecAcceptance {
            mean_acceptance_length: Some(2.7),
            ..Default::default()
        };
        let p = acceptance_pmf(&acc, 3).unwrap();
        let mean = p.iter().enumerate().map(|(j, x)| j as f64 * x).sum::<f64>();
        assert!((mean - 1.7).abs() < 1e-9);
        let r = pmf_to_rates(&p);
        assert!(r.windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn bad_acceptance_names_the_field() {
        let acc = RawSpecAcceptance {
            acceptance_rate_per_pos: Some(vec![0.5, 0.7]),
            ..Default::default()
        };
        let e = acceptance_pmf(&acc, 2).unwrap_err();
        assert_eq!(e.field(), "speculative_acceptance.acceptance_rate_per_pos");
        let acc = RawSpecAcceptance {
            mean_acceptance_length: Some(4.5),
            ..Default::default()
        };
        let e = acceptance_pmf(&acc, 3).unwrap_err();
        assert_eq!(e.field(), "speculative_acceptance.mean_acceptance_length");
        assert!(e.to_string().contains("[1, 4]"));
    }
}
