//! What a calibration row is, beyond its numbers: which shipped model config and weight precision
//! it runs (checkpoint variants of a catalog model: `-FP8`, `-AWQ`, `-Instruct`, unnamed AWQ /
//! GPTQ checkpoints of a base model), the vLLM version inside a free-text `engine_version` cell,
//! and whether the row can be simulated at all yet: rows that need a capability ServeSim does not
//! have (MTP speculative decoding, DP+EP lockstep, an NPU, a missing config) are listed with
//! that capability instead of being dropped or simulated wrongly. Rules: docs/accuracy.md.

use super::CalibrationPoint;
use crate::dtype::{DType, WeightPrecision};
use crate::model::catalog;

/// Checkpoint names in the CSVs that use another shipped config (same architecture; the
/// precision comes from the row's `weight_dtype`). The reason is shown with every such row.
pub const MODEL_FILE_ALIASES: &[(&str, &str, &str)] = &[
    (
        "amd/Llama-3.1-405B-Instruct-FP8-KV",
        "meta-llama/Meta-Llama-3.1-405B",
        "AMD Quark FP8 checkpoint of the same architecture",
    ),
    // Names used only by the validation set (data/validation/measured-points-validation.csv).
    (
        "amd/Llama-3.3-70B-Instruct-FP8-KV",
        "meta-llama/Llama-3.1-70B-Instruct",
        "AMD Quark FP8 checkpoint of Llama-3.3-70B-Instruct, which has the Llama-3.1-70B architecture",
    ),
    (
        "amd/Llama-3.3-70B-Instruct-MXFP4-Preview",
        "meta-llama/Llama-3.1-70B-Instruct",
        "AMD Quark MXFP4 checkpoint of Llama-3.3-70B-Instruct, which has the Llama-3.1-70B architecture",
    ),
    (
        "nvidia/Kimi-K2.5-NVFP4",
        "moonshotai/Kimi-K2-Instruct",
        "Kimi-K2.5's language model has the Kimi-K2 architecture (its vision tower is not modelled; text-only rows); NVFP4 run as fp4 on every linear layer",
    ),
    (
        "zai-org/GLM-5.1-FP8",
        "zai-org/GLM-5-FP8",
        "GLM-5.1 has the GLM-5 architecture (GlmMoeDsaForCausalLM: hidden 6144, 78 layers of which the first 3 dense, MLA with q/kv ranks 2048/512 and 256-dim heads, 256 routed experts top-8 and one shared; quic/efficient-transformers PR #1057's description of zai-org/GLM-5.1); the block-FP8 release as GLM-5-FP8's",
    ),
    (
        "DeepSeek-R1-0528-AWQ",
        "deepseek-ai/DeepSeek-R1",
        "an AWQ (int4 weight-only) upload of DeepSeek-R1-0528 whose uploader the source does not name",
    ),
];

/// Variant suffixes that keep the architecture (checkpoint revisions and quantised uploads).
const VARIANT_SUFFIXES: &[&str] = &["-FP8", "-AWQ", "-Instruct-2507", "-Instruct", "-0528"];

/// A row's model as ServeSim runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedModel {
    pub catalog_id: String,
    /// Weight precision of the scenario (`checkpoint`, `fp8`, `fp4`, `int4`, `int8`).
    pub precision: WeightPrecision,
    pub notes: Vec<String>,
}

/// The first `MAJOR.MINOR[.PATCH]` number in a free-text version cell (`v0.19.1-cu130 ...` ->
/// `0.19.1`, `0.7.3.dev138+g21f6` -> `0.7.3`); `None` when there is none.
pub fn version_in(cell: &str) -> Option<String> {
    let b = cell.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit()
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'v')
        {
            let mut parts: Vec<&str> = Vec::new();
            let mut j = i;
            let mut start = i;
            while j <= b.len() {
                let end = j == b.len() || !b[j].is_ascii_digit();
                if end {
                    if start == j {
                        break;
                    }
                    parts.push(&cell[start..j]);
                    if j < b.len() && b[j] == b'.' && parts.len() < 3 {
                        j += 1;
                        start = j;
                        continue;
                    }
                    break;
                }
                j += 1;
            }
            if parts.len() >= 2 {
                return Some(parts.join("."));
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// The model a gpustack performance-lab page is about, when the row names another: the page's
/// path (`docs/performance-lab/<model>/<gpu>.md`) names one catalog model, and its client command
/// asks for that model (`vllm bench serve --model openai/gpt-oss-20b`), which vLLM's OpenAI
/// server answers only when it serves it (any other name is "The model ... does not exist"), so a
/// serve command on the page that names another model is a copy from a sibling page. Returns the
/// page's catalog id and the note that says so; `None` when the path names no catalog model
/// (`glm-4.x`, `references`) or the row's model is the page's or one of its releases.
pub fn page_model(p: &CalibrationPoint) -> Option<(&'static str, String)> {
    let dir = p
        .source_ref
        .split("performance-lab/")
        .nth(1)?
        .split('/')
        .next()?;
    let named = |id: &str| {
        id.rsplit('/')
            .next()
            .unwrap_or(id)
            .eq_ignore_ascii_case(dir)
    };
    let row = first_word(&p.model);
    // The page's model or one of its releases (`Qwen3-235B-A22B-Instruct-2507-FP8` on
    // `qwen3-235b-a22b`).
    if row.to_ascii_lowercase().contains(&dir.to_ascii_lowercase()) {
        return None;
    }
    let id = catalog::ids().into_iter().find(|id| named(id))?;
    Some((
        id,
        format!(
            "model {id}, not the {row} the row's serve command names: the page ({}) is {id}'s and its client requests {id}, which a server of another model refuses",
            p.source_ref
        ),
    ))
}

/// The first whitespace-separated word of a cell (model cells may carry a parenthetical).
fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or("")
}

/// A catalog id for a CSV model name, in this order: a file alias ([`MODEL_FILE_ALIASES`]), the
/// name (or with `Qwen/` added) when it is a catalog id, the id the page and the CLI resolve it to
/// ([`crate::model::ids`]: a release or re-quantization runs as itself, which loads its stand-in
/// config with the release's own context and quantization), else the name with a variant suffix
/// removed. The precision still comes from the row's `weight_dtype`.
fn catalog_id_for(name: &str) -> Option<(String, Option<String>)> {
    if let Some((_, to, why)) = MODEL_FILE_ALIASES.iter().find(|(a, _, _)| *a == name) {
        return Some((
            to.to_string(),
            Some(format!("model {name} uses the {to} config: {why}")),
        ));
    }
    let mut candidates = vec![name.to_string()];
    if !name.contains('/') && name.starts_with("Qwen") {
        candidates.push(format!("Qwen/{name}"));
    }
    if let Some(c) = candidates
        .iter()
        .find(|c| catalog::config_json(c).is_some())
    {
        let note =
            (c != name).then(|| format!("model {name} uses the {c} config (same architecture)"));
        return Some((c.clone(), note));
    }
    // A known release or re-quantization, resolved as the page and the CLI resolve it
    // ([`crate::model::ids`]): the scenario names the release itself, so its own context and
    // quantization (what the note says differs) apply; the precision still comes from the row's
    // `weight_dtype`.
    if let Some(r) = candidates
        .iter()
        .find_map(|c| crate::model::ids::resolve(c).ok().map(|(_, r)| r))
    {
        return Some((r.requested.clone(), Some(format!("model {}", r.summary()))));
    }
    // Names the product does not know: a variant suffix removed.
    for c in candidates {
        let mut cur = c.clone();
        loop {
            if catalog::config_json(&cur).is_some() {
                let note = (cur != name)
                    .then(|| format!("model {name} uses the {cur} config (same architecture)"));
                return Some((cur, note));
            }
            match VARIANT_SUFFIXES.iter().find(|s| cur.ends_with(*s)) {
                Some(s) => cur.truncate(cur.len() - s.len()),
                None => break,
            }
        }
    }
    None
}

/// The catalog model and weight precision of a row, or why it cannot run (the text says what is
/// missing).
pub fn resolve_model(p: &CalibrationPoint) -> Result<ResolvedModel, String> {
    let page = page_model(p);
    let name = page
        .as_ref()
        .map_or_else(|| first_word(&p.model), |(id, _)| *id);
    let (id, note) = catalog_id_for(name).ok_or_else(|| {
        format!("model config not shipped: `{}` has no config in data/models (add its config.json with provenance)", p.model)
    })?;
    let mut notes: Vec<String> = page.map(|(_, why)| why).into_iter().collect();
    notes.extend(note);
    let cfg = catalog::load(&id).map_err(|e| e.to_string())?;
    let w = p.weight_dtype.to_ascii_lowercase();
    let first = first_word(&w);
    let ck = cfg.checkpoint;
    let precision = if w.contains("bnb") || w.contains("bitsandbytes") {
        return Err("bitsandbytes 4-bit weights are not modelled".into());
    } else if w.contains("native")
        || matches!(first, "fp16" | "bf16" | "float16" | "bfloat16")
        || (first == "mxfp4" && ck.experts == DType::Mxfp4)
        || (first == "nvfp4" && ck.experts == DType::Nvfp4)
        || (first == "fp8" && ck.dense == DType::Fp8)
        || (first == "int4" && ck.experts == DType::Int4)
    {
        // The checkpoint's own format (incl. an already-quantised catalog config).
        WeightPrecision::Checkpoint
    } else if first == "fp8" {
        WeightPrecision::Fp8
    } else if matches!(first, "fp4" | "nvfp4" | "mxfp4") {
        WeightPrecision::Fp4
    } else if first == "int8" {
        WeightPrecision::Int8
    } else if first == "int4" || first == "gptq" || w.contains("awq") {
        WeightPrecision::Int4
    } else {
        return Err(format!(
            "weight_dtype `{}` is not one ServeSim models (fp16/bf16, fp8, fp4/nvfp4/mxfp4, int4 AWQ/GPTQ/W4A16, int8 GPTQ)",
            p.weight_dtype
        ));
    };
    if precision != WeightPrecision::Checkpoint {
        notes.push(format!(
            "weights served as {} (from weight_dtype `{}`)",
            precision.name(),
            p.weight_dtype
        ));
    }
    Ok(ResolvedModel {
        catalog_id: id,
        precision,
        notes,
    })
}

/// The architecture family a row's model belongs to, for the leave-one-family-out check
/// (docs/accuracy.md): `hybrid` (linear-attention layers: Qwen3.5 Gated DeltaNet), `sparse`
/// (DeepSeek sparse attention: V3.2, GLM-5), `MLA` (multi-head latent attention: DeepSeek-R1 /
/// V3), `MoE` (other mixture-of-experts), `dense`; `unknown` when the model does not resolve.
pub fn model_family(p: &CalibrationPoint) -> &'static str {
    let Ok(m) = resolve_model(p) else {
        return "unknown";
    };
    match crate::model::catalog::load(&m.catalog_id) {
        Ok(c) => c.accuracy_family(),
        Err(_) => "unknown",
    }
}

/// The capability a row waits for, when ServeSim cannot simulate it faithfully yet; `None` when
/// the row runs. Checked before the row is mapped to a scenario.
pub fn waits_for(p: &CalibrationPoint) -> Option<String> {
    let w = p.workload.to_ascii_lowercase();
    if (w.contains("mtp(") || p.notes.contains("SPEC DECODING: MTP ON"))
        && super::mtp_tokens(p).is_none()
    {
        return Some(
            "MTP speculative decoding: the row does not say how many speculative tokens".into(),
        );
    }
    if p.repeats_line.is_some() {
        return Some(
            "a measurement of its own: every figure repeats another row's, measured on another GPU (the source published one run on two GPUs' pages; which GPU ran it cannot be told)".into(),
        );
    }
    if let Some(n) = super::pipeline_parallel_in_notes(&p.notes).filter(|&n| n > 1) {
        return Some(format!(
            "pipeline parallelism (the serve command's pipeline-parallel size {n}): not modelled"
        ));
    }
    if p.tp == 0 || p.dp == 0 {
        return Some("the parallel layout: the source does not state tp/dp for this run".into());
    }
    if p.gpu.to_ascii_lowercase().contains("ascend")
        || p.engine.to_ascii_lowercase().contains("ascend")
    {
        return Some("Ascend NPUs (vLLM-Ascend): no NPU spec or step-time model".into());
    }
    if p.source.starts_with("inference-sim") && w.contains("'reasoning'") {
        return Some(
            "client timeouts: the overloaded 'reasoning' stages timed out up to 85% of requests, which ServeSim does not model".into(),
        );
    }
    if super::row_gpu(&p.gpu).is_err() {
        return Some(format!(
            "GPU `{}`: not in the GPU catalog (data/gpus.json)",
            p.gpu
        ));
    }
    if let Err(e) = resolve_model(p) {
        return Some(e);
    }
    if (p.isl.is_none() || p.osl.is_none())
        && super::mean_lengths_from_notes(&p.notes).is_none()
        && super::totals_from_notes(&p.notes).is_none()
    {
        return Some(
            "the request lengths: the source gives neither isl/osl nor mean lengths".into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_inside_text() {
        assert_eq!(version_in("0.15.1").as_deref(), Some("0.15.1"));
        assert_eq!(
            version_in("v0.19.1-cu130 (vllm/vllm-openai)").as_deref(),
            Some("0.19.1")
        );
        assert_eq!(
            version_in("0.7.3.dev138+g21f6ca217 (rocm/vllm-dev, V0)").as_deref(),
            Some("0.7.3")
        );
        assert_eq!(
            version_in("ghcr.io/embeddedllm/vllm-rocm:cb3b2b9 (vLLM 0.6.3.dev109+gcb3b2b9b, V0")
                .as_deref(),
            Some("0.6.3")
        );
        assert_eq!(version_in("vllm/vllm-openai:nightly (~2026-02-13)"), None);
    }

    #[test]
    fn variants_resolve_to_shipped_configs() {
        let id = |n: &str| catalog_id_for(n).map(|x| x.0);
        // Releases and re-quantizations resolve as the page and the CLI resolve them: the
        // release keeps its own context (the 2507 update: 262,144, not the stand-in's 40,960).
        assert_eq!(
            id("Qwen/Qwen3-14B-AWQ").as_deref(),
            Some("Qwen/Qwen3-14B-AWQ")
        );
        let r = id("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8").unwrap();
        assert_eq!(r, "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8");
        let m = catalog::load(&r).unwrap();
        assert_eq!(m.max_position_embeddings, 262_144);
        assert_eq!(m.checkpoint.dense, DType::Fp8);
        let base = catalog::load(&id("Qwen/Qwen3-235B-A22B-Instruct-2507").unwrap()).unwrap();
        assert_eq!(base.max_position_embeddings, 262_144);
        assert_eq!(base.checkpoint.dense, DType::Bf16);
        assert_eq!(id("Qwen3-8B").as_deref(), Some("Qwen/Qwen3-8B"));
        // A name only the variant rule knows still runs its architecture's config.
        assert_eq!(
            id("Qwen/Qwen3-32B-Instruct").as_deref(),
            Some("Qwen/Qwen3-32B")
        );
        assert_eq!(
            id("MiniMaxAI/MiniMax-M2.5").as_deref(),
            Some("MiniMaxAI/MiniMax-M2.5")
        );
        assert_eq!(id("zai-org/GLM-4.6").as_deref(), Some("zai-org/GLM-4.6"));
        let m = catalog::load(&id("MiniMaxAI/MiniMax-M2.5").unwrap()).unwrap();
        assert_eq!(m.max_position_embeddings, 196_608);
        assert_eq!(
            id("zai-org/GLM-4.5-Air").as_deref(),
            Some("zai-org/GLM-4.5-Air")
        );
        assert_eq!(id("zai-org/GLM-4.4"), None);
    }
}
