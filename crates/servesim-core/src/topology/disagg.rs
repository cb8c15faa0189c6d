//! Disaggregated (xPyD) serving's additions to the level's simulation (`sim.rs`): the handoff
//! from the prefill pool (the entry pool) to the decode pool (the exit pool), an event source of
//! its own (docs/topology.md, "Disaggregated prefill/decode"). `Simulation::build` lays out the
//! decode engines first (indices `0 .. D`), then the prefill engines (`D .. D + P`).
//!
//! A request: router -> prefill replica (front-end, then vLLM's DP balancer picks the rank) ->
//! prefilled with `max_tokens = 1` (vLLM's NIXL proxy, `do_remote_decode`) -> the decode router
//! picks a decode replica (DP balancer: the rank) -> the decode engine reserves the blocks for
//! the tokens it does not cache (FIFO per decode engine; the transfer waits while it has none)
//! -> the transfer runs over the pair's link (FIFO per prefill engine and per decode engine) ->
//! the decode engine admits it with `prompt - 1` tokens present and computes the last one, which
//! samples the first streamed token (TTFT = client send to that token), then decodes the rest.
//!
//! The KV transfers are a heap of completion times (ties by start order); a decode engine's
//! waiting handoffs are retried after each of its events, decode-held requests when a decode
//! finishes.

use super::plan::{PlanPool, SimPlan, TopologyLevel};
use super::router::RouterSpec;
use super::sim::{imbalance, run_level, Acc, Simulation, Tap};
use super::transfer::{KvPath, KvTransferModel};
use crate::engine::{IdMap, Observer, Request};
use crate::metrics::{Collector, Dist, LevelResult};
use crate::sweep::{SweepError, SweepSpec};
use crate::units::Ticks;
use crate::workload::{Level, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What a disaggregated plan adds to its two pools (`pools[0]` prefill, `pools[1]` decode).
#[derive(Clone, Debug)]
pub struct DisaggPlan {
    /// Picks the decode replica for a prefilled request.
    pub decode_router: RouterSpec,
    pub transfer: KvTransferModel,
}

/// One request's handoff from prefill to decode (kept only by [`run_disagg_level_logged`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HandoffLog {
    pub id: u64,
    /// Global engine indices (decode `0 .. D`, prefill `D ..`).
    pub prefill_engine: u32,
    pub decode_engine: u32,
    /// The prefill step that produced its token ended.
    pub prefill_done: Ticks,
    /// The decode engine reserved its blocks (the transfer may start).
    pub reserved_at: Ticks,
    pub reserved_blocks: u64,
    /// The link took it / the KV is on the decode worker.
    pub start: Ticks,
    pub done: Ticks,
    /// Tokens moved (the prompt less what the decode engine already cached).
    pub tokens: u64,
    pub path: KvPath,
}

/// One pool's share of a level (over the measurement window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolResult {
    pub pool: String,
    pub replicas: u32,
    pub engines: u32,
    pub gpus: u64,
    /// Requests that left the pool in the window (prefill: prefills done; decode: finished).
    pub completed_requests: u64,
    /// Fraction of the window its engines spent in a step (mean over engines).
    pub busy_fraction: f64,
    /// Prompt tokens computed per second (prefill chunks).
    pub prefill_tokens_per_s: f64,
    /// Tokens produced per second (prefill: the discarded one-token outputs; decode: the
    /// client's output tokens).
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    /// Time-averaged KV use (mean over engines) and the peak of any engine.
    pub kv_utilization_mean: f64,
    pub kv_utilization_peak: f64,
    /// Prompt tokens found in the pool's prefix caches / looked up, at admissions in the window.
    pub prefix_cache_hit_rate: Option<f64>,
}

/// The KV transfers of a level (those completed in the window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferStats {
    pub transfers: u64,
    pub nvlink_transfers: u64,
    pub rdma_transfers: u64,
    /// Bytes moved (all decode ranks), total and per transfer.
    pub total_bytes: f64,
    pub bytes_per_transfer_mean: Option<f64>,
    pub tokens_per_transfer_mean: Option<f64>,
    /// Link start to KV on the decode worker (wire + latency).
    pub transfer_ms: Option<Dist>,
    /// Blocks reserved to link start (the link busy with earlier transfers).
    pub link_queue_ms: Option<Dist>,
    /// Prefill done to blocks reserved (the decode worker had no free blocks, or its router
    /// held the request).
    pub block_wait_ms: Option<Dist>,
    /// Prefill done to KV on the decode worker.
    pub handoff_ms: Option<Dist>,
}

/// A prefilled request waiting for its decode engine's blocks.
pub(super) struct Pending {
    req: Request,
    sent: Ticks,
    prefill_engine: u32,
    ready: Ticks,
}

/// A request on the link.
struct InTransfer {
    req: Request,
    sent: Ticks,
    decode_engine: u32,
    reserved: u64,
}

/// The handoff source of a disaggregated level: the decode router's hold queue, the decode
/// engines' blocks waits, the link and the transfers on it.
pub(super) struct Handoff<'p> {
    xfer: &'p KvTransferModel,
    held_d: VecDeque<Pending>,
    /// The client's request (full output length) and its send time, while it is prefilled.
    originals: IdMap<(Request, Ticks)>,
    /// Per decode engine: prefilled requests waiting for blocks, FIFO.
    pending: Vec<VecDeque<Pending>>,
    n_pending: u64,
    /// (done time, sequence) of transfers on the link; the sequence keys `on_link`.
    transfers: BinaryHeap<Reverse<(Ticks, u64)>>,
    on_link: IdMap<InTransfer>,
    seq: u64,
    /// When each prefill engine's send side / each decode engine's receive side is next free.
    send_free: Vec<Ticks>,
    recv_free: Vec<Ticks>,
    /// Handoffs completed (always kept for the window's statistics).
    handoffs: Vec<HandoffLog>,
    /// Handoff in progress per request id.
    open: IdMap<HandoffLog>,
}

impl<'p> Handoff<'p> {
    pub(super) fn new(dis: &'p DisaggPlan, pre: &PlanPool, dec: &PlanPool) -> Handoff<'p> {
        let nd = (dec.replicas * dec.dp) as usize;
        let np = (pre.replicas * pre.dp) as usize;
        Handoff {
            xfer: &dis.transfer,
            held_d: VecDeque::new(),
            originals: IdMap::default(),
            pending: (0..nd).map(|_| VecDeque::new()).collect(),
            n_pending: 0,
            transfers: BinaryHeap::new(),
            on_link: IdMap::default(),
            seq: 0,
            send_free: vec![Ticks::ZERO; np],
            recv_free: vec![Ticks::ZERO; nd],
            handoffs: Vec::new(),
            open: IdMap::default(),
        }
    }

    /// The earliest transfer completion.
    #[inline]
    pub(super) fn next_transfer(&self) -> Option<Ticks> {
        self.transfers.peek().map(|r| r.0 .0)
    }

    /// A request rejected by the prefill pool: it will not be handed off.
    pub(super) fn forget(&mut self, id: u64) {
        self.originals.remove(&id);
    }

    /// Requests held, waiting for blocks or on the link.
    pub(super) fn in_flight(&self) -> u64 {
        self.held_d.len() as u64 + self.n_pending + self.on_link.len() as u64
    }
}

impl<'p> Simulation<'_, 'p> {
    fn handoff_mut(&mut self) -> &mut Handoff<'p> {
        self.handoff.as_mut().expect("a disaggregated plan")
    }

    /// Prefill replica `r` takes `req` (client send `sent`) at `t`: the prefill runs with
    /// `max_tokens = 1`, the client's request waits for it.
    pub(super) fn submit_prefill(
        &mut self,
        r: u32,
        req: Request,
        sent: Ticks,
        t: Ticks,
        tap: &mut Tap,
    ) {
        let p = self.entry;
        let i = self.rank_for(p, r);
        // A request the decode worker would refuse is refused before its prefill.
        let first_decode = self.pools[self.exit].lo as usize;
        if let Some(why) = self.engines[first_decode].refusal(&req) {
            tap.on_arrival(i as u32, t, req.id);
            tap.on_rejected(i as u32, t, req.id, &why);
            return;
        }
        let mut pre = req.clone();
        pre.output_len = 1;
        pre.arrival = t;
        let id = req.id;
        self.handoff_mut().originals.insert(id, (req, sent));
        if self.submit_engine(p, i, pre, t, tap).is_err() {
            self.handoff_mut().originals.remove(&id);
        }
    }

    /// Prefills done since the last event: their prefill replicas are free, the client's
    /// requests go to the decode router.
    pub(super) fn hand_off(&mut self, t: Ticks, tap: &mut Tap) {
        for k in 0..tap.prefilled.len() {
            let (id, e, ready) = tap.prefilled[k];
            let pool = &mut self.pools[self.entry];
            pool.router.done((e - pool.lo) / pool.plan.dp);
            if let Some((req, sent)) = self.handoff_mut().originals.remove(&id) {
                self.route_decode(
                    Pending {
                        req,
                        sent,
                        prefill_engine: e,
                        ready,
                    },
                    t,
                );
            }
        }
        tap.prefilled.clear();
    }

    /// A prefilled request goes to a decode replica (or waits at the decode router's guard).
    fn route_decode(&mut self, p: Pending, now: Ticks) {
        if !self.handoff_mut().held_d.is_empty() {
            self.handoff_mut().held_d.push_back(p);
            return;
        }
        match self.pick(self.exit, &p.req, now) {
            Some(r) => self.dispatch_decode(r, p, now),
            None => self.handoff_mut().held_d.push_back(p),
        }
    }

    /// Decode replica `r` takes `p`: vLLM's DP balancer picks the rank, which queues it for
    /// blocks.
    fn dispatch_decode(&mut self, r: u32, p: Pending, now: Ticks) {
        self.pools[self.exit].router.dispatched(r);
        let d = self.rank_for(self.exit, r);
        let h = self.handoff_mut();
        h.pending[d].push_back(p);
        h.n_pending += 1;
        self.try_start(d, now);
    }

    /// Dispatches requests held at the decode router while its guard lets them through.
    pub(super) fn release_decode_held(&mut self, now: Ticks) {
        while let Some(p) = self.handoff_mut().held_d.front() {
            let req = p.req.clone();
            let Some(r) = self.pick(self.exit, &req, now) else {
                break;
            };
            let p = self.handoff_mut().held_d.pop_front().expect("held");
            self.dispatch_decode(r, p, now);
        }
    }

    /// Starts the transfers of decode engine `d`'s waiting handoffs while it has blocks (FIFO:
    /// the head waits for blocks, the rest wait behind it).
    pub(super) fn try_start(&mut self, d: usize, now: Ticks) {
        let pre_lo = self.pools[self.entry].lo;
        let dec_lo = self.pools[self.exit].lo as usize;
        let Some(h) = self.handoff.as_mut() else {
            return;
        };
        let dl = d - dec_lo;
        while let Some(p) = h.pending[dl].front() {
            let e = &mut self.engines[d];
            let plen = p.req.prompt_len();
            let hit = e.cached_prefix_tokens(&p.req);
            let need = e.blocks_to_reserve(&p.req);
            if !e.reserve_blocks(need) {
                break;
            }
            let p = h.pending[dl].pop_front().expect("head");
            h.n_pending -= 1;
            let pe = (p.prefill_engine - pre_lo) as usize;
            let tokens = plen - hit;
            let path = h.xfer.path_between(pe as u32, dl as u32);
            let (wire, lat) = h.xfer.times(tokens, path);
            let start = now.max(h.send_free[pe]).max(h.recv_free[dl]);
            let wire_end = start + wire;
            h.send_free[pe] = wire_end;
            h.recv_free[dl] = wire_end;
            let done = wire_end + lat;
            h.open.insert(
                p.req.id,
                HandoffLog {
                    id: p.req.id,
                    prefill_engine: p.prefill_engine,
                    decode_engine: d as u32,
                    prefill_done: p.ready,
                    reserved_at: now,
                    reserved_blocks: need,
                    start,
                    done,
                    tokens,
                    path,
                },
            );
            let s = h.seq;
            h.seq += 1;
            h.transfers.push(Reverse((done, s)));
            h.on_link.insert(
                s,
                InTransfer {
                    req: p.req,
                    sent: p.sent,
                    decode_engine: d as u32,
                    reserved: need,
                },
            );
        }
    }

    /// The earliest transfer completes at `t`: its decode engine admits the request.
    pub(super) fn complete_transfer(&mut self, t: Ticks, tap: &mut Tap) {
        let h = self.handoff_mut();
        let Some(Reverse((_, s))) = h.transfers.pop() else {
            return;
        };
        let x = h.on_link.remove(&s).expect("transfer on the link");
        if let Some(log) = h.open.remove(&x.req.id) {
            h.handoffs.push(log);
        }
        let d = x.decode_engine as usize;
        let mut req = x.req;
        req.arrival = t;
        tap.sent.insert(req.id, x.sent);
        self.submit_transferred(d, req, t, x.reserved, tap);
    }
}

/// The topology results of a disaggregated level (replicas of both pools, per-pool results, the
/// transfers completed in the window `[ws, we]`) and, with `keep_log`, every handoff.
pub(super) fn disagg_results(
    sim: &mut Simulation,
    plan: &SimPlan,
    level: Level,
    acc: &Acc,
    ws: Ticks,
    we: Ticks,
    keep_log: bool,
) -> (TopologyLevel, Vec<HandoffLog>) {
    let dis = plan.disagg.as_ref().expect("a disaggregated plan");
    let win_ns = we.0.saturating_sub(ws.0).max(1) as f64;
    let win_s = win_ns / 1e9;
    let mut replicas = Vec::new();
    let mut pool_results = Vec::new();
    for (k, p) in [sim.entry, sim.exit].into_iter().enumerate() {
        replicas.extend(sim.replica_results(p, acc, win_ns));
        let pool = sim.pools[p].plan;
        let range = sim.pools[p].engines();
        let n = range.len().max(1) as f64;
        let (pt, c) = (
            acc.sum(range.clone(), |a| a.prompt),
            acc.sum(range.clone(), |a| a.cached),
        );
        let out = acc.sum(range.clone(), |a| a.out_tokens) as f64 / win_s;
        let tp = if k == 0 {
            dis.transfer.prefill_tp
        } else {
            dis.transfer.decode_tp
        };
        let gpus = pool.replicas as u64 * pool.dp as u64 * tp as u64;
        pool_results.push(PoolResult {
            pool: pool.name.clone(),
            replicas: pool.replicas,
            engines: range.len() as u32,
            gpus,
            completed_requests: acc.sum(range.clone(), |a| a.completed),
            busy_fraction: acc.sum(range.clone(), |a| a.busy) as f64 / (win_ns * n),
            prefill_tokens_per_s: acc.sum(range.clone(), |a| a.prefill_tokens) as f64 / win_s,
            output_tokens_per_s: out,
            output_tokens_per_s_per_gpu: out / gpus.max(1) as f64,
            kv_utilization_mean: acc.kv_int(range.clone()) / (win_ns * n),
            kv_utilization_peak: acc.e[range].iter().map(|a| a.kv_peak).fold(0.0, f64::max),
            prefix_cache_hit_rate: (pt > 0).then(|| c as f64 / pt as f64),
        });
    }
    let h = sim.handoff.as_mut().expect("a disaggregated plan");
    let inside: Vec<&HandoffLog> = h
        .handoffs
        .iter()
        .filter(|h| h.done >= ws && h.done <= we)
        .collect();
    let ms = |a: Ticks, b: Ticks| b.0.saturating_sub(a.0);
    let bytes_of = |h: &HandoffLog| dis.transfer.breakdown(h.tokens, h.path).total_bytes;
    let total_bytes: f64 = inside.iter().map(|h| bytes_of(h)).sum();
    let n = inside.len() as u64;
    let transfer = TransferStats {
        transfers: n,
        nvlink_transfers: inside.iter().filter(|h| h.path == KvPath::Nvlink).count() as u64,
        rdma_transfers: inside.iter().filter(|h| h.path == KvPath::Rdma).count() as u64,
        total_bytes,
        bytes_per_transfer_mean: (n > 0).then(|| total_bytes / n as f64),
        tokens_per_transfer_mean: (n > 0)
            .then(|| inside.iter().map(|h| h.tokens).sum::<u64>() as f64 / n as f64),
        transfer_ms: Dist::of_ints_scaled(
            inside.iter().map(|h| ms(h.start, h.done)).collect(),
            1e6,
        ),
        link_queue_ms: Dist::of_ints_scaled(
            inside.iter().map(|h| ms(h.reserved_at, h.start)).collect(),
            1e6,
        ),
        block_wait_ms: Dist::of_ints_scaled(
            inside
                .iter()
                .map(|h| ms(h.prefill_done, h.reserved_at))
                .collect(),
            1e6,
        ),
        handoff_ms: Dist::of_ints_scaled(
            inside.iter().map(|h| ms(h.prefill_done, h.done)).collect(),
            1e6,
        ),
    };
    // Imbalance over the decode replicas (they produce the client's tokens).
    let dec_name = &sim.pools[sim.exit].plan.name;
    let topo = TopologyLevel {
        level: level.value(),
        router: format!(
            "prefill: {}; decode: {}",
            plan.router.describe(),
            dis.decode_router.describe()
        ),
        imbalance: imbalance(replicas.iter().filter(|r| &r.pool == dec_name)),
        replicas,
        pools: pool_results,
        transfer: Some(transfer),
    };
    let log = if keep_log {
        std::mem::take(&mut h.handoffs)
    } else {
        Vec::new()
    };
    (topo, log)
}

/// Runs one level of a disaggregated plan and returns, with the level's results, every
/// request's handoff (for invariant checks).
pub fn run_disagg_level_logged(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
) -> Result<(LevelResult, Collector, TopologyLevel, Vec<HandoffLog>), SweepError> {
    if plan.disagg.is_none() {
        return Err(super::guard::budget_err(
            "topology",
            "the plan has no prefill/decode pools".into(),
        ));
    }
    let (r, c, t, log) = run_level(
        plan,
        workload,
        spec,
        level,
        &mut |_| {},
        Collector::new(),
        true,
    )?;
    let t = t.expect("a disaggregated level reports its topology");
    Ok((r, c, t, log))
}
