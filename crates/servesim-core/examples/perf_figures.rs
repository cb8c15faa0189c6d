//! Prints sanity figures of the step-time model: `cargo run -p servesim-core --example perf_figures`.
use servesim_core::deploy::{Deployment, RawEngineSettings};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::find_gpu;
use servesim_core::model::catalog;
use servesim_core::parallel::Parallelism;
use servesim_core::perf::{Efficiencies, PrefillChunk, StepCostModel, StepWork};

fn model(id: &str, gpu: &str, tp: u32, dp: u32, ep: u32) -> StepCostModel {
    let g = find_gpu(gpu).unwrap();
    let gen = g.generation;
    let d = Deployment::new(
        catalog::load(id).unwrap(),
        g,
        Parallelism { tp, dp, ep },
        None,
        WeightPrecision::Checkpoint,
        KvCacheDtype::Auto,
        &RawEngineSettings::default(),
    )
    .unwrap();
    StepCostModel::new(&d, &Efficiencies::default_for(gen)).unwrap()
}

fn main() {
    for (id, gpu, tp, dp, ep, ctx) in [
        ("meta-llama/Meta-Llama-3.1-8B", "H100", 1, 1, 1, 1024u64),
        ("Qwen/Qwen3-8B", "H100", 1, 1, 1, 1024),
        ("deepseek-ai/DeepSeek-V3", "H200", 8, 1, 1, 1024),
        ("deepseek-ai/DeepSeek-V3", "H200", 8, 1, 8, 1024),
        ("openai/gpt-oss-120b", "H100", 1, 1, 1, 1024),
        ("meta-llama/Meta-Llama-3.1-70B", "H100", 4, 1, 1, 1024),
    ] {
        let m = model(id, gpu, tp, dp, ep);
        println!("{id} on {gpu} tp{tp} dp{dp} ep{ep}, decode at context {ctx}:");
        for n in [1u64, 8, 64, 256, 512, 1024] {
            let w = StepWork {
                prefill: &[],
                decode_seqs: n,
                decode_ctx_sum: n * ctx,
            };
            let b = m.breakdown(&w);
            println!(
                "  batch {n:5}: {:8.3} ms ({:?}) gemm {:.3} attn {:.3} wts {:.3} kv {:.3} act {:.3} ar {:.3} a2a {:.3} ovh {:.3}",
                b.total() * 1e3, b.mode, b.gemm_compute * 1e3, b.attention_compute * 1e3,
                b.weight_reads * 1e3, b.kv_reads * 1e3, b.activations * 1e3,
                b.tp_allreduce * 1e3, b.ep_alltoall * 1e3, b.overhead * 1e3
            );
        }
        for p in [512u64, 2048, 8192] {
            let ch = [PrefillChunk { past: 0, new: p }];
            let w = StepWork {
                prefill: &ch,
                decode_seqs: 0,
                decode_ctx_sum: 0,
            };
            let b = m.breakdown(&w);
            println!(
                "  prefill {p:5}: {:8.3} ms ({:?}) gemm {:.3} attn {:.3} wts {:.3} kv {:.3} act {:.3} ar {:.3} ovh {:.3}",
                b.total() * 1e3, b.mode, b.gemm_compute * 1e3, b.attention_compute * 1e3,
                b.weight_reads * 1e3, b.kv_reads * 1e3, b.activations * 1e3, b.tp_allreduce * 1e3, b.overhead * 1e3
            );
        }
    }
}
