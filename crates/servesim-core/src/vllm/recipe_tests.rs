//! Real command lines from public recipes, each parsed to the scenario it means, and the round
//! trip scenario -> `vllm serve` command -> scenario.
//!
//! Sources (public repository `vllm-project/recipes`, snapshot 8959cf6):
//! - `DeepSeek/DeepSeek-V3.md` (DeepSeek-R1-0528 on 8xH200 with TP8+EP and DP8+EP; nvidia/DeepSeek-R1-FP4 on 4xB200);
//! - `Qwen/Qwen3.md` (Qwen3-235B-A22B-FP8 on MI300X, with ROCm environment variables);
//! - `OpenAI/GPT-OSS.md` (gpt-oss-120b on MI355X with `export` lines and `-cc.` compilation keys;
//!   gpt-oss-20b in `docker run ... vllm/vllm-openai`).
//! - `GLM/GLM5.md` (commit 134386f; GLM-5-FP8 on 8xH200 with MTP) with the recipe site's
//!   advanced option "max-model-len = auto" (`src/components/recipes/CommandBuilder.jsx`:
//!   `args: ["--max-model-len", "auto"]`, "Auto-size context window to what KV cache can hold").

use super::args::Status;
use super::command::{parse_command, to_bench_command, to_vllm_command};
use crate::deploy::CudagraphMode;
use crate::dtype::{KvCacheDtype, WeightPrecision};
use crate::scenario::{GpuRef, ModelRef, Scenario};

fn parsed(cmd: &str) -> (Scenario, Vec<super::ArgReport>) {
    let p = parse_command(cmd, &Scenario::default_scenario()).unwrap();
    let refusals = p.refusals();
    (
        p.scenario
            .unwrap_or_else(|| panic!("{cmd}: refused {refusals:?}")),
        p.args,
    )
}

fn model(s: &Scenario) -> &str {
    match &s.model {
        ModelRef::Catalog(id) => id,
        ModelRef::Custom(c) => &c.name,
    }
}

#[test]
fn deepseek_r1_0528_tp8_ep() {
    let (s, args) = parsed(
        "vllm serve deepseek-ai/DeepSeek-R1-0528 \\\n  --trust-remote-code \\\n  --tensor-parallel-size 8 \\\n  --enable-expert-parallel",
    );
    assert_eq!(model(&s), "deepseek-ai/DeepSeek-R1-0528");
    assert_eq!((s.tp, s.dp, s.ep), (8, 1, 8));
    assert_eq!(args[1].status, Status::Ignored); // --trust-remote-code
                                                 // the scenario resolves (R1-0528 stands on DeepSeek-R1's config) on the recipe's H200s
    let mut s = s;
    s.gpu = GpuRef::Catalog("NVIDIA H200".into());
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits, "{}", r.capacity.reason);
}

#[test]
fn deepseek_r1_0528_dp8_ep() {
    let (s, _) = parsed(
        "vllm serve deepseek-ai/DeepSeek-R1-0528 \\\n  --trust-remote-code \\\n  --data-parallel-size 8 \\\n  --enable-expert-parallel",
    );
    assert_eq!((s.tp, s.dp, s.ep), (1, 8, 8));
}

#[test]
fn nvidia_r1_fp4_on_four_b200() {
    let (s, args) = parsed(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve nvidia/DeepSeek-R1-FP4 \\\n  --trust-remote-code \\\n  --tensor-parallel-size 4 \\\n  --enable-expert-parallel",
    );
    assert_eq!(model(&s), "nvidia/DeepSeek-R1-FP4");
    assert_eq!((s.tp, s.ep), (4, 4));
    assert_eq!(args[0].arg, "CUDA_VISIBLE_DEVICES");
    assert_eq!(args[0].status, Status::Ignored);
    let m = crate::model::catalog::load(model(&s)).unwrap();
    assert_eq!(m.checkpoint.experts, crate::dtype::DType::Nvfp4);
}

#[test]
fn qwen3_235b_fp8_on_mi300x_with_rocm_variables() {
    let (s, args) = parsed(
        "VLLM_USE_V1=1 \\\nVLLM_ROCM_USE_AITER=1 \\\nVLLM_ROCM_USE_AITER_MHA=0 \\\nVLLM_V1_USE_PREFILL_DECODE_ATTENTION=1 \\\nVLLM_USE_TRITON_FLASH_ATTN=0 \\\nSAFETENSORS_FAST_GPU=1  \\\nvllm serve Qwen/Qwen3-235B-A22B-FP8 \\\n--trust-remote-code \\\n-tp 4 \\\n--disable-log-requests \\\n--swap-space 16 \\\n--distributed-executor-backend mp \\\n--max-num-batched-tokens 32768 \\\n--max-model-len 32768 \\\n--no-enable-prefix-caching \\\n--gpu-memory-utilization 0.8",
    );
    assert_eq!(model(&s), "Qwen/Qwen3-235B-A22B-FP8");
    assert_eq!(s.tp, 4);
    assert_eq!(s.engine.max_num_batched_tokens, Some(32768));
    assert_eq!(s.engine.max_model_len, Some(32768));
    assert_eq!(s.engine.enable_prefix_caching, Some(false));
    assert_eq!(s.engine.gpu_memory_utilization, Some(0.8));
    // every argument is accounted for: 6 variables, the model, 9 flags
    assert_eq!(args.len(), 16);
    let aiter = args
        .iter()
        .find(|a| a.arg == "VLLM_ROCM_USE_AITER")
        .unwrap();
    assert_eq!(aiter.status, Status::NotModelled);
    let m = crate::model::catalog::load(model(&s)).unwrap();
    assert_eq!(m.checkpoint.fp8_block, Some((128, 128)));
}

#[test]
fn gpt_oss_120b_on_mi355x_with_exports_and_compilation_keys() {
    let (s, args) = parsed(
        "export HSA_NO_SCRATCH_RECLAIM=1\nexport AMDGCN_USE_BUFFER_OPS=0\nexport VLLM_ROCM_USE_AITER=1\nexport VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4\n\nvllm serve openai/gpt-oss-120b --tensor-parallel-size=8 --attention-backend ROCM_AITER_UNIFIED_ATTN -cc.pass_config.fuse_rope_kvcache=True -cc.use_inductor_graph_partition=True --gpu-memory-utilization 0.95 --block-size=64",
    );
    assert_eq!(s.tp, 8);
    assert_eq!(s.engine.block_size, Some(64));
    assert_eq!(s.engine.gpu_memory_utilization, Some(0.95));
    assert_eq!(args.len(), 4 + 7);
    let cc: Vec<_> = args
        .iter()
        .filter(|a| {
            a.arg == "-cc.pass_config.fuse_rope_kvcache"
                || a.arg == "-cc.use_inductor_graph_partition"
        })
        .collect();
    assert_eq!(cc.len(), 2);
    assert!(cc.iter().all(|a| a.status == Status::Ignored), "{cc:?}");
    let ab = args
        .iter()
        .find(|a| a.arg == "--attention-backend")
        .unwrap();
    assert_eq!(ab.status, Status::NotModelled);
}

#[test]
fn gpt_oss_20b_in_docker() {
    let (s, args) = parsed(
        "docker run --gpus all \\\n    -p 8000:8000 \\\n    --ipc=host \\\n    vllm/vllm-openai \\\n    --model openai/gpt-oss-20b",
    );
    assert_eq!(model(&s), "openai/gpt-oss-20b");
    assert_eq!(s.tp, 1);
    assert!(args
        .iter()
        .filter(|a| a.arg.starts_with("docker"))
        .all(|a| a.status == Status::Ignored));
}

#[test]
fn glm5_fp8_on_eight_h200_with_max_model_len_auto() {
    let cmd = "vllm serve zai-org/GLM-5-FP8 \\\n     --tensor-parallel-size 8 \\\n     --speculative-config.method mtp \\\n     --speculative-config.num_speculative_tokens 3 \\\n     --tool-call-parser glm47 \\\n     --reasoning-parser glm45 \\\n     --enable-auto-tool-choice \\\n     --served-model-name glm-5-fp8 --max-model-len auto";
    let (mut s, _) = parsed(cmd);
    assert_eq!(s.engine.max_model_len, Some(-1));
    s.gpu = GpuRef::Catalog("H200".into());
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits, "{}", r.capacity.reason);
    // The resolved length is the model's maximum or the longest one request of which fits.
    let max = s.model_config().unwrap().max_position_embeddings;
    let len = r.capacity.max_model_len;
    assert!(len > 0 && len <= max);
    if len < max {
        assert!(r.capacity.max_concurrency >= 1.0 && r.capacity.max_concurrency < 1.1);
    }
    assert!(
        r.deployment
            .engine
            .notes
            .iter()
            .any(|n| n.starts_with("max_model_len auto")),
        "{:?}",
        r.deployment.engine.notes
    );
    // The command ServeSim writes says `auto`, and reads back to the same scenario.
    let out = to_vllm_command(&s);
    assert!(out.contains("--max-model-len auto"), "{out}");
    let (back, _) = parsed(&out);
    assert_eq!(back.engine.max_model_len, Some(-1));
    // vLLM's alias is case-insensitive (`AUTO`), and `-1` is the same value.
    for v in ["AUTO", "-1"] {
        let (t, _) = parsed(&format!(
            "vllm serve zai-org/GLM-5-FP8 -tp 8 --max-model-len {v}"
        ));
        assert_eq!(t.engine.max_model_len, Some(-1), "{v}");
    }
}

#[test]
fn the_issue_flags_and_ids_parse() {
    let (s, _) = parsed(
        "VLLM_USE_DEEP_GEMM=1 vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4 --quantization fp8 --max-num-seqs 128 --async-scheduling --speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'",
    );
    assert_eq!(s.tp, 4);
    assert_eq!(s.weight_precision, WeightPrecision::Fp8);
    let p = parse_command(
        "vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507 -dp 8 --enable-expert-parallel # servesim: ignored trailing comment",
        &Scenario::default_scenario(),
    )
    .unwrap();
    assert!(
        p.notes.iter().any(|n| n.contains("stands in")),
        "{:?}",
        p.notes
    );
    assert_eq!(p.scenario.unwrap().ep, 8);
}

#[test]
fn scenario_to_command_to_scenario_is_the_identity() {
    let mut cases = vec![Scenario::default_scenario()];
    let mut s = Scenario::default_scenario();
    s.model = ModelRef::Catalog("deepseek-ai/DeepSeek-R1-0528".into());
    s.gpu = GpuRef::Catalog("H200".into());
    s.tp = 4;
    s.dp = 2;
    s.ep = 8;
    // A command always states expert parallelism (`--enable-expert-parallel` or not, with
    // `--data-parallel-size`), so a scenario it round-trips states it too.
    s.enable_expert_parallel = Some(true);
    s.num_gpus = Some(16);
    s.kv_cache_dtype = KvCacheDtype::Fp8;
    s.vllm_version = Some("0.11.0".into());
    let e = &mut s.engine;
    e.max_model_len = Some(32768);
    e.max_num_seqs = Some(128);
    e.max_num_batched_tokens = Some(16384);
    e.gpu_memory_utilization = Some(0.93);
    e.block_size = Some(64);
    e.enable_prefix_caching = Some(false);
    e.cudagraph_mode = Some(CudagraphMode::FullDecodeOnly);
    e.cudagraph_capture_sizes = Some(vec![1, 2, 4, 8]);
    e.long_prefill_token_threshold = Some(4096);
    e.allow_long_max_model_len = Some(true);
    e.estimate_cudagraphs_in_profile = Some(true);
    e.all2all_backend = Some(crate::deploy::All2AllBackend::DeepepLowLatency);
    cases.push(s.clone());
    let mut s2 = Scenario::default_scenario();
    s2.weight_precision = WeightPrecision::Fp8; // bf16 checkpoint: --quantization fp8
    s2.engine.enforce_eager = Some(true);
    s2.engine.kv_cache_memory_bytes = Some(20 << 30);
    cases.push(s2);
    let mut s3 = s.clone();
    s3.weight_precision = WeightPrecision::Fp8; // fp8 checkpoint: a servesim line
    s3.ep = 1;
    s3.enable_expert_parallel = Some(false);
    cases.push(s3);
    let mut s5 = Scenario::default_scenario();
    s5.engine.speculative_config = serde_json::from_str(
        r#"{"method": "eagle3", "num_speculative_tokens": 3, "model": "some/eagle3-head"}"#,
    )
    .ok();
    s5.engine.speculative_acceptance =
        serde_json::from_str(r#"{"mean_acceptance_length": 2.5}"#).ok();
    assert!(s5.engine.speculative_acceptance.is_some());
    cases.push(s5);
    let mut s4 = Scenario::default_scenario();
    s4.weight_precision = WeightPrecision::Fp4;
    s4.gpu = GpuRef::Catalog("B200".into());
    cases.push(s4);
    for s in cases {
        let cmd = to_vllm_command(&s);
        let p = parse_command(&cmd, &Scenario::default_scenario()).unwrap();
        let refusals = p.refusals();
        let back = p.scenario.unwrap_or_else(|| panic!("{cmd}: {refusals:?}"));
        // the command carries the deployment; the workload and sweep come from the base
        let mut want = s.clone();
        want.workload = back.workload.clone();
        want.sweep = back.sweep.clone();
        assert_eq!(back, want, "{cmd}");
        let bench = to_bench_command(&s);
        assert!(
            bench.contains("vllm bench serve") && bench.contains("--random-input-len 1024"),
            "{bench}"
        );
    }
}

/// A prompt pool has no `vllm bench serve` equivalent: the exported command keeps the shared
/// prefix and says, in a comment, that its prompts were a pool sent over and over.
#[test]
fn a_prompt_pool_is_named_in_the_bench_command() {
    use crate::workload::{RawContent, RawLengthDist, RawSharedPrefix};
    let mut s = Scenario::default_scenario();
    s.workload.requests = RawContent::Synthetic {
        input: RawLengthDist::Constant { tokens: 447.0 },
        output: RawLengthDist::Constant { tokens: 248.0 },
        shared_prefix: Some(RawSharedPrefix {
            groups: 10.0,
            tokens: 100.0,
            prompts_per_group: Some(10.0),
        }),
    };
    let bench = to_bench_command(&s);
    assert!(bench.contains("--random-prefix-len 100"), "{bench}");
    assert!(
        bench.contains("# a pool of 100 prompts sent over and over")
            && bench.contains("num_prompts_per_group 10"),
        "{bench}"
    );
    let fresh = {
        let mut f = s.clone();
        if let RawContent::Synthetic { shared_prefix, .. } = &mut f.workload.requests {
            shared_prefix.as_mut().unwrap().prompts_per_group = None;
        }
        to_bench_command(&f)
    };
    assert!(!fresh.contains("a pool of"), "{fresh}");
}
