//! Shared deployment flags (`servesim capacity`, `sweep`, `compare` flatten [`DeploymentArgs`])
//! and how they land on a [`Scenario`].
//!
//! Model and GPU are clap flags; every `vllm serve` argument (and the ServeSim deployment
//! flags beside them: `--num-gpus`, `--ep`, `--weight-precision`, ...) comes from the core's one
//! table, `servesim_core::vllm::args::registry`, by any spelling it knows (`-tp 4`, `--tp 4`,
//! `--tensor-parallel-size=4`, `--max_num_seqs 64`): `vllm_flags::split` takes them out of the
//! command line before clap parses it, and [`apply_deployment`] applies them through the registry.
//! So a flag is defined once, for the CLI, pasted commands and manifests alike.

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use servesim_core::scenario::{CustomModel, GpuRef, ModelRef, Scenario};
use servesim_core::vllm::args::Status;
use servesim_core::vllm::command::{apply_flags, parse_command};
use servesim_core::vllm::manifest::parse_manifest;
use std::path::Path;

/// Model, GPU, a pasted `vllm serve` command, and the ServeSim-only switches; the vLLM
/// arguments themselves are in `vllm_args` (see the module doc).
#[derive(Args, Clone, Debug)]
pub struct DeploymentArgs {
    /// Hugging Face id (a catalog id, or a checkpoint sharing a catalog architecture; see
    /// `servesim models`) or a path to a config.json.
    #[arg(long)]
    pub model: String,
    /// GPU id, alias or the name `nvidia-smi` prints (see `servesim gpus`), case-insensitive.
    #[arg(long)]
    pub gpu: String,
    /// A whole `vllm serve ...` command line (also `python -m vllm.entrypoints.openai.api_server
    /// ...`, `docker run ... vllm/vllm-openai ...`, with environment variables in front), or
    /// `@FILE` to read it from a file. Applied first; flags given beside it override it.
    #[arg(long, value_name = "COMMAND")]
    pub vllm_command: Option<String>,
    /// A deployment manifest (Kubernetes Deployment / StatefulSet / LeaderWorkerSet, KServe
    /// InferenceService, Dynamo DynamoGraphDeployment, llm-d modelservice or vLLM
    /// production-stack Helm values; several `---` documents), or `-` for stdin: its vLLM
    /// containers' arguments, replicas, GPUs and prefill/decode workers fill the deployment
    /// (docs/inputs.md "Manifests"). Applied first; explicit flags given beside it win.
    #[arg(long, value_name = "FILE")]
    pub from_manifest: Option<String>,
    /// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default since vLLM 0.21).
    #[arg(long)]
    pub estimate_cudagraphs: bool,
    /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
    #[arg(long)]
    pub allow_long_max_model_len: bool,
    /// The vLLM arguments (and ServeSim deployment flags) of the command line, by any spelling
    /// of the registry, in order (filled by `vllm_flags::split`, not by clap).
    #[arg(skip)]
    pub vllm_args: Vec<String>,
}

/// True when flag `id` was given on the command line (not a default).
pub fn given(m: &ArgMatches, id: &str) -> bool {
    matches!(m.value_source(id), Some(ValueSource::CommandLine))
}

/// A `--model` value: a config.json path becomes a custom model named after its directory;
/// anything else is a (catalog or Hugging Face) id.
pub fn model_ref(spec: &str) -> Result<ModelRef> {
    let p = Path::new(spec);
    if p.is_file() {
        let json = crate::input::read_text(p)?;
        let name = p
            .parent()
            .and_then(|d| d.file_name())
            .map(|s| s.to_string_lossy().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| spec.to_string());
        return Ok(ModelRef::Custom(CustomModel {
            name,
            config_json: json,
        }));
    }
    Ok(ModelRef::Catalog(spec.to_string()))
}

/// Applies the deployment flags onto `s`, in this order: `--from-manifest`, `--vllm-command` (their vLLM fields
/// replace the scenario's), `--model` / `--gpu`, the switches, then every vLLM argument and
/// ServeSim deployment flag in command-line order (the last of repeated ones wins, as in vLLM).
/// What the registry ignores or does not model is listed on stderr; a refusal is an error.
/// Returns whether a GPU was stated (by `--gpu` or the command's `# servesim: --gpu` line).
pub fn apply_deployment(s: &mut Scenario, d: &DeploymentArgs, m: &ArgMatches) -> Result<bool> {
    let mut gpu_stated = false;
    if let Some(path) = &d.from_manifest {
        let text = if path == "-" {
            crate::input::read_stdin()?
        } else {
            crate::input::read_text(Path::new(path))?
        };
        let p =
            parse_manifest(&text, s).map_err(|e| anyhow::anyhow!("--from-manifest {path}: {e}"))?;
        gpu_stated |= take(s, p, "--from-manifest: ")?;
    }
    if let Some(cmd) = &d.vllm_command {
        let text = match cmd.strip_prefix('@') {
            Some(path) => crate::input::read_text(Path::new(path))?,
            None => cmd.clone(),
        };
        let p = parse_command(&text, s).map_err(|e| anyhow::anyhow!("--vllm-command: {e}"))?;
        gpu_stated |= take(s, p, "--vllm-command: ")?;
    }
    if given(m, "model") {
        s.model = model_ref(&d.model)?;
    }
    if given(m, "gpu") {
        s.gpu = GpuRef::Catalog(d.gpu.clone());
        gpu_stated = true;
    }
    if d.estimate_cudagraphs {
        s.engine.estimate_cudagraphs_in_profile = Some(true);
    }
    if d.allow_long_max_model_len {
        s.engine.allow_long_max_model_len = Some(true);
    }
    if !d.vllm_args.is_empty() {
        let p = apply_flags(s, &d.vllm_args).map_err(anyhow::Error::msg)?;
        gpu_stated |= take(s, p, "")?;
    }
    Ok(gpu_stated)
}

/// Takes a parsed command's (or the flags') scenario into `s` after listing what was ignored;
/// a refusal is an error. Returns whether it stated the GPU.
fn take(s: &mut Scenario, p: servesim_core::vllm::command::Pasted, prefix: &str) -> Result<bool> {
    report(&p.args, &p.notes, prefix);
    let refused = p.refusals();
    if !refused.is_empty() {
        bail!("{prefix}{}", refused.join("; "));
    }
    // `--gpu`, a `# servesim: --gpu` line or a manifest's node selector.
    let gpu = p
        .args
        .iter()
        .any(|a| a.status == Status::Understood && a.detail.starts_with("gpu = "));
    *s = p
        .scenario
        .with_context(|| format!("{prefix}the arguments were not understood"))?;
    Ok(gpu)
}

/// Lists on stderr the arguments that were ignored, not modelled or unknown, and the notes
/// (stand-in configs, settled values): never silent, never an error.
fn report(args: &[servesim_core::vllm::args::ArgReport], notes: &[String], prefix: &str) {
    for a in args {
        if matches!(
            a.status,
            Status::Ignored | Status::NotModelled | Status::Unknown
        ) {
            let v = a
                .value
                .as_deref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default();
            eprintln!(
                "note: {prefix}{}{v}: {}: {}",
                a.arg,
                a.status.label(),
                a.detail
            );
        }
    }
    for n in notes {
        eprintln!("note: {prefix}{n}");
    }
}
