//! Measured data in the share link and in a downloadable file.
//!
//! Link: the fragment keeps its scenario part unchanged (`s=v1.<scenario>`, the core's
//! `share::encode`) and gains an optional second part `&m=v1.<measured>`, encoded with the same
//! codec (zlib + base64url, Adler-32 checked) over the JSON of [`MeasuredPayload`]. Old links
//! (`#s=v1...` alone) open as before; a page that does not know `m=` ignores it. The measured part
//! is left out of the link when it is longer than [`MAX_LINK_MEASURED_BYTES`]; the page then offers
//! the same content as a file ([`Bundle`]: scenario + measured data) and an "open file" input.

use crate::compare_ui::state::ArmSetup;
use crate::core_api::compare::{LevelKind, MeasuredLevel, MeasuredRun, SourceFormat};
use crate::core_api::metric::MetricId;
use crate::core_api::share;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest encoded measured part put in a link (32 KiB). The core's decoder accepts 64 KiB per
/// part; 32 KiB keeps the whole URL well under the lengths chat tools and browsers keep (an
/// **assumption**: there is no standard limit; Chromium accepts 2 MB, some chat tools cut at a
/// few tens of kilobytes).
pub const MAX_LINK_MEASURED_BYTES: usize = 32 * 1024;
/// Version of [`MeasuredPayload`] and [`Bundle`].
pub const PAYLOAD_VERSION: u32 = 1;

/// Numbers travel as decimal strings (Rust's shortest round-trip form, parsed back with
/// `str::parse`), because serde_json's default number parser is not exact to the last bit and a
/// reopened link must score exactly the same numbers.
mod exact {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    fn parse<E: Error>(s: &str) -> Result<f64, E> {
        s.parse::<f64>()
            .map_err(|_| E::custom(format!("\"{s}\" is not a number")))
    }
    pub fn ser<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v}"))
    }
    pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        parse(&String::deserialize(d)?)
    }
    pub mod map {
        use super::*;
        pub fn serialize<S: Serializer>(
            m: &BTreeMap<String, f64>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_map(m.iter().map(|(k, v)| (k, format!("{v}"))))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<String, f64>, D::Error> {
            BTreeMap::<String, String>::deserialize(d)?
                .into_iter()
                .map(|(k, v)| Ok((k, parse(&v)?)))
                .collect()
        }
    }
}

/// One measured level as carried in a link: metrics by `MetricId::name()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelPayload {
    #[serde(serialize_with = "exact::ser", deserialize_with = "exact::de")]
    pub level: f64,
    #[serde(with = "exact::map")]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// One arm: its measured levels (with every exclusion already applied), the KV tokens vLLM
/// logged, and the arm's own scenario when it is pinned (absent = the link's scenario).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmPayload {
    pub arm: String,
    /// "concurrency", "request_rate" or "burst".
    pub level_kind: String,
    pub levels: Vec<LevelPayload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_tokens_logged: Option<u64>,
    /// Canonical scenario JSON (`Scenario::to_json`) of a pinned arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredPayload {
    pub version: u32,
    pub arms: Vec<ArmPayload>,
}

/// "Download scenario + measured data": one JSON file the page's "open file" reads back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// Always "servesim-comparison".
    pub kind: String,
    pub version: u32,
    /// Canonical scenario JSON of the page (the default pairing of every arm).
    pub scenario: String,
    pub measured: MeasuredPayload,
}

pub const BUNDLE_KIND: &str = "servesim-comparison";

fn kind_key(k: LevelKind) -> &'static str {
    match k {
        LevelKind::Concurrency => "concurrency",
        LevelKind::RequestRate => "request_rate",
        LevelKind::Burst => "burst",
    }
}

fn kind_from_key(s: &str) -> Result<LevelKind, String> {
    match s {
        "concurrency" => Ok(LevelKind::Concurrency),
        "request_rate" => Ok(LevelKind::RequestRate),
        "burst" => Ok(LevelKind::Burst),
        other => Err(format!(
            "unknown level kind \"{other}\" (expected concurrency, request_rate or burst)"
        )),
    }
}

/// The payload of the runs the page scores (exclusions and logged KV tokens applied) and each
/// arm's pinned scenario.
pub fn payload_of(runs: &[MeasuredRun], arms: &BTreeMap<String, ArmSetup>) -> MeasuredPayload {
    MeasuredPayload {
        version: PAYLOAD_VERSION,
        arms: runs
            .iter()
            .map(|r| ArmPayload {
                arm: r.arm.clone(),
                level_kind: kind_key(r.level_kind).into(),
                levels: r
                    .levels
                    .iter()
                    .map(|l| LevelPayload {
                        level: l.level,
                        metrics: l.metrics.iter().map(|(m, v)| (m.name(), *v)).collect(),
                        excluded: l.excluded.clone(),
                    })
                    .collect(),
                kv_cache_tokens_logged: r.kv_cache_tokens_logged,
                scenario: arms.get(&r.arm).and_then(|a| a.scenario.clone()),
            })
            .collect(),
    }
}

/// Back to runs and arm setups; every value is checked as the importers check theirs.
pub fn runs_of(
    p: &MeasuredPayload,
) -> Result<(Vec<MeasuredRun>, BTreeMap<String, ArmSetup>), String> {
    if p.version != PAYLOAD_VERSION {
        return Err(format!(
            "measured data version {} is not supported: this page reads version {PAYLOAD_VERSION}",
            p.version
        ));
    }
    let mut runs = Vec::new();
    let mut arms = BTreeMap::new();
    for a in &p.arms {
        if a.arm.trim().is_empty() {
            return Err("an arm has an empty name".into());
        }
        if runs.iter().any(|r: &MeasuredRun| r.arm == a.arm) {
            return Err(format!("arm \"{}\" appears twice", a.arm));
        }
        let kind = kind_from_key(&a.level_kind)?;
        let mut levels: Vec<MeasuredLevel> = Vec::new();
        for l in &a.levels {
            if !(l.level.is_finite() && l.level > 0.0) {
                return Err(format!(
                    "arm \"{}\": level {} must be a positive number",
                    a.arm, l.level
                ));
            }
            if levels
                .iter()
                .any(|x| crate::core_api::compare::levels_equal(x.level, l.level))
            {
                return Err(format!(
                    "arm \"{}\": level {} appears twice",
                    a.arm, l.level
                ));
            }
            let mut metrics = BTreeMap::new();
            for (name, v) in &l.metrics {
                let m = MetricId::from_name(name)
                    .ok_or_else(|| format!("arm \"{}\": unknown metric \"{name}\"", a.arm))?;
                if !(v.is_finite() && *v >= 0.0) {
                    return Err(format!(
                        "arm \"{}\", level {}: {name} = {v} must be a finite number >= 0",
                        a.arm, l.level
                    ));
                }
                metrics.insert(m, *v);
            }
            levels.push(MeasuredLevel {
                level: l.level,
                metrics,
                excluded: l.excluded.clone(),
            });
        }
        levels.sort_by(|x, y| x.level.total_cmp(&y.level));
        if let Some(s) = &a.scenario {
            crate::core_api::scenario::Scenario::from_json(s)
                .map_err(|e| format!("arm \"{}\": its scenario is not valid: {e}", a.arm))?;
        }
        arms.insert(
            a.arm.clone(),
            ArmSetup {
                scenario: a.scenario.clone(),
                ..ArmSetup::default()
            },
        );
        runs.push(MeasuredRun {
            arm: a.arm.clone(),
            level_kind: kind,
            levels,
            kv_cache_tokens_logged: a.kv_cache_tokens_logged,
            source_format: SourceFormat::Csv,
        });
    }
    Ok((runs, arms))
}

/// `v1.<...>` for the `m=` part.
pub fn encode_payload(p: &MeasuredPayload) -> String {
    share::encode(&serde_json::to_string(p).expect("payload serialises"))
}

pub fn decode_payload(code: &str) -> Result<MeasuredPayload, String> {
    let json = share::decode(code).map_err(|e| format!("the measured data in the link: {e}"))?;
    serde_json::from_str(&json)
        .map_err(|e| format!("the measured data in the link is not valid: {e}"))
}

/// The fragment's parts: (`s=...` part, `m=...` code) — any order, `&`-separated.
pub fn split_fragment(frag: &str) -> (String, Option<String>) {
    let frag = frag.trim_start_matches('#');
    let mut scenario = String::new();
    let mut measured = None;
    for part in frag.split('&') {
        if let Some(m) = part.strip_prefix("m=") {
            measured = Some(m.to_string());
        } else if !part.is_empty() && scenario.is_empty() {
            scenario = part.to_string();
        }
    }
    (scenario, measured)
}

/// The scenario part alone (what the page's scenario codec reads).
pub fn scenario_part(frag: &str) -> String {
    split_fragment(frag).0
}

/// Result of adding measured data to a fragment.
#[derive(Clone, Debug, PartialEq)]
pub enum WithMeasured {
    /// The fragment with `&m=...` (or unchanged when there is nothing to add).
    Fits(String),
    /// Too long for a link: the fragment without it, and the measured part's encoded length.
    TooLong {
        fragment: String,
        encoded_len: usize,
    },
}

/// `scenario_frag` (`s=v1...`) plus the measured part when it fits the limit.
pub fn with_measured(scenario_frag: &str, payload: Option<&MeasuredPayload>) -> WithMeasured {
    let base = scenario_part(scenario_frag);
    match payload {
        Some(p) if !p.arms.is_empty() => {
            let code = encode_payload(p);
            if code.len() > MAX_LINK_MEASURED_BYTES {
                WithMeasured::TooLong {
                    fragment: base,
                    encoded_len: code.len(),
                }
            } else {
                WithMeasured::Fits(format!("{base}&m={code}"))
            }
        }
        _ => WithMeasured::Fits(base),
    }
}

impl WithMeasured {
    pub fn fragment(&self) -> &str {
        match self {
            WithMeasured::Fits(f) | WithMeasured::TooLong { fragment: f, .. } => f,
        }
    }
}

pub fn bundle_json(scenario_json: &str, payload: &MeasuredPayload) -> String {
    serde_json::to_string_pretty(&Bundle {
        kind: BUNDLE_KIND.into(),
        version: PAYLOAD_VERSION,
        scenario: scenario_json.to_string(),
        measured: payload.clone(),
    })
    .expect("bundle serialises")
}

/// Reads a file made by [`bundle_json`]; the scenario is validated by the core.
pub fn read_bundle(text: &str) -> Result<Bundle, String> {
    let b: Bundle = serde_json::from_str(text).map_err(|e| {
        format!("this file is not a ServeSim comparison (scenario + measured data): {e}")
    })?;
    if b.kind != BUNDLE_KIND || b.version != PAYLOAD_VERSION {
        return Err(format!(
            "this file is a \"{}\" version {}; this page reads \"{BUNDLE_KIND}\" version {PAYLOAD_VERSION}",
            b.kind, b.version
        ));
    }
    crate::core_api::scenario::Scenario::from_json(&b.scenario)
        .map_err(|e| format!("the file's scenario is not valid: {e}"))?;
    runs_of(&b.measured)?;
    Ok(b)
}

/// Measured runs as a CSV table the importer reads back to the same runs (one row per arm and
/// level: `arm`, the level column, every metric by its `MetricId::name()` in Rust's shortest
/// round-trip form, and `excluded` when a level carries a reason). The paste box shows this for
/// data opened from a link or a file, so the user sees (and can edit) what was restored.
pub fn runs_as_csv(runs: &[MeasuredRun]) -> String {
    let level_col = |k: LevelKind| match k {
        LevelKind::Concurrency => "concurrency",
        LevelKind::RequestRate => "request_rate",
        LevelKind::Burst => "burst",
    };
    let quote = |t: &str| {
        if t.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", t.replace('"', "\"\""))
        } else {
            t.to_string()
        }
    };
    let mut out = String::new();
    // Runs of different level kinds need their own header: one table per kind.
    let mut kinds: Vec<LevelKind> = Vec::new();
    for r in runs {
        if !kinds.contains(&r.level_kind) {
            kinds.push(r.level_kind);
        }
    }
    for kind in kinds {
        let of_kind: Vec<&MeasuredRun> = runs.iter().filter(|r| r.level_kind == kind).collect();
        let mut metrics: Vec<MetricId> = Vec::new();
        for r in &of_kind {
            for l in &r.levels {
                for m in l.metrics.keys() {
                    if !metrics.contains(m) {
                        metrics.push(*m);
                    }
                }
            }
        }
        metrics.sort();
        let any_excluded = of_kind
            .iter()
            .any(|r| r.levels.iter().any(|l| l.excluded.is_some()));
        if !out.is_empty() {
            out.push('\n');
        }
        let mut head = vec!["arm".to_string(), level_col(kind).to_string()];
        head.extend(metrics.iter().map(|m| m.name().to_string()));
        if any_excluded {
            head.push("excluded".into());
        }
        out.push_str(&head.join(","));
        out.push('\n');
        for r in &of_kind {
            for l in &r.levels {
                let mut row = vec![quote(&r.arm), format!("{}", l.level)];
                row.extend(
                    metrics
                        .iter()
                        .map(|m| l.metrics.get(m).map(|v| format!("{v}")).unwrap_or_default()),
                );
                if any_excluded {
                    row.push(quote(l.excluded.as_deref().unwrap_or("")));
                }
                out.push_str(&row.join(","));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::compare::{import_text, ImportOptions};
    use crate::core_api::scenario::Scenario;

    fn runs() -> Vec<MeasuredRun> {
        let mut imp = import_text(
            "arm,concurrency,output_throughput,Median TTFT (ms)\nA,8,1000,40\nA,16,1800.5,55\nB,8,900,30\n",
            &ImportOptions::default(),
        )
        .unwrap();
        imp.runs[0].exclude(16.0, "client saturated");
        imp.runs[1].kv_cache_tokens_logged = Some(123_456);
        imp.runs
    }

    #[test]
    fn payload_round_trips_runs_exclusions_kv_and_pinned_scenarios() {
        let mut arms = BTreeMap::new();
        let mut tp2 = Scenario::default_scenario();
        tp2.tp = 2;
        arms.insert(
            "B".to_string(),
            ArmSetup {
                scenario: Some(tp2.to_json()),
                ..ArmSetup::default()
            },
        );
        let p = payload_of(&runs(), &arms);
        let back = decode_payload(&encode_payload(&p)).unwrap();
        assert_eq!(back, p);
        let (r, a) = runs_of(&back).unwrap();
        let mut expected = runs();
        for e in &mut expected {
            e.source_format = SourceFormat::Csv;
        }
        assert_eq!(r, expected);
        assert_eq!(a["B"].scenario.as_deref(), Some(tp2.to_json().as_str()));
        assert_eq!(a["A"].scenario, None);
    }

    #[test]
    fn restored_runs_shown_as_csv_import_back_to_the_same_runs() {
        let runs = runs();
        let csv = runs_as_csv(&runs);
        assert!(csv.starts_with("arm,concurrency,"), "{csv}");
        let back = import_text(&csv, &ImportOptions::default()).unwrap();
        assert!(back.unmatched.is_empty(), "{:?}", back.unmatched);
        let mut expected = runs;
        for e in &mut expected {
            e.source_format = SourceFormat::Csv;
            // The KV tokens vLLM logged are not a table column (the link carries them per arm).
            e.kv_cache_tokens_logged = None;
        }
        assert_eq!(back.runs, expected, "{csv}");
    }

    #[test]
    fn the_scenario_part_stays_readable_by_the_old_codec() {
        let s = Scenario::default_scenario();
        let sfrag = format!("s={}", share::encode(&s.to_json()));
        let p = payload_of(&runs(), &BTreeMap::new());
        let full = with_measured(&sfrag, Some(&p));
        let WithMeasured::Fits(f) = &full else {
            panic!("small payload must fit")
        };
        assert!(f.starts_with(&sfrag) && f.contains("&m=v1."));
        let (spart, m) = split_fragment(&format!("#{f}"));
        assert_eq!(spart, sfrag);
        assert_eq!(
            Scenario::from_json(&share::decode(&spart).unwrap()).unwrap(),
            s
        );
        assert_eq!(decode_payload(&m.unwrap()).unwrap(), p);
        // An old link has no measured part; re-adding none gives it back unchanged.
        assert_eq!(split_fragment(&sfrag), (sfrag.clone(), None));
        assert_eq!(with_measured(f, None), WithMeasured::Fits(sfrag));
    }

    #[test]
    fn a_payload_past_the_limit_is_left_out_of_the_link() {
        // Many arms of incompressible-ish numbers.
        let mut arms = Vec::new();
        let mut x: u64 = 12345;
        for a in 0..60 {
            let mut levels = Vec::new();
            for l in 0..40 {
                let mut metrics = BTreeMap::new();
                for m in MetricId::all().iter().take(12) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    metrics.insert(m.name(), (x >> 11) as f64 / 7.0);
                }
                levels.push(LevelPayload {
                    level: (l + 1) as f64,
                    metrics,
                    excluded: None,
                });
            }
            arms.push(ArmPayload {
                arm: format!("arm {a}"),
                level_kind: "concurrency".into(),
                levels,
                kv_cache_tokens_logged: None,
                scenario: None,
            });
        }
        let p = MeasuredPayload { version: 1, arms };
        match with_measured("s=v1.abc", Some(&p)) {
            WithMeasured::TooLong {
                fragment,
                encoded_len,
            } => {
                assert_eq!(fragment, "s=v1.abc");
                assert!(encoded_len > MAX_LINK_MEASURED_BYTES);
            }
            other => panic!("expected TooLong, got {other:?}"),
        }
        // The file keeps it all and reads back.
        let text = bundle_json(&Scenario::default_scenario().to_json(), &p);
        assert_eq!(read_bundle(&text).unwrap().measured, p);
    }

    #[test]
    fn damaged_or_hostile_payloads_are_messages_not_panics() {
        assert!(decode_payload("v1.AAAA").is_err());
        assert!(decode_payload("v2.abc").unwrap_err().contains("v1"));
        let bad = |json: &str| runs_of(&serde_json::from_str(json).unwrap()).unwrap_err();
        assert!(bad(r#"{"version":2,"arms":[]}"#).contains("version 2"));
        assert!(
            bad(r#"{"version":1,"arms":[{"arm":"a","level_kind":"qps","levels":[]}]}"#)
                .contains("qps")
        );
        assert!(bad(r#"{"version":1,"arms":[{"arm":"a","level_kind":"concurrency","levels":[{"level":"-1","metrics":{}}]}]}"#).contains("positive"));
        assert!(bad(r#"{"version":1,"arms":[{"arm":"a","level_kind":"concurrency","levels":[{"level":"1","metrics":{"bogus":"1"}}]}]}"#).contains("bogus"));
        assert!(read_bundle("{}").is_err());
        assert!(read_bundle("not json").is_err());
    }
}
