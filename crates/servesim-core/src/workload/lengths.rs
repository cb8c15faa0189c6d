//! Token-length distributions. `docs/workloads.md` gives each one's parameters.

use super::WorkloadError;
use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// A length distribution as written in a scenario file: `{"type": "<kind>", ...}` with exactly
/// the kind's fields. Read by a hand-written `Deserialize` (below) with serde's own messages
/// (unknown variant, missing / unknown / duplicate field): the derived internally tagged reader
/// buffered every variant through serde's `Content` and was the page binary's largest
/// deserializer (docs/performance.md "Web").
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RawLengthDist {
    Constant {
        tokens: f64,
    },
    /// Uniform integer in `[min, max]`.
    Uniform {
        min: f64,
        max: f64,
    },
    /// Uniform in `[min_ratio, max_ratio] x nominal` (e.g. 0.8-1.0 x 1024).
    UniformRatio {
        nominal: f64,
        min_ratio: f64,
        max_ratio: f64,
    },
    /// Normal(mean, std) clamped to `[min, max]`.
    Normal {
        mean: f64,
        std: f64,
        min: f64,
        max: f64,
    },
    /// Lognormal with the given mean and standard deviation of the length itself, clamped to
    /// `[min, max]` (min defaults to 1, max to unbounded).
    Lognormal {
        mean: f64,
        std: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// Exponential with the given mean, clamped to `[min, max]`.
    Exponential {
        mean: f64,
        #[serde(default)]
        min: Option<f64>,
        #[serde(default)]
        max: Option<f64>,
    },
    /// Uniform choice from a list of lengths.
    Empirical {
        values: Vec<f64>,
    },
}

/// The kinds, and the fields each takes in declaration order: the first `required` are required.
const KINDS: [&str; 7] = [
    "constant",
    "uniform",
    "uniform_ratio",
    "normal",
    "lognormal",
    "exponential",
    "empirical",
];
const FIELDS: [(&[&str], usize); 7] = [
    (&["tokens"], 1),
    (&["min", "max"], 2),
    (&["nominal", "min_ratio", "max_ratio"], 3),
    (&["mean", "std", "min", "max"], 4),
    (&["mean", "std", "min", "max"], 2),
    (&["mean", "min", "max"], 1),
    (&["values"], 1),
];

/// Every number field of any kind (index into the reader's slots).
const NUM_FIELDS: [&str; 8] = [
    "tokens",
    "min",
    "max",
    "nominal",
    "min_ratio",
    "max_ratio",
    "mean",
    "std",
];

impl<'de> Deserialize<'de> for RawLengthDist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(DistVisitor)
    }
}

struct DistVisitor;

impl<'de> serde::de::Visitor<'de> for DistVisitor {
    type Value = RawLengthDist;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a length distribution {\"type\": ..., ...}")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut kind: Option<String> = None;
        let mut nums: [Option<f64>; 8] = [None; 8];
        let mut values: Option<Vec<f64>> = None;
        // Keys seen, in order (checked against the kind's fields once the kind is known).
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = m.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format_args!("duplicate field `{key}`")));
            }
            match key.as_str() {
                "type" => kind = Some(m.next_value()?),
                "values" => values = Some(m.next_value()?),
                k => match NUM_FIELDS.iter().position(|f| *f == k) {
                    Some(i) => nums[i] = m.next_value::<Option<f64>>()?,
                    None => {
                        m.next_value::<serde::de::IgnoredAny>()?;
                    }
                },
            }
            seen.push(key);
        }
        let kind = kind.ok_or_else(|| A::Error::missing_field("type"))?;
        let Some(v) = KINDS.iter().position(|k| *k == kind) else {
            return Err(A::Error::unknown_variant(&kind, &KINDS));
        };
        let (fields, required) = FIELDS[v];
        if let Some(bad) = seen
            .iter()
            .find(|k| k.as_str() != "type" && !fields.contains(&k.as_str()))
        {
            return Err(A::Error::unknown_field(bad, fields));
        }
        let get = |f: &str| nums[NUM_FIELDS.iter().position(|x| *x == f).unwrap_or(0)];
        for f in &fields[..required] {
            let present = if *f == "values" {
                values.is_some()
            } else {
                get(f).is_some()
            };
            if !present {
                return Err(A::Error::missing_field(f));
            }
        }
        let n = |f: &str| get(f).unwrap_or(0.0);
        Ok(match v {
            0 => RawLengthDist::Constant {
                tokens: n("tokens"),
            },
            1 => RawLengthDist::Uniform {
                min: n("min"),
                max: n("max"),
            },
            2 => RawLengthDist::UniformRatio {
                nominal: n("nominal"),
                min_ratio: n("min_ratio"),
                max_ratio: n("max_ratio"),
            },
            3 => RawLengthDist::Normal {
                mean: n("mean"),
                std: n("std"),
                min: n("min"),
                max: n("max"),
            },
            4 => RawLengthDist::Lognormal {
                mean: n("mean"),
                std: n("std"),
                min: get("min"),
                max: get("max"),
            },
            5 => RawLengthDist::Exponential {
                mean: n("mean"),
                min: get("min"),
                max: get("max"),
            },
            _ => RawLengthDist::Empirical {
                values: values.unwrap_or_default(),
            },
        })
    }
}

/// A validated length distribution. All samples are integers >= 1.
#[derive(Clone, Debug, PartialEq)]
pub enum LengthDist {
    Constant(u64),
    Uniform {
        min: u64,
        max: u64,
    },
    Normal {
        mean: f64,
        std: f64,
        min: u64,
        max: u64,
    },
    Lognormal {
        mu: f64,
        sigma: f64,
        min: u64,
        max: u64,
    },
    Exponential {
        mean: f64,
        min: u64,
        max: u64,
    },
    Empirical(Vec<u64>),
}

fn count(field: &str, v: f64) -> Result<u64, WorkloadError> {
    crate::bounds::TOKENS
        .check_whole(v)
        .map_err(|fix| WorkloadError::Invalid {
            field: field.to_string(),
            problem: format!("{fix} (got {})", crate::bounds::fmt_num(v)),
        })
}

/// A length parameter (mean, std, nominal): positive and at most [`crate::bounds::TOKENS`].
fn positive(field: &str, v: f64) -> Result<f64, WorkloadError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(WorkloadError::NotPositive {
            field: field.to_string(),
            value: v,
        });
    }
    if v > crate::bounds::TOKENS.max {
        return Err(WorkloadError::Invalid {
            field: field.to_string(),
            problem: format!(
                "{} (got {})",
                crate::bounds::TOKENS.fix(),
                crate::bounds::fmt_num(v)
            ),
        });
    }
    Ok(v)
}

/// A ratio of a nominal length (`min_ratio`, `max_ratio`): positive, at most 1000.
fn ratio(field: &str, v: f64) -> Result<f64, WorkloadError> {
    if !v.is_finite() || v <= 0.0 || v > 1000.0 {
        return Err(WorkloadError::Invalid {
            field: field.to_string(),
            problem: format!(
                "must be a ratio in (0, 1000] (got {})",
                crate::bounds::fmt_num(v)
            ),
        });
    }
    Ok(v)
}

fn ordered(field: &str, min: u64, max: u64) -> Result<(), WorkloadError> {
    if min > max {
        return Err(WorkloadError::MinAboveMax {
            field: field.to_string(),
            min,
            max,
        });
    }
    Ok(())
}

impl RawLengthDist {
    /// Validates; `field` names this distribution in errors (e.g. `requests.input`).
    pub fn validate(&self, field: &str) -> Result<LengthDist, WorkloadError> {
        let f = |s: &str| format!("{field}.{s}");
        Ok(match self {
            RawLengthDist::Constant { tokens } => {
                LengthDist::Constant(count(&f("tokens"), *tokens)?)
            }
            RawLengthDist::Uniform { min, max } => {
                let (a, b) = (count(&f("min"), *min)?, count(&f("max"), *max)?);
                ordered(field, a, b)?;
                LengthDist::Uniform { min: a, max: b }
            }
            RawLengthDist::UniformRatio {
                nominal,
                min_ratio,
                max_ratio,
            } => {
                let n = positive(&f("nominal"), *nominal)?;
                let lo = ratio(&f("min_ratio"), *min_ratio)?;
                let hi = ratio(&f("max_ratio"), *max_ratio)?;
                let a = libm::round(n * lo).max(1.0) as u64;
                let b = libm::round(n * hi).max(1.0) as u64;
                count(&f("max_ratio"), b as f64)?;
                ordered(field, a, b)?;
                LengthDist::Uniform { min: a, max: b }
            }
            RawLengthDist::Normal {
                mean,
                std,
                min,
                max,
            } => {
                let m = positive(&f("mean"), *mean)?;
                if !std.is_finite() || *std < 0.0 {
                    return Err(WorkloadError::NotPositive {
                        field: f("std"),
                        value: *std,
                    });
                }
                if *std > 0.0 {
                    positive(&f("std"), *std)?;
                }
                let (a, b) = (count(&f("min"), *min)?, count(&f("max"), *max)?);
                ordered(field, a, b)?;
                LengthDist::Normal {
                    mean: m,
                    std: *std,
                    min: a,
                    max: b,
                }
            }
            RawLengthDist::Lognormal {
                mean,
                std,
                min,
                max,
            } => {
                let m = positive(&f("mean"), *mean)?;
                let s = positive(&f("std"), *std)?;
                let a = count(&f("min"), min.unwrap_or(1.0))?;
                let b = match max {
                    Some(x) => count(&f("max"), *x)?,
                    None => crate::bounds::TOKENS.max as u64,
                };
                ordered(field, a, b)?;
                let sigma2 = libm::log(1.0 + (s * s) / (m * m));
                LengthDist::Lognormal {
                    mu: libm::log(m) - sigma2 / 2.0,
                    sigma: libm::sqrt(sigma2),
                    min: a,
                    max: b,
                }
            }
            RawLengthDist::Exponential { mean, min, max } => {
                let m = positive(&f("mean"), *mean)?;
                let a = count(&f("min"), min.unwrap_or(1.0))?;
                let b = match max {
                    Some(x) => count(&f("max"), *x)?,
                    None => crate::bounds::TOKENS.max as u64,
                };
                ordered(field, a, b)?;
                LengthDist::Exponential {
                    mean: m,
                    min: a,
                    max: b,
                }
            }
            RawLengthDist::Empirical { values } => {
                if values.is_empty() {
                    return Err(WorkloadError::Empty { field: f("values") });
                }
                let v = values
                    .iter()
                    .map(|x| count(&f("values"), *x))
                    .collect::<Result<Vec<_>, _>>()?;
                LengthDist::Empirical(v)
            }
        })
    }
}

fn clamp_round(x: f64, min: u64, max: u64) -> u64 {
    let r = libm::round(x);
    if r.is_nan() || r < min as f64 {
        min
    } else if r >= max as f64 {
        max
    } else {
        r as u64
    }
}

impl LengthDist {
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match self {
            LengthDist::Constant(n) => *n,
            LengthDist::Uniform { min, max } => rng.range_u64(*min, *max),
            LengthDist::Normal {
                mean,
                std,
                min,
                max,
            } => clamp_round(mean + std * rng.std_normal(), *min, *max),
            LengthDist::Lognormal {
                mu,
                sigma,
                min,
                max,
            } => clamp_round(libm::exp(mu + sigma * rng.std_normal()), *min, *max),
            LengthDist::Exponential { mean, min, max } => {
                clamp_round(rng.exponential(*mean), *min, *max)
            }
            LengthDist::Empirical(v) => v[rng.range_u64(0, v.len() as u64 - 1) as usize],
        }
    }

    /// The smallest length the distribution can produce.
    pub fn min_value(&self) -> u64 {
        match self {
            LengthDist::Constant(n) => *n,
            LengthDist::Uniform { min, .. }
            | LengthDist::Normal { min, .. }
            | LengthDist::Lognormal { min, .. }
            | LengthDist::Exponential { min, .. } => *min,
            LengthDist::Empirical(v) => v.iter().copied().min().unwrap_or(1),
        }
    }

    /// The largest length the distribution can produce.
    pub fn max_value(&self) -> u64 {
        match self {
            LengthDist::Constant(n) => *n,
            LengthDist::Uniform { max, .. }
            | LengthDist::Normal { max, .. }
            | LengthDist::Lognormal { max, .. }
            | LengthDist::Exponential { max, .. } => *max,
            LengthDist::Empirical(v) => v.iter().copied().max().unwrap_or(1),
        }
    }

    /// The distribution's mean before clamping (for documentation and presets).
    pub fn nominal_mean(&self) -> f64 {
        match self {
            LengthDist::Constant(n) => *n as f64,
            LengthDist::Uniform { min, max } => (*min + *max) as f64 / 2.0,
            LengthDist::Normal { mean, .. } | LengthDist::Exponential { mean, .. } => *mean,
            LengthDist::Lognormal { mu, sigma, .. } => libm::exp(mu + sigma * sigma / 2.0),
            LengthDist::Empirical(v) => v.iter().sum::<u64>() as f64 / v.len() as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_takes_every_kind_and_gives_serdes_messages() {
        let all = [
            RawLengthDist::Constant { tokens: 300.0 },
            RawLengthDist::Uniform { min: 1.0, max: 2.0 },
            RawLengthDist::UniformRatio {
                nominal: 1024.0,
                min_ratio: 0.8,
                max_ratio: 1.0,
            },
            RawLengthDist::Normal {
                mean: 5.0,
                std: 0.1 + 0.2,
                min: 1.0,
                max: 9.0,
            },
            RawLengthDist::Lognormal {
                mean: 5.0,
                std: 2.0,
                min: None,
                max: Some(9.0),
            },
            RawLengthDist::Exponential {
                mean: 5.0,
                min: Some(1.0),
                max: None,
            },
            RawLengthDist::Empirical {
                values: vec![1.0, 2.5],
            },
        ];
        for d in all {
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(serde_json::from_str::<RawLengthDist>(&json).unwrap(), d);
            let v = serde_json::to_value(&d).unwrap();
            assert_eq!(serde_json::from_value::<RawLengthDist>(v).unwrap(), d);
        }
        // The tag may come last; a null optional field is absent.
        let d: RawLengthDist =
            serde_json::from_str(r#"{"mean": 5, "max": null, "type": "exponential"}"#).unwrap();
        assert_eq!(
            d,
            RawLengthDist::Exponential {
                mean: 5.0,
                min: None,
                max: None
            }
        );
        let err = |j: &str| {
            serde_json::from_str::<RawLengthDist>(j)
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"type": "zipf"}"#).starts_with(
            "unknown variant `zipf`, expected one of `constant`, `uniform`, `uniform_ratio`"
        ));
        assert!(err(r#"{"type": "constant", "tokens": 5, "mean": 3}"#)
            .starts_with("unknown field `mean`, expected `tokens`"));
        assert!(err(r#"{"type": "normal", "mean": 5, "std": 1, "min": 1}"#)
            .starts_with("missing field `max`"));
        assert!(err(r#"{"tokens": 5}"#).starts_with("missing field `type`"));
        assert!(err(r#"{"type": "constant", "tokens": 5, "tokens": 6}"#)
            .starts_with("duplicate field `tokens`"));
        assert!(err(r#"[1, 2]"#).starts_with("invalid type: sequence"));
    }

    #[test]
    fn lognormal_sample_mean_matches_requested_mean() {
        let d = RawLengthDist::Lognormal {
            mean: 1000.0,
            std: 500.0,
            min: None,
            max: None,
        }
        .validate("x")
        .unwrap();
        let mut r = Rng::new(3);
        let n = 100_000;
        let m = (0..n).map(|_| d.sample(&mut r) as f64).sum::<f64>() / n as f64;
        assert!((m - 1000.0).abs() < 10.0, "{m}");
    }

    #[test]
    fn normal_is_clamped_and_uniform_ratio_in_range() {
        let d = RawLengthDist::Normal {
            mean: 100.0,
            std: 1000.0,
            min: 50.0,
            max: 150.0,
        }
        .validate("x")
        .unwrap();
        let u = RawLengthDist::UniformRatio {
            nominal: 1000.0,
            min_ratio: 0.8,
            max_ratio: 1.0,
        }
        .validate("x")
        .unwrap();
        let mut r = Rng::new(9);
        for _ in 0..10_000 {
            assert!((50..=150).contains(&d.sample(&mut r)));
            assert!((800..=1000).contains(&u.sample(&mut r)));
        }
    }

    #[test]
    fn invalid_lengths_name_the_field() {
        let e = RawLengthDist::Uniform {
            min: 10.0,
            max: 5.0,
        }
        .validate("requests.input")
        .unwrap_err();
        assert!(e.to_string().contains("requests.input"), "{e}");
        let e = RawLengthDist::Constant { tokens: 0.0 }
            .validate("requests.output")
            .unwrap_err();
        assert!(e.to_string().contains("requests.output.tokens"), "{e}");
        let e = RawLengthDist::Normal {
            mean: f64::NAN,
            std: 1.0,
            min: 1.0,
            max: 2.0,
        }
        .validate("r")
        .unwrap_err();
        assert!(matches!(e, WorkloadError::NotPositive { .. }));
    }
}
