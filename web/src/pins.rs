//! Pinned runs (issue 14 "Side by side"; docs/web.md "Pinned runs"), as plain Rust: the link part
//! that carries them, `&p=v1.<payload>` (the core's share codec over the JSON of [`PinsPayload`]:
//! each pin's label and scenario JSON; old links have no `p=` part and open unchanged, and a page
//! that does not know `p=` ignores it), the scenario diff shown beside a pin, and the overlay of a
//! pin's curves on the charts. A pin's results are not in the link: the page simulates its
//! scenario again (the same scenario gives the same bits, docs/scenario.md).

use crate::charts::ChartSpec;
use crate::core_api::share;
use crate::core_api::Scenario;
use serde::{Deserialize, Serialize};

/// At most this many pinned runs.
pub const MAX_PINS: usize = 4;
/// Largest encoded `p=` part put in a link (32 KiB, as the comparison's `m=` part).
pub const MAX_LINK_PINS_BYTES: usize = 32 * 1024;
/// Version of [`PinsPayload`].
pub const PINS_VERSION: u32 = 1;

/// One pin in a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinPayload {
    pub label: String,
    /// The scenario's canonical JSON (`Scenario::to_json`).
    pub scenario: String,
}

/// The `p=` part's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinsPayload {
    pub version: u32,
    pub pins: Vec<PinPayload>,
}

/// The `p=` code of these pins (`None` when there are none).
pub fn encode(pins: &[(String, Scenario)]) -> Option<String> {
    if pins.is_empty() {
        return None;
    }
    let p = PinsPayload {
        version: PINS_VERSION,
        pins: pins
            .iter()
            .map(|(label, s)| PinPayload {
                label: label.clone(),
                scenario: s.to_json(),
            })
            .collect(),
    };
    Some(share::encode(
        &serde_json::to_string(&p).expect("pins serialise"),
    ))
}

/// The pins of a `p=` code; each scenario is read by the core (`Scenario::from_json`).
pub fn decode(code: &str) -> Result<Vec<(String, Scenario)>, String> {
    let json = share::decode(code).map_err(|e| format!("the pinned runs in the link: {e}"))?;
    let p: PinsPayload = serde_json::from_str(&json)
        .map_err(|e| format!("the pinned runs in the link are not valid: {e}"))?;
    if p.version != PINS_VERSION {
        return Err(format!(
            "the pinned runs in the link are version {}; this page reads version {PINS_VERSION}",
            p.version
        ));
    }
    if p.pins.len() > MAX_PINS {
        return Err(format!(
            "the link pins {} runs; at most {MAX_PINS}",
            p.pins.len()
        ));
    }
    p.pins
        .into_iter()
        .map(|x| {
            Scenario::from_json(&x.scenario)
                .map(|s| (x.label.clone(), s))
                .map_err(|e| format!("pinned run \"{}\": {e}", x.label))
        })
        .collect()
}

/// The `p=` code in a fragment (parts are `&`-separated, any order).
pub fn pins_part(frag: &str) -> Option<String> {
    frag.trim_start_matches('#')
        .split('&')
        .find_map(|p| p.strip_prefix("p=").map(str::to_string))
}

/// `frag` (the scenario part and any other parts) plus `&p=<code>` when it fits the limit.
pub fn with_pins(frag: &str, pins: &[(String, Scenario)]) -> String {
    let base: Vec<&str> = frag
        .trim_start_matches('#')
        .split('&')
        .filter(|p| !p.starts_with("p=") && !p.is_empty())
        .collect();
    let base = base.join("&");
    match encode(pins) {
        Some(code) if code.len() <= MAX_LINK_PINS_BYTES && !base.is_empty() => {
            format!("{base}&p={code}")
        }
        _ => base,
    }
}

/// One difference between two scenarios: the JSON path, the pin's value, the current value
/// (`-` when absent).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub path: String,
    pub pinned: String,
    pub current: String,
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        // Short arrays of plain values read best whole (levels, connector lists stay paths).
        serde_json::Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            out.push((prefix.to_string(), v.to_string()));
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        _ => out.push((prefix.to_string(), v.to_string())),
    }
}

/// The fields where `pinned` and `current` differ, by JSON path (the canonical scenario JSON:
/// absent options are absent, so a field set on one side only shows `-` on the other).
pub fn diff(pinned: &Scenario, current: &Scenario) -> Vec<Difference> {
    let flat = |s: &Scenario| {
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap_or_default();
        let mut out = Vec::new();
        flatten("", &v, &mut out);
        out.into_iter()
            .collect::<std::collections::BTreeMap<String, String>>()
    };
    let (a, b) = (flat(pinned), flat(current));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| k.as_str() != "version" && a.get(*k) != b.get(*k))
        .map(|k| Difference {
            path: k.clone(),
            pinned: a.get(k).cloned().unwrap_or_else(|| "-".into()),
            current: b.get(k).cloned().unwrap_or_else(|| "-".into()),
        })
        .collect()
}

/// The current charts with each pin's curves added (dashed, named `label: series`): pins' specs
/// come from the same `charts::chart_specs` over the pin's own results, matched by chart key.
pub fn overlay(current: &mut [ChartSpec], pins: &[(String, Vec<ChartSpec>)]) {
    for c in current.iter_mut() {
        for (label, specs) in pins {
            if let Some(p) = specs.iter().find(|s| s.key == c.key) {
                for s in &p.series {
                    let mut s = s.clone();
                    s.label = format!("{label}: {}", s.label);
                    s.style = crate::charts::SeriesStyle::Dashed;
                    c.series.push(s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<(String, Scenario)> {
        let a = Scenario::default_scenario();
        let mut b = a.clone();
        b.tp = 2;
        b.gpu = crate::core_api::scenario::GpuRef::Catalog("H200".into());
        vec![("TP1 H100".into(), a), ("TP2 H200".into(), b)]
    }

    #[test]
    fn pins_travel_in_their_own_link_part_and_old_links_are_unchanged() {
        let s = Scenario::default_scenario();
        let frag = crate::core_api::fragment_for(&s);
        assert_eq!(
            with_pins(&frag, &[]),
            frag,
            "no pins: the link is as before"
        );
        let f = with_pins(&format!("{frag}&m=v1.abc"), &two());
        assert!(f.starts_with(&format!("{frag}&m=v1.abc&p=v1.")), "{f}");
        let code = pins_part(&f).unwrap();
        assert_eq!(decode(&code).unwrap(), two());
        // The scenario part is what old pages read: the first part.
        assert_eq!(crate::compare_ui::link::scenario_part(&f), frag);
        // Replacing pins replaces the part.
        let g = with_pins(&f, &two()[..1]);
        assert_eq!(g.matches("p=").count(), 1);
        assert_eq!(
            decode(&pins_part(&g).unwrap()).unwrap(),
            two()[..1].to_vec()
        );
        assert!(pins_part(&frag).is_none());
    }

    #[test]
    fn damaged_or_foreign_pins_are_refused_with_a_message() {
        assert!(decode("v1.###").unwrap_err().contains("pinned runs"));
        let bad = share::encode(r#"{"version":9,"pins":[]}"#);
        assert!(decode(&bad).unwrap_err().contains("version 9"));
        let bad = share::encode(r#"{"version":1,"pins":[{"label":"x","scenario":"{}"}]}"#);
        assert!(decode(&bad).unwrap_err().contains("pinned run \"x\""));
    }

    #[test]
    fn the_diff_names_every_field_that_differs() {
        let p = two();
        let d = diff(&p[0].1, &p[1].1);
        let paths: Vec<&str> = d.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(paths, vec!["gpu.catalog", "tp"]);
        assert_eq!((d[1].pinned.as_str(), d[1].current.as_str()), ("1", "2"));
        assert!(diff(&p[0].1, &p[0].1).is_empty());
        let mut c = p[0].1.clone();
        c.engine.max_num_seqs = Some(64);
        let d = diff(&p[0].1, &c);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (
                d[0].path.as_str(),
                d[0].pinned.as_str(),
                d[0].current.as_str()
            ),
            ("engine.max_num_seqs", "-", "64")
        );
    }

    #[test]
    fn a_pins_curves_are_added_dashed_and_named_on_the_chart_of_the_same_key() {
        let spec = |key: &'static str, label: &str, y: f64| ChartSpec {
            key,
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_x: false,
            log_y: false,
            series: vec![crate::charts::Series {
                label: label.into(),
                points: vec![(1.0, y)],
                style: crate::charts::SeriesStyle::Line,
            }],
            ref_lines: vec![],
            highlight: None,
        };
        let mut cur = vec![
            spec("throughput", "output tok/s", 1.0),
            spec("ttft", "p50", 2.0),
        ];
        let pinned = vec![(
            "pin 1".to_string(),
            vec![
                spec("ttft", "p50", 3.0),
                spec("throughput", "output tok/s", 4.0),
            ],
        )];
        overlay(&mut cur, &pinned);
        assert_eq!(cur[0].series.len(), 2);
        assert_eq!(cur[0].series[1].label, "pin 1: output tok/s");
        assert_eq!(cur[0].series[1].points, vec![(1.0, 4.0)]);
        assert_eq!(cur[0].series[1].style, crate::charts::SeriesStyle::Dashed);
        assert_eq!(cur[0].series[0].style, crate::charts::SeriesStyle::Line);
        assert_eq!(cur[1].series[1].points, vec![(1.0, 3.0)]);
        let mut svg = String::new();
        {
            use plotters::prelude::*;
            let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
            crate::charts::draw(&root, &cur[0], &crate::charts::Theme::LIGHT).unwrap();
        }
        assert!(
            svg.contains("pin 1: output tok/s"),
            "the legend names the pin"
        );
    }
}
