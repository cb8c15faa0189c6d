//! vLLM's start-up line `GPU KV cache size: N tokens` (vllm/v1/core/kv_cache_utils.py,
//! `logger.info_once("GPU KV cache size: %s tokens", f"{num_tokens:,}")`; older versions print
//! the number without thousands separators).

use super::ImportError;

const NEEDLE: &str = "GPU KV cache size:";

/// Finds every "GPU KV cache size: N tokens" line in pasted log text. Returns `Ok(None)` when there
/// is none, `Ok(Some(n))` when all such lines agree (with data parallelism each engine logs its
/// own), and an error naming both lines when two disagree.
pub fn parse_kv_cache_tokens(log: &str) -> Result<Option<u64>, ImportError> {
    let mut found: Option<(usize, u64)> = None;
    for (i, line) in log.lines().enumerate() {
        let Some(pos) = line.find(NEEDLE) else {
            continue;
        };
        let rest = line[pos + NEEDLE.len()..].trim_start();
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '_')
            .filter(|c| c.is_ascii_digit())
            .collect();
        let after = rest
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '_')
            .trim_start();
        if digits.is_empty() || !after.starts_with("tokens") {
            return Err(ImportError::MissingField {
                file: "log".into(),
                line: i + 1,
                what: "a \"GPU KV cache size:\" line without \"N tokens\" after it".into(),
                fix: "paste the line exactly as vLLM printed it, e.g. \"GPU KV cache size: 123,456 tokens\"".into(),
            });
        }
        let Ok(n) = digits.parse::<u64>() else {
            return Err(ImportError::MissingField {
                file: "log".into(),
                line: i + 1,
                what: "the KV cache size is too large to be a token count".into(),
                fix: "paste the line exactly as vLLM printed it".into(),
            });
        };
        match found {
            None => found = Some((i + 1, n)),
            Some((first_line, first)) if first != n => {
                return Err(ImportError::MissingField {
                    file: "log".into(),
                    line: i + 1,
                    what: format!(
                        "this line logs {n} KV cache tokens but line {first_line} logs {first}"
                    ),
                    fix: "paste the start-up log of one engine (one replica) only".into(),
                })
            }
            Some(_) => {}
        }
    }
    Ok(found.map(|(_, n)| n))
}
