//! Workloads: when requests arrive and what they contain. `docs/workloads.md` documents every
//! option and preset.
//!
//! A [`RawWorkloadSpec`] (serde, unknown fields rejected) is validated into a [`WorkloadSpec`];
//! a [`WorkloadGen`] turns a spec at one sweep level into a stream of engine
//! [`Request`](crate::engine::Request)s, reacting to completions (closed loop, sessions).

mod gen;
mod lengths;
mod mooncake;
mod tagged;

pub use gen::WorkloadGen;
pub use lengths::{LengthDist, RawLengthDist};
pub use mooncake::{parse_mooncake, TraceRequest, MOONCAKE_BLOCK_TOKENS};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Invalid workload input. Every variant names the offending field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorkloadError {
    #[error("`{field}` must be a whole number >= {min} (got {value}); counts of tokens, clients, requests and turns have no fractions")]
    BadCount { field: String, value: f64, min: f64 },
    #[error("`{field}` must be a finite number > 0 (got {value})")]
    NotPositive { field: String, value: f64 },
    #[error("`{field}`: min ({min}) is above max ({max}); swap them")]
    MinAboveMax { field: String, min: u64, max: u64 },
    #[error("`{field}` must not be empty")]
    Empty { field: String },
    #[error("`{field}`: {problem}")]
    Invalid { field: String, problem: String },
    #[error("workload JSON: {0}")]
    Json(String),
    #[error("Mooncake trace line {line}: {problem}")]
    Trace { line: usize, problem: String },
    #[error("unknown workload preset `{0}`; known presets: agentic-coding")]
    UnknownPreset(String),
}

/// How requests arrive, as written: `{"type": "<kind>", ...}` with exactly the kind's fields
/// (read by `tagged.rs`'s hand-written reader, serde's messages; see [`RawLengthDist`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RawArrival {
    /// `concurrency` clients; each sends its next request when its last one completes, after
    /// `think_time_s` (default 0).
    ClosedLoop {
        concurrency: f64,
        #[serde(default)]
        think_time_s: Option<f64>,
    },
    /// Poisson process with `rate` requests (or sessions) per second.
    Poisson { rate: f64 },
    /// Evenly spaced arrivals at `rate` per second.
    Constant { rate: f64 },
    /// Gamma-distributed inter-arrival times with mean `1/rate` and coefficient of variation `cv`.
    Gamma { rate: f64, cv: f64 },
    /// `count` requests (or sessions) at t = 0.
    Burst { count: f64 },
    /// The trace's own timestamps (Mooncake content only), optionally rescaled to `rate`.
    Trace {
        #[serde(default)]
        rate: Option<f64>,
    },
}

/// What requests contain, as written: `{"type": "<kind>", ...}` with exactly the kind's fields
/// (`agentic`: [`RawAgentic`]'s; read by `tagged.rs`'s hand-written reader).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RawContent {
    /// Independent requests; with `shared_prefix`, each prompt starts with one of `groups`
    /// system prompts of `tokens` tokens, and `input` is the length after that prefix. With
    /// `shared_prefix.prompts_per_group`, the prompts come from a fixed pool that is sent over
    /// and over ([`RawSharedPrefix::prompts_per_group`]).
    Synthetic {
        input: RawLengthDist,
        output: RawLengthDist,
        #[serde(default)]
        shared_prefix: Option<RawSharedPrefix>,
    },
    /// Multi-turn sessions: each turn re-sends the whole conversation.
    Agentic(RawAgentic),
    /// A named preset (`agentic-coding`).
    Preset { name: String },
    /// A Mooncake JSONL trace given inline.
    Mooncake {
        jsonl: String,
        #[serde(default)]
        block_tokens: Option<f64>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSharedPrefix {
    pub groups: f64,
    pub tokens: f64,
    /// Distinct prompts per group: the workload is a pool of `groups x prompts_per_group`
    /// prompts (each its group's prefix and a question of its own, lengths drawn once from
    /// `input`), shuffled once and sent in that order over and over, as inference-perf's
    /// `shared_prefix` generator does (`num_groups`, `num_prompts_per_group`). Absent: every
    /// request's question is new (docs/workloads.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_per_group: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgentic {
    /// A system prompt shared by every session (0 = none).
    #[serde(default)]
    pub system_prompt_tokens: f64,
    /// The first turn's input, including the system prompt.
    pub first_turn_tokens: f64,
    /// New user/tool tokens appended each later turn.
    pub tokens_per_turn: RawLengthDist,
    /// Output tokens per turn.
    pub output_tokens: RawLengthDist,
    /// Turns per session.
    pub turns: f64,
    /// Time between a turn's completion and the next turn (default 0).
    #[serde(default)]
    pub think_time_s: Option<f64>,
}

/// A workload as written (JSON). See `docs/workloads.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkloadSpec {
    pub arrival: RawArrival,
    pub requests: RawContent,
    #[serde(default)]
    pub seed: u64,
}

/// Validated arrival process.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    ClosedLoop { concurrency: u32, think_s: f64 },
    Poisson { rate: f64 },
    Constant { rate: f64 },
    Gamma { rate: f64, cv: f64 },
    Burst { count: u64 },
    Trace { rate: Option<f64> },
}

/// Validated agentic session parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Agentic {
    pub system_prompt_tokens: u64,
    pub first_turn_tokens: u64,
    pub tokens_per_turn: LengthDist,
    pub output_tokens: LengthDist,
    pub turns: u32,
    pub think_s: f64,
}

/// A validated shared-prefix structure ([`RawSharedPrefix`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedPrefix {
    pub groups: u32,
    /// Prefix tokens per group.
    pub tokens: u64,
    /// Distinct prompts per group, sent in a fixed shuffled cycle; `None`: every question is new.
    pub prompts_per_group: Option<u32>,
}

impl SharedPrefix {
    /// The number of distinct prompts of a pool (`groups x prompts_per_group`), if there is one.
    pub fn pool_size(&self) -> Option<u64> {
        self.prompts_per_group
            .map(|p| u64::from(p) * u64::from(self.groups))
    }
}

/// Validated request content.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Synthetic {
        input: LengthDist,
        output: LengthDist,
        shared_prefix: Option<SharedPrefix>,
    },
    Agentic(Agentic),
    Trace(Vec<TraceRequest>),
}

impl Content {
    /// The nominal mean prompt length of synthetic requests in tokens, shared prefix included
    /// ([`LengthDist::nominal_mean`], rounded); `None` for agentic sessions and traces.
    pub fn nominal_prompt_tokens(&self) -> Option<u64> {
        match self {
            Content::Synthetic {
                input,
                shared_prefix,
                ..
            } => {
                let t = input.nominal_mean() + shared_prefix.map_or(0, |p| p.tokens) as f64;
                (t.is_finite() && t >= 0.0).then(|| libm::round(t) as u64)
            }
            _ => None,
        }
    }
}

/// A validated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    pub arrival: Arrival,
    pub content: Content,
    pub seed: u64,
}

/// One sweep level: the knob the sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Closed-loop clients (or burst size).
    Concurrency(u32),
    /// Open-loop requests (or sessions) per second.
    RequestRate(f64),
}

impl Level {
    pub fn value(&self) -> f64 {
        match self {
            Level::Concurrency(c) => *c as f64,
            Level::RequestRate(r) => *r,
        }
    }
}

fn bounded(field: &str, v: f64, b: crate::bounds::Bound) -> Result<f64, WorkloadError> {
    b.check(v).map_err(|fix| WorkloadError::Invalid {
        field: field.into(),
        problem: format!("{fix} (got {})", crate::bounds::fmt_num(v)),
    })
}
fn bounded_whole(field: &str, v: f64, b: crate::bounds::Bound) -> Result<u64, WorkloadError> {
    b.check_whole(v).map_err(|fix| WorkloadError::Invalid {
        field: field.into(),
        problem: format!("{fix} (got {})", crate::bounds::fmt_num(v)),
    })
}
fn think(field: &str, v: f64) -> Result<f64, WorkloadError> {
    bounded(field, v, crate::bounds::THINK_TIME_S)
}
fn check_rate(field: &str, v: f64) -> Result<f64, WorkloadError> {
    bounded(field, v, crate::bounds::REQUEST_RATE)
}
fn tokens(field: &str, v: f64, min: f64) -> Result<u64, WorkloadError> {
    if min == 0.0 && v == 0.0 {
        return Ok(0);
    }
    bounded_whole(field, v, crate::bounds::TOKENS)
}

/// The `agentic-coding` preset: ~64K mean input, 400 output, ~90% prefix reuse (see
/// docs/workloads.md for the derivation).
pub fn preset(name: &str) -> Result<RawContent, WorkloadError> {
    match name {
        "agentic-coding" => Ok(RawContent::Agentic(RawAgentic {
            system_prompt_tokens: 16384.0,
            first_turn_tokens: 34000.0,
            tokens_per_turn: RawLengthDist::Constant { tokens: 5600.0 },
            output_tokens: RawLengthDist::Constant { tokens: 400.0 },
            turns: 11.0,
            think_time_s: None,
        })),
        other => Err(WorkloadError::UnknownPreset(other.into())),
    }
}

impl RawWorkloadSpec {
    pub fn from_json(s: &str) -> Result<RawWorkloadSpec, WorkloadError> {
        serde_json::from_str(s).map_err(|e| WorkloadError::Json(e.to_string()))
    }

    pub fn validate(&self) -> Result<WorkloadSpec, WorkloadError> {
        let arrival = match &self.arrival {
            RawArrival::ClosedLoop {
                concurrency,
                think_time_s,
            } => Arrival::ClosedLoop {
                concurrency: bounded_whole(
                    "arrival.concurrency",
                    *concurrency,
                    crate::bounds::CONCURRENCY,
                )? as u32,
                think_s: think("arrival.think_time_s", think_time_s.unwrap_or(0.0))?,
            },
            RawArrival::Poisson { rate } => Arrival::Poisson {
                rate: check_rate("arrival.rate", *rate)?,
            },
            RawArrival::Constant { rate } => Arrival::Constant {
                rate: check_rate("arrival.rate", *rate)?,
            },
            RawArrival::Gamma { rate, cv } => Arrival::Gamma {
                rate: check_rate("arrival.rate", *rate)?,
                cv: bounded("arrival.cv", *cv, crate::bounds::GAMMA_CV)?,
            },
            RawArrival::Burst { count } => Arrival::Burst {
                count: bounded_whole("arrival.count", *count, crate::bounds::CONCURRENCY)?,
            },
            RawArrival::Trace { rate } => Arrival::Trace {
                rate: match rate {
                    Some(r) => Some(check_rate("arrival.rate", *r)?),
                    None => None,
                },
            },
        };
        let content = validate_content(&self.requests)?;
        if matches!(arrival, Arrival::Trace { .. }) && !matches!(content, Content::Trace(_)) {
            return Err(WorkloadError::Invalid {
                field: "arrival.type".into(),
                problem: "`trace` arrivals need `requests.type = mooncake`; use poisson or closed_loop for synthetic requests".into(),
            });
        }
        Ok(WorkloadSpec {
            arrival,
            content,
            seed: self.seed,
        })
    }
}

fn validate_shared_prefix(p: &RawSharedPrefix) -> Result<SharedPrefix, WorkloadError> {
    let groups = bounded_whole(
        "requests.shared_prefix.groups",
        p.groups,
        crate::bounds::SMALL_COUNT,
    )? as u32;
    let tokens = tokens("requests.shared_prefix.tokens", p.tokens, 1.0)?;
    let prompts_per_group = match p.prompts_per_group {
        None => None,
        Some(v) => {
            let field = "requests.shared_prefix.prompts_per_group";
            let n = bounded_whole(field, v, crate::bounds::SMALL_COUNT)?;
            let pool = n.saturating_mul(u64::from(groups));
            let most = crate::bounds::PROMPT_POOL.max as u64;
            if pool > most {
                return Err(WorkloadError::Invalid {
                    field: field.into(),
                    problem: format!(
                        "groups x prompts_per_group is {pool} distinct prompts, above {most}: lower either (a pool that large never repeats within a run; leave prompts_per_group out for fresh prompts)"
                    ),
                });
            }
            Some(n as u32)
        }
    };
    Ok(SharedPrefix {
        groups,
        tokens,
        prompts_per_group,
    })
}

fn validate_content(c: &RawContent) -> Result<Content, WorkloadError> {
    Ok(match c {
        RawContent::Synthetic {
            input,
            output,
            shared_prefix,
        } => Content::Synthetic {
            input: input.validate("requests.input")?,
            output: output.validate("requests.output")?,
            shared_prefix: match shared_prefix {
                Some(p) => Some(validate_shared_prefix(p)?),
                None => None,
            },
        },
        RawContent::Agentic(a) => {
            let sys = tokens("requests.system_prompt_tokens", a.system_prompt_tokens, 0.0)?;
            let first = tokens("requests.first_turn_tokens", a.first_turn_tokens, 1.0)?;
            if first <= sys {
                return Err(WorkloadError::Invalid {
                    field: "requests.first_turn_tokens".into(),
                    problem: format!("must exceed system_prompt_tokens ({sys}): it includes the system prompt plus the first user message"),
                });
            }
            Content::Agentic(Agentic {
                system_prompt_tokens: sys,
                first_turn_tokens: first,
                tokens_per_turn: a.tokens_per_turn.validate("requests.tokens_per_turn")?,
                output_tokens: a.output_tokens.validate("requests.output_tokens")?,
                turns: bounded_whole("requests.turns", a.turns, crate::bounds::SMALL_COUNT)? as u32,
                think_s: think("requests.think_time_s", a.think_time_s.unwrap_or(0.0))?,
            })
        }
        RawContent::Preset { name } => validate_content(&preset(name)?)?,
        RawContent::Mooncake {
            jsonl,
            block_tokens,
        } => {
            let bt = tokens(
                "requests.block_tokens",
                block_tokens.unwrap_or(MOONCAKE_BLOCK_TOKENS as f64),
                1.0,
            )?;
            let reqs = parse_mooncake(jsonl, bt)?;
            if reqs.is_empty() {
                return Err(WorkloadError::Empty {
                    field: "requests.jsonl".into(),
                });
            }
            Content::Trace(reqs)
        }
    })
}

impl WorkloadSpec {
    /// The spec with the sweep level applied: concurrency for closed loop and burst, rate for
    /// open-loop processes and trace replay.
    pub fn at_level(&self, level: Level) -> Result<WorkloadSpec, WorkloadError> {
        let mut s = self.clone();
        let bad = |what: &str| WorkloadError::Invalid {
            field: "sweep.levels".into(),
            problem: what.to_string(),
        };
        match (&mut s.arrival, level) {
            (Arrival::ClosedLoop { concurrency, .. }, Level::Concurrency(c)) => {
                if c == 0 {
                    return Err(bad("concurrency levels must be >= 1"));
                }
                *concurrency = c
            }
            (Arrival::Burst { count }, Level::Concurrency(c)) => {
                if c == 0 {
                    return Err(bad("burst sizes must be >= 1"));
                }
                *count = c as u64
            }
            (
                Arrival::Poisson { rate }
                | Arrival::Constant { rate }
                | Arrival::Gamma { rate, .. },
                Level::RequestRate(r),
            ) => {
                *rate = check_rate("sweep.levels", r)?;
            }
            (Arrival::Trace { rate }, Level::RequestRate(r)) => {
                if let Content::Trace(t) = &self.content {
                    let span = t.last().map(|x| x.timestamp_ms).unwrap_or(0)
                        - t.first().map(|x| x.timestamp_ms).unwrap_or(0);
                    if t.len() > 1 && span == 0 {
                        return Err(WorkloadError::Invalid {
                            field: "sweep.request_rates".into(),
                            problem: "every request of the trace has the same timestamp, so the trace has no rate to rescale to a level; use a burst arrival (the trace as content) or fix the timestamps".into(),
                        });
                    }
                }
                *rate = Some(check_rate("sweep.levels", r)?);
            }
            (Arrival::ClosedLoop { .. } | Arrival::Burst { .. }, Level::RequestRate(_)) => {
                return Err(bad(
                    "closed-loop and burst workloads sweep concurrency levels, not request rates",
                ));
            }
            (_, Level::Concurrency(_)) => {
                return Err(bad(
                    "open-loop workloads sweep request-rate levels, not concurrency",
                ));
            }
        }
        Ok(s)
    }

    /// The fewest tokens (prompt + output) a request of this workload can have; `None` for an
    /// agentic workload (later turns grow) and an empty trace.
    pub fn shortest_request_tokens(&self) -> Option<u64> {
        match &self.content {
            Content::Synthetic {
                input,
                output,
                shared_prefix,
            } => Some(
                shared_prefix
                    .map(|p| p.tokens)
                    .unwrap_or(0)
                    .saturating_add(input.min_value())
                    .saturating_add(output.min_value()),
            ),
            Content::Agentic(_) => None,
            Content::Trace(t) => t
                .iter()
                .map(|r| r.input_length.saturating_add(r.output_length))
                .min(),
        }
    }

    /// A warning when requests can exceed `max_model_len` (prompt + output): vLLM rejects those,
    /// and so does the simulator (counted in `rejected_requests`). `None` when every request fits.
    pub fn max_model_len_warning(&self, max_model_len: u64) -> Option<String> {
        let over = |typical: u64, largest: u64, what: &str| -> Option<String> {
            if typical > max_model_len {
                Some(format!("{what} of {typical} tokens (prompt + output) exceed max_model_len {max_model_len}: vLLM rejects such requests, and so does the simulation (rejected_requests); raise max_model_len or shorten the requests"))
            } else if largest > max_model_len {
                Some(format!("{what} can reach {largest} tokens (prompt + output), above max_model_len {max_model_len}: those requests are rejected as vLLM rejects them (rejected_requests); raise max_model_len or clamp the lengths"))
            } else {
                None
            }
        };
        match &self.content {
            Content::Synthetic {
                input,
                output,
                shared_prefix,
            } => {
                let prefix = shared_prefix.map(|p| p.tokens).unwrap_or(0);
                let typical = prefix
                    .saturating_add(libm::round(input.nominal_mean()) as u64)
                    .saturating_add(libm::round(output.nominal_mean()) as u64);
                let largest = prefix
                    .saturating_add(input.max_value())
                    .saturating_add(output.max_value());
                over(typical, largest, "requests")
            }
            Content::Agentic(a) => {
                let first = a
                    .first_turn_tokens
                    .saturating_add(libm::round(a.output_tokens.nominal_mean()) as u64);
                over(first, first, "first turns")
            }
            Content::Trace(t) => {
                let n = t
                    .iter()
                    .filter(|r| r.input_length.saturating_add(r.output_length) > max_model_len)
                    .count();
                (n > 0).then(|| format!("{n} of the trace's {} requests exceed max_model_len {max_model_len} (prompt + output): they are rejected as vLLM rejects them (rejected_requests); raise max_model_len", t.len()))
            }
        }
    }

    /// The level the spec itself describes.
    pub fn own_level(&self) -> Option<Level> {
        match &self.arrival {
            Arrival::ClosedLoop { concurrency, .. } => Some(Level::Concurrency(*concurrency)),
            Arrival::Burst { count } => {
                Some(Level::Concurrency((*count).min(u32::MAX as u64) as u32))
            }
            Arrival::Poisson { rate }
            | Arrival::Constant { rate }
            | Arrival::Gamma { rate, .. } => Some(Level::RequestRate(*rate)),
            Arrival::Trace { rate } => rate.map(Level::RequestRate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_rejected() {
        let e = RawWorkloadSpec::from_json(
            r#"{"arrival":{"type":"poisson","rate":1,"burst":3},"requests":{"type":"preset","name":"agentic-coding"}}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("burst"), "{e}");
    }

    #[test]
    fn bad_values_name_their_field() {
        let raw = RawWorkloadSpec::from_json(
            r#"{"arrival":{"type":"gamma","rate":2,"cv":-1},"requests":{"type":"synthetic","input":{"type":"constant","tokens":10},"output":{"type":"constant","tokens":5}}}"#,
        )
        .unwrap();
        let e = raw.validate().unwrap_err();
        assert!(
            matches!(&e, WorkloadError::Invalid { field, problem } if field == "arrival.cv" && problem.contains("between")),
            "{e:?}"
        );
        let raw = RawWorkloadSpec::from_json(
            r#"{"arrival":{"type":"closed_loop","concurrency":0},"requests":{"type":"preset","name":"agentic-coding"}}"#,
        )
        .unwrap();
        assert!(
            matches!(raw.validate(), Err(WorkloadError::Invalid { field, .. }) if field == "arrival.concurrency")
        );
        let raw = RawWorkloadSpec::from_json(
            r#"{"arrival":{"type":"burst","count":3},"requests":{"type":"preset","name":"chat"}}"#,
        )
        .unwrap();
        assert_eq!(
            raw.validate(),
            Err(WorkloadError::UnknownPreset("chat".into()))
        );
    }

    #[test]
    fn a_prompt_pool_is_bounded_and_names_its_field() {
        let content = |ppg: &str| {
            RawWorkloadSpec::from_json(&format!(
                r#"{{"arrival":{{"type":"poisson","rate":1}},"requests":{{"type":"synthetic","input":{{"type":"constant","tokens":10}},"output":{{"type":"constant","tokens":5}},"shared_prefix":{{"groups":1000,"tokens":64,"prompts_per_group":{ppg}}}}}}}"#
            ))
            .unwrap()
            .validate()
        };
        for bad in ["0", "2.5", "-1"] {
            assert!(
                matches!(content(bad), Err(WorkloadError::Invalid { field, .. }) if field == "requests.shared_prefix.prompts_per_group"),
                "{bad}"
            );
        }
        // 1000 groups x 1001 prompts is past the pool's bound; the message says which product.
        let e = content("1001").unwrap_err();
        assert!(
            matches!(&e, WorkloadError::Invalid { field, problem } if field == "requests.shared_prefix.prompts_per_group" && problem.contains("1001000 distinct prompts")),
            "{e:?}"
        );
        let ok = content("1000").unwrap();
        match ok.content {
            Content::Synthetic {
                shared_prefix: Some(p),
                ..
            } => assert_eq!(p.pool_size(), Some(1_000_000)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn level_kind_must_match_arrival() {
        let spec = RawWorkloadSpec::from_json(
            r#"{"arrival":{"type":"poisson","rate":1},"requests":{"type":"preset","name":"agentic-coding"}}"#,
        )
        .unwrap()
        .validate()
        .unwrap();
        assert!(spec.at_level(Level::Concurrency(4)).is_err());
        let s2 = spec.at_level(Level::RequestRate(3.0)).unwrap();
        assert_eq!(s2.arrival, Arrival::Poisson { rate: 3.0 });
    }
}
