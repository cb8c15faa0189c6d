//! Public deployment manifests (tests/manifests/, each cited in its first lines and in
//! tests/manifests/README.md) parsed to the scenario they mean, every field accounted for.

use servesim_core::dtype::KvCacheDtype;
use servesim_core::scenario::{GpuRef, ModelRef, Scenario};
use servesim_core::vllm::args::Status;
use servesim_core::vllm::manifest::{parse_manifest, parse_pasted};
use servesim_core::vllm::Pasted;

fn read(name: &str) -> String {
    let p = format!(
        "{}/../../tests/manifests/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn parsed_on(name: &str, base: &Scenario) -> Pasted {
    parse_manifest(&read(name), base).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn scenario(name: &str, base: &Scenario) -> (Scenario, Pasted) {
    let p = parsed_on(name, base);
    let s = p
        .scenario
        .clone()
        .unwrap_or_else(|| panic!("{name}: refused {:?}", p.refusals()));
    (s, p)
}

fn status(p: &Pasted, arg: &str) -> Status {
    p.args
        .iter()
        .find(|a| a.arg == arg)
        .unwrap_or_else(|| {
            panic!(
                "{arg} not reported: {:?}",
                p.args.iter().map(|a| &a.arg).collect::<Vec<_>>()
            )
        })
        .status
}

fn model(s: &Scenario) -> &str {
    match &s.model {
        ModelRef::Catalog(id) => id,
        ModelRef::Custom(c) => &c.name,
    }
}

#[test]
fn llm_d_inference_scheduling_values_are_eight_tp2_replicas() {
    let (s, p) = scenario(
        "llm-d-inference-scheduling-values.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(model(&s), "Qwen/Qwen3-32B");
    assert_eq!((s.tp, s.dp, s.ep), (2, 1, 1));
    assert_eq!(s.topology.as_ref().unwrap().replicas, Some(8));
    assert_eq!(s.engine.gpu_memory_utilization, Some(0.95));
    assert_eq!(status(&p, "--disable-uvicorn-access-log"), Status::Ignored);
    assert_eq!(status(&p, "decode.replicas"), Status::Understood);
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits, "{}", r.capacity.reason);
}

#[test]
fn llm_d_pd_values_are_two_tp1_prefill_and_one_tp4_decode_on_h200() {
    let (s, p) = scenario(
        "llm-d-pd-disaggregation-values.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(model(&s), "openai/gpt-oss-120b");
    assert_eq!(s.gpu, GpuRef::Catalog("H200".into()));
    assert_eq!(s.tp, 4, "the top level is the decode worker's");
    let t = s.topology.as_ref().unwrap();
    let (pre, dec) = (t.prefill.as_ref().unwrap(), t.decode.as_ref().unwrap());
    assert_eq!((pre.replicas, pre.tp), (Some(2), Some(1)));
    assert_eq!((dec.replicas, dec.tp), (Some(1), None));
    // both workers: block size 128, max_model_len 4096, NixlConnector; only prefill sets 0.95
    assert_eq!(s.engine.block_size, Some(128));
    assert_eq!(s.engine.max_model_len, Some(4096));
    assert!(s.engine.kv_transfer_config.is_some());
    assert_eq!(
        pre.engine.as_ref().and_then(|e| e.gpu_memory_utilization),
        Some(0.95)
    );
    assert_eq!(
        dec.engine.as_ref().and_then(|e| e.gpu_memory_utilization),
        None
    );
    assert_eq!(
        status(&p, "prefill: prefill.nodeSelector[gpu.nvidia.com/model]"),
        Status::Understood
    );
    assert_eq!(status(&p, "decode: --kv-events-config"), Status::Unknown);
    assert_eq!(status(&p, "decode: decode.env POD_IP"), Status::Ignored);
    s.resolve().unwrap();
}

#[test]
fn llm_d_wide_ep_deepseek_v4_is_2p1d_of_dp8_ep8() {
    // The public recipe's model (docs: tests/manifests/README.md); no node selector: the GPU
    // stays the form's (here GB200, 4 GPUs per tray as the pods request).
    let mut base = Scenario::default_scenario();
    base.gpu = GpuRef::Catalog("GB200".into());
    let (s, p) = scenario("llm-d-wide-ep-deepseek-v4-pd.yaml", &base);
    assert_eq!(model(&s), "deepseek-ai/DeepSeek-V4-Pro");
    assert_eq!(s.gpu, GpuRef::Catalog("GB200".into()));
    // $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) = 2 pods x 4 = 8, TP $TP_SIZE = 1, expert parallel
    assert_eq!((s.tp, s.dp, s.ep), (1, 8, 8));
    assert_eq!(s.kv_cache_dtype, KvCacheDtype::parse("fp8").unwrap());
    assert_eq!(s.vllm_version.as_deref(), Some("0.22.1"));
    assert_eq!(s.engine.block_size, Some(256));
    let t = s.topology.as_ref().unwrap();
    let (pre, dec) = (t.prefill.as_ref().unwrap(), t.decode.as_ref().unwrap());
    assert_eq!((pre.replicas, dec.replicas), (Some(2), Some(1)));
    let pe = pre.engine.as_ref().unwrap();
    assert_eq!(
        (pe.enforce_eager, pe.gpu_memory_utilization),
        (Some(true), Some(0.95))
    );
    let de = dec.engine.as_ref().unwrap();
    assert_eq!(
        (de.max_num_seqs, de.max_num_batched_tokens),
        (Some(512), Some(512))
    );
    assert_eq!(de.gpu_memory_utilization, Some(0.9));
    assert!(de.cudagraph_mode.is_some());
    assert_eq!(
        status(&p, "decode: resources.limits[nvidia.com/gpu]"),
        Status::Understood
    );
    assert_eq!(status(&p, "decode: env MAX_TOKENS"), Status::Understood);
    assert_eq!(
        status(&p, "decode: --kv-cache-memory-bytes="),
        Status::Ignored
    );
    assert_eq!(status(&p, "prefill: --moe-backend"), Status::NotModelled);
    assert_eq!(
        status(&p, "prefill: --data-parallel-address"),
        Status::Ignored
    );
}

#[test]
fn dynamo_llama_70b_disagg_recipe_is_2p_tp2_1d_tp4() {
    let (s, p) = scenario(
        "dynamo-llama-3-70b-disagg-single-node.yaml",
        &Scenario::default_scenario(),
    );
    // --model $MODEL_PATH: a Hugging Face cache path, read as its id
    assert_eq!(model(&s), "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic");
    assert_eq!(s.tp, 4);
    let t = s.topology.as_ref().unwrap();
    let (pre, dec) = (t.prefill.as_ref().unwrap(), t.decode.as_ref().unwrap());
    assert_eq!((pre.replicas, pre.tp), (Some(2), Some(2)));
    assert_eq!((dec.replicas, dec.tp), (Some(1), None));
    assert_eq!(s.engine.enable_prefix_caching, Some(false));
    assert_eq!(s.engine.block_size, Some(128));
    assert_eq!(
        pre.engine.as_ref().unwrap().gpu_memory_utilization,
        Some(0.95)
    );
    assert_eq!(
        dec.engine.as_ref().unwrap().gpu_memory_utilization,
        Some(0.9)
    );
    assert_eq!(
        status(&p, "prefill: --is-prefill-worker"),
        Status::Understood
    );
    assert_eq!(
        status(
            &p,
            "prefill: spec.services.VllmPrefillWorker.resources.limits[gpu]"
        ),
        Status::Understood
    );
    assert_eq!(status(&p, "decode: --served-model-name"), Status::Ignored);
    let mut h = s.clone();
    h.gpu = GpuRef::Catalog("H100-SXM".into());
    h.resolve().unwrap();
}

#[test]
fn dynamo_example_disagg_refuses_only_its_uncatalogued_model() {
    let text = read("dynamo-vllm-disagg.yaml");
    let p = parse_manifest(&text, &Scenario::default_scenario()).unwrap();
    let refusals = p.refusals();
    assert!(p.scenario.is_none());
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert!(
        refusals
            .iter()
            .all(|r| r.contains("Qwen/Qwen3-0.6B") && r.contains("config.json")),
        "{refusals:?}"
    );
    // The same manifest with a catalog model of the family is a 1P1D deployment.
    let (s, _) = {
        let p = parse_manifest(
            &text.replace("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"),
            &Scenario::default_scenario(),
        )
        .unwrap();
        (p.scenario.clone().expect("the catalog model is read"), p)
    };
    let t = s.topology.unwrap();
    assert_eq!(t.prefill.unwrap().replicas, Some(1));
    assert_eq!(t.decode.unwrap().replicas, Some(1));
}

#[test]
fn production_stack_values_follow_the_charts_template() {
    let (s, p) = scenario(
        "production-stack-values-02-basic-config.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(model(&s), "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(s.engine.max_model_len, Some(4096));
    assert_eq!(s.engine.enable_prefix_caching, Some(false));
    assert_eq!(s.engine.gpu_memory_utilization, Some(0.8));
    assert_eq!(
        status(&p, "--no-enable-chunked-prefill"),
        Status::Understood
    );
    assert_eq!(s.engine.enable_chunked_prefill, Some(false));
    assert_eq!(
        status(&p, "servingEngineSpec.modelSpec[0].requestGPU"),
        Status::Understood
    );
    let (s, p) = scenario(
        "production-stack-values-25-v100-tp2.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(model(&s), "Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(s.tp, 2);
    assert_eq!(s.engine.enforce_eager, Some(true));
    assert_eq!(s.engine.max_model_len, Some(8192));
    assert_eq!(s.vllm_version.as_deref(), Some("0.8.5"));
    assert_eq!(
        status(&p, "servingEngineSpec.modelSpec[0].vllmConfig.v0"),
        Status::NotModelled
    );
}

#[test]
fn vllm_docs_deployment_reads_its_sh_c_command() {
    // `args: [` ... `]` with the bracket under its key (accepted by Kubernetes, not by strict
    // YAML): read. Mistral-7B is not in the catalog: the only refusal, naming the fix.
    let p = parsed_on(
        "vllm-docs-k8s-mistral-7b.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(status(&p, "--max_num_batched_tokens"), Status::Understood);
    assert_eq!(status(&p, "--enable-chunked-prefill"), Status::Understood);
    assert_eq!(
        status(&p, "resources.limits[nvidia.com/gpu]"),
        Status::Ignored
    ); // not checked: no scenario
    assert_eq!(status(&p, "env HUGGING_FACE_HUB_TOKEN"), Status::Ignored);
    let r = p.refusals();
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(
        r[0].contains("Mistral-7B-Instruct-v0.3") && r[0].contains("config.json"),
        "{r:?}"
    );
}

#[test]
fn kserve_model_id_is_the_model() {
    let p = parsed_on(
        "kserve-huggingface-llama3.yaml",
        &Scenario::default_scenario(),
    );
    assert_eq!(
        status(&p, "spec.predictor.model.args --model_id"),
        Status::Understood
    );
    assert_eq!(
        status(&p, "spec.predictor.model.args --model_name"),
        Status::Ignored
    );
    // Llama 3 (8K context) is not in the catalog; the suggestion is the 3.1 release.
    let r = p.refusals();
    assert!(
        r.len() == 1 && r[0].contains("Llama-3.1-8B-Instruct"),
        "{r:?}"
    );
    let fixed = read("kserve-huggingface-llama3.yaml")
        .replace("meta-llama-3-8b-instruct", "Llama-3.1-8B-Instruct");
    let s = parse_manifest(&fixed, &Scenario::default_scenario())
        .unwrap()
        .scenario
        .unwrap();
    assert_eq!((s.tp, s.topology.unwrap().replicas), (1, Some(1)));
}

#[test]
fn too_few_gpus_per_pod_is_refused_and_servesim_lines_apply() {
    let text =
        read("production-stack-values-25-v100-tp2.yaml").replace("requestGPU: 2", "requestGPU: 1");
    let p = parse_manifest(&text, &Scenario::default_scenario()).unwrap();
    assert!(
        p.refusals()
            .iter()
            .any(|r| r.contains("fewer than tp x dp = 2")),
        "{:?}",
        p.refusals()
    );
    let text = read("production-stack-values-02-basic-config.yaml")
        + "\n# servesim: --gpu \"NVIDIA H200\"\n";
    let s = parse_manifest(&text, &Scenario::default_scenario())
        .unwrap()
        .scenario
        .unwrap();
    assert_eq!(s.gpu, GpuRef::Catalog("NVIDIA H200".into()));
}

#[test]
fn pasted_text_goes_to_the_right_reader() {
    let base = Scenario::default_scenario();
    let cmd = parse_pasted("vllm serve Qwen/Qwen3-8B -tp 2", &base).unwrap();
    assert_eq!(cmd.scenario.unwrap().tp, 2);
    let m = parse_pasted(&read("llm-d-inference-scheduling-values.yaml"), &base).unwrap();
    assert_eq!(m.scenario.unwrap().tp, 2);
    assert!(parse_pasted("apiVersion: v1\nkind: Service\n", &base)
        .unwrap_err()
        .contains("no vLLM server"));
    let big = "apiVersion: v1\n".to_string() + &"a: b\n".repeat(300_000);
    assert!(parse_pasted(&big, &base).unwrap_err().contains("1 MiB"));
}

#[test]
fn dynamo_shell_string_workers_and_a_frontend_that_runs_no_vllm() {
    // Dynamo 0.3.2: `args: ["python3 -m dynamo.vllm ... 2>&1 | tee /tmp/vllm.log"]`; the
    // Frontend's args string runs dynamo.frontend (no vLLM) and is skipped with a note.
    let text = read("dynamo-vllm-disagg-v0.3.2.yaml").replace("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B");
    let p = parse_manifest(&text, &Scenario::default_scenario()).unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("service Frontend: runs no vLLM server")),
        "{:?}",
        p.notes
    );
    // The redirection and the pipe are not arguments: nothing unknown.
    assert!(
        p.args.iter().all(|a| a.status != Status::Unknown),
        "{:?}",
        p.args
    );
    let s = p
        .scenario
        .clone()
        .unwrap_or_else(|| panic!("{:?}", p.refusals()));
    assert_eq!(model(&s), "Qwen/Qwen3-8B");
    assert_eq!(s.engine.enforce_eager, Some(true));
    let t = s.topology.unwrap();
    assert_eq!(
        (t.prefill.unwrap().replicas, t.decode.unwrap().replicas),
        (Some(1), Some(1))
    );
}

#[test]
fn truncated_and_mangled_manifests_are_errors_or_reports_never_panics() {
    let dir = format!("{}/../../tests/manifests", env!("CARGO_MANIFEST_DIR"));
    let base = Scenario::default_scenario();
    for f in std::fs::read_dir(dir).unwrap() {
        let path = f.unwrap().path();
        if path.extension().map(|e| e == "yaml") != Some(true) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let chars: Vec<char> = text.chars().collect();
        for k in 1..60 {
            let cut: String = chars[..chars.len() * k / 60].iter().collect();
            let _ = parse_manifest(&cut, &base);
            // one character swapped for a YAML indicator
            let mut m = chars.clone();
            let i = chars.len() * k / 61;
            m[i] = ['[', '{', '&', '*', ':', '"', '\'', '|'][k % 8];
            let _ = parse_manifest(&m.iter().collect::<String>(), &base);
        }
    }
}
