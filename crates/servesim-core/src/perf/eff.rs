//! The calibratable table of the step-time model: achieved fractions of peak, link efficiencies,
//! latencies and engine overheads. One [`Efficiencies`] value describes one GPU generation; every
//! field is named, documented and overridable ([`EfficiencyOverrides`]). Values and their sources:
//! docs/step-time.md ("Efficiency table").

use super::PerfError;
use crate::gpu::Generation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shipped calibration (`data/calibration/efficiencies.json`, written by
/// `servesim validate --fit`): per GPU generation (serde name, e.g. `hopper`), the fitted fields.
pub const CALIBRATED_EFFICIENCIES_JSON: &str =
    include_str!("../../data/calibration/efficiencies.json");

/// What an efficiency table rests on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EfficiencyBasis {
    /// The literature/assumption defaults of docs/step-time.md (no fit for this generation).
    Literature { note: String },
    /// The literature defaults with the fields fitted against the public measured runs
    /// (docs/accuracy.md) replaced.
    Calibrated {
        note: String,
        /// The fitted fields and their values.
        fitted: BTreeMap<String, f64>,
    },
}

impl EfficiencyBasis {
    /// A one-line description (shown with results).
    pub fn note(&self) -> &str {
        match self {
            EfficiencyBasis::Literature { note } | EfficiencyBasis::Calibrated { note, .. } => note,
        }
    }
}

/// The embedded calibration file, parsed once (the one loader of
/// `data/calibration/efficiencies.json`: `validate::fitted_efficiencies` reads this copy too).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CalibrationFile {
    pub description: String,
    pub generations: BTreeMap<String, BTreeMap<String, f64>>,
    /// entry -> field -> the entries it was taken from (fields no row of the entry reads;
    /// `validate::borrow_unidentified`). Provenance only: the values are in `generations`.
    #[serde(default)]
    pub borrowed: BTreeMap<String, BTreeMap<String, String>>,
}

/// The shipped calibration file, parsed on first use (`None` if it does not parse: the
/// literature tables are used, and `tests/validate_calibrated.rs` fails).
pub fn shipped_calibration() -> Option<&'static CalibrationFile> {
    static FILE: std::sync::OnceLock<Option<CalibrationFile>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| serde_json::from_str(CALIBRATED_EFFICIENCIES_JSON).ok())
        .as_ref()
}

/// The serde name of a generation (`hopper`, `ampere`, ...): the key of the calibration file.
pub fn generation_key(g: Generation) -> String {
    match serde_json::to_value(g) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{g:?}").to_ascii_lowercase(),
    }
}

/// How a field is validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A fraction of a peak: in (0, 1].
    Fraction,
    /// A time in seconds: finite and >= 0.
    Seconds,
    /// A time per prompt token in seconds ([`crate::bounds::PER_TOKEN_S`]).
    SecondsPerToken,
    /// A positive multiplier ([`crate::bounds::MULTIPLIER`]).
    Positive,
    /// A network bandwidth in bytes/s ([`crate::bounds::NET_BYTES_S`]).
    BytesPerSecond,
}

impl FieldKind {
    /// The range a value of this kind must lie in (docs/scenario.md "Bounds").
    pub fn bound(self) -> crate::bounds::Bound {
        match self {
            FieldKind::Fraction => crate::bounds::EFFICIENCY,
            FieldKind::Seconds => crate::bounds::OVERHEAD_S,
            FieldKind::SecondsPerToken => crate::bounds::PER_TOKEN_S,
            FieldKind::Positive => crate::bounds::MULTIPLIER,
            FieldKind::BytesPerSecond => crate::bounds::NET_BYTES_S,
        }
    }
}

macro_rules! efficiencies {
    ($( $(#[doc = $doc:literal])* $name:ident : $kind:ident ),* $(,)?) => {
        /// The step-time model's efficiency table for one GPU generation. See docs/step-time.md.
        #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Efficiencies {
            $( $(#[doc = $doc])* pub $name: f64, )*
        }

        /// Partial replacement of an [`Efficiencies`] table (what a calibration or a user changes).
        /// `None` keeps the value. Unknown fields are rejected.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct EfficiencyOverrides {
            $( $(#[doc = $doc])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $name: Option<f64>, )*
        }

        impl Efficiencies {
            /// Every field as `(name, kind, value)`, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, FieldKind, f64)> {
                vec![ $( (stringify!($name), FieldKind::$kind, self.$name), )* ]
            }

            /// Checks every field against its kind's range (`FieldKind::bound`).
            pub fn validate(&self) -> Result<(), PerfError> {
                $( check(stringify!($name), FieldKind::$kind, self.$name)?; )*
                Ok(())
            }

            /// A copy with the given fields replaced; the result is validated. A replaced
            /// `hbm_kv` without an `hbm_state` of its own carries the recurrent state with it,
            /// as before the two were apart (so scenarios and calibration entries written then
            /// keep their numbers; docs/step-time.md §2).
            pub fn with_overrides(&self, o: &EfficiencyOverrides) -> Result<Efficiencies, PerfError> {
                let mut e = *self;
                $( if let Some(v) = o.$name { e.$name = v; } )*
                if let (Some(kv), None) = (o.hbm_kv, o.hbm_state) {
                    e.hbm_state = kv;
                }
                e.validate()?;
                Ok(e)
            }
        }
    };
}

fn check(field: &'static str, kind: FieldKind, v: f64) -> Result<(), PerfError> {
    kind.bound()
        .check(v)
        .map(|_| ())
        .map_err(|fix| PerfError::InvalidEfficiency {
            field,
            value: crate::bounds::fmt_num(v),
            fix,
        })
}

efficiencies! {
    /// Dense GEMM, bf16/fp16 tensor cores: achieved fraction of the bf16 dense peak.
    gemm_bf16: Fraction,
    /// Dense GEMM, fp8 tensor cores (W8A8): achieved fraction of the fp8 dense peak.
    gemm_fp8: Fraction,
    /// Dense GEMM, fp4 tensor cores (NVFP4/MXFP4): achieved fraction of the fp4 dense peak.
    gemm_fp4: Fraction,
    /// Grouped (MoE) GEMM relative to a dense GEMM of the same compute class (multiplier <= 1).
    grouped_gemm_vs_dense: Fraction,
    /// Weight-only GEMMs (Marlin-style W4A16 / W8A16 / MXFP4 / NVFP4 on GPUs without tensor cores
    /// for the weight format: the kernel dequantises to bf16) relative to a bf16 GEMM (multiplier <= 1).
    gemm_weight_only: Fraction,
    /// Time one fp8 linear call with per-row scales (per-channel weights or per-token
    /// activations) adds to an eager step when it runs vLLM V0's unfused fallback on ROCm
    /// (`torch._scaled_mm` at unit scales and fp32 output, the scales applied after, each op
    /// launched on its own). Added to the step, not overlapped with its GPU work (the measured
    /// extra is the same at 4 and 256 sequences); a graph replays without it. Used only when
    /// `EngineSettings::v0_unfused_fp8` holds. Literature table 0 s (not slower unless fitted);
    /// docs/step-time.md §6.
    fp8_unfused_launch_s: Seconds,
    /// Prefill attention (FlashAttention-style, bf16): achieved fraction of the bf16 peak.
    prefill_attention: Fraction,
    /// Prefill attention through vLLM V0's paged prefix-prefill kernel (the Triton
    /// `context_attention_fwd` of `PagedAttention.forward_prefix`), which V0's ROCm backend runs
    /// for every prefill once chunked prefill is on: fraction of the bf16 peak. The literature
    /// table sets it to the generation's `prefill_attention` (not slower unless fitted);
    /// docs/step-time.md §3.
    prefill_attention_paged: Fraction,
    /// Prefill attention through vLLM's Triton unified attention kernel (`TRITON_ATTN`,
    /// `kernel_unified_attention_2d`), the V1 backend vLLM picks for models with attention sinks
    /// (gpt-oss) on NVIDIA GPUs without FlashAttention-3 (`EngineSettings::triton_unified_prefill`):
    /// fraction of the bf16 peak. The literature table sets it to the generation's
    /// `prefill_attention` (not slower unless fitted); docs/step-time.md §3.
    prefill_attention_triton: Fraction,
    /// Decode attention compute side (paged decode / FlashMLA): fraction of the bf16 peak.
    decode_attention: Fraction,
    /// HBM bandwidth achieved streaming weights (GEMM/GEMV weight reads, activations).
    hbm_weights: Fraction,
    /// HBM bandwidth achieved streaming the activated routed experts (grouped GEMM at small
    /// tokens-per-expert reads scattered expert matrices).
    hbm_expert_weights: Fraction,
    /// HBM bandwidth achieved reading the paged KV cache.
    hbm_kv: Fraction,
    /// HBM bandwidth achieved reading and writing the fixed per-sequence recurrent state of
    /// linear-attention layers (Gated DeltaNet: the recurrent decode kernel loads each
    /// sequence's state, updates it and stores it back every step). A kernel of its own, apart
    /// from the paged KV reads; the literature table sets it to the generation's `hbm_kv`
    /// (**assumption**: no published bandwidth figure for these kernels), and an override of
    /// `hbm_kv` without one of `hbm_state` sets both; docs/step-time.md §2.
    hbm_state: Fraction,
    /// Elementwise activation traffic: hidden-size bf16 vectors read+written per token per layer
    /// outside the GEMM operands (norms, residual adds, rotary, activation function).
    activation_vectors_per_layer: Positive,
    /// All-reduce / all-gather / reduce-scatter bus efficiency on the scale-up link (ring busbw / link bw).
    allreduce_bus_eff: Fraction,
    /// Fixed latency per collective call inside the scale-up domain, seconds.
    allreduce_latency_s: Seconds,
    /// Expert-parallel all-to-all (DeepEP dispatch/combine) efficiency on the link.
    all2all_eff: Fraction,
    /// Fixed latency per all-to-all call (dispatch or combine), seconds.
    all2all_latency_s: Seconds,
    /// Per-GPU network bandwidth beyond the scale-up domain (one direction), bytes/s.
    internode_bytes_s: BytesPerSecond,
    /// Extra latency per collective that crosses the scale-up domain, seconds.
    internode_latency_s: Seconds,
    /// Minimum GPU time per decoder layer (chain of small kernels: norms, rotary, routing, KV
    /// write...), seconds. The step's GPU time is at least `num_layers x` this, graphs or not.
    layer_gpu_floor_s: Seconds,
    /// GPU time of the routing chain of one MoE layer: the kernels around the two grouped GEMMs
    /// (router GEMM, top-k, token permutation / block alignment, activation quantisation, the
    /// activation, weighted combine), which run in sequence with the GEMMs whatever the batch,
    /// seconds. Added per MoE layer to every step. 0 in the literature table (not modelled);
    /// fitted per calibration key (docs/step-time.md §6, docs/accuracy.md).
    moe_layer_floor_s: Seconds,
    /// GPU time of the latent-attention (MLA) chain of one layer beyond what a GQA layer runs:
    /// the second low-rank projection and its norms, the absorbed `W_UK` / `W_UV` batched GEMMs,
    /// the latent cache write and the MLA decode kernel's split-KV combine, kernels in sequence
    /// whatever the batch, seconds. Added per MLA layer (DSA and DeepSeek-V4 layers included) to
    /// every step. 0 in the literature table (not modelled); fitted per calibration key
    /// (docs/step-time.md §6, docs/accuracy.md).
    mla_layer_floor_s: Seconds,
    /// Per-step fixed overhead when the whole forward replays one full CUDA graph, seconds
    /// (scheduler, input preparation, sampler, output processing).
    step_overhead_graph_s: Seconds,
    /// Per-step fixed overhead with piecewise CUDA graphs (attention outside the graphs), seconds.
    step_overhead_piecewise_s: Seconds,
    /// Per-step fixed overhead when the step runs eagerly (no graph), seconds.
    step_overhead_eager_s: Seconds,
    /// Per-layer CPU launch time of the kernels left outside the graphs in piecewise mode, seconds.
    layer_launch_piecewise_s: Seconds,
    /// Per-layer CPU launch time of all the layer's kernels when eager, seconds.
    layer_launch_eager_s: Seconds,
    /// Per scheduled request per step CPU cost (scheduler bookkeeping, input prep, sampling), seconds.
    per_request_overhead_s: Seconds,
    /// API server, `/v1/completions`: fixed per-request latency between the client's send and the
    /// engine (HTTP, tokenisation) plus first/last-token streaming, seconds. Not a step cost: the
    /// sweep driver adds it (`sweep::FrontEnd`).
    api_latency_completions_s: Seconds,
    /// API server, `/v1/chat/completions`: as `api_latency_completions_s` plus the chat template
    /// and the chat streaming path, seconds.
    api_latency_chat_s: Seconds,
    /// API server serial CPU time per request (one process preprocesses requests one at a time;
    /// queues under bursts), seconds.
    api_serial_per_request_s: Seconds,
    /// API server serial CPU time per prompt token (the same single-threaded preprocessing:
    /// tokenising the prompt text), seconds per token. Added to `api_serial_per_request_s` for each
    /// request, so long prompts queue in the API server under load.
    api_serial_per_input_token_s: SecondsPerToken,
    /// API server, `/v1/chat/completions` on a vLLM before 0.19 for a model whose prompt is
    /// rendered from the Hugging Face Jinja chat template: the event-loop time of one render,
    /// seconds. Those releases render on the asyncio event loop itself, so the requests present
    /// when a round of renders starts all wait for the whole round (`sweep::FrontEnd::render_round`,
    /// docs/accuracy.md "Front-end terms"). 0 in the literature table; fitted per calibration key.
    api_render_chat_s: Seconds,
}

impl Efficiencies {
    /// The table ServeSim uses for a generation and vLLM release line (scenarios, CLI, page):
    /// [`Efficiencies::default_for`] with the fields fitted against the public measured runs
    /// (docs/accuracy.md) replaced, where the calibration covers the generation; the literature
    /// defaults elsewhere. [`Efficiencies::calibrated_basis`] says which, and which era's fit.
    pub fn calibrated_for(generation: Generation, era: EngineEra) -> Efficiencies {
        let base = Efficiencies::default_for(generation);
        match calibrated_fields(generation, era) {
            Some((_, _, fitted)) => base.with_fitted(&fitted).unwrap_or(base),
            None => base,
        }
    }

    /// The calibration entry [`Efficiencies::calibrated_for`] uses (`hopper@vllm-0.15`, or another
    /// era's entry when this one has none); `None` when it is the literature table.
    pub fn calibration_entry(generation: Generation, era: EngineEra) -> Option<String> {
        let base = Efficiencies::default_for(generation);
        calibrated_fields(generation, era)
            .filter(|(_, _, fitted)| base.with_fitted(fitted).is_ok())
            .map(|(_, key, _)| key)
    }

    /// Whether [`Efficiencies::calibrated_for`] is calibrated or the literature defaults, and why.
    pub fn calibrated_basis(generation: Generation, era: EngineEra) -> EfficiencyBasis {
        let base = Efficiencies::default_for(generation);
        match calibrated_fields(generation, era) {
            Some((description, key, fitted)) if base.with_fitted(&fitted).is_ok() => {
                let used = if key == calibration_key(generation, era) {
                    format!("fit `{key}`")
                } else {
                    format!(
                        "no fit for `{}`, using the nearest calibrated fit `{key}`",
                        calibration_key(generation, era)
                    )
                };
                // Fields none of the key's rows reads, taken from the nearest key whose rows do
                // (`validate::borrow_unidentified`): said as such, not as fitted.
                let lent = borrowed_fields(&key);
                let counted = if lent.is_empty() {
                    format!("{} fields fitted", fitted.len())
                } else {
                    format!(
                        "{} fields fitted, {} borrowed because no row of this key reads them: {}",
                        fitted.len() - lent.len(),
                        lent.len(),
                        lent.join(", ")
                    )
                };
                EfficiencyBasis::Calibrated {
                    note: format!(
                        "{} generation, {}: calibrated against public vLLM runs ({}; {}; {}); other fields: {}",
                        generation_key(generation),
                        era.label(),
                        used,
                        counted,
                        description,
                        Efficiencies::default_note(generation)
                    ),
                    fitted,
                }
            }
            _ => EfficiencyBasis::Literature {
                note: format!(
                    "not calibrated (no measured runs on this generation): {}",
                    Efficiencies::default_note(generation)
                ),
            },
        }
    }

    /// A copy with the named fields replaced (names as in [`Efficiencies::fields`]); unknown names
    /// and invalid values are errors.
    pub fn with_fitted(&self, fitted: &BTreeMap<String, f64>) -> Result<Efficiencies, PerfError> {
        let o: EfficiencyOverrides = serde_json::to_value(fitted)
            .and_then(serde_json::from_value)
            .map_err(|e| PerfError::InvalidEfficiency {
                field: "calibration",
                value: e.to_string(),
                fix: "use the field names of the efficiency table (docs/step-time.md)".into(),
            })?;
        self.with_overrides(&o)
    }

    /// The default table for a GPU generation. Every value, its source and whether it is an
    /// assumption are listed in docs/step-time.md; [`Efficiencies::default_note`] names the basis.
    pub fn default_for(generation: Generation) -> Efficiencies {
        // Engine-side values (vLLM V1 on a CUDA/ROCm GPU); the GPU-side values follow.
        let base = Efficiencies {
            gemm_bf16: 0.70,
            gemm_fp8: 0.65,
            gemm_fp4: 0.55,
            grouped_gemm_vs_dense: 0.80,
            gemm_weight_only: 1.0,
            fp8_unfused_launch_s: 0.0,
            prefill_attention: 0.60,
            prefill_attention_paged: 0.60,
            prefill_attention_triton: 0.60,
            decode_attention: 0.50,
            hbm_weights: 0.85,
            hbm_expert_weights: 0.60,
            hbm_kv: 0.80,
            hbm_state: 0.80,
            activation_vectors_per_layer: 8.0,
            allreduce_bus_eff: 0.80,
            allreduce_latency_s: 10e-6,
            all2all_eff: 0.60,
            all2all_latency_s: 20e-6,
            internode_bytes_s: 50e9,
            internode_latency_s: 20e-6,
            layer_gpu_floor_s: 30e-6,
            moe_layer_floor_s: 0.0,
            mla_layer_floor_s: 0.0,
            step_overhead_graph_s: 0.6e-3,
            step_overhead_piecewise_s: 1.2e-3,
            step_overhead_eager_s: 1.5e-3,
            layer_launch_piecewise_s: 15e-6,
            layer_launch_eager_s: 60e-6,
            per_request_overhead_s: 4e-6,
            api_latency_completions_s: 2e-3,
            api_latency_chat_s: 5e-3,
            api_serial_per_request_s: 1e-3,
            api_serial_per_input_token_s: 0.0,
            api_render_chat_s: 0.0,
        };
        let table = match generation {
            Generation::Hopper => base,
            Generation::Ampere => Efficiencies {
                gemm_bf16: 0.75,
                // No fp8/fp4 tensor cores: these are never used (compute falls back to bf16).
                prefill_attention: 0.60,
                decode_attention: 0.50,
                ..base
            },
            Generation::Ada => Efficiencies {
                gemm_bf16: 0.65,
                gemm_fp8: 0.60,
                prefill_attention: 0.50,
                allreduce_bus_eff: 0.70,
                allreduce_latency_s: 30e-6,
                ..base
            },
            Generation::Blackwell | Generation::BlackwellUltra | Generation::BlackwellRtx => {
                Efficiencies {
                    gemm_bf16: 0.70,
                    gemm_fp8: 0.65,
                    gemm_fp4: 0.55,
                    prefill_attention: 0.55,
                    decode_attention: 0.45,
                    ..base
                }
            }
            Generation::Cdna3 | Generation::Cdna4 => Efficiencies {
                gemm_bf16: 0.50,
                gemm_fp8: 0.45,
                gemm_fp4: 0.40,
                grouped_gemm_vs_dense: 0.70,
                prefill_attention: 0.40,
                decode_attention: 0.35,
                hbm_weights: 0.75,
                hbm_expert_weights: 0.50,
                hbm_kv: 0.70,
                allreduce_bus_eff: 0.70,
                allreduce_latency_s: 15e-6,
                all2all_eff: 0.50,
                ..base
            },
            Generation::TpuV5e | Generation::TpuV6e | Generation::Custom => Efficiencies {
                gemm_bf16: 0.60,
                gemm_fp8: 0.55,
                gemm_fp4: 0.50,
                prefill_attention: 0.50,
                decode_attention: 0.40,
                hbm_weights: 0.80,
                hbm_expert_weights: 0.55,
                hbm_kv: 0.75,
                allreduce_bus_eff: 0.70,
                allreduce_latency_s: 15e-6,
                all2all_eff: 0.50,
                ..base
            },
        };
        // V0's paged prefix-prefill kernel and the Triton unified attention kernel are not
        // assumed slower than the generation's prefill attention, nor the recurrent-state kernels
        // than the paged KV reads; only a fit sets them apart.
        Efficiencies {
            prefill_attention_paged: table.prefill_attention,
            prefill_attention_triton: table.prefill_attention,
            hbm_state: table.hbm_kv,
            ..table
        }
    }

    /// What the literature defaults of a generation rest on (shown with results).
    pub fn default_note(generation: Generation) -> &'static str {
        match generation {
            Generation::Hopper => {
                "Hopper defaults: FlashAttention-3 / FlashMLA / cuBLAS figures on H100/H800 (docs/step-time.md)"
            }
            Generation::Ampere => {
                "Ampere defaults: cuBLAS / FlashAttention-2 figures on A100; fp8/fp4 weights compute in bf16"
            }
            Generation::Ada => "Ada defaults: ASSUMED (Hopper-like, PCIe collectives)",
            Generation::Blackwell | Generation::BlackwellUltra | Generation::BlackwellRtx => {
                "Blackwell defaults: ASSUMED close to Hopper fractions of the (higher) Blackwell peaks; to be calibrated"
            }
            Generation::Cdna3 | Generation::Cdna4 => {
                "AMD CDNA defaults: ASSUMED lower achieved fractions (hipBLASLt / CK attention on ROCm); to be calibrated"
            }
            Generation::TpuV5e | Generation::TpuV6e => {
                "TPU: generic ASSUMED fractions; the step model is GPU-shaped and not validated on TPUs"
            }
            Generation::Custom => "custom GPU: generic ASSUMED fractions; override them if you know better",
        }
    }
}

/// The description and fitted fields of a generation in the embedded calibration, if any.
fn calibrated_fields(
    generation: Generation,
    era: EngineEra,
) -> Option<(String, String, BTreeMap<String, f64>)> {
    let file = shipped_calibration()?;
    let (key, fitted) = lookup_calibration(&file.generations, generation, era)?;
    (!fitted.is_empty()).then(|| (file.description.clone(), key, fitted))
}

/// The fields the shipped calibration entry `key` (as [`lookup_calibration`] names it; of a
/// layered `g + g@era`, the release line's) borrowed because none of its rows reads them
/// (`validate::borrow_unidentified`), each as `field from donors`; empty when it borrowed none.
pub fn borrowed_fields(key: &str) -> Vec<String> {
    let entry = key.rsplit(" + ").next().unwrap_or(key);
    shipped_calibration()
        .and_then(|f| f.borrowed.get(entry))
        .map(|b| {
            b.iter()
                .map(|(f, from)| format!("{f} from {from}"))
                .collect()
        })
        .unwrap_or_default()
}

/// The key of a calibration table entry: `<generation>@<era>`, e.g. `hopper@vllm-0.15`.
pub fn calibration_key(generation: Generation, era: EngineEra) -> String {
    format!("{}@{}", generation_key(generation), era.key())
}

/// The fitted fields a table gives `(generation, era)`, and the key(s) they came from: a plain
/// `<generation>` entry (what a fit gives every release line of the generation, e.g. the shared
/// kernel efficiencies of `servesim validate --fit --fit-shape shared-kernels`) with, on top, the release
/// line's own entry: the exact `<generation>@<era>`, else the same generation's entry for the
/// nearest other era ([`EngineEra::fallbacks`]). The key reads `hopper + hopper@vllm-0.15` when
/// both layers are there. `None` when the table has nothing for the generation.
pub fn lookup_calibration(
    table: &BTreeMap<String, BTreeMap<String, f64>>,
    generation: Generation,
    era: EngineEra,
) -> Option<(String, BTreeMap<String, f64>)> {
    let g = generation_key(generation);
    let exact = calibration_key(generation, era);
    let line = table.get(&exact).map(|m| (exact, m)).or_else(|| {
        era.fallbacks().into_iter().find_map(|e| {
            let k = calibration_key(generation, e);
            table.get(&k).map(|m| (k, m))
        })
    });
    match (table.get(&g), line) {
        (None, None) => None,
        (Some(b), None) => Some((g, b.clone())),
        (None, Some((k, m))) => Some((k, m.clone())),
        (Some(b), Some((k, m))) => {
            let mut merged = b.clone();
            merged.extend(m.iter().map(|(f, v)| (f.clone(), *v)));
            Some((format!("{g} + {k}"), merged))
        }
    }
}

/// A vLLM release line with its own calibration. vLLM's engine changed between the releases the
/// public measurements used (0.10.2 / 0.11.0 and 0.15.1): most visibly async scheduling became
/// the default (vllm-project/vllm#27614, the last item of the async-scheduling plan #27679), so
/// CPU scheduling overlaps the GPU step, along with newer kernels and compile passes. The
/// effective efficiencies differ by up to 2x on the same GPU (docs/accuracy.md), so each line is
/// fitted on its own runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EngineEra {
    /// vLLM before 0.8: the V0 engine (calibrated on dstack's 0.6 / 0.7 runs).
    #[serde(rename = "vllm-0.7")]
    Vllm07,
    /// vLLM 0.8 to 0.13 (calibrated on 0.10.2 and 0.11.0 runs).
    #[serde(rename = "vllm-0.11")]
    Vllm011,
    /// vLLM 0.14 and later; the default.
    #[default]
    #[serde(rename = "vllm-0.15")]
    Vllm015,
}

impl EngineEra {
    /// Every era, oldest first.
    pub const ALL: [EngineEra; 3] = [EngineEra::Vllm07, EngineEra::Vllm011, EngineEra::Vllm015];

    /// The calibration key part (`vllm-0.11`, `vllm-0.15`).
    pub fn key(self) -> &'static str {
        match self {
            EngineEra::Vllm07 => "vllm-0.7",
            EngineEra::Vllm011 => "vllm-0.11",
            EngineEra::Vllm015 => "vllm-0.15",
        }
    }

    /// Human label.
    pub fn label(self) -> &'static str {
        match self {
            EngineEra::Vllm07 => "vLLM < 0.8, V0 engine (calibrated on 0.6 / 0.7 runs)",
            EngineEra::Vllm011 => "vLLM 0.8 - 0.13 (calibrated on 0.9 - 0.13 runs)",
            EngineEra::Vllm015 => "vLLM >= 0.14 (calibrated on 0.15 - 0.21 and nightly runs)",
        }
    }

    /// The era of a vLLM version: before 0.8 (the V0 engine; V1 became the default in 0.8.0)
    /// -> [`EngineEra::Vllm07`], before 0.14 -> [`EngineEra::Vllm011`], else
    /// [`EngineEra::Vllm015`]. The 0.14 boundary is where async scheduling became the default; that
    /// it is the release that matters is an **assumption** (docs/accuracy.md).
    pub fn of_version(v: VllmVersion) -> EngineEra {
        if (v.major, v.minor) < (0, 8) {
            EngineEra::Vllm07
        } else if (v.major, v.minor) < (0, 14) {
            EngineEra::Vllm011
        } else {
            EngineEra::Vllm015
        }
    }

    /// Other eras, nearest first (used when a table has no fit for this era).
    pub fn fallbacks(self) -> Vec<EngineEra> {
        match self {
            EngineEra::Vllm07 => vec![EngineEra::Vllm011, EngineEra::Vllm015],
            EngineEra::Vllm011 => vec![EngineEra::Vllm015, EngineEra::Vllm07],
            EngineEra::Vllm015 => vec![EngineEra::Vllm011, EngineEra::Vllm07],
        }
    }
}

/// A vLLM version `MAJOR.MINOR[.PATCH]` (a leading `v` and a suffix such as `rc1` or `+cu128`
/// after the patch are accepted and ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct VllmVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl VllmVersion {
    /// Parses `0.15.1`, `v0.11.0`, `0.10`, `0.11.1rc2`; the error text says what is expected.
    pub fn parse(s: &str) -> Result<VllmVersion, String> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let mut parts = t.splitn(3, '.');
        let num = |x: Option<&str>, what: &str, required: bool| -> Result<u32, String> {
            match x {
                None if !required => Ok(0),
                None => Err(format!("`{s}` has no {what} number")),
                Some(p) => {
                    let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
                    if digits.is_empty() || (required && digits.len() != p.len()) {
                        Err(format!("`{s}`: the {what} part `{p}` is not a number"))
                    } else {
                        digits
                            .parse()
                            .map_err(|_| format!("`{s}`: {what} too large"))
                    }
                }
            }
        };
        let major = num(parts.next(), "major", true)?;
        let minor = num(parts.next(), "minor", true)?;
        let patch = num(parts.next(), "patch", false)?;
        Ok(VllmVersion {
            major,
            minor,
            patch,
        })
    }
}
