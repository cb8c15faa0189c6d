//! Hugging Face ids of checkpoints that share a shipped architecture: instruct, chat, dated and
//! re-quantized releases (`-Instruct`, `-0528`, `-2507`, `-FP8`, `nvidia/...-FP4`,
//! `RedHatAI/...-FP8-dynamic`) resolve to the shipped `config.json` that stands in for them, with
//! their own quantization and context length applied where they differ; unknown ids get
//! suggestions ranked by family, size and version. The table and the rules are documented in
//! docs/inputs.md ("Model ids").

use super::{catalog, ModelConfig, ModelError};
use serde::Serialize;
use serde_json::Value;

/// A checkpoint quantization that differs from the stand-in config's, applied as the
/// `quantization_config` the checkpoint carries (so the parser's rules size it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Requant {
    /// fp8 with 128x128 weight blocks (Qwen's `-FP8` releases: `quant_method: fp8`,
    /// `weight_block_size: [128, 128]`).
    Fp8Block128,
    /// fp8 with per-channel / per-tensor scales (RedHatAI / neuralmagic `-FP8`, `-FP8-dynamic`
    /// compressed-tensors, NVIDIA ModelOpt `-FP8`, Meta's `-FP8`): scale bytes negligible.
    Fp8Channel,
    /// NVIDIA ModelOpt NVFP4 (`nvidia/...-FP4`, `...-NVFP4`): every linear layer sized as NVFP4.
    Nvfp4,
    /// AWQ 4-bit, group size 128 (Qwen's `-AWQ` releases: `quant_method: awq`, `bits: 4`,
    /// `group_size: 128`; AutoAWQ's default).
    Awq4,
    /// GPTQ with `bits` 4 or 8, group size 128 (Qwen's `-GPTQ-Int4` / `-GPTQ-Int8`).
    Gptq(u8),
    /// compressed-tensors W4A16 (RedHatAI `-quantized.w4a16`: int4 weights, group size 128,
    /// 16-bit activations), sized like AWQ 4-bit.
    W4a16,
    /// Kimi's native INT4 (Kimi-K2-Thinking): compressed-tensors int4 routed experts in groups of
    /// 32, with attention, shared experts, the dense layers' MLPs and lm_head in `ignore`.
    Int4RoutedExperts32,
}

impl Requant {
    fn quantization_config(self) -> Value {
        match self {
            Requant::Fp8Block128 => serde_json::json!({
                "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128]
            }),
            Requant::Fp8Channel => serde_json::json!({"quant_method": "fp8"}),
            Requant::Nvfp4 => {
                serde_json::json!({"quant_method": "modelopt", "quant_algo": "NVFP4"})
            }
            Requant::Awq4 | Requant::W4a16 => {
                serde_json::json!({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true})
            }
            Requant::Gptq(bits) => {
                serde_json::json!({"quant_method": "gptq", "bits": bits, "group_size": 128})
            }
            Requant::Int4RoutedExperts32 => serde_json::json!({
                "quant_method": "compressed-tensors", "format": "pack-quantized",
                "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
                    "weights": {"num_bits": 4, "type": "int", "group_size": 32, "strategy": "group", "symmetric": true}}},
                "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]
            }),
        }
    }
    fn describe(self) -> &'static str {
        match self {
            Requant::Fp8Block128 => "fp8 weights with 128x128 block scales",
            Requant::Fp8Channel => "fp8 weights (per-channel/per-tensor scales)",
            Requant::Nvfp4 => "NVFP4 weights on every linear layer (ModelOpt; the layers ModelOpt leaves in bf16 are not modelled)",
            Requant::Awq4 => "AWQ int4 weights, group size 128 (16-bit activations)",
            Requant::Gptq(8) => "GPTQ int8 weights, group size 128 (16-bit activations)",
            Requant::Gptq(_) => "GPTQ int4 weights, group size 128 (16-bit activations)",
            Requant::W4a16 => "W4A16 int4 weights, group size 128 (compressed-tensors; 16-bit activations)",
            Requant::Int4RoutedExperts32 => "INT4 routed experts in groups of 32 (compressed-tensors W4A16); attention, shared experts and dense MLPs in bf16",
        }
    }
}

/// A known release whose config is not shipped but whose architecture is.
struct Release {
    id: &'static str,
    /// The shipped config that stands in (a catalog id).
    config: &'static str,
    /// `max_position_embeddings` of this release where it differs.
    context: Option<u64>,
    quant: Option<Requant>,
    /// Why the stand-in is the same architecture (the model card's statement).
    why: &'static str,
}

const SAME_LLAMA31_70B: &str = "same architecture as Llama-3.1-70B (80 layers, 8192 hidden, 64/8 heads, 128K context; model card)";

/// Known releases (model cards on Hugging Face; docs/inputs.md lists them with their sources).
const RELEASES: &[Release] = &[
    Release {
        id: "meta-llama/Llama-3.1-8B",
        config: "meta-llama/Meta-Llama-3.1-8B",
        context: None,
        quant: None,
        why: "the same repository renamed (Meta-Llama-3.1-8B -> Llama-3.1-8B)",
    },
    Release {
        id: "meta-llama/Meta-Llama-3.1-8B-Instruct",
        config: "meta-llama/Llama-3.1-8B-Instruct",
        context: None,
        quant: None,
        why: "the same repository before its rename",
    },
    Release {
        id: "meta-llama/Llama-3.1-70B",
        config: "meta-llama/Meta-Llama-3.1-70B",
        context: None,
        quant: None,
        why: "the same repository renamed (Meta-Llama-3.1-70B -> Llama-3.1-70B)",
    },
    Release {
        id: "meta-llama/Meta-Llama-3.1-70B-Instruct",
        config: "meta-llama/Llama-3.1-70B-Instruct",
        context: None,
        quant: None,
        why: "the same repository before its rename",
    },
    Release {
        id: "meta-llama/Llama-3.3-70B-Instruct",
        config: "meta-llama/Llama-3.1-70B-Instruct",
        context: None,
        quant: None,
        why: SAME_LLAMA31_70B,
    },
    Release {
        id: "meta-llama/Llama-3.1-405B",
        config: "meta-llama/Meta-Llama-3.1-405B",
        context: None,
        quant: None,
        why: "the same repository renamed (Meta-Llama-3.1-405B -> Llama-3.1-405B)",
    },
    Release {
        id: "meta-llama/Llama-3.1-405B-Instruct",
        config: "meta-llama/Meta-Llama-3.1-405B",
        context: None,
        quant: None,
        why: "the instruct checkpoint of the same architecture (126 layers, 16384 hidden, 128/8 heads)",
    },
    Release {
        id: "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8",
        config: "meta-llama/Llama-3.1-405B-Instruct-FP8",
        context: None,
        quant: None,
        why: "the same repository before its rename",
    },
    Release {
        id: "meta-llama/Llama-3.1-405B-FP8",
        config: "meta-llama/Llama-3.1-405B-Instruct-FP8",
        context: None,
        quant: None,
        why: "Meta's fp8 release of the base model, quantised like the Instruct one (fbgemm_fp8, attention kept in bf16: 56.77 GiB of weights per GPU at TP8 in dstack's vLLM log of this checkpoint)",
    },
    Release {
        id: "meta-llama/Meta-Llama-3.1-405B-FP8",
        config: "meta-llama/Llama-3.1-405B-Instruct-FP8",
        context: None,
        quant: None,
        why: "Meta's fp8 release of the base model before the rename, quantised like the Instruct one",
    },
    Release {
        id: "meta-llama/Llama-2-7b-chat-hf",
        config: "meta-llama/Llama-2-7b-hf",
        context: None,
        quant: None,
        why: "the chat checkpoint of the same architecture",
    },
    Release {
        id: "meta-llama/Llama-2-70b-chat-hf",
        config: "meta-llama/Llama-2-70b-hf",
        context: None,
        quant: None,
        why: "the chat checkpoint of the same architecture",
    },
    Release {
        id: "codellama/CodeLlama-34b-hf",
        config: "codellama/CodeLlama-34b-Instruct-hf",
        context: None,
        quant: None,
        why: "the base checkpoint of the same architecture",
    },
    Release {
        id: "deepseek-ai/DeepSeek-R1-0528",
        config: "deepseek-ai/DeepSeek-R1",
        context: None,
        quant: None,
        why: "a later training of DeepSeek-R1 with the same architecture (model card: \"minor version upgrade\")",
    },
    Release {
        id: "deepseek-ai/DeepSeek-V3-0324",
        config: "deepseek-ai/DeepSeek-V3",
        context: None,
        quant: None,
        why: "a later training of DeepSeek-V3 with the same architecture (model card)",
    },
    Release {
        id: "deepseek-ai/DeepSeek-V3.1",
        config: "deepseek-ai/DeepSeek-V3",
        context: None,
        quant: None,
        why: "post-trained from DeepSeek-V3.1-Base on the DeepSeek-V3 architecture (model card)",
    },
    Release {
        id: "deepseek-ai/DeepSeek-V3.1-Terminus",
        config: "deepseek-ai/DeepSeek-V3",
        context: None,
        quant: None,
        why: "an update of DeepSeek-V3.1 on the same DeepSeek-V3 architecture (671B total, 37B active per token; model card)",
    },
    Release {
        id: "deepseek-ai/DeepSeek-V3-Base",
        config: "deepseek-ai/DeepSeek-V3",
        context: None,
        quant: None,
        why: "the base checkpoint of the same architecture",
    },
    Release {
        id: "Qwen/Qwen3-30B-A3B-Instruct-2507",
        config: "Qwen/Qwen3-30B-A3B",
        context: Some(262_144),
        quant: None,
        why: "the 2507 update of Qwen3-30B-A3B (48 layers, 128 experts top-8; model card), native context 262,144",
    },
    Release {
        id: "Qwen/Qwen3-30B-A3B-Thinking-2507",
        config: "Qwen/Qwen3-30B-A3B",
        context: Some(262_144),
        quant: None,
        why: "the 2507 update of Qwen3-30B-A3B (model card), native context 262,144",
    },
    Release {
        id: "Qwen/Qwen3-235B-A22B-Instruct-2507",
        config: "Qwen/Qwen3-235B-A22B",
        context: Some(262_144),
        quant: None,
        why: "the 2507 update of Qwen3-235B-A22B (94 layers, 128 experts top-8; model card), native context 262,144",
    },
    Release {
        id: "Qwen/Qwen3-235B-A22B-Thinking-2507",
        config: "Qwen/Qwen3-235B-A22B",
        context: Some(262_144),
        quant: None,
        why: "the 2507 update of Qwen3-235B-A22B (model card), native context 262,144",
    },
    Release {
        id: "Qwen/Qwen3-30B-A3B-Base",
        config: "Qwen/Qwen3-30B-A3B",
        context: Some(32_768),
        quant: None,
        why: "the base checkpoint of the same architecture (model card: context 32,768)",
    },
    Release {
        id: "mistralai/Mixtral-8x7B-Instruct-v0.1",
        config: "mistralai/Mixtral-8x7B-v0.1",
        context: None,
        quant: None,
        why: "the instruct checkpoint of the same architecture",
    },
    Release {
        id: "moonshotai/Kimi-K2-Instruct-0905",
        config: "moonshotai/Kimi-K2-Instruct",
        context: Some(262_144),
        quant: None,
        why: "the 0905 update of Kimi-K2-Instruct (same architecture; model card: context 256K)",
    },
    Release {
        id: "moonshotai/Kimi-K2-Thinking",
        config: "moonshotai/Kimi-K2-Instruct",
        context: Some(262_144),
        quant: Some(Requant::Int4RoutedExperts32),
        why: "the Kimi-K2 architecture (DeepseekV3: MLA, 61 layers, 384 experts top-8 and a shared expert) with native INT4 routed experts from quantization-aware training (model card); context 262,144 (256K)",
    },
    Release {
        id: "moonshotai/Kimi-K2-Base",
        config: "moonshotai/Kimi-K2-Instruct",
        context: None,
        quant: None,
        why: "the base checkpoint of the same architecture",
    },
    Release {
        id: "zai-org/GLM-4.6",
        config: "zai-org/GLM-4.7",
        context: None,
        quant: None,
        why: "GLM-4.6 and GLM-4.7 are the GLM-4.5 355B-A32B architecture (92 layers, the first 3 dense, 5120 hidden, 96/8 heads, 160 experts top-8 and a shared expert) with 202,752 context",
    },
    Release {
        id: "MiniMaxAI/MiniMax-M2.5",
        config: "MiniMaxAI/MiniMax-M2.7",
        context: Some(196_608),
        quant: None,
        why: "MiniMax-M2.5 and M2.7 are the same MiniMaxM2ForCausalLM structure (62 layers, 3072 hidden, 48/8 heads of 128 with 64 rotary dims and QK-norm, 256 experts top-8) and the same fp8 128x128 block checkpoint format (nvidia/MiniMax-M2.5-NVFP4's config, shipped, has M2.5's structure); M2.5's context is 196,608",
    },
    Release {
        id: "zai-org/GLM-4.5",
        config: "zai-org/GLM-4.7",
        context: Some(131_072),
        quant: None,
        why: "GLM-4.5 is the 355B-A32B architecture GLM-4.7 keeps (92 layers, the first 3 dense, 5120 hidden, 96/8 heads, 160 experts top-8); its context is 131,072",
    },
];

/// Organisations that publish re-quantized or re-uploaded copies of other organisations' models.
/// An id under any organisation resolves when its name (after the quantization suffix) names a
/// known checkpoint; these are only used for the wording of the note.
const REPUBLISHERS: [&str; 5] = ["nvidia", "redhatai", "neuralmagic", "unsloth", "amd"];

/// Quantization suffixes of re-quantized releases, longest first (case-insensitive). `None`:
/// publisher-dependent (Qwen's own `-FP8` releases are 128x128 block-quantized, others per-channel).
const QUANT_SUFFIXES: [(&str, Option<Requant>); 13] = [
    ("-quantized.w4a16", Some(Requant::W4a16)),
    ("-gptq-int4", Some(Requant::Gptq(4))),
    ("-gptq-int8", Some(Requant::Gptq(8))),
    ("-fp8-dynamic", Some(Requant::Fp8Channel)),
    ("-fp8-static", Some(Requant::Fp8Channel)),
    ("-fp8-block", Some(Requant::Fp8Block128)),
    ("-fp8-kv", Some(Requant::Fp8Channel)),
    ("-nvfp4", Some(Requant::Nvfp4)),
    ("-fp8", None),
    ("-fp4", Some(Requant::Nvfp4)),
    ("-w4a16", Some(Requant::W4a16)),
    ("-gptq", Some(Requant::Gptq(4))),
    ("-awq", Some(Requant::Awq4)),
];

/// Markers of weight formats ServeSim does not model (matched anywhere in the name): integer
/// activations (W8A8, W4A8), GGUF and bitsandbytes. AWQ / GPTQ / W4A16 releases are resolved
/// by their suffix (`QUANT_SUFFIXES`); other spellings of them are refused here.
const UNMODELLED: [&str; 4] = ["w8a8", "w4a8", "gguf", "bnb-4bit"];

/// How a requested id maps onto a shipped config. Shown by the CLI and the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelResolution {
    /// The id as given (trimmed).
    pub requested: String,
    /// The shipped config used.
    pub config_id: String,
    /// True when the requested id is the shipped config itself.
    pub exact: bool,
    /// Why the config stands in (empty when exact).
    pub basis: String,
    /// What this checkpoint changes relative to the stand-in config (quantization, context).
    pub differences: Vec<String>,
}

impl ModelResolution {
    /// One line for people, e.g. "meta-llama/Llama-3.3-70B-Instruct: the config of
    /// meta-llama/Llama-3.1-70B-Instruct stands in (same architecture ...)".
    pub fn summary(&self) -> String {
        if self.exact {
            return format!("{}: shipped config", self.config_id);
        }
        let mut s = format!(
            "{}: the config of {} stands in ({})",
            self.requested, self.config_id, self.basis
        );
        if self.differences.is_empty() {
            s.push_str("; nothing differs");
        } else {
            s.push_str("; differs: ");
            s.push_str(&self.differences.join("; "));
        }
        s
    }
}

/// Strips a Hugging Face URL or `hf.co/` prefix and a trailing `/`; `org--name` becomes `org/name`.
fn clean(id: &str) -> String {
    let mut s = id.trim().trim_end_matches('/').to_string();
    for p in [
        "https://huggingface.co/",
        "http://huggingface.co/",
        "huggingface.co/",
        "https://hf.co/",
        "hf.co/",
    ] {
        if s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p) {
            s = s[p.len()..].to_string();
        }
    }
    if !s.contains('/') {
        if let Some((o, n)) = s.split_once("--") {
            s = format!("{o}/{n}");
        }
    }
    s
}

fn name_part(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// Name comparison key: lowercase, a leading `meta-` dropped (`Meta-Llama-3.1-8B-Instruct` and
/// `Llama-3.1-8B-Instruct` are the same repository under its old and new name).
fn name_key(name: &str) -> String {
    let l = name.to_ascii_lowercase();
    l.strip_prefix("meta-").map(str::to_string).unwrap_or(l)
}

/// Where a requested id lands before any re-quantization: a catalog id, or a release.
enum Base {
    Catalog(&'static str),
    Release(&'static Release),
}

fn find_exact(id: &str) -> Option<Base> {
    if let Some(c) = catalog::ids()
        .into_iter()
        .find(|c| c.eq_ignore_ascii_case(id))
    {
        return Some(Base::Catalog(c));
    }
    RELEASES
        .iter()
        .find(|r| r.id.eq_ignore_ascii_case(id))
        .map(Base::Release)
}

fn find_by_name(name: &str) -> Option<Base> {
    let k = name_key(name);
    if let Some(c) = catalog::ids()
        .into_iter()
        .find(|c| name_key(name_part(c)) == k)
    {
        return Some(Base::Catalog(c));
    }
    RELEASES
        .iter()
        .find(|r| name_key(name_part(r.id)) == k)
        .map(Base::Release)
}

fn base_id(b: &Base) -> &'static str {
    match b {
        Base::Catalog(c) => c,
        Base::Release(r) => r.id,
    }
}

/// Resolves an id to the model and how it was resolved. Exact catalog ids load their config
/// unchanged (the name is the catalog id); everything else is named as requested.
pub fn resolve(id: &str) -> Result<(ModelConfig, ModelResolution), ModelError> {
    // No real id is longer than this: a longer one is answered at once, quoted clipped
    // (docs/scenario.md "Bounds"), instead of being compared against every shipped id.
    if id.trim().chars().count() > crate::bounds::MODEL_ID_MAX_CHARS {
        return Err(ModelError::UnknownModel {
            id: crate::bounds::clip(id.trim()),
            suggestions: Vec::new(),
        });
    }
    let want = clean(id);
    if let Some(Base::Catalog(c)) = find_exact(&want) {
        let m = load_patched(c, c, None, None)?;
        return Ok((
            m,
            ModelResolution {
                requested: want.clone(),
                config_id: c.to_string(),
                exact: true,
                basis: String::new(),
                differences: Vec::new(),
            },
        ));
    }
    let (org, name) = match want.split_once('/') {
        Some((o, n)) => (o.to_string(), n.to_string()),
        None => (String::new(), want.clone()),
    };
    // The release itself, or a re-quantized / re-uploaded copy of a known checkpoint.
    let (base, requant, suffix) = match find_exact(&want) {
        Some(b) => (b, None, None),
        None => {
            let lname = name.to_ascii_lowercase();
            if let Some(fmt) = UNMODELLED.iter().find(|u| lname.contains(**u)) {
                return Err(ModelError::Unsupported {
                    model: want.clone(),
                    what: format!("the `{}` weight format", fmt.to_ascii_uppercase()),
                    fix: "ServeSim models bf16, fp8, MXFP4, NVFP4 and weight-only int4/int8 (AWQ, GPTQ, W4A16) weights, not integer activations (W8A8, W4A8), GGUF or bitsandbytes; give the unquantized id with --weight-precision fp8 for a nearby estimate, or paste the config.json".into(),
                });
            }
            let mut hit = None;
            for (suf, q) in QUANT_SUFFIXES {
                if lname.ends_with(suf) && lname.len() > suf.len() {
                    let stem = &name[..name.len() - suf.len()];
                    if let Some(b) = find_by_name(stem) {
                        let q = q.unwrap_or(if org.eq_ignore_ascii_case("qwen") {
                            Requant::Fp8Block128
                        } else {
                            Requant::Fp8Channel
                        });
                        hit = Some((
                            b,
                            Some(q),
                            Some(name[name.len() - suf.len() + 1..].to_string()),
                        ));
                    }
                    break;
                }
            }
            match hit {
                Some(h) => h,
                None => match find_by_name(&name) {
                    Some(b) => (b, None, None),
                    None => {
                        return Err(ModelError::UnknownModel {
                            id: want.clone(),
                            suggestions: suggestions(&want),
                        })
                    }
                },
            }
        }
    };
    let (config, context, release_quant, mut basis) = match &base {
        Base::Catalog(c) => (*c, None, None, String::new()),
        Base::Release(r) => (r.config, r.context, r.quant, r.why.to_string()),
    };
    let bid = base_id(&base);
    let republished = !bid.eq_ignore_ascii_case(&want);
    if republished {
        let who = if REPUBLISHERS.iter().any(|p| p.eq_ignore_ascii_case(&org)) {
            format!("{org}'s")
        } else if org.is_empty() {
            "a".to_string()
        } else {
            format!("{org}'s")
        };
        let what = match &suffix {
            Some(s) => format!("{who} {s} re-quantization of {bid}"),
            None => format!("{who} copy of {bid}"),
        };
        basis = if basis.is_empty() {
            what
        } else {
            format!("{what}; {basis}")
        };
    }
    let quant = requant.or(release_quant);
    let mut differences = Vec::new();
    let base_cfg = load_patched(config, config, None, None)?;
    if let Some(ctx) = context {
        if ctx != base_cfg.max_position_embeddings {
            differences.push(format!(
                "context length (max_position_embeddings) {ctx} instead of {}",
                base_cfg.max_position_embeddings
            ));
        }
    }
    let mut m = load_patched(config, &want, context, quant)?;
    if let Some(q) = quant {
        if m.checkpoint == base_cfg.checkpoint {
            differences.push(format!(
                "{}: the same storage as {config}'s own checkpoint",
                q.describe()
            ));
        } else {
            differences.push(format!(
                "{} (the stand-in's checkpoint is {} dense / {} experts)",
                q.describe(),
                base_cfg.checkpoint.dense,
                base_cfg.checkpoint.experts
            ));
        }
    }
    let res = ModelResolution {
        requested: want,
        config_id: config.to_string(),
        exact: false,
        basis,
        differences,
    };
    m.notes.insert(0, res.summary());
    Ok((m, res))
}

/// Parses a catalog config under `name`, with `max_position_embeddings` and
/// `quantization_config` replaced where given.
fn load_patched(
    config: &str,
    name: &str,
    context: Option<u64>,
    quant: Option<Requant>,
) -> Result<ModelConfig, ModelError> {
    let text = catalog::config_json(config).ok_or_else(|| ModelError::UnknownModel {
        id: config.to_string(),
        suggestions: Vec::new(),
    })?;
    if context.is_none() && quant.is_none() {
        return ModelConfig::from_hf_json(name, text);
    }
    let mut v: Value = serde_json::from_str(text).map_err(|e| ModelError::Json {
        model: config.to_string(),
        message: e.to_string(),
    })?;
    if let Some(o) = v.as_object_mut() {
        if let Some(c) = context {
            o.insert("max_position_embeddings".into(), Value::from(c));
        }
        if let Some(q) = quant {
            o.insert("quantization_config".into(), q.quantization_config());
        }
    }
    ModelConfig::from_hf_json(name, &v.to_string())
}

/// Every id that resolves without a re-quantization suffix: the catalog ids, then the known
/// releases (for lists and the page's search).
pub fn known_ids() -> Vec<&'static str> {
    let mut v = catalog::ids();
    v.extend(RELEASES.iter().map(|r| r.id));
    v
}

/// The known releases as (id, stand-in config id).
pub fn releases() -> Vec<(&'static str, &'static str)> {
    RELEASES.iter().map(|r| (r.id, r.config)).collect()
}

// ---------------------------------------------------------------------------------------------
// Suggestions: ranked by family, size and version (not string distance).

/// What a model name says about itself.
#[derive(Clone, Debug, Default, PartialEq)]
struct Traits {
    family: Option<&'static str>,
    /// Version as written after the family (`3.1`, `2`, `v3`, `r1`, `k2`, `2.5`).
    version: Option<String>,
    /// Total size in billions (`70b` -> 70, `8x7b` -> 56, `30b-a3b` -> 30).
    size_b: Option<f64>,
    instruct: bool,
}

const FAMILIES: [(&str, &str); 10] = [
    ("codellama", "codellama"),
    ("llama", "llama"),
    ("qwen", "qwen"),
    ("deepseek", "deepseek"),
    ("mixtral", "mixtral"),
    ("mistral", "mixtral"),
    ("kimi", "kimi"),
    ("gpt-oss", "gpt-oss"),
    ("gptoss", "gpt-oss"),
    ("oss", "gpt-oss"),
];

fn traits(s: &str) -> Traits {
    let l = s.to_ascii_lowercase().replace("gpt-oss", "gptoss");
    let mut t = Traits::default();
    let tokens: Vec<&str> = l
        .split(['/', '-', '_', ' ', ':'])
        .filter(|x| !x.is_empty())
        .collect();
    for tok in &tokens {
        let tok = *tok;
        if t.family.is_none() {
            if let Some((p, f)) = FAMILIES.iter().find(|(p, _)| tok.starts_with(p)) {
                t.family = Some(f);
                let rest = &tok[p.len()..];
                if !rest.is_empty() && rest.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    t.version = Some(rest.to_string());
                }
                continue;
            }
        }
        if tok.contains("instruct") || tok.contains("chat") {
            t.instruct = true;
            continue;
        }
        if let Some(num) = tok.strip_suffix('b') {
            if let Some((a, b)) = num.split_once('x') {
                if let (Ok(a), Ok(b)) = (a.parse::<f64>(), b.parse::<f64>()) {
                    t.size_b.get_or_insert(a * b);
                    continue;
                }
            }
            if let Ok(v) = num.parse::<f64>() {
                if !num.starts_with('a') {
                    t.size_b.get_or_insert(v);
                }
                continue;
            }
        }
        if t.version.is_none() && t.family.is_some() {
            let is_ver = tok.chars().next().is_some_and(|c| c.is_ascii_digit())
                && tok.chars().all(|c| c.is_ascii_digit() || c == '.')
                && tok.len() <= 4;
            let is_tag = (tok.starts_with('v') || tok.starts_with('r') || tok.starts_with('k'))
                && tok.len() <= 4
                && tok[1..].chars().all(|c| c.is_ascii_digit() || c == '.')
                && tok.len() > 1;
            if is_ver || is_tag {
                t.version = Some(tok.to_string());
            }
        }
    }
    t
}

fn version_num(v: &str) -> Option<f64> {
    v.trim_start_matches(['v', 'r', 'k']).parse().ok()
}

/// Score of a candidate for a query (higher is better; 0 = unrelated).
fn score(q: &Traits, c: &Traits) -> f64 {
    let mut s = 0.0;
    match (q.family, c.family) {
        (Some(a), Some(b)) if a == b => s += 1000.0,
        (Some("llama"), Some("codellama")) | (Some("codellama"), Some("llama")) => s += 300.0,
        (Some(_), _) => return 0.0,
        (None, _) => {}
    }
    if let (Some(a), Some(b)) = (q.size_b, c.size_b) {
        // 200 for the same size, falling with the log-ratio of sizes.
        let r = libm::fabs(libm::log(a / b));
        s += (200.0 - 100.0 * r).max(0.0);
    }
    match (&q.version, &c.version) {
        (Some(a), Some(b)) if a == b => s += 100.0,
        (Some(a), Some(b)) => {
            if let (Some(x), Some(y)) = (version_num(a), version_num(b)) {
                s += (60.0 - 40.0 * libm::fabs(x - y)).max(0.0);
            }
        }
        (None, Some(b)) => s += version_num(b).unwrap_or(0.0), // newer first
        _ => {}
    }
    if q.instruct == c.instruct {
        s += 5.0;
    }
    s
}

/// Up to five known ids for a query, best first: same family, then closest size, then closest
/// (or, without a version in the query, newest) version. Empty when nothing is related.
pub fn suggestions(query: &str) -> Vec<String> {
    let q = traits(&clean(query));
    if q.family.is_none() && q.size_b.is_none() {
        return Vec::new();
    }
    let mut scored: Vec<(f64, usize, &str)> = known_ids()
        .into_iter()
        .enumerate()
        .map(|(i, id)| (score(&q, &traits(id)), i, id))
        .filter(|(s, _, _)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(5)
        .map(|(_, _, id)| id.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    fn res(id: &str) -> (ModelConfig, ModelResolution) {
        resolve(id).unwrap_or_else(|e| panic!("{id}: {e}"))
    }

    #[test]
    fn the_issue_ids_resolve_to_their_architecture() {
        for (id, config) in [
            (
                "meta-llama/Llama-3.1-8B-Instruct",
                "meta-llama/Llama-3.1-8B-Instruct",
            ),
            (
                "meta-llama/Llama-3.3-70B-Instruct",
                "meta-llama/Llama-3.1-70B-Instruct",
            ),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
            (
                "deepseek-ai/DeepSeek-V3.1-Terminus",
                "deepseek-ai/DeepSeek-V3",
            ),
            ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B"),
            (
                "nvidia/Llama-3.3-70B-Instruct-FP8",
                "meta-llama/Llama-3.1-70B-Instruct",
            ),
            (
                "nvidia/Llama-3.3-70B-Instruct-FP4",
                "meta-llama/Llama-3.1-70B-Instruct",
            ),
            ("nvidia/DeepSeek-R1-FP4", "deepseek-ai/DeepSeek-R1"),
            ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-ai/DeepSeek-R1"),
            (
                "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
                "meta-llama/Llama-3.1-8B-Instruct",
            ),
            (
                "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
                "meta-llama/Llama-3.1-70B-Instruct",
            ),
            ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B"),
            ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "Qwen/Qwen3-30B-A3B"),
            (
                "moonshotai/Kimi-K2-Instruct-0905",
                "moonshotai/Kimi-K2-Instruct",
            ),
            (
                "https://huggingface.co/meta-llama/Llama-3.1-8B",
                "meta-llama/Meta-Llama-3.1-8B",
            ),
        ] {
            let (m, r) = res(id);
            assert_eq!(r.config_id, config, "{id}");
            assert_eq!(m.name, r.requested, "{id}");
            if !r.exact {
                assert!(m.notes[0].contains(config), "{id}: {:?}", m.notes);
            }
        }
    }

    /// MiniMax-M2.5 (the InferenceX and gpustack runs' model) resolves in the page and the CLI
    /// to M2.7's config with its own context, keeping the fp8 block checkpoint.
    #[test]
    fn minimax_m2_5_runs_on_m2_7_with_its_own_context() {
        let (m, r) = res("MiniMaxAI/MiniMax-M2.5");
        assert_eq!(r.config_id, "MiniMaxAI/MiniMax-M2.7");
        assert_eq!(m.max_position_embeddings, 196_608);
        assert_eq!(m.checkpoint.dense, DType::Fp8);
        assert!(
            r.differences[0].contains("196608 instead of 204800"),
            "{r:?}"
        );
        let (fp8, _) = res("MiniMaxAI/MiniMax-M2.7");
        assert_eq!(m.params().total, fp8.params().total);
    }

    /// Kimi-K2-Thinking: only the routed experts are INT4, in groups of 32 (2 / 32 scale bytes
    /// per weight, not 2 / 128); every other linear layer stays bf16.
    #[test]
    fn kimi_k2_thinking_has_int4_experts_in_groups_of_32() {
        use crate::dtype::WeightPrecision;
        use crate::model::TensorGroup;
        let (m, r) = res("moonshotai/Kimi-K2-Thinking");
        assert_eq!(r.config_id, "moonshotai/Kimi-K2-Instruct");
        assert_eq!(m.max_position_embeddings, 262_144);
        assert_eq!(m.checkpoint.experts, DType::Int4);
        assert_eq!(m.checkpoint.dense, DType::Bf16);
        assert_eq!(m.checkpoint.int_group_size, Some(32));
        let w = m.weight_bytes(WeightPrecision::Checkpoint);
        for g in &w.groups {
            let expect = match g.group {
                TensorGroup::RoutedExperts => 0.5 + 2.0 / 32.0,
                _ => 2.0,
            };
            let per = g.bytes.0 as f64 / g.params as f64;
            assert!(
                (per - expect).abs() < 1e-6,
                "{:?}: {per} bytes per weight",
                g.group
            );
        }
        // An int4 override quantises at vLLM's default group of 128.
        let over = m.weight_bytes(WeightPrecision::Int4);
        let experts = |wb: &crate::model::WeightBytes| {
            wb.groups
                .iter()
                .find(|g| g.group == TensorGroup::RoutedExperts)
                .map(|g| g.bytes.0 as f64 / g.params as f64)
                .unwrap()
        };
        assert!((experts(&over) - (0.5 + 2.0 / 128.0)).abs() < 1e-6);
        assert!(
            m.notes.iter().any(|n| n.contains("group_size 32")),
            "{:?}",
            m.notes
        );
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("only the routed experts are quantized")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn own_context_and_quantization_apply() {
        let (m, r) = res("Qwen/Qwen3-30B-A3B-Instruct-2507");
        assert_eq!(m.max_position_embeddings, 262_144);
        assert!(
            r.differences[0].contains("262144 instead of 40960"),
            "{r:?}"
        );
        let (m, r) = res("Qwen/Qwen3-8B-FP8");
        assert_eq!(m.checkpoint.dense, DType::Fp8);
        assert_eq!(m.checkpoint.fp8_block, Some((128, 128)));
        assert!(
            r.basis.contains("FP8 re-quantization of Qwen/Qwen3-8B"),
            "{r:?}"
        );
        let (m, _) = res("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8");
        assert_eq!(m.checkpoint.dense, DType::Fp8);
        assert_eq!(m.checkpoint.fp8_block, None);
        let (m, _) = res("nvidia/Llama-3.3-70B-Instruct-FP4");
        assert_eq!(m.checkpoint.dense, DType::Nvfp4);
        // weights shrink with the quantization: bf16 -> fp8 halves the linear layers
        let bf16 = res("meta-llama/Llama-3.1-8B-Instruct").0;
        let fp8 = res("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8").0;
        let w = |m: &ModelConfig| {
            m.weight_bytes(crate::dtype::WeightPrecision::Checkpoint)
                .total
                .get()
        };
        assert!(w(&fp8) < w(&bf16) * 6 / 10, "{} vs {}", w(&fp8), w(&bf16));
        // the same architecture otherwise
        assert_eq!(fp8.layers, bf16.layers);
        assert_eq!(fp8.params(), bf16.params());
    }

    #[test]
    fn exact_ids_are_unchanged() {
        let (m, r) = res("META-LLAMA/meta-llama-3.1-8b");
        assert!(r.exact);
        assert_eq!(m.name, "meta-llama/Meta-Llama-3.1-8B");
        assert_eq!(m, catalog::load("meta-llama/Meta-Llama-3.1-8B").unwrap());
    }

    #[test]
    fn weight_only_integer_releases_resolve_with_their_own_quantization() {
        use crate::dtype::DType;
        for (id, dt, base) in [
            ("Qwen/Qwen3-32B-AWQ", DType::Int4, "Qwen/Qwen3-32B"),
            ("Qwen/Qwen3-8B-GPTQ-Int8", DType::Int8, "Qwen/Qwen3-8B"),
            ("Qwen/Qwen3-8B-GPTQ-Int4", DType::Int4, "Qwen/Qwen3-8B"),
            (
                "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
                DType::Int4,
                "meta-llama/Meta-Llama-3.1-8B",
            ),
        ] {
            let (m, r) = res(id);
            assert!(!r.exact, "{id}");
            assert_eq!(m.checkpoint.dense, dt, "{id}: {r:?}");
            let b = catalog::load(base).unwrap();
            assert_eq!(m.layers, b.layers, "{id}");
            let w = |m: &ModelConfig| {
                m.weight_bytes(crate::dtype::WeightPrecision::Checkpoint)
                    .total
                    .get()
            };
            assert!(w(&m) < w(&b) * 7 / 10, "{id}: {} vs {}", w(&m), w(&b));
            assert!(
                r.differences.iter().any(|d| d.contains("int")),
                "{id}: {r:?}"
            );
        }
    }

    #[test]
    fn integer_activation_formats_are_refused_with_the_reason() {
        match resolve("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8") {
            Err(ModelError::Unsupported { what, .. }) => assert!(what.contains("W8A8"), "{what}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn suggestions_rank_family_size_version() {
        let s = suggestions("llama 70b");
        assert!(s.len() >= 4, "{s:?}");
        for id in &s[..4] {
            assert!(
                id.to_lowercase().contains("llama") && id.contains("70"),
                "{s:?}"
            );
        }
        let s = suggestions("meta-llama/Llama-3.2-8B-Instruct");
        assert!(s[0].contains("Llama-3.1-8B"), "{s:?}");
        let s = suggestions("Qwen/Qwen3-30B");
        assert!(s[0].starts_with("Qwen/Qwen3-30B-A3B"), "{s:?}");
        let s = suggestions("deepseek-ai/DeepSeek-V5");
        assert!(s.iter().all(|x| x.contains("DeepSeek")), "{s:?}");
        assert!(suggestions("zzz").is_empty());
    }
}
