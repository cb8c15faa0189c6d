//! A pasted command line -> scenario, and a scenario -> the `vllm serve` / `vllm bench serve`
//! commands that would measure it. Understands `vllm serve MODEL ...`,
//! `python -m vllm.entrypoints.openai.api_server ...`, `docker run ... vllm/vllm-openai ...`,
//! environment variables in front (`VLLM_USE_DEEP_GEMM=1 vllm serve ...`, `export X=1`), shell
//! quoting, `\` line continuations and `# servesim: --gpu H100` comment lines (the ServeSim-only
//! fields). Every argument is reported through the registry ([`super::args`]). docs/inputs.md.

use super::args::{self, ArgReport, Arity, Origin, Pending, Status};
use crate::dtype::WeightPrecision;
use crate::scenario::{Endpoint, GpuRef, ModelRef, Scenario};
use crate::workload::{RawArrival, RawContent, RawLengthDist};
use serde::Serialize;

/// Longest command text accepted (a pasted command is a few KB; this bounds the work).
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;

/// The result of reading a command or manifest: the scenario (absent when something was
/// refused) and what happened to every argument.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pasted {
    pub scenario: Option<Scenario>,
    pub args: Vec<ArgReport>,
    /// Settled values and context (which worker was read, what the GPU count implies, ...).
    pub notes: Vec<String>,
}

impl Pasted {
    /// The refusals, one line each (empty when the scenario was built).
    pub fn refusals(&self) -> Vec<String> {
        self.args
            .iter()
            .filter(|a| a.status == Status::Refused)
            .map(|a| match &a.value {
                // A detail that already names the argument (`--max-num-seqs abc: not an
                // integer`) is not prefixed again.
                _ if a.detail.starts_with(a.arg.as_str()) => a.detail.clone(),
                Some(v) => format!("{} {}: {}", a.arg, v, a.detail),
                None => format!("{}: {}", a.arg, a.detail),
            })
            .collect()
    }
}

/// One shell word, or a line-level marker.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    /// `;`, `&&`, `||`, `|`, `&` or a newline: ends a simple command.
    End,
    /// `# servesim: ...` comment content.
    ServeSim(String),
}

/// Splits shell text into words: single and double quotes, backslash escapes, `\`-newline
/// continuations, `#` comments (a `# servesim:` comment is kept), command separators.
fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let push = |cur: &mut String, in_word: &mut bool, out: &mut Vec<Tok>| {
        if *in_word {
            out.push(Tok::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                if i + 1 < chars.len() && chars[i + 1] == '\n' {
                    i += 2;
                    continue;
                }
                if i + 2 < chars.len() && chars[i + 1] == '\r' && chars[i + 2] == '\n' {
                    i += 3;
                    continue;
                }
                if i + 1 < chars.len() {
                    cur.push(chars[i + 1]);
                    in_word = true;
                    i += 2;
                } else {
                    i += 1;
                }
            }
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    cur.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err("a single quote (') is not closed".into());
                }
                i += 1;
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\'
                        && i + 1 < chars.len()
                        && matches!(chars[i + 1], '"' | '\\' | '$' | '`' | '\n')
                    {
                        if chars[i + 1] != '\n' {
                            cur.push(chars[i + 1]);
                        }
                        i += 2;
                        continue;
                    }
                    cur.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err("a double quote (\") is not closed".into());
                }
                i += 1;
            }
            '#' if !in_word => {
                let start = i + 1;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                let comment: String = chars[start..i].iter().collect();
                if let Some(rest) = comment.trim().strip_prefix("servesim:") {
                    out.push(Tok::End);
                    out.push(Tok::ServeSim(rest.trim().to_string()));
                    out.push(Tok::End);
                }
            }
            '>' | '<' => {
                // A redirection (`2>&1`, `> log`, `>> log`, `< in`): not an argument. A file
                // descriptor number glued in front (`2>`) goes with it.
                if in_word && cur.chars().all(|c| c.is_ascii_digit()) {
                    cur.clear();
                    in_word = false;
                }
                push(&mut cur, &mut in_word, &mut out);
                while i < chars.len() && matches!(chars[i], '>' | '<') {
                    i += 1;
                }
                if i < chars.len() && chars[i] == '&' {
                    i += 1;
                    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '-') {
                        i += 1;
                    }
                } else {
                    while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                        i += 1;
                    }
                    while i < chars.len()
                        && !matches!(chars[i], ' ' | '\t' | '\n' | '\r' | ';' | '&' | '|')
                    {
                        i += 1;
                    }
                }
            }
            ' ' | '\t' | '\r' => {
                push(&mut cur, &mut in_word, &mut out);
                i += 1;
            }
            '\n' | ';' => {
                push(&mut cur, &mut in_word, &mut out);
                out.push(Tok::End);
                i += 1;
            }
            '&' | '|' => {
                push(&mut cur, &mut in_word, &mut out);
                out.push(Tok::End);
                while i < chars.len() && matches!(chars[i], '&' | '|') {
                    i += 1;
                }
            }
            _ => {
                cur.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    push(&mut cur, &mut in_word, &mut out);
    Ok(out)
}

/// Shell words of one line (quotes and escapes as in a command line).
pub(crate) fn shell_words(line: &str) -> Result<Vec<String>, String> {
    Ok(lex(line)?
        .into_iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w),
            _ => None,
        })
        .collect())
}

fn is_env_assignment(w: &str) -> Option<(&str, &str)> {
    let (k, v) = w.split_once('=')?;
    let ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((k, v))
}

/// The vLLM part of a simple command: env assignments before it, and its arguments.
struct Found {
    env: Vec<(String, String)>,
    args: Vec<String>,
    notes: Vec<String>,
    /// `docker run` options that were read (reported as ignored).
    docker: Vec<ArgReport>,
}

/// Docker options that take a value (`-p 8000:8000`).
const DOCKER_VALUE_OPTS: [&str; 22] = [
    "-p",
    "--publish",
    "-v",
    "--volume",
    "--name",
    "--network",
    "--net",
    "--shm-size",
    "--ipc",
    "--runtime",
    "-w",
    "--workdir",
    "--ulimit",
    "--device",
    "--cap-add",
    "--security-opt",
    "--mount",
    "--env-file",
    "-u",
    "--user",
    "--entrypoint",
    "--platform",
];

fn find_vllm(words: &[String]) -> Option<Found> {
    let mut env = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if let Some((k, v)) = is_env_assignment(&words[i]) {
            env.push((k.to_string(), v.to_string()));
            i += 1;
        } else if words[i] == "env" || words[i] == "sudo" || words[i] == "exec" {
            i += 1;
        } else {
            break;
        }
    }
    let rest = &words[i..];
    let first = rest.first()?.as_str();
    let base = first.rsplit('/').next().unwrap_or(first);
    if base == "vllm" && rest.get(1).map(String::as_str) == Some("serve") {
        return Some(Found {
            env,
            args: rest[2..].to_vec(),
            notes: Vec::new(),
            docker: Vec::new(),
        });
    }
    if base.starts_with("python") {
        if let Some(m) = rest.iter().position(|w| w == "-m") {
            let module = rest.get(m + 1).map(String::as_str).unwrap_or("");
            if module.starts_with("vllm.entrypoints") || module == "dynamo.vllm" {
                let mut notes = Vec::new();
                if module == "dynamo.vllm" {
                    notes.push("Dynamo's vLLM worker (python -m dynamo.vllm): its vLLM engine arguments are read".into());
                }
                return Some(Found {
                    env,
                    args: rest[m + 2..].to_vec(),
                    notes,
                    docker: Vec::new(),
                });
            }
        }
    }
    if base == "docker" || base == "podman" {
        let run = rest.iter().position(|w| w == "run")?;
        let mut j = run + 1;
        let mut docker = Vec::new();
        while j < rest.len() {
            let w = &rest[j];
            if !w.starts_with('-') {
                break;
            }
            let (name, inline) = match w.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (w.clone(), None),
            };
            let takes = name == "-e"
                || name == "--env"
                || name == "--gpus"
                || DOCKER_VALUE_OPTS.contains(&name.as_str());
            let value = if inline.is_some() {
                inline
            } else if takes {
                j += 1;
                rest.get(j).cloned()
            } else {
                None
            };
            if name == "-e" || name == "--env" {
                if let Some((k, v)) = value.as_deref().and_then(is_env_assignment) {
                    env.push((k.to_string(), v.to_string()));
                }
            } else {
                docker.push(ArgReport {
                    arg: format!("docker {name}"),
                    value,
                    status: Status::Ignored,
                    detail: if name == "--gpus" {
                        "which GPUs the container sees; their number comes from TP x DP".into()
                    } else {
                        "container option: no effect on memory or speed".into()
                    },
                });
            }
            j += 1;
        }
        let image = rest.get(j)?;
        if !image.contains("vllm") {
            return None;
        }
        let mut args = rest[j + 1..].to_vec();
        if args.first().map(String::as_str) == Some("vllm")
            && args.get(1).map(String::as_str) == Some("serve")
        {
            args.drain(..2);
        }
        return Some(Found {
            env,
            args,
            notes: vec![format!(
                "docker image {image}: its arguments are `vllm serve` arguments"
            )],
            docker,
        });
    }
    None
}

/// The vLLM invocation found in shell text: its environment (`export` lines and assignments
/// in front), its arguments, the `# servesim:` words, notes and the `docker run` options read.
pub(crate) struct Invocation {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
    pub servesim: Vec<String>,
    pub notes: Vec<String>,
    pub reports: Vec<ArgReport>,
}

/// Finds the command that runs vLLM in shell text (several commands: the first that runs vLLM;
/// `export NAME=VALUE` lines before it count as its environment). `Ok(None)`: none runs vLLM.
pub(crate) fn find_invocation(text: &str) -> Result<Option<Invocation>, String> {
    let toks = lex(text)?;
    let mut exported: Vec<(String, String)> = Vec::new();
    let mut servesim_lines: Vec<String> = Vec::new();
    let mut found: Option<Found> = None;
    let mut words: Vec<String> = Vec::new();
    let flush = |words: &mut Vec<String>,
                 found: &mut Option<Found>,
                 exported: &mut Vec<(String, String)>| {
        if words.is_empty() {
            return;
        }
        if words[0] == "export" {
            if found.is_none() {
                for w in &words[1..] {
                    if let Some((k, v)) = is_env_assignment(w) {
                        exported.push((k.to_string(), v.to_string()));
                    }
                }
            }
        } else if found.is_none() {
            *found = find_vllm(words);
        }
        words.clear();
    };
    for t in toks {
        match t {
            Tok::Word(w) => words.push(w),
            Tok::End => flush(&mut words, &mut found, &mut exported),
            Tok::ServeSim(line) => servesim_lines.push(line),
        }
    }
    flush(&mut words, &mut found, &mut exported);
    let Some(mut f) = found else {
        return Ok(None);
    };
    let mut env = exported;
    env.append(&mut f.env);
    let mut servesim = Vec::new();
    for line in &servesim_lines {
        let t = lex(line)?;
        servesim.extend(t.into_iter().filter_map(|t| match t {
            Tok::Word(w) => Some(w),
            _ => None,
        }));
    }
    Ok(Some(Invocation {
        env,
        args: f.args,
        servesim,
        notes: f.notes,
        reports: f.docker,
    }))
}

/// The vLLM invocation of an argument list already split into words (a Kubernetes
/// `command` + `args` list): `vllm serve ...`, `python -m vllm.entrypoints... / dynamo.vllm`.
pub(crate) fn find_in_words(words: &[String]) -> Option<Invocation> {
    find_vllm(words).map(|f| Invocation {
        env: f.env,
        args: f.args,
        servesim: Vec::new(),
        notes: f.notes,
        reports: f.docker,
    })
}

/// Reads a pasted command line onto `base`: the vLLM-settable fields are reset to vLLM's
/// defaults (a command that does not mention a setting means vLLM's default), GPU, workload and
/// sweep are kept, then every argument is applied. Several commands in one text: the one that
/// runs vLLM is read, `export NAME=VALUE` lines before it count as its environment.
pub fn parse_command(text: &str, base: &Scenario) -> Result<Pasted, String> {
    if text.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command is {} bytes; at most {MAX_COMMAND_BYTES} are read",
            text.len()
        ));
    }
    let Some(inv) = find_invocation(text)? else {
        return Err("no vLLM command found: expected `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server ...` or `docker run ... vllm/vllm-openai ...`".into());
    };
    let mut out = apply_all(base, &inv.env, &inv.args, &inv.servesim, true, true)?;
    let mut args = inv.reports;
    args.append(&mut out.args);
    out.args = args;
    let mut notes = inv.notes;
    notes.append(&mut out.notes);
    out.notes = notes;
    Ok(out)
}

/// Command-line flags onto a scenario, by any spelling of the registry (vLLM's and ServeSim's:
/// `-tp 4`, `--tensor-parallel-size=4`, `--max_num_seqs 64`, `--enable-expert-parallel`), each
/// reported; nothing is reset and the scenario's model stands (the CLI's `capacity`, `sweep`
/// and `compare` apply the flags clap does not define this way).
pub fn apply_flags(base: &Scenario, flags: &[String]) -> Result<Pasted, String> {
    apply_all(base, &[], &[], flags, false, false)
}

/// Applies environment variables, `vllm serve` arguments and ServeSim flags onto `base`
/// (vLLM-settable fields reset first when `reset`), reporting each; with `require_model` a
/// command without a model is refused. Shared by commands, manifests and CLI flags.
pub(crate) fn apply_all(
    base: &Scenario,
    env: &[(String, String)],
    vllm_args: &[String],
    servesim_args: &[String],
    reset: bool,
    require_model: bool,
) -> Result<Pasted, String> {
    let mut s = base.clone();
    if reset {
        args::reset_vllm_fields(&mut s);
    }
    let mut p = Pending::default();
    let mut reports = Vec::new();
    let mut model_given = false;
    for (k, v) in env {
        let (status, detail) = match args::lookup(k) {
            Some(spec) => match args::apply(&mut s, &mut p, spec, Some(v)) {
                Ok(r) => r,
                Err(e) => (Status::Refused, e),
            },
            None => args::unknown_env(k),
        };
        reports.push(ArgReport {
            arg: k.clone(),
            value: Some(v.clone()),
            status,
            detail,
        });
    }
    for (list, is_servesim) in [(vllm_args, false), (servesim_args, true)] {
        let mut i = 0;
        while i < list.len() {
            let w = &list[i];
            i += 1;
            if !w.starts_with('-') || w == "-" {
                if !is_servesim && !model_given {
                    model_given = true;
                    s.model = ModelRef::Catalog(w.clone());
                    reports.push(ArgReport {
                        arg: "MODEL".into(),
                        value: Some(w.clone()),
                        status: Status::Understood,
                        detail: format!("model = {w}"),
                    });
                } else {
                    reports.push(ArgReport {
                        arg: w.clone(),
                        value: None,
                        status: Status::Unknown,
                        detail: "a stray word (not an argument); ignored".into(),
                    });
                }
                continue;
            }
            let (name, mut value) = match w.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (w.clone(), None),
            };
            // Dotted keys of a JSON argument, passed on as `KEY=VALUE`: the compilation config's
            // (-O.cudagraph_mode=FULL, -cc.x=y, --compilation-config.x y) and the per-modality
            // limits' (--limit-mm-per-prompt.video 0).
            let dotted = [
                ("-O.", "--compilation-config"),
                ("-cc.", "--compilation-config"),
                ("--compilation-config.", "--compilation-config"),
                ("--limit-mm-per-prompt.", "--limit-mm-per-prompt"),
            ]
            .iter()
            .find_map(|(p, flag)| name.strip_prefix(p).map(|k| (k.to_string(), *flag)));
            // -O3: the optimisation level glued to the flag
            let glued_level = name
                .strip_prefix("-O")
                .filter(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()))
                .map(str::to_string);
            let (spec, value) = if let Some((key, flag)) = dotted {
                if value.is_none() {
                    value = list.get(i).cloned();
                    i += 1;
                }
                (
                    args::lookup(flag),
                    Some(format!("{key}={}", value.unwrap_or_default())),
                )
            } else if let Some(level) = glued_level {
                (args::lookup("--compilation-config"), Some(level))
            } else {
                let spec =
                    args::lookup(&name).filter(|sp| sp.origin == Origin::Vllm || is_servesim);
                if let Some(sp) = spec {
                    if sp.arity == Arity::Value && value.is_none() {
                        value = list.get(i).cloned();
                        i += 1;
                    }
                } else if value.is_none() && list.get(i).is_some_and(|n| !n.starts_with('-')) {
                    value = list.get(i).cloned();
                    i += 1;
                }
                (spec, value)
            };
            let (status, detail) = match spec {
                Some(sp) => {
                    if sp.name == "model" {
                        model_given = true;
                    }
                    match args::apply(&mut s, &mut p, sp, value.as_deref()) {
                        Ok(r) => r,
                        Err(e) => (Status::Refused, e),
                    }
                }
                None if !is_servesim && args::lookup(&name).is_some() => (
                    Status::Refused,
                    format!("{name} is a ServeSim flag, not a `vllm serve` argument; write it as a `# servesim: {name} ...` line"),
                ),
                None => (
                    Status::Unknown,
                    "not an argument ServeSim knows; ignored — check it changes neither memory nor speed".into(),
                ),
            };
            reports.push(ArgReport {
                arg: name,
                value,
                status,
                detail,
            });
        }
    }
    let mut notes = args::finish(&mut s, &p);
    // V0 settings that V1 ignores are honoured by a V0 scenario's engine (vllm_version < 0.8):
    // there they are not modelled rather than ignored.
    if matches!(s.engine_era(), Ok(crate::perf::EngineEra::Vllm07)) {
        for r in reports.iter_mut().filter(|r| r.status == Status::Ignored) {
            if let Some(why) = args::v0_not_modelled(&r.arg) {
                r.status = Status::NotModelled;
                r.detail = why;
            }
        }
    } else if s.engine.num_scheduler_steps.take().is_some() {
        // Multi-step scheduling is V0's: a V1 engine has none (vLLM >= 0.10 no longer accepts
        // the flag), so a V1 scenario does not take it.
        for r in reports
            .iter_mut()
            .filter(|r| r.arg == "--num-scheduler-steps" && r.status == Status::Understood)
        {
            r.status = Status::Ignored;
            r.detail = "multi-step scheduling is vLLM V0's (vllm_version < 0.8): the V1 engine schedules every step".into();
        }
    }
    if require_model && !model_given {
        reports.push(ArgReport {
            arg: "MODEL".into(),
            value: None,
            status: Status::Refused,
            detail: "no model given: add the Hugging Face id after `vllm serve` (or --model ID)"
                .into(),
        });
    }
    if let ModelRef::Catalog(id) = &s.model {
        match crate::model::ids::resolve(id) {
            Ok((_, r)) if !r.exact => notes.push(r.summary()),
            Ok(_) => {}
            Err(e) => reports.push(ArgReport {
                arg: "MODEL".into(),
                value: Some(id.clone()),
                status: Status::Refused,
                detail: e.to_string(),
            }),
        }
    }
    let refused = reports.iter().any(|r| r.status == Status::Refused);
    Ok(Pasted {
        scenario: (!refused).then_some(s),
        args: reports,
        notes,
    })
}

/// Shell-quotes a word when it needs it (single quotes).
fn quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn model_id(s: &Scenario) -> String {
    match &s.model {
        ModelRef::Catalog(id) => id.clone(),
        ModelRef::Custom(c) => c.name.clone(),
    }
}

fn checkpoint_is_fp8(s: &Scenario) -> bool {
    let m = match &s.model {
        ModelRef::Catalog(id) => crate::model::catalog::load(id),
        ModelRef::Custom(c) => crate::model::ModelConfig::from_hf_json(&c.name, &c.config_json),
    };
    m.map(|m| m.checkpoint.is_fp8_serialized()).unwrap_or(false)
}

/// The `vllm serve` command of a scenario's deployment (one replica), with the ServeSim-only
/// fields (GPU, GPU count, what-if precision, vLLM version) on a `# servesim:` line first.
/// [`parse_command`] reads it back to the same scenario (tested).
pub fn to_vllm_command(s: &Scenario) -> String {
    let mut ss: Vec<String> = Vec::new();
    match &s.gpu {
        GpuRef::Catalog(g) => ss.push(format!("--gpu {}", quote(g))),
        GpuRef::Custom(g) => ss.push(format!(
            "(custom GPU {}: not expressible as a flag)",
            g.name
        )),
    }
    if let Some(n) = s.num_gpus {
        ss.push(format!("--num-gpus {n}"));
    }
    // `--enable-expert-parallel` when the scenario says so (or, unstated, when ep = tp x dp);
    // an ep the flag would not give (1 beside the flag, which resolves the same) rides as --ep.
    let g = s.tp.saturating_mul(s.dp);
    let ep_from_flag = s.enable_expert_parallel == Some(true)
        || (s.enable_expert_parallel.is_none() && s.ep > 1 && s.ep == g);
    if (ep_from_flag && s.ep != g) || (!ep_from_flag && s.ep != 1) {
        ss.push(format!("--ep {}", s.ep));
    }
    let fp8_flag = s.weight_precision == WeightPrecision::Fp8 && !checkpoint_is_fp8(s);
    match s.weight_precision {
        WeightPrecision::Checkpoint => {}
        WeightPrecision::Fp8 if fp8_flag => {}
        WeightPrecision::Fp8 => ss.push("--weight-precision fp8".into()),
        other => {
            let name = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            ss.push(format!("--weight-precision {name}"));
        }
    }
    if let Some(v) = &s.vllm_version {
        ss.push(format!("--vllm-version {}", quote(v)));
    }
    let e = &s.engine;
    let mut env: Vec<String> = Vec::new();
    if e.allow_long_max_model_len == Some(true) {
        env.push("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1".into());
    }
    if e.estimate_cudagraphs_in_profile == Some(true) {
        env.push("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1".into());
    }
    let mut a: Vec<String> = Vec::new();
    if s.tp != 1 {
        a.push(format!("--tensor-parallel-size {}", s.tp));
    }
    if s.dp != 1 {
        a.push(format!("--data-parallel-size {}", s.dp));
    }
    if ep_from_flag {
        a.push("--enable-expert-parallel".into());
    }
    if fp8_flag {
        a.push("--quantization fp8".into());
    }
    if s.kv_cache_dtype != crate::dtype::KvCacheDtype::Auto {
        a.push(format!("--kv-cache-dtype {}", s.kv_cache_dtype.name()));
    }
    let num = |a: &mut Vec<String>, flag: &str, v: Option<i64>| {
        if let Some(v) = v {
            a.push(format!("--{flag} {v}"));
        }
    };
    match e.max_model_len {
        Some(-1) => a.push("--max-model-len auto".into()),
        v => num(&mut a, "max-model-len", v),
    }
    num(&mut a, "max-num-seqs", e.max_num_seqs);
    num(&mut a, "max-num-batched-tokens", e.max_num_batched_tokens);
    if let Some(u) = e.gpu_memory_utilization {
        a.push(format!(
            "--gpu-memory-utilization {}",
            crate::bounds::fmt_num(u)
        ));
    }
    num(&mut a, "block-size", e.block_size);
    match e.enable_prefix_caching {
        Some(true) => a.push("--enable-prefix-caching".into()),
        Some(false) => a.push("--no-enable-prefix-caching".into()),
        None => {}
    }
    if e.enable_chunked_prefill == Some(false) {
        a.push("--no-enable-chunked-prefill".into());
    }
    if e.enforce_eager == Some(true) {
        a.push("--enforce-eager".into());
    }
    if e.language_model_only == Some(true) {
        a.push("--language-model-only".into());
    }
    if let Some(data) = e.mm_encoder_data_parallel {
        let mode = if data { "data" } else { "weights" };
        a.push(format!("--mm-encoder-tp-mode {mode}"));
    }
    if let Some(m) = e.performance_mode {
        a.push(format!("--performance-mode {}", m.name()));
    }
    let mut cc = serde_json::Map::new();
    if let Some(m) = e.cudagraph_mode {
        cc.insert("cudagraph_mode".into(), m.name().into());
    }
    if let Some(sizes) = &e.cudagraph_capture_sizes {
        cc.insert("cudagraph_capture_sizes".into(), serde_json::json!(sizes));
    }
    if !cc.is_empty() {
        a.push(format!(
            "--compilation-config {}",
            quote(&serde_json::Value::Object(cc).to_string())
        ));
    }
    num(&mut a, "kv-cache-memory-bytes", e.kv_cache_memory_bytes);
    num(
        &mut a,
        "long-prefill-token-threshold",
        e.long_prefill_token_threshold,
    );
    if let Some(b) = e.all2all_backend {
        let name = b.name();
        a.push(format!("--all2all-backend {name}"));
    }
    if let Some(c) = &e.speculative_config {
        a.push(format!(
            "--speculative-config {}",
            quote(&serde_json::to_string(c).unwrap_or_default())
        ));
    }
    if let Some(c) = &e.kv_transfer_config {
        a.push(format!(
            "--kv-transfer-config {}",
            quote(&serde_json::to_string(c).unwrap_or_default())
        ));
    }
    if let Some(g) = e.host_link_gb_s {
        ss.push(format!("--host-link-gb-s {g}"));
    }
    if let Some(g) = e.host_memory_gb_per_node {
        ss.push(format!("--host-memory-gb-per-node {g}"));
    }
    if let Some(acc) = &e.speculative_acceptance {
        ss.push(format!(
            "--speculative-acceptance {}",
            quote(&serde_json::to_string(acc).unwrap_or_default())
        ));
    }
    if let Some(c) = e.usage_context {
        if c != crate::deploy::UsageContext::OpenaiApiServer {
            ss.push("(usage_context llm_class: the offline LLM class, not `vllm serve`)".into());
        }
    }
    let mut out = String::new();
    out.push_str(&format!("# servesim: {}\n", ss.join(" ")));
    let mut head = env;
    head.push("vllm serve".into());
    head.push(quote(&model_id(s)));
    out.push_str(&head.join(" "));
    for x in a {
        out.push_str(" \\\n  ");
        out.push_str(&x);
    }
    out.push('\n');
    out
}

/// The `vllm bench serve` command(s) that measure the scenario's workload at each sweep level
/// (`--dataset-name random` for synthetic requests). Shapes `vllm bench serve` cannot generate
/// are said so in a comment line.
pub fn to_bench_command(s: &Scenario) -> String {
    let mut notes: Vec<String> = Vec::new();
    let mut a: Vec<String> = vec![
        format!("--model {}", quote(&model_id(s))),
        match s.endpoint.unwrap_or_default() {
            Endpoint::Completions => "--backend vllm --endpoint /v1/completions".into(),
            Endpoint::Chat => "--backend openai-chat --endpoint /v1/chat/completions".into(),
        },
    ];
    let len = |d: &RawLengthDist| -> (f64, Option<f64>) {
        match d {
            RawLengthDist::Constant { tokens } => (*tokens, Some(0.0)),
            RawLengthDist::UniformRatio {
                nominal,
                min_ratio,
                max_ratio,
            } => {
                // vllm bench: uniform in [len * (1 - r), len * (1 + r)]
                let r = ((max_ratio - min_ratio) / 2.0).max(0.0);
                (nominal * (min_ratio + max_ratio) / 2.0, Some(r))
            }
            other => (other_mean(other), None),
        }
    };
    match &s.workload.requests {
        RawContent::Synthetic {
            input,
            output,
            shared_prefix,
        } => {
            let (il, ir) = len(input);
            let (ol, or) = len(output);
            a.push("--dataset-name random".into());
            a.push(format!("--random-input-len {}", il.round()));
            a.push(format!("--random-output-len {}", ol.round()));
            match (ir, or) {
                (Some(r1), Some(r2)) if (r1 - r2).abs() < 1e-9 => {
                    if r1 > 0.0 {
                        a.push(format!("--random-range-ratio {r1}"));
                    }
                }
                _ => notes.push("the length distribution is not uniform around the mean: `vllm bench serve --dataset-name random` draws uniform lengths, so this command uses the means".into()),
            }
            if let Some(p) = shared_prefix {
                a.push(format!("--random-prefix-len {}", p.tokens.round()));
                if p.groups > 1.0 {
                    notes.push(format!("{} distinct shared prefixes: `vllm bench serve --dataset-name random` has one (use --dataset-name prefix_repetition with --prefix-repetition-num-prefixes {})", p.groups, p.groups));
                }
                if let Some(n) = p.prompts_per_group {
                    notes.push(format!("a pool of {} prompts sent over and over: `vllm bench serve` does not cycle a pool (inference-perf's shared_prefix data does: num_groups {}, num_prompts_per_group {n})", p.groups * n, p.groups));
                }
            }
        }
        RawContent::Mooncake { .. } => {
            a.push("--dataset-name custom --dataset-path TRACE.jsonl".into());
            notes.push("a Mooncake trace: replay it with a trace-replay client (vllm bench serve has no Mooncake loader)".into());
        }
        RawContent::Agentic(_) | RawContent::Preset { .. } => {
            notes.push("multi-turn agentic sessions: `vllm bench serve` sends independent requests; use a multi-turn benchmark client".into());
        }
    }
    a.push("--ignore-eos".into());
    let (levels, kind) = match (
        &s.sweep.concurrency,
        &s.sweep.request_rates,
        &s.workload.arrival,
    ) {
        (_, Some(r), _) => (r.clone(), "rate"),
        (Some(c), _, _) => (c.clone(), "concurrency"),
        (None, None, RawArrival::ClosedLoop { concurrency, .. }) => {
            (vec![*concurrency], "concurrency")
        }
        _ => (vec![1.0], "concurrency"),
    };
    let mut out = String::new();
    for n in &notes {
        out.push_str(&format!("# {n}\n"));
    }
    if let RawArrival::ClosedLoop {
        think_time_s: Some(t),
        ..
    } = &s.workload.arrival
    {
        if *t > 0.0 {
            out.push_str(&format!(
                "# clients think {t} s between requests: vllm bench serve has no think time\n"
            ));
        }
    }
    let levels_text = levels
        .iter()
        .map(|x| format!("{x}"))
        .collect::<Vec<_>>()
        .join(" ");
    let per_level = match kind {
        "rate" => "--request-rate $L --num-prompts 1000".to_string(),
        _ => "--max-concurrency $L --num-prompts $((L * 10)) --request-rate inf".to_string(),
    };
    out.push_str(&format!(
        "for L in {levels_text}; do\n  vllm bench serve {} \\\n    {per_level} \\\n    --save-result --result-filename \"bench-{kind}-$L.json\"\ndone\n",
        a.join(" \\\n    ")
    ));
    out
}

fn other_mean(d: &RawLengthDist) -> f64 {
    match d {
        RawLengthDist::Constant { tokens } => *tokens,
        RawLengthDist::UniformRatio {
            nominal,
            min_ratio,
            max_ratio,
        } => nominal * (min_ratio + max_ratio) / 2.0,
        RawLengthDist::Normal { mean, .. }
        | RawLengthDist::Lognormal { mean, .. }
        | RawLengthDist::Exponential { mean, .. } => *mean,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexer_handles_quotes_continuations_and_comments() {
        let t = lex(
            "A=1 vllm serve m \\\n  --x 'a b' \"c \\\"d\\\"\" # tail\n# servesim: --gpu h100\nnext",
        )
        .unwrap();
        let words: Vec<_> = t
            .iter()
            .filter_map(|t| match t {
                Tok::Word(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            words,
            ["A=1", "vllm", "serve", "m", "--x", "a b", "c \"d\"", "next"]
        );
        assert!(t.contains(&Tok::ServeSim("--gpu h100".into())));
        assert!(lex("vllm serve 'x").is_err());
    }

    #[test]
    fn the_three_launch_forms_are_found() {
        let base = Scenario::default_scenario();
        for cmd in [
            "vllm serve Qwen/Qwen3-8B -tp 2",
            "python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --tensor-parallel-size=2",
            "docker run --gpus all -p 8000:8000 --ipc=host -e VLLM_USE_DEEP_GEMM=1 vllm/vllm-openai:latest --model Qwen/Qwen3-8B -tp 2",
        ] {
            let p = parse_command(cmd, &base).unwrap();
            let refusals = p.refusals();
            let s = p.scenario.unwrap_or_else(|| panic!("{cmd}: {refusals:?}"));
            assert_eq!(s.tp, 2, "{cmd}");
            assert_eq!(s.model, ModelRef::Catalog("Qwen/Qwen3-8B".into()), "{cmd}");
        }
    }

    #[test]
    fn v0_settings_are_honoured_or_not_modelled_in_a_v0_scenario_and_ignored_in_v1() {
        // dstack's 8xH100 config sweep serve command with its multi-step knob (vLLM 0.6.3).
        let cmd = "vllm serve meta-llama/Llama-3.1-405B-FP8 --tensor-parallel-size 8 --num-scheduler-steps 15 --swap-space 16 --use-v2-block-manager";
        let status = |p: &Pasted, arg: &str| {
            p.args
                .iter()
                .find(|r| r.arg == arg)
                .map(|r| (r.status, r.detail.clone()))
                .unwrap()
        };
        let v1 = parse_command(cmd, &Scenario::default_scenario()).unwrap();
        for a in [
            "--num-scheduler-steps",
            "--swap-space",
            "--use-v2-block-manager",
        ] {
            assert_eq!(status(&v1, a).0, Status::Ignored, "{a}");
        }
        let v1s = v1.scenario.as_ref().unwrap();
        assert_eq!(v1s.engine.num_scheduler_steps, None);
        assert!(v1s.resolve().is_ok());
        let v0 = parse_command(
            &format!("# servesim: --vllm-version 0.6.3\n{cmd}"),
            &Scenario::default_scenario(),
        )
        .unwrap();
        // V0 honours multi-step scheduling, and so does a V0 scenario (docs/engine.md).
        let (st, why) = status(&v0, "--num-scheduler-steps");
        assert_eq!(st, Status::Understood);
        assert_eq!(why, "engine.num_scheduler_steps = 15");
        assert_eq!(status(&v0, "--swap-space").0, Status::NotModelled);
        // A block-manager switch changes nothing.
        assert_eq!(status(&v0, "--use-v2-block-manager").0, Status::Ignored);
        let one = parse_command(
            "# servesim: --vllm-version 0.6.3\nvllm serve Qwen/Qwen3-8B --num-scheduler-steps 1",
            &Scenario::default_scenario(),
        )
        .unwrap();
        assert_eq!(status(&one, "--num-scheduler-steps").0, Status::Understood);
        let v0s = v0.scenario.as_ref().unwrap();
        assert_eq!(v0s.engine.num_scheduler_steps, Some(15));
        assert_eq!(v0s.resolve().unwrap().engine.num_scheduler_steps, 15);
    }

    #[test]
    fn refusals_keep_the_table() {
        let p = parse_command(
            "vllm serve Qwen/Qwen3-8B --pipeline-parallel-size 2 --port 8000",
            &Scenario::default_scenario(),
        )
        .unwrap();
        assert!(p.scenario.is_none());
        assert_eq!(p.args.len(), 3);
        assert_eq!(p.args[1].status, Status::Refused);
        assert_eq!(p.args[2].status, Status::Ignored);
        assert!(parse_command("echo hello", &Scenario::default_scenario()).is_err());
    }
}
