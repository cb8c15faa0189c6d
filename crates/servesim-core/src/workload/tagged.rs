//! Hand-written readers of the workload's `{"type": "<kind>", ...}` objects ([`RawArrival`],
//! [`RawContent`]): each known key is read into its typed slot whatever the kind (no key has two
//! types across kinds), then checked against the kind's fields with serde's own messages (unknown
//! variant, missing / unknown / duplicate field). serde's derived internally tagged readers
//! buffered every variant through its `Content` type, which the page binary paid for in size
//! (docs/performance.md "Web"). [`RawLengthDist`](super::RawLengthDist)'s reader is in
//! `lengths.rs`.

use super::{RawAgentic, RawArrival, RawContent, RawLengthDist, RawSharedPrefix};
use serde::de::{Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// The kind's index in `kinds` after checking `seen` against its fields (the first `required`
/// must be present: `has` says which are).
fn check<E: Error>(
    kind: Option<String>,
    kinds: &'static [&'static str],
    fields: &[(&'static [&'static str], usize)],
    seen: &[String],
    has: impl Fn(&str) -> bool,
) -> Result<usize, E> {
    let kind = kind.ok_or_else(|| E::missing_field("type"))?;
    let Some(v) = kinds.iter().position(|k| *k == kind) else {
        return Err(E::unknown_variant(&kind, kinds));
    };
    let (names, required) = fields[v];
    if let Some(bad) = seen
        .iter()
        .find(|k| k.as_str() != "type" && !names.contains(&k.as_str()))
    {
        return Err(E::unknown_field(bad, names));
    }
    if let Some(f) = names[..required].iter().find(|f| !has(f)) {
        return Err(E::missing_field(f));
    }
    Ok(v)
}

/// Records `key` as seen (a repeated key is serde's duplicate-field error).
fn see<E: Error>(seen: &mut Vec<String>, key: &str) -> Result<(), E> {
    if seen.iter().any(|k| k == key) {
        return Err(E::custom(format_args!("duplicate field `{key}`")));
    }
    seen.push(key.to_string());
    Ok(())
}

const ARRIVALS: [&str; 6] = [
    "closed_loop",
    "poisson",
    "constant",
    "gamma",
    "burst",
    "trace",
];
const ARRIVAL_FIELDS: [(&[&str], usize); 6] = [
    (&["concurrency", "think_time_s"], 1),
    (&["rate"], 1),
    (&["rate"], 1),
    (&["rate", "cv"], 2),
    (&["count"], 1),
    (&["rate"], 0),
];
const ARRIVAL_NUMS: [&str; 5] = ["concurrency", "think_time_s", "rate", "cv", "count"];

impl<'de> Deserialize<'de> for RawArrival {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ArrivalVisitor)
    }
}

struct ArrivalVisitor;

impl<'de> Visitor<'de> for ArrivalVisitor {
    type Value = RawArrival;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an arrival process {\"type\": ..., ...}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RawArrival, A::Error> {
        let mut kind = None;
        let mut nums: [Option<f64>; 5] = [None; 5];
        let mut seen = Vec::new();
        while let Some(key) = m.next_key::<String>()? {
            see(&mut seen, &key)?;
            if key == "type" {
                kind = Some(m.next_value()?);
            } else if let Some(i) = ARRIVAL_NUMS.iter().position(|f| *f == key) {
                nums[i] = m.next_value()?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        let get = |f: &str| nums[ARRIVAL_NUMS.iter().position(|x| *x == f).unwrap_or(0)];
        let v = check(kind, &ARRIVALS, &ARRIVAL_FIELDS, &seen, |f| {
            get(f).is_some()
        })?;
        let n = |f: &str| get(f).unwrap_or(0.0);
        Ok(match v {
            0 => RawArrival::ClosedLoop {
                concurrency: n("concurrency"),
                think_time_s: get("think_time_s"),
            },
            1 => RawArrival::Poisson { rate: n("rate") },
            2 => RawArrival::Constant { rate: n("rate") },
            3 => RawArrival::Gamma {
                rate: n("rate"),
                cv: n("cv"),
            },
            4 => RawArrival::Burst { count: n("count") },
            _ => RawArrival::Trace { rate: get("rate") },
        })
    }
}

const CONTENTS: [&str; 4] = ["synthetic", "agentic", "preset", "mooncake"];
const CONTENT_FIELDS: [(&[&str], usize); 4] = [
    (&["input", "output", "shared_prefix"], 2),
    (
        &[
            "first_turn_tokens",
            "tokens_per_turn",
            "output_tokens",
            "turns",
            "system_prompt_tokens",
            "think_time_s",
        ],
        4,
    ),
    (&["name"], 1),
    (&["jsonl", "block_tokens"], 1),
];
/// Number keys, then length-distribution keys, then string keys.
const CONTENT_NUMS: [&str; 5] = [
    "first_turn_tokens",
    "turns",
    "system_prompt_tokens",
    "think_time_s",
    "block_tokens",
];
const CONTENT_DISTS: [&str; 4] = ["input", "output", "tokens_per_turn", "output_tokens"];
const CONTENT_TEXTS: [&str; 2] = ["name", "jsonl"];

impl<'de> Deserialize<'de> for RawContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = RawContent;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("request content {\"type\": ..., ...}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RawContent, A::Error> {
        let mut kind = None;
        let mut nums: [Option<f64>; 5] = [None; 5];
        let mut dists: [Option<RawLengthDist>; 4] = [None, None, None, None];
        let mut texts: [Option<String>; 2] = [None, None];
        let mut prefix: Option<RawSharedPrefix> = None;
        let mut seen = Vec::new();
        while let Some(key) = m.next_key::<String>()? {
            see(&mut seen, &key)?;
            let k = key.as_str();
            if k == "type" {
                kind = Some(m.next_value()?);
            } else if k == "shared_prefix" {
                prefix = m.next_value()?;
            } else if let Some(i) = CONTENT_NUMS.iter().position(|f| *f == k) {
                nums[i] = m.next_value()?;
            } else if let Some(i) = CONTENT_DISTS.iter().position(|f| *f == k) {
                dists[i] = Some(m.next_value()?);
            } else if let Some(i) = CONTENT_TEXTS.iter().position(|f| *f == k) {
                texts[i] = Some(m.next_value()?);
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        let pos = |list: &[&str], f: &str| list.iter().position(|x| *x == f);
        let has = |f: &str| {
            pos(&CONTENT_NUMS, f).is_some_and(|i| nums[i].is_some())
                || pos(&CONTENT_DISTS, f).is_some_and(|i| dists[i].is_some())
                || pos(&CONTENT_TEXTS, f).is_some_and(|i| texts[i].is_some())
        };
        let v = check(kind, &CONTENTS, &CONTENT_FIELDS, &seen, has)?;
        let [input, output, per_turn, out_turn] = dists;
        let [name, jsonl] = texts;
        let [first, turns, system, think, block] = nums;
        let dist = |d: Option<RawLengthDist>| d.unwrap_or(RawLengthDist::Constant { tokens: 0.0 });
        Ok(match v {
            0 => RawContent::Synthetic {
                input: dist(input),
                output: dist(output),
                shared_prefix: prefix,
            },
            1 => RawContent::Agentic(RawAgentic {
                system_prompt_tokens: system.unwrap_or(0.0),
                first_turn_tokens: first.unwrap_or(0.0),
                tokens_per_turn: dist(per_turn),
                output_tokens: dist(out_turn),
                turns: turns.unwrap_or(0.0),
                think_time_s: think,
            }),
            2 => RawContent::Preset {
                name: name.unwrap_or_default(),
            },
            _ => RawContent::Mooncake {
                jsonl: jsonl.unwrap_or_default(),
                block_tokens: block,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arrival_and_content_kind_reads_back_and_errors_are_serdes() {
        let arrivals = [
            r#"{"type":"closed_loop","concurrency":4.0,"think_time_s":1.5}"#,
            r#"{"type":"closed_loop","concurrency":4.0}"#,
            r#"{"type":"poisson","rate":2.5}"#,
            r#"{"type":"constant","rate":3.0}"#,
            r#"{"type":"gamma","rate":1.0,"cv":2.0}"#,
            r#"{"type":"burst","count":100.0}"#,
            r#"{"type":"trace"}"#,
            r#"{"type":"trace","rate":0.5}"#,
        ];
        for j in arrivals {
            let a: RawArrival = serde_json::from_str(j).unwrap();
            let back = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<RawArrival>(&back).unwrap(), a);
            assert!(
                back.replace(",\"think_time_s\":null", "")
                    .replace(",\"rate\":null", "")
                    == j,
                "{back}"
            );
            let v: serde_json::Value = serde_json::from_str(j).unwrap();
            assert_eq!(serde_json::from_value::<RawArrival>(v).unwrap(), a);
        }
        let contents = [
            r#"{"type":"synthetic","input":{"type":"constant","tokens":1024.0},"output":{"type":"constant","tokens":128.0},"shared_prefix":{"groups":1.0,"tokens":512.0}}"#,
            r#"{"type":"synthetic","input":{"type":"constant","tokens":1024.0},"output":{"type":"uniform","min":1.0,"max":9.0},"shared_prefix":null}"#,
            r#"{"type":"agentic","system_prompt_tokens":100.0,"first_turn_tokens":2000.0,"tokens_per_turn":{"type":"constant","tokens":5.0},"output_tokens":{"type":"constant","tokens":4.0},"turns":5.0,"think_time_s":2.0}"#,
            r#"{"type":"preset","name":"agentic-coding"}"#,
            r#"{"type":"mooncake","jsonl":"{}\n","block_tokens":512.0}"#,
        ];
        for j in contents {
            let c: RawContent = serde_json::from_str(j).unwrap();
            let back = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<RawContent>(&back).unwrap(), c);
            assert_eq!(back, j);
            let v: serde_json::Value = serde_json::from_str(j).unwrap();
            assert_eq!(serde_json::from_value::<RawContent>(v).unwrap(), c);
        }
        // Agentic defaults, the tag last.
        let c: RawContent = serde_json::from_str(r#"{"first_turn_tokens":2,"tokens_per_turn":{"type":"constant","tokens":5},"output_tokens":{"type":"constant","tokens":4},"turns":3,"type":"agentic"}"#).unwrap();
        let RawContent::Agentic(a) = c else {
            panic!("agentic")
        };
        assert_eq!((a.system_prompt_tokens, a.think_time_s), (0.0, None));
        let ea = |j: &str| {
            serde_json::from_str::<RawArrival>(j)
                .unwrap_err()
                .to_string()
        };
        let ec = |j: &str| {
            serde_json::from_str::<RawContent>(j)
                .unwrap_err()
                .to_string()
        };
        assert!(ea(r#"{"type":"zipf"}"#)
            .starts_with("unknown variant `zipf`, expected one of `closed_loop`"));
        assert!(ea(r#"{"type":"poisson","rate":1,"cv":2}"#)
            .starts_with("unknown field `cv`, expected `rate`"));
        assert!(ea(r#"{"type":"gamma","rate":1}"#).starts_with("missing field `cv`"));
        assert!(ea(r#"{"rate":1}"#).starts_with("missing field `type`"));
        assert!(ec(r#"{"type":"preset"}"#).starts_with("missing field `name`"));
        assert!(ec(r#"{"type":"preset","name":"x","turns":3}"#)
            .starts_with("unknown field `turns`, expected `name`"));
        assert!(ec(r#"{"type":"synthetic","input":{"type":"constant"},"output":{"type":"constant","tokens":1}}"#).starts_with("missing field `tokens`"));
        assert!(
            ec(r#"{"type":"preset","name":"x","name":"y"}"#).starts_with("duplicate field `name`")
        );
    }
}
