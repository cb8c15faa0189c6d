//! Input bounds: the one place where every rate, time, length, size and efficiency a user can
//! give gets its physically sensible range (docs/scenario.md "Bounds" lists them), plus the
//! helpers that keep error messages short (compact numbers, clipped echoes).
//!
//! Architecture invariant: validation refuses values outside these ranges, naming the field and
//! the range; everything downstream (simulated time in `Ticks`, token and byte counts) may then
//! assume the products of bounded inputs fit in a `u64` (and saturates where it still could not).

/// A closed range `[min, max]` for one kind of input, with its unit and why the limits are where
/// they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub min: f64,
    pub max: f64,
    /// Unit as shown to people (`req/s`, `s`, `tokens`).
    pub unit: &'static str,
}

impl Bound {
    /// `Ok(v)` when `v` is finite and inside the range; else the fix as text ("must be between
    /// 1e-06 and 1e+06 req/s").
    pub fn check(&self, v: f64) -> Result<f64, String> {
        if v.is_finite() && v >= self.min && v <= self.max {
            Ok(v)
        } else {
            Err(self.fix())
        }
    }
    /// A whole number inside the range.
    pub fn check_whole(&self, v: f64) -> Result<u64, String> {
        if v.is_finite() && v >= self.min && v <= self.max && v.fract() == 0.0 {
            Ok(v as u64)
        } else {
            Err(format!("must be a whole number {}", self.range_text()))
        }
    }
    /// The same check for an integer.
    pub fn check_u64(&self, v: u64) -> Result<u64, String> {
        if (v as f64) >= self.min && (v as f64) <= self.max {
            Ok(v)
        } else {
            Err(self.fix())
        }
    }
    pub fn fix(&self) -> String {
        format!("must be {}", self.range_text())
    }
    fn range_text(&self) -> String {
        let t = format!("between {} and {}", fmt_num(self.min), fmt_num(self.max));
        if self.unit.is_empty() {
            t
        } else {
            format!("{t} {}", self.unit)
        }
    }
}

/// Longest simulated time one level may cover, seconds (about 116 days). Far beyond any
/// benchmark, far below `u64` nanoseconds (584 years), so sums of bounded times cannot overflow.
pub const SIM_TIME_MAX_S: f64 = 1e7;

/// Arrival rates (`arrival.rate`, `sweep.request_rates`): one request per 11.6 days to a million
/// per second.
pub const REQUEST_RATE: Bound = Bound {
    min: 1e-6,
    max: 1e6,
    unit: "requests/s",
};
/// Most levels one sweep runs (a benchmark sweeps tens; each level is a whole simulation, so a
/// list of 200,000 measured levels would run for hours).
pub const MAX_SWEEP_LEVELS: usize = 1000;

/// Clients and burst sizes (`arrival.concurrency`, `arrival.count`, `sweep.concurrency`).
pub const CONCURRENCY: Bound = Bound {
    min: 1.0,
    max: 1e6,
    unit: "clients",
};
/// Level duration (`sweep.duration_s`).
pub const DURATION_S: Bound = Bound {
    min: 1e-3,
    max: SIM_TIME_MAX_S,
    unit: "s",
};
/// Think times between turns or requests (`think_time_s`): up to one day.
pub const THINK_TIME_S: Bound = Bound {
    min: 0.0,
    max: 86_400.0,
    unit: "s",
};
/// Requests per level (`sweep.num_requests`, `sweep.max_requests`).
pub const NUM_REQUESTS: Bound = Bound {
    min: 1.0,
    max: 1e8,
    unit: "requests",
};
/// Event cap per level (`sweep.max_events`).
pub const MAX_EVENTS: Bound = Bound {
    min: 1.0,
    max: 1e12,
    unit: "events",
};
/// Token lengths and their distribution parameters (mean, std, min, max, prefix, turn tokens,
/// trace lengths) and every token count of the engine (`max_model_len`,
/// `max_num_batched_tokens`, ...): up to 100 M tokens, ten times the longest context any
/// released model supports (Llama 4 Scout, 10 M).
pub const TOKENS: Bound = Bound {
    min: 1.0,
    max: 1e8,
    unit: "tokens",
};
/// Gamma arrivals' coefficient of variation (`arrival.cv`): 0.001 (nearly constant) to 100
/// (extremely bursty). Below it the sampler's shape `1/cv^2` exceeds 10^6 and the arrivals are
/// constant for every purpose.
pub const GAMMA_CV: Bound = Bound {
    min: 1e-3,
    max: 100.0,
    unit: "",
};
/// Counts of turns, prefix groups.
pub const SMALL_COUNT: Bound = Bound {
    min: 1.0,
    max: 1e6,
    unit: "",
};
/// Distinct prompts of a prompt pool (`shared_prefix.groups x prompts_per_group`): up to 10^6, a
/// pool the generator holds (two words per prompt) and that repeats within a run of a million
/// requests; benchmark clients that cycle a pool use 10^2-10^4 (inference-perf's default 100).
pub const PROMPT_POOL: Bound = Bound {
    min: 1.0,
    max: 1e6,
    unit: "prompts",
};
/// `max_num_seqs`.
pub const MAX_NUM_SEQS: Bound = Bound {
    min: 1.0,
    max: 1e6,
    unit: "sequences",
};
/// V0's `num_scheduler_steps` (multi-step scheduling): 1 (off) to 256. vLLM sets no upper
/// limit; its multi-step examples and benchmarks use 8-16 (dstack's sweep 5-15), and a round
/// of more than a few hundred steps would hold every arrival for seconds.
pub const SCHEDULER_STEPS: Bound = Bound {
    min: 1.0,
    max: 256.0,
    unit: "steps",
};
/// Efficiency fractions of a peak (`efficiencies.gemm_bf16`, ...): 0.1% to 100%.
pub const EFFICIENCY: Bound = Bound {
    min: 1e-3,
    max: 1.0,
    unit: "(fraction of peak)",
};
/// Latencies and overheads of the step-time model and the front end (`*_s` efficiencies): up to
/// one minute per step or request.
pub const OVERHEAD_S: Bound = Bound {
    min: 0.0,
    max: 60.0,
    unit: "s",
};
/// Front-end time per prompt token (`api_serial_per_input_token_s`): up to 1 ms per token (a
/// tokeniser at 1,000 tokens/s, far slower than any measured).
pub const PER_TOKEN_S: Bound = Bound {
    min: 0.0,
    max: 1e-3,
    unit: "s per token",
};
/// Multipliers of the step-time model (`activation_vectors_per_layer`).
pub const MULTIPLIER: Bound = Bound {
    min: 1e-3,
    max: 1e3,
    unit: "",
};
/// Network bandwidth (`internode_bytes_s`): 1 MB/s to 100 TB/s.
pub const NET_BYTES_S: Bound = Bound {
    min: 1e6,
    max: 1e14,
    unit: "bytes/s",
};
/// Custom GPU memory (`gpu.custom.memory_visible_mib`): 256 MiB to 100 TiB.
pub const GPU_MEMORY_MIB: Bound = Bound {
    min: 256.0,
    max: 1e8,
    unit: "MiB",
};
/// Custom GPU HBM bandwidth (`gpu.custom.hbm_bandwidth_tb_s`).
pub const GPU_HBM_TB_S: Bound = Bound {
    min: 1e-3,
    max: 1e3,
    unit: "TB/s",
};
/// Custom GPU tensor-core peaks (`gpu.custom.*_dense_tflops`).
pub const GPU_TFLOPS: Bound = Bound {
    min: 1e-3,
    max: 1e6,
    unit: "TFLOPS",
};
/// Custom GPU scale-up link (`gpu.custom.scaleup_unidir_gb_s`).
pub const GPU_LINK_GB_S: Bound = Bound {
    min: 1e-3,
    max: 1e6,
    unit: "GB/s",
};
/// GPUs in a scale-up domain (`gpu.custom.scaleup_domain`).
pub const GPU_DOMAIN: Bound = Bound {
    min: 1.0,
    max: 1e5,
    unit: "GPUs",
};
/// Dimensions read from a `config.json` (`hidden_size`, `intermediate_size`, head counts, expert
/// counts, layers): at most a million (the largest released models stay below 60,000).
pub const CONFIG_DIM: Bound = Bound {
    min: 1.0,
    max: 1e6,
    unit: "",
};
/// `vocab_size` (the largest released vocabularies are about 260,000).
pub const CONFIG_VOCAB: Bound = Bound {
    min: 1.0,
    max: 1e7,
    unit: "tokens",
};
/// `max_position_embeddings` and other token counts of a `config.json`.
pub const CONFIG_TOKENS: Bound = Bound {
    min: 1.0,
    max: 1e9,
    unit: "tokens",
};
/// Parameters of one model (the largest released are about 2 x 10^12).
pub const MODEL_PARAMS_MAX: f64 = 1e14;

/// Largest text input read as a whole: a scenario, a `config.json`, a Mooncake trace, a measured
/// benchmark export, pasted text (CLI files, the page's paste boxes and file picks). 64 MiB is
/// over ten times the published Mooncake traces; anything larger is refused before it is read
/// into memory (`/dev/zero` included).
pub const TEXT_INPUT_MAX_BYTES: usize = 64 << 20;

/// Longest text echoed back in an error message, characters.
pub const ECHO_MAX_CHARS: usize = 80;

/// The longest model id looked up (Hugging Face caps a repository id at 96 characters; 256 leaves
/// room for a pasted URL prefix).
pub const MODEL_ID_MAX_CHARS: usize = 256;

/// A number for messages: plain decimals for ordinary magnitudes, scientific notation otherwise
/// (`1e-300`, not a 300-digit decimal).
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// `s` cut to [`ECHO_MAX_CHARS`] characters (with the original length) for quoting in errors.
pub fn clip(s: &str) -> String {
    let n = s.chars().count();
    if n <= ECHO_MAX_CHARS {
        s.to_string()
    } else {
        let head: String = s.chars().take(ECHO_MAX_CHARS).collect();
        format!("{head}... ({n} characters)")
    }
}

/// Longest message built around a user's input (a parser's error quoting it), characters.
pub const MESSAGE_MAX_CHARS: usize = 400;

/// `s` cut to [`MESSAGE_MAX_CHARS`] characters: for messages from parsers that quote the input.
pub fn clip_message(s: &str) -> String {
    let n = s.chars().count();
    if n <= MESSAGE_MAX_CHARS {
        s.to_string()
    } else {
        let head: String = s.chars().take(MESSAGE_MAX_CHARS).collect();
        format!("{head}... ({n} characters)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compact() {
        assert_eq!(fmt_num(1e-300), "1e-300");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(1e300), "1e300");
        assert_eq!(fmt_num(0.0), "0");
    }

    #[test]
    fn long_text_is_clipped() {
        let s = "x".repeat(10_000);
        let c = clip(&s);
        assert!(c.len() < 120 && c.contains("10000 characters"), "{c}");
        assert_eq!(clip("abc"), "abc");
    }

    #[test]
    fn bounds_check() {
        assert!(REQUEST_RATE.check(1e-300).is_err());
        assert!(REQUEST_RATE.check(f64::NAN).is_err());
        assert_eq!(REQUEST_RATE.check(5.0), Ok(5.0));
        assert!(TOKENS.check_whole(1.5).is_err());
        assert_eq!(TOKENS.check_whole(7.0), Ok(7));
        assert!(
            REQUEST_RATE.fix().contains("1e-6"),
            "{}",
            REQUEST_RATE.fix()
        );
    }
}
