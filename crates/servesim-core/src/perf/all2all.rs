//! MoE dispatch/combine under data-parallel attention with expert parallelism (vLLM
//! `--data-parallel-size N --enable-expert-parallel`, `--all2all-backend NAME`): one distinct
//! model per backend, priced per MoE layer per step on one GPU. Formulas, constants and their
//! sources: docs/step-time.md, "5a. All-to-all backends (DP + EP)".
//!
//! Per GPU, a DP rank of `tp` GPUs with `T` (padded) tokens dispatches `t = ceil(T / tp)` of them
//! (vLLM's sequence-parallel MoE, `ParallelConfig.use_sequence_parallel_moe`, splits the
//! TP-replicated tokens when `tp > 1` and `dp > 1`); each token goes to its `k` routed experts
//! over the EP group of `G = tp x dp` GPUs.

use crate::deploy::All2AllBackend;
use serde::Serialize;

/// DeepEP low-latency kernels, DeepEP README (`deepseek-ai/DeepEP`, "Low-latency kernels with
/// pure RDMA"): H800, 128 tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine.
/// `(EP size, dispatch µs, dispatch GB/s, combine µs, combine GB/s)`.
pub const DEEPEP_LL_TABLE: [(u32, f64, f64, f64, f64); 6] = [
    (8, 77.0, 98.0, 114.0, 127.0),
    (16, 118.0, 63.0, 195.0, 80.0),
    (32, 155.0, 48.0, 273.0, 57.0),
    (64, 173.0, 43.0, 314.0, 50.0),
    (128, 192.0, 39.0, 369.0, 47.0),
    (256, 194.0, 39.0, 360.0, 48.0),
];

/// Tokens per rank of the DeepEP low-latency measurements (the latency floor of a call).
pub const DEEPEP_LL_TOKENS: f64 = 128.0;
/// The payloads of those measurements: 128 tokens x 7168 x top-8 x 1 B (fp8 dispatch) and
/// x 2 B (bf16 combine). The README's GB/s columns are these bytes over the times (within 3%).
pub const DEEPEP_LL_DISPATCH_BYTES: f64 = DEEPEP_LL_TOKENS * 7168.0 * 8.0;
pub const DEEPEP_LL_COMBINE_BYTES: f64 = DEEPEP_LL_TOKENS * 7168.0 * 8.0 * 2.0;

/// DeepEP high-throughput ("normal") kernels, DeepEP README ("Normal kernels with NVLink and RDMA
/// forwarding"): H800, 4096 tokens per batch, hidden 7168, top-4 groups, top-8 experts, FP8
/// dispatch, BF16 combine. Intranode (EP 8, NVLink) and internode (RDMA bottleneck):
/// `(EP size, dispatch GB/s, combine GB/s)`; the first row is the NVLink figure.
pub const DEEPEP_HT_INTRANODE: (f64, f64) = (153.0, 158.0);
pub const DEEPEP_HT_INTERNODE: [(u32, f64, f64); 3] =
    [(16, 43.0, 43.0), (32, 58.0, 57.0), (64, 51.0, 50.0)];

/// Dispatch and combine of one MoE layer on one GPU (seconds and bytes), for diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct All2AllTerms {
    /// Tokens this GPU dispatches (`ceil(T / tp)`).
    pub tokens_per_gpu: u64,
    pub dispatch_s: f64,
    pub combine_s: f64,
    /// Bytes the model prices for one dispatch and one combine (see docs for each backend).
    pub dispatch_bytes: f64,
    pub combine_bytes: f64,
    /// Whether the EP group spans more than one scale-up (NVLink) domain.
    pub internode: bool,
    /// Per MoE layer, the TP all-gather that restores the replicated tokens after the
    /// sequence-parallel MoE (0 at `tp = 1`), seconds.
    pub tp_allgather_s: f64,
}

impl All2AllTerms {
    /// One MoE layer's communication, seconds.
    pub fn per_layer_s(&self) -> f64 {
        self.dispatch_s + self.combine_s + self.tp_allgather_s
    }
}

/// The backend's model for one deployment (precomputed link figures).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct All2AllModel {
    pub backend: All2AllBackend,
    tp: u32,
    /// EP group size `tp x dp`.
    g: u32,
    hidden: f64,
    top_k: f64,
    /// Bytes per element of a dispatched hidden state (1 = fp8, 2 = bf16) for DeepEP.
    dispatch_elem_bytes: f64,
    internode: bool,
    /// Scale-up domain size (GPUs).
    domain: u32,
    /// Ring collectives (allgather_reducescatter, naive): seconds per byte and per call over the
    /// EP group's link.
    ring_s_per_byte: f64,
    ring_latency_s: f64,
    /// TP group link (for the all-gather after the sequence-parallel MoE).
    tp_s_per_byte: f64,
    tp_latency_s: f64,
    /// DeepEP high-throughput fixed cost per call.
    ht_latency_s: f64,
}

/// The inputs of [`All2AllModel::new`] (link figures come from the step-time model's tables).
#[derive(Clone, Copy, Debug)]
pub struct All2AllLinks {
    pub scaleup_domain: u32,
    /// Ring seconds per byte and latency per call over the EP group (NVLink inside the domain,
    /// the NIC beyond it).
    pub ep_ring_s_per_byte: f64,
    pub ep_ring_latency_s: f64,
    /// Ring seconds per byte and latency per call over the TP group.
    pub tp_ring_s_per_byte: f64,
    pub tp_latency_s: f64,
    /// Fixed cost of one DeepEP high-throughput call (`η_all2all_latency_s`).
    pub ht_latency_s: f64,
}

/// Linear interpolation of `y` over `log2(x)` between table points, clamped to the ends.
fn interp_log2(points: &[(f64, f64)], x: f64) -> f64 {
    let lx = libm::log2(x.max(1.0));
    let first = points[0];
    if lx <= libm::log2(first.0) {
        return first.1;
    }
    for w in points.windows(2) {
        let (x0, y0) = (libm::log2(w[0].0), w[0].1);
        let (x1, y1) = (libm::log2(w[1].0), w[1].1);
        if lx <= x1 {
            return y0 + (y1 - y0) * (lx - x0) / (x1 - x0);
        }
    }
    points[points.len() - 1].1
}

impl All2AllModel {
    /// The model of `backend` for an EP group of `tp x dp` GPUs, hidden size `hidden`, `top_k`
    /// routed experts per token; `fp8_dispatch`: DeepEP dispatches fp8 activations (the routed
    /// experts compute in fp8).
    pub fn new(
        backend: All2AllBackend,
        tp: u32,
        dp: u32,
        hidden: u64,
        top_k: u32,
        fp8_dispatch: bool,
        links: All2AllLinks,
    ) -> All2AllModel {
        let g = tp.max(1) * dp.max(1);
        All2AllModel {
            backend,
            tp: tp.max(1),
            g,
            hidden: hidden as f64,
            top_k: top_k as f64,
            dispatch_elem_bytes: if fp8_dispatch { 1.0 } else { 2.0 },
            internode: g > links.scaleup_domain,
            domain: links.scaleup_domain.max(1),
            ring_s_per_byte: links.ep_ring_s_per_byte,
            ring_latency_s: links.ep_ring_latency_s,
            tp_s_per_byte: links.tp_ring_s_per_byte,
            tp_latency_s: links.tp_latency_s,
            ht_latency_s: links.ht_latency_s,
        }
    }

    /// EP group size.
    pub fn ep_size(&self) -> u32 {
        self.g
    }

    /// The same deployment's model under another backend (for side-by-side breakdowns).
    pub fn with_backend(&self, backend: All2AllBackend) -> All2AllModel {
        All2AllModel { backend, ..*self }
    }

    /// Dispatch and combine of one MoE layer for a DP rank running `padded_tokens` tokens.
    pub fn layer(&self, padded_tokens: u64) -> All2AllTerms {
        let t = padded_tokens.div_ceil(self.tp as u64);
        let tf = t as f64;
        let g = self.g as f64;
        let h = self.hidden;
        let k = self.top_k;
        let mut out = All2AllTerms {
            tokens_per_gpu: t,
            internode: self.internode,
            ..Default::default()
        };
        if t == 0 || self.g <= 1 {
            return out;
        }
        // After the sequence-parallel MoE the TP ranks all-gather the outputs back: one ring
        // pass of the rank's `T x h x 2` bytes.
        if self.tp > 1 {
            let tpf = self.tp as f64;
            let bytes = padded_tokens as f64 * h * 2.0;
            out.tp_allgather_s = (tpf - 1.0) / tpf * bytes * self.tp_s_per_byte + self.tp_latency_s;
        }
        match self.backend {
            All2AllBackend::DeepepLowLatency => {
                // DeepEP's own accounting: every (token, expert) copy, dispatch in fp8/bf16,
                // combine in bf16. A call costs the measured time (interpolated over log2 EP)
                // scaled by its payload over the README's payload, never below the measured
                // time (the latency floor of the kernels at up to 128 tokens per rank).
                out.dispatch_bytes = tf * h * k * self.dispatch_elem_bytes;
                out.combine_bytes = tf * h * k * 2.0;
                let pts = |combine: bool| -> Vec<(f64, f64)> {
                    DEEPEP_LL_TABLE
                        .iter()
                        .map(|r| (r.0 as f64, if combine { r.3 } else { r.1 } * 1e-6))
                        .collect()
                };
                let (d_lat, c_lat) = (interp_log2(&pts(false), g), interp_log2(&pts(true), g));
                out.dispatch_s = d_lat * (out.dispatch_bytes / DEEPEP_LL_DISPATCH_BYTES).max(1.0);
                out.combine_s = c_lat * (out.combine_bytes / DEEPEP_LL_COMBINE_BYTES).max(1.0);
            }
            All2AllBackend::DeepepHighThroughput => {
                // Bandwidth-bound: the copies that leave the GPU (inside the domain) or the node
                // (beyond it) over the bottleneck link, plus a fixed cost per call.
                let (remote, d_bw, c_bw) = if self.internode {
                    let pts_d: Vec<(f64, f64)> = DEEPEP_HT_INTERNODE
                        .iter()
                        .map(|r| (r.0 as f64, r.1 * 1e9))
                        .collect();
                    let pts_c: Vec<(f64, f64)> = DEEPEP_HT_INTERNODE
                        .iter()
                        .map(|r| (r.0 as f64, r.2 * 1e9))
                        .collect();
                    let d = (self.domain as f64).min(g);
                    ((g - d) / g, interp_log2(&pts_d, g), interp_log2(&pts_c, g))
                } else {
                    (
                        (g - 1.0) / g,
                        DEEPEP_HT_INTRANODE.0 * 1e9,
                        DEEPEP_HT_INTRANODE.1 * 1e9,
                    )
                };
                out.dispatch_bytes = tf * h * k * self.dispatch_elem_bytes * remote;
                out.combine_bytes = tf * h * k * 2.0 * remote;
                out.dispatch_s = out.dispatch_bytes / d_bw + self.ht_latency_s;
                out.combine_s = out.combine_bytes / c_bw + self.ht_latency_s;
            }
            All2AllBackend::AllgatherReducescatter | All2AllBackend::Naive => {
                // Dispatch: all-gather of every GPU's `t x h x 2` bytes over the EP group (one
                // ring pass of the gathered `G t h 2` bytes). Combine: reduce-scatter back (one
                // pass) for allgather_reducescatter; naive all-reduces the gathered buffer (two
                // passes) and keeps its slice.
                let total = g * tf * h * 2.0;
                let pass = (g - 1.0) / g * total;
                out.dispatch_bytes = pass;
                out.dispatch_s = pass * self.ring_s_per_byte + self.ring_latency_s;
                let passes = if self.backend == All2AllBackend::Naive {
                    2.0
                } else {
                    1.0
                };
                out.combine_bytes = passes * pass;
                out.combine_s = passes * (pass * self.ring_s_per_byte + self.ring_latency_s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> All2AllLinks {
        All2AllLinks {
            scaleup_domain: 8,
            ep_ring_s_per_byte: 1.0 / 200e9,
            ep_ring_latency_s: 10e-6,
            tp_ring_s_per_byte: 1.0 / 200e9,
            tp_latency_s: 10e-6,
            ht_latency_s: 20e-6,
        }
    }

    #[test]
    fn deepep_ll_reproduces_the_readme_at_its_own_setting() {
        // The README's setting: 128 tokens per rank, hidden 7168, top-8, fp8 dispatch.
        for &(ep, d_us, _, c_us, _) in &DEEPEP_LL_TABLE {
            let m = All2AllModel::new(
                All2AllBackend::DeepepLowLatency,
                1,
                ep,
                7168,
                8,
                true,
                links(),
            );
            let l = m.layer(128);
            assert!((l.dispatch_s - d_us * 1e-6).abs() < 1e-9, "ep {ep}");
            assert!((l.combine_s - c_us * 1e-6).abs() < 1e-9, "ep {ep}");
        }
    }

    #[test]
    fn deepep_ll_is_flat_below_128_tokens_and_grows_with_ep() {
        let m = |ep| {
            All2AllModel::new(
                All2AllBackend::DeepepLowLatency,
                1,
                ep,
                4096,
                8,
                true,
                links(),
            )
        };
        assert_eq!(m(16).layer(1).dispatch_s, m(16).layer(64).dispatch_s);
        assert!(m(32).layer(8).dispatch_s > m(16).layer(8).dispatch_s);
        assert!(m(16).layer(4096).dispatch_s > m(16).layer(128).dispatch_s);
    }

    #[test]
    fn deepep_ht_is_bandwidth_bound_and_slower_across_nodes() {
        let m = |dp| {
            All2AllModel::new(
                All2AllBackend::DeepepHighThroughput,
                1,
                dp,
                7168,
                8,
                true,
                links(),
            )
        };
        let intra = m(8).layer(4096);
        let inter = m(16).layer(4096);
        assert!(!intra.internode && inter.internode);
        // Twice the tokens, about twice the time (minus the fixed cost).
        let two = m(8).layer(8192);
        let lat = 20e-6;
        assert!(((two.dispatch_s - lat) / (intra.dispatch_s - lat) - 2.0).abs() < 1e-9);
        assert!(inter.dispatch_s > intra.dispatch_s);
    }

    #[test]
    fn naive_costs_one_more_pass_than_allgather_reducescatter() {
        let m = |b| All2AllModel::new(b, 2, 4, 4096, 8, false, links()).layer(256);
        let ag = m(All2AllBackend::AllgatherReducescatter);
        let nv = m(All2AllBackend::Naive);
        assert_eq!(ag.dispatch_s, nv.dispatch_s);
        assert!(nv.combine_s > ag.combine_s);
        assert_eq!(ag.tokens_per_gpu, 128);
        assert!(ag.tp_allgather_s > 0.0);
    }

    #[test]
    fn nothing_to_send_costs_nothing() {
        let m = All2AllModel::new(
            All2AllBackend::DeepepLowLatency,
            8,
            2,
            4096,
            8,
            true,
            links(),
        );
        assert_eq!(m.layer(0).per_layer_s(), 0.0);
    }
}
