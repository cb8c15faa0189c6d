//! The KV transfer between a prefill worker and a decode worker (disaggregated serving): the
//! bytes each rank moves, the path (scale-up NVLink inside one NVLink domain, RDMA across
//! nodes), the per-transfer latency, and the breakdown `servesim step --transfer` prints.
//! Formulas and sources: docs/topology.md, "KV transfer".
//!
//! Bytes: a decode rank pulls the KV of the tokens its engine does not already hold, for its own
//! share of the heads: `recv = bytes_per_token(decode spec at decode TP) x tokens +
//! per_request_fixed_bytes` (a per-request state, e.g. DeepSeek-V4's sliding-window caches or a
//! linear-attention state, moves whole). The `D` decode ranks receive `D x recv`; spread over the
//! `P` prefill ranks each sends `D x recv / P` (MLA's latent is replicated on every rank, so with
//! `D > P` a prefill rank serves several decode ranks). Time on the wire = the slower side:
//! `max(send, recv) / link rate`, plus the per-transfer latency.

use crate::units::Ticks;
use serde::{Deserialize, Serialize};

/// vLLM/NIXL users' default per-GPU RDMA rate: one 400 Gb/s ConnectX-7 NIC per GPU, as on
/// DGX H100/H200 (NVIDIA DGX H100 user guide: eight ConnectX-7 400 Gb/s compute ports).
pub const DEFAULT_RDMA_GBPS_PER_GPU: f64 = 400.0;

/// Per-transfer latency default (ms): the peer simulator BLIS's P/D transfer base latency
/// (0.05 ms; its bandwidth default is 25 GB/s). No public measurement of NIXL's per-transfer
/// setup was found; set `topology.kv_transfer.latency_ms` when one is known.
pub const DEFAULT_TRANSFER_LATENCY_MS: f64 = 0.05;

/// Which link a transfer uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvPath {
    /// NVLink when both workers' GPUs sit in one NVLink domain (same GPU type), else RDMA.
    #[default]
    Auto,
    Nvlink,
    Rdma,
}

/// The resolved transfer model of a prefill pool feeding a decode pool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvTransferModel {
    pub prefill_tp: u32,
    pub decode_tp: u32,
    /// Bytes per token one decode rank receives (its heads' share; the whole latent for MLA).
    pub recv_bytes_per_token: f64,
    /// Per-request state bytes one decode rank receives (not proportional to tokens).
    pub recv_fixed_bytes: u64,
    pub path: KvPath,
    /// GPUs per NVLink domain (0: the two pools cannot share one, e.g. different GPU types).
    pub nvlink_domain: u32,
    /// GPUs of the prefill pool (they are numbered first, the decode pool's after them).
    pub prefill_gpus: u64,
    /// Per-GPU rates, bytes/s.
    pub nvlink_bytes_s: f64,
    pub rdma_bytes_s: f64,
    pub latency: Ticks,
}

/// Every term of one transfer (what `servesim step --transfer` prints).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransferBreakdown {
    pub tokens: u64,
    pub path: KvPath,
    pub link_gb_s: f64,
    pub recv_bytes_per_decode_rank: f64,
    pub send_bytes_per_prefill_rank: f64,
    pub total_bytes: f64,
    pub wire_ms: f64,
    pub latency_ms: f64,
    pub total_ms: f64,
}

impl KvTransferModel {
    /// The path between prefill engine `p` and decode engine `d` (engine = one DP rank of
    /// `tp` GPUs; GPUs numbered pool by pool, engine by engine).
    pub fn path_between(&self, p: u32, d: u32) -> KvPath {
        match self.path {
            KvPath::Auto => {
                let dom = self.nvlink_domain as u64;
                if dom == 0 {
                    return KvPath::Rdma;
                }
                let (pt, dt) = (self.prefill_tp as u64, self.decode_tp as u64);
                let p0 = p as u64 * pt;
                let d0 = self.prefill_gpus + d as u64 * dt;
                let same = p0 / dom == (p0 + pt - 1) / dom
                    && d0 / dom == (d0 + dt - 1) / dom
                    && p0 / dom == d0 / dom;
                if same {
                    KvPath::Nvlink
                } else {
                    KvPath::Rdma
                }
            }
            x => x,
        }
    }

    fn rate(&self, path: KvPath) -> f64 {
        match path {
            KvPath::Nvlink => self.nvlink_bytes_s,
            _ => self.rdma_bytes_s,
        }
    }

    /// The terms of moving `tokens` tokens over `path`.
    pub fn breakdown(&self, tokens: u64, path: KvPath) -> TransferBreakdown {
        let recv = if tokens == 0 {
            0.0
        } else {
            self.recv_bytes_per_token * tokens as f64 + self.recv_fixed_bytes as f64
        };
        let d = self.decode_tp.max(1) as f64;
        let p = self.prefill_tp.max(1) as f64;
        let total = recv * d;
        let send = total / p;
        let rate = self.rate(path).max(1.0);
        let wire_s = send.max(recv) / rate;
        let latency_ms = if tokens == 0 {
            0.0
        } else {
            self.latency.as_secs_f64() * 1e3
        };
        TransferBreakdown {
            tokens,
            path,
            link_gb_s: rate / 1e9,
            recv_bytes_per_decode_rank: recv,
            send_bytes_per_prefill_rank: send,
            total_bytes: total,
            wire_ms: wire_s * 1e3,
            latency_ms,
            total_ms: wire_s * 1e3 + latency_ms,
        }
    }

    /// (time the link is busy, latency after it) for `tokens` tokens over `path`, whole ns.
    pub fn times(&self, tokens: u64, path: KvPath) -> (Ticks, Ticks) {
        let b = self.breakdown(tokens, path);
        let wire = Ticks::from_secs_f64(b.wire_ms / 1e3);
        let lat = if tokens == 0 {
            Ticks::ZERO
        } else {
            self.latency
        };
        (wire, lat)
    }
}
