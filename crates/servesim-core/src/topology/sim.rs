//! The simulation of one level over a plan of pools: explicit event sources, each indexed so the
//! next event costs O(log n):
//! - the workload (client sends and closed-loop wake-ups: `WorkloadGen`'s own heap);
//! - the router (decides at send time; requests held by the saturation guard wait in a FIFO and
//!   are dispatched when a request finishes);
//! - one API-server front-end per replica (`FrontEnd`: serial CPU time then a latency), keyed
//!   by the time its head request reaches the engine;
//! - the engines (one per DP rank per replica), keyed by their next internal event.
//!
//! Order at equal times: client sends, then front-end deliveries (by replica), then engine
//! events (by global engine index) — for one replica exactly the order of the flat loop this
//! replaces, so single-replica results are unchanged. Inside a replica, vLLM's internal DP load
//! balancer picks the rank (lowest `4 x waiting + running`, ties to the lowest rank;
//! `engine::cluster::dp_route`).

use super::lockstep::{GroupState, LockstepGroup};
use super::router::{EngineCacheInfo, ReplicaView, Router, RouterSpec};
use super::{IndexedHeap, MAX_ENGINES};
use crate::engine::cluster::dp_route;
use crate::engine::{
    Engine, EngineConfig, FinishedRequest, IdMap, Observer, RejectReason, Request, SimError,
    StepRecord, StepTimeModel,
};
use crate::metrics::{Collector, LevelResult, RunTotals};
use crate::sweep::{FrontEnd, Stop, SweepError, SweepSpec, PROGRESS_EVERY_EVENTS};
use crate::units::Ticks;
use crate::workload::{Level, WorkloadGen, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One pool of identical replicas.
#[derive(Clone)]
pub struct PlanPool<'m> {
    /// `aggregated` (prefill and decode in one engine).
    pub name: String,
    /// One engine (= one DP rank) of a replica.
    pub cfg: EngineConfig,
    pub model: &'m dyn StepTimeModel,
    pub replicas: u32,
    /// DP ranks (engines) per replica.
    pub dp: u32,
    /// Each replica's API server.
    pub frontend: FrontEnd,
    /// The DP ranks of a replica step in lockstep (vLLM DP + EP for MoE; `lockstep.rs`).
    pub lockstep: bool,
}

/// What a simulation runs: its pools and the router in front of them.
#[derive(Clone)]
pub struct SimPlan<'m> {
    pub pools: Vec<PlanPool<'m>>,
    pub router: RouterSpec,
    /// Disaggregated serving: `pools` are `[prefill, decode]`, run by `disagg.rs`.
    pub disagg: Option<super::DisaggPlan>,
}

impl<'m> SimPlan<'m> {
    /// One replica of `engines` DP ranks behind one front-end (the plan of a version-1 scenario
    /// with one replica, and of the engine-level tests).
    pub fn single(
        cfg: &EngineConfig,
        model: &'m dyn StepTimeModel,
        engines: u32,
        frontend: FrontEnd,
    ) -> SimPlan<'m> {
        SimPlan {
            pools: vec![PlanPool {
                name: "aggregated".into(),
                cfg: cfg.clone(),
                model,
                replicas: 1,
                dp: engines.max(1),
                frontend,
                lockstep: false,
            }],
            router: RouterSpec::default(),
            disagg: None,
        }
    }

    pub fn total_engines(&self) -> u64 {
        self.pools
            .iter()
            .map(|p| p.replicas as u64 * p.dp as u64)
            .sum()
    }

    pub fn total_replicas(&self) -> u64 {
        self.pools.iter().map(|p| p.replicas as u64).sum()
    }

    /// Checks the engine settings and the stated engine limit.
    pub fn validate(&self) -> Result<(), SweepError> {
        if self.pools.is_empty() {
            return Err(SweepError::Spec {
                field: "topology".into(),
                problem: "a plan needs at least one pool".into(),
            });
        }
        for p in &self.pools {
            p.cfg.validate().map_err(SimError::from)?;
        }
        let n = self.total_engines();
        if n > MAX_ENGINES as u64 {
            return Err(SweepError::Spec {
                field: "engines".into(),
                problem: format!(
                    "{n} engines exceed the simulator's limit of {MAX_ENGINES}; use fewer replicas or DP ranks"
                ),
            });
        }
        Ok(())
    }
}

/// One replica's share of a level (routing counts over the whole run; the rest over the
/// measurement window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaResult {
    pub pool: String,
    pub replica: u32,
    /// Requests the router sent to this replica during the whole run.
    pub routed_requests: u64,
    /// Requests that finished on it inside the window.
    pub completed_requests: u64,
    pub output_tokens_per_s: f64,
    /// Time-averaged KV use over the window, mean over its DP ranks.
    pub kv_utilization_mean: f64,
    /// Prompt tokens found in its prefix cache / prompt tokens looked up, at admissions in the
    /// window.
    pub prefix_cache_hit_rate: Option<f64>,
}

/// Per-replica results of one level (reported when a plan has more than one replica).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologyLevel {
    /// The level value (concurrency or request rate).
    pub level: f64,
    pub router: String,
    pub replicas: Vec<ReplicaResult>,
    /// Load imbalance: max over replicas of output tokens/s divided by their mean (1 = even;
    /// `null` when nothing was produced).
    pub imbalance: Option<f64>,
    /// Disaggregated plans: per-pool results (prefill, decode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<super::PoolResult>,
    /// Disaggregated plans: the KV transfers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<super::TransferStats>,
}

/// Per-engine window accumulators (only with more than one replica).
struct PerEngine {
    ws: Ticks,
    we: Ticks,
    kv_int: Vec<f64>,
    out_tokens: Vec<u64>,
    prompt: Vec<u64>,
    cached: Vec<u64>,
    completed: Vec<u64>,
}

/// Forwards engine events to the collector (every `Observer` method: a new one must be forwarded
/// here too) and remembers finished/rejected requests.
struct Tap<'a> {
    inner: &'a mut Collector,
    /// (request id, engine) finished or rejected since the last drain.
    done: Vec<(u64, u32)>,
    /// Client send time of each request whose engine arrival differs from it (front-end or
    /// router wait), by id (only inserted, looked up and removed, never iterated).
    sent: IdMap<Ticks>,
    per: Option<PerEngine>,
}

impl Observer for Tap<'_> {
    fn on_arrival(&mut self, e: u32, t: Ticks, id: u64) {
        self.inner.on_arrival(e, t, id)
    }
    fn on_rejected(&mut self, e: u32, t: Ticks, id: u64, r: &RejectReason) {
        self.done.push((id, e));
        self.sent.remove(&id);
        self.inner.on_rejected(e, t, id, r)
    }
    fn on_scheduled(&mut self, e: u32, t: Ticks, id: u64, p: u64, c: u64) {
        if let Some(pe) = &mut self.per {
            if t >= pe.ws && t <= pe.we {
                pe.prompt[e as usize] += p;
                pe.cached[e as usize] += c;
            }
        }
        self.inner.on_scheduled(e, t, id, p, c)
    }
    fn on_first_token(&mut self, e: u32, t: Ticks, id: u64) {
        self.inner.on_first_token(e, t, id)
    }
    fn on_preempted(&mut self, e: u32, t: Ticks, id: u64) {
        self.inner.on_preempted(e, t, id)
    }
    fn on_finished(&mut self, r: &FinishedRequest) {
        self.on_finished_owned(r.clone());
    }
    fn on_finished_owned(&mut self, mut r: FinishedRequest) {
        self.done.push((r.id, r.engine));
        if let Some(s) = self.sent.remove(&r.id) {
            r.arrival = s;
        }
        if let Some(pe) = &mut self.per {
            if r.finish >= pe.ws && r.finish <= pe.we {
                pe.completed[r.engine as usize] += 1;
            }
        }
        self.inner.on_finished_owned(r)
    }
    fn on_step(&mut self, s: &StepRecord) {
        if let Some(pe) = &mut self.per {
            let e = s.engine as usize;
            let lo = s.start.max(pe.ws);
            let hi = s.end.min(pe.we);
            let ov = hi.0.saturating_sub(lo.0);
            pe.kv_int[e] += s.kv_used_blocks as f64 / s.kv_total_blocks.max(1) as f64 * ov as f64;
            if s.end > pe.ws && s.end <= pe.we {
                pe.out_tokens[e] += s.output_tokens;
            }
        }
        self.inner.on_step(s)
    }
    fn on_spec_step(&mut self, e: u32, end: Ticks, accepted: &[u64], drafted: &[u64]) {
        self.inner.on_spec_step(e, end, accepted, drafted)
    }
    fn on_offload(&mut self, e: u32, t: Ticks, d: &crate::engine::OffloadStats) {
        self.inner.on_offload(e, t, d)
    }
}

/// The engines of the plan's (single, aggregated) pool, as the router sees them.
struct Engines<'e, 'm> {
    engines: &'e [Engine<'m>],
    dp: u32,
}

impl ReplicaView for Engines<'_, '_> {
    fn waiting(&self, r: u32) -> u64 {
        let lo = (r * self.dp) as usize;
        self.engines[lo..lo + self.dp as usize]
            .iter()
            .map(|e| e.num_waiting() as u64)
            .sum()
    }
    fn kv_usage(&self, r: u32) -> f64 {
        let lo = (r * self.dp) as usize;
        let ranks = &self.engines[lo..lo + self.dp as usize];
        ranks
            .iter()
            .map(|e| e.kv_used_blocks() as f64 / e.kv_total_blocks().max(1) as f64)
            .sum::<f64>()
            / self.dp as f64
    }
}

/// What a pool's engines report to the router's auto-tune (vLLM `cache_config_info`).
pub(super) fn cache_info(cfg: &EngineConfig) -> EngineCacheInfo {
    EngineCacheInfo {
        block_size: cfg.block_size,
        num_gpu_blocks: cfg.num_gpu_blocks,
    }
}

/// One replica's API server: requests in it (engine arrival time, request), FIFO with
/// non-decreasing times, and when its serial worker is next free.
#[derive(Default)]
pub(super) struct FrontEndQueue {
    pub(super) queue: VecDeque<(Ticks, Request)>,
    pub(super) free_at: Ticks,
}

/// The running simulation of one level.
struct Simulation<'m, 'p> {
    pool: &'p PlanPool<'m>,
    engines: Vec<Engine<'m>>,
    engine_heap: IndexedHeap,
    frontends: Vec<FrontEndQueue>,
    frontend_heap: IndexedHeap,
    router: Router,
    /// Requests held at the router by the saturation guard: (request, client send time).
    held: VecDeque<(Request, Ticks)>,
    /// Per replica, its DP ranks' lockstep state (empty when ranks step independently); the
    /// engine heap then holds one entry per replica, at its first rank's index.
    groups: Vec<GroupState>,
}

impl<'m, 'p> Simulation<'m, 'p> {
    fn new(plan: &'p SimPlan<'m>, seed: u64) -> Result<Simulation<'m, 'p>, SweepError> {
        plan.validate()?;
        // Only aggregated pools exist so far; the plan has exactly one.
        let pool = &plan.pools[0];
        let n = pool.replicas as u64 * pool.dp as u64;
        let engines = (0..n as u32)
            .map(|i| Engine::new(i, pool.cfg.clone(), pool.model))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Simulation {
            pool,
            engine_heap: IndexedHeap::new(engines.len()),
            engines,
            frontends: (0..pool.replicas)
                .map(|_| FrontEndQueue::default())
                .collect(),
            frontend_heap: IndexedHeap::new(pool.replicas as usize),
            router: Router::new(&plan.router, pool.replicas, cache_info(&pool.cfg), seed),
            held: VecDeque::new(),
            groups: if pool.lockstep && pool.dp > 1 {
                (0..pool.replicas)
                    .map(|_| GroupState::new(pool.dp, pool.model))
                    .collect()
            } else {
                Vec::new()
            },
        })
    }

    fn replica_of(&self, engine: u32) -> u32 {
        engine / self.pool.dp
    }

    /// Hands a request to replica `r`'s engines (vLLM's DP balancer picks the rank).
    fn submit_to_replica(&mut self, r: u32, req: Request, t: Ticks, tap: &mut Tap) {
        let dp = self.pool.dp as usize;
        let lo = r as usize * dp;
        let i = lo + dp_route(&self.engines[lo..lo + dp]);
        if let Some(st) = self.groups.get_mut(r as usize) {
            let mut g = LockstepGroup::new(st, &mut self.engines[lo..lo + dp]);
            let _ = g.submit(i - lo, req, t, tap);
            self.engine_heap.set(lo as u32, g.next_event_time());
            return;
        }
        let _ = self.engines[i].submit(req, t, tap);
        self.engine_heap
            .set(i as u32, self.engines[i].next_event_time());
    }

    /// Processes the next event of engine `eng` (with lockstep: of its replica's group, keyed
    /// at the group's first rank).
    fn process_engine(&mut self, eng: u32, tap: &mut Tap) -> Result<(), SimError> {
        let i = eng as usize;
        if !self.groups.is_empty() {
            let dp = self.pool.dp as usize;
            let r = i / dp;
            let lo = r * dp;
            let mut g = LockstepGroup::new(&mut self.groups[r], &mut self.engines[lo..lo + dp]);
            g.process_next_event(tap)?;
            self.engine_heap.set(lo as u32, g.next_event_time());
            return Ok(());
        }
        self.engines[i].process_next_event(tap)?;
        self.engine_heap.set(eng, self.engines[i].next_event_time());
        Ok(())
    }

    /// Sends a request (sent by its client at `sent`) to replica `r` at `now`.
    fn dispatch(&mut self, r: u32, mut req: Request, sent: Ticks, now: Ticks, tap: &mut Tap) {
        self.router.dispatched(r);
        let fe = self.pool.frontend;
        if fe.is_zero() {
            if sent != now {
                tap.sent.insert(req.id, sent);
                req.arrival = now;
            }
            self.submit_to_replica(r, req, now, tap);
        } else {
            let f = &mut self.frontends[r as usize];
            let start = now.max(f.free_at);
            f.free_at = start + fe.serial_per_request;
            let at = f.free_at + fe.latency;
            tap.sent.insert(req.id, sent);
            req.arrival = at;
            let was_empty = f.queue.is_empty();
            f.queue.push_back((at, req));
            if was_empty {
                self.frontend_heap.set(r, Some(at));
            }
        }
    }

    fn route(&mut self, req: Request, sent: Ticks, now: Ticks, tap: &mut Tap) {
        if !self.held.is_empty() {
            self.held.push_back((req, sent));
            return;
        }
        let view = Engines {
            engines: &self.engines,
            dp: self.pool.dp,
        };
        match self.router.pick(&req, now, &view) {
            Some(r) => self.dispatch(r, req, sent, now, tap),
            None => self.held.push_back((req, sent)),
        }
    }

    /// Dispatches held requests while the guard lets them through.
    fn release_held(&mut self, now: Ticks, tap: &mut Tap) {
        while let Some((req, _)) = self.held.front() {
            let view = Engines {
                engines: &self.engines,
                dp: self.pool.dp,
            };
            let Some(r) = self.router.pick(req, now, &view) else {
                break;
            };
            let (req, sent) = self.held.pop_front().expect("held request");
            self.dispatch(r, req, sent, now, tap);
        }
    }

    fn in_flight(&self) -> u64 {
        let engines: u64 = self
            .engines
            .iter()
            .map(|e| (e.num_waiting() + e.num_running()) as u64)
            .sum();
        let fe: u64 = self.frontends.iter().map(|f| f.queue.len() as u64).sum();
        engines + fe + self.held.len() as u64
    }
}

/// What every level loop checks, shared by the aggregated ([`run_plan_level`]) and the
/// disaggregated (`disagg.rs`) simulation: the memory budget before the level and every
/// [`PROGRESS_EVERY_EVENTS`] events while it runs, the simulated-time horizon, the event cap,
/// progress, and a clock that never goes back.
pub(super) struct LevelGuard {
    /// Requests to issue (`num_requests` levels).
    pub limit: Option<u64>,
    /// The level's end (duration levels).
    pub end: Option<Ticks>,
    /// The time of the last event.
    pub now: Ticks,
    events: u64,
    clients: u64,
    horizon: Ticks,
}

impl LevelGuard {
    /// Refuses a level whose settings alone exceed the memory budget (crate::budget).
    pub(super) fn new(
        w: &WorkloadSpec,
        level: Level,
        spec: &SweepSpec,
    ) -> Result<LevelGuard, SweepError> {
        let limit = match spec.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration { .. } => None,
        };
        let (estimate, setting) = crate::budget::level_estimate(
            w,
            level,
            match spec.stop {
                Stop::Duration { duration, .. } => Some(duration.as_secs_f64()),
                Stop::Requests(_) => None,
            },
            limit,
        );
        if estimate > spec.memory_budget {
            return Err(budget_err(
                setting,
                crate::budget::over_budget_message(estimate, spec.memory_budget, setting, true),
            ));
        }
        Ok(LevelGuard {
            limit,
            end: match spec.stop {
                Stop::Duration { duration, .. } => Some(duration),
                Stop::Requests(_) => None,
            },
            now: Ticks::ZERO,
            events: 0,
            clients: match w.arrival {
                crate::workload::Arrival::ClosedLoop { concurrency, .. } => concurrency as u64,
                _ => 0,
            },
            horizon: Ticks::from_secs_f64(crate::bounds::SIM_TIME_MAX_S),
        })
    }

    /// Takes the next event at `t`: `Ok(false)` when it lies past the level's end (stop),
    /// an error when the level outgrows its horizon, memory budget or event cap.
    #[inline]
    pub(super) fn event(
        &mut self,
        t: Ticks,
        spec: &SweepSpec,
        w: &WorkloadSpec,
        col: &Collector,
        in_flight: impl FnOnce() -> u64,
        progress: &mut dyn FnMut(f64),
    ) -> Result<bool, SweepError> {
        if self.end.is_some_and(|d| t > d) {
            return Ok(false);
        }
        if t > self.horizon {
            return Err(budget_err(
                "num_requests",
                format!(
                    "the level ran past {} simulated seconds (the longest a level may cover) before its requests finished; lower num_requests or raise the request rate",
                    crate::bounds::fmt_num(crate::bounds::SIM_TIME_MAX_S)
                ),
            ));
        }
        debug_assert!(t >= self.now, "clock went back");
        self.now = t;
        self.events += 1;
        if self.events.is_multiple_of(PROGRESS_EVERY_EVENTS) {
            let fraction = match spec.stop {
                Stop::Duration { duration, .. } => self.now.0 as f64 / duration.0.max(1) as f64,
                Stop::Requests(n) => col.finished_count() as f64 / n.max(1) as f64,
            };
            progress(fraction.clamp(0.0, 1.0));
            let held = col.held_bytes(in_flight(), self.clients);
            if held > spec.memory_budget {
                let setting = match (&w.arrival, spec.stop) {
                    (_, Stop::Requests(_)) => "sweep.num_requests",
                    (
                        crate::workload::Arrival::ClosedLoop { .. }
                        | crate::workload::Arrival::Burst { .. },
                        _,
                    ) => "sweep.concurrency",
                    _ => "sweep.request_rates",
                };
                return Err(budget_err(
                    setting,
                    crate::budget::over_budget_message(held, spec.memory_budget, setting, false),
                ));
            }
        }
        if self.events > spec.max_events {
            return Err(SimError::EventCap {
                cap: spec.max_events,
            }
            .into());
        }
        Ok(true)
    }
}

pub(super) fn budget_err(field: &str, problem: String) -> SweepError {
    SweepError::Spec {
        field: field.into(),
        problem,
    }
}

/// Runs one level of `plan` and returns its result, its collector and (with more than one
/// replica) the per-replica results.
pub fn run_plan_level(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
    mut col: Collector,
) -> Result<(LevelResult, Collector, Option<TopologyLevel>), SweepError> {
    if let Some(dis) = &plan.disagg {
        return super::disagg::run_disagg_level(plan, dis, workload, spec, level, progress, col);
    }
    col.clear();
    if let Stop::Duration { duration, warmup } = spec.stop {
        col.set_window(warmup, duration);
    }
    let w = workload.at_level(level)?;
    let mut guard = LevelGuard::new(&w, level, spec)?;
    let limit = guard.limit;
    let max_model_len = plan.pools[0].cfg.max_model_len;
    let mut gen = WorkloadGen::new(&w, max_model_len, limit);
    let mut sim = Simulation::new(plan, w.seed)?;
    let end = guard.end;
    let multi = plan.total_replicas() > 1;
    let n_eng = sim.engines.len();
    let per = match (multi, spec.stop) {
        (true, Stop::Duration { duration, warmup }) => Some((warmup, duration)),
        _ => None,
    };
    let mut tap = Tap {
        inner: &mut col,
        done: Vec::new(),
        sent: IdMap::default(),
        per: per.map(|(ws, we)| PerEngine {
            ws,
            we,
            kv_int: vec![0.0; n_eng],
            out_tokens: vec![0; n_eng],
            prompt: vec![0; n_eng],
            cached: vec![0; n_eng],
            completed: vec![0; n_eng],
        }),
    };
    loop {
        let tg = gen.peek_time();
        let tf = sim.frontend_heap.peek();
        // Client sends before front-end deliveries at equal times.
        let (ta, from_frontend) = match (tg, tf) {
            (Some(g), Some((f, r))) if f < g => (Some(f), Some(r)),
            (None, Some((f, r))) => (Some(f), Some(r)),
            (g, _) => (g, None),
        };
        let te = sim.engine_heap.peek();
        let (t, arrival, eng) = match (ta, te) {
            (None, None) => break,
            (Some(a), None) => (a, true, 0),
            (None, Some((e, i))) => (e, false, i),
            (Some(a), Some((e, i))) => {
                if a <= e {
                    (a, true, 0)
                } else {
                    (e, false, i)
                }
            }
        };
        if !guard.event(t, spec, &w, tap.inner, || sim.in_flight(), progress)? {
            break;
        }
        if let (true, Some(r)) = (arrival, from_frontend) {
            let f = &mut sim.frontends[r as usize];
            if let Some((_, req)) = f.queue.pop_front() {
                let next = f.queue.front().map(|(t, _)| *t);
                sim.frontend_heap.set(r, next);
                sim.submit_to_replica(r, req, t, &mut tap);
            }
        } else if arrival {
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
        } else {
            sim.process_engine(eng, &mut tap)?;
        }
        if !tap.done.is_empty() {
            for k in 0..tap.done.len() {
                let (id, e) = tap.done[k];
                gen.on_done(id, t);
                let r = sim.replica_of(e);
                sim.router.done(r);
            }
            tap.done.clear();
            if !sim.held.is_empty() {
                sim.release_held(t, &mut tap);
            }
        }
    }
    let (ws, we) = match spec.stop {
        Stop::Duration { duration, warmup } => (warmup, duration),
        Stop::Requests(_) => (Ticks::ZERO, guard.now),
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
    let topo = tap.per.take().map(|pe| {
        let pool = sim.pool;
        let win_ns = pe.we.0.saturating_sub(pe.ws.0).max(1) as f64;
        let dp = pool.dp as usize;
        let replicas: Vec<ReplicaResult> = (0..pool.replicas)
            .map(|r| {
                let ranks = r as usize * dp..(r as usize + 1) * dp;
                let sum_u = |v: &[u64]| v[ranks.clone()].iter().sum::<u64>();
                let (p, c) = (sum_u(&pe.prompt), sum_u(&pe.cached));
                ReplicaResult {
                    pool: pool.name.clone(),
                    replica: r,
                    routed_requests: sim.router.routed[r as usize],
                    completed_requests: sum_u(&pe.completed),
                    output_tokens_per_s: sum_u(&pe.out_tokens) as f64 / (win_ns / 1e9),
                    kv_utilization_mean: pe.kv_int[ranks.clone()].iter().sum::<f64>()
                        / (win_ns * dp as f64),
                    prefix_cache_hit_rate: (p > 0).then(|| c as f64 / p as f64),
                }
            })
            .collect();
        let n = replicas.len().max(1) as f64;
        let mean = replicas.iter().map(|r| r.output_tokens_per_s).sum::<f64>() / n;
        let max = replicas
            .iter()
            .map(|r| r.output_tokens_per_s)
            .fold(0.0, f64::max);
        TopologyLevel {
            level: level.value(),
            router: plan.router.describe(),
            replicas,
            imbalance: (mean > 0.0).then(|| max / mean),
            pools: Vec::new(),
            transfer: None,
        }
    });
    drop(tap);
    col.flush();
    let r = col.level_result(level, ws, we, spec.gpus, totals);
    Ok((r, col, topo))
}
