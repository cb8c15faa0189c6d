//! The form's speculative decoding part (docs/engine.md "Speculative decoding"): the scenario's
//! `engine.speculative_config` (vLLM's `--speculative-config`: method, `num_speculative_tokens`,
//! the drafter `model`) and `engine.speculative_acceptance` stated one of the core's ways (mean
//! acceptance length; vLLM's per-position acceptance rates; accepted values with the mean, e.g.
//! "2 or 3 accepted, mean 3.51"; or P(accepted = j)), with an exact round trip. The methods and
//! the range of `num_speculative_tokens` are the core's (`SpecMethod::ALL`,
//! `MAX_SPECULATIVE_TOKENS`); only syntax is checked here, the core validates the rest
//! (`speculative::resolve`) and its errors come back on these keys ([`spec_form_key`]). Keys of
//! the config the form has no control for (`prompt_lookup_*`, `draft_tensor_parallel_size`) are
//! kept from the scenario the form was loaded from. In a disaggregated deployment the setting is
//! the decode pool's; the core drops it on the prefill pool (`topology::pools::pool_scenario`).

use crate::core_api::speculative::{RawSpecAcceptance, RawSpeculativeConfig, SpecMethod};
use crate::form::{fmt_f, FieldErrors};

pub const METHOD: &str = "spec_method";
pub const NUM_TOKENS: &str = "spec_num_tokens";
pub const DRAFT_MODEL: &str = "spec_model";
pub const ACCEPTANCE: &str = "spec_acceptance";
pub const MEAN: &str = "spec_mean";
pub const RATES: &str = "spec_rates";
pub const VALUES: &str = "spec_values";
pub const PMF: &str = "spec_pmf";

pub use crate::core_api::speculative::MAX_SPECULATIVE_TOKENS;

/// The method choices: "" (no speculation), then the core's drafters by vLLM's name.
pub fn methods() -> Vec<&'static str> {
    std::iter::once("")
        .chain(SpecMethod::ALL.iter().map(|m| m.name()))
        .collect()
}

/// Whether `method` (vLLM's name) takes a drafter checkpoint (`model`): required for
/// `draft_model`, the head's name for EAGLE / EAGLE-3 (priced from the target's shape).
pub fn takes_model(method: &str) -> bool {
    matches!(method.trim(), "eagle" | "eagle3" | "draft_model")
}

/// How the acceptance is stated: (value, label). [`KEEP`] = the scenario's own, untouched.
pub const ACCEPTANCE_KINDS: [(&str, &str); 4] = [
    ("mean", "mean acceptance length"),
    ("rates", "per-position acceptance rates (vLLM metrics)"),
    (
        "values",
        "accepted values and mean (e.g. 2 or 3, mean 3.51)",
    ),
    ("pmf", "P(accepted = j), j = 0..k"),
];
pub const KEEP: &str = "keep";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecForm {
    /// "" (off), a name of [`methods`], or the scenario's own spelling (e.g. `deepseek_mtp`).
    pub method: String,
    pub num_speculative_tokens: String,
    pub model: String,
    /// "" (not stated), a kind of [`ACCEPTANCE_KINDS`], or [`KEEP`].
    pub acceptance: String,
    /// Mean acceptance length (kinds `mean` and `values`).
    pub mean: String,
    /// Per-position rates, comma separated.
    pub rates: String,
    /// One value or two adjacent values.
    pub values: String,
    pub pmf: String,
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

fn join_f(v: &[f64]) -> String {
    v.iter().map(|x| fmt_f(*x)).collect::<Vec<_>>().join(", ")
}

/// The kind a stated acceptance is, or [`KEEP`] when it mixes forms (the core says which).
fn kind_of(a: &RawSpecAcceptance) -> &'static str {
    match (
        a.mean_acceptance_length.is_some(),
        a.acceptance_rate_per_pos.is_some(),
        a.accepted_values.is_some(),
        a.accepted_pmf.is_some(),
    ) {
        (true, false, false, false) => "mean",
        (false, true, false, false) => "rates",
        (true, false, true, false) => "values",
        (false, false, false, true) => "pmf",
        _ => KEEP,
    }
}

impl SpecForm {
    pub fn of(c: Option<&RawSpeculativeConfig>, a: Option<&RawSpecAcceptance>) -> SpecForm {
        let mut f = SpecForm::default();
        if let Some(c) = c {
            f.method = c.method.clone().unwrap_or_default();
            f.num_speculative_tokens = c
                .num_speculative_tokens
                .map(|k| k.to_string())
                .unwrap_or_default();
            f.model = c.model.clone().unwrap_or_default();
        }
        if let Some(a) = a {
            f.acceptance = kind_of(a).into();
            f.mean = a.mean_acceptance_length.map(fmt_f).unwrap_or_default();
            f.rates = a
                .acceptance_rate_per_pos
                .as_deref()
                .map(join_f)
                .unwrap_or_default();
            f.values = a.accepted_values.as_deref().map(join).unwrap_or_default();
            f.pmf = a.accepted_pmf.as_deref().map(join_f).unwrap_or_default();
        }
        f
    }

    /// Turning speculation off clears the acceptance too (the core refuses one without the other).
    pub fn set_method(&mut self, m: String) {
        if m.trim().is_empty() {
            self.acceptance.clear();
        } else if self.acceptance.is_empty() {
            self.acceptance = "mean".into();
        }
        self.method = m;
    }

    /// The scenario's `speculative_config` and `speculative_acceptance` with these fields over
    /// `old` (the config's other keys and a [`KEEP`] acceptance are kept).
    pub fn apply(
        &self,
        old: (Option<RawSpeculativeConfig>, Option<RawSpecAcceptance>),
        e: &mut FieldErrors,
    ) -> (Option<RawSpeculativeConfig>, Option<RawSpecAcceptance>) {
        let method = self.method.trim();
        let config = (!method.is_empty()).then(|| RawSpeculativeConfig {
            method: Some(method.to_string()),
            num_speculative_tokens: opt_int(e, NUM_TOKENS, &self.num_speculative_tokens),
            model: Some(self.model.trim())
                .filter(|m| !m.is_empty())
                .map(String::from),
            ..old.0.unwrap_or_default()
        });
        let mean = |e: &mut FieldErrors| Some(num(e, MEAN, &self.mean));
        let acceptance = match self.acceptance.trim() {
            "" => None,
            KEEP => old.1,
            "mean" => Some(RawSpecAcceptance {
                mean_acceptance_length: mean(e),
                ..Default::default()
            }),
            "rates" => Some(RawSpecAcceptance {
                acceptance_rate_per_pos: Some(list(e, RATES, &self.rates, parse_f)),
                ..Default::default()
            }),
            "values" => Some(RawSpecAcceptance {
                accepted_values: Some(list(e, VALUES, &self.values, |t| t.parse().ok())),
                mean_acceptance_length: mean(e),
                ..Default::default()
            }),
            "pmf" => Some(RawSpecAcceptance {
                accepted_pmf: Some(list(e, PMF, &self.pmf, parse_f)),
                ..Default::default()
            }),
            _ => {
                e.insert(ACCEPTANCE, "choose how the acceptance is stated".into());
                None
            }
        };
        (config, acceptance)
    }
}

fn parse_f(t: &str) -> Option<f64> {
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn num(e: &mut FieldErrors, key: &'static str, t: &str) -> f64 {
    match parse_f(t.trim()) {
        Some(v) => v,
        None => {
            let m = if t.trim().is_empty() {
                "required"
            } else {
                "a number"
            };
            e.insert(key, m.into());
            0.0
        }
    }
}

fn opt_int(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<i64> {
    let t = t.trim();
    if t.is_empty() {
        return None;
    }
    t.parse().map(Some).unwrap_or_else(|_| {
        e.insert(
            key,
            format!("a whole number from 1 to {MAX_SPECULATIVE_TOKENS}"),
        );
        None
    })
}

/// "0.9, 0.7 0.4" (commas or spaces) into values; the core checks counts and ranges.
fn list<T>(
    e: &mut FieldErrors,
    key: &'static str,
    t: &str,
    parse: fn(&str) -> Option<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    for part in t
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        match parse(part) {
            Some(v) => out.push(v),
            None => {
                e.insert(key, format!("`{part}` is not a number"));
                return Vec::new();
            }
        }
    }
    if out.is_empty() {
        e.insert(key, "give at least one value".into());
    }
    out
}

/// The form key of a core error under `engine.speculative_config` or
/// `engine.speculative_acceptance` (None for other paths). `rest` starts at `speculative_`.
pub fn spec_form_key(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("engine.")?;
    Some(if let Some(r) = rest.strip_prefix("speculative_config") {
        match r.trim_start_matches('.') {
            "num_speculative_tokens" => NUM_TOKENS,
            "model" => DRAFT_MODEL,
            _ => METHOD,
        }
    } else if let Some(r) = rest.strip_prefix("speculative_acceptance") {
        match r.trim_start_matches('.') {
            "mean_acceptance_length" => MEAN,
            "acceptance_rate_per_pos" => RATES,
            "accepted_values" => VALUES,
            "accepted_pmf" => PMF,
            _ => ACCEPTANCE,
        }
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::scenario::Scenario;
    use crate::form::Form;
    use crate::form_keys::form_key;

    fn seed() -> Scenario {
        let text = include_str!("../../tests/golden/scenarios/dsv4flash_tp8_h200_mtp.json");
        Scenario::from_json(text).unwrap()
    }

    fn with(acc: &str) -> Scenario {
        let mut s = seed();
        s.engine.speculative_acceptance = Some(serde_json::from_str(acc).unwrap());
        s
    }

    #[test]
    fn every_acceptance_kind_round_trips_through_the_form() {
        for (acc, kind) in [
            (
                r#"{"accepted_values":[2,3],"mean_acceptance_length":3.51}"#,
                "values",
            ),
            (r#"{"mean_acceptance_length":2.7}"#, "mean"),
            (r#"{"acceptance_rate_per_pos":[0.8,0.6,0.3]}"#, "rates"),
            (r#"{"accepted_pmf":[0.1,0.2,0.3,0.4]}"#, "pmf"),
            // Mixed forms are kept as they are (the core refuses them, naming the field).
            (
                r#"{"mean_acceptance_length":2.7,"accepted_pmf":[0,0,0,1]}"#,
                KEEP,
            ),
        ] {
            let s = with(acc);
            let f = Form::from_scenario(&s);
            assert_eq!(f.spec.acceptance, kind, "{acc}");
            assert_eq!(f.to_scenario(), Ok(s.clone()), "{acc}");
            // Re-made from its own output without the base: the same scenario.
            let mut f2 = Form::from_scenario(&s);
            f2.base.engine.speculative_config = None;
            f2.base.engine.speculative_acceptance = None;
            if kind != KEEP {
                assert_eq!(f2.to_scenario().unwrap().to_json(), s.to_json(), "{acc}");
            }
        }
        // Aliases the core accepts (a pasted `deepseek_mtp`) and kept keys survive too.
        let mut s = seed();
        s.engine.speculative_config = Some(
            serde_json::from_str(
                r#"{"method":"deepseek_mtp","num_speculative_tokens":3,"prompt_lookup_max":4}"#,
            )
            .unwrap(),
        );
        assert_eq!(Form::from_scenario(&s).to_scenario(), Ok(s));
        let s = Scenario::default_scenario();
        let f = Form::from_scenario(&s);
        assert_eq!(
            (f.spec.method.as_str(), f.spec.acceptance.as_str()),
            ("", "")
        );
        assert_eq!(f.to_scenario(), Ok(s));
    }

    #[test]
    fn the_controls_write_the_reports_mtp_arm() {
        let target = seed();
        let mut s = target.clone();
        s.engine.speculative_config = None;
        s.engine.speculative_acceptance = None;
        let mut f = Form::from_scenario(&s);
        f.spec.set_method("mtp".into());
        assert_eq!(f.spec.acceptance, "mean");
        f.spec.num_speculative_tokens = "3".into();
        f.spec.acceptance = "values".into();
        f.spec.values = "2, 3".into();
        f.spec.mean = "3.51".into();
        assert_eq!(f.to_scenario(), Ok(target));
        f.spec.set_method(String::new());
        assert_eq!(f.to_scenario(), Ok(s), "off clears both");
        assert_eq!(
            methods(),
            ["", "mtp", "eagle", "eagle3", "draft_model", "ngram"]
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut f = Form::from_scenario(&seed());
        f.spec.num_speculative_tokens = "three".into();
        f.spec.values = "2, x".into();
        f.spec.mean = String::new();
        let e = f.to_scenario().unwrap_err();
        assert!(e[NUM_TOKENS].contains("1 to 32"), "{}", e[NUM_TOKENS]);
        assert!(e[VALUES].contains("`x`"));
        assert_eq!(e[MEAN], "required");
        // The core's errors land on the control that holds the value.
        let cases = [
            (
                r#"{"method":"medusa","num_speculative_tokens":3}"#,
                r#"{"mean_acceptance_length":2}"#,
                METHOD,
            ),
            (
                r#"{"method":"mtp","num_speculative_tokens":40}"#,
                r#"{"mean_acceptance_length":2}"#,
                NUM_TOKENS,
            ),
            (
                r#"{"method":"draft_model","num_speculative_tokens":3}"#,
                r#"{"mean_acceptance_length":2}"#,
                DRAFT_MODEL,
            ),
            (
                r#"{"method":"mtp","num_speculative_tokens":3}"#,
                r#"{"mean_acceptance_length":5}"#,
                MEAN,
            ),
            (
                r#"{"method":"mtp","num_speculative_tokens":3}"#,
                r#"{"acceptance_rate_per_pos":[0.5,0.7,0.1]}"#,
                RATES,
            ),
            (
                r#"{"method":"mtp","num_speculative_tokens":3}"#,
                r#"{"accepted_values":[1,3],"mean_acceptance_length":3}"#,
                VALUES,
            ),
            (
                r#"{"method":"mtp","num_speculative_tokens":3}"#,
                r#"{"accepted_pmf":[0.5,0.6,0,0]}"#,
                PMF,
            ),
        ];
        for (c, a, key) in cases {
            let mut s = seed();
            s.engine.speculative_config = Some(serde_json::from_str(c).unwrap());
            s.engine.speculative_acceptance = Some(serde_json::from_str(a).unwrap());
            let err = s.resolve().unwrap_err();
            assert_eq!(form_key(&s, &err.field()), key, "{c} {a}: {err}");
        }
        let mut s = seed();
        s.engine.speculative_acceptance = None;
        let err = s.resolve().unwrap_err();
        assert_eq!(form_key(&s, &err.field()), ACCEPTANCE, "{err}");
    }

    #[test]
    fn with_pd_pools_the_decode_pools_errors_land_on_the_controls_and_the_prefill_pool_drafts_nothing(
    ) {
        let text = include_str!("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json");
        let mut s = Scenario::from_json(text).unwrap();
        let mut f = Form::from_scenario(&s);
        f.spec.set_method("mtp".into());
        f.spec.num_speculative_tokens = "3".into();
        f.spec.acceptance = "rates".into();
        f.spec.rates = "0.5, 0.7, 0.2".into();
        let bad = f.to_scenario().unwrap();
        let err = bad.resolve().unwrap_err();
        assert!(
            err.field()
                .starts_with("topology.decode.engine.speculative_acceptance"),
            "{}",
            err.field()
        );
        assert_eq!(form_key(&bad, &err.field()), RATES);
        f.spec.rates = "0.9, 0.7, 0.2".into();
        let good = f.to_scenario().unwrap();
        let r = good.resolve().unwrap();
        let d = r.disagg.as_ref().unwrap();
        assert!(r.deployment.engine.speculative.is_some(), "decode drafts");
        assert!(
            d.prefill.deployment.engine.speculative.is_none(),
            "prefill does not"
        );
        // A decode pool's own setting stays the pool's error.
        s = good.clone();
        let pool = s.topology.as_mut().unwrap().decode.as_mut().unwrap();
        let mut e = pool.engine.clone().unwrap_or_default();
        e.speculative_config = good.engine.speculative_config.clone();
        e.speculative_acceptance =
            Some(serde_json::from_str(r#"{"mean_acceptance_length": 9}"#).unwrap());
        pool.engine = Some(e);
        let err = s.resolve().unwrap_err();
        assert_eq!(form_key(&s, &err.field()), "decode_pool", "{}", err.field());
    }
}
