//! The simulation of one level over a plan: one event loop over explicit event sources, each
//! indexed so the next event costs O(log n) whatever the number of engines:
//! - the workload (client sends and closed-loop wake-ups: `WorkloadGen`'s own heap);
//! - the entry pool's router (decides at send time; requests held by the saturation guard wait in
//!   a FIFO and are dispatched when a request finishes);
//! - one API-server front-end per entry-pool replica (`FrontEnd`: rounds of chat-template
//!   renders, serial CPU time, then a latency), keyed by its round's end or the time its head
//!   request reaches the engine, whichever comes first;
//! - disaggregated plans only: the KV transfers (`disagg.rs`: prefilled requests go through the
//!   decode pool's router, wait for the decode engine's blocks, then cross the link);
//! - the engines of every pool (one per DP rank per replica; a lockstep group of DP ranks is one
//!   entry), keyed by their next internal event.
//!
//! [`Simulation::build`] assembles the sources from a [`SimPlan`]: every pool's engines in one
//! indexed heap (pools laid out one after the other; a disaggregated plan puts the decode pool
//! first), a router per pool, the front-ends in front of the entry pool (the pool clients send
//! to: the aggregated pool, or the prefill pool), and the KV transfers when the plan has a
//! handoff. The loop ([`run_plan_level`]) takes the earliest event, ties in the order
//! [`Source`] lists them: client sends, front-end deliveries (by replica), transfer completions,
//! engine events (by global engine index). Inside a replica, vLLM's internal DP load balancer
//! picks the rank (lowest `4 x waiting + running`, ties to the lowest rank;
//! `engine::cluster::dp_route`).
//!
//! What the collector sees is the client's view: arrivals and prefix-cache admissions from the
//! entry pool; first tokens, steps and finishes from the exit pool (the pool that streams the
//! client's tokens: the aggregated pool, or the decode pool); rejections, preemptions and CPU
//! tier activity from every pool.

use super::disagg::{disagg_results, Handoff};
use super::guard::LevelGuard;
use super::lockstep::{GroupState, LockstepGroup};
use super::plan::cache_info;
use super::router::{ReplicaView, Router, RouterSpec};
use super::{IndexedHeap, PlanPool, ReplicaResult, SimPlan, TopologyLevel};
use crate::engine::cluster::dp_route;
use crate::engine::{
    DecodeSteps, Engine, FinishedRequest, IdMap, Observer, OffloadStats, RejectReason, Request,
    SimError, StepRecord,
};
use crate::metrics::{Collector, LevelResult, RunTotals};
use crate::sweep::{FrontEnd, Stop, SweepError, SweepSpec};
use crate::units::Ticks;
use crate::workload::{Level, WorkloadGen, WorkloadSpec};
use std::collections::VecDeque;

/// An event source, in the order that breaks ties between events at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// The workload: a client sends a request (or a closed-loop client wakes).
    Send,
    /// Entry-pool replica `r`'s API server delivers its head request to the engines.
    FrontEnd(u32),
    /// A KV transfer completes (disaggregated plans).
    Transfer,
    /// Engine `i`'s next internal event (step start or end; a lockstep group at its first rank).
    Engine(u32),
}

/// The earliest of the sources' next events (`send`, the front-ends' heap top, the transfers'
/// earliest completion, the engines' heap top); at equal times the source listed first in
/// [`Source`] wins, and inside the front-ends and the engines the lowest index (their heaps'
/// order).
#[inline]
pub fn earliest(
    send: Option<Ticks>,
    frontend: Option<(Ticks, u32)>,
    transfer: Option<Ticks>,
    engine: Option<(Ticks, u32)>,
) -> Option<(Ticks, Source)> {
    // Absent sources at the end of time; a later source takes over only when strictly earlier.
    const END: u64 = u64::MAX;
    let (f, r) = frontend.map_or((END, 0), |(t, r)| (t.0, r));
    let (e, i) = engine.map_or((END, 0), |(t, i)| (t.0, i));
    let (mut t, mut src) = (send.map_or(END, |t| t.0), Source::Send);
    if f < t {
        (t, src) = (f, Source::FrontEnd(r));
    }
    let x = transfer.map_or(END, |t| t.0);
    if x < t {
        (t, src) = (x, Source::Transfer);
    }
    if e < t {
        (t, src) = (e, Source::Engine(i));
    }
    if t == END {
        // Nothing, or events at the last representable time: the first source present.
        src = if send.is_some() {
            Source::Send
        } else if frontend.is_some() {
            Source::FrontEnd(r)
        } else if transfer.is_some() {
            Source::Transfer
        } else if engine.is_some() {
            Source::Engine(i)
        } else {
            return None;
        };
    }
    Some((Ticks(t), src))
}

/// One engine's window accumulators (one cache line: a step touches one line per engine).
#[derive(Clone, Copy, Default)]
pub(super) struct EngineAcc {
    pub(super) busy: u64,
    pub(super) kv_int: f64,
    pub(super) kv_peak: f64,
    pub(super) out_tokens: u64,
    pub(super) prefill_tokens: u64,
    pub(super) prompt: u64,
    pub(super) cached: u64,
    pub(super) completed: u64,
}

/// Per-engine window accumulators (with more than one replica, or a handoff).
pub(super) struct Acc {
    pub(super) ws: Ticks,
    pub(super) we: Ticks,
    pub(super) e: Vec<EngineAcc>,
}

impl Acc {
    fn new(ws: Ticks, we: Ticks, n: usize) -> Acc {
        Acc {
            ws,
            we,
            e: vec![EngineAcc::default(); n],
        }
    }

    #[inline]
    fn inside(&self, t: Ticks) -> bool {
        t >= self.ws && t <= self.we
    }

    /// Folds one step of its engine: busy time, KV-use integral and peak over the window, and
    /// the tokens of steps ending inside it.
    #[inline]
    fn step(&mut self, s: &StepRecord) {
        let lo = s.start.max(self.ws);
        let hi = s.end.min(self.we);
        let ov = hi.0.saturating_sub(lo.0);
        let u = s.kv_used_blocks as f64 / s.kv_total_blocks.max(1) as f64;
        let inside = s.end > self.ws && s.end <= self.we;
        let x = &mut self.e[s.engine as usize];
        x.busy += ov;
        x.kv_int += u * ov as f64;
        x.kv_peak = x.kv_peak.max(u);
        if inside {
            x.out_tokens += s.output_tokens;
            x.prefill_tokens += s.num_prefill_tokens;
        }
    }

    /// The sum of `f` over the engines `r`, in engine order.
    pub(super) fn sum(&self, r: std::ops::Range<usize>, f: impl Fn(&EngineAcc) -> u64) -> u64 {
        self.e[r].iter().map(f).sum()
    }

    /// The sum of the engines' KV-use integrals over `r`, in engine order.
    pub(super) fn kv_int(&self, r: std::ops::Range<usize>) -> f64 {
        self.e[r].iter().map(|a| a.kv_int).sum::<f64>()
    }
}

/// Forwards the engines' events to the collector as the client sees them (see the module
/// comment; every `Observer` method: a new one must be handled here too) and remembers what the
/// loop acts on after the event.
pub(super) struct Tap<'a> {
    pub(super) inner: &'a mut Collector,
    /// Entry-pool engines `entry.0 .. entry.0 + entry.1`; exit-pool engines `exit.0 .. exit.0 +
    /// exit.1` (the same range for an aggregated pool).
    entry: (u32, u32),
    exit: (u32, u32),
    /// (request id, engine) finished on an exit engine or rejected anywhere since the last
    /// drain.
    pub(super) done: Vec<(u64, u32)>,
    /// (id, engine, time) requests that finished on an entry engine that is not an exit engine
    /// (prefills done) since the last drain.
    pub(super) prefilled: Vec<(u64, u32, Ticks)>,
    /// Client send time of each request whose engine arrival differs from it (front-end, router
    /// or transfer wait), by id (only inserted, looked up and removed, never iterated).
    pub(super) sent: IdMap<Ticks>,
    pub(super) acc: Option<Acc>,
}

impl Tap<'_> {
    #[inline]
    fn is_entry(&self, e: u32) -> bool {
        e.wrapping_sub(self.entry.0) < self.entry.1
    }
    #[inline]
    fn is_exit(&self, e: u32) -> bool {
        e.wrapping_sub(self.exit.0) < self.exit.1
    }
}

impl Observer for Tap<'_> {
    fn on_arrival(&mut self, e: u32, t: Ticks, id: u64) {
        if self.is_entry(e) {
            self.inner.on_arrival(e, t, id)
        }
    }
    fn on_rejected(&mut self, e: u32, t: Ticks, id: u64, r: &RejectReason) {
        self.done.push((id, e));
        self.sent.remove(&id);
        self.inner.on_rejected(e, t, id, r)
    }
    fn on_scheduled(&mut self, e: u32, t: Ticks, id: u64, p: u64, c: u64) {
        if let Some(a) = &mut self.acc {
            if a.inside(t) {
                let x = &mut a.e[e as usize];
                x.prompt += p;
                x.cached += c;
            }
        }
        if self.is_entry(e) {
            self.inner.on_scheduled(e, t, id, p, c)
        }
    }
    fn on_first_token(&mut self, e: u32, t: Ticks, id: u64) {
        if self.is_exit(e) {
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
        if let Some(a) = &mut self.acc {
            if a.inside(r.finish) {
                a.e[r.engine as usize].completed += 1;
            }
        }
        if !self.is_exit(r.engine) {
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
        if let Some(a) = &mut self.acc {
            a.step(s);
        }
        if self.is_exit(s.engine) {
            self.inner.on_step(s)
        }
    }
    fn on_decode_steps(&mut self, r: &DecodeSteps) {
        if let Some(a) = &mut self.acc {
            for i in 0..r.ends.len() {
                a.step(&r.record(i));
            }
        }
        if self.is_exit(r.engine) {
            self.inner.on_decode_steps(r)
        }
    }
    fn on_spec_step(&mut self, e: u32, end: Ticks, accepted: &[u64], drafted: &[u64]) {
        if self.is_exit(e) {
            self.inner.on_spec_step(e, end, accepted, drafted)
        }
    }
    /// Every pool's CPU tier counts in the level's `cpu_offload` (the recipe's tier sits on the
    /// decode workers; docs/topology.md "CPU offload tier in a pool").
    fn on_offload(&mut self, e: u32, t: Ticks, d: &OffloadStats) {
        self.inner.on_offload(e, t, d)
    }
}

/// The replicas of one pool, as its router sees them.
pub(super) struct PoolView<'e, 'm> {
    pub(super) engines: &'e [Engine<'m>],
    pub(super) dp: u32,
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

/// One replica's API server (`sweep::FrontEnd`): the event loop's round of chat-template
/// renders and the requests waiting for the next round, then the serial worker's queue (engine
/// arrival time, request carrying its client send time in `arrival`), FIFO with non-decreasing
/// times, and when the worker is next free.
#[derive(Default)]
pub(super) struct FrontEndQueue {
    pub(super) queue: VecDeque<(Ticks, Request)>,
    pub(super) free_at: Ticks,
    /// The round of renders running, in send order (empty: the loop is free).
    round: Vec<Request>,
    round_start: Ticks,
    round_end: Ticks,
    /// Requests sent while the round runs, after its start: the next round.
    next_round: Vec<Request>,
}

impl FrontEndQueue {
    /// When this API server next hands something on: its round's end or its queue's head.
    fn next_time(&self) -> Option<Ticks> {
        let head = self.queue.front().map(|(t, _)| *t);
        let round = (!self.round.is_empty()).then_some(self.round_end);
        match (head, round) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Requests anywhere in this API server.
    fn len(&self) -> usize {
        self.queue.len() + self.round.len() + self.next_round.len()
    }

    /// `req` reaches the serial worker at `now`.
    fn queue_serial(&mut self, fe: &FrontEnd, req: Request, now: Ticks) {
        let start = now.max(self.free_at);
        self.free_at = start + fe.serial(req.prompt_len());
        self.queue.push_back((self.free_at + fe.latency, req));
    }

    /// `req` is sent to this API server at `now`: into the render rounds when `fe` has them
    /// (the round running at `now` if it started at `now`, else the next one), else straight to
    /// the serial worker.
    fn admit(&mut self, fe: &FrontEnd, req: Request, now: Ticks) {
        if fe.render_round == Ticks::ZERO {
            self.queue_serial(fe, req, now);
        } else if self.round.is_empty() {
            self.round_start = now;
            self.round_end = now + fe.render_round;
            self.round.push(req);
        } else if now == self.round_start {
            self.round_end += fe.render_round;
            self.round.push(req);
        } else {
            self.next_round.push(req);
        }
    }

    /// The round running ends at `end`: its requests go to the serial worker in send order and
    /// the requests sent during it start the next round.
    fn end_round(&mut self, fe: &FrontEnd, end: Ticks) {
        for req in std::mem::take(&mut self.round) {
            self.queue_serial(fe, req, end);
        }
        if !self.next_round.is_empty() {
            self.round = std::mem::take(&mut self.next_round);
            self.round_start = end;
            self.round_end = end + fe.render_round.saturating_mul(self.round.len() as u64);
        }
    }
}

/// One pool as the simulation runs it: its engines (a contiguous range of the simulation's),
/// the router in front of its replicas, its lockstep groups.
pub(super) struct PoolRt<'p, 'm> {
    pub(super) plan: &'p PlanPool<'m>,
    /// Its engines are `lo .. lo + replicas x dp`.
    pub(super) lo: u32,
    pub(super) router: Router,
    /// Per replica, its DP ranks' lockstep state (empty when ranks step independently); the
    /// engine heap then holds one entry per replica, at its first rank's index.
    pub(super) groups: Vec<GroupState>,
}

impl PoolRt<'_, '_> {
    pub(super) fn engines(&self) -> std::ops::Range<usize> {
        let lo = self.lo as usize;
        lo..lo + (self.plan.replicas * self.plan.dp) as usize
    }
}

/// The running simulation of one level (see the module comment).
pub(super) struct Simulation<'m, 'p> {
    /// Every pool's engines, pool after pool.
    pub(super) engines: Vec<Engine<'m>>,
    pub(super) engine_heap: IndexedHeap,
    /// The pools in engine order.
    pub(super) pools: Vec<PoolRt<'p, 'm>>,
    /// The pool clients send to, and the pool that streams their tokens (indices in `pools`).
    pub(super) entry: usize,
    pub(super) exit: usize,
    /// The entry pool's replicas' API servers.
    pub(super) frontends: Vec<FrontEndQueue>,
    pub(super) frontend_heap: IndexedHeap,
    /// Requests held at the entry router by the saturation guard: (request, client send time).
    pub(super) held: VecDeque<(Request, Ticks)>,
    /// The handoff from the entry pool to the exit pool (disaggregated plans): the decode
    /// router's hold queue, blocks waits and the KV transfers.
    pub(super) handoff: Option<Handoff<'p>>,
    /// One pool of independent engines, no handoff: an engine event touches that engine's heap
    /// key only (the fast path of the single-pool sweeps).
    plain: bool,
    /// Engines may advance pure-decode steps as one event (engine/sched_run.rs).
    runs: bool,
    /// The engine whose event is being processed (0 for other sources: they come before every
    /// engine event at the same time).
    pub(super) cur_engine: u32,
    /// Engine events that decode runs stood in for, not yet counted by the level's guard.
    pub(super) elided: u64,
}

/// Lays out the pools' engines and assembles a [`Simulation`].
struct Builder<'m, 'p> {
    engines: Vec<Engine<'m>>,
    pools: Vec<PoolRt<'p, 'm>>,
}

impl<'m, 'p> Builder<'m, 'p> {
    /// Appends `pool`'s engines (behind a router by `router`, seeded `seed`); returns its index.
    fn pool(
        &mut self,
        pool: &'p PlanPool<'m>,
        router: &RouterSpec,
        seed: u64,
    ) -> Result<usize, SweepError> {
        let lo = self.engines.len() as u32;
        for i in 0..pool.replicas * pool.dp {
            self.engines
                .push(Engine::new(lo + i, pool.cfg.clone(), pool.model)?);
        }
        self.pools.push(PoolRt {
            plan: pool,
            lo,
            router: Router::new(router, pool.replicas, cache_info(&pool.cfg), seed),
            groups: if pool.lockstep && pool.dp > 1 {
                (0..pool.replicas)
                    .map(|_| GroupState::new(pool.dp, pool.model))
                    .collect()
            } else {
                Vec::new()
            },
        });
        Ok(self.pools.len() - 1)
    }
}

impl<'m, 'p> Simulation<'m, 'p> {
    /// Assembles the event sources of `plan` (routers seeded from `seed`).
    pub(super) fn build(plan: &'p SimPlan<'m>, seed: u64) -> Result<Self, SweepError> {
        plan.validate()?;
        let mut b = Builder {
            engines: Vec::with_capacity(plan.total_engines() as usize),
            pools: Vec::with_capacity(plan.pools.len()),
        };
        let (entry, exit, handoff) = match &plan.disagg {
            None => {
                // Only aggregated pools exist without a handoff; the plan has exactly one.
                let p = b.pool(&plan.pools[0], &plan.router, seed)?;
                (p, p, None)
            }
            Some(dis) => {
                if plan.pools.len() != 2 {
                    return Err(super::guard::budget_err(
                        "topology",
                        "a disaggregated plan has exactly two pools (prefill, decode)".into(),
                    ));
                }
                let (pre, dec) = (&plan.pools[0], &plan.pools[1]);
                let d = b.pool(dec, &dis.decode_router, crate::rng::hash2(seed, 0xdec0de))?;
                let p = b.pool(pre, &plan.router, seed)?;
                (p, d, Some(Handoff::new(dis, pre, dec)))
            }
        };
        let replicas = b.pools[entry].plan.replicas as usize;
        let plain = b.pools.len() == 1 && b.pools[0].groups.is_empty() && handoff.is_none();
        // Decode runs (engine/sched_run.rs) where nothing changes an engine from outside
        // between its events: one pool of independent engines. A router that reads their state
        // brings them up to the time it reads (`sync_for_router`).
        let runs = plan.decode_runs && plain;
        if runs {
            for e in &mut b.engines {
                e.allow_decode_runs(true);
            }
        }
        Ok(Simulation {
            plain,
            runs,
            cur_engine: 0,
            elided: 0,
            engine_heap: IndexedHeap::new(b.engines.len()),
            engines: b.engines,
            pools: b.pools,
            entry,
            exit,
            frontends: (0..replicas).map(|_| FrontEndQueue::default()).collect(),
            frontend_heap: IndexedHeap::new(replicas),
            held: VecDeque::new(),
            handoff,
        })
    }

    /// The next event of every source (see [`earliest`]).
    #[inline]
    pub(super) fn next_event(&self, send: Option<Ticks>) -> Option<(Ticks, Source)> {
        earliest(
            send,
            self.frontend_heap.peek(),
            self.handoff.as_ref().and_then(|h| h.next_transfer()),
            self.engine_heap.peek(),
        )
    }

    /// The pool engine `i` belongs to.
    #[inline]
    pub(super) fn pool_of(&self, i: u32) -> usize {
        if self.pools.len() == 1 {
            0
        } else {
            self.pools.iter().rposition(|p| p.lo <= i).unwrap_or(0)
        }
    }

    /// Engine `i`'s lockstep group in pool `p`: (replica, first engine, ranks), or `None` when
    /// the pool's ranks step independently.
    #[inline]
    fn group_of(&self, p: usize, i: usize) -> Option<(usize, usize, usize)> {
        let pool = &self.pools[p];
        if pool.groups.is_empty() {
            return None;
        }
        let dp = pool.plan.dp as usize;
        let r = (i - pool.lo as usize) / dp;
        Some((r, pool.lo as usize + r * dp, dp))
    }

    fn group(&mut self, p: usize, g: (usize, usize, usize)) -> LockstepGroup<'_, 'm> {
        let (r, lo, dp) = g;
        LockstepGroup::new(&mut self.pools[p].groups[r], &mut self.engines[lo..lo + dp])
    }

    /// Re-keys engine `i` of pool `p` (with lockstep: its group, at the group's first engine).
    #[inline]
    fn rekey(&mut self, p: usize, i: usize) {
        if let Some(g) = self.group_of(p, i) {
            let t = self.group(p, g).next_event_time();
            self.engine_heap.set(g.1 as u32, t);
            return;
        }
        self.engine_heap
            .set(i as u32, self.engines[i].next_event_time());
    }

    /// The engine replica `r` of pool `p` hands a new request to (vLLM's DP balancer).
    #[inline]
    pub(super) fn rank_for(&self, p: usize, r: u32) -> usize {
        let pool = &self.pools[p];
        let dp = pool.plan.dp as usize;
        let lo = pool.lo as usize + r as usize * dp;
        lo + dp_route(&self.engines[lo..lo + dp])
    }

    /// Submits `req` to engine `i` of pool `p` at `t` (through its lockstep group when it has
    /// one).
    pub(super) fn submit_engine(
        &mut self,
        p: usize,
        i: usize,
        req: Request,
        t: Ticks,
        tap: &mut Tap,
    ) -> Result<(), RejectReason> {
        let res = match self.group_of(p, i) {
            Some(g) => self.group(p, g).submit(i - g.1, req, t, tap),
            None => {
                let res = self.engines[i].submit(req, t, tap);
                self.elided += self.engines[i].take_elided_events();
                res
            }
        };
        self.rekey(p, i);
        res
    }

    /// A transferred request reaches exit engine `d` at `t` with `reserved` blocks.
    pub(super) fn submit_transferred(
        &mut self,
        d: usize,
        req: Request,
        t: Ticks,
        reserved: u64,
        tap: &mut Tap,
    ) {
        let p = self.exit;
        let _ = match self.group_of(p, d) {
            Some(g) => self
                .group(p, g)
                .submit_transferred(d - g.1, req, t, reserved, tap),
            None => self.engines[d].submit_transferred(req, t, reserved, tap),
        };
        self.rekey(p, d);
    }

    /// Processes the next event of engine `i` (with lockstep: of its group); with a handoff,
    /// then starts the transfers its exit ranks now have blocks for.
    #[inline]
    fn process_engine(&mut self, i: usize, t: Ticks, tap: &mut Tap) -> Result<(), SimError> {
        if self.plain {
            let e = &mut self.engines[i];
            e.process_next_event(tap)?;
            self.elided += e.take_elided_events();
            self.engine_heap.set(i as u32, e.next_event_time());
            return Ok(());
        }
        let p = self.pool_of(i as u32);
        let (lo, n) = match self.group_of(p, i) {
            Some(g) => {
                self.group(p, g).process_next_event(tap)?;
                (g.1, g.2)
            }
            None => {
                self.engines[i].process_next_event(tap)?;
                (i, 1)
            }
        };
        self.rekey(p, lo);
        if self.handoff.is_some() && p == self.exit {
            for d in lo..lo + n {
                self.try_start(d, t);
            }
        }
        Ok(())
    }

    /// The entry pool's replica `r` takes `req` (sent by its client at `sent`) at `now`.
    fn deliver(&mut self, r: u32, mut req: Request, sent: Ticks, now: Ticks, tap: &mut Tap) {
        if self.handoff.is_some() {
            self.submit_prefill(r, req, sent, now, tap);
            return;
        }
        if sent != now {
            tap.sent.insert(req.id, sent);
            req.arrival = now;
        }
        let p = self.entry;
        let i = self.rank_for(p, r);
        let _ = self.submit_engine(p, i, req, now, tap);
    }

    /// Sends a request (sent by its client at `sent`) to the entry pool's replica `r` at `now`:
    /// straight to its engines, or into its API server.
    fn dispatch(&mut self, r: u32, mut req: Request, sent: Ticks, now: Ticks, tap: &mut Tap) {
        self.pools[self.entry].router.dispatched(r);
        let fe = self.pools[self.entry].plan.frontend;
        if fe.is_zero() {
            self.deliver(r, req, sent, now, tap);
        } else {
            let f = &mut self.frontends[r as usize];
            // The client's send time rides in `arrival` until the front-end delivers it.
            req.arrival = sent;
            f.admit(&fe, req, now);
            self.frontend_heap.set(r, f.next_time());
        }
    }

    /// Replica `r`'s API server at `t`: its round of renders ends, or it delivers its head
    /// request.
    fn deliver_frontend(&mut self, r: u32, t: Ticks, tap: &mut Tap) {
        let fe = self.pools[self.entry].plan.frontend;
        let f = &mut self.frontends[r as usize];
        if !f.round.is_empty() && f.round_end <= t {
            let end = f.round_end;
            f.end_round(&fe, end);
            self.frontend_heap.set(r, f.next_time());
        } else if let Some((_, req)) = f.queue.pop_front() {
            self.frontend_heap.set(r, f.next_time());
            let sent = req.arrival;
            self.deliver(r, req, sent, t, tap);
        }
    }

    /// The entry router takes a request sent at `sent` (or holds it behind earlier held ones).
    fn route(&mut self, req: Request, sent: Ticks, now: Ticks, tap: &mut Tap) {
        if !self.held.is_empty() {
            self.held.push_back((req, sent));
            return;
        }
        self.sync_for_router(now, tap);
        match self.pick(self.entry, &req, now) {
            Some(r) => self.dispatch(r, req, sent, now, tap),
            None => self.held.push_back((req, sent)),
        }
    }

    /// Before the entry router picks at `now`: if it reads the replicas' state then, their
    /// engines' decode runs are carried out up to `now` (what stepping one by one would show it:
    /// the steps that ended before `now`; an engine event at `now` comes after the pick).
    #[inline]
    fn sync_for_router(&mut self, now: Ticks, tap: &mut Tap) {
        if !self.runs || !self.pools[self.entry].router.reads_view_at(now) {
            return;
        }
        // After engine `cur`'s event at `now`, the engines before it in the event order have
        // had their events at `now` too: their steps ending at `now` are done.
        let cur = self.cur_engine as usize;
        let range = self.pools[self.entry].engines();
        for (i, e) in self
            .engines
            .iter_mut()
            .enumerate()
            .take(range.end)
            .skip(range.start)
        {
            let upto = if i < cur {
                Ticks(now.0.saturating_add(1))
            } else {
                now
            };
            if e.cut_decode_run(upto, tap) {
                // Its next event is now the end of the step in flight.
                self.engine_heap.set(i as u32, e.next_event_time());
                self.elided += e.take_elided_events();
            }
        }
    }

    /// Pool `p`'s router picks a replica for `req` (`None`: its guard holds it).
    pub(super) fn pick(&mut self, p: usize, req: &Request, now: Ticks) -> Option<u32> {
        let pool = &mut self.pools[p];
        let view = PoolView {
            engines: &self.engines[pool.engines()],
            dp: pool.plan.dp,
        };
        pool.router.pick(req, now, &view)
    }

    /// Dispatches requests held at the entry router while its guard lets them through.
    fn release_held(&mut self, now: Ticks, tap: &mut Tap) {
        while !self.held.is_empty() {
            self.sync_for_router(now, tap);
            let Some(r) = self.pick_held(now) else {
                break;
            };
            let (req, sent) = self.held.pop_front().expect("held request");
            self.dispatch(r, req, sent, now, tap);
        }
    }

    /// The entry router's pick for the head of the hold queue.
    fn pick_held(&mut self, now: Ticks) -> Option<u32> {
        let pool = &mut self.pools[self.entry];
        let view = PoolView {
            engines: &self.engines[pool.engines()],
            dp: pool.plan.dp,
        };
        let req = &self.held.front().expect("held request").0;
        pool.router.pick(req, now, &view)
    }

    /// After an event at `t`: prefilled requests go to the decode router; finished and rejected
    /// requests free their clients and their routers' slots; held requests move on.
    #[inline]
    fn settle(&mut self, t: Ticks, gen: &mut WorkloadGen, tap: &mut Tap) {
        if tap.prefilled.is_empty() && tap.done.is_empty() {
            return;
        }
        if !tap.prefilled.is_empty() {
            self.hand_off(t, tap);
            if !self.held.is_empty() {
                self.release_held(t, tap);
            }
        }
        if !tap.done.is_empty() {
            let mut exit_done = false;
            for k in 0..tap.done.len() {
                let (id, e) = tap.done[k];
                gen.on_done(id, t);
                let p = self.pool_of(e);
                let pool = &mut self.pools[p];
                pool.router.done((e - pool.lo) / pool.plan.dp);
                if p == self.exit {
                    exit_done = true;
                } else if let Some(h) = &mut self.handoff {
                    h.forget(id);
                }
            }
            tap.done.clear();
            if !self.held.is_empty() {
                self.release_held(t, tap);
            }
            if exit_done && self.handoff.is_some() {
                self.release_decode_held(t);
            }
        }
    }

    /// Carries out every engine's decode run up to `t` (engine/sched_run.rs: the steps that
    /// ended before `t`, and the one in flight at `t` scheduled).
    fn cut_runs(&mut self, t: Ticks, tap: &mut Tap) {
        for (i, e) in self.engines.iter_mut().enumerate() {
            if e.cut_decode_run(t, tap) {
                self.engine_heap.set(i as u32, e.next_event_time());
                e.take_elided_events();
            }
        }
    }

    /// Requests in the simulation: in engines, front-ends, hold queues, blocks waits and
    /// transfers.
    fn in_flight(&self) -> u64 {
        let engines: u64 = self
            .engines
            .iter()
            .map(|e| (e.num_waiting() + e.num_running()) as u64)
            .sum();
        let fe: u64 = self.frontends.iter().map(|f| f.len() as u64).sum();
        engines + fe + self.held.len() as u64 + self.handoff.as_ref().map_or(0, |h| h.in_flight())
    }

    /// Per-replica results of pool `p` over the window `[acc.ws, we]` (`win_ns` long).
    pub(super) fn replica_results(&self, p: usize, acc: &Acc, win_ns: f64) -> Vec<ReplicaResult> {
        let pool = &self.pools[p];
        let dp = pool.plan.dp as usize;
        let lo = pool.lo as usize;
        (0..pool.plan.replicas as usize)
            .map(|r| {
                let ranks = lo + r * dp..lo + (r + 1) * dp;
                let (pt, c) = (
                    acc.sum(ranks.clone(), |a| a.prompt),
                    acc.sum(ranks.clone(), |a| a.cached),
                );
                ReplicaResult {
                    pool: pool.plan.name.clone(),
                    replica: r as u32,
                    routed_requests: pool.router.routed[r],
                    completed_requests: acc.sum(ranks.clone(), |a| a.completed),
                    output_tokens_per_s: acc.sum(ranks.clone(), |a| a.out_tokens) as f64
                        / (win_ns / 1e9),
                    kv_utilization_mean: acc.kv_int(ranks) / (win_ns * dp as f64),
                    prefix_cache_hit_rate: (pt > 0).then(|| c as f64 / pt as f64),
                }
            })
            .collect()
    }
}

/// Load imbalance over `replicas`: max output tokens/s over their mean (`None` when nothing was
/// produced).
pub(super) fn imbalance<'a>(
    replicas: impl Iterator<Item = &'a ReplicaResult> + Clone,
) -> Option<f64> {
    let n = replicas.clone().count().max(1) as f64;
    let mean = replicas.clone().map(|r| r.output_tokens_per_s).sum::<f64>() / n;
    let max = replicas.map(|r| r.output_tokens_per_s).fold(0.0, f64::max);
    (mean > 0.0).then(|| max / mean)
}

/// What one level's run leaves: its result, its collector, its topology results (with more than
/// one replica, or a handoff) and the handoff log (only when asked for).
pub(super) type LevelRun = (
    LevelResult,
    Collector,
    Option<TopologyLevel>,
    Vec<super::HandoffLog>,
);

/// Runs one level of `plan` and returns its result, its collector and (with more than one
/// replica, or disaggregated) the topology results.
pub fn run_plan_level(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
    col: Collector,
) -> Result<(LevelResult, Collector, Option<TopologyLevel>), SweepError> {
    run_level(plan, workload, spec, level, progress, col, false).map(|(r, c, t, _)| (r, c, t))
}

/// The event loop of one level (see the module comment); `keep_log` keeps every handoff.
pub(super) fn run_level(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
    mut col: Collector,
    keep_log: bool,
) -> Result<LevelRun, SweepError> {
    col.clear();
    let w = workload.at_level(level)?;
    // A burst level runs until its burst finishes (`Stop::at`).
    let level_spec;
    let spec = if spec.stop == Stop::Burst {
        level_spec = SweepSpec {
            stop: spec.stop.at(&w),
            ..spec.clone()
        };
        &level_spec
    } else {
        spec
    };
    if let Stop::Duration { duration, warmup } = spec.stop {
        col.set_window(warmup, duration);
    }
    let mut guard = LevelGuard::new(&w, level, spec)?;
    let limit = guard.limit;
    let mut sim = Simulation::build(plan, w.seed)?;
    let max_model_len = sim.pools[sim.exit].plan.cfg.max_model_len;
    let mut gen = WorkloadGen::new(&w, max_model_len, limit);
    let end = guard.end;
    let n_eng = sim.engines.len();
    let disagg = sim.handoff.is_some();
    let (ws, we) = match spec.stop {
        Stop::Duration { duration, warmup } => (warmup, duration),
        Stop::Requests(_) | Stop::Burst => (Ticks::ZERO, Ticks(u64::MAX)),
    };
    let per = disagg || (plan.total_replicas() > 1 && matches!(spec.stop, Stop::Duration { .. }));
    let range = |p: &PoolRt| {
        let r = p.engines();
        (r.start as u32, r.len() as u32)
    };
    let mut tap = Tap {
        inner: &mut col,
        entry: range(&sim.pools[sim.entry]),
        exit: range(&sim.pools[sim.exit]),
        done: Vec::new(),
        prefilled: Vec::new(),
        sent: IdMap::default(),
        acc: per.then(|| Acc::new(ws, we, n_eng)),
    };
    while let Some((t, src)) = sim.next_event(gen.peek_time()) {
        if !guard.event(t, spec, &w, tap.inner, || sim.in_flight(), progress)? {
            break;
        }
        sim.cur_engine = match src {
            Source::Engine(i) => i,
            _ => 0,
        };
        match src {
            Source::Send => {
                let Some(req) = gen.pop() else {
                    continue;
                };
                if gen.issued() > spec.max_requests {
                    return Err(SimError::RequestCap {
                        cap: spec.max_requests,
                    }
                    .into());
                }
                sim.route(req, t, t, &mut tap);
            }
            Source::FrontEnd(r) => sim.deliver_frontend(r, t, &mut tap),
            Source::Transfer => sim.complete_transfer(t, &mut tap),
            Source::Engine(i) => sim.process_engine(i as usize, t, &mut tap)?,
        }
        sim.settle(t, &mut gen, &mut tap);
        if sim.elided > 0 {
            guard.elided(std::mem::take(&mut sim.elided));
        }
    }
    // Decode runs still planned past the level's end: the steps that ended by then happened
    // (their events were due), the one in flight at the end started.
    if let Some(end) = end {
        sim.cut_runs(Ticks(end.0.saturating_add(1)), &mut tap);
    }
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
    let acc = tap.acc.take();
    drop(tap);
    // The window: the level's, or (request-count levels) from 0 to the last event.
    let (rws, rwe) = match spec.stop {
        Stop::Duration { duration, warmup } => (warmup, duration),
        Stop::Requests(_) | Stop::Burst => (Ticks::ZERO, guard.now),
    };
    let win_ns = rwe.0.saturating_sub(rws.0).max(1) as f64;
    let (topo, log) = match (acc, disagg) {
        (None, _) => (None, Vec::new()),
        (Some(acc), false) => {
            let replicas = sim.replica_results(sim.entry, &acc, win_ns);
            let topo = TopologyLevel {
                level: level.value(),
                router: plan.router.describe(),
                imbalance: imbalance(replicas.iter()),
                replicas,
                pools: Vec::new(),
                transfer: None,
            };
            (Some(topo), Vec::new())
        }
        (Some(acc), true) => {
            let (topo, log) = disagg_results(&mut sim, plan, level, &acc, rws, rwe, keep_log);
            (Some(topo), log)
        }
    };
    col.flush();
    let r = col.level_result(level, rws, rwe, spec.gpus, totals);
    Ok((r, col, topo, log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_rounds_take_every_request_present_at_their_start() {
        let fe = FrontEnd {
            latency: Ticks(100),
            serial_per_request: Ticks(1),
            serial_per_input_token: Ticks::ZERO,
            render_round: Ticks(10),
        };
        let req = |id| Request::unique(id, Ticks::ZERO, 8, 1);
        let mut f = FrontEndQueue::default();
        // Three sent at 0: one round of 30. Two sent during it: the next round.
        for id in 0..3 {
            f.admit(&fe, req(id), Ticks(0));
        }
        f.admit(&fe, req(3), Ticks(5));
        f.admit(&fe, req(4), Ticks(25));
        assert_eq!((f.len(), f.next_time()), (5, Some(Ticks(30))));
        f.end_round(&fe, Ticks(30));
        // The first round's requests reach the serial worker together at 30, one tick each,
        // then the latency; the next round runs 30..50.
        let times: Vec<u64> = f.queue.iter().map(|(t, r)| t.0 * 10 + r.id).collect();
        assert_eq!(times, vec![1310, 1321, 1332]);
        assert_eq!(
            (f.round.len(), f.round_start, f.round_end),
            (2, Ticks(30), Ticks(50))
        );
        assert_eq!(f.next_time(), Some(Ticks(50)));
        // A request sent at the round's start instant joins it.
        f.admit(&fe, req(5), Ticks(30));
        assert_eq!((f.round.len(), f.round_end), (3, Ticks(60)));
        f.end_round(&fe, Ticks(60));
        let ids: Vec<u64> = f.queue.iter().map(|(_, r)| r.id).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(f.queue.back().map(|(t, _)| *t), Some(Ticks(163)));
        assert!(f.round.is_empty() && f.next_round.is_empty());
        // Without renders a request goes straight to the serial worker.
        let plain = FrontEnd {
            render_round: Ticks::ZERO,
            ..fe
        };
        let mut g = FrontEndQueue::default();
        g.admit(&plain, req(9), Ticks(7));
        assert_eq!(g.next_time(), Some(Ticks(108)));
    }

    #[test]
    fn ties_go_to_sends_then_front_ends_then_transfers_then_engines() {
        let t = Ticks(100);
        let all = earliest(Some(t), Some((t, 3)), Some(t), Some((t, 0)));
        assert_eq!(all, Some((t, Source::Send)));
        let no_send = earliest(None, Some((t, 3)), Some(t), Some((t, 0)));
        assert_eq!(no_send, Some((t, Source::FrontEnd(3))));
        let xfer_engine = earliest(None, None, Some(t), Some((t, 0)));
        assert_eq!(xfer_engine, Some((t, Source::Transfer)));
        assert_eq!(
            earliest(None, None, None, Some((t, 7))),
            Some((t, Source::Engine(7)))
        );
        assert_eq!(earliest(None, None, None, None), None);
        // The earliest time wins whatever its source.
        let engine_first = earliest(
            Some(Ticks(101)),
            Some((Ticks(101), 0)),
            Some(Ticks(101)),
            Some((Ticks(99), 2)),
        );
        assert_eq!(engine_first, Some((Ticks(99), Source::Engine(2))));
        let xfer_first = earliest(
            Some(Ticks(101)),
            Some((Ticks(100), 0)),
            Some(Ticks(99)),
            None,
        );
        assert_eq!(xfer_first, Some((Ticks(99), Source::Transfer)));
        let fe_first = earliest(
            Some(Ticks(101)),
            Some((Ticks(100), 4)),
            None,
            Some((Ticks(100), 0)),
        );
        assert_eq!(fe_first, Some((Ticks(100), Source::FrontEnd(4))));
    }
}
