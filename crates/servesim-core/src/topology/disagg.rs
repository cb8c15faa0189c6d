//! The simulation of one level of a disaggregated (xPyD) plan: a prefill pool and a decode pool,
//! a router in front of each, and the KV transfers between them (docs/topology.md,
//! "Disaggregated prefill/decode"). Event sources, each indexed (O(log n) per event):
//! - the workload (client sends, closed-loop wake-ups);
//! - the prefill router's hold queue (saturation guard) and the prefill replicas' API-server
//!   front-ends;
//! - the engines (decode engines are indices `0 .. D`, prefill engines `D .. D + P`);
//! - the KV transfers (a heap of completion times).
//!
//! A request: router -> prefill replica (front-end, then vLLM's DP balancer picks the rank) ->
//! prefilled with `max_tokens = 1` (vLLM's NIXL proxy, `do_remote_decode`) -> the decode router
//! picks a decode replica (DP balancer: the rank) -> the decode engine reserves the blocks for
//! the tokens it does not cache (FIFO per decode engine; the transfer waits while it has none)
//! -> the transfer runs over the pair's link (FIFO per prefill engine and per decode engine) ->
//! the decode engine admits it with `prompt - 1` tokens present and computes the last one, which
//! samples the first streamed token (TTFT = client send to that token), then decodes the rest.
//!
//! Order at equal times: client sends, front-end deliveries, transfer completions, engine events
//! by index. Observed engine events reach the collector so that the level's metrics describe the
//! client's view: arrivals and prefix-cache admissions from the prefill pool; first tokens, steps
//! and finishes from the decode pool; rejections and preemptions from both.

use super::lockstep::{GroupState, LockstepGroup};
use super::router::{ReplicaView, Router, RouterSpec};
use super::sim::{
    budget_err, cache_info, FrontEndQueue, LevelGuard, PlanPool, ReplicaResult, SimPlan,
    TopologyLevel,
};
use super::transfer::{KvPath, KvTransferModel};
use super::IndexedHeap;
use crate::engine::cluster::dp_route;
use crate::engine::{
    Engine, FinishedRequest, IdMap, Observer, OffloadStats, RejectReason, Request, SimError,
    StepRecord,
};
use crate::metrics::{Collector, Dist, LevelResult, RunTotals};
use crate::sweep::{Stop, SweepError, SweepSpec};
use crate::units::Ticks;
use crate::workload::{Level, WorkloadGen, WorkloadSpec};
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
struct Pending {
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

/// Per-engine window accumulators.
struct Acc {
    ws: Ticks,
    we: Ticks,
    busy: Vec<u64>,
    kv_int: Vec<f64>,
    kv_peak: Vec<f64>,
    out_tokens: Vec<u64>,
    prefill_tokens: Vec<u64>,
    prompt: Vec<u64>,
    cached: Vec<u64>,
    completed: Vec<u64>,
}

impl Acc {
    fn inside(&self, t: Ticks) -> bool {
        t >= self.ws && t <= self.we
    }
}

/// Routes observed engine events (see the module comment) and remembers what the driver acts
/// on.
struct PdTap<'a> {
    inner: &'a mut Collector,
    /// Decode engines are `0 .. nd`.
    nd: u32,
    /// (id, engine) finished on a decode engine or rejected anywhere since the last drain.
    done: Vec<(u64, u32)>,
    /// (id, prefill engine, time) prefills completed since the last drain.
    prefilled: Vec<(u64, u32, Ticks)>,
    /// Client send time by id, for requests on a decode engine.
    sent: IdMap<Ticks>,
    acc: Acc,
}

impl Observer for PdTap<'_> {
    fn on_arrival(&mut self, e: u32, t: Ticks, id: u64) {
        if e >= self.nd {
            self.inner.on_arrival(e, t, id)
        }
    }
    fn on_rejected(&mut self, e: u32, t: Ticks, id: u64, r: &RejectReason) {
        self.done.push((id, e));
        self.sent.remove(&id);
        self.inner.on_rejected(e, t, id, r)
    }
    fn on_scheduled(&mut self, e: u32, t: Ticks, id: u64, p: u64, c: u64) {
        if self.acc.inside(t) {
            self.acc.prompt[e as usize] += p;
            self.acc.cached[e as usize] += c;
        }
        if e >= self.nd {
            self.inner.on_scheduled(e, t, id, p, c)
        }
    }
    fn on_first_token(&mut self, e: u32, t: Ticks, id: u64) {
        if e < self.nd {
            self.inner.on_first_token(e, t, id)
        }
    }
    fn on_preempted(&mut self, e: u32, t: Ticks, id: u64) {
        self.inner.on_preempted(e, t, id)
    }
    fn on_finished(&mut self, r: &FinishedRequest) {
        self.on_finished_owned(r.clone());
    }
    fn on_finished_owned(&mut self, mut r: FinishedRequest) {
        if self.acc.inside(r.finish) {
            self.acc.completed[r.engine as usize] += 1;
        }
        if r.engine >= self.nd {
            self.prefilled.push((r.id, r.engine, r.finish));
            return;
        }
        self.done.push((r.id, r.engine));
        if let Some(s) = self.sent.remove(&r.id) {
            r.arrival = s;
        }
        self.inner.on_finished_owned(r)
    }
    fn on_step(&mut self, s: &StepRecord) {
        let a = &mut self.acc;
        let e = s.engine as usize;
        let lo = s.start.max(a.ws);
        let hi = s.end.min(a.we);
        let ov = hi.0.saturating_sub(lo.0);
        let u = s.kv_used_blocks as f64 / s.kv_total_blocks.max(1) as f64;
        a.busy[e] += ov;
        a.kv_int[e] += u * ov as f64;
        a.kv_peak[e] = a.kv_peak[e].max(u);
        if s.end > a.ws && s.end <= a.we {
            a.out_tokens[e] += s.output_tokens;
            a.prefill_tokens[e] += s.num_prefill_tokens;
        }
        if s.engine < self.nd {
            self.inner.on_step(s)
        }
    }
    fn on_spec_step(&mut self, e: u32, end: Ticks, accepted: &[u64], drafted: &[u64]) {
        if e < self.nd {
            self.inner.on_spec_step(e, end, accepted, drafted)
        }
    }
    /// Every pool's CPU tier counts in the level's `cpu_offload` (the recipe's tier sits on the
    /// decode workers; docs/topology.md "CPU offload tier in a pool").
    fn on_offload(&mut self, e: u32, t: Ticks, d: &OffloadStats) {
        self.inner.on_offload(e, t, d)
    }
}

/// Replicas of one pool, as its router sees them.
struct PoolView<'e, 'm> {
    engines: &'e [Engine<'m>],
    dp: u32,
}

impl ReplicaView for PoolView<'_, '_> {
    fn waiting(&self, r: u32) -> u64 {
        let lo = (r * self.dp) as usize;
        self.engines[lo..lo + self.dp as usize]
            .iter()
            .map(|e| e.num_waiting() as u64)
            .sum()
    }
    fn kv_usage(&self, r: u32) -> f64 {
        let lo = (r * self.dp) as usize;
        self.engines[lo..lo + self.dp as usize]
            .iter()
            .map(|e| e.kv_used_blocks() as f64 / e.kv_total_blocks().max(1) as f64)
            .sum::<f64>()
            / self.dp as f64
    }
}

struct Pd<'m, 'p> {
    pre: &'p PlanPool<'m>,
    dec: &'p PlanPool<'m>,
    xfer: &'p KvTransferModel,
    nd: u32,
    engines: Vec<Engine<'m>>,
    engine_heap: IndexedHeap,
    frontends: Vec<FrontEndQueue>,
    frontend_heap: IndexedHeap,
    router_p: Router,
    router_d: Router,
    held_p: VecDeque<(Request, Ticks)>,
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
    send_free: Vec<Ticks>,
    recv_free: Vec<Ticks>,
    /// Handoffs (always kept for the window's statistics; the full log only when asked).
    handoffs: Vec<HandoffLog>,
    /// Handoff in progress per request id: (prefill engine, prefill done, reserved at,
    /// reserved blocks, start, tokens, path).
    open: IdMap<HandoffLog>,
    /// Per decode / prefill replica, its DP ranks' lockstep state (empty when that pool's
    /// ranks step independently); the engine heap then holds one entry per replica of that
    /// pool, at its first rank's index.
    groups_d: Vec<GroupState>,
    groups_p: Vec<GroupState>,
}

impl<'m, 'p> Pd<'m, 'p> {
    fn new(plan: &'p SimPlan<'m>, dis: &'p DisaggPlan, seed: u64) -> Result<Self, SweepError> {
        plan.validate()?;
        if plan.pools.len() != 2 {
            return Err(budget_err(
                "topology",
                "a disaggregated plan has exactly two pools (prefill, decode)".into(),
            ));
        }
        let (pre, dec) = (&plan.pools[0], &plan.pools[1]);
        let nd = dec.replicas * dec.dp;
        let np = pre.replicas * pre.dp;
        let mut engines = Vec::with_capacity((nd + np) as usize);
        for i in 0..nd {
            engines.push(Engine::new(i, dec.cfg.clone(), dec.model)?);
        }
        for i in 0..np {
            engines.push(Engine::new(nd + i, pre.cfg.clone(), pre.model)?);
        }
        Ok(Pd {
            pre,
            dec,
            xfer: &dis.transfer,
            nd,
            engine_heap: IndexedHeap::new(engines.len()),
            engines,
            frontends: (0..pre.replicas)
                .map(|_| FrontEndQueue::default())
                .collect(),
            frontend_heap: IndexedHeap::new(pre.replicas as usize),
            router_p: Router::new(&plan.router, pre.replicas, cache_info(&pre.cfg), seed),
            router_d: Router::new(
                &dis.decode_router,
                dec.replicas,
                cache_info(&dec.cfg),
                crate::rng::hash2(seed, 0xdec0de),
            ),
            held_p: VecDeque::new(),
            held_d: VecDeque::new(),
            originals: IdMap::default(),
            pending: (0..nd).map(|_| VecDeque::new()).collect(),
            n_pending: 0,
            transfers: BinaryHeap::new(),
            on_link: IdMap::default(),
            seq: 0,
            send_free: vec![Ticks::ZERO; np as usize],
            recv_free: vec![Ticks::ZERO; nd as usize],
            handoffs: Vec::new(),
            open: IdMap::default(),
            groups_d: lockstep_groups(dec),
            groups_p: lockstep_groups(pre),
        })
    }

    /// Engine `i`'s lockstep group: (its state's pool and replica index, the group's first
    /// engine, DP ranks), or `None` when its pool's ranks step independently.
    fn group_of(&self, i: usize) -> Option<(bool, usize, usize, usize)> {
        let nd = self.nd as usize;
        if i < nd {
            let dp = self.dec.dp as usize;
            (!self.groups_d.is_empty()).then(|| (true, i / dp, i / dp * dp, dp))
        } else {
            let dp = self.pre.dp as usize;
            let r = (i - nd) / dp;
            (!self.groups_p.is_empty()).then(|| (false, r, nd + r * dp, dp))
        }
    }

    /// The lockstep group `(decode?, replica, first engine, ranks)` over its engines.
    fn group(&mut self, g: (bool, usize, usize, usize)) -> LockstepGroup<'_, 'm> {
        let (dec, r, lo, dp) = g;
        let st = if dec {
            &mut self.groups_d[r]
        } else {
            &mut self.groups_p[r]
        };
        LockstepGroup::new(st, &mut self.engines[lo..lo + dp])
    }

    /// Re-keys engine `i` (with lockstep: its group, at the group's first engine).
    fn set_engine(&mut self, i: usize) {
        if let Some(g) = self.group_of(i) {
            let t = self.group(g).next_event_time();
            self.engine_heap.set(g.2 as u32, t);
            return;
        }
        self.engine_heap
            .set(i as u32, self.engines[i].next_event_time());
    }

    /// Submits `req` to engine `i` at `t` (through its lockstep group when it has one).
    fn submit_engine(
        &mut self,
        i: usize,
        req: Request,
        t: Ticks,
        tap: &mut PdTap,
    ) -> Result<(), RejectReason> {
        let res = match self.group_of(i) {
            Some(g) => self.group(g).submit(i - g.2, req, t, tap),
            None => self.engines[i].submit(req, t, tap),
        };
        self.set_engine(i);
        res
    }

    /// A transferred request reaches decode engine `d` at `t` with `reserved` blocks.
    fn submit_transferred(
        &mut self,
        d: usize,
        req: Request,
        t: Ticks,
        reserved: u64,
        tap: &mut PdTap,
    ) {
        let _ = match self.group_of(d) {
            Some(g) => self
                .group(g)
                .submit_transferred(d - g.2, req, t, reserved, tap),
            None => self.engines[d].submit_transferred(req, t, reserved, tap),
        };
        self.set_engine(d);
    }

    /// Processes the next event of engine `i` (with lockstep: of its group) and starts the
    /// transfers its decode ranks now have blocks for.
    fn process_engine(&mut self, i: usize, t: Ticks, tap: &mut PdTap) -> Result<(), SimError> {
        let (lo, n) = match self.group_of(i) {
            Some(g) => {
                self.group(g).process_next_event(tap)?;
                (g.2, g.3)
            }
            None => {
                self.engines[i].process_next_event(tap)?;
                (i, 1)
            }
        };
        self.set_engine(lo);
        for d in lo..lo + n {
            if d < self.nd as usize && !self.pending[d].is_empty() {
                self.try_start(d, t);
            }
        }
        Ok(())
    }

    /// Prefill replica `r` takes `req` (client send `sent`) at `t`.
    fn submit_prefill(&mut self, r: u32, req: Request, sent: Ticks, t: Ticks, tap: &mut PdTap) {
        let dp = self.pre.dp as usize;
        let lo = self.nd as usize + r as usize * dp;
        let i = lo + dp_route(&self.engines[lo..lo + dp]);
        // A request the decode worker would refuse is refused before its prefill.
        if let Some(why) = self.engines[0].refusal(&req) {
            tap.on_arrival(i as u32, t, req.id);
            tap.on_rejected(i as u32, t, req.id, &why);
            return;
        }
        let mut p = req.clone();
        p.output_len = 1;
        p.arrival = t;
        let id = req.id;
        self.originals.insert(id, (req, sent));
        if self.submit_engine(i, p, t, tap).is_err() {
            self.originals.remove(&id);
        }
    }

    fn dispatch_prefill(&mut self, r: u32, req: Request, sent: Ticks, now: Ticks, tap: &mut PdTap) {
        self.router_p.dispatched(r);
        let fe = self.pre.frontend;
        if fe.is_zero() {
            self.submit_prefill(r, req, sent, now, tap);
        } else {
            let f = &mut self.frontends[r as usize];
            let start = now.max(f.free_at);
            f.free_at = start + fe.serial_per_request;
            let at = f.free_at + fe.latency;
            let mut req = req;
            // The client's send time rides in `arrival` until the front-end delivers it.
            req.arrival = sent;
            let was_empty = f.queue.is_empty();
            f.queue.push_back((at, req));
            if was_empty {
                self.frontend_heap.set(r, Some(at));
            }
        }
    }

    fn route_prefill(&mut self, req: Request, sent: Ticks, now: Ticks, tap: &mut PdTap) {
        if !self.held_p.is_empty() {
            self.held_p.push_back((req, sent));
            return;
        }
        let nd = self.nd as usize;
        let view = PoolView {
            engines: &self.engines[nd..],
            dp: self.pre.dp,
        };
        match self.router_p.pick(&req, now, &view) {
            Some(r) => self.dispatch_prefill(r, req, sent, now, tap),
            None => self.held_p.push_back((req, sent)),
        }
    }

    fn release_prefill_held(&mut self, now: Ticks, tap: &mut PdTap) {
        let nd = self.nd as usize;
        while let Some((req, _)) = self.held_p.front() {
            let view = PoolView {
                engines: &self.engines[nd..],
                dp: self.pre.dp,
            };
            let Some(r) = self.router_p.pick(req, now, &view) else {
                break;
            };
            let (req, sent) = self.held_p.pop_front().expect("held");
            self.dispatch_prefill(r, req, sent, now, tap);
        }
    }

    /// A prefilled request goes to a decode replica (or waits at the decode router's guard).
    fn route_decode(&mut self, p: Pending, now: Ticks) {
        if !self.held_d.is_empty() {
            self.held_d.push_back(p);
            return;
        }
        match self.pick_decode(&p.req, now) {
            Some(r) => self.dispatch_decode(r, p, now),
            None => self.held_d.push_back(p),
        }
    }

    fn pick_decode(&mut self, req: &Request, now: Ticks) -> Option<u32> {
        let nd = self.nd as usize;
        let view = PoolView {
            engines: &self.engines[..nd],
            dp: self.dec.dp,
        };
        self.router_d.pick(req, now, &view)
    }

    /// Decode replica `r` takes `p`: vLLM's DP balancer picks the rank, which queues it for
    /// blocks.
    fn dispatch_decode(&mut self, r: u32, p: Pending, now: Ticks) {
        self.router_d.dispatched(r);
        let dp = self.dec.dp as usize;
        let lo = r as usize * dp;
        let d = lo + dp_route(&self.engines[lo..lo + dp]);
        self.pending[d].push_back(p);
        self.n_pending += 1;
        self.try_start(d, now);
    }

    fn release_decode_held(&mut self, now: Ticks) {
        while let Some(p) = self.held_d.front() {
            let req = p.req.clone();
            let Some(r) = self.pick_decode(&req, now) else {
                break;
            };
            let p = self.held_d.pop_front().expect("held");
            self.dispatch_decode(r, p, now);
        }
    }

    /// Starts the transfers of decode engine `d`'s waiting handoffs while it has blocks (FIFO:
    /// the head waits for blocks, the rest wait behind it).
    fn try_start(&mut self, d: usize, now: Ticks) {
        while let Some(p) = self.pending[d].front() {
            let e = &self.engines[d];
            let plen = p.req.prompt_len();
            let hit = e.cached_prefix_tokens(&p.req);
            let need = e.blocks_to_reserve(&p.req);
            if !self.engines[d].reserve_blocks(need) {
                break;
            }
            let p = self.pending[d].pop_front().expect("head");
            self.n_pending -= 1;
            let pe = (p.prefill_engine - self.nd) as usize;
            let tokens = plen - hit;
            let path = self.xfer.path_between(pe as u32, d as u32);
            let (wire, lat) = self.xfer.times(tokens, path);
            let start = now.max(self.send_free[pe]).max(self.recv_free[d]);
            let wire_end = start + wire;
            self.send_free[pe] = wire_end;
            self.recv_free[d] = wire_end;
            let done = wire_end + lat;
            self.open.insert(
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
            let s = self.seq;
            self.seq += 1;
            self.transfers.push(Reverse((done, s)));
            self.on_link.insert(
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

    fn in_flight(&self) -> u64 {
        let engines: u64 = self
            .engines
            .iter()
            .map(|e| (e.num_waiting() + e.num_running()) as u64)
            .sum();
        let fe: u64 = self.frontends.iter().map(|f| f.queue.len() as u64).sum();
        engines
            + fe
            + self.held_p.len() as u64
            + self.held_d.len() as u64
            + self.n_pending
            + self.on_link.len() as u64
    }
}

/// One lockstep state per replica of `pool` when its DP ranks step together (vLLM DP + EP for
/// MoE, `lockstep.rs`), else none.
fn lockstep_groups(pool: &PlanPool) -> Vec<GroupState> {
    if pool.lockstep && pool.dp > 1 {
        (0..pool.replicas)
            .map(|_| GroupState::new(pool.dp, pool.model))
            .collect()
    } else {
        Vec::new()
    }
}

/// [`run_disagg_level_logged`] without the log (what `run_plan_level` calls).
pub(super) fn run_disagg_level(
    plan: &SimPlan,
    dis: &DisaggPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
    col: Collector,
) -> Result<(LevelResult, Collector, Option<TopologyLevel>), SweepError> {
    run(plan, dis, workload, spec, level, progress, col, false).map(|(r, c, t, _)| (r, c, Some(t)))
}

/// Runs one level of a disaggregated plan and returns, with the level's results, every
/// request's handoff (for invariant checks).
pub fn run_disagg_level_logged(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
) -> Result<(LevelResult, Collector, TopologyLevel, Vec<HandoffLog>), SweepError> {
    let Some(dis) = plan.disagg.as_ref() else {
        return Err(budget_err(
            "topology",
            "the plan has no prefill/decode pools".into(),
        ));
    };
    run(
        plan,
        dis,
        workload,
        spec,
        level,
        &mut |_| {},
        Collector::new(),
        true,
    )
}

#[allow(clippy::too_many_arguments)]
fn run(
    plan: &SimPlan,
    dis: &DisaggPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
    mut col: Collector,
    keep_log: bool,
) -> Result<(LevelResult, Collector, TopologyLevel, Vec<HandoffLog>), SweepError> {
    col.clear();
    if let Stop::Duration { duration, warmup } = spec.stop {
        col.set_window(warmup, duration);
    }
    let w = workload.at_level(level)?;
    let mut guard = LevelGuard::new(&w, level, spec)?;
    let limit = guard.limit;
    let max_model_len = plan.pools[1].cfg.max_model_len;
    let mut gen = WorkloadGen::new(&w, max_model_len, limit);
    let mut sim = Pd::new(plan, dis, w.seed)?;
    let end = guard.end;
    let n_eng = sim.engines.len();
    let (ws, we) = match spec.stop {
        Stop::Duration { duration, warmup } => (warmup, duration),
        Stop::Requests(_) => (Ticks::ZERO, Ticks(u64::MAX)),
    };
    let mut tap = PdTap {
        inner: &mut col,
        nd: sim.nd,
        done: Vec::new(),
        prefilled: Vec::new(),
        sent: IdMap::default(),
        acc: Acc {
            ws,
            we,
            busy: vec![0; n_eng],
            kv_int: vec![0.0; n_eng],
            kv_peak: vec![0.0; n_eng],
            out_tokens: vec![0; n_eng],
            prefill_tokens: vec![0; n_eng],
            prompt: vec![0; n_eng],
            cached: vec![0; n_eng],
            completed: vec![0; n_eng],
        },
    };
    loop {
        let tg = gen.peek_time();
        let tf = sim.frontend_heap.peek();
        let tx = sim.transfers.peek().map(|r| r.0 .0);
        let te = sim.engine_heap.peek();
        // 0 send, 1 front-end, 2 transfer, 3 engine: the earliest, ties in that order.
        let mut best: Option<(Ticks, u8)> = None;
        for (t, k) in [
            (tg, 0u8),
            (tf.map(|x| x.0), 1),
            (tx, 2),
            (te.map(|x| x.0), 3),
        ] {
            if let Some(t) = t {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, k));
                }
            }
        }
        let Some((t, kind)) = best else {
            break;
        };
        if !guard.event(t, spec, &w, tap.inner, || sim.in_flight(), progress)? {
            break;
        }
        match kind {
            0 => {
                let Some(req) = gen.pop() else {
                    continue;
                };
                if gen.issued() > spec.max_requests {
                    return Err(SimError::RequestCap {
                        cap: spec.max_requests,
                    }
                    .into());
                }
                sim.route_prefill(req, t, t, &mut tap);
            }
            1 => {
                let r = tf.expect("front-end event").1;
                let f = &mut sim.frontends[r as usize];
                if let Some((_, req)) = f.queue.pop_front() {
                    let next = f.queue.front().map(|(t, _)| *t);
                    sim.frontend_heap.set(r, next);
                    let sent = req.arrival;
                    sim.submit_prefill(r, req, sent, t, &mut tap);
                }
            }
            2 => {
                let Reverse((_, s)) = sim.transfers.pop().expect("transfer event");
                let x = sim.on_link.remove(&s).expect("transfer on the link");
                if let Some(h) = sim.open.remove(&x.req.id) {
                    sim.handoffs.push(h);
                }
                let d = x.decode_engine as usize;
                let mut req = x.req;
                req.arrival = t;
                tap.sent.insert(req.id, x.sent);
                sim.submit_transferred(d, req, t, x.reserved, &mut tap);
            }
            _ => {
                let eng = te.expect("engine event").1;
                sim.process_engine(eng as usize, t, &mut tap)?;
            }
        }
        if !tap.prefilled.is_empty() {
            let nd = sim.nd;
            let dp = sim.pre.dp;
            for k in 0..tap.prefilled.len() {
                let (id, e, ready) = tap.prefilled[k];
                sim.router_p.done((e - nd) / dp);
                if let Some((req, sent)) = sim.originals.remove(&id) {
                    sim.route_decode(
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
            if !sim.held_p.is_empty() {
                sim.release_prefill_held(t, &mut tap);
            }
        }
        if !tap.done.is_empty() {
            let nd = sim.nd;
            let mut decode_done = false;
            for k in 0..tap.done.len() {
                let (id, e) = tap.done[k];
                gen.on_done(id, t);
                if e < nd {
                    sim.router_d.done(e / sim.dec.dp);
                    decode_done = true;
                } else {
                    sim.originals.remove(&id);
                    sim.router_p.done((e - nd) / sim.pre.dp);
                }
            }
            tap.done.clear();
            if !sim.held_p.is_empty() {
                sim.release_prefill_held(t, &mut tap);
            }
            if decode_done && !sim.held_d.is_empty() {
                sim.release_decode_held(t);
            }
        }
    }
    let we_real = match spec.stop {
        Stop::Duration { duration, .. } => duration,
        Stop::Requests(_) => guard.now,
    };
    let totals = RunTotals {
        submitted: gen.issued(),
        completed: tap.inner.finished_count(),
        rejected: tap.inner.rejected_count(),
        in_flight_at_end: sim.in_flight(),
        preemptions: tap.inner.preemption_count(),
        steps: tap.inner.num_steps(),
        simulated_s: end.unwrap_or(guard.now).as_secs_f64(),
        over_max_model_len: gen.over_max_model_len,
    };
    let acc = std::mem::replace(
        &mut tap.acc,
        Acc {
            ws,
            we,
            busy: Vec::new(),
            kv_int: Vec::new(),
            kv_peak: Vec::new(),
            out_tokens: Vec::new(),
            prefill_tokens: Vec::new(),
            prompt: Vec::new(),
            cached: Vec::new(),
            completed: Vec::new(),
        },
    );
    drop(tap);
    let win_ns = we_real.0.saturating_sub(ws.0).max(1) as f64;
    let win_s = win_ns / 1e9;
    let nd = sim.nd as usize;
    let pools = [(sim.pre, nd..n_eng), (sim.dec, 0..nd)];
    let mut replicas = Vec::new();
    let mut pool_results = Vec::new();
    for (k, (pool, range)) in pools.iter().enumerate() {
        let sum_u = |v: &[u64], r: std::ops::Range<usize>| v[r].iter().sum::<u64>();
        let dp = pool.dp as usize;
        let router = if k == 0 { &sim.router_p } else { &sim.router_d };
        for r in 0..pool.replicas as usize {
            let ranks = range.start + r * dp..range.start + (r + 1) * dp;
            let (p, c) = (
                sum_u(&acc.prompt, ranks.clone()),
                sum_u(&acc.cached, ranks.clone()),
            );
            replicas.push(ReplicaResult {
                pool: pool.name.clone(),
                replica: r as u32,
                routed_requests: router.routed[r],
                completed_requests: sum_u(&acc.completed, ranks.clone()),
                output_tokens_per_s: sum_u(&acc.out_tokens, ranks.clone()) as f64 / win_s,
                kv_utilization_mean: acc.kv_int[ranks.clone()].iter().sum::<f64>()
                    / (win_ns * dp as f64),
                prefix_cache_hit_rate: (p > 0).then(|| c as f64 / p as f64),
            });
        }
        let n = range.len().max(1) as f64;
        let (p, c) = (
            sum_u(&acc.prompt, range.clone()),
            sum_u(&acc.cached, range.clone()),
        );
        let out = sum_u(&acc.out_tokens, range.clone()) as f64 / win_s;
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
            completed_requests: sum_u(&acc.completed, range.clone()),
            busy_fraction: sum_u(&acc.busy, range.clone()) as f64 / (win_ns * n),
            prefill_tokens_per_s: sum_u(&acc.prefill_tokens, range.clone()) as f64 / win_s,
            output_tokens_per_s: out,
            output_tokens_per_s_per_gpu: out / gpus.max(1) as f64,
            kv_utilization_mean: acc.kv_int[range.clone()].iter().sum::<f64>() / (win_ns * n),
            kv_utilization_peak: acc.kv_peak[range.clone()]
                .iter()
                .copied()
                .fold(0.0, f64::max),
            prefix_cache_hit_rate: (p > 0).then(|| c as f64 / p as f64),
        });
    }
    let inside: Vec<&HandoffLog> = sim
        .handoffs
        .iter()
        .filter(|h| h.done >= ws && h.done <= we_real)
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
    let dec_out: Vec<f64> = replicas
        .iter()
        .filter(|r| r.pool == sim.dec.name)
        .map(|r| r.output_tokens_per_s)
        .collect();
    let mean = dec_out.iter().sum::<f64>() / dec_out.len().max(1) as f64;
    let max = dec_out.iter().copied().fold(0.0, f64::max);
    let topo = TopologyLevel {
        level: level.value(),
        router: format!(
            "prefill: {}; decode: {}",
            plan.router.describe(),
            dis.decode_router.describe()
        ),
        replicas,
        imbalance: (mean > 0.0).then(|| max / mean),
        pools: pool_results,
        transfer: Some(transfer),
    };
    let (rws, rwe) = match spec.stop {
        Stop::Duration { duration, warmup } => (warmup, duration),
        Stop::Requests(_) => (Ticks::ZERO, guard.now),
    };
    col.flush();
    let r = col.level_result(level, rws, rwe, spec.gpus, totals);
    let log = if keep_log {
        std::mem::take(&mut sim.handoffs)
    } else {
        Vec::new()
    };
    Ok((r, col, topo, log))
}
