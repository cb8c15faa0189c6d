//! Properties of the step-time model: monotonicity, breakdown consistency, communication rules,
//! MoE expert-read saturation, execution modes, agreement with the model primitives, and the
//! efficiency table's validation.

use servesim_core::deploy::{All2AllBackend, CudagraphMode, Deployment, RawEngineSettings};
use servesim_core::dtype::{ComputeClass, DType, KvCacheDtype, WeightPrecision};
use servesim_core::gpu::{find_gpu, Generation};
use servesim_core::model::{catalog, AttentionSpec, LayerAttn};
use servesim_core::parallel::Parallelism;
use servesim_core::perf::gdn::{self, GdnKernel};
use servesim_core::perf::{
    compute_class_on, secs_to_ticks, Efficiencies, EfficiencyOverrides, ExecMode, PerfError,
    PrefillChunk, StepBreakdown, StepCostModel, StepWork,
};
use servesim_core::units::Ticks;

fn dep_with(model: &str, gpu: &str, par: Parallelism, raw: RawEngineSettings) -> Deployment {
    Deployment::new(
        catalog::load(model).unwrap(),
        find_gpu(gpu).unwrap(),
        par,
        None,
        WeightPrecision::Checkpoint,
        KvCacheDtype::Auto,
        &raw,
    )
    .unwrap()
}

fn dep(model: &str, gpu: &str, par: Parallelism) -> Deployment {
    dep_with(model, gpu, par, RawEngineSettings::default())
}

/// One GPU's deployment of `model` with its weights at `prec` (vLLM's defaults otherwise).
fn dep_at(model: &str, gpu: &str, prec: WeightPrecision) -> Deployment {
    Deployment::new(
        catalog::load(model).unwrap(),
        find_gpu(gpu).unwrap(),
        tp(1),
        None,
        prec,
        KvCacheDtype::Auto,
        &RawEngineSettings::default(),
    )
    .unwrap()
}

fn tp(n: u32) -> Parallelism {
    Parallelism {
        tp: n,
        dp: 1,
        ep: 1,
    }
}

fn cost(d: &Deployment) -> StepCostModel {
    StepCostModel::new(d, &Efficiencies::default_for(d.gpu.generation)).unwrap()
}

/// Small deterministic generator (no OS randomness).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// Deployments covering GQA dense, sliding windows, MoE with and without EP/DP, MLA, DSV4.
fn cases() -> Vec<Deployment> {
    vec![
        dep("meta-llama/Meta-Llama-3.1-8B", "H100", tp(1)),
        dep("meta-llama/Meta-Llama-3.1-70B", "H100", tp(4)),
        dep("openai/gpt-oss-120b", "H100", tp(2)),
        dep("Qwen/Qwen3-30B-A3B", "MI300X", tp(1)),
        dep("mistralai/Mixtral-8x7B-v0.1", "A100", tp(2)),
        dep("deepseek-ai/DeepSeek-V3", "H200", tp(8)),
        dep(
            "deepseek-ai/DeepSeek-V3",
            "H200",
            Parallelism {
                tp: 1,
                dp: 8,
                ep: 8,
            },
        ),
        dep("deepseek-ai/DeepSeek-V4-Flash", "B200", tp(4)),
        // Gated DeltaNet layers: FlashInfer's SM90 kernel, and fla's Triton kernels elsewhere.
        dep("Qwen/Qwen3.5-397B-A17B", "H200", tp(8)),
        dep("Qwen/Qwen3.5-27B", "B200", tp(1)),
    ]
}

/// A step that only prefills `ch` (no decoding sequences).
fn prefill_only(ch: &[PrefillChunk]) -> StepWork<'_> {
    StepWork {
        prefill: ch,
        decode_seqs: 0,
        decode_ctx_sum: 0,
    }
}

#[test]
fn breakdown_terms_sum_to_step_time() {
    let mut rng = Lcg(7);
    for d in cases() {
        let m = cost(&d);
        for _ in 0..50 {
            let chunks: Vec<PrefillChunk> = (0..rng.next(3))
                .map(|_| PrefillChunk {
                    past: rng.next(20_000),
                    new: 1 + rng.next(4096),
                })
                .collect();
            let n = rng.next(600);
            let w = StepWork {
                prefill: &chunks,
                decode_seqs: n,
                decode_ctx_sum: n * rng.next(30_000),
            };
            let b = m.breakdown(&w);
            assert_eq!(b.total_ticks(), m.step_time(&w), "{}", d.model.name);
            // The iterator entry point gives the same result.
            let it = chunks.iter().map(|c| PrefillChunk {
                past: c.past,
                new: c.new,
            });
            assert_eq!(m.breakdown_iter(it.clone(), n, w.decode_ctx_sum), b);
            assert_eq!(m.step_time_iter(it, n, w.decode_ctx_sum), m.step_time(&w));
            let terms = [
                b.gemm_compute,
                b.attention_compute,
                b.weight_reads,
                b.kv_reads,
                b.activations,
                b.tp_allreduce,
                b.ep_alltoall,
                b.overhead,
            ];
            assert!(terms.iter().all(|x| x.is_finite() && *x >= 0.0));
            let sum: f64 = terms.iter().sum();
            assert_eq!(sum, b.total());
            // Each roofline component contributes exactly its larger side.
            let r = b.raw;
            let want_gemm_mem = r.dense_gemm_compute.max(r.dense_weight_reads)
                + r.expert_gemm_compute.max(r.expert_weight_reads);
            let got = b.gemm_compute + b.weight_reads;
            assert!((got - want_gemm_mem).abs() <= 1e-12 * want_gemm_mem.max(1.0));
        }
    }
}

/// The lean per-step path (`step_seconds`, with its precomputed padding, per-mode overheads and
/// decode-only table) performs the same floating-point operations as `breakdown_iter` for every
/// term of the total: the two agree bit for bit on every step shape, including decode batches
/// across the whole table and past it, steps within and above the capture sizes, zero-token
/// chunks, every CUDA-graph mode and both MoE dispatch backends.
#[test]
fn lean_step_time_equals_the_breakdown_total_bit_for_bit() {
    let mut deps = cases();
    let dp2 = Parallelism {
        tp: 1,
        dp: 2,
        ep: 2,
    };
    for backend in [
        All2AllBackend::AllgatherReducescatter,
        All2AllBackend::DeepepLowLatency,
    ] {
        deps.push(dep_with(
            "Qwen/Qwen3-30B-A3B",
            "H100",
            dp2,
            RawEngineSettings {
                all2all_backend: Some(backend),
                max_num_seqs: Some(64),
                ..Default::default()
            },
        ));
    }
    for (mode, eager) in [
        (Some(CudagraphMode::FullDecodeOnly), None),
        (Some(CudagraphMode::Piecewise), None),
        (Some(CudagraphMode::Full), None),
        (None, Some(true)),
    ] {
        deps.push(dep_with(
            "meta-llama/Meta-Llama-3.1-8B",
            "H100",
            tp(2),
            RawEngineSettings {
                cudagraph_mode: mode,
                enforce_eager: eager,
                cudagraph_capture_sizes: mode.map(|_| vec![1, 3, 8, 40, 96]),
                max_num_seqs: Some(128),
                ..Default::default()
            },
        ));
    }
    let mut rng = Lcg(11);
    for d in deps {
        let m = cost(&d);
        let check = |chunks: &[PrefillChunk], n: u64, ctx: u64| {
            let b = m.breakdown_iter(chunks.iter().copied(), n, ctx);
            let secs = m.step_seconds(chunks.iter().copied(), n, ctx);
            assert_eq!(
                secs.to_bits(),
                b.total().to_bits(),
                "{} {:?} n={n} ctx={ctx} chunks={chunks:?}",
                d.model.name,
                d.engine.cudagraph_mode
            );
            assert_eq!(
                m.step_time_iter(chunks.iter().copied(), n, ctx),
                b.total_ticks()
            );
        };
        // Every decode-only batch size of the table and beyond it.
        for n in 1..=d.engine.max_num_seqs + 40 {
            check(&[], n, n * (1 + rng.next(20_000)));
        }
        for _ in 0..400 {
            let chunks: Vec<PrefillChunk> = (0..rng.next(4))
                .map(|_| PrefillChunk {
                    past: rng.next(20_000),
                    // Zero-token chunks and small ones (within the capture sizes) too.
                    new: match rng.next(3) {
                        0 => rng.next(3),
                        1 => 1 + rng.next(64),
                        _ => 1 + rng.next(4096),
                    },
                })
                .collect();
            let n = rng.next(300);
            check(&chunks, n, n * rng.next(30_000));
        }
    }
}

/// The step's rounding to whole ns is `Ticks::from_secs_f64`'s, ties away from zero included.
#[test]
fn fast_ns_rounding_equals_from_secs_f64() {
    let mut vals = vec![
        0.0,
        -0.0,
        1e-9,
        0.5e-9,
        1.5e-9,
        2.5e-9,
        0.499_999_999_999e-9,
        -1e-9,
        -0.5e-9,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        4_503_599.627_370_495,
        4_503_599.627_370_496,
        4_503_599.627_370_497,
        1e10,
        1e12,
    ];
    let mut rng = Lcg(5);
    for _ in 0..100_000 {
        // Random seconds at several scales, and exact half-nanosecond values.
        let v = rng.next(1 << 30) as f64 * 1e-12 * (1 + rng.next(1000)) as f64;
        vals.push(v);
        vals.push((rng.next(1 << 40) as f64 + 0.5) * 1e-9);
    }
    for v in vals {
        assert_eq!(secs_to_ticks(v), Ticks::from_secs_f64(v), "{v:e}");
    }
}

#[test]
fn empty_step_costs_nothing() {
    let m = cost(&dep("Qwen/Qwen3-8B", "H100", tp(1)));
    let w = StepWork::default();
    assert_eq!(m.step_time(&w).0, 0);
}

#[test]
fn more_decode_sequences_never_faster() {
    for d in cases() {
        let m = cost(&d);
        for ctx in [0u64, 1000, 60_000] {
            let mut prev = 0;
            for n in [
                1u64, 2, 3, 8, 16, 63, 64, 65, 200, 256, 511, 512, 513, 1024, 2000,
            ] {
                let t = m
                    .step_time(&StepWork {
                        prefill: &[],
                        decode_seqs: n,
                        decode_ctx_sum: n * ctx,
                    })
                    .0;
                assert!(t >= prev, "{} n={n} ctx={ctx}", d.model.name);
                prev = t;
            }
        }
        // Same total context spread over more sequences.
        let mut prev = 0;
        for n in [1u64, 4, 16, 64] {
            let t = m
                .step_time(&StepWork {
                    prefill: &[],
                    decode_seqs: n,
                    decode_ctx_sum: 64_000,
                })
                .0;
            assert!(t >= prev, "{} n={n}", d.model.name);
            prev = t;
        }
    }
}

#[test]
fn more_context_never_faster() {
    for d in cases() {
        let m = cost(&d);
        let mut prev = 0;
        for ctx in [
            0u64, 1, 100, 127, 128, 129, 1000, 4096, 8192, 32_768, 131_072,
        ] {
            let t = m
                .step_time(&StepWork {
                    prefill: &[],
                    decode_seqs: 32,
                    decode_ctx_sum: 32 * ctx,
                })
                .0;
            assert!(t >= prev, "{} decode ctx={ctx}", d.model.name);
            prev = t;
        }
        let mut prev = 0;
        for past in [0u64, 100, 1000, 10_000, 100_000] {
            let ch = [PrefillChunk { past, new: 512 }];
            let t = m.step_time(&prefill_only(&ch)).0;
            assert!(t >= prev, "{} chunk past={past}", d.model.name);
            prev = t;
        }
    }
}

#[test]
fn longer_prefill_chunk_never_faster() {
    for d in cases() {
        let m = cost(&d);
        let mut prev = 0;
        for new in [1u64, 2, 16, 100, 500, 512, 513, 1000, 2048, 8192, 16_384] {
            let ch = [PrefillChunk { past: 3000, new }];
            let t = m
                .step_time(&StepWork {
                    prefill: &ch,
                    decode_seqs: 10,
                    decode_ctx_sum: 10_000,
                })
                .0;
            assert!(t >= prev, "{} new={new}", d.model.name);
            prev = t;
        }
    }
}

#[test]
fn more_tp_never_more_gemm_flops_per_gpu() {
    let ch = [PrefillChunk { past: 0, new: 1000 }];
    let w = StepWork {
        prefill: &ch,
        decode_seqs: 50,
        decode_ctx_sum: 50_000,
    };
    for (model, tps) in [
        ("meta-llama/Meta-Llama-3.1-70B", &[1u32, 2, 4, 8][..]),
        ("Qwen/Qwen3-30B-A3B", &[1, 2, 4][..]),
        ("deepseek-ai/DeepSeek-V3", &[1, 2, 4, 8][..]),
    ] {
        let mut prev = f64::INFINITY;
        let mut prev_attn = f64::INFINITY;
        for &n in tps {
            let b = cost(&dep(model, "H200", tp(n))).breakdown(&w);
            assert!(b.work.gemm_flops() <= prev, "{model} tp={n}");
            assert!(b.work.attention_flops <= prev_attn, "{model} tp={n}");
            prev = b.work.gemm_flops();
            prev_attn = b.work.attention_flops;
        }
    }
}

/// FLOPs of DeepSeek sparse attention's indexer for one chunk of `new` prompt tokens with nothing
/// cached: causal scoring, query `c` scores `c` cached keys (itself included), all heads.
fn dsa_indexer_flops(model: &servesim_core::model::ModelConfig, new: u64) -> f64 {
    let ix = model.sparse_indexer.as_ref().unwrap();
    2.0 * (ix.n_heads * ix.head_dim) as f64
        * ix.indexer_layers as f64
        * (new * (new + 1) / 2) as f64
}

/// DeepSeek sparse attention on vLLM's FlashMLA sparse kernels (Hopper, data-centre Blackwell):
/// every query runs all `index_topk` slots at its rank's query heads padded to a multiple of 64
/// (Hopper; an fp8 cache) or 128 (Blackwell, 16-bit cache), whatever its context, at FlashMLA's
/// published throughput; other GPUs run the architecture's `min(context, index_topk)` latents at
/// the real heads.
#[test]
fn dsa_on_flashmla_sparse_runs_every_slot_at_padded_heads() {
    use servesim_core::perf::{
        dsa_kernel, DsaKernel, FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL,
        FLASHMLA_SPARSE_PREFILL_BLACKWELL, FLASHMLA_SPARSE_PREFILL_HOPPER,
    };
    let new = 1000u64;
    let ch = [PrefillChunk { past: 0, new }];
    let w = prefill_only(&ch);
    for model in ["deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5-FP8"] {
        let cfg = catalog::load(model).unwrap();
        let ix = cfg.sparse_indexer.as_ref().unwrap();
        let AttentionSpec::Mla {
            num_heads,
            kv_lora_rank,
            qk_rope_head_dim,
            ..
        } = cfg.attention
        else {
            panic!("{model}: not MLA")
        };
        let indexer = dsa_indexer_flops(&cfg, new);
        let per_slot_head =
            2.0 * (2 * kv_lora_rank + qk_rope_head_dim) as f64 * cfg.num_layers as f64;
        for (gpu, kv, multiple) in [
            ("H200", KvCacheDtype::Auto, 64u32),
            ("B200", KvCacheDtype::Auto, 128),
            ("B200", KvCacheDtype::Fp8DsMla, 64),
        ] {
            let g = find_gpu(gpu).unwrap();
            for n in [1u32, 2, 4, 8] {
                let per_rank = num_heads.div_ceil(n);
                // The kernel and its published rate: the bf16 prefill kernel for a 16-bit cache;
                // with an fp8 cache the decode kernel, and the bf16 prefill kernel for prefills
                // from 32 heads per rank.
                let (pf, dc) = match (gpu, kv) {
                    ("H200", _) => (
                        FLASHMLA_SPARSE_PREFILL_HOPPER,
                        FLASHMLA_SPARSE_PREFILL_HOPPER,
                    ),
                    (_, KvCacheDtype::Auto) => (
                        FLASHMLA_SPARSE_PREFILL_BLACKWELL,
                        FLASHMLA_SPARSE_PREFILL_BLACKWELL,
                    ),
                    _ if per_rank >= 32 => (
                        FLASHMLA_SPARSE_PREFILL_BLACKWELL,
                        FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL,
                    ),
                    _ => (
                        FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL,
                        FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL,
                    ),
                };
                assert_eq!(
                    dsa_kernel(&g, kv, per_rank),
                    DsaKernel::FlashMlaSparse {
                        head_multiple: multiple,
                        prefill_peak_fraction: pf,
                        decode_peak_fraction: dc,
                    },
                    "{gpu} {kv:?} {per_rank}"
                );
                let d = Deployment::new(
                    cfg.clone(),
                    g.clone(),
                    tp(n),
                    None,
                    WeightPrecision::Checkpoint,
                    kv,
                    &RawEngineSettings::default(),
                )
                .unwrap();
                let m = cost(&d);
                let padded = per_rank.div_ceil(multiple) * multiple;
                // The deployment says so, with the figures.
                assert!(
                    d.notes.iter().any(|n| n.starts_with(&format!(
                        "DeepSeek sparse attention on FlashMLA's sparse kernels: {per_rank} query heads per rank computed as {padded}, all {} index slots",
                        ix.topk
                    ))),
                    "{:?}",
                    d.notes
                );
                assert!(padded >= per_rank && padded % multiple == 0);
                // All index_topk slots for every query of the chunk, even the first (1 key).
                let sparse = per_slot_head * padded as f64 * ix.topk as f64 * new as f64;
                let want = sparse + indexer;
                let b = m.breakdown(&w);
                let got = b.work.attention_flops;
                assert!(
                    (got - want).abs() <= 1e-9 * want,
                    "{model} {gpu} {kv:?} tp={n}: {got} vs {want}"
                );
                // The sparse part runs at the kernel's published rate, the indexer on top.
                let at_rate = sparse / (g.bf16_flops * pf);
                assert!(
                    b.raw.prefill_attention_compute > at_rate
                        && b.raw.prefill_attention_compute < at_rate * 1.5,
                    "{model} {gpu} {kv:?} tp={n}: {} vs {at_rate}",
                    b.raw.prefill_attention_compute
                );
            }
        }
        // A GPU without the FlashMLA sparse kernels keeps the architecture's attention.
        for gpu in ["MI300X", "A100"] {
            assert_eq!(
                dsa_kernel(&find_gpu(gpu).unwrap(), KvCacheDtype::Auto, 16),
                DsaKernel::Exact
            );
        }
        let d = dep(model, "MI300X", tp(8));
        assert!(!d
            .notes
            .iter()
            .any(|n| n.contains("FlashMLA's sparse kernels")));
    }
}

#[test]
fn dsa_indexer_is_computed_whole_on_every_tp_rank() {
    // vLLM's DeepSeek sparse-attention `Indexer` is replicated ("no tensor parallel, just
    // replicated"): one GPU's attention FLOPs are the MLA part / tp plus the whole indexer.
    let new = 4096u64;
    let ch = [PrefillChunk { past: 0, new }];
    let w = prefill_only(&ch);
    // On MI300X (no FlashMLA sparse kernels) the selected-latent attention is the
    // architecture's, so the two parts separate cleanly.
    for model in ["deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5-FP8"] {
        let cfg = catalog::load(model).unwrap();
        let indexer = dsa_indexer_flops(&cfg, new);
        for n in [1u32, 2, 4, 8] {
            let m = cost(&dep(model, "MI300X", tp(n)));
            let whole = m.attention_flops_whole_model(0, new);
            assert!(indexer > 0.0 && indexer < whole, "{model}");
            let want = (whole - indexer) / n as f64 + indexer;
            let got = m.breakdown(&w).work.attention_flops;
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{model} tp={n}: {got} vs {want}"
            );
        }
    }
    // DeepSeek-V4's ratio-4 layers: `DeepseekV4Indexer` is replicated too. It scores the
    // compressed entries, `c / 4` for query position `c` (counted as continuous).
    for model in [
        "deepseek-ai/DeepSeek-V4-Flash",
        "deepseek-ai/DeepSeek-V4-Pro",
    ] {
        let cfg = catalog::load(model).unwrap();
        let AttentionSpec::DeepseekV4 {
            index_n_heads,
            index_head_dim,
            ..
        } = cfg.attention
        else {
            panic!("{model}: not DeepSeek-V4 attention")
        };
        let ratio4 = cfg
            .layers
            .iter()
            .filter(|l| matches!(l.attn, LayerAttn::Compressed { ratio: 4 }))
            .count();
        assert!(ratio4 > 0, "{model}");
        let indexer = 2.0
            * (index_n_heads * index_head_dim) as f64
            * ratio4 as f64
            * (new * (new + 1) / 2) as f64
            / 4.0;
        let m = cost(&dep(model, "H200", tp(8)));
        let whole = m.attention_flops_whole_model(0, new);
        let want = (whole - indexer) / 8.0 + indexer;
        let got = m.breakdown(&w).work.attention_flops;
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "{model}: {got} vs {want}"
        );
    }
    // A model without an indexer divides all of its attention by TP.
    let m = cost(&dep("deepseek-ai/DeepSeek-V3", "H200", tp(8)));
    let got = m.breakdown(&w).work.attention_flops;
    let want = m.attention_flops_whole_model(0, new) / 8.0;
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
}

#[test]
fn communication_is_zero_at_tp1_and_dp1() {
    for (model, gpu) in [
        ("meta-llama/Meta-Llama-3.1-8B", "H100"),
        ("Qwen/Qwen3-30B-A3B", "H100"),
        ("openai/gpt-oss-120b", "H100"),
    ] {
        let m = cost(&dep(model, gpu, tp(1)));
        let ch = [PrefillChunk { past: 0, new: 2048 }];
        let b = m.breakdown(&StepWork {
            prefill: &ch,
            decode_seqs: 100,
            decode_ctx_sum: 100_000,
        });
        assert_eq!(b.tp_allreduce, 0.0, "{model}");
        assert_eq!(b.ep_alltoall, 0.0, "{model}");
    }
}

#[test]
fn tp_allreduce_follows_the_ring_formula() {
    // Llama-3.1-70B TP4 on H100: 80 layers x 2 all-reduces of T x 8192 x 2 B;
    // ring time 2 x 3/4 x msg / (450 GB/s x bus eff) + latency per call.
    let d = dep("meta-llama/Meta-Llama-3.1-70B", "H100", tp(4));
    let e = Efficiencies::default_for(Generation::Hopper);
    let m = cost(&d);
    for t in [1u64, 512, 4096] {
        let ch = [PrefillChunk { past: 0, new: t }];
        let b = m.breakdown(&prefill_only(&ch));
        let msg = b.work.padded_tokens as f64 * 8192.0 * 2.0;
        let want =
            160.0 * (2.0 * 0.75 * msg / (450e9 * e.allreduce_bus_eff) + e.allreduce_latency_s);
        assert!(
            (b.tp_allreduce - want).abs() < 1e-9 * want,
            "{t}: {} vs {want}",
            b.tp_allreduce
        );
    }
}

/// MiniMax-M2's per-layer QK-norm normalises the TP-sharded q and k projections, so each layer
/// all-reduces the two fp32 variances of every token besides its attention and MoE outputs
/// (vLLM `MiniMaxText01RMSNormTP.forward_qk`): 62 more latency-bound calls per step at TP > 1,
/// none at TP 1, none for a model without that norm.
#[test]
fn minimax_qk_norm_adds_one_small_allreduce_per_layer_under_tp() {
    let e = Efficiencies::default_for(Generation::Hopper);
    let d = dep("MiniMaxAI/MiniMax-M2.5", "H100", tp(4));
    assert_eq!(d.model.num_tp_norm_allreduce_layers(), 62);
    assert_eq!(
        catalog::load("meta-llama/Meta-Llama-3.1-70B")
            .unwrap()
            .num_tp_norm_allreduce_layers(),
        0
    );
    let m = cost(&d);
    let ring = |bytes: f64| 2.0 * 0.75 * bytes / (450e9 * e.allreduce_bus_eff);
    for t in [1u64, 512] {
        let ch = [PrefillChunk { past: 0, new: t }];
        let b = m.breakdown(&prefill_only(&ch));
        let tok = b.work.padded_tokens as f64;
        // Attention-out and MoE-out per layer (hidden 3072, bf16), then the QK-norm variances.
        let want = 124.0 * (ring(tok * 3072.0 * 2.0) + e.allreduce_latency_s)
            + 62.0 * (ring(tok * 2.0 * 4.0) + e.allreduce_latency_s);
        assert!(
            (b.tp_allreduce - want).abs() < 1e-9 * want,
            "{t}: {} vs {want}",
            b.tp_allreduce
        );
    }
    let one = cost(&dep("MiniMaxAI/MiniMax-M2.5", "H200", tp(1)));
    let ch = [PrefillChunk { past: 0, new: 64 }];
    assert_eq!(one.breakdown(&prefill_only(&ch)).tp_allreduce, 0.0);
}

#[test]
fn data_parallel_moe_uses_dispatch_not_tp_allreduce() {
    let d = dep(
        "deepseek-ai/DeepSeek-V3",
        "H200",
        Parallelism {
            tp: 1,
            dp: 8,
            ep: 8,
        },
    );
    let b = cost(&d).breakdown(&StepWork {
        prefill: &[],
        decode_seqs: 64,
        decode_ctx_sum: 64_000,
    });
    assert_eq!(b.tp_allreduce, 0.0);
    assert!(b.ep_alltoall > 0.0);
    // Beyond the scale-up domain (2 nodes of 8) the same dispatch is slower.
    let d16 = dep(
        "deepseek-ai/DeepSeek-V3",
        "H200",
        Parallelism {
            tp: 1,
            dp: 16,
            ep: 16,
        },
    );
    let b16 = cost(&d16).breakdown(&StepWork {
        prefill: &[],
        decode_seqs: 64,
        decode_ctx_sum: 64_000,
    });
    assert!(b16.ep_alltoall > b.ep_alltoall);
}

#[test]
fn moe_expert_reads_grow_with_batch_then_saturate() {
    for (model, gpu, par) in [
        ("Qwen/Qwen3-30B-A3B", "H100", tp(1)),
        ("deepseek-ai/DeepSeek-V3", "H200", tp(8)),
        (
            "deepseek-ai/DeepSeek-V3",
            "H200",
            Parallelism {
                tp: 8,
                dp: 1,
                ep: 8,
            },
        ),
        ("openai/gpt-oss-120b", "H100", tp(1)),
    ] {
        let d = dep(model, gpu, par);
        let m = cost(&d);
        let moe = d.model.moe.unwrap();
        let e = moe.num_experts as f64;
        let k = moe.experts_per_tok as f64;
        let eb = d.model.expert_bytes(WeightPrecision::Checkpoint).unwrap().0 as f64;
        let layers = d.model.num_moe_layers() as f64;
        // All experts of all MoE layers, divided over the GPUs that share them.
        let all = e * layers * eb / (par.tp as f64);
        let mut prev = 0.0;
        for n in [1u64, 2, 4, 16, 64, 256, 1024, 4096] {
            let b = m.breakdown(&StepWork {
                prefill: &[],
                decode_seqs: n,
                decode_ctx_sum: n * 100,
            });
            let got = b.work.expert_weight_bytes;
            assert!(got >= prev, "{model} n={n}");
            assert!(got <= all * (1.0 + 1e-6), "{model} n={n}: {got} > {all}");
            // Uniform routing: expected distinct experts 1 - (1 - k/E)^T; with expert
            // parallelism the busiest GPU's count, which is at least that and reaches it at
            // large batches (docs/step-time.md §2 "Expert-parallel straggler").
            let frac = 1.0 - libm::pow(1.0 - k / e, b.work.padded_tokens as f64);
            if par.ep > 1 {
                let local = moe.num_experts.div_ceil(par.ep);
                let ranks = moe.num_experts.div_ceil(local);
                let busiest = servesim_core::perf::ep_load::expected_busiest(local, frac, ranks)
                    / local as f64;
                assert!((b.work.experts_active_fraction - busiest).abs() < 1e-9);
                assert!(
                    b.work.experts_active_fraction >= frac - 1e-12,
                    "{model} n={n}"
                );
                if n >= 1024 {
                    assert!(
                        b.work.experts_active_fraction - frac < 1e-3,
                        "{model} n={n}"
                    );
                }
            } else {
                assert!((b.work.experts_active_fraction - frac).abs() < 1e-9);
            }
            prev = got;
        }
        assert!(prev > 0.999 * all, "{model}: {prev} vs {all}");
    }
}

#[test]
fn expert_parallel_small_batches_wait_for_the_busiest_gpu() {
    // MiniMax-M2.5 on 4 H100 at 4 decode tokens: TP 4 shards every expert over the four GPUs,
    // EP 4 gives each GPU 64 whole experts. Both read the same expert bytes on average, but the
    // EP step waits for the GPU that activated the most of its own experts.
    let m = "MiniMaxAI/MiniMax-M2.5";
    let tp4 = dep(m, "H100", tp(4));
    let ep4 = dep(
        m,
        "H100",
        Parallelism {
            tp: 4,
            dp: 1,
            ep: 4,
        },
    );
    let work = StepWork {
        prefill: &[],
        decode_seqs: 4,
        decode_ctx_sum: 4 * 1000,
    };
    let (a, b) = (cost(&tp4).breakdown(&work), cost(&ep4).breakdown(&work));
    let ratio = b.work.expert_weight_bytes / a.work.expert_weight_bytes;
    // Binomial(64, f) maximum over 4 GPUs, f = 1 - (1 - 8/256)^4: 10.35 against a mean of 7.63.
    assert!((ratio - 10.3526 / 7.6328).abs() < 0.01, "{ratio}");
    assert!(b.raw.expert_weight_reads > a.raw.expert_weight_reads);
    // At a large batch every GPU reads almost all its experts: the two agree.
    let big = StepWork {
        prefill: &[],
        decode_seqs: 1024,
        decode_ctx_sum: 1024 * 1000,
    };
    let (a, b) = (cost(&tp4).breakdown(&big), cost(&ep4).breakdown(&big));
    let ratio = b.work.expert_weight_bytes / a.work.expert_weight_bytes;
    assert!((ratio - 1.0).abs() < 1e-6, "{ratio}");
}

#[test]
fn dense_models_read_all_weights_every_step() {
    let d = dep("Qwen/Qwen3-8B", "H100", tp(2));
    let m = cost(&d);
    let b1 = m.breakdown(&StepWork {
        prefill: &[],
        decode_seqs: 1,
        decode_ctx_sum: 10,
    });
    let b2 = m.breakdown(&StepWork {
        prefill: &[],
        decode_seqs: 300,
        decode_ctx_sum: 3000,
    });
    assert_eq!(b1.work.dense_weight_bytes, b2.work.dense_weight_bytes);
    assert_eq!(b1.work.expert_weight_bytes, 0.0);
    let per_gpu = d
        .model
        .weight_bytes_per_gpu(WeightPrecision::Checkpoint, d.par)
        .unwrap()
        .0 as f64;
    // Everything but the (vocab-sharded) input embedding: 151,936 x 4096 x 2 B / 2.
    let emb = 151_936.0 * 4096.0 * 2.0 / 2.0;
    assert!((b1.work.dense_weight_bytes - (per_gpu - emb)).abs() < 2.0);
}

#[test]
fn attention_terms_match_the_model_primitives() {
    let mut rng = Lcg(11);
    for id in catalog::ids() {
        let model = catalog::load(id).unwrap();
        let gpu = if id.contains("V4") { "B200" } else { "H200" };
        let Ok(d) = Deployment::new(
            model.clone(),
            find_gpu(gpu).unwrap(),
            tp(1),
            None,
            WeightPrecision::Checkpoint,
            KvCacheDtype::Auto,
            &RawEngineSettings::default(),
        ) else {
            continue;
        };
        let m = cost(&d);
        let spec = model
            .kv_cache_spec(d.kv_cache_dtype, 1, d.engine.block_size)
            .unwrap();
        let mut pairs = vec![
            (0u64, 1u64),
            (0, 2),
            (127, 1),
            (128, 5),
            (5000, 1),
            (0, 8192),
        ];
        for _ in 0..30 {
            pairs.push((rng.next(200_000), 1 + rng.next(9000)));
        }
        for (past, new) in pairs {
            let want = model.attention_core_flops(past, new);
            let got = m.attention_flops_whole_model(past, new);
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1.0),
                "{id} ({past},{new}): {got} vs {want}"
            );
            let want = model.kv_read_bytes_per_seq(&spec, past);
            let got = m.kv_read_bytes(past as f64);
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1.0),
                "{id} kv({past}): {got} vs {want}"
            );
        }
    }
}

#[test]
fn exec_mode_follows_cudagraph_settings() {
    let d = dep("Qwen/Qwen3-8B", "H100", tp(1));
    let max = *d.engine.cudagraph_capture_sizes.last().unwrap();
    assert_eq!(max, 512);
    let m = cost(&d);
    // Decode-only within the capture sizes: one full graph, padded to the next size (3 -> 4).
    assert_eq!(m.exec_mode(false, 3), (ExecMode::FullGraph, 4));
    assert_eq!(m.exec_mode(false, 512), (ExecMode::FullGraph, 512));
    assert_eq!(m.exec_mode(false, 513), (ExecMode::Eager, 513));
    // Mixed batches use the piecewise graphs.
    assert_eq!(m.exec_mode(true, 100), (ExecMode::Piecewise, 104));
    assert_eq!(m.exec_mode(true, 2048), (ExecMode::Eager, 2048));
    let eager = dep_with(
        "Qwen/Qwen3-8B",
        "H100",
        tp(1),
        RawEngineSettings {
            enforce_eager: Some(true),
            ..Default::default()
        },
    );
    assert_eq!(cost(&eager).exec_mode(false, 3), (ExecMode::Eager, 3));
    let fdo = dep_with(
        "Qwen/Qwen3-8B",
        "H100",
        tp(1),
        RawEngineSettings {
            cudagraph_mode: Some(CudagraphMode::FullDecodeOnly),
            ..Default::default()
        },
    );
    assert_eq!(cost(&fdo).exec_mode(true, 100), (ExecMode::Eager, 100));
    // Eager decode is never faster than the graph-replayed one.
    let w = StepWork {
        prefill: &[],
        decode_seqs: 8,
        decode_ctx_sum: 8000,
    };
    assert!(cost(&eager).step_time(&w) > m.step_time(&w));
}

#[test]
fn compute_class_follows_tensor_core_support() {
    let a100 = find_gpu("A100").unwrap();
    let h100 = find_gpu("H100").unwrap();
    let b200 = find_gpu("B200").unwrap();
    assert_eq!(compute_class_on(DType::Fp8, &a100), ComputeClass::Bf16);
    assert_eq!(compute_class_on(DType::Fp8, &h100), ComputeClass::Fp8);
    assert_eq!(compute_class_on(DType::Mxfp4, &h100), ComputeClass::Bf16);
    assert_eq!(compute_class_on(DType::Nvfp4, &b200), ComputeClass::Fp4);
    assert_eq!(compute_class_on(DType::Bf16, &b200), ComputeClass::Bf16);
    // fp8 weights make a compute-bound prefill faster on H100 (fp8 peak), not on A100.
    let ch = [PrefillChunk { past: 0, new: 8192 }];
    let w = prefill_only(&ch);
    let gemm = |gpu: &str, prec: WeightPrecision| {
        let d = dep_at("Qwen/Qwen3-8B", gpu, prec);
        cost(&d).breakdown(&w).raw.dense_gemm_compute
    };
    assert!(gemm("H100", WeightPrecision::Fp8) < 0.7 * gemm("H100", WeightPrecision::Bf16));
    assert_eq!(
        gemm("A100", WeightPrecision::Fp8),
        gemm("A100", WeightPrecision::Bf16)
    );
}

#[test]
fn default_tables_are_valid_and_overheads_ordered() {
    for g in [
        Generation::Ampere,
        Generation::Ada,
        Generation::Hopper,
        Generation::Blackwell,
        Generation::BlackwellUltra,
        Generation::BlackwellRtx,
        Generation::Cdna3,
        Generation::Cdna4,
        Generation::TpuV5e,
        Generation::TpuV6e,
        Generation::Custom,
    ] {
        let e = Efficiencies::default_for(g);
        e.validate().unwrap();
        assert!(e.step_overhead_graph_s <= e.step_overhead_piecewise_s);
        assert!(e.step_overhead_piecewise_s <= e.step_overhead_eager_s);
        assert!(e.layer_launch_piecewise_s <= e.layer_launch_eager_s);
        assert!(!Efficiencies::default_note(g).is_empty());
    }
}

#[test]
fn overrides_replace_named_fields_and_reject_bad_values() {
    let base = Efficiencies::default_for(Generation::Hopper);
    let o: EfficiencyOverrides =
        serde_json::from_str(r#"{"gemm_bf16": 0.5, "step_overhead_graph_s": 0.001}"#).unwrap();
    let e = base.with_overrides(&o).unwrap();
    assert_eq!(e.gemm_bf16, 0.5);
    assert_eq!(e.step_overhead_graph_s, 0.001);
    assert_eq!(e.hbm_weights, base.hbm_weights);
    // A lower GEMM efficiency makes a compute-bound step slower.
    let d = dep("meta-llama/Meta-Llama-3.1-8B", "H100", tp(1));
    let ch = [PrefillChunk { past: 0, new: 4096 }];
    let w = prefill_only(&ch);
    let slow = StepCostModel::new(&d, &e).unwrap().step_time(&w);
    let fast = StepCostModel::new(&d, &base).unwrap().step_time(&w);
    assert!(slow > fast);
    for (json, field) in [
        (r#"{"gemm_fp8": 0.0}"#, "gemm_fp8"),
        (r#"{"hbm_kv": 1.5}"#, "hbm_kv"),
        (r#"{"allreduce_latency_s": -1e-6}"#, "allreduce_latency_s"),
        (r#"{"internode_bytes_s": 0}"#, "internode_bytes_s"),
    ] {
        let o: EfficiencyOverrides = serde_json::from_str(json).unwrap();
        match base.with_overrides(&o) {
            Err(PerfError::InvalidEfficiency { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{json}: {other:?}"),
        }
    }
    assert!(serde_json::from_str::<EfficiencyOverrides>(r#"{"gemm_bf17": 0.5}"#).is_err());
    // NaN in a full table is rejected by the model constructor.
    let bad = Efficiencies {
        decode_attention: f64::NAN,
        ..base
    };
    assert!(matches!(
        StepCostModel::new(&d, &bad),
        Err(PerfError::InvalidEfficiency {
            field: "decode_attention",
            ..
        })
    ));
    // The table round-trips through JSON and lists every field once.
    let j = serde_json::to_string(&base).unwrap();
    assert_eq!(serde_json::from_str::<Efficiencies>(&j).unwrap(), base);
    let names: Vec<_> = base.fields().iter().map(|f| f.0).collect();
    let mut dedup = names.clone();
    dedup.sort_unstable();
    dedup.dedup();
    assert_eq!(names.len(), dedup.len());
}

/// A per-layer chain term (docs/step-time.md §6) with `override` on: for every case and batch,
/// the breakdown's term is `want(deployment)` (0 with the literature table), the step is no
/// faster than without it, and the lean path equals the breakdown bit for bit, with and without
/// a prefill chunk.
fn assert_chain_term_adds(
    over: &str,
    want: &dyn Fn(&Deployment) -> f64,
    term: &dyn Fn(&StepBreakdown) -> f64,
) {
    let o: EfficiencyOverrides = serde_json::from_str(over).unwrap();
    for d in cases() {
        let base = Efficiencies::default_for(d.gpu.generation);
        let on = StepCostModel::new(&d, &base.with_overrides(&o).unwrap()).unwrap();
        let off = StepCostModel::new(&d, &base).unwrap();
        let want = want(&d);
        let mut rng = Lcg(5);
        for n in [1u64, 2, 4, 8, 16, 64, 256] {
            let ctx = n * (1 + rng.next(8_000));
            let b = on.breakdown_iter(std::iter::empty(), n, ctx);
            let b0 = off.breakdown_iter(std::iter::empty(), n, ctx);
            assert_eq!(term(&b0), 0.0, "{over}");
            assert!(
                (term(&b) - want).abs() <= 1e-12,
                "{} n={n}: {over}: {} want {want}",
                d.model.name,
                term(&b)
            );
            assert!(b.total() >= b0.total() - 1e-12, "{} n={n}", d.model.name);
            assert_eq!(
                on.step_seconds(std::iter::empty(), n, ctx).to_bits(),
                b.total().to_bits(),
                "{} n={n}",
                d.model.name
            );
            let chunks = [PrefillChunk {
                past: rng.next(4000),
                new: 1 + rng.next(2000),
            }];
            let bp = on.breakdown_iter(chunks.iter().copied(), n, ctx);
            assert_eq!(
                on.step_seconds(chunks.iter().copied(), n, ctx).to_bits(),
                bp.total().to_bits()
            );
        }
    }
}

/// The MoE routing chain (docs/step-time.md §6): `moe_floor = L_moe x moe_layer_floor_s`, added
/// to the step whatever the batch (its kernels run in sequence with the grouped GEMMs); zero for
/// dense models; the lean path equals the breakdown bit for bit with it on.
#[test]
fn moe_routing_chain_adds_its_time_per_moe_layer() {
    assert_chain_term_adds(
        r#"{"moe_layer_floor_s": 80e-6}"#,
        &|d| {
            if d.model.moe.is_some() {
                d.model.num_moe_layers() as f64 * 80e-6
            } else {
                0.0
            }
        },
        &|b| b.moe_floor,
    );
}

/// The latent-attention chain (docs/step-time.md §6): `mla_floor = L_mla x mla_layer_floor_s`,
/// added to the step whatever the batch; zero for GQA models (Llama, gpt-oss, Qwen3, Mixtral),
/// every layer of DeepSeek-V3 (MLA) and DeepSeek-V4; the lean path equals the breakdown bit for
/// bit with it on.
#[test]
fn the_latent_attention_chain_adds_its_time_per_mla_layer() {
    let mut latent_cases = 0;
    for d in cases() {
        let latent = matches!(
            d.model.attention,
            AttentionSpec::Mla { .. } | AttentionSpec::DeepseekV4 { .. }
        );
        let l_mla = d.model.num_latent_attention_layers();
        assert_eq!(l_mla == d.model.num_layers, latent, "{}", d.model.name);
        assert_eq!(l_mla == 0, !latent, "{}", d.model.name);
        latent_cases += latent as usize;
    }
    assert!(latent_cases >= 2, "DeepSeek-V3 and V4 are among the cases");
    assert_chain_term_adds(
        r#"{"mla_layer_floor_s": 60e-6}"#,
        &|d| d.model.num_latent_attention_layers() as f64 * 60e-6,
        &|b| b.mla_floor,
    );
}

/// A prefill-attention field of its own (`field`, literature value = `prefill_attention`): the
/// engine's notes name it exactly when `reads` (as the CLI and the page show them), and a tenth of
/// the literature rate makes a prefill's attention ten times slower then and moves nothing
/// otherwise; the decode side never reads it. `what` names the case in failures.
fn check_prefill_attention_field(d: &Deployment, field: &str, reads: bool, what: &str) {
    let chunks = [PrefillChunk {
        past: 8192,
        new: 512,
    }];
    let w = StepWork {
        prefill: &chunks,
        decode_seqs: 4,
        decode_ctx_sum: 4 * 2048,
    };
    assert_eq!(
        d.engine.notes.iter().any(|n| n.contains(field)),
        reads,
        "{what}: {:?}",
        d.engine.notes
    );
    let base = Efficiencies::default_for(d.gpu.generation);
    let literature = base
        .fields()
        .into_iter()
        .find(|f| f.0 == field)
        .map(|f| f.2)
        .unwrap();
    assert_eq!(literature, base.prefill_attention, "{what}");
    let slow: EfficiencyOverrides =
        serde_json::from_value(serde_json::json!({ field: base.prefill_attention / 10.0 }))
            .unwrap();
    let slow = base.with_overrides(&slow).unwrap();
    let a = StepCostModel::new(d, &base).unwrap().breakdown(&w);
    let b = StepCostModel::new(d, &slow).unwrap().breakdown(&w);
    let (fa, pa) = (
        a.raw.prefill_attention_compute,
        b.raw.prefill_attention_compute,
    );
    assert!(fa > 0.0, "{what}: no prefill attention");
    if reads {
        assert!(((pa / fa) - 10.0).abs() < 1e-9, "{what}: {pa} vs {fa}");
        assert!(b.total() > a.total(), "{what}");
    } else {
        assert_eq!(pa, fa, "{what}");
        assert_eq!(b.total(), a.total(), "{what}");
    }
    assert_eq!(
        b.raw.decode_attention_compute, a.raw.decode_attention_compute,
        "{what}"
    );
}

/// vLLM V0 on ROCm with chunked prefill sends every prefill through the paged prefix-prefill
/// kernel (docs/step-time.md §3): its attention FLOPs run at `prefill_attention_paged`, and
/// nothing else in the step moves. V0 on CUDA (FlashAttention with the block table), V0 without
/// chunked prefill and V1 keep `prefill_attention`.
#[test]
fn v0_rocm_chunked_prefill_runs_attention_at_the_paged_rate() {
    let raw = |version_v0: bool, chunked: bool| RawEngineSettings {
        v0_defaults: version_v0,
        enable_chunked_prefill: Some(chunked),
        ..RawEngineSettings::default()
    };
    let model = "meta-llama/Meta-Llama-3.1-8B";
    for (gpu, v0, chunked, paged) in [
        ("MI300X", true, true, true),
        ("MI300X", true, false, false),
        ("MI300X", false, true, false),
        ("H100", true, true, false),
    ] {
        let d = dep_with(model, gpu, tp(1), raw(v0, chunked));
        let what = format!("{gpu} v0={v0} chunked={chunked}");
        assert_eq!(d.engine.v0_paged_prefill(&d.gpu), paged, "{what}");
        check_prefill_attention_field(&d, "prefill_attention_paged", paged, &what);
    }
}

/// vLLM's V1 engine runs attention-sink models (gpt-oss) through its Triton unified attention
/// kernel on NVIDIA GPUs without FlashAttention-3 (docs/step-time.md §3): their prefill attention
/// FLOPs run at `prefill_attention_triton`, and nothing else in the step moves. Hopper
/// (FlashAttention-3 with sinks), data-centre Blackwell (FlashInfer), AMD GPUs and models
/// without sinks keep `prefill_attention`.
#[test]
fn attention_sink_models_prefill_at_the_triton_rate_where_vllm_picks_triton() {
    for (model, gpu, triton) in [
        ("openai/gpt-oss-20b", "A100-80GB", true),
        ("openai/gpt-oss-20b", "L40S", true),
        ("openai/gpt-oss-20b", "RTX-PRO-6000", true),
        ("openai/gpt-oss-20b", "H100-SXM", false),
        ("openai/gpt-oss-20b", "B200", false),
        ("openai/gpt-oss-20b", "MI300X", false),
        ("meta-llama/Meta-Llama-3.1-8B", "A100-80GB", false),
    ] {
        let d = dep(model, gpu, tp(1));
        let what = format!("{model} on {gpu}");
        assert_eq!(
            d.engine.triton_unified_prefill(&d.model, &d.gpu),
            triton,
            "{what}"
        );
        check_prefill_attention_field(&d, "prefill_attention_triton", triton, &what);
    }
    // vLLM's V0 engine (which never ran gpt-oss) is not routed there.
    let v0 = RawEngineSettings {
        v0_defaults: true,
        ..RawEngineSettings::default()
    };
    let d = dep_with("openai/gpt-oss-20b", "A100-80GB", tp(1), v0);
    assert!(!d.engine.triton_unified_prefill(&d.model, &d.gpu));
}

/// `gemm_weight_only` (docs/step-time.md §2) is read by the deployments whose linear layers
/// dequantise their weights in the GEMM, and only by them: int4 / MXFP4 / fp8 weights on GPUs
/// without tensor cores for them, AWQ anywhere. A fitted value below 1 slows such a prefill and
/// leaves a bf16 model's alone.
#[test]
fn weight_only_gemms_are_the_deployments_that_dequantise() {
    let chunks = [PrefillChunk { past: 0, new: 2048 }];
    let w = StepWork {
        prefill: &chunks,
        decode_seqs: 0,
        decode_ctx_sum: 0,
    };
    use WeightPrecision::{Checkpoint, Fp8, Int4};
    for (model, gpu, prec, weight_only) in [
        ("openai/gpt-oss-20b", "A100-80GB", Checkpoint, true),
        ("openai/gpt-oss-20b", "H100-SXM", Checkpoint, true),
        ("openai/gpt-oss-20b", "B200", Checkpoint, false),
        ("Qwen/Qwen3-14B", "H100-SXM", Int4, true),
        ("Qwen/Qwen3-14B", "A100-80GB", Fp8, true),
        ("Qwen/Qwen3-14B", "H100-SXM", Fp8, false),
        ("Qwen/Qwen3-14B", "A100-80GB", Checkpoint, false),
    ] {
        let d = dep_at(model, gpu, prec);
        assert_eq!(
            servesim_core::perf::runs_weight_only_gemms(&d),
            weight_only,
            "{model} {prec:?} on {gpu}"
        );
        let base = Efficiencies::default_for(d.gpu.generation);
        let slow: EfficiencyOverrides =
            serde_json::from_value(serde_json::json!({ "gemm_weight_only": 0.5 })).unwrap();
        let slow = base.with_overrides(&slow).unwrap();
        let a = StepCostModel::new(&d, &base).unwrap().breakdown(&w).total();
        let b = StepCostModel::new(&d, &slow).unwrap().breakdown(&w).total();
        if weight_only {
            assert!(b > a, "{model} {prec:?} on {gpu}: {b} vs {a}");
        } else {
            assert_eq!(b, a, "{model} {prec:?} on {gpu}");
        }
    }
}

/// vLLM V0 on ROCm runs fp8 linears with per-row scales (Meta's fbgemm_fp8 Llama-3.1-405B)
/// through an unfused fallback whose per-call time adds to every eager step
/// (docs/step-time.md §6, `fp8_unfused_launch_s`): 2 calls per layer whose MLP is fp8. Nothing
/// moves for a graph step, a per-tensor checkpoint (AMD's Quark release runs as the bf16 config
/// served at fp8), V1, or CUDA; and the literature tables have the term off.
#[test]
fn v0_rocm_unfused_fp8_calls_add_to_eager_steps() {
    let raw = |v0: bool, eager: bool| RawEngineSettings {
        v0_defaults: v0,
        enforce_eager: Some(eager),
        ..RawEngineSettings::default()
    };
    let w = StepWork {
        prefill: &[],
        decode_seqs: 4,
        decode_ctx_sum: 4 * 2048,
    };
    let per_call = 400e-6;
    let on: EfficiencyOverrides =
        serde_json::from_value(serde_json::json!({ "fp8_unfused_launch_s": per_call })).unwrap();
    let meta = "meta-llama/Llama-3.1-405B-Instruct-FP8";
    for (model, prec, gpu, v0, eager, calls) in [
        (
            meta,
            WeightPrecision::Checkpoint,
            "MI300X",
            true,
            true,
            2.0 * 126.0,
        ),
        (
            meta,
            WeightPrecision::Checkpoint,
            "MI300X",
            true,
            false,
            0.0,
        ),
        (
            meta,
            WeightPrecision::Checkpoint,
            "MI300X",
            false,
            true,
            0.0,
        ),
        (meta, WeightPrecision::Checkpoint, "H100", true, true, 0.0),
        (meta, WeightPrecision::Bf16, "MI300X", true, true, 0.0),
        (
            "meta-llama/Meta-Llama-3.1-405B",
            WeightPrecision::Fp8,
            "MI300X",
            true,
            true,
            0.0,
        ),
    ] {
        let mut d = dep_with(
            model,
            gpu,
            Parallelism {
                tp: 8,
                dp: 1,
                ep: 1,
            },
            raw(v0, eager),
        );
        d.weight_precision = prec;
        let base = Efficiencies::default_for(d.gpu.generation);
        assert_eq!(
            base.fp8_unfused_launch_s, 0.0,
            "off in the literature table"
        );
        let slow = base.with_overrides(&on).unwrap();
        let a = StepCostModel::new(&d, &base).unwrap().breakdown(&w);
        let b = StepCostModel::new(&d, &slow).unwrap().breakdown(&w);
        let added = b.total() - a.total();
        assert!(
            (added - calls * per_call).abs() < 1e-9,
            "{model} {prec:?} {gpu} v0={v0} eager={eager}: added {added} s, expected {calls} calls"
        );
        assert!(
            ((b.overhead - a.overhead) - added).abs() < 1e-12,
            "it is overhead"
        );
        assert!(
            (b.raw.unfused_fp8 - added).abs() < 1e-12,
            "and reported as such"
        );
        assert_eq!(a.raw.unfused_fp8, 0.0);
    }
}

/// One Gated DeltaNet layer's kernel time for prefill chunks of `news` tokens, without the FLOP
/// comparison (`gdn::GdnPrefill::layer_s`'s formula written out).
fn gdn_layer_s(k: GdnKernel, heads: f64, s_per_chunk_head: f64, news: &[u64]) -> f64 {
    let c: Vec<f64> = news.iter().map(|n| n.div_ceil(64) as f64).collect();
    let max = c.iter().cloned().fold(0.0, f64::max);
    let sum: f64 = c.iter().sum();
    k.fixed_s + (k.chain_s_per_chunk * max).max(s_per_chunk_head * sum * heads)
}

#[test]
fn gated_deltanet_prefill_pays_its_kernels_chunk_chain() {
    assert_eq!(
        gdn::kernel_for(&find_gpu("H200").unwrap()),
        gdn::FLASHINFER_SM90
    );
    for g in ["A100", "L40S", "B200", "MI300X"] {
        assert_eq!(
            gdn::kernel_for(&find_gpu(g).unwrap()),
            gdn::FLA_TRITON,
            "{g}"
        );
    }
    // Qwen3.5-397B at TP8 on H200: 45 Gated DeltaNet layers, 64 / 8 = 8 value heads per GPU.
    let d = dep("Qwen/Qwen3.5-397B-A17B", "H200", tp(8));
    let m = cost(&d);
    let layers = d.model.num_linear_attention_layers() as f64;
    assert_eq!(layers, 45.0);
    let k = gdn::FLASHINFER_SM90;
    let flop_s = |tokens: u64| {
        let e = Efficiencies::default_for(d.gpu.generation);
        tokens as f64 * d.model.linear_attention_flops_per_token()
            / 8.0
            / (d.gpu.bf16_flops * e.prefill_attention)
    };
    for news in [&[8192u64][..], &[4096, 4096], &[1024; 8], &[100, 3000, 64]] {
        let chunks: Vec<PrefillChunk> = news
            .iter()
            .map(|&new| PrefillChunk { past: 0, new })
            .collect();
        let b = m.breakdown(&prefill_only(&chunks));
        let tokens: u64 = news.iter().sum();
        let want =
            layers * (gdn_layer_s(k, 8.0, k.s_per_chunk_head, news) - flop_s(tokens)).max(0.0);
        assert!(
            (b.raw.gdn_prefill - want).abs() <= 1e-12 + 1e-9 * want,
            "{news:?}: {} vs {want}",
            b.raw.gdn_prefill
        );
        // In the prefill attention's compute side, which is the larger side here.
        assert!(b.raw.gdn_prefill < b.raw.prefill_attention_compute);
        assert!(b.attention_compute >= b.raw.prefill_attention_compute);
    }
    // One sequence of 8,192 tokens: its 128 chunks in order, 45 x 128 x 2.9 us less the FLOPs.
    let one = m.breakdown(&prefill_only(&[PrefillChunk { past: 0, new: 8192 }]));
    assert!(one.raw.gdn_prefill > 0.9 * 45.0 * 128.0 * 2.9e-6);
    // The same tokens as two sequences: half the chain.
    let two = m.breakdown(&prefill_only(&[
        PrefillChunk { past: 0, new: 4096 },
        PrefillChunk { past: 0, new: 4096 },
    ]));
    assert!(two.raw.gdn_prefill < 0.55 * one.raw.gdn_prefill);
    // Decodes run the recurrent kernel (its state reads), not the chunked one.
    let decode = m.breakdown(&StepWork {
        prefill: &[],
        decode_seqs: 64,
        decode_ctx_sum: 64 * 2000,
    });
    assert_eq!(decode.raw.gdn_prefill, 0.0);
    // A model without Gated DeltaNet layers pays nothing.
    let llama = cost(&dep("meta-llama/Meta-Llama-3.1-8B", "H100", tp(1)));
    let b = llama.breakdown(&prefill_only(&[PrefillChunk { past: 0, new: 8192 }]));
    assert_eq!(b.raw.gdn_prefill, 0.0);
    // fla's kernels on the B200: the H100's per-(chunk, head) time scaled by the bf16 peaks.
    let d = dep("Qwen/Qwen3.5-27B", "B200", tp(1));
    let m = cost(&d);
    let la = d.model.linear_attention.as_ref().unwrap();
    let heads = la.num_value_heads as f64;
    let per = gdn::FLA_TRITON.s_per_chunk_head * 989.4e12 / d.gpu.bf16_flops;
    let e = Efficiencies::default_for(d.gpu.generation);
    let news = [8192u64, 8192];
    let flops = 16384.0 * d.model.linear_attention_flops_per_token()
        / (d.gpu.bf16_flops * e.prefill_attention);
    let want = d.model.num_linear_attention_layers() as f64
        * (gdn_layer_s(gdn::FLA_TRITON, heads, per, &news) - flops).max(0.0);
    let chunks = [PrefillChunk { past: 0, new: 8192 }; 2];
    let got = m.breakdown(&prefill_only(&chunks)).raw.gdn_prefill;
    assert!(
        got > 0.0 && (got - want).abs() <= 1e-12 + 1e-9 * want,
        "{got} vs {want}"
    );
}

/// Speculation adds work and never removes any: a speculative step costs at least the step of the
/// same prefill chunks and decodes without speculation, with or without drafts to verify. The
/// speculative path prices attention the way `step_seconds` does, including FlashMLA's sparse
/// kernels (DeepSeek sparse attention) and the Gated DeltaNet chunk chain, which it once left
/// out, so that a GLM-5 prefill of 8,192 tokens cost half as much with MTP as without it.
#[test]
fn a_speculative_step_never_costs_less_than_the_same_step_without_speculation() {
    use servesim_core::engine::SpecStep;
    use servesim_core::speculative::{RawSpecAcceptance, RawSpeculativeConfig};
    let mtp = |k: i64| RawEngineSettings {
        speculative_config: Some(RawSpeculativeConfig {
            method: Some("mtp".into()),
            num_speculative_tokens: Some(k),
            ..RawSpeculativeConfig::default()
        }),
        speculative_acceptance: Some(RawSpecAcceptance {
            mean_acceptance_length: Some(1.5),
            ..RawSpecAcceptance::default()
        }),
        ..RawEngineSettings::default()
    };
    let cases = [
        ("zai-org/GLM-5-FP8", "H200", 8, true), // MLA + DeepSeek sparse attention
        ("deepseek-ai/DeepSeek-V3.2", "H200", 8, true), // the same, DeepSeek's
        ("Qwen/Qwen3.5-397B-A17B", "H200", 8, false), // Gated DeltaNet + full attention
        ("deepseek-ai/DeepSeek-V3", "H200", 8, false), // dense MLA
    ];
    let mut rng = Lcg(11);
    for (model, gpu, n, sparse) in cases {
        for k in [1i64, 3] {
            let plain = cost(&dep(model, gpu, tp(n)));
            let spec = cost(&dep_with(model, gpu, tp(n), mtp(k)));
            for _ in 0..40 {
                let chunks: Vec<PrefillChunk> = (0..rng.next(3))
                    .map(|_| PrefillChunk {
                        past: rng.next(20_000),
                        new: 1 + rng.next(8192),
                    })
                    .collect();
                let decodes = rng.next(64);
                let ctx = decodes * (1 + rng.next(16_000));
                let base = plain.step_seconds(chunks.iter().copied(), decodes, ctx);
                for drafts in [0, decodes * k as u64] {
                    let s = SpecStep {
                        draft_tokens: drafts,
                        decodes_with_drafts: if drafts > 0 { decodes as u32 } else { 0 },
                        num_speculative_tokens: k as u32,
                    };
                    let with = spec.spec_step_seconds(chunks.iter().copied(), decodes, ctx, &s);
                    assert!(
                        with >= base,
                        "{model} k={k}: {chunks:?} + {decodes} decodes, {drafts} drafts: {with} s < {base} s"
                    );
                }
            }
            // The prefill that exposed it: one 8,192-token chunk.
            let one = [PrefillChunk { past: 0, new: 8192 }];
            let base = plain.step_seconds(one.iter().copied(), 0, 0);
            let s = SpecStep {
                draft_tokens: 0,
                decodes_with_drafts: 0,
                num_speculative_tokens: k as u32,
            };
            let with = spec.spec_step_seconds(one.iter().copied(), 0, 0, &s);
            assert!(with >= base, "{model}: {with} < {base}");
            if sparse {
                // Only the drafter's pass over the chunk is added: the MTP layer's share of a
                // target layer, a small fraction of the step.
                assert!(with < 1.2 * base, "{model}: {with} vs {base}");
            }
        }
    }
}

/// The linear-attention layers' recurrent state (Gated DeltaNet: `2 x per_request_fixed_bytes`
/// read and written per decoding sequence per step) moves at `hbm_state`, the paged KV at `hbm_kv`
/// (docs/step-time.md §2): halving either fraction adds exactly its own share of the decode KV
/// time, and a model without such layers never reads `hbm_state`.
#[test]
fn recurrent_state_moves_at_its_own_bandwidth_fraction() {
    let w = StepWork {
        prefill: &[],
        decode_seqs: 64,
        decode_ctx_sum: 64 * 4096,
    };
    let halve = |e: &Efficiencies, field: &str, v: f64| -> Efficiencies {
        let o: EfficiencyOverrides =
            serde_json::from_value(serde_json::json!({ field: v / 2.0 })).unwrap();
        e.with_overrides(&o).unwrap()
    };
    let d = dep("Qwen/Qwen3.5-397B-A17B", "H200", tp(8));
    let base = Efficiencies::default_for(d.gpu.generation);
    assert_eq!(base.hbm_state, base.hbm_kv, "literature: state as paged KV");
    let a = StepCostModel::new(&d, &base).unwrap().breakdown(&w);
    let s = StepCostModel::new(&d, &halve(&base, "hbm_state", base.hbm_state))
        .unwrap()
        .breakdown(&w);
    // `hbm_kv` alone carries the state with it (scenarios written before the split keep their
    // numbers); stated apart, each moves its own bytes.
    let both = StepCostModel::new(&d, &halve(&base, "hbm_kv", base.hbm_kv))
        .unwrap()
        .breakdown(&w);
    let kv_only: EfficiencyOverrides = serde_json::from_value(
        serde_json::json!({ "hbm_kv": base.hbm_kv / 2.0, "hbm_state": base.hbm_state }),
    )
    .unwrap();
    let k = StepCostModel::new(&d, &base.with_overrides(&kv_only).unwrap())
        .unwrap()
        .breakdown(&w);
    assert!((both.raw.decode_kv_reads / a.raw.decode_kv_reads - 2.0).abs() < 1e-9);
    let (ta, ts, tk) = (
        a.raw.decode_kv_reads,
        s.raw.decode_kv_reads,
        k.raw.decode_kv_reads,
    );
    // The state's share of the decode KV bytes, from the model's KV spec on one GPU (one state
    // page per layer is read and written; prefix caching's second page only holds memory).
    let spec = d
        .model
        .kv_cache_spec(d.kv_cache_dtype, d.par.tp, d.engine.block_size)
        .unwrap();
    let state = 2.0 * spec.per_request_fixed_bytes as f64;
    assert!(state > 0.0, "Qwen3.5 keeps a recurrent state");
    let m = cost(&d);
    let per_seq = m.kv_read_bytes(4096.0) + spec.bytes_per_token();
    let share = state / per_seq;
    assert!(share > 0.0 && share < 1.0, "{share}");
    assert!(((ts - ta) / ta - share).abs() < 1e-9, "{ts} {ta} {share}");
    assert!(
        ((tk - ta) / ta - (1.0 - share)).abs() < 1e-9,
        "{tk} {ta} {share}"
    );
    // Both parts together: doubling each adds up to the whole.
    assert!(((ts - ta) + (tk - ta) - ta).abs() < 1e-12 * ta.max(1.0));
    // A model without recurrent state: `hbm_state` moves nothing, bit for bit.
    let d = dep("meta-llama/Meta-Llama-3.1-8B", "H100", tp(1));
    let base = Efficiencies::default_for(d.gpu.generation);
    let a = StepCostModel::new(&d, &base).unwrap().breakdown(&w);
    let s = StepCostModel::new(&d, &halve(&base, "hbm_state", base.hbm_state))
        .unwrap()
        .breakdown(&w);
    assert_eq!(a.total(), s.total());
    assert_eq!(a.raw.decode_kv_reads, s.raw.decode_kv_reads);
}
