//! Bounded reading of the files the CLI is given (scenarios, `config.json`, traces, measured
//! runs): at most [`TEXT_INPUT_MAX_BYTES`] bytes are read, so `/dev/zero` or a wrong multi-GB
//! file gives an error naming the file instead of exhausting memory.

use anyhow::{bail, Context, Result};
use servesim_core::bounds::TEXT_INPUT_MAX_BYTES;
use std::io::Read;
use std::path::Path;

/// The text of `path`, refused when longer than [`TEXT_INPUT_MAX_BYTES`] or not UTF-8.
pub fn read_text(path: &Path) -> Result<String> {
    let f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut buf = Vec::new();
    f.take(TEXT_INPUT_MAX_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    if buf.len() > TEXT_INPUT_MAX_BYTES {
        bail!(
            "{}: larger than {} MiB, the largest input file ServeSim reads; give the right file (a scenario, config.json, trace or benchmark export) or cut it down",
            path.display(),
            TEXT_INPUT_MAX_BYTES >> 20
        );
    }
    String::from_utf8(buf).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {}); give a JSON/CSV/text file",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Standard input as text, bounded like [`read_text`] (`--from-manifest -`).
pub fn read_stdin() -> Result<String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(TEXT_INPUT_MAX_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .context("reading standard input")?;
    if buf.len() > TEXT_INPUT_MAX_BYTES {
        bail!(
            "standard input: larger than {} MiB, the largest input ServeSim reads",
            TEXT_INPUT_MAX_BYTES >> 20
        );
    }
    String::from_utf8(buf).map_err(|e| {
        anyhow::anyhow!(
            "standard input: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}
