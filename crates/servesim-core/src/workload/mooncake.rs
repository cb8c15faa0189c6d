//! Mooncake trace replay (FAST'25 "Mooncake" traces, github.com/kvcache-ai/Mooncake,
//! `traces/*.jsonl`): one JSON object per line with `timestamp` (ms), `input_length`,
//! `output_length` and `hash_ids` (one id per 512-token block of the prompt; equal ids mean equal
//! content including the whole prefix).
//!
//! Mapping onto our block size: hash id `i` of a request becomes a content segment covering prompt
//! tokens `[i*512, min((i+1)*512, input_length))`. The engine hashes its own blocks over segments,
//! so two requests share one of our blocks exactly when they share the trace blocks covering it
//! (and everything before). With `512 % block_size == 0` the sharing is the trace's, exactly;
//! otherwise one of our blocks straddling two trace blocks is shared only when both are.
//! Prompt tokens beyond `512 * hash_ids.len()` get a segment unique to the request.

use super::WorkloadError;
use crate::engine::Segment;
use crate::rng::hash2;
use serde::Deserialize;

/// Block size of the published Mooncake traces.
pub const MOONCAKE_BLOCK_TOKENS: u64 = 512;

const TRACE_SALT: u64 = 0x6d6f_6f6e_6361_6b65;

/// One trace request.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    pub timestamp_ms: u64,
    pub input_length: u64,
    pub output_length: u64,
    /// Prompt content (hash-id blocks, then a request-unique remainder if any).
    pub prompt: Vec<Segment>,
    /// Line number in the trace (1-based), also used to make unique streams.
    pub line: usize,
}

#[derive(Deserialize)]
struct Line {
    timestamp: f64,
    input_length: f64,
    output_length: f64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// Parses a Mooncake JSONL trace. Blank lines are skipped; anything else malformed is an error
/// naming the line. Extra fields on a line are ignored (traces are data, not configuration).
/// Requests come back sorted by timestamp (stable).
pub fn parse_mooncake(jsonl: &str, block_tokens: u64) -> Result<Vec<TraceRequest>, WorkloadError> {
    let mut out = Vec::new();
    for (i, raw) in jsonl.lines().enumerate() {
        let line = i + 1;
        let text = raw.trim();
        if text.is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(text).map_err(|e| WorkloadError::Trace {
            line,
            problem: e.to_string(),
        })?;
        let num = |name: &str, v: f64, min: f64| -> Result<u64, WorkloadError> {
            if !v.is_finite() || v < min || v.fract() != 0.0 {
                return Err(WorkloadError::Trace {
                    line,
                    problem: format!("`{name}` must be a whole number >= {min} (got {v})"),
                });
            }
            Ok(v as u64)
        };
        let ts = num("timestamp", l.timestamp, 0.0)?;
        let input = num("input_length", l.input_length, 1.0)?;
        let output = num("output_length", l.output_length, 1.0)?;
        if ts as f64 > crate::bounds::SIM_TIME_MAX_S * 1e3 {
            return Err(WorkloadError::Trace {
                line,
                problem: format!(
                    "`timestamp` {ts} ms is beyond {} s, the longest a level may cover",
                    crate::bounds::fmt_num(crate::bounds::SIM_TIME_MAX_S)
                ),
            });
        }
        for (name, v) in [("input_length", input), ("output_length", output)] {
            if let Err(fix) = crate::bounds::TOKENS.check_u64(v) {
                return Err(WorkloadError::Trace {
                    line,
                    problem: format!("`{name}` {fix}"),
                });
            }
        }
        let mut prompt = Vec::with_capacity(l.hash_ids.len() + 1);
        let mut covered = 0u64;
        for h in &l.hash_ids {
            if covered >= input {
                break;
            }
            let len = block_tokens.min(input - covered);
            prompt.push(Segment {
                stream: hash2(TRACE_SALT, *h),
                start: 0,
                len,
            });
            covered += len;
        }
        if covered < input {
            prompt.push(Segment {
                stream: hash2(TRACE_SALT ^ 0xffff, line as u64),
                start: 0,
                len: input - covered,
            });
        }
        out.push(TraceRequest {
            timestamp_ms: ts,
            input_length: input,
            output_length: output,
            prompt,
            line,
        });
    }
    // Replay in arrival order: a trace whose lines are not sorted by timestamp is sorted (stable,
    // so equal timestamps keep their line order), never replayed with earlier-than-now times.
    if out
        .windows(2)
        .any(|w| w[1].timestamp_ms < w[0].timestamp_ms)
    {
        out.sort_by_key(|r| r.timestamp_ms);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ids_become_512_token_segments_and_remainder_is_unique() {
        let t = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 10, \"hash_ids\": [7, 8]}\n\n{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [7, 9]}";
        let r = parse_mooncake(t, 512).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0].prompt.iter().map(|s| s.len).collect::<Vec<_>>(),
            vec![512, 512, 76]
        );
        assert_eq!(r[0].prompt[0], r[1].prompt[0]);
        assert_eq!(r[1].prompt[1].len, 88);
        assert_eq!(r[1].line, 3);
    }

    #[test]
    fn malformed_line_is_reported_with_its_number() {
        let t = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 1}";
        let e = parse_mooncake(t, 512).unwrap_err();
        assert!(matches!(e, WorkloadError::Trace { line: 2, .. }), "{e}");
    }

    #[test]
    fn unsorted_lines_are_replayed_in_timestamp_order() {
        let t = "{\"timestamp\": 900, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 0, \"input_length\": 20, \"output_length\": 1}\n{\"timestamp\": 900, \"input_length\": 30, \"output_length\": 1}";
        let r = parse_mooncake(t, 512).unwrap();
        let ts: Vec<u64> = r.iter().map(|x| x.timestamp_ms).collect();
        assert_eq!(ts, vec![0, 900, 900]);
        // equal timestamps keep their line order
        assert_eq!(r.iter().map(|x| x.line).collect::<Vec<_>>(), vec![2, 1, 3]);
    }
}
