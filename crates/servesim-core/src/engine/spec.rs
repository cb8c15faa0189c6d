//! Speculative decoding as the scheduler sees it: drafts per decode, lookahead KV slots, the
//! EAGLE prefix-cache prune, and the per-request acceptance draws. The scheduling walk itself is
//! `sched_spec.rs`. Rules and their vLLM sources: docs/engine.md ("Speculative decoding").

use super::ConfigError;
use serde::{Deserialize, Serialize};

/// The engine's speculative decoding settings (from [`crate::speculative::SpeculativeSettings`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecDecode {
    /// Drafts proposed per decode and step (vLLM `num_speculative_tokens`).
    pub num_speculative_tokens: u32,
    /// KV slots allocated beyond the scheduled tokens (vLLM `Scheduler.num_lookahead_tokens`).
    pub num_lookahead_tokens: u32,
    /// EAGLE-style drafters (EAGLE, EAGLE-3, MTP) drop the last block of a prefix-cache hit
    /// (vLLM `FullAttentionManager.find_longest_cache_hit`, `use_eagle`).
    pub eagle_prune: bool,
    /// `rate[i]` = P(at least `i + 1` drafts accepted), non-increasing, one per position.
    pub accept_rates: Vec<f64>,
    /// Seed of the acceptance draws (each request draws from its own stream, keyed by its id).
    pub seed: u64,
}

impl SpecDecode {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let k = self.num_speculative_tokens;
        if k == 0 || k > crate::speculative::MAX_SPECULATIVE_TOKENS {
            return Err(ConfigError::Spec {
                field: "num_speculative_tokens",
                fix: "must be from 1 to 32",
            });
        }
        if self.accept_rates.len() != k as usize {
            return Err(ConfigError::Spec {
                field: "accept_rates",
                fix: "give one rate per draft position",
            });
        }
        let mut prev = 1.0;
        for &r in &self.accept_rates {
            if !(r.is_finite() && (0.0..=prev).contains(&r)) {
                return Err(ConfigError::Spec {
                    field: "accept_rates",
                    fix: "rates must lie in [0, 1] and be non-increasing",
                });
            }
            prev = r;
        }
        Ok(())
    }

    /// Drafts accepted out of `drafts` for the `n`-th draw of request `id`: one uniform
    /// `u = mix64(hash2(hash2(seed, id), n)) / 2^64` (53 bits), accepted beyond position `i`
    /// while `u < rate[i]` (inverse CDF of the acceptance distribution; a chain stops at the
    /// first rejection, and drafts cut by the token budget cap it).
    #[inline]
    pub fn draw(&self, id: u64, n: u64, drafts: u32) -> u32 {
        use crate::rng::{hash2, mix64};
        let x = mix64(hash2(hash2(self.seed, id), n));
        let u = (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let mut a = 0u32;
        while a < drafts && u < self.accept_rates[a as usize] {
            a += 1;
        }
        a
    }
}

/// The speculative part of a step, for the step-time model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStep {
    /// Draft tokens the target verifies this step (already counted in `StepBatch::num_tokens`).
    pub draft_tokens: u64,
    /// Decodes carrying at least one draft.
    pub decodes_with_drafts: u32,
    /// `num_speculative_tokens` (drafter passes per step).
    pub num_speculative_tokens: u32,
}
