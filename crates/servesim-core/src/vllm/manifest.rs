//! Deployment manifests -> scenario. Reads Kubernetes YAML (one or several `---` documents):
//! Deployments, StatefulSets, Pods, Jobs, LeaderWorkerSets, KServe InferenceServices, NVIDIA
//! Dynamo DynamoGraphDeployments, and the Helm values of llm-d's modelservice chart and of the
//! vLLM production-stack chart. It finds the containers that run vLLM, turns their
//! `command`/`args`/`env` into the `vllm serve` arguments they mean (Kubernetes `$(VAR)` and
//! shell `$VAR`, `${VAR:-x}`, `$((a * b))` expansion, `sh -c` scripts, list form), and applies
//! them through the one command reader (`command::apply_all`, so every flag is the registry's).
//! Around the engine it reads replicas, GPUs per pod, LeaderWorkerSet sizes and the GPU
//! product from node selectors and affinity; a prefill and a decode worker (llm-d roles, Dynamo
//! prefill/decode workers, LMCache producer/consumer) become `topology.prefill` /
//! `topology.decode`. Every field read is reported (understood / ignored / not modelled /
//! refused). YAML limits: [`super::yaml`]. docs/inputs.md "Manifests".

use super::args::{ArgReport, Status};
use super::command::{apply_all, find_in_words, find_invocation, Invocation, Pasted};
use super::yaml::{parse_documents, Node};
use crate::deploy::RawEngineSettings;
use crate::scenario::{GpuRef, Scenario};
use crate::topology::pools::PoolRole;
use crate::topology::{RawPool, RawTopology};

pub use super::yaml::{MAX_DEPTH, MAX_MANIFEST_BYTES, MAX_NODES};

/// True when pasted text is a YAML manifest rather than a command line: a line that starts a
/// document (`---`, `apiVersion:`, `kind:`) or a top-level `key:` of the charts read here.
pub fn looks_like_manifest(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_end();
        t == "---"
            || [
                "apiVersion:",
                "kind:",
                "servingEngineSpec:",
                "modelArtifacts:",
                "decode:",
                "prefill:",
                "spec:",
            ]
            .iter()
            .any(|k| t.starts_with(k))
    })
}

/// Where a worker's vLLM command comes from.
enum Launch {
    /// A shell script (`sh -c SCRIPT`, or a Dynamo args string).
    Shell(String),
    /// Words (`command` + `args`).
    Words(Vec<String>),
}

/// One vLLM server found in the manifest, before its arguments are applied.
struct Worker {
    /// Where it was found (`LeaderWorkerSet wide-ep-decode, container vllm`).
    label: String,
    role: Option<PoolRole>,
    env: Vec<(String, String)>,
    launch: Launch,
    replicas: Option<(String, u32)>,
    gpus_per_pod: Option<(String, u32)>,
    /// Pods per replica (LeaderWorkerSet `size`, Dynamo `multinode.nodeCount`).
    pods: Option<(String, u32)>,
    gpu_name: Option<(String, String)>,
    image: Option<String>,
    /// Reports of manifest fields read along the way.
    reports: Vec<ArgReport>,
}

fn rep(
    arg: impl Into<String>,
    value: Option<String>,
    status: Status,
    detail: impl Into<String>,
) -> ArgReport {
    ArgReport {
        arg: arg.into(),
        value,
        status,
        detail: detail.into(),
    }
}

fn strings(n: Option<&Node>) -> Vec<String> {
    match n {
        Some(Node::Seq(v)) => v
            .iter()
            .filter_map(|x| x.str().map(str::to_string))
            .collect(),
        Some(x) => x.str().map(|s| vec![s.to_string()]).unwrap_or_default(),
        None => Vec::new(),
    }
}

fn count(field: &str, n: Option<&Node>) -> Result<Option<(String, u32)>, ArgReport> {
    let Some(t) = n.and_then(Node::str) else {
        return Ok(None);
    };
    match t.trim().parse::<u32>() {
        Ok(v) => Ok(Some((field.to_string(), v))),
        Err(_) => Err(rep(
            field,
            Some(t.to_string()),
            Status::Refused,
            "not a whole number",
        )),
    }
}

/// Node labels that name the GPU product.
const GPU_LABELS: [&str; 4] = [
    "nvidia.com/gpu.product",
    "gpu.nvidia.com/model",
    "cloud.google.com/gke-accelerator",
    "node.kubernetes.io/instance-type",
];

/// The GPU named by a pod spec's `nodeSelector` or node affinity (`nodeSelectorTerms`).
fn gpu_from_pod(pod: &Node, prefix: &str) -> Option<(String, String)> {
    if let Some(sel) = pod.get("nodeSelector") {
        for key in GPU_LABELS {
            if let Some(v) = sel.get(key).and_then(Node::str) {
                return Some((format!("{prefix}nodeSelector[{key}]"), v.to_string()));
            }
        }
    }
    let terms = pod
        .at(&[
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ])
        .or_else(|| pod.get("nodeSelectorTerms"));
    for t in terms.map(Node::seq).unwrap_or(&[]) {
        for e in t.get("matchExpressions").map(Node::seq).unwrap_or(&[]) {
            let key = e.get("key").and_then(Node::str).unwrap_or("");
            if GPU_LABELS.contains(&key) {
                if let Some(v) = e
                    .get("values")
                    .and_then(|v| v.seq().first())
                    .and_then(Node::str)
                {
                    return Some((format!("{prefix}affinity[{key}]"), v.to_string()));
                }
            }
        }
    }
    None
}

/// GPUs a container's `resources` asks for (`limits` first, then `requests`).
fn gpus_of(res: Option<&Node>, prefix: &str) -> Result<Option<(String, u32)>, ArgReport> {
    let Some(res) = res else { return Ok(None) };
    for part in ["limits", "requests"] {
        for key in ["nvidia.com/gpu", "amd.com/gpu", "gpu"] {
            if let Some(n) = res.at(&[part, key]) {
                return count(&format!("{prefix}resources.{part}[{key}]"), Some(n));
            }
        }
    }
    Ok(None)
}

fn env_list(n: Option<&Node>, reports: &mut Vec<ArgReport>, prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in n.map(Node::seq).unwrap_or(&[]) {
        let Some(name) = e.get("name").and_then(Node::str) else {
            continue;
        };
        match e.get("value") {
            Some(v) => out.push((name.to_string(), v.str().unwrap_or("").to_string())),
            None if e.get("valueFrom").is_some() => reports.push(rep(
                format!("{prefix}env {name}"),
                None,
                Status::Ignored,
                "its value comes from the cluster (secretKeyRef / configMapKeyRef / fieldRef), not the manifest",
            )),
            None => out.push((name.to_string(), String::new())),
        }
    }
    out
}

fn role_of(text: &str) -> Option<PoolRole> {
    let t = text.to_ascii_lowercase();
    if t.contains("prefill") {
        Some(PoolRole::Prefill)
    } else if t.contains("decode") {
        Some(PoolRole::Decode)
    } else {
        None
    }
}

/// `metadata.labels["llm-d.ai/role"]` of an object or its pod template.
fn labelled_role(meta: Option<&Node>) -> Option<PoolRole> {
    meta.and_then(|m| m.at(&["labels", "llm-d.ai/role"]))
        .and_then(Node::str)
        .and_then(role_of)
}

const SHELLS: [&str; 6] = [
    "sh",
    "bash",
    "/bin/sh",
    "/bin/bash",
    "/usr/bin/bash",
    "/usr/bin/env",
];

/// The launch of a container from its `command` and `args`.
fn launch_of(command: Vec<String>, args: Vec<String>, image: Option<&str>) -> Option<Launch> {
    if let Some(c) = command.iter().position(|w| w == "-c") {
        if command
            .first()
            .is_some_and(|s| SHELLS.contains(&s.as_str()) || s.ends_with("sh"))
        {
            let script = command.get(c + 1).or_else(|| args.first())?;
            return Some(Launch::Shell(script.clone()));
        }
    }
    let mut words = command.clone();
    words.extend(args.iter().cloned());
    if find_in_words(&words).is_some() {
        return Some(Launch::Words(words));
    }
    // The vllm/vllm-openai image's entrypoint is `vllm serve`: `args` alone are its arguments.
    if command.is_empty() && image.is_some_and(|i| i.contains("vllm-openai")) && !args.is_empty() {
        let mut w = vec!["vllm".to_string(), "serve".to_string()];
        w.extend(args);
        return Some(Launch::Words(w));
    }
    // An args string run by the image's shell (Dynamo's `args: ["python3 -m dynamo.vllm ..."]`).
    if command.is_empty() && args.iter().any(|a| a.contains(' ')) {
        return Some(Launch::Shell(args.join("\n")));
    }
    None
}

/// A container of a pod spec, as a worker (None when it runs no vLLM server).
fn container_worker(
    c: &Node,
    pod: &Node,
    label: &str,
    prefix: &str,
) -> Result<Option<Worker>, ArgReport> {
    let image = c.get("image").and_then(Node::str).map(str::to_string);
    let Some(launch) = launch_of(
        strings(c.get("command")),
        strings(c.get("args")),
        image.as_deref(),
    ) else {
        return Ok(None);
    };
    let mut reports = Vec::new();
    let env = env_list(c.get("env"), &mut reports, prefix);
    if c.get("envFrom").is_some() {
        reports.push(rep(
            format!("{prefix}envFrom"),
            None,
            Status::Ignored,
            "variables from a Secret / ConfigMap: not in the manifest",
        ));
    }
    Ok(Some(Worker {
        label: label.to_string(),
        role: None,
        env,
        launch,
        replicas: None,
        gpus_per_pod: gpus_of(c.get("resources"), prefix)?,
        pods: None,
        gpu_name: gpu_from_pod(pod, prefix),
        image,
        reports,
    }))
}

/// The vLLM containers of a pod spec (`containers`, then `initContainers` are not servers).
fn pod_workers(
    pod: &Node,
    label: &str,
    prefix: &str,
    out: &mut Vec<Worker>,
    errs: &mut Vec<ArgReport>,
) {
    for c in pod.get("containers").map(Node::seq).unwrap_or(&[]) {
        let name = c.get("name").and_then(Node::str).unwrap_or("?");
        match container_worker(c, pod, &format!("{label}, container {name}"), prefix) {
            Ok(Some(w)) => out.push(w),
            Ok(None) => {}
            Err(e) => errs.push(e),
        }
    }
}

/// Workers of one YAML document.
fn doc_workers(doc: &Node, out: &mut Vec<Worker>, errs: &mut Vec<ArgReport>) {
    let kind = doc.get("kind").and_then(Node::str).unwrap_or("");
    let name = doc
        .at(&["metadata", "name"])
        .and_then(Node::str)
        .unwrap_or("")
        .to_string();
    let meta = doc.get("metadata");
    let start = out.len();
    match kind {
        "Deployment" | "StatefulSet" | "ReplicaSet" | "Job" | "Pod" => {
            let pod = if kind == "Pod" {
                doc.get("spec")
            } else {
                doc.at(&["spec", "template", "spec"])
            };
            if let Some(pod) = pod {
                pod_workers(pod, &format!("{kind} {name}"), "", out, errs);
            }
            let replicas = if kind == "Pod" || kind == "Job" {
                None
            } else {
                match count("spec.replicas", doc.at(&["spec", "replicas"])) {
                    Ok(r) => Some(r.unwrap_or(("spec.replicas (absent: 1)".into(), 1))),
                    Err(e) => {
                        errs.push(e);
                        None
                    }
                }
            };
            let role = labelled_role(meta)
                .or_else(|| labelled_role(doc.at(&["spec", "template", "metadata"])))
                .or_else(|| role_of(&name));
            for w in &mut out[start..] {
                w.replicas = replicas.clone();
                w.role = role;
            }
        }
        "LeaderWorkerSet" => {
            let t = doc.at(&["spec", "leaderWorkerTemplate"]);
            // The leader runs the API server when a leader template is given.
            let pod = t
                .and_then(|t| t.at(&["leaderTemplate", "spec"]))
                .or_else(|| t.and_then(|t| t.at(&["workerTemplate", "spec"])));
            if let Some(pod) = pod {
                pod_workers(pod, &format!("LeaderWorkerSet {name}"), "", out, errs);
            }
            let replicas = count("spec.replicas", doc.at(&["spec", "replicas"]))
                .map_err(|e| errs.push(e))
                .ok()
                .map(|r| r.unwrap_or(("spec.replicas (absent: 1)".into(), 1)));
            let size = count(
                "spec.leaderWorkerTemplate.size",
                t.and_then(|t| t.get("size")),
            )
            .map_err(|e| errs.push(e))
            .ok()
            .flatten();
            let role = labelled_role(meta)
                .or_else(|| labelled_role(t.and_then(|t| t.at(&["workerTemplate", "metadata"]))))
                .or_else(|| role_of(&name));
            for w in &mut out[start..] {
                w.replicas = replicas.clone();
                w.pods = size.clone();
                w.role = role;
            }
        }
        "InferenceService" => {
            let pred = doc.at(&["spec", "predictor"]);
            if let Some(m) = pred.and_then(|p| p.get("model")) {
                // KServe's Hugging Face runtime: vLLM with the runtime's own --model_id flag.
                let mut args = Vec::new();
                let mut reports = Vec::new();
                for a in strings(m.get("args")) {
                    let (k, v) = a
                        .split_once('=')
                        .map_or((a.as_str(), None), |(k, v)| (k, Some(v)));
                    match k {
                        "--model_id" | "--model-id" => {
                            args.insert(0, v.unwrap_or("").to_string());
                            reports.push(rep(
                                "spec.predictor.model.args --model_id",
                                v.map(str::to_string),
                                Status::Understood,
                                "the Hugging Face id vLLM serves",
                            ));
                        }
                        "--model_name"
                        | "--model-name"
                        | "--backend"
                        | "--disable_log_requests" => reports.push(rep(
                            format!("spec.predictor.model.args {k}"),
                            v.map(str::to_string),
                            Status::Ignored,
                            "KServe runtime option: no effect on memory or speed",
                        )),
                        _ => args.push(a.clone()),
                    }
                }
                let mut words = vec!["vllm".to_string(), "serve".to_string()];
                words.extend(args);
                let env = env_list(m.get("env"), &mut reports, "spec.predictor.model.");
                match gpus_of(m.get("resources"), "spec.predictor.model.") {
                    Ok(g) => out.push(Worker {
                        label: format!("InferenceService {name}"),
                        role: None,
                        env,
                        launch: Launch::Words(words),
                        replicas: None,
                        gpus_per_pod: g,
                        pods: None,
                        gpu_name: pred.and_then(|p| gpu_from_pod(p, "spec.predictor.")),
                        image: None,
                        reports,
                    }),
                    Err(e) => errs.push(e),
                }
            } else if let Some(p) = pred {
                pod_workers(
                    p,
                    &format!("InferenceService {name}"),
                    "spec.predictor.",
                    out,
                    errs,
                );
            }
            let replicas = count(
                "spec.predictor.minReplicas",
                pred.and_then(|p| p.get("minReplicas")),
            )
            .map_err(|e| errs.push(e))
            .ok()
            .map(|r| r.unwrap_or(("spec.predictor.minReplicas (absent: 1)".into(), 1)));
            for w in &mut out[start..] {
                w.replicas = replicas.clone();
            }
        }
        "DynamoGraphDeployment" => {
            for (svc, s) in doc
                .at(&["spec", "services"])
                .map(Node::entries)
                .unwrap_or(&[])
            {
                let Some(main) = s.at(&["extraPodSpec", "mainContainer"]) else {
                    continue;
                };
                let pod = s.get("extraPodSpec").unwrap_or(main);
                let p = format!("spec.services.{svc}.");
                let before = out.len();
                match container_worker(
                    main,
                    pod,
                    &format!("DynamoGraphDeployment {name}, service {svc}"),
                    &p,
                ) {
                    Ok(Some(mut w)) => {
                        w.env.extend(env_list(s.get("envs"), &mut w.reports, &p));
                        if let Some(sec) = s.get("envFromSecret").and_then(Node::str) {
                            w.reports.push(rep(
                                format!("{p}envFromSecret"),
                                Some(sec.into()),
                                Status::Ignored,
                                "variables from a Secret: credentials, not settings",
                            ));
                        }
                        match gpus_of(s.get("resources"), &p) {
                            Ok(Some(g)) => w.gpus_per_pod = Some(g),
                            Ok(None) => {}
                            Err(e) => errs.push(e),
                        }
                        w.replicas = count(&format!("{p}replicas"), s.get("replicas"))
                            .map_err(|e| errs.push(e))
                            .ok()
                            .map(|r| r.unwrap_or((format!("{p}replicas (absent: 1)"), 1)));
                        w.pods = count(
                            &format!("{p}multinode.nodeCount"),
                            s.at(&["multinode", "nodeCount"]),
                        )
                        .map_err(|e| errs.push(e))
                        .ok()
                        .flatten();
                        w.role = s
                            .get("subComponentType")
                            .and_then(Node::str)
                            .and_then(role_of)
                            .or_else(|| role_of(svc));
                        out.push(w);
                    }
                    Ok(None) => {}
                    Err(e) => errs.push(e),
                }
                let _ = before;
            }
        }
        _ => {
            if let Some(ses) = doc.get("servingEngineSpec") {
                production_stack(ses, out, errs);
            } else if doc.get("decode").is_some() || doc.get("prefill").is_some() {
                llm_d_values(doc, out, errs);
            }
        }
    }
}

/// vLLM production-stack Helm values: `servingEngineSpec.modelSpec[]`, rendered as the chart's
/// `deployment-vllm-multi.yaml` does (`vllm serve MODEL` + the `vllmConfig` keys as flags +
/// `extraArgs`).
fn production_stack(ses: &Node, out: &mut Vec<Worker>, errs: &mut Vec<ArgReport>) {
    for (i, m) in ses
        .get("modelSpec")
        .map(Node::seq)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let p = format!("servingEngineSpec.modelSpec[{i}].");
        let mut reports = Vec::new();
        let mut words = vec!["vllm".to_string(), "serve".to_string()];
        words.push(
            m.get("modelURL")
                .and_then(Node::str)
                .unwrap_or("")
                .to_string(),
        );
        if let Some(c) = m.get("vllmConfig") {
            // The chart's template, key by key (helm/templates/deployment-vllm-multi.yaml).
            if let Some(b) = c.get("enableChunkedPrefill").and_then(Node::bool) {
                words.push(
                    if b {
                        "--enable-chunked-prefill"
                    } else {
                        "--no-enable-chunked-prefill"
                    }
                    .into(),
                );
            }
            words.push(
                if c.get("enablePrefixCaching").and_then(Node::bool) == Some(true) {
                    "--enable-prefix-caching"
                } else {
                    "--no-enable-prefix-caching"
                }
                .into(),
            );
            for (key, flag) in [
                ("maxModelLen", "--max-model-len"),
                ("dtype", "--dtype"),
                ("tensorParallelSize", "--tensor-parallel-size"),
                ("maxNumSeqs", "--max-num-seqs"),
                ("gpuMemoryUtilization", "--gpu-memory-utilization"),
                ("maxLoras", "--max-loras"),
            ] {
                if let Some(v) = c.get(key).and_then(Node::str) {
                    words.push(flag.into());
                    words.push(v.to_string());
                }
            }
            words.extend(strings(c.get("extraArgs")));
            for (k, v) in c.entries() {
                match k.as_str() {
                    "enableChunkedPrefill"
                    | "enablePrefixCaching"
                    | "maxModelLen"
                    | "dtype"
                    | "tensorParallelSize"
                    | "maxNumSeqs"
                    | "gpuMemoryUtilization"
                    | "maxLoras"
                    | "extraArgs" => {}
                    "v0" => reports.push(rep(
                        format!("{p}vllmConfig.v0"),
                        v.str().map(str::to_string),
                        if v.str() == Some("1") {
                            Status::NotModelled
                        } else {
                            Status::Ignored
                        },
                        "vLLM's V0 engine (VLLM_USE_V1=0): ServeSim models the V1 engine",
                    )),
                    _ => reports.push(rep(
                        format!("{p}vllmConfig.{k}"),
                        v.str().map(str::to_string),
                        Status::Unknown,
                        "a vllmConfig key the chart renders outside the vLLM arguments; ignored",
                    )),
                }
            }
        }
        let mut role = None;
        if let Some(l) = m.get("lmcacheConfig") {
            if l.get("enabled").and_then(Node::bool) == Some(true) {
                let kv = l.get("kvRole").and_then(Node::str).unwrap_or("");
                role = match kv {
                    "kv_producer" => Some(PoolRole::Prefill),
                    "kv_consumer" => Some(PoolRole::Decode),
                    _ => None,
                };
                reports.push(rep(format!("{p}lmcacheConfig"), Some(kv.to_string()), Status::NotModelled, "the LMCache connector: its KV role places the worker (kv_producer = prefill, kv_consumer = decode); LMCache's own cache is not modelled"));
            }
        }
        let env = env_list(m.get("env"), &mut reports, &p);
        let replicas = count(&format!("{p}replicaCount"), m.get("replicaCount"))
            .map_err(|e| errs.push(e))
            .ok()
            .map(|r| r.unwrap_or((format!("{p}replicaCount (absent: 1)"), 1)));
        let gpus = count(&format!("{p}requestGPU"), m.get("requestGPU"))
            .map_err(|e| errs.push(e))
            .ok()
            .flatten();
        let image = match (
            m.get("repository").and_then(Node::str),
            m.get("tag").and_then(Node::str),
        ) {
            (Some(r), Some(t)) => Some(format!("{r}:{t}")),
            (Some(r), None) => Some(r.to_string()),
            _ => None,
        };
        out.push(Worker {
            label: format!(
                "production-stack model {}",
                m.get("name").and_then(Node::str).unwrap_or("?")
            ),
            role: role.or_else(|| m.get("name").and_then(Node::str).and_then(role_of)),
            env,
            launch: Launch::Words(words),
            replicas,
            gpus_per_pod: gpus,
            pods: None,
            gpu_name: gpu_from_pod(m, &p),
            image,
            reports,
        });
    }
}

/// llm-d modelservice Helm values: `decode` / `prefill` sections with `parallelism`,
/// `replicas`, `containers[]` (`modelCommand: vllmServe` builds `vllm serve MODEL
/// --tensor-parallel-size T ...` from `modelArtifacts` and `parallelism`).
fn llm_d_values(doc: &Node, out: &mut Vec<Worker>, errs: &mut Vec<ArgReport>) {
    let model = doc
        .at(&["modelArtifacts", "uri"])
        .and_then(Node::str)
        .map(|u| u.strip_prefix("hf://").unwrap_or(u).to_string())
        .or_else(|| {
            doc.at(&["modelArtifacts", "name"])
                .and_then(Node::str)
                .map(str::to_string)
        });
    for (sec, role) in [("decode", PoolRole::Decode), ("prefill", PoolRole::Prefill)] {
        let Some(s) = doc.get(sec) else { continue };
        if s.get("create").and_then(Node::bool) == Some(false) {
            continue;
        }
        let p = format!("{sec}.");
        let par = s.get("parallelism");
        let num = |k: &str| count(&format!("{p}parallelism.{k}"), par.and_then(|x| x.get(k)));
        let (tp, dp, dpl) = match (num("tensor"), num("data"), num("dataLocal")) {
            (Ok(t), Ok(d), Ok(l)) => (t, d, l),
            (a, b, c) => {
                errs.extend([a.err(), b.err(), c.err()].into_iter().flatten());
                continue;
            }
        };
        for c in s.get("containers").map(Node::seq).unwrap_or(&[]) {
            let mut reports = Vec::new();
            let cmd = c.get("modelCommand").and_then(Node::str);
            let launch = if cmd == Some("vllmServe") {
                let mut w = vec![
                    "vllm".to_string(),
                    "serve".to_string(),
                    model.clone().unwrap_or_default(),
                ];
                reports.push(rep(
                    "modelArtifacts.uri",
                    model.clone(),
                    Status::Understood,
                    "the model the chart serves (modelCommand: vllmServe)",
                ));
                if let Some((f, t)) = &tp {
                    w.extend(["--tensor-parallel-size".into(), t.to_string()]);
                    reports.push(rep(
                        f.clone(),
                        Some(t.to_string()),
                        Status::Understood,
                        "rendered as --tensor-parallel-size",
                    ));
                }
                if let Some((f, d)) = &dp {
                    w.extend(["--data-parallel-size".into(), d.to_string()]);
                    reports.push(rep(
                        f.clone(),
                        Some(d.to_string()),
                        Status::Understood,
                        "rendered as --data-parallel-size",
                    ));
                }
                w.extend(strings(c.get("args")));
                Launch::Words(w)
            } else {
                match launch_of(
                    strings(c.get("command")),
                    strings(c.get("args")),
                    c.get("image").and_then(Node::str),
                ) {
                    Some(l) => l,
                    None => continue,
                }
            };
            let env = env_list(c.get("env"), &mut reports, &p);
            let t = tp.as_ref().map_or(1, |x| x.1);
            let local = dpl.as_ref().or(dp.as_ref()).map_or(1, |x| x.1);
            let pods = match (&dp, &dpl) {
                (Some((_, d)), Some((f, l))) if *l > 0 && d > l => Some((f.clone(), d / l)),
                _ => None,
            };
            let gpus = match gpus_of(c.get("resources"), &p) {
                Ok(Some(g)) => Some(g),
                Ok(None) => Some((
                    format!("{p}parallelism (GPUs per pod = tensor x dataLocal)"),
                    t.saturating_mul(local),
                )),
                Err(e) => {
                    errs.push(e);
                    None
                }
            };
            let gpu_name = gpu_from_pod(s, &p).or_else(|| {
                let a = s.get("acceleratorTypes")?;
                let v = a.get("labelValues")?.seq().first()?.str()?;
                Some((format!("{p}acceleratorTypes.labelValues"), v.to_string()))
            });
            out.push(Worker {
                label: format!("llm-d modelservice {sec}"),
                role: Some(role),
                env,
                launch,
                replicas: count(&format!("{p}replicas"), s.get("replicas"))
                    .map_err(|e| errs.push(e))
                    .ok()
                    .map(|r| r.unwrap_or((format!("{p}replicas (absent: 1)"), 1))),
                gpus_per_pod: gpus,
                pods,
                gpu_name,
                image: c.get("image").and_then(Node::str).map(str::to_string),
                reports,
            });
            break;
        }
    }
}

/// Kubernetes `$(VAR)` expansion of `command`/`args` (`$$(` stays a literal `$(`).
fn expand_k8s(text: &str, vars: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let r = &rest[i..];
        if let Some(r2) = r.strip_prefix("$$(") {
            out.push_str("$(");
            rest = r2;
        } else if let Some(inner) = r.strip_prefix("$(").and_then(|x| x.split_once(')')) {
            let name = inner.0;
            match vars.iter().rev().find(|(k, _)| k == name) {
                Some((_, v))
                    if !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    out.push_str(v);
                    rest = inner.1;
                }
                _ => {
                    out.push('$');
                    rest = &r[1..];
                }
            }
        } else {
            out.push('$');
            rest = &r[1..];
        }
    }
    out.push_str(rest);
    out
}

fn is_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Integer arithmetic of `$(( ... ))`: + - * / and parentheses over numbers and variables.
fn arith(expr: &str, vars: &[(String, String)]) -> Option<i64> {
    fn atom(t: &[char], i: &mut usize, vars: &[(String, String)], depth: u32) -> Option<i64> {
        while *i < t.len() && t[*i] == ' ' {
            *i += 1;
        }
        if depth > 32 {
            return None;
        }
        if *i < t.len() && t[*i] == '(' {
            *i += 1;
            let v = sum(t, i, vars, depth + 1)?;
            while *i < t.len() && t[*i] == ' ' {
                *i += 1;
            }
            if *i < t.len() && t[*i] == ')' {
                *i += 1;
                return Some(v);
            }
            return None;
        }
        if *i < t.len() && t[*i] == '$' {
            *i += 1;
        }
        let start = *i;
        while *i < t.len()
            && (is_name(t[*i]) || t[*i] == '{' || t[*i] == '}' || t[*i] == ':' || t[*i] == '-')
        {
            if t[*i] == '-' && !(start < *i && t[*i - 1] == ':') {
                break;
            }
            *i += 1;
        }
        let w: String = t[start..*i].iter().collect();
        if let Ok(n) = w.parse::<i64>() {
            return Some(n);
        }
        let w = w.trim_start_matches('{').trim_end_matches('}');
        let (name, default) = w.split_once(":-").map_or((w, None), |(n, d)| (n, Some(d)));
        match vars.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) => v.trim().parse().ok(),
            None => default.and_then(|d| d.parse().ok()),
        }
    }
    fn prod(t: &[char], i: &mut usize, vars: &[(String, String)], depth: u32) -> Option<i64> {
        let mut v = atom(t, i, vars, depth)?;
        loop {
            while *i < t.len() && t[*i] == ' ' {
                *i += 1;
            }
            match t.get(*i) {
                Some('*') => {
                    *i += 1;
                    v = v.checked_mul(atom(t, i, vars, depth)?)?;
                }
                Some('/') => {
                    *i += 1;
                    v = v.checked_div(atom(t, i, vars, depth)?)?;
                }
                _ => return Some(v),
            }
        }
    }
    fn sum(t: &[char], i: &mut usize, vars: &[(String, String)], depth: u32) -> Option<i64> {
        let mut v = prod(t, i, vars, depth)?;
        loop {
            while *i < t.len() && t[*i] == ' ' {
                *i += 1;
            }
            match t.get(*i) {
                Some('+') => {
                    *i += 1;
                    v = v.checked_add(prod(t, i, vars, depth)?)?;
                }
                Some('-') => {
                    *i += 1;
                    v = v.checked_sub(prod(t, i, vars, depth)?)?;
                }
                _ => return Some(v),
            }
        }
    }
    let t: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let v = sum(&t, &mut i, vars, 0)?;
    (t[i..].iter().all(|c| *c == ' ')).then_some(v)
}

/// Shell expansion of the variables the manifest defines (`$X`, `${X}`, `${X:-d}`, `${X-d}`,
/// `$((...))`); unknown variables without a default stay as written; single quotes are literal.
fn expand_shell(text: &str, vars: &[(String, String)]) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_single = false;
    let lookup = |n: &str| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '\'' {
            in_single = !in_single;
        }
        if ch != '$' || in_single || i + 1 >= c.len() {
            out.push(ch);
            i += 1;
            continue;
        }
        if c[i + 1] == '(' && c.get(i + 2) == Some(&'(') {
            // $(( expr ))
            let body: String = c[i + 3..].iter().collect();
            if let Some(end) = body.find("))") {
                if let Some(v) = arith(&body[..end], vars) {
                    out.push_str(&v.to_string());
                    i += 3 + body[..end].chars().count() + 2;
                    continue;
                }
            }
            out.push(ch);
            i += 1;
        } else if c[i + 1] == '{' {
            let body: String = c[i + 2..].iter().take_while(|x| **x != '}').collect();
            let n = body.chars().count();
            if i + 2 + n >= c.len() {
                out.push(ch);
                i += 1;
                continue;
            }
            let (name, op, default) = if let Some((a, b)) = body.split_once(":-") {
                (a, true, Some(b))
            } else if let Some((a, b)) = body.split_once('-') {
                (a, false, Some(b))
            } else {
                (body.as_str(), false, None)
            };
            let v = lookup(name);
            let got = match (v, default) {
                (Some(v), Some(d)) if op && v.is_empty() => Some(d.to_string()),
                (Some(v), _) => Some(v),
                (None, Some(d)) => Some(d.to_string()),
                (None, None) => None,
            };
            match got {
                Some(v) => {
                    out.push_str(&v);
                    i += 2 + n + 1;
                }
                None => {
                    out.push(ch);
                    i += 1;
                }
            }
        } else if is_name(c[i + 1]) && !c[i + 1].is_ascii_digit() {
            let name: String = c[i + 1..].iter().take_while(|x| is_name(**x)).collect();
            match lookup(&name) {
                Some(v) => {
                    out.push_str(&v);
                    i += 1 + name.chars().count();
                }
                None => {
                    out.push(ch);
                    i += 1;
                }
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// True when `text` refers to variable `name` (`$NAME`, `${NAME...}`, `$(NAME)`, or a bare
/// name inside `$(( ))`).
fn uses_var(text: &str, name: &str) -> bool {
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        let bounded = !before.is_some_and(is_name) && !after.is_some_and(is_name);
        if bounded && text.contains('$') {
            return true;
        }
        from = at + name.len();
    }
    false
}

/// The Hugging Face id of a model path in the hub cache
/// (`/models/hub/models--RedHatAI--Llama-3.3-70B-Instruct-FP8-dynamic/snapshots/ddb41...`).
fn hf_cache_id(w: &str) -> Option<String> {
    if !w.starts_with('/') {
        return None;
    }
    let rest = &w[w.find("/models--")? + "/models--".len()..];
    let dir = rest.split('/').next()?;
    let (org, name) = dir.split_once("--")?;
    (!org.is_empty() && !name.is_empty()).then(|| format!("{org}/{name}"))
}

/// Dynamo's own worker flags (not vLLM's): the role flags place the worker.
fn dynamo_flag(w: &str) -> Option<(Status, &'static str, Option<PoolRole>)> {
    match w {
        "--is-prefill-worker" => Some((
            Status::Understood,
            "Dynamo: this worker is the prefill pool",
            Some(PoolRole::Prefill),
        )),
        "--is-decode-worker" => Some((
            Status::Understood,
            "Dynamo: this worker is the decode pool",
            Some(PoolRole::Decode),
        )),
        "--migration-limit"
        | "--endpoint"
        | "--custom-jinja-template"
        | "--dyn-reasoning-parser"
        | "--dyn-tool-call-parser" => Some((
            Status::Ignored,
            "Dynamo worker option: no effect on memory or speed",
            None,
        )),
        _ => None,
    }
}

/// A worker read into a scenario (None when something was refused), its reports and notes.
struct Read {
    scenario: Option<Scenario>,
    reports: Vec<ArgReport>,
    notes: Vec<String>,
    replicas: u32,
    role: Option<PoolRole>,
}

fn read_worker(w: Worker, base: &Scenario) -> Result<Option<Read>, String> {
    let mut vars = w.env.clone();
    let pods = w.pods.as_ref().map_or(1, |p| p.1);
    vars.push(("LWS_GROUP_SIZE".into(), pods.to_string()));
    vars.push(("LWS_WORKER_INDEX".into(), "0".into()));
    let inv: Option<Invocation> = match &w.launch {
        Launch::Shell(script) => find_invocation(&expand_shell(&expand_k8s(script, &vars), &vars))?,
        Launch::Words(words) => {
            let words: Vec<String> = words.iter().map(|x| expand_k8s(x, &vars)).collect();
            find_in_words(&words)
        }
    };
    let Some(inv) = inv else {
        return Ok(None);
    };
    let mut reports = w.reports;
    reports.extend(inv.reports);
    let mut role = w.role;
    let mut args = Vec::new();
    let mut notes = inv.notes;
    for a in inv.args {
        if let Some((st, why, r)) = dynamo_flag(&a) {
            role = r.or(role);
            reports.push(rep(a, None, st, why));
        } else if let Some(id) = hf_cache_id(&a) {
            notes.push(format!(
                "the model path {a} is the Hugging Face cache of {id}: read as {id}"
            ));
            args.push(id);
        } else if a.starts_with("--") && a.ends_with('=') {
            reports.push(rep(
                a,
                Some(String::new()),
                Status::Ignored,
                "an empty value (a variable the manifest does not set): vLLM's default applies",
            ));
        } else {
            args.push(a);
        }
    }
    // Variables the command uses are substitutions (reported so); the rest go to the registry.
    let launch_text = match &w.launch {
        Launch::Shell(t) => t.clone(),
        Launch::Words(v) => v.join(" "),
    };
    let mut env = Vec::new();
    for (k, v) in w.env {
        if super::args::lookup(&k).is_none() && uses_var(&launch_text, &k) {
            reports.push(rep(
                format!("env {k}"),
                Some(v.clone()),
                Status::Understood,
                format!("substituted into the command (${k})"),
            ));
        } else {
            env.push((k, v));
        }
    }
    env.extend(inv.env);
    let mut p: Pasted = apply_all(base, &env, &args, &inv.servesim, true, true)?;
    reports.append(&mut p.args);
    notes.push(format!("read {}", w.label));
    notes.append(&mut p.notes);
    let mut s = p.scenario;
    if let Some(img) = &w.image {
        let tag = img.rsplit_once(':').map(|(_, t)| t.trim_start_matches('v'));
        let official = img.starts_with("vllm/vllm-openai") || img.contains("/vllm-openai");
        match tag.filter(|_| official).filter(|t| crate::perf::VllmVersion::parse(t).is_ok()) {
            Some(t) => {
                if let Some(s) = s.as_mut() {
                    s.vllm_version = Some(t.to_string());
                }
                reports.push(rep("image", Some(img.clone()), Status::Understood, format!("vllm_version = {t} (the vLLM release in the image tag)")));
            }
            None => reports.push(rep("image", Some(img.clone()), Status::Ignored, "the container image: its vLLM version is not in the tag, so the scenario's vllm_version stands")),
        }
    }
    if let Some((f, g)) = &w.gpu_name {
        match crate::gpu::find_gpu(g) {
            Ok(spec) => {
                if let Some(s) = s.as_mut() {
                    s.gpu = GpuRef::Catalog(spec.id.clone());
                }
                reports.push(rep(
                    f.clone(),
                    Some(g.clone()),
                    Status::Understood,
                    format!("gpu = {}", spec.id),
                ));
            }
            Err(e) => reports.push(rep(
                f.clone(),
                Some(g.clone()),
                Status::Refused,
                format!("{e}; or add a `# servesim: --gpu ID` line to the manifest"),
            )),
        }
    }
    let replicas = w.replicas.as_ref().map_or(1, |r| r.1);
    if let Some((f, r)) = &w.replicas {
        let st = if *r == 0 {
            Status::Refused
        } else {
            Status::Understood
        };
        let why = if *r == 0 {
            "no replicas: nothing serves; give at least 1".to_string()
        } else {
            format!("{r} replica(s), each with its own API server")
        };
        reports.push(rep(f.clone(), Some(r.to_string()), st, why));
    }
    if let Some((f, n)) = &w.pods {
        reports.push(rep(
            f.clone(),
            Some(n.to_string()),
            Status::Understood,
            format!(
                "{n} pods per replica (one vLLM engine group spans them; LWS_GROUP_SIZE = {n})"
            ),
        ));
    }
    if let (Some((f, g)), None) = (&w.gpus_per_pod, s.as_ref()) {
        reports.push(rep(
            f.clone(),
            Some(g.to_string()),
            Status::Ignored,
            "GPUs per pod: not checked against tp x dp, the scenario was not built",
        ));
    }
    if let (Some((f, g)), Some(sc)) = (&w.gpus_per_pod, s.as_ref()) {
        let need = sc.tp.saturating_mul(sc.dp);
        let have = g.saturating_mul(pods);
        let (st, why) = if have == need {
            (
                Status::Understood,
                format!("{g} GPUs per pod x {pods} pod(s) = tp x dp = {need}"),
            )
        } else if have > need {
            (Status::Ignored, format!("{g} GPUs per pod x {pods} pod(s) = {have}, but tp x dp = {need}: the engine uses {need} of them"))
        } else {
            (Status::Refused, format!("{g} GPUs per pod x {pods} pod(s) = {have}, fewer than tp x dp = {need}: vLLM would not start; request {} GPUs per pod", need.div_ceil(pods.max(1))))
        };
        reports.push(rep(f.clone(), Some(g.to_string()), st, why));
    }
    let refused = reports.iter().any(|r| r.status == Status::Refused);
    Ok(Some(Read {
        scenario: if refused { None } else { s },
        reports,
        notes,
        replicas,
        role,
    }))
}

/// Engine settings the two have in common, and what each sets beyond them.
fn split_engine(
    a: &RawEngineSettings,
    b: &RawEngineSettings,
) -> (
    RawEngineSettings,
    Option<RawEngineSettings>,
    Option<RawEngineSettings>,
) {
    use serde_json::{Map, Value};
    let obj = |e: &RawEngineSettings| match serde_json::to_value(e) {
        Ok(Value::Object(m)) => m
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .collect::<Map<String, Value>>(),
        _ => Map::new(),
    };
    let (ma, mb) = (obj(a), obj(b));
    let common: Map<String, Value> = ma
        .iter()
        .filter(|(k, v)| mb.get(*k) == Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let rest = |m: &Map<String, Value>| {
        let r: Map<String, Value> = m
            .iter()
            .filter(|(k, _)| !common.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!r.is_empty()).then(|| serde_json::from_value(Value::Object(r)).unwrap_or_default())
    };
    let (ra, rb) = (rest(&ma), rest(&mb));
    (
        serde_json::from_value(Value::Object(common)).unwrap_or_default(),
        ra,
        rb,
    )
}

/// Reads a manifest onto `base` (GPU, workload and sweep kept unless the manifest says; the
/// vLLM-settable fields start from vLLM's defaults, as for a pasted command). `# servesim:`
/// comment lines (`# servesim: --gpu H200`) apply last.
pub fn parse_manifest(text: &str, base: &Scenario) -> Result<Pasted, String> {
    let docs = parse_documents(text)?;
    let mut workers = Vec::new();
    let mut errs = Vec::new();
    for d in &docs {
        doc_workers(d, &mut workers, &mut errs);
    }
    if workers.is_empty() {
        if let Some(e) = errs.first() {
            return Err(format!("{}: {}", e.arg, e.detail));
        }
        return Err(format!(
            "no vLLM server found in the manifest's {} document(s): ServeSim reads Deployments, StatefulSets, Pods, LeaderWorkerSets, KServe InferenceServices, Dynamo DynamoGraphDeployments and the llm-d modelservice / vLLM production-stack Helm values, whose container runs `vllm serve` (or python -m vllm.entrypoints.openai.api_server / dynamo.vllm)",
            docs.len()
        ));
    }
    let mut servesim: Vec<String> = Vec::new();
    for l in text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# servesim:"))
    {
        servesim.extend(super::command::shell_words(l)?);
    }
    let mut reads = Vec::new();
    let mut skipped = Vec::new();
    for w in workers {
        let label = w.label.clone();
        match read_worker(w, base)? {
            Some(r) => reads.push(r),
            None => skipped.push(label),
        }
    }
    if reads.is_empty() {
        return Err(format!(
            "no container of the manifest runs vLLM ({}): expected `vllm serve ...`, `python -m vllm.entrypoints.openai.api_server ...` or `python -m dynamo.vllm ...` in its command or args",
            skipped.join("; ")
        ));
    }
    let pre = reads.iter().position(|r| r.role == Some(PoolRole::Prefill));
    let dec = reads.iter().position(|r| r.role == Some(PoolRole::Decode));
    let mut notes: Vec<String> = skipped
        .iter()
        .map(|l| format!("{l}: runs no vLLM server (not read)"))
        .collect();
    let mut reports = errs;
    let scenario = match (pre, dec) {
        (Some(pi), Some(di)) => {
            let mut taken: Vec<Read> = Vec::new();
            let mut others = Vec::new();
            for (i, r) in reads.into_iter().enumerate() {
                if i == pi || i == di {
                    taken.push(r);
                } else {
                    others.push(r);
                }
            }
            // taken is in document order: find which is which
            let (p, d) = if pi < di {
                let d = taken.pop().expect("two workers");
                (taken.pop().expect("two workers"), d)
            } else {
                let p = taken.pop().expect("two workers");
                (p, taken.pop().expect("two workers"))
            };
            for o in others {
                notes.push(format!("another vLLM worker ({}) was not read: ServeSim takes one prefill and one decode worker", o.notes.iter().find(|n| n.starts_with("read ")).cloned().unwrap_or_default()));
            }
            for (tag, r) in [("prefill", &p), ("decode", &d)] {
                for a in &r.reports {
                    let mut a = a.clone();
                    a.arg = format!("{tag}: {}", a.arg);
                    reports.push(a);
                }
                notes.extend(r.notes.iter().map(|n| format!("{tag}: {n}")));
            }
            match (p.scenario, d.scenario) {
                (Some(ps), Some(ds)) => {
                    if ps.model != ds.model {
                        reports.push(rep("model", None, Status::Refused, "the prefill and decode workers serve different models; they must serve the same one"));
                        None
                    } else {
                        let (common, de, pe) = split_engine(&ds.engine, &ps.engine);
                        for (what, a, b) in [
                            (
                                "kv_cache_dtype",
                                ds.kv_cache_dtype.name().to_string(),
                                ps.kv_cache_dtype.name().to_string(),
                            ),
                            (
                                "weight_precision",
                                format!("{:?}", ds.weight_precision),
                                format!("{:?}", ps.weight_precision),
                            ),
                        ] {
                            if a != b {
                                notes.push(format!("the workers differ in {what} ({b} on prefill, {a} on decode): the scenario has one, the decode worker's"));
                            }
                        }
                        let mut s = ds.clone();
                        s.engine = common;
                        let pool =
                            |x: &Scenario, replicas: u32, engine: Option<RawEngineSettings>| {
                                RawPool {
                                    gpu: (x.gpu != s.gpu).then(|| x.gpu.clone()),
                                    tp: (x.tp != s.tp).then_some(x.tp),
                                    dp: (x.dp != s.dp).then_some(x.dp),
                                    ep: (x.ep != s.ep).then_some(x.ep),
                                    replicas: Some(replicas),
                                    engine,
                                    router: None,
                                }
                            };
                        let prefill = pool(&ps, p.replicas, pe);
                        let decode = pool(&ds, d.replicas, de);
                        s.topology = Some(RawTopology {
                            prefill: Some(prefill),
                            decode: Some(decode),
                            ..base
                                .topology
                                .clone()
                                .map(|t| RawTopology {
                                    replicas: None,
                                    prefill: None,
                                    decode: None,
                                    ..t
                                })
                                .unwrap_or_default()
                        });
                        notes.push(format!("disaggregated: {} prefill worker(s) of tp {} x dp {}, {} decode worker(s) of tp {} x dp {}", p.replicas, ps.tp, ps.dp, d.replicas, ds.tp, ds.dp));
                        Some(s)
                    }
                }
                _ => None,
            }
        }
        _ => {
            let mut it = reads.into_iter();
            let r = it.next().expect("one worker at least");
            for o in it {
                notes.push(format!("another vLLM server was not read ({}): ServeSim simulates one deployment; paste the others one at a time", o.notes.iter().find(|n| n.starts_with("read ")).map(|n| &n[5..]).unwrap_or("")));
            }
            if let Some(role) = r.role {
                notes.push(format!("only a {} worker was found: simulated as an aggregated deployment (paste the prefill and decode manifests together for disaggregated serving)", role.name()));
            }
            reports.extend(r.reports);
            notes.extend(r.notes);
            r.scenario.map(|mut s| {
                s.topology = Some(RawTopology {
                    replicas: Some(r.replicas),
                    ..base
                        .topology
                        .clone()
                        .map(|t| RawTopology {
                            prefill: None,
                            decode: None,
                            ..t
                        })
                        .unwrap_or_default()
                });
                s
            })
        }
    };
    let mut scenario = scenario;
    if !servesim.is_empty() {
        if let Some(s) = scenario.take() {
            let p = apply_all(&s, &[], &[], &servesim, false, false)?;
            for mut a in p.args {
                a.arg = format!("# servesim: {}", a.arg);
                reports.push(a);
            }
            notes.extend(p.notes);
            scenario = p.scenario;
        }
    }
    let refused = reports.iter().any(|r| r.status == Status::Refused);
    Ok(Pasted {
        scenario: if refused { None } else { scenario },
        args: reports,
        notes,
    })
}

/// Reads pasted text as a manifest when it looks like one ([`looks_like_manifest`]), else as
/// a command line (`command::parse_command`): the one entry point of the page's paste box.
pub fn parse_pasted(text: &str, base: &Scenario) -> Result<Pasted, String> {
    if looks_like_manifest(text) {
        parse_manifest(text, base)
    } else {
        super::command::parse_command(text, base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn shell_and_kubernetes_expansion() {
        let v = vars(&[("DP_SIZE_LOCAL", "4"), ("LWS_GROUP_SIZE", "2"), ("TP", "1")]);
        assert_eq!(
            expand_shell("--dp $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) -tp $TP", &v),
            "--dp 8 -tp 1"
        );
        assert_eq!(
            expand_shell("$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))", &v),
            "0"
        );
        assert_eq!(
            expand_shell("x=${NOPE-} y=${TP} z=$NOPE '$TP'", &v),
            "x= y=1 z=$NOPE '$TP'"
        );
        assert_eq!(
            expand_k8s("kv@$(TP)@m $$(TP) $(NOPE)", &v),
            "kv@1@m $(TP) $(NOPE)"
        );
        assert_eq!(arith("(1 + 2) * 3 - 4 / 2", &v), Some(7));
        assert_eq!(arith("9223372036854775807 * 2", &v), None);
    }

    #[test]
    fn detects_yaml_and_commands() {
        assert!(looks_like_manifest(
            "apiVersion: apps/v1\nkind: Deployment\n"
        ));
        assert!(looks_like_manifest("decode:\n  replicas: 2\n"));
        assert!(!looks_like_manifest("vllm serve Qwen/Qwen3-8B -tp 2"));
        assert!(!looks_like_manifest("VLLM_USE_DEEP_GEMM=1 vllm serve m \\\n  --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}'"));
    }
}
