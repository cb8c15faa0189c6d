//! The "Which deployment?" panel's options (`search_view::SearchOptions`, text as typed) as the
//! core's own search type, on the worker side (docs/web.md, docs/search.md "In the page"): the
//! search worker reads the options into `search::RawSearch` / `RawDisaggSpace` ([`to_raw`]) and
//! writes the search JSON with the core's serializer, so the page holds no second definition of
//! the search's fields and links no search code. [`of_raw`] reads a search back into the form
//! (the round trip the tests check). Errors are keyed by the panel's field: a value that does
//! not parse names the accepted spellings; a value the core refuses (`RawSearch::validate`)
//! comes back under the field [`FIELDS`] pairs with the core's `SearchError::field`.

use crate::search_view::SearchOptions;
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::scenario::Scenario;
use servesim_core::search::{RawDisaggSpace, RawSearch, SearchError};
use std::collections::BTreeMap;

/// Errors by the panel's field key (`search` for the search as a whole).
pub type SearchFieldErrors = BTreeMap<String, String>;

/// The core's search fields (`SearchError::field`, the JSON path) and the panel's field keys
/// (`f-KEY` inputs, `e-KEY` error lines in `app/search_ui.rs`).
pub const FIELDS: &[(&str, &str)] = &[
    ("gpus", "search_gpus"),
    ("max_gpus", "search_max_gpus"),
    ("tp", "search_tp"),
    ("dp", "search_dp"),
    ("expert_parallel", "search_ep"),
    ("replicas", "search_replicas"),
    ("speculative", "search_spec"),
    ("kv_cache_dtypes", "search_kv"),
    ("max_num_seqs", "search_max_num_seqs"),
    ("weight_precisions", "search_weight_precisions"),
    ("max_num_batched_tokens", "search_max_num_batched_tokens"),
    ("gpu_hour_usd", "search_prices"),
    ("refine_steps", "search_refine_steps"),
    ("stop_at_crossing", "search_stop_at_crossing"),
    ("disagg", "search_disagg"),
    ("disagg.pd_ratios", "search_pd_ratios"),
    ("disagg.prefill_tp", "search_pd_prefill_tp"),
    ("disagg.prefill_dp", "search_pd_prefill_dp"),
    ("disagg.prefill_expert_parallel", "search_pd_prefill_ep"),
    (
        "disagg.prefill_max_num_batched_tokens",
        "search_pd_prefill_mnbt",
    ),
    ("disagg.decode_tp", "search_pd_decode_tp"),
    ("disagg.decode_dp", "search_pd_decode_dp"),
    ("disagg.decode_expert_parallel", "search_pd_decode_ep"),
    (
        "disagg.decode_max_num_batched_tokens",
        "search_pd_decode_mnbt",
    ),
];

/// The panel's field key of a core search field (`gpu_hour_usd.H200` -> the prices; anything
/// else, e.g. the candidate count, -> `search`).
pub fn form_key(field: &str) -> &'static str {
    let lookup = |f: &str| FIELDS.iter().find(|(c, _)| *c == f).map(|(_, k)| *k);
    lookup(field)
        .or_else(|| field.split_once('.').and_then(|(top, _)| lookup(top)))
        .unwrap_or("search")
}

/// A core search error under its field.
pub fn errors_of(e: &SearchError) -> SearchFieldErrors {
    [(form_key(&e.field).to_string(), e.to_string())].into()
}

fn parts(t: &str) -> impl Iterator<Item = &str> {
    t.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// A comma-separated list; blank = `None` (the core's default).
fn list<T>(
    e: &mut SearchFieldErrors,
    key: &str,
    t: &str,
    parse: impl Fn(&str) -> Option<T>,
    accepted: &str,
) -> Option<Vec<T>> {
    let mut out = Vec::new();
    for part in parts(t) {
        match parse(part) {
            Some(v) => out.push(v),
            None => {
                e.insert(key.into(), format!("`{part}`: {accepted}"));
                return None;
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

fn numbers(e: &mut SearchFieldErrors, key: &str, t: &str) -> Option<Vec<u32>> {
    list(
        e,
        key,
        t,
        |p| p.parse().ok(),
        "give a comma-separated list of whole numbers",
    )
}

fn on_off(e: &mut SearchFieldErrors, key: &str, t: &str) -> Option<Vec<bool>> {
    list(
        e,
        key,
        t,
        |p| match p {
            "off" => Some(false),
            "on" => Some(true),
            _ => None,
        },
        "give off, on or off,on (blank: the default)",
    )
}

/// The options as the core's `RawSearch` over `base`, or every field at fault.
pub fn to_raw(o: &SearchOptions, base: Scenario) -> Result<RawSearch, SearchFieldErrors> {
    let mut e = SearchFieldErrors::new();
    let gpus: Vec<String> = parts(&o.gpus).map(String::from).collect();
    let max_gpus = o.max_gpus.trim().parse::<u32>().unwrap_or_else(|_| {
        e.insert(
            "search_max_gpus".into(),
            "give the GPU budget, a whole number".into(),
        );
        0
    });
    let kv = list(
        &mut e,
        "search_kv",
        &o.kv,
        KvCacheDtype::parse,
        &format!("use {}", KvCacheDtype::NAMES.join(", ")),
    );
    let wp = list(
        &mut e,
        "search_weight_precisions",
        &o.weight_precisions,
        WeightPrecision::parse,
        &format!("use {}", WeightPrecision::NAMES.join(", ")),
    );
    let refine_steps = match o.refine_steps.trim() {
        "" => None,
        t => t.parse::<usize>().ok().or_else(|| {
            e.insert(
                "search_refine_steps".into(),
                "give a whole number of bisection steps, 0 to 32 (blank: 6)".into(),
            );
            None
        }),
    };
    let stop_at_crossing = match o.stop_at_crossing.trim() {
        "" => None,
        "on" => Some(true),
        _ => {
            e.insert(
                "search_stop_at_crossing".into(),
                "every level (blank) or on".into(),
            );
            None
        }
    };
    let aggregated = match o.disagg.trim() {
        "" => None,
        "also" => Some(None),
        "only" => Some(Some(false)),
        _ => {
            e.insert("search_disagg".into(), "none, also or only".into());
            None
        }
    };
    let disagg = aggregated.map(|aggregated| RawDisaggSpace {
        pd_ratios: Some(parts(&o.pd_ratios).map(String::from).collect::<Vec<_>>())
            .filter(|v| !v.is_empty()),
        prefill_tp: numbers(&mut e, "search_pd_prefill_tp", &o.pd_prefill_tp),
        prefill_dp: numbers(&mut e, "search_pd_prefill_dp", &o.pd_prefill_dp),
        prefill_expert_parallel: on_off(&mut e, "search_pd_prefill_ep", &o.pd_prefill_ep),
        decode_tp: numbers(&mut e, "search_pd_decode_tp", &o.pd_decode_tp),
        decode_dp: numbers(&mut e, "search_pd_decode_dp", &o.pd_decode_dp),
        decode_expert_parallel: on_off(&mut e, "search_pd_decode_ep", &o.pd_decode_ep),
        prefill_max_num_batched_tokens: numbers(
            &mut e,
            "search_pd_prefill_mnbt",
            &o.pd_prefill_mnbt,
        ),
        decode_max_num_batched_tokens: numbers(&mut e, "search_pd_decode_mnbt", &o.pd_decode_mnbt),
        aggregated,
    });
    let mut gpu_hour_usd = BTreeMap::new();
    for g in o.gpu_list(&base) {
        let t = o.prices.get(&g).map(|s| s.trim()).unwrap_or("");
        if t.is_empty() {
            continue;
        }
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => {
                gpu_hour_usd.insert(g, v);
            }
            _ => {
                e.insert(
                    "search_prices".into(),
                    format!("{g}: give $ per GPU-hour, a number (blank: the default)"),
                );
            }
        }
    }
    let raw = RawSearch {
        gpus: Some(gpus).filter(|g| !g.is_empty()),
        max_gpus,
        tp: numbers(&mut e, "search_tp", &o.tp),
        dp: numbers(&mut e, "search_dp", &o.dp),
        expert_parallel: on_off(&mut e, "search_ep", &o.ep),
        replicas: numbers(&mut e, "search_replicas", &o.replicas),
        speculative: on_off(&mut e, "search_spec", &o.spec),
        kv_cache_dtypes: kv,
        max_num_seqs: numbers(&mut e, "search_max_num_seqs", &o.max_num_seqs),
        weight_precisions: wp,
        max_num_batched_tokens: numbers(
            &mut e,
            "search_max_num_batched_tokens",
            &o.max_num_batched_tokens,
        ),
        gpu_hour_usd,
        refine_steps,
        stop_at_crossing,
        disagg,
        base,
    };
    if e.is_empty() {
        Ok(raw)
    } else {
        Err(e)
    }
}

fn join<T>(v: &Option<Vec<T>>, name: impl Fn(&T) -> String) -> String {
    v.iter().flatten().map(name).collect::<Vec<_>>().join(", ")
}

fn on_off_text(v: &Option<Vec<bool>>) -> String {
    v.iter()
        .flatten()
        .map(|b| if *b { "on" } else { "off" })
        .collect::<Vec<_>>()
        .join(",")
}

/// A search read back into the panel's options (the form of `to_raw`).
pub fn of_raw(r: &RawSearch) -> SearchOptions {
    let d = r.disagg.clone().unwrap_or_default();
    let n = |v: &Option<Vec<u32>>| join(v, |x| x.to_string());
    SearchOptions {
        gpus: join(&r.gpus, |g| g.clone()),
        tp: n(&r.tp),
        dp: n(&r.dp),
        ep: on_off_text(&r.expert_parallel),
        spec: on_off_text(&r.speculative),
        kv: join(&r.kv_cache_dtypes, |k| k.name().to_string()),
        weight_precisions: join(&r.weight_precisions, |p| p.name().to_string()),
        max_num_seqs: n(&r.max_num_seqs),
        max_num_batched_tokens: n(&r.max_num_batched_tokens),
        replicas: n(&r.replicas),
        max_gpus: r.max_gpus.to_string(),
        refine_steps: r.refine_steps.map(|s| s.to_string()).unwrap_or_default(),
        stop_at_crossing: if r.stop_at_crossing == Some(true) {
            "on".into()
        } else {
            String::new()
        },
        disagg: match &r.disagg {
            None => String::new(),
            Some(d) if d.aggregated == Some(false) => "only".into(),
            Some(_) => "also".into(),
        },
        pd_ratios: join(&d.pd_ratios, |x| x.clone()),
        pd_prefill_tp: n(&d.prefill_tp),
        pd_prefill_dp: n(&d.prefill_dp),
        pd_prefill_ep: on_off_text(&d.prefill_expert_parallel),
        pd_prefill_mnbt: n(&d.prefill_max_num_batched_tokens),
        pd_decode_tp: n(&d.decode_tp),
        pd_decode_dp: n(&d.decode_dp),
        pd_decode_ep: on_off_text(&d.decode_expert_parallel),
        pd_decode_mnbt: n(&d.decode_max_num_batched_tokens),
        prices: r
            .gpu_hour_usd
            .iter()
            .map(|(g, v)| (g.clone(), v.to_string()))
            .collect(),
    }
}

/// The search JSON of the options over the scenario `base_json` (what the search worker
/// validates and `servesim search --search FILE` reads: the core's serializer, pretty), or
/// the fields at fault, including the core's refusal (`RawSearch::validate`).
pub fn search_json(o: &SearchOptions, base_json: &str) -> Result<String, SearchFieldErrors> {
    let base = Scenario::from_json(base_json)
        .map_err(|err| SearchFieldErrors::from([("search".to_string(), err.to_string())]))?;
    let raw = to_raw(o, base)?;
    raw.validate().map_err(|err| errors_of(&err))?;
    serde_json::to_string_pretty(&raw)
        .map_err(|err| SearchFieldErrors::from([("search".to_string(), err.to_string())]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Scenario {
        Scenario::default_scenario()
    }

    /// Every option set: the form -> `RawSearch` -> JSON -> `RawSearch` -> form round trip.
    fn every_option() -> SearchOptions {
        SearchOptions {
            gpus: "H100-SXM, H200".into(),
            tp: "1, 2".into(),
            dp: "1".into(),
            ep: "off".into(),
            spec: "off".into(),
            kv: "auto, fp8".into(),
            weight_precisions: "checkpoint, fp8".into(),
            max_num_seqs: "64, 128".into(),
            max_num_batched_tokens: "2048, 8192".into(),
            replicas: "1, 2".into(),
            max_gpus: "4".into(),
            refine_steps: "2".into(),
            stop_at_crossing: "on".into(),
            disagg: "also".into(),
            pd_ratios: "1:1, 1:2".into(),
            pd_prefill_tp: "1".into(),
            pd_prefill_dp: "1".into(),
            pd_prefill_ep: "off".into(),
            pd_prefill_mnbt: "16384".into(),
            pd_decode_tp: "1, 2".into(),
            pd_decode_dp: "1".into(),
            pd_decode_ep: "off".into(),
            pd_decode_mnbt: "2048".into(),
            prices: [("H200".to_string(), "3.25".to_string())].into(),
        }
    }

    #[test]
    fn the_form_round_trips_through_the_cores_search_json() {
        let o = every_option();
        let json = search_json(&o, &base().to_json()).unwrap();
        let raw = RawSearch::from_json(&json).unwrap();
        assert_eq!(of_raw(&raw), o);
        assert_eq!(raw.base.to_json(), base().to_json());
        // The fields, as the CLI's flags build them (crates/servesim-cli/src/cmd_search.rs).
        assert_eq!(
            raw.weight_precisions,
            Some(vec![WeightPrecision::Checkpoint, WeightPrecision::Fp8])
        );
        assert_eq!(raw.max_num_batched_tokens, Some(vec![2048, 8192]));
        assert_eq!(raw.max_num_seqs, Some(vec![64, 128]));
        assert_eq!(raw.replicas, Some(vec![1, 2]));
        assert_eq!(
            (raw.refine_steps, raw.stop_at_crossing),
            (Some(2), Some(true))
        );
        assert_eq!(raw.gpu_hour_usd.get("H200"), Some(&3.25));
        assert_eq!(raw.gpu_hour_usd.get("H100-SXM"), None, "blank: the default");
        let d = raw.disagg.clone().unwrap();
        assert_eq!(
            d,
            RawDisaggSpace {
                pd_ratios: Some(vec!["1:1".into(), "1:2".into()]),
                prefill_tp: Some(vec![1]),
                prefill_dp: Some(vec![1]),
                prefill_expert_parallel: Some(vec![false]),
                decode_tp: Some(vec![1, 2]),
                decode_dp: Some(vec![1]),
                decode_expert_parallel: Some(vec![false]),
                prefill_max_num_batched_tokens: Some(vec![16384]),
                decode_max_num_batched_tokens: Some(vec![2048]),
                aggregated: None,
            }
        );
        // The search JSON is the core's own serialization of its type.
        assert_eq!(json, serde_json::to_string_pretty(&raw).unwrap());
        // Only P/D (`--pd-only`), and no P/D: the pool fields are then not part of the search.
        for (mode, aggregated) in [("only", Some(Some(false))), ("", None)] {
            let o2 = SearchOptions {
                disagg: mode.into(),
                ..o.clone()
            };
            let raw = RawSearch::from_json(&search_json(&o2, &base().to_json()).unwrap()).unwrap();
            assert_eq!(raw.disagg.as_ref().map(|d| d.aggregated), aggregated);
            if mode.is_empty() {
                assert_eq!(
                    of_raw(&raw),
                    SearchOptions {
                        disagg: String::new(),
                        pd_ratios: String::new(),
                        pd_prefill_tp: String::new(),
                        pd_prefill_dp: String::new(),
                        pd_prefill_ep: String::new(),
                        pd_prefill_mnbt: String::new(),
                        pd_decode_tp: String::new(),
                        pd_decode_dp: String::new(),
                        pd_decode_ep: String::new(),
                        pd_decode_mnbt: String::new(),
                        ..o.clone()
                    }
                );
            } else {
                assert_eq!(of_raw(&raw), o2);
            }
        }
        // Blank options are the core's defaults.
        let blank = SearchOptions {
            max_gpus: "8".into(),
            ..SearchOptions::default()
        };
        let raw = RawSearch::from_json(&search_json(&blank, &base().to_json()).unwrap()).unwrap();
        assert_eq!(of_raw(&raw), blank);
        assert_eq!(
            (
                raw.gpus,
                raw.tp,
                raw.weight_precisions,
                raw.max_num_batched_tokens
            ),
            (None, None, None, None)
        );
    }

    #[test]
    fn the_candidates_follow_the_new_dimensions() {
        // 2 weight precisions (checkpoint, fp8 of a bf16 checkpoint) x 2 budgets x TP1, and
        // 1P1D with two decode budgets: the core's enumeration of the page's options.
        let o = SearchOptions {
            gpus: "H100-SXM".into(),
            tp: "1".into(),
            max_gpus: "2".into(),
            weight_precisions: "checkpoint, fp8".into(),
            max_num_batched_tokens: "2048, 8192".into(),
            disagg: "also".into(),
            pd_decode_mnbt: "1024, 2048".into(),
            ..SearchOptions::default()
        };
        let raw = RawSearch::from_json(&search_json(&o, &base().to_json()).unwrap()).unwrap();
        let space = raw.validate().unwrap();
        // aggregated: 2 wp x 2 mnbt; P/D: 2 wp x 2 prefill mnbt (the list above) x 2 decode.
        assert_eq!(space.candidates.len(), 2 * 2 + 2 * 2 * 2);
    }

    #[test]
    fn bad_options_name_their_field() {
        let o = SearchOptions {
            tp: "1,eight".into(),
            ep: "maybe".into(),
            max_gpus: "".into(),
            prices: [("H100-SXM".to_string(), "cheap".to_string())].into(),
            kv: "fp4".into(),
            weight_precisions: "fp8, fp3".into(),
            max_num_seqs: "lots".into(),
            max_num_batched_tokens: "8k".into(),
            replicas: "1.5".into(),
            refine_steps: "-1".into(),
            stop_at_crossing: "sometimes".into(),
            disagg: "also".into(),
            pd_decode_tp: "two".into(),
            pd_prefill_ep: "yes".into(),
            pd_decode_ep: "no".into(),
            pd_prefill_mnbt: "x".into(),
            pd_decode_mnbt: "2048,".into(),
            ..SearchOptions::default()
        };
        let e = to_raw(&o, base()).unwrap_err();
        for k in [
            "search_tp",
            "search_ep",
            "search_max_gpus",
            "search_prices",
            "search_kv",
            "search_weight_precisions",
            "search_max_num_seqs",
            "search_max_num_batched_tokens",
            "search_replicas",
            "search_refine_steps",
            "search_stop_at_crossing",
            "search_pd_decode_tp",
            "search_pd_prefill_ep",
            "search_pd_decode_ep",
            "search_pd_prefill_mnbt",
        ] {
            assert!(e.contains_key(k), "{k}: {e:?}");
        }
        assert!(!e.contains_key("search_pd_decode_mnbt"), "{e:?}");
        assert!(e["search_weight_precisions"].contains("`fp3`"));
        assert!(e["search_weight_precisions"].contains("checkpoint, bf16, fp8, fp4, int4, int8"));
        assert!(e["search_kv"].contains("fp8_ds_mla"));
        let bad_mode = SearchOptions {
            max_gpus: "2".into(),
            disagg: "sometimes".into(),
            ..SearchOptions::default()
        };
        assert!(to_raw(&bad_mode, base())
            .unwrap_err()
            .contains_key("search_disagg"));
    }

    #[test]
    fn the_cores_refusals_come_back_under_their_field() {
        let ok = SearchOptions {
            max_gpus: "2".into(),
            disagg: "also".into(),
            ..SearchOptions::default()
        };
        // (a value the form reads but the core refuses, the field it belongs to)
        let cases: Vec<(SearchOptions, &str)> = vec![
            (
                SearchOptions {
                    max_gpus: "0".into(),
                    ..ok.clone()
                },
                "search_max_gpus",
            ),
            (
                SearchOptions {
                    max_num_batched_tokens: "0".into(),
                    ..ok.clone()
                },
                "search_max_num_batched_tokens",
            ),
            (
                SearchOptions {
                    max_num_seqs: "100000".into(),
                    ..ok.clone()
                },
                "search_max_num_seqs",
            ),
            (
                SearchOptions {
                    replicas: "0".into(),
                    ..ok.clone()
                },
                "search_replicas",
            ),
            (
                SearchOptions {
                    pd_prefill_mnbt: "0".into(),
                    ..ok.clone()
                },
                "search_pd_prefill_mnbt",
            ),
            (
                SearchOptions {
                    pd_decode_mnbt: "200000000".into(),
                    ..ok.clone()
                },
                "search_pd_decode_mnbt",
            ),
            (
                SearchOptions {
                    pd_prefill_ep: "on".into(),
                    ..ok.clone()
                },
                "search_pd_prefill_ep",
            ),
            (
                SearchOptions {
                    pd_ratios: "1-1".into(),
                    ..ok.clone()
                },
                "search_pd_ratios",
            ),
            (
                SearchOptions {
                    refine_steps: "40".into(),
                    ..ok.clone()
                },
                "search_refine_steps",
            ),
            (
                SearchOptions {
                    prices: [("H100-SXM".to_string(), "-2".to_string())].into(),
                    ..ok.clone()
                },
                "search_prices",
            ),
            (
                SearchOptions {
                    gpus: "H900".into(),
                    ..ok.clone()
                },
                "search_gpus",
            ),
        ];
        for (o, key) in cases {
            let e = search_json(&o, &base().to_json()).unwrap_err();
            assert_eq!(e.keys().collect::<Vec<_>>(), vec![key], "{o:?}: {e:?}");
            // The core's message: the field, the value and the fix.
            assert!(e[key].contains("is invalid: "), "{e:?}");
        }
        assert!(search_json(&ok, &base().to_json()).is_ok());
        assert_eq!(form_key("gpu_hour_usd.H200"), "search_prices");
        assert_eq!(form_key(""), "search");
    }
}
