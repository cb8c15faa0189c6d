//! One row -> a scenario ([`setup_for`]): model, GPU, parallelism, dtypes, engine limits,
//! speculative decoding, workload and stop rule, and what to compare (docs/accuracy.md).

use super::*;
use crate::deploy::RawEngineSettings;
use crate::dtype::KvCacheDtype;
use crate::metric::{MetricId, Stat};
use crate::scenario::{Endpoint, GpuRef, ModelRef, Scenario, SCENARIO_VERSION};
use crate::speculative::{RawSpecAcceptance, RawSpeculativeConfig};
use crate::sweep::RawSweepSpec;
use crate::workload::{RawArrival, RawContent, RawLengthDist, RawSharedPrefix, RawWorkloadSpec};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Row -> scenario.

/// The catalog GPU of a CSV GPU name, found as the page and the CLI find it
/// ([`crate::gpu::find_gpu`]: ids, aliases, `nvidia-smi` names).
pub fn row_gpu(name: &str) -> Result<crate::gpu::GpuSpec, crate::gpu::GpuError> {
    // "A100-SXM-80GB (form factor not stated)": the part before the parenthetical.
    crate::gpu::find_gpu(name.split(" (").next().unwrap_or(name).trim())
}

/// The catalog GPU id of a CSV GPU name ([`row_gpu`]); the name itself when it is none.
pub fn catalog_gpu(name: &str) -> String {
    row_gpu(name).map_or_else(|_| name.to_string(), |g| g.id)
}

/// Coefficient of variation (std / mean) assumed for ShareGPT input and output lengths.
/// ASSUMPTION (docs/accuracy.md): lognormal with std = mean; the CSV gives only the means.
pub const SHAREGPT_CV: f64 = 1.0;
/// vLLM `benchmarks/datasets.py` `is_valid_sequence` defaults for ShareGPT: prompts and outputs
/// of at least 4 tokens, prompts of at most 1024 tokens, prompt + output at most 2048.
pub const SHAREGPT_MIN_LEN: f64 = 4.0;
pub const SHAREGPT_MAX_PROMPT: f64 = 1024.0;
pub const SHAREGPT_MAX_OUTPUT: f64 = 1024.0;
/// GPUStack's benchmark-runner (gpustack/benchmark-runner `benchmark_runner/sharegpt_to_guidellm.py`,
/// `convert_sharegpt_to_guidellm`) converts ShareGPT for guidellm without vLLM's filter: every first
/// turn, with the reference answer's token count as the output count. Its runs serve a 32,768-token
/// context (`--max-model-len=32768`), the only bound left; a lognormal of the rows' means (342 / 281
/// tokens) practically never reaches it.
pub const GUIDELLM_SHAREGPT_MAX: f64 = 32768.0;
/// Simulated length of an open-loop (constant-rate) point, seconds, and its warm-up.
/// The measured stages ran 600-1200 s; metrics at a constant rate below saturation reach steady
/// state within seconds, so a shorter simulated window changes the estimate by sampling noise only.
pub const OPEN_LOOP_DURATION_S: f64 = 120.0;
pub const OPEN_LOOP_WARMUP_S: f64 = 20.0;
/// The prompt pool inference-sim's runs sent: inference-perf's `SharedPrefix` defaults,
/// `num_groups` 10 and `num_prompts_per_group` 10. The runs' profiles name the groups and users
/// with `num_unique_system_prompts`, `num_users_per_system_prompt` and `enable_multi_turn_chat`,
/// keys the release they ran (v0.2: its results/config.yaml has no `enable_multi_turn_chat`,
/// added in v0.3) does not have, so pydantic dropped them and each run's effective config
/// (`default_args/<run>/results/config.yaml`) says `num_groups: 10`, `num_prompts_per_group: 10`.
/// v0.2's generator builds those 100 prompts once, shuffles them and cycles through them
/// (`SharedPrefixDataGenerator.get_data`), so every prompt recurs every 100 requests.
pub const INFERENCE_PERF_V02_POOL: (f64, f64) = (10.0, 10.0);
/// Workload seed used for every point.
pub const SEED: u64 = 42;

/// Acceptance probability of each MTP draft token when a row does not report it: the DeepSeek-V3
/// technical report (DeepSeek-AI 2024, §5.4.3 "Multi-Token Prediction Evaluation"): "the
/// acceptance rate of the second token prediction ranges between 85% and 90%"; the lower end.
pub const MTP_ACCEPTANCE_PER_TOKEN: f64 = 0.85;

/// The number of MTP speculative tokens of a row that ran MTP (`MTP(k)` in the workload or
/// `num_speculative_tokens k` in the serve command of the notes).
pub fn mtp_tokens(p: &CalibrationPoint) -> Option<u32> {
    let w = p.workload.to_ascii_lowercase();
    if let Some(i) = w.find("mtp(") {
        return leading_number(&w[i + 4..])
            .map(|k| k as u32)
            .filter(|k| (1..=8).contains(k));
    }
    if p.notes.contains("SPEC DECODING: MTP ON") {
        return number_after(&p.notes, "num_speculative_tokens ")
            .map(|k| k as u32)
            .filter(|k| (1..=8).contains(k));
    }
    None
}

/// The per-position acceptance rates (fractions) a row's notes report for its `k` MTP draft
/// positions: `MEASURED acceptance: ... per-position a / b / c %` (vLLM's `SpecDecoding metrics`
/// log line, "Per-position acceptance rate"), when there are exactly `k` of them, each in [0, 1].
pub fn measured_mtp_acceptance(p: &CalibrationPoint, k: u32) -> Option<Vec<f64>> {
    let at = p.notes.find("MEASURED acceptance:")?;
    let rest = &p.notes[at..];
    let i = rest.find("per-position ")? + "per-position ".len();
    let list = &rest[i..rest[i..].find('%').map(|e| i + e)?];
    let rates: Vec<f64> = list
        .split('/')
        .map(|x| x.trim().parse::<f64>().ok().map(|v| v / 100.0))
        .collect::<Option<_>>()?;
    (rates.len() == k as usize && rates.iter().all(|r| (0.0..=1.0).contains(r))).then_some(rates)
}

/// How the measured inter-token figure is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    /// Output tokens per second.
    Throughput,
    /// ITL mean, or TPOT mean (like with like).
    InterToken,
    /// TTFT p50.
    Ttft,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Throughput, Family::InterToken, Family::Ttft];
    pub fn name(self) -> &'static str {
        match self {
            Family::Throughput => "output tok/s",
            Family::InterToken => "ITL/TPOT mean",
            Family::Ttft => "TTFT p50",
        }
    }
    /// The in-sample accuracy target on the median absolute error, percent (issue targets:
    /// 10 / 10 / 15 on the combined set).
    pub fn target_pct(self) -> f64 {
        match self {
            Family::Throughput | Family::InterToken => 10.0,
            Family::Ttft => 15.0,
        }
    }
    /// The held-out (leave-one-model-family-out) target on the median absolute error, percent:
    /// 20 / 20 / 30.
    pub fn held_out_target_pct(self) -> f64 {
        match self {
            Family::Throughput | Family::InterToken => 20.0,
            Family::Ttft => 30.0,
        }
    }
}

/// A row turned into something the simulator runs: the scenario (built typed, field by field)
/// plus what the comparison needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointSetup {
    pub line: usize,
    /// Catalog model id used.
    pub model_id: String,
    /// The scenario (without `efficiencies`); [`Scenario::to_json`] writes it.
    pub scenario: Scenario,
    /// One-line description of the simulated workload.
    pub workload_summary: String,
    /// Comparisons to make: (family, our metric, measured value, exclusion reason).
    pub targets: Vec<(Family, MetricId, f64, Option<String>)>,
    /// Notes on the mapping shown with the point.
    pub notes: Vec<String>,
}

pub(super) fn kv_dtype(p: &CalibrationPoint) -> Result<KvCacheDtype, ValidateError> {
    let k = p.kv_dtype.to_ascii_lowercase();
    let first = k
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    match first {
        "fp16" | "float16" => Ok(KvCacheDtype::Auto),
        _ => KvCacheDtype::parse(first).ok_or_else(|| {
            bad(
                p.line,
                "kv_dtype",
                &p.kv_dtype,
                "unknown KV cache dtype",
                "start the cell with auto, bfloat16 or fp8",
            )
        }),
    }
}

pub(super) fn lengths_constant(v: f64) -> RawLengthDist {
    RawLengthDist::Constant {
        tokens: libm::round(v),
    }
}

pub(super) fn lengths_ratio(nominal: f64, min_ratio: f64, max_ratio: f64) -> RawLengthDist {
    RawLengthDist::UniformRatio {
        nominal,
        min_ratio,
        max_ratio,
    }
}

/// The random range a fixed-length workload states as `(A-Bx)`, e.g. InferenceX's
/// `fixed-seq-len random 8192/1024 (0.8-1.0x)`: its client (`utils/bench_serving/benchmark_serving.py`
/// `sample_random_requests`) draws every input and output length uniformly in
/// `[int(len x range_ratio), len]`. `None` without one (or an empty or inverted range).
pub fn range_ratio_in(workload: &str) -> Option<(f64, f64)> {
    let end = workload.find("x)")?;
    let start = workload[..end].rfind('(')? + 1;
    let (a, b) = workload[start..end].split_once('-')?;
    let (a, b) = (a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?);
    (a > 0.0 && a < b && b <= 1.0).then_some((a, b))
}

pub(super) fn lengths_sharegpt(mean: f64, max: f64) -> RawLengthDist {
    RawLengthDist::Lognormal {
        mean,
        std: mean * SHAREGPT_CV,
        min: Some(SHAREGPT_MIN_LEN),
        max: Some(max),
    }
}

/// Maps one row to a scenario (rules in docs/accuracy.md, never tuned per point).
pub fn setup_for(p: &CalibrationPoint) -> Result<PointSetup, ValidateError> {
    let mut notes = Vec::new();
    let (model_id, precision) = match resolve_model(p) {
        Ok(r) => {
            notes.extend(r.notes);
            (r.catalog_id, r.precision)
        }
        Err(e) => {
            return Err(bad(
                p.line,
                "model",
                &p.model,
                &e,
                "use a model with a shipped config, or add its config.json",
            ))
        }
    };
    // Batch limits the source did not state (the CSV's columns hold vLLM's defaults, marked
    // inferred) are left to the scenario's own default resolution, as a pasted command without
    // the flags is: a recorded flag that changes the defaults (`--performance-mode throughput`)
    // then takes effect.
    let inferred = batch_limits_inferred(&p.notes);
    // A column is stated when the notes do not mark the pair inferred, or when a recorded
    // command gives its flag that value (gpustack's "partly" rows state one of the two).
    let stated = |v: Option<f64>, flag: &str| -> Option<i64> {
        let v = v?;
        let names = [format!("--{flag}"), format!("--{}", flag.replace('-', "_"))];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let in_command = number_flags_in_notes(&p.notes, &names)
            .into_iter()
            .any(|x| f64::from(x) == v);
        (!inferred || in_command).then_some(v as i64)
    };
    let max_num_seqs = stated(p.max_num_seqs, "max-num-seqs");
    let max_num_batched_tokens = stated(p.max_num_batched_tokens, "max-num-batched-tokens");
    let dropped: Vec<&str> = [
        (p.max_num_seqs.is_some() && max_num_seqs.is_none()).then_some("max_num_seqs"),
        (p.max_num_batched_tokens.is_some() && max_num_batched_tokens.is_none())
            .then_some("max_num_batched_tokens"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !dropped.is_empty() {
        notes.push(format!(
            "{}: the CSV's value is vLLM's default as the source inferred it, not stated; the release's defaults are resolved instead",
            dropped.join(", ")
        ));
    }
    let mut engine = RawEngineSettings {
        max_num_seqs,
        max_num_batched_tokens,
        max_model_len: number_after(&p.notes, "max_model_len=").map(|v| v as i64),
        ..RawEngineSettings::default()
    };
    if p.offline
        && p.notes.contains("benchmark_throughput")
        && super::run::point_era(p) == crate::perf::EngineEra::Vllm07
    {
        // The V0-era script declares `--enable-chunked-prefill` as a store_true flag and passes
        // its value to `LLM(...)`, so chunked prefill is off unless the run asked for it (vLLM
        // benchmarks/benchmark_throughput.py, e.g. at 018efff); V0 then sizes the budget and
        // the profile run at max(max_model_len, 2048) tokens.
        engine.enable_chunked_prefill = Some(false);
        notes.push("benchmark_throughput.py (V0 era) passes enable_chunked_prefill=False: chunked prefill off".into());
    }
    let mut notes_spec = None;
    if let Some(k) = mtp_tokens(p) {
        // `--speculative-config.method mtp --speculative-config.num_speculative_tokens k`, with
        // the acceptance the source measured, else the literature value (docs/accuracy.md).
        engine.speculative_config = Some(RawSpeculativeConfig {
            method: Some("mtp".into()),
            num_speculative_tokens: Some(i64::from(k)),
            ..RawSpeculativeConfig::default()
        });
        if let Some(rates) = measured_mtp_acceptance(p, k) {
            let m = 1.0 + rates.iter().sum::<f64>();
            notes_spec = Some(format!(
                "MTP with {k} speculative token(s) at the acceptance the source measured: per-position rates {}, mean acceptance length {m:.2}",
                rates
                    .iter()
                    .map(|r| format!("{r:.4}"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            ));
            engine.speculative_acceptance = Some(RawSpecAcceptance {
                acceptance_rate_per_pos: Some(rates),
                ..RawSpecAcceptance::default()
            });
        } else {
            let m = 1.0 + MTP_ACCEPTANCE_PER_TOKEN * k as f64;
            engine.speculative_acceptance = Some(RawSpecAcceptance {
                mean_acceptance_length: Some(m),
                ..RawSpecAcceptance::default()
            });
            notes_spec = Some(format!(
                "MTP with {k} speculative token(s); acceptance not reported by the source: mean acceptance length {m} assumed (DeepSeek-V3 technical report: 85-90% acceptance of the second token; lower end)"
            ));
        }
    }
    let is_inference_sim = p.source.starts_with("inference-sim");
    let (arrival, sweep, summary_arrival, input, output, shared) = if let Some(rate) =
        p.request_rate.filter(|_| p.concurrency.is_none())
    {
        if shared_prefix_from_workload(&p.workload).is_none() {
            // Open loop without shared prefixes: Poisson (the workload says so) or constant
            // arrivals of `num_requests` requests, run until the last one finishes: `vllm bench
            // serve` and guidellm end the benchmark at the last response and divide by that
            // duration (request-count mode, docs/metrics.md: window [0, last finish]).
            let n = p.num_requests.ok_or_else(|| {
                bad(
                    p.line,
                    "num_requests",
                    "",
                    "an open-loop row needs the number of requests",
                    "fill in num_requests",
                )
            })?;
            let (input, output) = lengths_of(p, n, &mut notes)?;
            let poisson = p.workload.to_ascii_lowercase().contains("poisson");
            let (kind, arrival) = if poisson {
                ("poisson", RawArrival::Poisson { rate })
            } else {
                ("constant", RawArrival::Constant { rate })
            };
            notes.push(format!(
                "{kind} arrivals at {rate} req/s for {n} requests, simulated until the last one finishes, every request measured (the benchmark's duration ends at the last response)"
            ));
            (
                arrival,
                RawSweepSpec {
                    request_rates: Some(vec![rate]),
                    num_requests: Some(n),
                    ..RawSweepSpec::default()
                },
                format!("{kind} {rate} req/s, {n} requests"),
                input,
                output,
                None,
            )
        } else {
            // Open loop at a constant rate.
            let (groups, prefix, question, out) =
            shared_prefix_from_workload(&p.workload).ok_or_else(|| {
                bad(
                    p.line,
                    "workload",
                    &p.workload,
                    "an open-loop row needs the shared-prefix text `G system prompts x U users, system S + question Q tok, output O tok`",
                    "describe the prompt structure in that form",
                )
            })?;
            let dur = number_before(&p.notes, "s at constant rate");
            notes.push(format!(
            "constant {rate} req/s, simulated {OPEN_LOOP_DURATION_S} s (warm-up {OPEN_LOOP_WARMUP_S} s){}",
            dur.map(|d| format!("; measured stage {d} s")).unwrap_or_default()
        ));
            // inference-sim's runs: the pool inference-perf v0.2 actually sent, and the prompt
            // length the server counted (random token ids decoded to text and re-tokenized).
            let (groups, pool, question) = if is_inference_sim {
                let (g, per) = INFERENCE_PERF_V02_POOL;
                let measured = number_after(&p.notes, "Measured prompt_len mean=");
                let q = measured.map_or(question, |m| (m - prefix).round().max(1.0));
                notes.push(format!(
                    "prompts: inference-perf v0.2's pool of {g} x {per} prompts (its defaults: the profile's group and user keys are not in that release's config), cycled, each {prefix} + {q} tokens{}",
                    measured.map(|m| format!(" (the measured mean prompt, {m} tokens, re-tokenized by the server)")).unwrap_or_default()
                ));
                (g, Some(per), q)
            } else {
                (groups, None, question)
            };
            (
                RawArrival::Constant { rate },
                RawSweepSpec {
                    request_rates: Some(vec![rate]),
                    duration_s: Some(OPEN_LOOP_DURATION_S),
                    warmup_s: Some(OPEN_LOOP_WARMUP_S),
                    ..RawSweepSpec::default()
                },
                format!("constant {rate} req/s"),
                lengths_constant(question),
                lengths_constant(out),
                Some(RawSharedPrefix {
                    groups,
                    tokens: prefix,
                    prompts_per_group: pool,
                }),
            )
        }
    } else {
        let n = p.num_requests.ok_or_else(|| {
            bad(
                p.line,
                "num_requests",
                "",
                "a burst or fixed-concurrency row needs the number of requests",
                "fill in num_requests",
            )
        })?;
        let (input, output) = lengths_of(p, n, &mut notes)?;
        match p.concurrency {
            Some(c) => (
                RawArrival::ClosedLoop {
                    concurrency: c,
                    think_time_s: None,
                },
                RawSweepSpec {
                    concurrency: Some(vec![c]),
                    num_requests: Some(n),
                    ..RawSweepSpec::default()
                },
                format!("closed loop c={c}, {n} requests"),
                input,
                output,
                None,
            ),
            None => (
                RawArrival::Burst { count: n },
                RawSweepSpec {
                    concurrency: Some(vec![n]),
                    num_requests: Some(n),
                    ..RawSweepSpec::default()
                },
                format!("burst of {n} at t=0"),
                input,
                output,
                None,
            ),
        }
    };
    let workload = RawWorkloadSpec {
        arrival,
        requests: RawContent::Synthetic {
            input,
            output,
            shared_prefix: shared,
        },
        seed: SEED,
    };
    // Endpoint kind, as the source states it: the workload names the chat endpoint
    // (`vllm bench serve --backend openai-chat`), or the client is guidellm (GPUStack's
    // benchmark-runner passes its `--request-type` default through, and guidellm >= 0.4 formats
    // requests as `chat_completions` by default: `data_request_formatter`,
    // src/guidellm/benchmark/schemas/generative/entrypoints.py); otherwise completions
    // (inference-perf "streaming completions API", vllm bench serve's default backend).
    let workload_text = p.workload.to_ascii_lowercase();
    let guidellm = runs_guidellm(p);
    let endpoint = if workload_text.contains("chat endpoint") || guidellm {
        Endpoint::Chat
    } else {
        Endpoint::Completions
    };
    if p.offline {
        notes.push("offline run (no API server): simulated behind the completions endpoint, whose per-request latency is small against these runs".into());
    } else {
        let name = match endpoint {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        };
        if guidellm {
            notes.push(format!(
                "API endpoint: {name} (guidellm's default request type, chat_completions)"
            ));
        } else {
            notes.push(format!("API endpoint: {name}"));
        }
    }
    let mut scenario = Scenario {
        version: SCENARIO_VERSION,
        model: ModelRef::Catalog(model_id.clone()),
        gpu: GpuRef::Catalog(catalog_gpu(&p.gpu)),
        tp: p.tp,
        dp: p.dp,
        ep: p.ep,
        enable_expert_parallel: None,
        num_gpus: Some(p.num_gpus),
        weight_precision: precision,
        kv_cache_dtype: kv_dtype(p)?,
        engine,
        workload,
        sweep,
        efficiencies: None,
        endpoint: Some(endpoint),
        vllm_version: None,
        topology: None,
    };
    if p.dp > 1 && p.ep > 1 {
        // DP attention + expert parallelism (`--data-parallel-size N --enable-expert-parallel`):
        // ranks in lockstep, vLLM's default all-to-all backend (docs/topology.md "DP + EP").
        scenario.enable_expert_parallel = Some(true);
        notes.push(format!(
            "DP{} + EP{}: DP ranks in lockstep, all-to-all backend = vLLM's default",
            p.dp, p.ep
        ));
    }
    if let Some(n) = notes_spec {
        notes.push(n);
    }
    if let Some(v) = &p.engine_version {
        scenario.vllm_version = Some(v.clone());
        notes.push(format!("vLLM {v}: calibration era {}", point_era(p).key()));
    }
    let flags = engine_flags_in_notes(&p.notes);
    if !flags.is_empty() {
        let pasted = crate::vllm::command::apply_flags(&scenario, &flags).map_err(|e| {
            bad(
                p.line,
                "notes",
                &flags.join(" "),
                &e,
                "correct the recorded flag",
            )
        })?;
        match pasted.scenario {
            Some(s) => scenario = s,
            None => {
                return Err(bad(
                    p.line,
                    "notes",
                    &flags.join(" "),
                    &pasted.refusals().join("; "),
                    "correct the recorded flag",
                ))
            }
        }
        notes.push(format!(
            "engine flags recorded in the notes, applied: {}",
            flags.join(" ")
        ));
    }
    let unresolved = unresolved_flags_in_notes(&p.notes);
    if !unresolved.is_empty() {
        notes.push(format!(
            "not applied (a shell variable the notes do not resolve): {}; vLLM's default used",
            unresolved.join(" ")
        ));
    }
    // V0 multi-step: its admission rules differ with and without chunked prefill, so it is not
    // applied to a row whose chunked-prefill setting cannot be (`chunked_prefill_off_unappliable`).
    let chunked_unappliable = chunked_prefill_off_unappliable(p, &scenario);
    if let Some(n) = scheduler_steps_in_notes(&p.notes).filter(|&n| n > 1) {
        let v0 = matches!(scenario.engine_era(), Ok(crate::perf::EngineEra::Vllm07));
        if !v0 {
            notes.push(format!(
                "num-scheduler-steps {n} recorded, not applied: the row's vLLM runs the V1 engine, which has no multi-step scheduling"
            ));
        } else if chunked_unappliable.is_some() {
            notes.push(format!(
                "num-scheduler-steps {n} recorded, not applied: V0 multi-step admits prompts differently with chunked prefill on and off, and the run's chunked-prefill setting is not reproducible (below)"
            ));
        } else {
            scenario.engine.num_scheduler_steps = Some(n as i64);
            notes.push(format!(
                "num-scheduler-steps {n} recorded in the notes, applied (V0 multi-step rounds)"
            ));
        }
    }
    if let Some(note) = chunked_unappliable {
        notes.push(note);
    }
    if let Some(note) = started_kv_floor(&mut scenario) {
        notes.push(note);
    }

    // What to compare, and the per-source caveats.
    let cached = prompts_served_from_cache(p, &scenario);
    let mut targets = Vec::new();
    if let Some(m) = p.output_tok_s {
        let mut excl = cached.clone();
        if is_inference_sim {
            let retok = number_after(&p.notes, "output_len(re-tokenized text) mean=");
            if let (Some(r), Some(osl)) = (retok, p.osl) {
                if r < 0.95 * osl {
                    excl = Some(format!(
                        "output tok/s counts re-tokenized text: mean {r} of {osl} generated tokens (source caveat)"
                    ));
                }
            }
        }
        targets.push((Family::Throughput, MetricId::OutputTokensPerS, m, excl));
    }
    if is_inference_sim {
        // The column is (e2e_mean - ttft_mean) / (osl - 1): a per-request TPOT, not a pooled ITL.
        if let Some(m) = p.itl_mean_ms {
            targets.push((Family::InterToken, MetricId::TpotMs(Stat::Mean), m, None));
            notes.push(
                "measured itl_mean_ms is derived as (e2e_mean - ttft_mean)/(osl - 1): compared with our TPOT mean".into(),
            );
        }
    } else if let Some(m) = p.itl_mean_ms {
        targets.push((Family::InterToken, MetricId::ItlMs(Stat::Mean), m, None));
    } else if let Some(m) = p.tpot_mean_ms {
        targets.push((Family::InterToken, MetricId::TpotMs(Stat::Mean), m, None));
    } else if let (Some(u), true) = (
        p.output_tok_s_per_user.filter(|u| *u > 0.0),
        p.notes.contains("1000/median TPOT") || p.notes.contains("1/median TPOT"),
    ) {
        // InferenceX reports interactivity = 1 / median TPOT: the median over requests of the
        // per-request TPOT, compared with ours (`tpot_ms_p50`).
        targets.push((
            Family::InterToken,
            MetricId::TpotMs(Stat::P50),
            1000.0 / u,
            None,
        ));
        notes.push(
            "measured TPOT = 1000 / tok/s/user (the source's median TPOT): compared with our TPOT p50".into(),
        );
    }
    if let Some(m) = p.ttft_p50_ms {
        targets.push((
            Family::Ttft,
            MetricId::TtftMs(Stat::P50),
            m,
            ttft_counts_empty_completions(p),
        ));
    }
    // A run whose prompts came from the prefix cache is not like with like for any metric.
    if let Some(why) = &cached {
        for t in &mut targets {
            t.3.get_or_insert_with(|| why.clone());
        }
    }
    let _ = &summary_arrival;
    Ok(PointSetup {
        line: p.line,
        model_id,
        scenario,
        workload_summary: summary_arrival,
        targets,
        notes,
    })
}

/// Input/output lengths of a burst, closed-loop or Poisson row: fixed `isl`/`osl` (the output at
/// the mean the run generated when the notes' totals say its requests stopped before `osl`: EOS
/// without `--ignore-eos`), else ShareGPT (lognormal) with the means the notes give (`Mean lengths
/// ...: in X, out Y`, or `total in/out A/B` over `n` requests).
pub(super) fn lengths_of(
    p: &CalibrationPoint,
    n: f64,
    notes: &mut Vec<String>,
) -> Result<(RawLengthDist, RawLengthDist), ValidateError> {
    if let (Some(i), Some(o)) = (p.isl, p.osl) {
        if let Some((lo, hi)) = range_ratio_in(&p.workload) {
            notes.push(format!(
                "lengths uniform in {lo}-{hi} x {i} / {o} (the client's random range ratio, as the workload states)"
            ));
            return Ok((lengths_ratio(i, lo, hi), lengths_ratio(o, lo, hi)));
        }
        // `osl` is the client's `max_tokens`; a client that does not ignore EOS lets requests
        // stop earlier, and the tokens the run generated are what its output tok/s counts.
        let generated = mean_lengths_from_notes(&p.notes)
            .map(|(_, out)| out)
            .or_else(|| totals_from_notes(&p.notes).map(|(_, b)| b / n));
        if let Some(m) = generated.filter(|m| *m >= 1.0 && *m < o - 0.5) {
            notes.push(format!(
                "outputs stopped early: {m:.1} generated tokens per request on average of at most {o} (the notes' totals); every request generates {}",
                libm::round(m)
            ));
            return Ok((lengths_constant(i), lengths_constant(m)));
        }
        return Ok((lengths_constant(i), lengths_constant(o)));
    }
    let (i, o) = mean_lengths_from_notes(&p.notes)
        .or_else(|| totals_from_notes(&p.notes).map(|(a, b)| (a / n, b / n)))
        .ok_or_else(|| {
            bad(
                p.line,
                "notes",
                &p.notes,
                "without isl/osl the notes must give `Mean lengths ...: in X, out Y` or `total in/out A/B`",
                "fill in isl/osl or the mean lengths",
            )
        })?;
    // GPUStack's benchmark-runner feeds guidellm every first turn of ShareGPT with the reference
    // answer's length as the output count, without vLLM's length filter.
    let (max_prompt, max_output) = if runs_guidellm(p) {
        (GUIDELLM_SHAREGPT_MAX, GUIDELLM_SHAREGPT_MAX)
    } else {
        (SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_OUTPUT)
    };
    notes.push(format!(
        "ShareGPT lengths: lognormal, means in {i:.1} / out {o:.1} (from the notes), std = {SHAREGPT_CV} x mean, clamped to [{SHAREGPT_MIN_LEN}, {max_prompt}] / [{SHAREGPT_MIN_LEN}, {max_output}]"
    ));
    Ok((
        lengths_sharegpt(i, max_prompt),
        lengths_sharegpt(o, max_output),
    ))
}

/// Whether a row's client is guidellm (GPUStack's benchmark-runner): its workload names it.
fn runs_guidellm(p: &CalibrationPoint) -> bool {
    p.workload.to_ascii_lowercase().contains("guidellm")
}

/// Total input / output tokens from the notes: "total in/out 215196/117108" or
/// "total in/out tok 1600000/400000".
pub fn totals_from_notes(notes: &str) -> Option<(f64, f64)> {
    let i = notes.find("total in/out")? + "total in/out".len();
    let rest = notes[i..].trim_start();
    let rest = rest.strip_prefix("tok").unwrap_or(rest).trim_start();
    let a = leading_number(rest)?;
    let slash = rest.find('/')?;
    let b = leading_number(&rest[slash + 1..])?;
    Some((a, b))
}

/// Engine flags a row's notes record (its `vllm serve` command or offline engine arguments) that
/// the CSV has no column for. They are applied through the vLLM argument registry, as a pasted
/// command is. Not read from the notes: flags with a CSV column (`max_num_seqs`,
/// `max_num_batched_tokens`, `kv_dtype`, parallelism), `--num-scheduler-steps` (read by
/// [`scheduler_steps_in_notes`], whose two spellings the registry does not share), and client
/// (benchmark) flags. A switch written with a false
/// value (`--enable-chunked-prefill=False`, V0's spelling) counts as its `--no-` form.
pub const NOTE_ENGINE_FLAGS: [&str; 11] = [
    "--max-model-len",
    "--performance-mode",
    "--enforce-eager",
    "--gpu-memory-utilization",
    "--block-size",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--language-model-only",
    "--compilation-config",
];

/// The [`NOTE_ENGINE_FLAGS`] written in `notes` (`--flag value`, `--flag=value` or a bare switch,
/// quotes and list punctuation around words ignored), each once, in the order written. A flag whose
/// value is a shell variable (`--max-model-len $MAX_MODEL_LEN`) is left out: the notes do not say
/// its value ([`unresolved_flags_in_notes`] lists them).
pub fn engine_flags_in_notes(notes: &str) -> Vec<String> {
    note_flags(notes)
        .into_iter()
        .filter(|f| !f.contains('$'))
        .collect()
}

/// A row whose notes record chunked prefill off as a sweep knob (`enable-chunked-prefill=FALSE`,
/// dstack's 8xH100 sweep) next to a token budget below the context its scenario runs: vLLM refuses
/// that pair (`SchedulerConfig`: without chunked prefill a prompt must fit one step), so the run
/// had a shorter `max_model_len` the notes do not give, and the row runs with its scenario's
/// settings. Says so; `None` when the knob is absent or the pair is possible.
pub fn chunked_prefill_off_unappliable(p: &CalibrationPoint, s: &Scenario) -> Option<String> {
    let knob = p
        .notes
        .split(|c: char| c.is_whitespace() || c == ',')
        .any(|w| w.eq_ignore_ascii_case("enable-chunked-prefill=false"));
    if !knob {
        return None;
    }
    let budget = p.max_num_batched_tokens? as u64;
    let engine = s.deployment().ok()?.engine;
    let ctx = engine.max_model_len;
    let chunked = if engine.enable_chunked_prefill {
        "on (V0's default above a 32K context)"
    } else {
        "off"
    };
    (budget < ctx).then(|| format!(
        "enable-chunked-prefill=FALSE recorded, not applied: with max-num-batched-tokens {budget} vLLM refuses chunked prefill off unless max_model_len <= {budget}, and the run's max_model_len is not recorded; simulated with the scenario's settings (max_model_len {ctx}, chunked prefill {chunked})"
    ))
}

/// Whether a row's notes mark its `max_num_seqs` / `max_num_batched_tokens` columns as inferred
/// (vLLM's defaults for the GPU class, not stated by the source): the sentence of the notes that
/// names `max_num_seqs/max_num_batched_tokens` says `INFERRED`.
pub fn batch_limits_inferred(notes: &str) -> bool {
    notes
        .split("max_num_seqs/max_num_batched_tokens")
        .skip(1)
        .any(|rest| rest.split(". ").next().unwrap_or("").contains("INFERRED"))
}

/// The served checkpoint whose `vllm bench` / `benchmark_serving.py` runs return no text for
/// some prompts, each counted with TTFT 0 in the client's TTFT statistics: Meta's base (pretrained)
/// fp8 release. The client sends the completions endpoint `temperature 0` and no `ignore_eos`, and
/// `calculate_metrics` appends every successful request's `ttft` (0.0 until a chunk carries text)
/// whatever its output length. dstack's raw result files of this checkpoint (1,000 ShareGPT
/// prompts each) hold 375-430 such requests per run, the same prompts in every run
/// (docs/accuracy.md, "Source caveats applied").
pub const EMPTY_COMPLETION_CHECKPOINT: &str = "Llama-3.1-405B-FP8";

/// A row whose TTFT p50 is a median over a distribution with a mass at 0 ms that a simulation
/// does not have: its notes name the client's result file (`raw file <backend>-<rate>qps-<served
/// model>-<date>`, the name `benchmark_serving.py` gives it) of [`EMPTY_COMPLETION_CHECKPOINT`].
/// The TTFT p50 is then excluded (printed, not aggregated, not fitted); `None` otherwise.
pub fn ttft_counts_empty_completions(p: &CalibrationPoint) -> Option<String> {
    let file = p
        .notes
        .split("raw file ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let model = file.split("qps-").nth(1)?;
    let served = model.strip_prefix(EMPTY_COMPLETION_CHECKPOINT)?;
    // The date follows the model id (`-20241109-141025`): a longer id (`-Instruct-...`) is another
    // checkpoint.
    served
        .strip_prefix('-')
        .filter(|rest| rest.starts_with("20"))
        .map(|_| format!(
            "TTFT p50 not comparable: the client's result file ({}) is of the base checkpoint {EMPTY_COMPLETION_CHECKPOINT}, whose runs return no text for 375-430 of their 1,000 ShareGPT requests (the source's raw files), each counted with TTFT 0 in the median (source caveat)",
            file.trim_end_matches(['.', ',', ';'])
        ))
}

/// The V0 multi-step count a row's notes record (`num-scheduler-steps=15`, `--num-scheduler-step
/// 15`: both spellings occur), applied as `engine.num_scheduler_steps` to a V0 row.
pub fn scheduler_steps_in_notes(notes: &str) -> Option<u32> {
    number_flag_in_notes(
        notes,
        &[
            "num-scheduler-steps",
            "num-scheduler-step",
            "--num-scheduler-steps",
            "--num-scheduler-step",
        ],
    )
}

/// The pipeline-parallel size a row's notes record in its serve command (`-pp 2`,
/// `--pipeline-parallel-size 2`, `--pipeline-parallel-size=2`); ServeSim does not model pipeline
/// parallelism, so [`super::waits_for`] keeps a row with more than 1 out.
pub fn pipeline_parallel_in_notes(notes: &str) -> Option<u32> {
    number_flag_in_notes(notes, &["-pp", "--pipeline-parallel-size"])
}

/// The number after the first of `names` (spelled as in the notes, dashes included) in `notes`:
/// `name N` or `name=N`, with quotes and list punctuation around words ignored.
fn number_flag_in_notes(notes: &str, names: &[&str]) -> Option<u32> {
    number_flags_in_notes(notes, names).into_iter().next()
}

/// Every value the notes give one of the flags `names` (`--flag N` or `--flag=N`), in order.
fn number_flags_in_notes(notes: &str, names: &[&str]) -> Vec<u32> {
    let words: Vec<&str> = notes
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "`;,[]()'\"".contains(c)))
        .collect();
    words
        .iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let (name, inline) = match w.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (*w, None),
            };
            if !names.contains(&name) {
                return None;
            }
            let v = inline.or_else(|| words.get(i + 1).copied())?;
            v.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok()
        })
        .collect()
}

/// The [`NOTE_ENGINE_FLAGS`] in `notes` whose value is a shell variable.
pub fn unresolved_flags_in_notes(notes: &str) -> Vec<String> {
    note_flags(notes)
        .into_iter()
        .filter(|f| f.contains('$'))
        .collect()
}

fn note_flags(notes: &str) -> Vec<String> {
    let strip = |w: &str| -> String {
        w.trim_matches(|c: char| "`;,[]()'\"".contains(c))
            .to_string()
    };
    let raw: Vec<&str> = notes.split_whitespace().collect();
    let mut words: Vec<String> = raw.iter().map(|w| strip(w)).collect();
    // A JSON value (`--compilation-config '{"cudagraph_mode": "PIECEWISE"}'`, or with its quotes
    // lost in transcription, `{mode:3, pass_config:{...}}`) spans words: the word after the flag
    // becomes the whole object, its keys quoted.
    for i in 0..raw.len().saturating_sub(1) {
        if words[i] == "--compilation-config" {
            if let Some(v) = braced_value(&raw[i + 1..]) {
                words[i + 1] = v;
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w.as_str(), None),
        };
        let Some(flag) = NOTE_ENGINE_FLAGS.iter().find(|f| **f == name) else {
            continue;
        };
        if seen.contains(flag) {
            continue;
        }
        let takes_value = crate::vllm::args::lookup(flag)
            .is_some_and(|spec| spec.arity == crate::vllm::args::Arity::Value);
        if takes_value {
            let Some(v) = inline
                .map(str::to_string)
                .or_else(|| words.get(i + 1).cloned())
                .filter(|v| !v.is_empty() && !v.starts_with("--"))
            else {
                continue;
            };
            out.push(format!("{flag}={v}"));
        } else if inline
            .or_else(|| words.get(i + 1).map(String::as_str))
            .is_some_and(|v| v.eq_ignore_ascii_case("false") || v == "0")
        {
            // V0's `StoreBoolean` switches take an optional value: `--flag False`, `--flag=False`.
            match flag.strip_prefix("--") {
                Some(base) if !base.starts_with("no-") => out.push(format!("--no-{base}")),
                _ => continue,
            }
        } else {
            out.push(flag.to_string());
        }
        seen.push(flag);
    }
    out
}

/// The JSON object that starts at `words[0]` (after any quote or backtick) and ends where its
/// braces balance, joined with single spaces and its bare keys and words quoted
/// ([`quote_bare_words`]); `None` when `words[0]` opens no object or the braces never balance.
fn braced_value(words: &[&str]) -> Option<String> {
    let first = words
        .first()?
        .trim_start_matches(|c: char| "`'\"".contains(c));
    if !first.starts_with('{') {
        return None;
    }
    let mut text = String::new();
    let mut depth = 0i32;
    for (n, w) in words.iter().enumerate() {
        let w = if n == 0 { first } else { w };
        if n > 0 {
            text.push(' ');
        }
        for c in w.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            text.push(c);
            if depth == 0 {
                return Some(quote_bare_words(&text));
            }
        }
    }
    None
}

/// Quotes the bare words of a JSON-like object (`{mode:3, pass_config:{x:true}}` ->
/// `{"mode":3, "pass_config":{"x":true}}`); numbers, `true`, `false`, `null` and quoted strings
/// are kept.
fn quote_bare_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            out.push(c);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::from(c);
            while let Some(&d) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' || d == '.' || d == '-' {
                    word.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            if matches!(word.as_str(), "true" | "false" | "null") {
                out.push_str(&word);
            } else {
                out.push('"');
                out.push_str(&word);
                out.push('"');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A measured run that started although our capacity model says vLLM would refuse the recorded
/// settings because one request of `max_model_len` tokens does not fit in the KV pool. vLLM
/// (0.10-0.11, `_check_enough_kv_cache_memory`) refuses to start in that case and does not reduce
/// `max_model_len` on its own, so the real run had at least that much KV memory per GPU. The row
/// is then simulated with exactly that minimum (`engine.kv_cache_memory_bytes` = the bytes of one
/// max-length request): the smallest KV pool consistent with the run having started, an
/// assumption that makes such rows KV-pessimistic. Other refusals are left as they are.
/// A caveat when the row's measured prompt throughput is more than its GPUs could compute: prompt
/// tokens / s (at least `isl x output tok/s / osl`, outputs that stop early only raise it) times the
/// 2 FLOPs per active parameter a prefilled token costs (attention left out, so the bound is
/// loose) above every GPU's highest dense tensor peak. Such prompts were served from the prefix
/// cache, e.g. fixed-seed random prompts rerun against a server that kept them (vLLM caches
/// prefixes by default), which a run without cached prompts is not comparable with.
pub(super) fn prompts_served_from_cache(
    p: &CalibrationPoint,
    scenario: &Scenario,
) -> Option<String> {
    let (isl, osl, out) = (p.isl?, p.osl?, p.output_tok_s?);
    if osl <= 0.0 || out <= 0.0 {
        return None;
    }
    let model = scenario.model_config().ok()?;
    let gpu = match &scenario.gpu {
        GpuRef::Catalog(id) => crate::gpu::find_gpu(id).ok()?,
        GpuRef::Custom(_) => return None,
    };
    let prompt_tok_s = isl * out / osl;
    let flops_per_token = 2.0 * model.params().active as f64;
    let peak = [Some(gpu.bf16_flops), gpu.fp8_flops, gpu.fp4_flops]
        .into_iter()
        .flatten()
        .fold(0.0, f64::max);
    let gpus = f64::from(
        scenario
            .num_gpus
            .unwrap_or(scenario.tp * scenario.dp)
            .max(1),
    );
    let needed = prompt_tok_s * flops_per_token;
    (needed > gpus * peak).then(|| {
        format!(
            "prompts served from the prefix cache: {prompt_tok_s:.0} prompt tokens/s x {:.0} GFLOP each = {:.1} PFLOP/s, above the {gpus:.0} GPUs' {:.1} PFLOP/s peak (source caveat)",
            flops_per_token / 1e9,
            needed / 1e15,
            gpus * peak / 1e15
        )
    })
}

pub(super) fn started_kv_floor(scenario: &mut Scenario) -> Option<String> {
    let cap = scenario.resolve().ok()?.capacity;
    if cap.fits || cap.bytes_per_max_len_request == 0 {
        return None;
    }
    let needs_one_request = cap
        .vllm_error
        .as_deref()
        .is_some_and(|e| e.contains("max seq len") || e.contains("max_model_len"));
    if !needs_one_request {
        return None;
    }
    let bytes = cap.bytes_per_max_len_request;
    scenario.engine.kv_cache_memory_bytes = Some(i64::try_from(bytes).ok()?);
    Some(format!(
        "the run started at max_model_len {}, which vLLM only does with >= {:.2} GiB of KV per GPU; our capacity model estimates less ({}); simulated with that minimum (kv_cache_memory_bytes = {bytes}, an assumption: a lower bound on the real pool)",
        cap.max_model_len,
        bytes as f64 / (1u64 << 30) as f64,
        cap.reason
    ))
}
