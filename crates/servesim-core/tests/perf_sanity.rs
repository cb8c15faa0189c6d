//! Sanity figures of the step-time model within wide physical bounds, each derived in the test
//! from datasheet numbers and the model's own parameter/byte counts (not from the step model).
//! Print the figures with `cargo test -p servesim-core --test perf_sanity -- --nocapture`.

use servesim_core::capacity::compute;
use servesim_core::deploy::{Deployment, RawEngineSettings};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::find_gpu;
use servesim_core::model::{catalog, TensorGroup};
use servesim_core::parallel::Parallelism;
use servesim_core::perf::{Efficiencies, PrefillChunk, StepCostModel, StepWork};

fn dep(model: &str, gpu: &str, par: Parallelism) -> Result<Deployment, String> {
    Deployment::new(
        catalog::load(model).map_err(|e| e.to_string())?,
        find_gpu(gpu).map_err(|e| e.to_string())?,
        par,
        None,
        WeightPrecision::Checkpoint,
        KvCacheDtype::Auto,
        &RawEngineSettings::default(),
    )
    .map_err(|e| e.to_string())
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

fn decode(n: u64, ctx: u64) -> StepWork<'static> {
    StepWork {
        prefill: &[],
        decode_seqs: n,
        decode_ctx_sum: n * ctx,
    }
}

const LLAMA8B: &str = "meta-llama/Meta-Llama-3.1-8B";

#[test]
fn llama8b_h100_decode_batch1_is_weight_bandwidth_bound() {
    let d = dep(LLAMA8B, "H100", tp(1)).unwrap();
    let m = cost(&d);
    // Bytes a decode step must stream: all weights except the input embedding table
    // (16.06 GB total - 1.05 GB embedding = 15.0 GB bf16), at the 3.35 TB/s datasheet peak.
    let wb = d.model.weight_bytes(WeightPrecision::Checkpoint);
    let emb: u64 = wb
        .groups
        .iter()
        .filter(|g| g.group == TensorGroup::Embedding)
        .map(|g| g.bytes.0)
        .sum();
    let bytes = (wb.total.0 - emb) as f64;
    assert!(bytes > 14.9e9 && bytes < 15.1e9, "{bytes}");
    let floor = bytes / 3.35e12; // 4.48 ms
    let t = m.step_time(&decode(1, 1024)).as_secs_f64();
    println!(
        "Llama-3.1-8B H100 decode batch 1 @1k: {:.2} ms (floor {:.2} ms)",
        t * 1e3,
        floor * 1e3
    );
    assert!(t >= floor, "{t} < {floor}");
    assert!(t <= 2.0 * floor, "{t} > 2 x {floor}");
}

#[test]
fn llama8b_h100_prefill_8192_is_compute_bound() {
    let d = dep(LLAMA8B, "H100", tp(1)).unwrap();
    let m = cost(&d);
    let ch = [PrefillChunk { past: 0, new: 8192 }];
    let w = StepWork {
        prefill: &ch,
        decode_seqs: 0,
        decode_ctx_sum: 0,
    };
    // GEMMs: 2 FLOPs per weight per token over the 7.5 B non-embedding linear weights (lm_head
    // once, for the one logits row); attention: causal QK and PV over 8192 x 8193 / 2 pairs,
    // 32 heads x 256 (K+V dims) x 2 FLOPs, 32 layers. Both at the 989 TFLOPS bf16 dense peak.
    let lf = d.model.linear_flops_per_token();
    let gemm = (lf.total() - lf.lm_head) * 8192.0 + lf.lm_head;
    let attn = 2.0 * 32.0 * 256.0 * (8192.0 * 8193.0 / 2.0) * 32.0;
    let at_peak = (gemm + attn) / 989.4e12; // ~0.16 s
    let t = m.step_time(&w).as_secs_f64();
    let b = m.breakdown(&w);
    println!(
        "Llama-3.1-8B H100 prefill 8192: {:.1} ms (at peak {:.1} ms)",
        t * 1e3,
        at_peak * 1e3
    );
    assert!(t >= at_peak);
    // At least 50% of peak is achieved by FlashAttention-3 / cuBLAS on such shapes.
    assert!(t <= at_peak / 0.5, "{t} vs {at_peak}");
    assert!(
        b.gemm_compute > b.weight_reads,
        "GEMMs must be compute-bound"
    );
    assert!(b.attention_compute > b.kv_reads);
}

#[test]
fn llama8b_h100_itl_grows_with_batch_within_physical_bounds() {
    let d = dep(LLAMA8B, "H100", tp(1)).unwrap();
    let m = cost(&d);
    let kv_per_token = 131_072.0; // 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B
    let mut prev = 0.0;
    for n in [1u64, 64, 256] {
        let t = m.step_time(&decode(n, 1024)).as_secs_f64();
        // Lower bound: weights + the batch's KV at peak bandwidth.
        let floor = (15.0e9 + n as f64 * 1024.0 * kv_per_token) / 3.35e12;
        println!(
            "Llama-3.1-8B H100 ITL batch {n} @1k ctx: {:.2} ms (bandwidth floor {:.2} ms)",
            t * 1e3,
            floor * 1e3
        );
        assert!(t >= floor && t <= 2.5 * floor, "batch {n}: {t} vs {floor}");
        assert!(t > prev);
        prev = t;
    }
}

#[test]
fn deepseek_v3_h200_tp8_decode_reads_only_activated_experts() {
    let d = dep("deepseek-ai/DeepSeek-V3", "H200", tp(8)).unwrap();
    let m = cost(&d);
    let eb = d.model.expert_bytes(WeightPrecision::Checkpoint).unwrap().0 as f64;
    // Batch 1: 8 of 256 experts in each of the 58 MoE layers, each sharded over 8 GPUs:
    // 8 x 58 x 44 MB / 8 = 2.6 GB per GPU.
    let b1 = m.breakdown(&decode(1, 1024));
    let want = 8.0 * 58.0 * eb / 8.0;
    assert!(
        (b1.work.expert_weight_bytes - want).abs() / want < 1e-9,
        "{} vs {want}",
        b1.work.expert_weight_bytes
    );
    let dense_floor = (b1.work.dense_weight_bytes + want) / 4.8e12;
    for n in [1u64, 64, 256] {
        let t = m.step_time(&decode(n, 1024)).as_secs_f64();
        println!(
            "DeepSeek-V3 8xH200 TP8 ITL batch {n} @1k ctx: {:.2} ms",
            t * 1e3
        );
        assert!(t >= dense_floor && t.is_finite());
    }
    // Large batch: every local expert is read, which is the whole expert shard on the GPU.
    let b = m.breakdown(&decode(512, 1024));
    let all = 256.0 * 58.0 * eb / 8.0;
    assert!(b.work.expert_weight_bytes <= all * (1.0 + 1e-12));
    assert!(b.work.expert_weight_bytes > 0.99 * all);
}

#[test]
fn every_shipped_model_has_a_finite_positive_step_time_where_capacity_fits() {
    let gpus = ["H100", "H200", "B200", "MI300X"];
    let mut missing = Vec::new();
    for id in catalog::ids() {
        let mut fitted = 0;
        for gpu in gpus {
            // TP 1..8, then expert parallelism over 8 GPUs (TP 8 / EP 8 and DP 8 / EP 8), then 16.
            let layouts = [
                tp(1),
                tp(2),
                tp(4),
                tp(8),
                Parallelism {
                    tp: 8,
                    dp: 1,
                    ep: 8,
                },
                Parallelism {
                    tp: 1,
                    dp: 8,
                    ep: 8,
                },
                // Two nodes (1.6 T-parameter fp8 checkpoints exceed one 8-GPU node).
                Parallelism {
                    tp: 8,
                    dp: 2,
                    ep: 16,
                },
            ];
            let found = layouts.into_iter().find_map(|par| {
                let d = dep(id, gpu, par).ok()?;
                let rep = compute(&d, None).ok()?;
                rep.fits.then_some(d)
            });
            let Some(d) = found else { continue };
            fitted += 1;
            let m = cost(&d);
            let ch = [
                PrefillChunk { past: 0, new: 2048 },
                PrefillChunk {
                    past: 4096,
                    new: 512,
                },
            ];
            for w in [
                decode(1, 100),
                decode(64, 4000),
                StepWork {
                    prefill: &ch,
                    decode_seqs: 32,
                    decode_ctx_sum: 32 * 2000,
                },
            ] {
                let t = m.step_time(&w);
                let s = t.as_secs_f64();
                assert!(
                    s.is_finite() && s > 0.0 && s < 60.0,
                    "{id} on {gpu} {:?}: {s}",
                    d.par
                );
            }
        }
        if fitted == 0 {
            missing.push(id);
        }
    }
    assert!(
        missing.is_empty(),
        "fit on none of {gpus:?} with up to 16 GPUs: {missing:?}"
    );
}

#[test]
fn same_input_gives_the_same_ticks() {
    let d = dep("Qwen/Qwen3-30B-A3B", "H100", tp(2)).unwrap();
    let a = cost(&d);
    let b = cost(&d);
    assert_eq!(a, b);
    let ch = [PrefillChunk {
        past: 333,
        new: 777,
    }];
    let w = StepWork {
        prefill: &ch,
        decode_seqs: 17,
        decode_ctx_sum: 17 * 913 + 5,
    };
    let t = a.step_time(&w);
    for _ in 0..3 {
        assert_eq!(b.step_time(&w), t);
        assert_eq!(a.breakdown(&w), b.breakdown(&w));
    }
}

#[test]
fn deepseek_v3_h200_dp8_ep8_decode_spends_time_in_dispatch() {
    let d = dep(
        "deepseek-ai/DeepSeek-V3",
        "H200",
        Parallelism {
            tp: 1,
            dp: 8,
            ep: 8,
        },
    )
    .unwrap();
    let m = cost(&d);
    for n in [1u64, 64, 256] {
        let b = m.breakdown(&decode(n, 1024));
        // Default all-gather/reduce-scatter path: per MoE layer two ring passes over the 8 DP
        // ranks' hidden states (7/8 x 8n x 7168 x 2 B each) at 450 GB/s x bus eff, plus latency.
        let e = Efficiencies::default_for(d.gpu.generation);
        let pass = 7.0 / 8.0 * 8.0 * b.work.padded_tokens as f64 * 7168.0 * 2.0
            / (450e9 * e.allreduce_bus_eff)
            + e.allreduce_latency_s;
        let want = 58.0 * 2.0 * pass;
        println!(
            "DeepSeek-V3 8xH200 DP8/EP8 ITL batch {n}/rank @1k ctx: {:.2} ms (dispatch {:.2} ms)",
            b.total() * 1e3,
            b.ep_alltoall * 1e3
        );
        assert!((b.ep_alltoall - want).abs() < 1e-9 * want);
        assert_eq!(b.tp_allreduce, 0.0);
    }
}
