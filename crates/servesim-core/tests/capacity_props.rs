//! Properties of the start-up sizing, every shipped model on the main GPUs, and bad input.

use servesim_core::capacity::compute;
use servesim_core::deploy::{
    CudagraphMode, DeployError, Deployment, RawDeployment, RawEngineSettings,
};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::{find_gpu, GpuError, RawGpu};
use servesim_core::model::catalog;
use servesim_core::parallel::Parallelism;

fn dep(model: &str, gpu: &str, tp: u32, kv: KvCacheDtype, raw: RawEngineSettings) -> Deployment {
    Deployment::new(
        catalog::load(model).unwrap(),
        find_gpu(gpu).unwrap(),
        Parallelism { tp, dp: 1, ep: 1 },
        None,
        WeightPrecision::Checkpoint,
        kv,
        &raw,
    )
    .unwrap()
}

fn mml(n: i64) -> RawEngineSettings {
    RawEngineSettings {
        max_model_len: Some(n),
        ..Default::default()
    }
}

#[test]
fn more_gpu_memory_never_gives_fewer_kv_tokens() {
    let base = find_gpu("H100").unwrap();
    let mut prev = 0;
    for mib in [60_000.0, 81_080.0, 100_000.0, 143_165.0, 190_000.0] {
        let g = RawGpu {
            name: "g".into(),
            memory_visible_mib: mib,
            hbm_bandwidth_tb_s: 3.35,
            bf16_dense_tflops: 989.0,
            fp8_dense_tflops: Some(1979.0),
            fp4_dense_tflops: None,
            scaleup_unidir_gb_s: 450.0,
            scaleup_domain: 8,
            vendor: None,
        }
        .validate()
        .unwrap();
        assert!(g.memory_visible.get() > 0 && base.memory_visible.get() > 0);
        let d = Deployment::new(
            catalog::load("Qwen/Qwen3-8B").unwrap(),
            g,
            Parallelism::default(),
            None,
            WeightPrecision::Checkpoint,
            KvCacheDtype::Auto,
            &mml(32768),
        )
        .unwrap();
        let t = compute(&d, None).unwrap().kv_cache_tokens;
        assert!(t >= prev, "{mib} MiB: {t} < {prev}");
        prev = t;
    }
}

#[test]
fn fp8_kv_never_gives_fewer_tokens_than_bf16() {
    for (m, tp) in [
        ("meta-llama/Meta-Llama-3.1-8B", 1),
        ("Qwen/Qwen3-32B", 2),
        ("openai/gpt-oss-120b", 1),
        ("deepseek-ai/DeepSeek-R1", 8),
    ] {
        let gpu = if m.contains("DeepSeek") {
            "H200"
        } else {
            "H100"
        };
        let a = compute(&dep(m, gpu, tp, KvCacheDtype::Bfloat16, mml(16384)), None).unwrap();
        let b = compute(&dep(m, gpu, tp, KvCacheDtype::Fp8, mml(16384)), None).unwrap();
        assert!(b.kv_cache_tokens >= a.kv_cache_tokens, "{m}");
        assert!(b.kv_bytes_per_token < a.kv_bytes_per_token, "{m}");
    }
}

#[test]
fn more_tp_never_raises_per_gpu_weights() {
    for m in [
        "meta-llama/Meta-Llama-3.1-70B",
        "Qwen/Qwen3-235B-A22B",
        "deepseek-ai/DeepSeek-V3",
    ] {
        let mut prev = i64::MAX;
        for tp in [1, 2, 4, 8] {
            let d = dep(m, "B200", tp, KvCacheDtype::Auto, mml(8192));
            let w = compute(&d, None).unwrap().breakdown.weights.bytes;
            assert!(w <= prev, "{m} tp{tp}");
            prev = w;
        }
    }
}

#[test]
fn higher_gpu_memory_utilization_never_gives_fewer_tokens() {
    let mut prev = 0;
    for u in [0.5, 0.7, 0.85, 0.9, 0.95, 0.99] {
        let raw = RawEngineSettings {
            gpu_memory_utilization: Some(u),
            max_model_len: Some(8192),
            ..Default::default()
        };
        let r = compute(
            &dep(
                "meta-llama/Meta-Llama-3.1-8B",
                "H100",
                1,
                KvCacheDtype::Auto,
                raw,
            ),
            None,
        )
        .unwrap();
        assert!(r.kv_cache_tokens >= prev, "util {u}");
        prev = r.kv_cache_tokens;
    }
    assert!(prev > 0);
}

#[test]
fn budget_identity_holds_in_every_report() {
    let d = dep("Qwen/Qwen3-14B", "H200", 1, KvCacheDtype::Auto, mml(40960));
    let r = compute(&d, None).unwrap();
    let b = r.breakdown;
    assert_eq!(
        b.kv_available.bytes,
        b.budget.bytes - b.weights.bytes - b.activation.bytes - b.non_torch.bytes
    );
    assert!(b.kv_pool.bytes <= b.kv_available.bytes);
    assert!(b.kv_available.bytes - b.kv_pool.bytes < r.block_bytes as i64);
    assert_eq!(r.kv_cache_tokens, r.num_blocks * r.block_size as u64);
    assert!(r.log_lines[1].starts_with("GPU KV cache size: "));
}

#[test]
fn estimating_cudagraphs_subtracts_them_from_the_kv_budget() {
    let off = compute(
        &dep("Qwen/Qwen3-8B", "H100", 1, KvCacheDtype::Auto, mml(32768)),
        None,
    )
    .unwrap();
    let raw = RawEngineSettings {
        max_model_len: Some(32768),
        estimate_cudagraphs_in_profile: Some(true),
        ..Default::default()
    };
    let on = compute(
        &dep("Qwen/Qwen3-8B", "H100", 1, KvCacheDtype::Auto, raw),
        None,
    )
    .unwrap();
    assert!(on.breakdown.cudagraph_in_budget && !off.breakdown.cudagraph_in_budget);
    assert_eq!(
        off.breakdown.kv_available.bytes - on.breakdown.kv_available.bytes,
        on.breakdown.cudagraph.bytes
    );
    assert!(on.kv_cache_tokens < off.kv_cache_tokens);
}

#[test]
fn kv_cache_memory_override_replaces_the_budget() {
    let raw = RawEngineSettings {
        max_model_len: Some(8192),
        kv_cache_memory_bytes: Some(10 << 30),
        ..Default::default()
    };
    let r = compute(
        &dep(
            "meta-llama/Meta-Llama-3.1-8B",
            "H100",
            1,
            KvCacheDtype::Auto,
            raw,
        ),
        None,
    )
    .unwrap();
    assert_eq!(r.breakdown.kv_available.bytes, 10 << 30);
    // 128 KiB per token for Llama-3.1-8B bf16: 10 GiB / 128 KiB = 81,920 tokens
    assert_eq!(r.kv_cache_tokens, 81_920);
}

#[test]
fn requests_fit_counts_isl_plus_osl_and_caps_at_max_num_seqs() {
    let d = dep(
        "meta-llama/Meta-Llama-3.1-8B",
        "H100",
        1,
        KvCacheDtype::Auto,
        mml(8192),
    );
    let r = compute(
        &d,
        Some(servesim_core::capacity::RequestShape { isl: 1000, osl: 24 }),
    )
    .unwrap();
    let f = r.requests_fit.unwrap();
    // 1024 tokens = 64 blocks of 16
    assert_eq!(f.by_kv, r.num_blocks / 64);
    assert_eq!(f.at_once, f.by_kv.min(r.max_num_seqs));
}

fn smallest_fitting_tp(model: &str, gpu: &str) -> Option<(u32, u64)> {
    let is_moe = catalog::load(model).unwrap().moe.is_some();
    let layouts = [1u32, 2, 4, 8, 16, 32, 64]
        .into_iter()
        .flat_map(|tp| [(tp, 1), (tp, if is_moe { tp } else { 1 })]);
    for (tp, ep) in layouts {
        let d = match Deployment::new(
            catalog::load(model).unwrap(),
            find_gpu(gpu).unwrap(),
            Parallelism { tp, dp: 1, ep },
            None,
            WeightPrecision::Checkpoint,
            KvCacheDtype::Auto,
            &mml(32768.min(catalog::load(model).unwrap().max_position_embeddings as i64)),
        ) {
            Ok(d) => d,
            Err(_) => continue, // TP does not divide this model's heads
        };
        let r = compute(&d, None).unwrap();
        assert!(!r.log_lines.is_empty());
        if r.fits {
            return Some((tp, r.kv_cache_tokens));
        }
        assert!(
            r.vllm_error.is_some() && !r.fixes.is_empty()
                || r.breakdown.weights.bytes > r.breakdown.budget.bytes
        );
    }
    None
}

#[test]
fn every_shipped_model_answers_on_the_main_gpus() {
    for gpu in ["H100", "H200", "B200", "GB200", "MI300X"] {
        for m in catalog::ids() {
            let found = smallest_fitting_tp(m, gpu);
            assert!(found.is_some(), "{m} on {gpu}: no TP up to 64 fits");
            println!("{gpu} {m}: smallest TP {:?}", found.unwrap());
        }
    }
    for m in [
        "meta-llama/Meta-Llama-3.1-8B",
        "Qwen/Qwen3-8B",
        "Qwen/Qwen2.5-7B-Instruct",
        "meta-llama/Llama-2-7b-hf",
        "openai/gpt-oss-20b",
    ] {
        for gpu in ["H100", "H200", "B200", "GB200", "MI300X"] {
            assert_eq!(smallest_fitting_tp(m, gpu).unwrap().0, 1, "{m} on {gpu}");
        }
    }
}

#[test]
fn bad_inputs_give_typed_errors_naming_the_field() {
    let raw = |f: fn(&mut RawDeployment)| {
        let mut r = RawDeployment {
            model: "meta-llama/Meta-Llama-3.1-8B".into(),
            gpu: "H100".into(),
            ..Default::default()
        };
        f(&mut r);
        r.resolve()
    };
    assert!(matches!(
        raw(|r| r.gpu = "Z9000".into()),
        Err(DeployError::Gpu(GpuError::Unknown { .. }))
    ));
    assert_eq!(raw(|r| r.tp = Some(3)).unwrap_err().field(), "tp");
    assert_eq!(raw(|r| r.tp = Some(0)).unwrap_err().field(), "tp");
    assert_eq!(raw(|r| r.dp = Some(-2)).unwrap_err().field(), "dp");
    assert_eq!(
        raw(|r| {
            r.tp = Some(2);
            r.num_gpus = Some(3)
        })
        .unwrap_err()
        .field(),
        "num_gpus"
    );
    assert_eq!(raw(|r| r.ep = Some(2)).unwrap_err().field(), "ep"); // dense model
    assert_eq!(
        raw(|r| r.engine.gpu_memory_utilization = Some(f64::NAN))
            .unwrap_err()
            .field(),
        "gpu_memory_utilization"
    );
    assert_eq!(
        raw(|r| r.engine.gpu_memory_utilization = Some(1.5))
            .unwrap_err()
            .field(),
        "gpu_memory_utilization"
    );
    assert_eq!(
        raw(|r| r.engine.max_num_seqs = Some(-1))
            .unwrap_err()
            .field(),
        "max_num_seqs"
    );
    assert_eq!(
        raw(|r| r.engine.block_size = Some(0)).unwrap_err().field(),
        "block_size"
    );
    assert_eq!(
        raw(|r| r.engine.max_model_len = Some(10_000_000))
            .unwrap_err()
            .field(),
        "max_model_len"
    );
    assert_eq!(
        raw(|r| r.kv_cache_dtype = Some(KvCacheDtype::Fp8DsMla))
            .unwrap_err()
            .field(),
        "kv_cache_dtype"
    );
    // EP must divide the experts and equal tp*dp.
    let moe = |tp, ep| {
        RawDeployment {
            model: "Qwen/Qwen3-30B-A3B".into(),
            gpu: "H100".into(),
            tp: Some(tp),
            ep: Some(ep),
            ..Default::default()
        }
        .resolve()
    };
    assert!(moe(4, 4).is_ok());
    assert_eq!(moe(4, 2).unwrap_err().field(), "ep");
    let mix = RawDeployment {
        model: "mistralai/Mixtral-8x7B-v0.1".into(),
        gpu: "H100".into(),
        tp: Some(4),
        dp: Some(4),
        ep: Some(16),
        ..Default::default()
    }
    .resolve();
    assert_eq!(mix.unwrap_err().field(), "ep"); // 8 experts over 16 ranks
                                                // fp4 weights without fp4 tensor cores run weight-only (Marlin), with a note.
    let fp4 = RawDeployment {
        model: "meta-llama/Meta-Llama-3.1-8B".into(),
        gpu: "H100".into(),
        weight_precision: Some(WeightPrecision::Fp4),
        ..Default::default()
    }
    .resolve()
    .expect("fp4 weight-only on Hopper resolves");
    assert!(fp4.notes.iter().any(|n| n.contains("weight-only")));
    // Unknown fields are rejected.
    assert!(serde_json::from_str::<RawEngineSettings>(r#"{"gpu_mem_util": 0.9}"#).is_err());
}

#[test]
fn weights_larger_than_the_budget_still_produce_a_report() {
    let r = compute(
        &dep(
            "meta-llama/Meta-Llama-3.1-405B",
            "H100",
            1,
            KvCacheDtype::Auto,
            mml(8192),
        ),
        None,
    )
    .unwrap();
    assert!(!r.fits);
    assert!(r.reason.contains("weights alone"));
    assert_eq!(r.kv_cache_tokens, 0);
    assert!(r.fixes.iter().any(|f| f.setting == "tp"));
}

/// A quantized checkpoint served at `checkpoint` meets the GPU rules its precision meets when asked
/// for explicitly (docs/gpus.md "Format support used by deploy.rs").
#[test]
fn checkpoint_precisions_meet_the_gpu_rules() {
    let no_fp8 = RawGpu {
        name: "no-fp8".into(),
        memory_visible_mib: 143_165.0,
        hbm_bandwidth_tb_s: 4.8,
        bf16_dense_tflops: 989.0,
        fp8_dense_tflops: None,
        fp4_dense_tflops: None,
        scaleup_unidir_gb_s: 450.0,
        scaleup_domain: 8,
        vendor: None,
    }
    .validate()
    .unwrap();
    let at = |model: &str, gpu: servesim_core::gpu::GpuSpec, tp: u32| {
        Deployment::new(
            catalog::load(model).unwrap(),
            gpu,
            Parallelism { tp, dp: 1, ep: 1 },
            None,
            WeightPrecision::Checkpoint,
            KvCacheDtype::Auto,
            &mml(8192),
        )
    };
    // fp8 checkpoint, GPU without fp8: refused like --weight-precision fp8, naming the field.
    match at("deepseek-ai/DeepSeek-V3", no_fp8.clone(), 8) {
        Err(DeployError::Unsupported { field, value, fix }) => {
            assert_eq!((field, value.as_str()), ("weight_precision", "checkpoint"));
            assert!(
                fix.contains("stores fp8 weights") && fix.contains("no-fp8"),
                "{fix}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A bf16 checkpoint starts there.
    assert!(at("deepseek-ai/DeepSeek-V2-Lite", no_fp8, 1).is_ok());
    // fp8 checkpoint on Ampere: FP8 Marlin, with the note.
    let d = at("deepseek-ai/DeepSeek-V3", find_gpu("A100").unwrap(), 8).unwrap();
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("fp8 weights (the checkpoint's own weights) on Ampere")),
        "{:?}",
        d.notes
    );
    // MXFP4 experts (gpt-oss) on Hopper: weight-only, with the note; on Blackwell no note.
    let d = at("openai/gpt-oss-120b", find_gpu("H100").unwrap(), 1).unwrap();
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("fp4 weights (the checkpoint's own weights) on H100")),
        "{:?}",
        d.notes
    );
    let d = at("openai/gpt-oss-120b", find_gpu("B200").unwrap(), 1).unwrap();
    assert!(
        !d.notes.iter().any(|n| n.starts_with("fp4 weights")),
        "{:?}",
        d.notes
    );
}

/// Engine settings with `method` speculative decoding at `k` tokens (acceptance as stated).
fn spec_raw(method: &str, k: i64, model: Option<&str>) -> RawEngineSettings {
    use servesim_core::speculative::{RawSpecAcceptance, RawSpeculativeConfig};
    RawEngineSettings {
        max_model_len: Some(32768),
        speculative_config: Some(RawSpeculativeConfig {
            method: Some(method.into()),
            num_speculative_tokens: Some(k),
            model: model.map(String::from),
            ..Default::default()
        }),
        speculative_acceptance: Some(RawSpecAcceptance {
            mean_acceptance_length: Some(1.5),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn mtp_drafter_adds_sharded_weights_and_one_kv_layer_per_mtp_module() {
    // Models with MTP layers: MLA (DeepSeek-V3), DSA (GLM-5), hybrid GQA (Qwen3.5), DeepSeek-V4.
    for (model, tp) in [
        ("deepseek-ai/DeepSeek-V3", 8),
        ("zai-org/GLM-5-FP8", 8),
        ("Qwen/Qwen3.5-397B-A17B", 8),
        ("deepseek-ai/DeepSeek-V4-Flash", 8),
    ] {
        let off = dep(model, "H200", tp, KvCacheDtype::Auto, mml(32768));
        let on = dep(
            model,
            "H200",
            tp,
            KvCacheDtype::Auto,
            spec_raw("mtp", 3, None),
        );
        let m = &off.model;
        let n = m.num_mtp_layers;
        assert!(n > 0, "{model} has MTP layers");
        assert_eq!(on.drafter_mtp_layers(), n);
        let (a, b) = (compute(&off, None).unwrap(), compute(&on, None).unwrap());
        // Weights: the MTP modules sharded under the same layout, nothing else.
        let mtp_w = m
            .mtp_weight_bytes_per_gpu(WeightPrecision::Checkpoint, on.par)
            .unwrap()
            .get();
        assert!(mtp_w > 0 && mtp_w < m.weight_bytes(WeightPrecision::Checkpoint).mtp.get());
        assert_eq!(
            b.breakdown.weights.bytes,
            a.breakdown.weights.bytes + mtp_w as i64,
            "{model}"
        );
        assert_eq!(b.breakdown.drafter_weights.unwrap().bytes, mtp_w as i64);
        assert_eq!(a.breakdown.drafter_weights, None);
        assert_eq!(
            b.breakdown.kv_available.bytes,
            a.breakdown.kv_available.bytes - mtp_w as i64,
            "{model}: nothing but the weights changes the budget"
        );
        // KV: the target's spec with `n` more layers shaped like the MTP layer.
        let mut plus = m.clone();
        plus.layers
            .extend(std::iter::repeat_n(m.mtp_layer_spec(), n as usize));
        plus.num_layers += n;
        if let Some(ix) = plus.sparse_indexer.as_mut() {
            ix.indexer_layers += n;
        }
        let bs = on.engine.block_size;
        let spec = plus.kv_cache_spec(KvCacheDtype::Auto, tp, bs).unwrap();
        assert_eq!(b.block_bytes, spec.block_bytes(), "{model}");
        assert_eq!(
            b.num_blocks,
            b.breakdown.kv_available.bytes as u64 / spec.block_bytes(),
            "{model}"
        );
        assert!(b.kv_cache_tokens < a.kv_cache_tokens, "{model}");
        // num_speculative_tokens reuses the MTP layers: k does not change the sizing.
        let on1 = dep(
            model,
            "H200",
            tp,
            KvCacheDtype::Auto,
            spec_raw("mtp", 1, None),
        );
        let c = compute(&on1, None).unwrap();
        assert_eq!(
            (c.block_bytes, c.breakdown.weights),
            (b.block_bytes, b.breakdown.weights),
            "{model}"
        );
    }
}

#[test]
fn mtp_on_an_mla_model_adds_exactly_one_latent_per_token_per_mtp_layer() {
    // DeepSeek-V3 (MLA, uniform): 61 decoder layers + 1 MTP layer, one 576-element bf16
    // latent per token per layer: block_bytes = 64 x 1152 B x 62.
    let off = dep(
        "deepseek-ai/DeepSeek-V3",
        "H200",
        8,
        KvCacheDtype::Auto,
        mml(32768),
    );
    let on = dep(
        "deepseek-ai/DeepSeek-V3",
        "H200",
        8,
        KvCacheDtype::Auto,
        spec_raw("mtp", 2, None),
    );
    let (a, b) = (compute(&off, None).unwrap(), compute(&on, None).unwrap());
    let per_layer_block = on.engine.block_size as u64 * (512 + 64) * 2;
    assert_eq!(a.block_bytes, 61 * per_layer_block);
    assert_eq!(b.block_bytes, 62 * per_layer_block);
    assert_eq!(b.kv_bytes_per_token, a.kv_bytes_per_token * 62.0 / 61.0);
    assert_eq!(
        b.kv_cache_tokens,
        b.breakdown.kv_available.bytes as u64 / (62 * per_layer_block)
            * on.engine.block_size as u64
    );
}

#[test]
fn drafters_other_than_mtp_leave_the_sizing_unchanged() {
    // n-gram needs no GPU memory; EAGLE / draft-model drafters are not counted (docs/capacity.md
    // "Drafter memory"): the report equals the one without speculative decoding, byte for byte
    // (the speculative notes aside).
    let off = dep("Qwen/Qwen3-32B", "H100", 2, KvCacheDtype::Auto, mml(32768));
    let a = compute(&off, None).unwrap();
    for (method, model) in [
        ("ngram", None),
        ("eagle", Some("yuhuili/EAGLE-LLaMA3.1-Instruct-8B")),
        ("draft_model", Some("Qwen/Qwen3-8B")),
    ] {
        let Ok(d) = Deployment::new(
            catalog::load("Qwen/Qwen3-32B").unwrap(),
            find_gpu("H100").unwrap(),
            Parallelism {
                tp: 2,
                dp: 1,
                ep: 1,
            },
            None,
            WeightPrecision::Checkpoint,
            KvCacheDtype::Auto,
            &spec_raw(method, 2, model),
        ) else {
            panic!("{method} deployment")
        };
        assert_eq!(d.drafter_mtp_layers(), 0);
        let b = compute(&d, None).unwrap();
        assert_eq!(b.breakdown.weights, a.breakdown.weights, "{method}");
        assert_eq!(b.breakdown.drafter_weights, None, "{method}");
        assert_eq!(
            (b.block_bytes, b.kv_bytes_per_token),
            (a.block_bytes, a.kv_bytes_per_token),
            "{method}"
        );
    }
}

/// `--no-enable-chunked-prefill`: vLLM raises the default token budget to max_model_len (so
/// the profile run and each step take a whole prompt), keeps a stated budget, and refuses a
/// stated budget below max_model_len (`SchedulerConfig._verify_args`).
#[test]
fn chunked_prefill_off_budget_follows_vllm() {
    let off = |mnbt: Option<i64>| RawEngineSettings {
        max_model_len: Some(32768),
        enable_chunked_prefill: Some(false),
        max_num_batched_tokens: mnbt,
        ..Default::default()
    };
    let d = dep("Qwen/Qwen3-8B", "H100", 1, KvCacheDtype::Auto, off(None));
    assert!(!d.engine.enable_chunked_prefill);
    assert_eq!(d.engine.max_num_batched_tokens, 32768);
    assert!(d
        .engine
        .notes
        .iter()
        .any(|n| n.contains("chunked prefill is off")));
    let on = dep("Qwen/Qwen3-8B", "H100", 1, KvCacheDtype::Auto, mml(32768));
    assert_eq!(on.engine.max_num_batched_tokens, 8192);
    // The whole-prompt profile run costs KV memory, as it does in vLLM.
    assert!(
        compute(&d, None).unwrap().kv_cache_tokens < compute(&on, None).unwrap().kv_cache_tokens
    );
    let stated = dep(
        "Qwen/Qwen3-8B",
        "H100",
        1,
        KvCacheDtype::Auto,
        off(Some(40000)),
    );
    assert_eq!(stated.engine.max_num_batched_tokens, 40000);
    let err = Deployment::new(
        catalog::load("Qwen/Qwen3-8B").unwrap(),
        find_gpu("H100").unwrap(),
        Parallelism::default(),
        None,
        WeightPrecision::Checkpoint,
        KvCacheDtype::Auto,
        &off(Some(8192)),
    )
    .unwrap_err();
    match &err {
        DeployError::InvalidField { field, fix, .. } => {
            assert_eq!(*field, "max_num_batched_tokens");
            assert!(fix.contains("max_model_len (32768)"), "{fix}");
        }
        e => panic!("{e}"),
    }
}

/// vLLM raises the attention block of a hybrid Gated DeltaNet model until one attention page
/// holds one layer's recurrent state, and pads the state page to it. Public start-up logs of
/// Qwen3.5-35B-A3B (bf16 KV, TP1 and TP2): "Setting attention block size to 1056 tokens" and
/// "Padding mamba page size by 0.76%" (docs/capacity.md "Hybrid models' block size").
#[test]
fn hybrid_gdn_attention_block_matches_vllm_logs() {
    let m = "Qwen/Qwen3.5-35B-A3B";
    for tp in [1, 2] {
        let d = dep(
            m,
            "H200",
            tp,
            KvCacheDtype::Auto,
            RawEngineSettings::default(),
        );
        assert_eq!(d.engine.block_size, 1056, "tp {tp}");
        let (b, state, token) = d
            .model
            .hybrid_attention_block_size(KvCacheDtype::Auto, tp, 16)
            .unwrap()
            .unwrap();
        assert_eq!(b, 1056);
        let pad_pct = 100.0 * ((b as u64 * token) as f64 / state as f64 - 1.0);
        assert!((pad_pct - 0.76).abs() < 0.005, "padding {pad_pct:.3}%");
        // Prefix caching on (the default): mamba cache mode `align`, two padded state pages per
        // Gated DeltaNet layer; off: one.
        let spec = d.kv_cache_spec().unwrap();
        assert_eq!(spec.per_request_fixed_bytes, 2 * 30 * b as u64 * token);
        let off = RawEngineSettings {
            enable_prefix_caching: Some(false),
            ..Default::default()
        };
        let d_off = dep(m, "H200", tp, KvCacheDtype::Auto, off);
        let spec = d_off.kv_cache_spec().unwrap();
        assert_eq!(spec.per_request_fixed_bytes, 30 * b as u64 * token);
        assert!(d
            .engine
            .notes
            .iter()
            .any(|n| n.contains("Setting attention block size to 1056 tokens")));
    }
    // fp8 KV halves the attention bytes per token: 16 x cdiv(2,146,304, 16 x 1,024) = 2,096
    // tokens, whose page the state fills exactly (no padding).
    let d = dep(
        m,
        "H200",
        1,
        KvCacheDtype::Fp8,
        RawEngineSettings::default(),
    );
    assert_eq!(d.engine.block_size, 2096);
    assert_eq!(
        d.kv_cache_spec().unwrap().per_request_fixed_bytes,
        2 * 30 * 2_146_304
    );
    // A stated block is raised when too small (aligned to itself), kept when large enough.
    let bs = |b: i64| RawEngineSettings {
        block_size: Some(b),
        ..Default::default()
    };
    assert_eq!(
        dep(m, "H200", 1, KvCacheDtype::Auto, bs(32))
            .engine
            .block_size,
        1056
    );
    assert_eq!(
        dep(m, "H200", 1, KvCacheDtype::Auto, bs(2048))
            .engine
            .block_size,
        2048
    );
    // Models without recurrent layers keep vLLM's default.
    let d = dep(
        "Qwen/Qwen3-8B",
        "H200",
        1,
        KvCacheDtype::Auto,
        RawEngineSettings::default(),
    );
    assert_eq!(d.engine.block_size, 16);
}

/// Two public vLLM 0.24 start-up logs of Qwen3.6-35B-A3B (the Qwen3.5-35B-A3B architecture; its
/// config stands in) with fp8 KV, prefix caching on and max_model_len 131,072
/// (noonghunna/club-3090 issues #612 and #652): "Available KV cache memory: 5.98 GiB" ->
/// "GPU KV cache size: 567,978 tokens", "Maximum concurrency for 131,072 tokens per request:
/// 4.33x"; 6.01 GiB -> 569,878 tokens, 4.35x. Given the logged memory (`--kv-cache-memory`),
/// the block size (2,096), the page packing and the two `align`-mode state pages per layer
/// reproduce both token counts exactly (blocks of 10 layers x 2,096 tokens: 299 and 300; one
/// 131,072-token request: 63 attention blocks + 2 x 3 state blocks = 69).
#[test]
fn hybrid_kv_tokens_match_public_logs_given_their_memory() {
    for (gib, tokens, conc) in [(5.98, 567_978u64, 4.33), (6.01, 569_878, 4.35)] {
        let raw = RawEngineSettings {
            max_model_len: Some(131_072),
            kv_cache_memory_bytes: Some((gib * (1u64 << 30) as f64) as i64),
            enable_prefix_caching: Some(true),
            ..Default::default()
        };
        let d = dep("Qwen/Qwen3.5-35B-A3B", "H200", 1, KvCacheDtype::Fp8, raw);
        let r = compute(&d, None).unwrap();
        assert_eq!(r.block_size, 2096);
        assert_eq!(r.kv_cache_tokens_vllm2026, tokens, "{gib} GiB");
        assert!(
            (r.max_concurrency - conc).abs() < 0.005,
            "{}",
            r.max_concurrency
        );
    }
}

/// `--max-model-len auto` (`engine.max_model_len = -1`, vLLM PR #29431): the longest length
/// one request of which fits, the same `M` vLLM's error names when that length is stated
/// explicitly, and one token more needs another block that is not there.
#[test]
fn auto_max_model_len_fits_the_kv_memory_as_vllm_does() {
    // Qwen3-32B on one H100 (the llm-d campaign: 32,000 fails; the model's maximum is 40,960).
    let block = |n: i64| RawEngineSettings {
        block_size: Some(128),
        max_model_len: Some(n),
        ..Default::default()
    };
    let h100 = |raw: RawEngineSettings| {
        dep("Qwen/Qwen3-32B", "H100", 1, KvCacheDtype::Auto, raw).auto_fit_max_model_len()
    };
    let full = compute(&h100(block(40_960)), None).unwrap();
    assert!(!full.fits);
    let msg = full.vllm_error.unwrap();
    let est: u64 = msg
        .split("estimated maximum model length is ")
        .nth(1)
        .and_then(|t| t.split('.').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no estimate in: {msg}"));
    let auto = h100(block(-1));
    assert!(auto.engine.max_model_len_auto);
    assert_eq!(auto.engine.max_model_len, est);
    assert!(
        auto.engine
            .notes
            .iter()
            .any(|n| n.contains(&format!("reduced from 40960 to {est}"))),
        "{:?}",
        auto.engine.notes
    );
    let r = compute(&auto, None).unwrap();
    assert!(r.fits, "{}", r.reason);
    assert_eq!(r.max_model_len, est);
    assert!(r.log_lines.iter().any(|l| l
        == &format!("Auto-fit max_model_len: reduced from 40960 to {est} to fit in available GPU memory ({:.2} GiB available for KV cache)", r.breakdown.kv_available.gib)));
    assert!(r.max_concurrency >= 1.0 && r.max_concurrency < 1.1);
    // The boundary: stated explicitly, `est` starts and `est + 1` does not.
    assert!(compute(&h100(block(est as i64)), None).unwrap().fits);
    assert!(!compute(&h100(block(est as i64 + 1)), None).unwrap().fits);

    // A model whose whole context fits keeps it, and says so.
    let small = dep(
        "meta-llama/Meta-Llama-3.1-8B",
        "H100",
        1,
        KvCacheDtype::Auto,
        mml(-1),
    )
    .auto_fit_max_model_len();
    assert_eq!(small.engine.max_model_len, 131_072);
    assert!(small
        .engine
        .notes
        .iter()
        .any(|n| n.contains("full context length 131072 fits")));

    // Weights over the budget: nothing to fit, and vLLM's start-up error stays.
    let none = dep(
        "Qwen/Qwen3-32B",
        "H100",
        1,
        KvCacheDtype::Auto,
        RawEngineSettings {
            gpu_memory_utilization: Some(0.5),
            max_model_len: Some(-1),
            ..Default::default()
        },
    )
    .auto_fit_max_model_len();
    let r = compute(&none, None).unwrap();
    assert!(!r.fits);
    assert!(r
        .vllm_error
        .unwrap()
        .starts_with("No available memory for the cache blocks"));

    // Other negatives are refused, naming -1.
    let err = RawDeployment {
        model: "Qwen/Qwen3-32B".into(),
        gpu: "H100".into(),
        engine: mml(-2),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert_eq!(err.field(), "max_model_len");
    assert!(err.to_string().contains("-1"), "{err}");
}

/// A scenario of `model` on one H100 with `vllm_version` and extra engine JSON.
fn v0_scenario(version: &str, model: &str, engine: &str) -> servesim_core::scenario::Scenario {
    servesim_core::scenario::Scenario::from_json(&format!(
        r#"{{"version": 1, "model": {{"catalog": "{model}"}}, "gpu": {{"catalog": "H100-SXM"}},
            "tp": 1, "vllm_version": "{version}", "engine": {{{engine}}},
            "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
                "requests": {{"type": "synthetic", "input": {{"type": "constant", "tokens": 128}},
                              "output": {{"type": "constant", "tokens": 128}}}}}}}}"#
    ))
    .unwrap()
}

#[test]
fn vllm_v0_defaults_follow_the_scenarios_version() {
    // vLLM 0.6 (V0): 256 sequences; Llama-3.1-8B's 131,072 context turns chunked prefill on with
    // V0's 512-token budget ("Chunked prefill is enabled by default for models with max_model_len
    // > 32K", "Chunked prefill is enabled with max_num_batched_tokens=512"); no prefix caching.
    let e = v0_scenario("0.6.3", "meta-llama/Llama-3.1-8B-Instruct", "")
        .deployment()
        .unwrap()
        .engine;
    assert!(e.v0_defaults);
    assert_eq!((e.max_num_seqs, e.max_num_batched_tokens), (256, 512));
    assert!(e.enable_chunked_prefill && !e.enable_prefix_caching);
    assert!(e.notes.iter().any(|n| n.contains("V0")));
    // V0 replays CUDA graphs only for decode-only batches of 1, 2, 4, 8, ..., 256
    // (`_BATCH_SIZES_TO_CAPTURE`); steps with a prefill run eagerly.
    assert_eq!(e.cudagraph_mode, CudagraphMode::FullDecodeOnly);
    let sizes: Vec<u64> = [1, 2, 4].into_iter().chain((8..=256).step_by(8)).collect();
    assert_eq!(e.cudagraph_capture_sizes, sizes);
    assert_eq!(servesim_core::deploy::v0_capture_sizes(3), [1, 2, 4]);
    assert_eq!(
        servesim_core::deploy::v0_capture_sizes(20),
        [1, 2, 4, 8, 16, 24]
    );
    assert_eq!(
        servesim_core::deploy::v0_capture_sizes(1024).last(),
        Some(&256)
    );
    // A short context keeps chunked prefill off and the budget at max(max_model_len, 2048).
    for (len, budget) in [(8192, 8192), (1024, 2048), (32768, 32768)] {
        let e = v0_scenario(
            "0.7.3",
            "meta-llama/Llama-3.1-8B-Instruct",
            &format!(r#""max_model_len": {len}"#),
        )
        .deployment()
        .unwrap()
        .engine;
        assert!(!e.enable_chunked_prefill, "{len}");
        assert_eq!(e.max_num_batched_tokens, budget, "{len}");
    }
    // Prefix caching stated: V0 leaves chunked prefill off, so the budget is the whole context.
    let e = v0_scenario(
        "0.6.3",
        "meta-llama/Llama-3.1-8B-Instruct",
        r#""enable_prefix_caching": true"#,
    )
    .deployment()
    .unwrap()
    .engine;
    assert!(!e.enable_chunked_prefill && e.enable_prefix_caching);
    assert_eq!(e.max_num_batched_tokens, 131_072);
    // Stated values win over V0's defaults.
    let e = v0_scenario(
        "0.6.3",
        "meta-llama/Llama-3.1-8B-Instruct",
        r#""max_num_seqs": 1024, "enable_chunked_prefill": false"#,
    )
    .deployment()
    .unwrap()
    .engine;
    assert_eq!((e.max_num_seqs, e.max_num_batched_tokens), (1024, 131_072));
    // From 0.8 (V1) the V1 defaults of the table above apply.
    let e = v0_scenario("0.8.0", "meta-llama/Llama-3.1-8B-Instruct", "")
        .deployment()
        .unwrap()
        .engine;
    assert!(!e.v0_defaults);
    assert_eq!(e.cudagraph_mode, CudagraphMode::FullAndPiecewise);
    assert_eq!((e.max_num_seqs, e.max_num_batched_tokens), (1024, 8192));
    assert!(e.enable_chunked_prefill && e.enable_prefix_caching);
}

#[test]
fn meta_fp8_405b_weights_match_the_logged_load() {
    // vLLM 0.6.3 logged "Loading model weights took 56.7677 GB" (GiB) per GPU for
    // meta-llama/Llama-3.1-405B-FP8 at TP8, on H100 and on MI300X (dstackai/benchmarks
    // comparison/h100sxm5_vs_mi300x/raw_data/gpu-usage.md). The fbgemm_fp8 config keeps the
    // attention in bf16; ServeSim sizes the bf16 MLPs of layers 0 and 125 as fp8 (-1.2 %).
    let weights_gib = |model: &str, gpu: &str, precision: Option<WeightPrecision>| {
        let d = RawDeployment {
            model: model.into(),
            gpu: gpu.into(),
            tp: Some(8),
            weight_precision: precision,
            engine: RawEngineSettings {
                max_model_len: Some(91_680),
                ..Default::default()
            },
            ..Default::default()
        }
        .resolve()
        .unwrap();
        compute(&d, None).unwrap().breakdown.weights.gib
    };
    // V0's start-up log for dstack's offline runs (chunked prefill off, 91,680-token profile):
    // blocks, not tokens, and the CPU swap blocks of `--swap-space 4`.
    let s = servesim_core::scenario::Scenario::from_json(
        r#"{"version": 1, "model": {"catalog": "meta-llama/Llama-3.1-405B-FP8"}, "gpu": {"catalog": "H100-SXM"},
            "tp": 8, "vllm_version": "0.6.3", "engine": {"max_model_len": 91680, "enable_chunked_prefill": false},
            "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
                "requests": {"type": "synthetic", "input": {"type": "constant", "tokens": 128},
                              "output": {"type": "constant", "tokens": 128}}}}"#,
    )
    .unwrap();
    let r = compute(&s.deployment().unwrap(), None).unwrap();
    assert_eq!(
        r.log_lines,
        [
            "# GPU blocks: 5820, # CPU blocks: 4161",
            "Maximum concurrency for 91680 tokens per request: 1.02x"
        ]
    );
    for gpu in ["H100-SXM", "MI300X"] {
        let w = weights_gib("meta-llama/Llama-3.1-405B-FP8", gpu, None);
        assert!((w / 56.7677 - 1.0).abs() < 0.02, "{gpu}: {w:.2} GiB");
        // Online fp8 of every linear layer would be 16 % lighter.
        let w8 = weights_gib(
            "meta-llama/Meta-Llama-3.1-405B",
            gpu,
            Some(WeightPrecision::Fp8),
        );
        assert!(w8 < 0.86 * w, "{gpu}: {w8:.2} vs {w:.2} GiB");
    }
}

/// A multimodal checkpoint loads its vision encoder unless vLLM runs text only
/// (`--language-model-only`): the weights differ by exactly the tower's bytes on each GPU, and
/// the KV pool gives them back (docs/capacity.md "Vision encoder").
#[test]
fn the_vision_encoder_is_loaded_unless_language_model_only() {
    let text_only = || RawEngineSettings {
        language_model_only: Some(true),
        ..mml(32768)
    };
    let at = |model: &str, gpu: &str, tp: u32, raw: RawEngineSettings| {
        dep(model, gpu, tp, KvCacheDtype::Auto, raw)
    };
    for (model, gpu, tp) in [
        ("Qwen/Qwen3.5-35B-A3B", "H200", 1),
        ("Qwen/Qwen3.5-27B", "H100", 2),
        ("Qwen/Qwen3.5-397B-A17B", "H200", 8),
    ] {
        let with = at(model, gpu, tp, mml(32768));
        let without = at(model, gpu, tp, text_only());
        let tower = with
            .model
            .vision_tower
            .expect("Qwen3.5 has a Qwen3-VL vision encoder");
        let bytes = with.vision_tower_bytes_per_gpu();
        // bf16: (sharded / tp + replicated) x 2 bytes.
        assert_eq!(
            bytes,
            (tower.sharded_params.div_ceil(u64::from(tp)) + tower.replicated_params) * 2,
            "{model}"
        );
        assert_eq!(without.vision_tower_bytes_per_gpu(), 0);
        let (a, b) = (
            compute(&with, None).unwrap(),
            compute(&without, None).unwrap(),
        );
        assert_eq!(
            a.breakdown.weights.bytes - b.breakdown.weights.bytes,
            bytes as i64,
            "{model}: the weights differ by the tower"
        );
        assert!(
            a.kv_cache_tokens < b.kv_cache_tokens,
            "{model}: the tower's memory comes out of the KV pool"
        );
        assert!(a.warnings.iter().any(|w| w.contains("vision encoder")));
        assert_eq!(
            a.breakdown.vision_weights.map(|m| m.bytes),
            Some(bytes as i64)
        );
        assert_eq!(b.breakdown.vision_weights, None);
        assert!(!b.warnings.iter().any(|w| w.contains("vision encoder")));
    }
    // `--mm-encoder-tp-mode data` (vllm-project/recipes Qwen/Qwen3.5.md, "Multimodal"): the
    // whole tower on every TP rank.
    let split = at("Qwen/Qwen3.5-397B-A17B", "H200", 8, mml(32768));
    let whole = at(
        "Qwen/Qwen3.5-397B-A17B",
        "H200",
        8,
        RawEngineSettings {
            mm_encoder_data_parallel: Some(true),
            ..mml(32768)
        },
    );
    let v = split.model.vision_tower.unwrap();
    assert_eq!(whole.vision_tower_bytes_per_gpu(), v.total_params() * 2);
    assert!(whole.vision_tower_bytes_per_gpu() > split.vision_tower_bytes_per_gpu());
    // A text-only model has no tower: the flag changes nothing.
    let a = at("Qwen/Qwen3-8B", "H100", 1, mml(32768));
    let b = at("Qwen/Qwen3-8B", "H100", 1, text_only());
    assert_eq!(
        compute(&a, None).unwrap().kv_cache_tokens,
        compute(&b, None).unwrap().kv_cache_tokens
    );
}

/// gpt-oss's MXFP4 experts are padded by the MoE backend vLLM picks for the GPU
/// (docs/capacity.md "MXFP4 expert padding"): Marlin on Ampere / Ada, TRT-LLM on Blackwell and ROCm pad both
/// dimensions; Hopper's Triton kernels pad only an intermediate size off a multiple of 64.
#[test]
fn mxfp4_padding_follows_the_backend_of_the_gpu() {
    let raw = || mml(16384);
    let weights = |gpu: &str, tp: u32| {
        let d = dep("openai/gpt-oss-120b", gpu, tp, KvCacheDtype::Auto, raw());
        let r = compute(&d, None).unwrap();
        let unpadded = d
            .model
            .weight_bytes_per_gpu(WeightPrecision::Checkpoint, d.par)
            .unwrap()
            .gib();
        let pad = r.breakdown.kernel_padding.map_or(0.0, |m| m.gib);
        assert!(
            (r.breakdown.weights.gib - unpadded - pad).abs() < 0.01,
            "{gpu}: weights = checkpoint + padding"
        );
        assert_eq!(
            pad > 0.0,
            r.warnings
                .iter()
                .any(|w| w.contains("MXFP4 expert padding")),
            "{gpu}: the padding is named"
        );
        pad
    };
    let a100 = weights("A100-80GB", 1);
    let h100 = weights("H100", 1);
    let h100_tp2 = weights("H100", 2);
    let b200 = weights("B200", 1);
    let mi300 = weights("MI300X", 1);
    assert!(a100 > 5.0 && a100 < 5.3, "{a100}");
    assert_eq!(h100, 0.0);
    assert!(h100_tp2 > 0.0 && h100_tp2 < a100 / 2.0, "{h100_tp2}");
    assert!(b200 > a100 && (b200 - mi300).abs() < 1e-9, "{b200} {mi300}");
    // Other checkpoints are never padded.
    let q = dep(
        "Qwen/Qwen3-30B-A3B",
        "A100-80GB",
        1,
        KvCacheDtype::Auto,
        raw(),
    );
    assert!(compute(&q, None)
        .unwrap()
        .breakdown
        .kernel_padding
        .is_none());
}

/// vLLM >= 0.20 refuses to start a hybrid model whose `max_num_seqs` exceeds the KV pool's blocks
/// when its CUDA graphs include full ones (vllm-project/vllm#38270: "max_num_seqs (1024) exceeds
/// available Mamba cache blocks (856)" for Qwen3.6-27B-FP8 on one H100 at
/// `--gpu-memory-utilization 0.95`, vllm-project/recipes#551, which then set `--max-num-seqs`).
/// The same deployment on Qwen3.5-27B (the architecture) with online fp8: refused at the
/// version, with vLLM's message and its remedy; started before it, with piecewise graphs only,
/// at `max_num_seqs` = the blocks, and for a model without Gated DeltaNet layers.
#[test]
fn a_hybrid_model_needs_a_state_block_per_sequence_from_vllm_0_20() {
    let scenario = |model: &str, version: &str, engine: &str| {
        servesim_core::scenario::Scenario::from_json(&format!(
            r#"{{"version": 1, "model": {{"catalog": "{model}"}}, "gpu": {{"catalog": "H100-SXM"}},
                "tp": 1, "vllm_version": "{version}", "weight_precision": "fp8",
                "engine": {{"gpu_memory_utilization": 0.95{engine}}},
                "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
                    "requests": {{"type": "synthetic", "input": {{"type": "constant", "tokens": 128}},
                                  "output": {{"type": "constant", "tokens": 128}}}}}}}}"#
        ))
        .unwrap()
        .deployment()
        .unwrap()
    };
    let q = "Qwen/Qwen3.5-27B";
    let refused = compute(&scenario(q, "0.20.0", ""), None).unwrap();
    assert!(!refused.fits, "{}", refused.reason);
    let blocks = refused.num_blocks;
    assert!(blocks > 0 && blocks < 1024, "{blocks}");
    assert_eq!(
        refused.vllm_error.as_deref(),
        Some(format!(
            "max_num_seqs (1024) exceeds available Mamba cache blocks ({blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most {blocks} or increase gpu_memory_utilization."
        ).as_str())
    );
    assert!(refused.reason.contains("lower max_num_seqs to at most"));
    let fix = &refused.fixes[0];
    assert_eq!(
        (fix.setting.as_str(), fix.value.clone()),
        ("max_num_seqs", blocks.to_string())
    );
    // Within the vLLM-logged figure's reach: 856 blocks for the FP8 checkpoint of the same
    // architecture (its own exclusions and a later release's profile are not modelled).
    assert!((blocks as f64 / 856.0 - 1.0).abs() < 0.15, "{blocks}");
    // At the remedy it starts, one more sequence and it does not.
    let at = |n: u64| {
        compute(
            &scenario(q, "0.20.0", &format!(r#", "max_num_seqs": {n}"#)),
            None,
        )
        .unwrap()
    };
    let ok = at(blocks);
    assert!(ok.fits, "{}", ok.reason);
    // Fewer sequences shrink the profile run's sampler pass, so that pool holds more blocks;
    // one sequence more than those blocks is refused again.
    let edge = ok.num_blocks;
    assert!(edge >= blocks);
    let over = at(edge + 1);
    assert!(
        over.num_blocks <= edge && !over.fits,
        "{} {}",
        over.num_blocks,
        over.reason
    );
    // Before the release, with piecewise graphs only, or without Gated DeltaNet layers: no check.
    assert!(compute(&scenario(q, "0.19.1", ""), None).unwrap().fits);
    let piecewise = r#", "cudagraph_mode": "PIECEWISE""#;
    assert!(
        compute(&scenario(q, "0.20.0", piecewise), None)
            .unwrap()
            .fits
    );
    let dense = compute(
        &scenario("Qwen/Qwen3-32B", "0.20.0", r#", "max_model_len": 8192"#),
        None,
    )
    .unwrap();
    assert!(dense.fits, "{}", dense.reason);
}
