//! Per-level metrics from per-request timestamps and the step log. `docs/metrics.md` defines each
//! metric as a formula; names are [`MetricId`]s.
//!
//! The [`Collector`] is an engine [`Observer`]: it stores compact per-step and per-request
//! records during a run; [`Collector::level_result`] computes every metric for a measurement
//! window afterwards (pooled ITL percentiles use per-step weights, not per-token lists). A
//! streaming collector ([`Collector::streaming`], what sweeps use) given the window before the
//! run folds what only feeds aggregates as it arrives and keeps only the percentiles' inputs,
//! with the same results bit for bit (docs/metrics.md "Memory budget").

use crate::engine::{
    DecodeSteps, FinishedRequest, Observer, OffloadStats, RejectReason, StepRecord,
};
use crate::metric::{MetricId, Stat};
use crate::units::Ticks;
use crate::workload::Level;
use serde::{Deserialize, Serialize};

/// One step as the metrics need it (32 bytes; the pool size is per engine, in `kv_total`).
#[derive(Clone, Copy, Debug)]
struct StepLite {
    start: Ticks,
    end: Ticks,
    kv_used: u64,
    num_seqs: u32,
    /// One per decode and per completed prefill (accepted drafts + 1 per decode with
    /// speculative decoding).
    output_tokens: u32,
}

/// One speculative step as the metrics need it: its end, and where its per-position counts
/// start in [`Collector`]'s flat `spec_pos` (accepted per position, then drafted per position).
#[derive(Clone, Copy, Debug)]
struct SpecLite {
    end: Ticks,
    pos: u32,
    k: u32,
}

/// Records what the engines report.
#[derive(Default)]
pub struct Collector {
    /// Per engine, steps in index order, and the engine's KV pool size.
    steps: Vec<Vec<StepLite>>,
    kv_total: Vec<u64>,
    finished: Vec<FinishedRequest>,
    /// (time, prompt tokens looked up, tokens hit) at first admission.
    admissions: Vec<(Ticks, u64, u64)>,
    preemptions: Vec<Ticks>,
    rejections: Vec<(Ticks, RejectReason)>,
    arrivals: u64,
    /// Speculative decoding: per step, and the flat per-position counts.
    spec_steps: Vec<SpecLite>,
    spec_pos: Vec<u64>,
    /// CPU offload tier: what each engine's tier did, reported at step boundaries.
    offload: Vec<(Ticks, OffloadStats)>,
    /// Latest event time seen (steps apart), each engine's last step end, and whether time
    /// ever went backwards.
    last_t: Ticks,
    step_end: Vec<Ticks>,
    pub clock_went_back: bool,
    /// Streaming mode ([`Collector::streaming`]): with the window known before the run, the
    /// per-step and per-request records that only feed aggregates are folded as they arrive.
    stream: Option<Box<Stream>>,
    streaming_on: bool,
}

/// A measured request as the streamed metrics need it (40 bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    arrival: Ticks,
    first_scheduled: Ticks,
    first_token: Ticks,
    finish: Ticks,
    output_len: u64,
}

impl Sample {
    fn of(r: &FinishedRequest) -> Sample {
        Sample {
            arrival: r.arrival,
            first_scheduled: r.first_scheduled,
            first_token: r.first_token,
            finish: r.finish,
            output_len: r.output_len,
        }
    }
}

/// One engine's step log in streaming mode: the end times from the last step that ended before
/// the window on (`ends[i]` is step `base + i`), the measured requests' decode runs as a
/// difference array over them (`diff.len() == ends.len() + 1`), and for engines after the
/// first the steps' window contributions (`u x overlap`, `seqs x overlap`), kept so that the
/// time averages add up in the same order as the full log's (engine by engine), bit for bit.
#[derive(Default)]
struct EngineLog {
    base: u64,
    ends: Vec<u64>,
    diff: Vec<i32>,
    contrib: Vec<(f64, f64)>,
}

/// What a streaming collector keeps (docs/metrics.md "Memory budget").
#[derive(Default)]
struct Stream {
    ws: Ticks,
    we: Ticks,
    engines: Vec<EngineLog>,
    /// Engine 0's running window sums (the first terms of the engine-by-engine sums).
    kv_int0: f64,
    batch_int0: f64,
    kv_peak: f64,
    /// Peak KV blocks in use over all steps, with the pool size.
    kv_peak_blocks: (u64, u64),
    output_tokens: u64,
    steps: u64,
    finished: u64,
    rejected: u64,
    preemptions: u64,
    preemptions_in_window: u64,
    done: u64,
    done_prompt: u64,
    measured: Vec<Sample>,
    extra_itls: Vec<u64>,
    /// Speculative decoding: per-token ITL samples of measured requests, and the window's
    /// acceptance counts.
    itl_per_token: Vec<(f64, u64)>,
    spec_any: bool,
    spec_drafts: u64,
    spec_draft_tokens: u64,
    spec_accepted: u64,
    spec_per_pos: Vec<u64>,
    /// Prompt tokens looked up and hit at first admissions in the window.
    adm_lookup: u64,
    adm_hit: u64,
    offload_any: bool,
    offload_window: OffloadStats,
    offload_total: OffloadStats,
    /// Measured requests reported before the step of their last token (folded at that step).
    pending: std::collections::VecDeque<FinishedRequest>,
}

impl Collector {
    /// A collector that keeps every record (`finished`, step spans, per-request ITLs): for tests
    /// and exporters.
    pub fn new() -> Collector {
        Collector::default()
    }
    /// A collector for sweeps: when [`Collector::set_window`] gives the window before the run
    /// (duration mode), it folds what only feeds aggregates as it arrives, so its memory grows
    /// with the measured requests and the window's steps only (docs/metrics.md "Memory
    /// budget"); its [`Collector::level_result`] is bit for bit the full collector's. Without a
    /// window (request-count mode) it keeps every record, as [`Collector::new`].
    pub fn streaming() -> Collector {
        Collector {
            stream: Some(Box::default()),
            ..Collector::default()
        }
    }
    /// Streaming collectors: the level's window `[ws, we]`, before the run (after
    /// [`Collector::clear`]). A full collector ignores it.
    pub fn set_window(&mut self, ws: Ticks, we: Ticks) {
        if let Some(st) = &mut self.stream {
            st.ws = ws;
            st.we = we;
            self.streaming_on = true;
        }
    }
    /// Streaming collectors: folds what is still pending (requests reported before the step of
    /// their last token) before [`Collector::level_result`]. A no-op otherwise.
    pub fn flush(&mut self) {
        if let Some(st) = self.stream.as_mut().filter(|_| self.streaming_on) {
            while let Some(r) = st.pending.pop_front() {
                debug_assert!(
                    st.ready(&r),
                    "a run's steps are recorded by the level's end"
                );
                if st.ready(&r) {
                    st.fold_runs(&r);
                }
            }
        }
    }
    /// Whether records are folded as they arrive (a streaming collector given a window).
    pub fn is_streaming(&self) -> bool {
        self.streaming_on
    }
    /// Requests finished over the whole run.
    pub fn finished_count(&self) -> u64 {
        match &self.stream {
            Some(st) if self.streaming_on => st.finished,
            _ => self.finished.len() as u64,
        }
    }
    /// Requests rejected over the whole run.
    pub fn rejected_count(&self) -> u64 {
        match &self.stream {
            Some(st) if self.streaming_on => st.rejected,
            _ => self.rejections.len() as u64,
        }
    }
    /// Bytes the records held now take, by the estimates of `crate::budget`, with `in_flight`
    /// requests and `clients` closed-loop clients.
    pub fn held_bytes(&self, in_flight: u64, clients: u64) -> u64 {
        match &self.stream {
            Some(st) if self.streaming_on => crate::budget::held_bytes_streamed(
                (st.measured.len() + st.pending.len()) as u64,
                in_flight,
                st.engines
                    .iter()
                    .map(|e| (e.ends.len() + e.contrib.len()) as u64)
                    .sum(),
                clients,
            ),
            _ => crate::budget::held_bytes(
                self.finished.len() as u64,
                in_flight,
                self.num_steps(),
                clients,
            ),
        }
    }
    /// Empties the collector for another run, keeping its buffers' capacity (a sweep reuses
    /// one collector for all levels instead of growing fresh buffers each level).
    pub fn clear(&mut self) {
        for log in &mut self.steps {
            log.clear();
        }
        self.kv_total.clear();
        self.finished.clear();
        self.admissions.clear();
        self.preemptions.clear();
        self.rejections.clear();
        self.arrivals = 0;
        self.spec_steps.clear();
        self.spec_pos.clear();
        self.offload.clear();
        self.last_t = Ticks::ZERO;
        self.step_end.clear();
        self.clock_went_back = false;
        self.streaming_on = false;
        if let Some(st) = &mut self.stream {
            // keep the buffers' capacity for the next level
            let mut engines = std::mem::take(&mut st.engines);
            for e in &mut engines {
                e.base = 0;
                e.ends.clear();
                e.diff.clear();
                e.contrib.clear();
            }
            let mut measured = std::mem::take(&mut st.measured);
            measured.clear();
            let mut extra = std::mem::take(&mut st.extra_itls);
            extra.clear();
            let mut per_token = std::mem::take(&mut st.itl_per_token);
            per_token.clear();
            **st = Stream {
                engines,
                measured,
                extra_itls: extra,
                itl_per_token: per_token,
                ..Stream::default()
            };
        }
    }
    /// Steps of engine `e` from `start` to `last_end` (the first ending at `first_end`): an
    /// engine's steps come in order, but an engine that ran several decode steps as one event
    /// (engine/sched_run.rs) reports them after other engines' later events, so time is checked
    /// per engine for steps (each starts at or after its engine's previous end).
    #[inline]
    fn see_steps(&mut self, e: usize, start: Ticks, first_end: Ticks, last_end: Ticks) {
        if self.step_end.len() <= e {
            self.step_end.resize(e + 1, Ticks::ZERO);
        }
        if start < self.step_end[e] || first_end < start {
            self.clock_went_back = true;
        }
        self.step_end[e] = last_end;
    }
    fn see(&mut self, t: Ticks) {
        if t < self.last_t {
            self.clock_went_back = true;
        }
        self.last_t = t;
    }
    pub fn finished(&self) -> &[FinishedRequest] {
        &self.finished
    }
    pub fn rejected(&self) -> &[(Ticks, RejectReason)] {
        &self.rejections
    }
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }
    pub fn preemption_count(&self) -> u64 {
        match &self.stream {
            Some(st) if self.streaming_on => st.preemptions,
            _ => self.preemptions.len() as u64,
        }
    }
    /// End time of step `index` of `engine` (full collectors: [`Collector::new`]).
    pub fn step_end(&self, engine: u32, index: u64) -> Ticks {
        self.steps[engine as usize][index as usize].end
    }
    /// Peak KV blocks in use over all steps, and the pool size.
    pub fn kv_peak_blocks(&self) -> (u64, u64) {
        if let Some(st) = self.stream.as_ref().filter(|_| self.streaming_on) {
            return st.kv_peak_blocks;
        }
        let mut peak = (0, 0);
        for (log, &total) in self.steps.iter().zip(&self.kv_total) {
            for s in log {
                if s.kv_used >= peak.0 {
                    peak = (s.kv_used, total);
                }
            }
        }
        peak
    }
    /// The CPU offload tier's totals over the whole run (`None` without a tier).
    pub fn offload_totals(&self) -> Option<OffloadStats> {
        if let Some(st) = self.stream.as_ref().filter(|_| self.streaming_on) {
            return st.offload_any.then_some(st.offload_total);
        }
        (!self.offload.is_empty()).then(|| {
            let mut d = OffloadStats::default();
            for (_, x) in &self.offload {
                d.add(x);
            }
            d
        })
    }
    pub fn num_steps(&self) -> u64 {
        match &self.stream {
            Some(st) if self.streaming_on => st.steps,
            _ => self.steps.iter().map(|v| v.len() as u64).sum(),
        }
    }
    /// Start and end of step `index` of `engine` (full collectors: [`Collector::new`]).
    pub fn step_span(&self, engine: u32, index: u64) -> (Ticks, Ticks) {
        let s = &self.steps[engine as usize][index as usize];
        (s.start, s.end)
    }
    /// Steps recorded for `engine` (0 for an engine that never stepped).
    pub fn num_steps_of(&self, engine: u32) -> u64 {
        self.steps
            .get(engine as usize)
            .map_or(0, |v| v.len() as u64)
    }

    /// Full collectors ([`Collector::new`]): the inter-token latencies of one finished request
    /// (ns), in order: decode-step gaps and
    /// the gaps of tokens produced by recompute prefills. Used by tests and exporters; the level
    /// metrics use the weighted form.
    pub fn request_itls(&self, r: &FinishedRequest) -> Vec<Ticks> {
        let mut v = Vec::new();
        let log = &self.steps[r.engine as usize];
        for &(a, b) in &r.decode_runs {
            for j in a..=b {
                v.push(Ticks(log[j as usize].end.0 - log[j as usize - 1].end.0));
            }
        }
        v.extend(r.extra_itls.iter().copied());
        v
    }
}

impl Observer for Collector {
    fn on_arrival(&mut self, _e: u32, t: Ticks, _id: u64) {
        self.see(t);
        self.arrivals += 1;
    }
    fn on_rejected(&mut self, _e: u32, t: Ticks, _id: u64, reason: &RejectReason) {
        self.see(t);
        match self.stream.as_mut().filter(|_| self.streaming_on) {
            Some(st) => st.rejected += 1,
            None => self.rejections.push((t, reason.clone())),
        }
    }
    fn on_scheduled(&mut self, _e: u32, t: Ticks, _id: u64, prompt: u64, cached: u64) {
        self.see(t);
        match self.stream.as_mut().filter(|_| self.streaming_on) {
            Some(st) => {
                if t >= st.ws && t <= st.we {
                    st.adm_lookup += prompt;
                    st.adm_hit += cached;
                }
            }
            None => self.admissions.push((t, prompt, cached)),
        }
    }
    fn on_preempted(&mut self, _e: u32, t: Ticks, _id: u64) {
        self.see(t);
        match self.stream.as_mut().filter(|_| self.streaming_on) {
            Some(st) => {
                st.preemptions += 1;
                if t >= st.ws && t <= st.we {
                    st.preemptions_in_window += 1;
                }
            }
            None => self.preemptions.push(t),
        }
    }
    fn on_finished(&mut self, r: &FinishedRequest) {
        self.on_finished_owned(r.clone());
    }
    fn on_finished_owned(&mut self, r: FinishedRequest) {
        self.see(r.finish);
        match self.stream.as_mut().filter(|_| self.streaming_on) {
            Some(st) => st.finished(&r),
            None => self.finished.push(r),
        }
    }
    fn on_step(&mut self, s: &StepRecord) {
        let e = s.engine as usize;
        self.see_steps(e, s.start, s.end, s.end);
        if let Some(st) = self.stream.as_mut().filter(|_| self.streaming_on) {
            let total = stream_pool_size(&mut self.kv_total, st, e, s.kv_total_blocks);
            st.step(s, total);
            return;
        }
        if self.kv_total.len() <= e {
            if self.steps.len() <= e {
                self.steps.resize(e + 1, Vec::new());
            }
            self.kv_total.resize(e + 1, 0);
        }
        debug_assert_eq!(self.steps[e].len() as u64, s.index);
        debug_assert!(s.output_tokens <= s.num_seqs as u64 + s.spec_accepted_tokens);
        // An engine's pool size is fixed; its first step records it.
        if self.steps[e].is_empty() {
            self.kv_total[e] = s.kv_total_blocks;
        }
        debug_assert_eq!(self.kv_total[e], s.kv_total_blocks);
        self.steps[e].push(StepLite {
            start: s.start,
            end: s.end,
            kv_used: s.kv_used_blocks,
            num_seqs: s.num_seqs,
            output_tokens: s.output_tokens.min(u32::MAX as u64) as u32,
        });
    }
    fn on_decode_steps(&mut self, r: &DecodeSteps) {
        let streaming = self.streaming_on && self.stream.is_some();
        let (Some(&first), Some(&last), true) = (r.ends.first(), r.ends.last(), streaming) else {
            for i in 0..r.ends.len() {
                self.on_step(&r.record(i));
            }
            return;
        };
        self.see_steps(r.engine as usize, r.start, first, last);
        let st = self.stream.as_mut().expect("checked above");
        // `on_step`'s checks, once for the run (its ends are increasing by construction).
        let e = r.engine as usize;
        let total = stream_pool_size(&mut self.kv_total, st, e, r.kv_total_blocks);
        for i in 0..r.ends.len() {
            st.fold_step(&r.record(i), total);
        }
        st.fold_pending();
    }
    fn on_offload(&mut self, _e: u32, t: Ticks, d: &OffloadStats) {
        if let Some(st) = self.stream.as_mut().filter(|_| self.streaming_on) {
            st.offload_any = true;
            st.offload_total.add(d);
            if t >= st.ws && t <= st.we {
                st.offload_window.add(d);
            }
            return;
        }
        self.offload.push((t, *d));
    }
    fn on_spec_step(&mut self, _e: u32, end: Ticks, accepted: &[u64], drafted: &[u64]) {
        if let Some(st) = self.stream.as_mut().filter(|_| self.streaming_on) {
            st.spec_any = true;
            if end > st.ws && end <= st.we {
                let k = accepted.len();
                if st.spec_per_pos.len() < k {
                    st.spec_per_pos.resize(k, 0);
                }
                st.spec_drafts += drafted.first().copied().unwrap_or(0);
                st.spec_draft_tokens += drafted.iter().sum::<u64>();
                st.spec_accepted += accepted.iter().sum::<u64>();
                for (x, y) in st.spec_per_pos.iter_mut().zip(accepted) {
                    *x += y;
                }
            }
            return;
        }
        self.spec_steps.push(SpecLite {
            end,
            pos: self.spec_pos.len() as u32,
            k: accepted.len() as u32,
        });
        self.spec_pos.extend_from_slice(accepted);
        self.spec_pos.extend_from_slice(drafted);
    }
}

/// Engine `e`'s KV pool size for the streaming fold: fixed per engine, recorded at its first
/// step.
#[inline]
fn stream_pool_size(kv_total: &mut Vec<u64>, st: &Stream, e: usize, blocks: u64) -> u64 {
    if kv_total.len() <= e {
        kv_total.resize(e + 1, 0);
    }
    if st.steps_of(e) == 0 {
        kv_total[e] = blocks;
    }
    kv_total[e]
}

impl Stream {
    fn steps_of(&self, e: usize) -> usize {
        self.engines.get(e).map_or(0, |l| l.ends.len())
    }
    /// Folds one step: window sums (engine 0 directly, later engines' contributions kept in
    /// order), the peak, and its end time while a measured request may still need it.
    fn step(&mut self, s: &StepRecord, total: u64) {
        self.fold_step(s, total);
        self.fold_pending();
    }

    /// [`Stream::step`] without folding the requests it completes (a decode run folds them
    /// after its last step: the fold reads only its own engine's steps, in finish order).
    #[inline(always)]
    fn fold_step(&mut self, s: &StepRecord, total: u64) {
        let e = s.engine as usize;
        if self.engines.len() <= e {
            self.engines.resize_with(e + 1, EngineLog::default);
        }
        self.steps += 1;
        if s.kv_used_blocks >= self.kv_peak_blocks.0 {
            self.kv_peak_blocks = (s.kv_used_blocks, total);
        }
        let (ws, we) = (self.ws, self.we);
        if s.end > ws && s.end <= we {
            self.output_tokens += s.output_tokens.min(u32::MAX as u64);
        }
        let ov = overlap(s.start, s.end, ws, we);
        let u = s.kv_used_blocks as f64 / total.max(1) as f64;
        if ov > 0 || (s.start >= ws && s.start <= we) {
            self.kv_peak = self.kv_peak.max(u);
        }
        let (kv, batch) = (u * ov as f64, s.num_seqs as f64 * ov as f64);
        let log = &mut self.engines[e];
        if e == 0 {
            self.kv_int0 += kv;
            self.batch_int0 += batch;
        } else if ov > 0 {
            // a zero term adds nothing to a non-negative sum: only overlapping steps are kept
            log.contrib.push((kv, batch));
        }
        // A measured request arrived at or after the window start, so its first decode step
        // starts after it and the step before that is at the latest the last one ending
        // before the window: earlier end times are never read.
        if s.end < ws {
            log.ends.clear();
            log.diff.clear();
            log.base = s.index;
        }
        debug_assert_eq!(log.base + log.ends.len() as u64, s.index);
        if log.diff.is_empty() {
            log.diff.push(0);
        }
        log.ends.push(s.end.0);
        log.diff.push(0);
    }

    /// Folds the pending requests whose steps are now all recorded, in finish order.
    #[inline]
    fn fold_pending(&mut self) {
        while let Some(r) = self.pending.front() {
            if !self.ready(r) {
                break;
            }
            let r = self.pending.pop_front().expect("front exists");
            self.fold_runs(&r);
        }
    }

    /// Folds one finished request: counts, and for a measured one its sample, its decode runs
    /// into the engine's weights and its other gaps.
    fn finished(&mut self, r: &FinishedRequest) {
        self.finished += 1;
        if !(r.finish >= self.ws && r.finish <= self.we) {
            return;
        }
        self.done += 1;
        self.done_prompt += r.prompt_len;
        if r.arrival < self.ws {
            return;
        }
        self.measured.push(Sample::of(r));
        let e = r.engine as usize;
        if self.engines.len() <= e {
            self.engines.resize_with(e + 1, EngineLog::default);
        }
        // An engine reports a request finishing in a step before the step itself: its runs
        // are folded once the step is recorded.
        let recorded = {
            let log = &self.engines[e];
            log.base + log.ends.len() as u64
        };
        // Folded in finish order (the per-token ITL samples' order is the full collector's).
        if !self.pending.is_empty() || r.decode_runs.iter().any(|&(_, b)| b >= recorded) {
            self.pending.push_back(r.clone());
            return;
        }
        self.fold_runs(r);
    }

    /// Whether the steps of `r`'s decode runs are all recorded.
    fn ready(&self, r: &FinishedRequest) -> bool {
        let log = &self.engines[r.engine as usize];
        let recorded = log.base + log.ends.len() as u64;
        r.decode_runs.iter().all(|&(_, b)| b < recorded)
    }

    /// Folds the decode runs and other gaps of a measured request whose steps are recorded.
    fn fold_runs(&mut self, r: &FinishedRequest) {
        let log = &mut self.engines[r.engine as usize];
        let gap = |ends: &[u64], base: u64, j: u64| -> u64 {
            let i = (j - base) as usize;
            ends[i] - ends[i - 1]
        };
        let mut c = r.chunk_tokens.iter();
        for &(a, b) in &r.decode_runs {
            debug_assert!(
                a > log.base && b < log.base + log.ends.len() as u64,
                "run {a}..={b} outside the kept steps {}..{} (engine {}, arrival {:?}, window start {:?})",
                log.base,
                log.base + log.ends.len() as u64,
                r.engine,
                r.arrival,
                self.ws
            );
            if a <= log.base || b >= log.base + log.ends.len() as u64 {
                continue;
            }
            log.diff[(a - log.base) as usize] += 1;
            log.diff[(b + 1 - log.base) as usize] -= 1;
            if self.spec_any || !r.chunk_tokens.is_empty() {
                for j in a..=b {
                    let n = c.next().copied().unwrap_or(1).max(1) as u64;
                    let g = gap(&log.ends, log.base, j) as f64;
                    self.itl_per_token.push((g / n as f64 / 1e6, n));
                }
            }
        }
        for g in &r.extra_itls {
            self.extra_itls.push(g.0);
            if self.spec_any || !r.chunk_tokens.is_empty() {
                let n = c.next().copied().unwrap_or(1).max(1) as u64;
                self.itl_per_token.push((g.0 as f64 / n as f64 / 1e6, n));
            }
        }
    }
}

/// The CPU KV offload tier over a window: prompt tokens found in the CPU tier (past the GPU
/// prefix cache) and their share of all prompt tokens looked up at admission
/// (`cpu_hit_rate = cpu_hit_tokens / prompt tokens looked up`, the denominator of
/// `prefix_cache_hit_rate`), bytes moved over the host link per rank, and the time requests
/// waited for their loads (issue to admission).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuOffloadStats {
    pub cpu_hit_tokens: u64,
    pub cpu_hit_rate: Option<f64>,
    pub loads: u64,
    pub loaded_bytes_per_rank: u64,
    pub stored_bytes_per_rank: u64,
    pub stored_chunks: u64,
    pub stores_skipped: u64,
    pub evictions: u64,
    pub load_wait_ms_mean: Option<f64>,
    pub load_wait_s_total: f64,
    /// `None` when the window has zero length.
    pub host_link_gb_s_mean: Option<f64>,
}

impl CpuOffloadStats {
    fn of(d: &OffloadStats, _gpu_hit: u64, looked_up: u64, win_s: Option<f64>) -> CpuOffloadStats {
        CpuOffloadStats {
            cpu_hit_tokens: d.hit_tokens,
            cpu_hit_rate: (looked_up > 0).then(|| d.hit_tokens as f64 / looked_up as f64),
            loads: d.loads,
            loaded_bytes_per_rank: d.loaded_bytes,
            stored_bytes_per_rank: d.stored_bytes,
            stored_chunks: d.stored_chunks,
            stores_skipped: d.stores_skipped,
            evictions: d.evictions,
            load_wait_ms_mean: (d.loads > 0).then(|| d.load_wait_ns as f64 / 1e6 / d.loads as f64),
            load_wait_s_total: d.load_wait_ns as f64 / 1e9,
            host_link_gb_s_mean: win_s.map(|w| (d.loaded_bytes + d.stored_bytes) as f64 / w / 1e9),
        }
    }
}

/// Realised speculative acceptance over a window, by vLLM's definitions
/// (`vllm/v1/spec_decode/metrics.py`, `SpecDecodingLogging`): `num_drafts` decodes that carried
/// drafts, `num_draft_tokens` drafts verified, `num_accepted_tokens` accepted; mean acceptance
/// length `1 + accepted / drafts`; draft acceptance rate `accepted / draft tokens`; per position
/// `accepted_i / num_drafts`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeStats {
    pub num_drafts: u64,
    pub num_draft_tokens: u64,
    pub num_accepted_tokens: u64,
    pub mean_acceptance_length: Option<f64>,
    pub draft_acceptance_rate: Option<f64>,
    pub acceptance_rate_per_pos: Vec<f64>,
}

/// Mean and percentiles of a distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Dist {
    pub fn get(&self, s: Stat) -> f64 {
        match s {
            Stat::Mean => self.mean,
            Stat::P50 => self.p50,
            Stat::P90 => self.p90,
            Stat::P99 => self.p99,
        }
    }
    /// From values with integer weights (a weight of `w` counts the value `w` times).
    /// Percentiles interpolate linearly between order statistics, as numpy's default
    /// (`method="linear"`): rank `q * (N - 1)` in the expanded sorted list.
    pub fn weighted(mut v: Vec<(f64, u64)>) -> Option<Dist> {
        v.retain(|x| x.1 > 0);
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        Dist::weighted_sorted(&v)
    }

    /// As [`Dist::weighted`] for integer durations in ns, reported in ms (`ns / 1e6`), without
    /// sorting: the order statistics the percentiles need are found by selection (radix passes,
    /// then quickselect in the small parts left: linear time), so the percentiles are exactly [`Dist::weighted`]'s (the conversion to ms
    /// is strictly increasing below 2^53 ns). The mean is the exact integer sum over the
    /// total weight, `(sum ns * w) / n / 1e6`, rounded once per operation; it can differ from
    /// [`Dist::weighted`]'s (a float sum in sorted order) in the last bits.
    pub fn weighted_ns_as_ms(mut v: Vec<(u64, u64)>) -> Option<Dist> {
        v.retain(|x| x.1 > 0);
        let n: u64 = v.iter().map(|x| x.1).sum();
        if n == 0 {
            return None;
        }
        let sum: u128 = v.iter().map(|&(x, w)| x as u128 * w as u128).sum();
        let mean = sum as f64 / n as f64 / 1e6;
        // Ranks q * (n - 1) of p50, p90 and p99, and the next rank for interpolation.
        let qs = [0.5, 0.9, 0.99];
        let mut ranks: Vec<u64> = Vec::with_capacity(6);
        for &q in &qs {
            let lo = libm::floor(q * (n - 1) as f64) as u64;
            ranks.push(lo);
            ranks.push((lo + 1).min(n - 1));
        }
        ranks.sort_unstable();
        ranks.dedup();
        let mut vals = vec![0u64; ranks.len()];
        radix_select_weighted(&mut v, &ranks, &mut vals);
        let at = |pos: u64| -> f64 {
            let i = ranks.binary_search(&pos.min(n - 1)).expect("rank selected");
            vals[i] as f64 / 1e6
        };
        let q = |p: f64| interpolated_quantile(p, n, &at);
        Some(Dist {
            mean,
            p50: q(qs[0]),
            p90: q(qs[1]),
            p99: q(qs[2]),
        })
    }

    /// From weighted values already sorted by value, weights > 0.
    fn weighted_sorted(v: &[(f64, u64)]) -> Option<Dist> {
        let n: u64 = v.iter().map(|x| x.1).sum();
        if n == 0 {
            return None;
        }
        let mean = v.iter().map(|x| x.0 * x.1 as f64).sum::<f64>() / n as f64;
        let at = |pos: u64| -> f64 {
            let mut c = 0;
            for x in v {
                c += x.1;
                if pos < c {
                    return x.0;
                }
            }
            v[v.len() - 1].0
        };
        let q = |p: f64| interpolated_quantile(p, n, &at);
        Some(Dist {
            mean,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
        })
    }
    /// Unweighted: [`Dist::weighted`] with every weight 1. Sorted without keeping the order of
    /// equal values: values equal under `total_cmp` have the same bits, so the sorted list (and
    /// the float sum of the mean in that order) is the same as a stable sort's.
    /// [`Dist::of`] the values `x as f64 / div` (`div > 0`) of integers `x`, sorting the
    /// integers: `x as f64 / div` never decreases with `x`, so the mapped sorted list is the
    /// sorted list of the values, and the result is [`Dist::of`]'s bit for bit.
    pub fn of_ints_scaled(mut v: Vec<u64>, div: f64) -> Option<Dist> {
        debug_assert!(div > 0.0);
        v.sort_unstable();
        let w: Vec<(f64, u64)> = v.iter().map(|&x| (x as f64 / div, 1)).collect();
        Dist::weighted_sorted(&w)
    }

    pub fn of(v: impl IntoIterator<Item = f64>) -> Option<Dist> {
        let mut v: Vec<(f64, u64)> = v.into_iter().map(|x| (x, 1)).collect();
        v.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        Dist::weighted_sorted(&v)
    }
}

/// Bucket bits per pass of [`radix_select_weighted`].
const RADIX_BITS: u32 = 10;

/// [`select_weighted`]'s result (the values at `ranks`), by passes of a radix select first: a
/// histogram of the weights over `2^RADIX_BITS` equal ranges of the values finds the range that
/// holds each wanted rank; the entries in those ranges (at most one range per rank) are moved
/// to the front of `v`, range by range, and the same is done inside each range, until a part is
/// small (then [`select_weighted`]) or holds one value. No copy of `v`. Reorders `v`.
fn radix_select_weighted(v: &mut [(u64, u64)], ranks: &[u64], out: &mut [u64]) {
    if ranks.is_empty() {
        return;
    }
    if v.len() <= 2048 {
        select_weighted(v, ranks, out, 0);
        return;
    }
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for &(x, _) in v.iter() {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if lo == hi {
        out.fill(lo);
        return;
    }
    let bits = 64 - (hi - lo).leading_zeros();
    let shift = bits.saturating_sub(RADIX_BITS);
    let nb = ((hi - lo) >> shift) as usize + 1;
    let mut hist = vec![0u64; nb];
    for &(x, w) in v.iter() {
        hist[((x - lo) >> shift) as usize] += w;
    }
    // Per range holding wanted ranks: (range, weight below it, its ranks `a..b`).
    let mut groups: Vec<(usize, u64, usize, usize)> = Vec::with_capacity(ranks.len());
    let (mut c, mut j) = (0u64, 0usize);
    for (b, &h) in hist.iter().enumerate() {
        let start = j;
        while j < ranks.len() && ranks[j] < c + h {
            j += 1;
        }
        if j > start {
            groups.push((b, c, start, j));
        }
        c += h;
        if j == ranks.len() {
            break;
        }
    }
    debug_assert_eq!(j, ranks.len(), "ranks below the total weight");
    // The ranges' group numbers (u8::MAX: not wanted; at most one group per rank).
    let mut slot = vec![u8::MAX; nb];
    for (g, &(b, ..)) in groups.iter().enumerate() {
        slot[b] = g as u8;
    }
    // In place: the wanted ranges' entries to the front (one pass), then group by group inside
    // that front part.
    let mut k = 0usize;
    for idx in 0..v.len() {
        if slot[((v[idx].0 - lo) >> shift) as usize] != u8::MAX {
            v.swap(k, idx);
            k += 1;
        }
    }
    let mut start = 0usize;
    for (g, &(_, below, a, b)) in groups.iter().enumerate() {
        let mut end = start;
        if g + 1 == groups.len() {
            end = k;
        } else {
            for idx in start..k {
                if slot[((v[idx].0 - lo) >> shift) as usize] == g as u8 {
                    v.swap(end, idx);
                    end += 1;
                }
            }
        }
        let shifted: Vec<u64> = ranks[a..b].iter().map(|r| r - below).collect();
        radix_select_weighted(&mut v[start..end], &shifted, &mut out[a..b]);
        start = end;
    }
}

/// Writes to `out[i]` the value at rank `ranks[i]` (ascending, distinct, below the total
/// weight) of the multiset where `v`'s value `x` occurs `w` times: the `ranks[i]`-th element of
/// the expanded sorted list. Quickselect with a three-way partition around a median-of-three
/// pivot (deterministic), recursing only into the parts that hold wanted ranks; small or deep
/// parts are sorted instead (a guard against quadratic inputs). Reorders `v`.
fn select_weighted(v: &mut [(u64, u64)], ranks: &[u64], out: &mut [u64], depth: u32) {
    if ranks.is_empty() {
        return;
    }
    if v.len() <= 32 || depth > 48 {
        v.sort_unstable_by_key(|x| x.0);
        let (mut c, mut i) = (0u64, 0usize);
        for x in v.iter() {
            c += x.1;
            while i < ranks.len() && ranks[i] < c {
                out[i] = x.0;
                i += 1;
            }
        }
        debug_assert_eq!(i, ranks.len(), "ranks below the total weight");
        return;
    }
    let (a, b, c) = (v[0].0, v[v.len() / 2].0, v[v.len() - 1].0);
    let pivot = a.max(b).min(a.min(b).max(c));
    // Dutch national flag: [0, lt) < pivot, [lt, i) == pivot, (gt, len) > pivot.
    let (mut lt, mut i, mut gt) = (0usize, 0usize, v.len());
    let (mut w_lt, mut w_eq) = (0u64, 0u64);
    while i < gt {
        let x = v[i];
        if x.0 < pivot {
            v.swap(lt, i);
            w_lt += x.1;
            lt += 1;
            i += 1;
        } else if x.0 > pivot {
            gt -= 1;
            v.swap(i, gt);
        } else {
            w_eq += x.1;
            i += 1;
        }
    }
    let below = ranks.partition_point(|&r| r < w_lt);
    let equal = ranks.partition_point(|&r| r < w_lt + w_eq);
    let (left, rest) = v.split_at_mut(lt);
    let right = &mut rest[gt - lt..];
    select_weighted(left, &ranks[..below], &mut out[..below], depth + 1);
    for o in &mut out[below..equal] {
        *o = pivot;
    }
    let shifted: Vec<u64> = ranks[equal..].iter().map(|r| r - w_lt - w_eq).collect();
    select_weighted(right, &shifted, &mut out[equal..], depth + 1);
}

/// The measurement window of a level, in simulated seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start: f64,
    pub end: f64,
}

/// Whole-run counts (not windowed), for accounting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    pub submitted: u64,
    pub completed: u64,
    pub rejected: u64,
    pub in_flight_at_end: u64,
    pub preemptions: u64,
    pub steps: u64,
    pub simulated_s: f64,
    /// Synthetic requests whose prompt + output exceed max_model_len (rejected by the engine, as vLLM
    /// rejects them; counted in `rejected_requests` too).
    pub over_max_model_len: u64,
}

/// The metrics of one sweep level, in the JSON shape `servesim sweep --json` prints.
/// Latency metrics are `null` when no request was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelResult {
    #[serde(flatten)]
    pub level: Level,
    pub window_s: Window,
    pub completed_requests: u64,
    /// Requests whose latencies are measured (arrived at or after the window start and finished
    /// by its end).
    pub measured_requests: u64,
    /// Window rates (`completed / window`, tokens / window): `None` (JSON `null`) when the window
    /// has zero length or no request completed in it ([`LevelResult::no_value`] says which).
    pub requests_per_s: Option<f64>,
    pub input_tokens_per_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub output_tokens_per_s_per_gpu: Option<f64>,
    pub output_tokens_per_s_per_user: Option<f64>,
    pub e2e_tokens_per_s_per_user: Option<f64>,
    pub interactivity: Option<f64>,
    pub ttft_ms: Option<Dist>,
    pub itl_ms: Option<Dist>,
    pub tpot_ms_mean: Option<f64>,
    /// Per-request TPOT over the measured requests with more than one output token: mean (equal
    /// to `tpot_ms_mean`, bit for bit) and percentiles across requests.
    #[serde(default)]
    pub tpot_ms: Option<Dist>,
    /// Speculative decoding only: inter-token latency per token (a chunk of `n` tokens after a
    /// gap `g` counts `n` times `g / n`); `itl_ms` is per streamed chunk, as `vllm bench serve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_per_token_ms: Option<Dist>,
    /// Speculative decoding only: the acceptance realised in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<SpecDecodeStats>,
    /// CPU KV offload tier only: hits, traffic and load waits in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_offload: Option<CpuOffloadStats>,
    pub e2e_s: Option<Dist>,
    pub queueing_ms_mean: Option<f64>,
    /// Time-weighted over the window: `None` when the window has zero length.
    pub kv_utilization_mean: Option<f64>,
    pub kv_utilization_peak: f64,
    pub prefix_cache_hit_rate: Option<f64>,
    pub preemptions: u64,
    /// Time-weighted over the window: `None` when the window has zero length.
    pub mean_running_batch: Option<f64>,
    pub rejected_requests: u64,
    pub totals: RunTotals,
    /// Why the window rates are absent (zero-length window, no completed request); omitted
    /// when they have values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<String>,
}

impl LevelResult {
    /// The value of one metric.
    pub fn get(&self, m: MetricId) -> Option<f64> {
        match m {
            MetricId::CompletedRequests => Some(self.completed_requests as f64),
            MetricId::RequestsPerS => self.requests_per_s,
            MetricId::InputTokensPerS => self.input_tokens_per_s,
            MetricId::OutputTokensPerS => self.output_tokens_per_s,
            MetricId::OutputTokensPerSPerGpu => self.output_tokens_per_s_per_gpu,
            MetricId::OutputTokensPerSPerUser => self.output_tokens_per_s_per_user,
            MetricId::E2eTokensPerSPerUser => self.e2e_tokens_per_s_per_user,
            MetricId::Interactivity => self.interactivity,
            MetricId::TtftMs(s) => self.ttft_ms.map(|d| d.get(s)),
            MetricId::ItlMs(s) => self.itl_ms.map(|d| d.get(s)),
            MetricId::TpotMs(Stat::Mean) => self.tpot_ms_mean,
            MetricId::TpotMs(s) => self.tpot_ms.map(|d| d.get(s)),
            MetricId::E2eS(s) => self.e2e_s.map(|d| d.get(s)),
            MetricId::QueueingMsMean => self.queueing_ms_mean,
            MetricId::KvUtilizationMean => self.kv_utilization_mean,
            MetricId::KvUtilizationPeak => Some(self.kv_utilization_peak),
            MetricId::PrefixCacheHitRate => self.prefix_cache_hit_rate,
            MetricId::Preemptions => Some(self.preemptions as f64),
            MetricId::MeanRunningBatch => self.mean_running_batch,
            MetricId::RejectedRequests => Some(self.rejected_requests as f64),
            MetricId::CpuHitRate => self.cpu_offload.as_ref().and_then(|c| c.cpu_hit_rate),
        }
    }
}

/// Why a level's window rates have no value, or `None` when they have one: a window of zero
/// length, or a window in which no request completed (docs/metrics.md "Window"); when no
/// request of the whole run completed and the engine rejected some, the rejections are why.
pub fn no_value_reason(window_ns: u64, completed: u64, totals: &RunTotals) -> Option<&'static str> {
    if window_ns == 0 {
        Some(NO_VALUE_EMPTY_WINDOW)
    } else if completed == 0 && totals.completed == 0 && totals.rejected > 0 {
        Some(NO_VALUE_REJECTED)
    } else if completed == 0 {
        Some(NO_VALUE_NO_COMPLETED)
    } else {
        None
    }
}

/// [`LevelResult::no_value`] for a window of zero length.
pub const NO_VALUE_EMPTY_WINDOW: &str =
    "the measurement window has zero length, so no rate can be measured; lengthen the duration (sweep.duration_s) or the run (sweep.num_requests)";
/// [`LevelResult::no_value`] when the engine rejected requests and none completed in the run.
pub const NO_VALUE_REJECTED: &str =
    "no request completed: the engine rejected the requests (rejected_requests; prompt + output over max_model_len, or more KV than the pool holds, as the warnings say), so no rate can be measured; shorten the requests or raise max_model_len / the KV memory (a longer run does not help)";
/// [`LevelResult::no_value`] for a window without a completed request.
pub const NO_VALUE_NO_COMPLETED: &str =
    "no request completed in the measurement window, so no rate can be measured; lengthen the duration (sweep.duration_s) or shorten the warm-up (sweep.warmup_s)";

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut s, mut n) = (0.0, 0u64);
    for x in v {
        s += x;
        n += 1;
    }
    (n > 0).then(|| s / n as f64)
}

fn overlap(a: Ticks, b: Ticks, ws: Ticks, we: Ticks) -> u64 {
    let lo = a.max(ws);
    let hi = b.min(we);
    hi.0.saturating_sub(lo.0)
}

impl Collector {
    /// Computes a level's metrics over the window `[ws, we]`. `gpus` divides the throughput;
    /// `totals` are the run's accounting counts.
    pub fn level_result(
        &self,
        level: Level,
        ws: Ticks,
        we: Ticks,
        gpus: u32,
        totals: RunTotals,
    ) -> LevelResult {
        if let Some(st) = self.stream.as_ref().filter(|_| self.streaming_on) {
            debug_assert_eq!((st.ws, st.we), (ws, we), "the window given before the run");
            debug_assert!(st.pending.is_empty(), "flush() before level_result");
            return self.level_result_streamed(st, level, gpus, totals);
        }
        let in_window = |t: Ticks| t >= ws && t <= we;

        let done: Vec<&FinishedRequest> = self
            .finished
            .iter()
            .filter(|r| in_window(r.finish))
            .collect();
        let measured: Vec<&FinishedRequest> =
            done.iter().copied().filter(|r| r.arrival >= ws).collect();

        let output_tokens: u64 = self
            .steps
            .iter()
            .flatten()
            .filter(|s| s.end > ws && s.end <= we)
            .map(|s| s.output_tokens as u64)
            .sum();
        // Pooled ITL: each decode step j of a measured request contributes the gap
        // end(j) - end(j-1); weights per step come from a difference array over the runs.
        let extra: usize = measured.iter().map(|r| r.extra_itls.len()).sum();
        let mut itl: Vec<(u64, u64)> = Vec::with_capacity(self.num_steps() as usize + extra);
        // Measured requests by engine (in order), so the pass is linear in engines + requests.
        let mut by_engine: Vec<Vec<&FinishedRequest>> = vec![Vec::new(); self.steps.len()];
        for r in &measured {
            if let Some(v) = by_engine.get_mut(r.engine as usize) {
                v.push(r);
            }
        }
        for (e, log) in self.steps.iter().enumerate() {
            if by_engine[e].is_empty() {
                continue;
            }
            let mut diff = vec![0i64; log.len() + 1];
            let mut any = false;
            for r in by_engine[e].iter() {
                for &(a, b) in &r.decode_runs {
                    diff[a as usize] += 1;
                    diff[b as usize + 1] -= 1;
                    any = true;
                }
            }
            if !any {
                continue;
            }
            let mut w = 0i64;
            for j in 0..log.len() {
                w += diff[j];
                if w > 0 {
                    let gap = log[j].end.0 - log[j - 1].end.0;
                    itl.push((gap, w as u64));
                }
            }
        }
        for r in &measured {
            for g in &r.extra_itls {
                itl.push((g.0, 1));
            }
        }

        // Speculative decoding: per-token ITL from the chunk sizes, and the window's acceptance.
        let spec = (!self.spec_steps.is_empty()).then(|| {
            let mut v: Vec<(f64, u64)> = Vec::new();
            for r in &measured {
                let log = &self.steps[r.engine as usize];
                let mut c = r.chunk_tokens.iter();
                for &(a, b) in &r.decode_runs {
                    for j in a..=b {
                        let n = c.next().copied().unwrap_or(1).max(1) as u64;
                        let gap = (log[j as usize].end.0 - log[j as usize - 1].end.0) as f64;
                        v.push((gap / n as f64 / 1e6, n));
                    }
                }
                for g in &r.extra_itls {
                    let n = c.next().copied().unwrap_or(1).max(1) as u64;
                    v.push((g.0 as f64 / n as f64 / 1e6, n));
                }
            }
            let (mut drafts, mut dtok, mut acc) = (0u64, 0u64, 0u64);
            let mut per_pos: Vec<u64> = Vec::new();
            for st in self.spec_steps.iter().filter(|s| s.end > ws && s.end <= we) {
                let k = st.k as usize;
                let p = st.pos as usize;
                let a = &self.spec_pos[p..p + k];
                let d = &self.spec_pos[p + k..p + 2 * k];
                if per_pos.len() < k {
                    per_pos.resize(k, 0);
                }
                drafts += d.first().copied().unwrap_or(0);
                dtok += d.iter().sum::<u64>();
                acc += a.iter().sum::<u64>();
                for (x, y) in per_pos.iter_mut().zip(a) {
                    *x += y;
                }
            }
            (
                v,
                SpecSums {
                    drafts,
                    draft_tokens: dtok,
                    accepted: acc,
                    per_pos,
                },
            )
        });

        // Engines that reported (after `clear`, `steps` may keep emptied logs beyond them).
        let (mut kv_int, mut batch_int, mut kv_peak) = (0.0, 0.0, 0.0f64);
        for (s, &total) in self
            .steps
            .iter()
            .zip(&self.kv_total)
            .flat_map(|(log, t)| log.iter().zip(std::iter::repeat(t)))
        {
            let ov = overlap(s.start, s.end, ws, we);
            let u = s.kv_used as f64 / total.max(1) as f64;
            if ov > 0 || (s.start >= ws && s.start <= we) {
                kv_peak = kv_peak.max(u);
            }
            kv_int += u * ov as f64;
            batch_int += s.num_seqs as f64 * ov as f64;
        }
        let (mut lookups, mut hits) = (0u64, 0u64);
        for &(t, p, c) in &self.admissions {
            if in_window(t) {
                lookups += p;
                hits += c;
            }
        }
        let samples: Vec<Sample> = measured.iter().map(|r| Sample::of(r)).collect();
        WindowTotals {
            level,
            ws,
            we,
            gpus,
            totals,
            done: done.len() as u64,
            done_prompt: done.iter().map(|r| r.prompt_len).sum::<u64>(),
            output_tokens,
            measured: &samples,
            itl,
            spec,
            n_engines: self.kv_total.len().max(1) as f64,
            kv_int,
            batch_int,
            kv_peak,
            lookups,
            hits,
            offload: (!self.offload.is_empty()).then(|| {
                let mut d = OffloadStats::default();
                for (t, x) in &self.offload {
                    if in_window(*t) {
                        d.add(x);
                    }
                }
                d
            }),
            preemptions: self.preemptions.iter().filter(|t| in_window(**t)).count() as u64,
            rejected: self.rejections.len() as u64,
        }
        .result()
    }
}

impl Collector {
    /// [`Collector::level_result`] from a streaming collector's folded records: the same sums over
    /// the same values, in the same order, into the same formulas ([`WindowTotals::result`]), so
    /// the same bits.
    fn level_result_streamed(
        &self,
        st: &Stream,
        level: Level,
        gpus: u32,
        totals: RunTotals,
    ) -> LevelResult {
        // Pooled ITL: the weights of each engine's steps from its difference array.
        let mut itl: Vec<(u64, u64)> = Vec::new();
        for log in &st.engines {
            let mut w = 0i64;
            for (i, d) in log.diff.iter().take(log.ends.len()).enumerate() {
                w += *d as i64;
                if w > 0 && i > 0 {
                    itl.push((log.ends[i] - log.ends[i - 1], w as u64));
                }
            }
        }
        itl.extend(st.extra_itls.iter().map(|&g| (g, 1)));
        // Engine 0's running sums, then the later engines' terms in order: the full log's order.
        let (mut kv_int, mut batch_int) = (st.kv_int0, st.batch_int0);
        for log in st
            .engines
            .iter()
            .skip(1)
            .take(self.kv_total.len().saturating_sub(1))
        {
            for &(k, b) in &log.contrib {
                kv_int += k;
                batch_int += b;
            }
        }
        WindowTotals {
            level,
            ws: st.ws,
            we: st.we,
            gpus,
            totals,
            done: st.done,
            done_prompt: st.done_prompt,
            output_tokens: st.output_tokens,
            measured: &st.measured,
            itl,
            spec: st.spec_any.then(|| {
                (
                    st.itl_per_token.clone(),
                    SpecSums {
                        drafts: st.spec_drafts,
                        draft_tokens: st.spec_draft_tokens,
                        accepted: st.spec_accepted,
                        per_pos: st.spec_per_pos.clone(),
                    },
                )
            }),
            n_engines: self.kv_total.len().max(1) as f64,
            kv_int,
            batch_int,
            kv_peak: st.kv_peak,
            lookups: st.adm_lookup,
            hits: st.adm_hit,
            offload: st.offload_any.then_some(st.offload_window),
            preemptions: st.preemptions_in_window,
            rejected: st.rejected,
        }
        .result()
    }
}

/// Speculative decoding's acceptance counts over a window.
struct SpecSums {
    drafts: u64,
    draft_tokens: u64,
    accepted: u64,
    per_pos: Vec<u64>,
}

/// What a level's metrics are computed from, however the records were kept (every record, or
/// folded as they arrived): window sums and counts, the measured requests' timestamps and the
/// pooled ITL samples. [`WindowTotals::result`] is the one place the formulas of docs/metrics.md
/// turn them into a [`LevelResult`].
struct WindowTotals<'a> {
    level: Level,
    ws: Ticks,
    we: Ticks,
    gpus: u32,
    totals: RunTotals,
    /// Requests finished in the window, and their prompt tokens.
    done: u64,
    done_prompt: u64,
    /// Output tokens of the steps that ended in the window.
    output_tokens: u64,
    /// Requests that arrived and finished in the window.
    measured: &'a [Sample],
    /// (inter-token gap ns, weight) over the measured requests' decode steps and extra gaps.
    itl: Vec<(u64, u64)>,
    /// Speculative decoding only: per-token ITL samples (ms, weight) and the acceptance counts.
    spec: Option<(Vec<(f64, u64)>, SpecSums)>,
    n_engines: f64,
    /// Time integrals over the window of KV use (fraction x ns) and running batch (seqs x ns),
    /// summed engine by engine, and the peak KV use.
    kv_int: f64,
    batch_int: f64,
    kv_peak: f64,
    /// Prompt tokens looked up and hit at admissions in the window.
    lookups: u64,
    hits: u64,
    /// The CPU tier's activity in the window, when the deployment has one.
    offload: Option<OffloadStats>,
    preemptions: u64,
    rejected: u64,
}

impl WindowTotals<'_> {
    fn result(self) -> LevelResult {
        let (ws, we) = (self.ws, self.we);
        let win_len = we.0.saturating_sub(ws.0);
        let win_ns = win_len.max(1);
        let win_s = win_ns as f64 / 1e9;
        let measured = self.measured;

        let output_tps = self.output_tokens as f64 / win_s;
        let input_tps = self.done_prompt as f64 / win_s;
        let ttft = Dist::of_ints_scaled(
            measured
                .iter()
                .map(|r| r.first_token.0 - r.arrival.0)
                .collect(),
            1e6,
        );
        let e2e = Dist::of_ints_scaled(
            measured.iter().map(|r| r.finish.0 - r.arrival.0).collect(),
            1e9,
        );
        // Per-request TPOT; the mean in request order, the percentiles over the sorted values.
        let tpots: Vec<f64> = measured
            .iter()
            .filter(|r| r.output_len > 1)
            .map(|r| (r.finish.0 - r.first_token.0) as f64 / 1e6 / (r.output_len - 1) as f64)
            .collect();
        let tpot = mean(tpots.iter().copied());
        let tpot_dist = Dist::of(tpots).map(|d| Dist {
            mean: tpot.unwrap_or(d.mean),
            ..d
        });
        let per_user = mean(
            measured
                .iter()
                .filter(|r| r.finish > r.arrival)
                .map(|r| r.output_len as f64 / ((r.finish.0 - r.arrival.0) as f64 / 1e9)),
        );
        let queueing = mean(
            measured
                .iter()
                .map(|r| (r.first_scheduled.0 - r.arrival.0) as f64 / 1e6),
        );
        let itl = Dist::weighted_ns_as_ms(self.itl);

        let spec_on = self.spec.is_some();
        let (itl_per_token, spec_stats) = match self.spec {
            Some((v, sums)) => {
                let drafts = sums.drafts;
                let (dtok, acc) = (sums.draft_tokens, sums.accepted);
                let stats = SpecDecodeStats {
                    num_drafts: drafts,
                    num_draft_tokens: dtok,
                    num_accepted_tokens: acc,
                    mean_acceptance_length: (drafts > 0).then(|| 1.0 + acc as f64 / drafts as f64),
                    draft_acceptance_rate: (dtok > 0).then(|| acc as f64 / dtok as f64),
                    acceptance_rate_per_pos: sums
                        .per_pos
                        .iter()
                        .map(|&x| {
                            if drafts > 0 {
                                x as f64 / drafts as f64
                            } else {
                                0.0
                            }
                        })
                        .collect(),
                };
                (Dist::weighted(v), Some(stats))
            }
            None => (None, None),
        };
        // With several tokens per chunk the recipe's per-user rate uses the per-token ITL.
        let itl_for_rate = if spec_on { &itl_per_token } else { &itl };
        let e2e_per_user = match (&ttft, itl_for_rate) {
            (Some(tt), Some(it)) => {
                let osl = measured.iter().map(|r| r.output_len as f64).sum::<f64>()
                    / measured.len() as f64;
                Some(osl / (tt.mean / 1e3 + osl * it.mean / 1e3))
            }
            _ => None,
        };

        let (q, h) = (self.lookups, self.hits);
        let done = self.done;
        let reason = no_value_reason(win_len, done, &self.totals);
        let rate = |x: f64| reason.is_none().then_some(x);
        let over_window = |x: f64| (win_len > 0).then_some(x);
        let n_engines = self.n_engines;
        LevelResult {
            level: self.level,
            window_s: Window {
                start: ws.as_secs_f64(),
                end: we.as_secs_f64(),
            },
            completed_requests: done,
            measured_requests: measured.len() as u64,
            requests_per_s: rate(done as f64 / win_s),
            input_tokens_per_s: rate(input_tps),
            output_tokens_per_s: rate(output_tps),
            output_tokens_per_s_per_gpu: rate(output_tps / self.gpus.max(1) as f64),
            output_tokens_per_s_per_user: per_user,
            e2e_tokens_per_s_per_user: e2e_per_user,
            interactivity: tpot.filter(|t| *t > 0.0).map(|t| 1000.0 / t),
            ttft_ms: ttft,
            itl_ms: itl,
            tpot_ms_mean: tpot,
            tpot_ms: tpot_dist,
            itl_per_token_ms: itl_per_token,
            spec_decode: spec_stats,
            cpu_offload: self
                .offload
                .map(|d| CpuOffloadStats::of(&d, h, q, (win_len > 0).then_some(win_s))),
            e2e_s: e2e,
            queueing_ms_mean: queueing,
            kv_utilization_mean: over_window(self.kv_int / (win_ns as f64 * n_engines)),
            kv_utilization_peak: self.kv_peak,
            prefix_cache_hit_rate: (q > 0).then(|| h as f64 / q as f64),
            preemptions: self.preemptions,
            mean_running_batch: over_window(self.batch_int / (win_ns as f64 * n_engines)),
            rejected_requests: self.rejected,
            totals: self.totals,
            no_value: reason.map(str::to_string),
        }
    }
}

/// The `p` quantile of `n` sorted values read through `at(rank)`: linear interpolation between
/// ranks `floor(p (n - 1))` and the next (docs/metrics.md).
fn interpolated_quantile(p: f64, n: u64, at: &dyn Fn(u64) -> f64) -> f64 {
    let r = p * (n - 1) as f64;
    let lo = libm::floor(r) as u64;
    let frac = r - lo as f64;
    let a = at(lo);
    if frac == 0.0 {
        a
    } else {
        a + frac * (at(lo + 1) - a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_sorted_dist_equals_the_float_sorted_one_bit_for_bit() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for len in [1usize, 2, 3, 10, 1000, 5000] {
            // Wide values, heavy ties, and values that map to equal floats.
            for range in [1u64 << 50, 7, 1_000_000] {
                let v: Vec<u64> = (0..len).map(|_| next(range)).collect();
                for div in [1e6, 1e9, 3.0] {
                    let a = Dist::of_ints_scaled(v.clone(), div).unwrap();
                    let b = Dist::of(v.iter().map(|&x| x as f64 / div)).unwrap();
                    for (p, q) in [
                        (a.mean, b.mean),
                        (a.p50, b.p50),
                        (a.p90, b.p90),
                        (a.p99, b.p99),
                    ] {
                        assert_eq!(
                            p.to_bits(),
                            q.to_bits(),
                            "len {len} range {range} div {div}"
                        );
                    }
                }
            }
        }
        assert_eq!(Dist::of_ints_scaled(Vec::new(), 1e6), None);
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        // numpy.percentile([1,2,3,4,10], [50,90,99]) = 3, 7.6, 9.76
        let d = Dist::of([4.0, 1.0, 10.0, 3.0, 2.0]).unwrap();
        assert_eq!(d.p50, 3.0);
        assert!((d.p90 - 7.6).abs() < 1e-12);
        assert!((d.p99 - 9.76).abs() < 1e-12);
        assert_eq!(d.mean, 4.0);
    }

    #[test]
    fn weighted_ns_percentiles_equal_the_sorted_definition_and_the_mean_is_exact() {
        let mut rng = crate::rng::Rng::stream(1, crate::rng::Stream::Test);
        // random values; heavy ties; already sorted; reversed; one value; zero weights
        let mut cases: Vec<Vec<(u64, u64)>> = Vec::new();
        for len in [1usize, 2, 3, 7, 33, 100, 5000, 40_000] {
            cases.push(
                (0..len)
                    .map(|_| (rng.range_u64(1_000_000, 1_200_000), rng.range_u64(0, 300)))
                    .collect(),
            );
            cases.push(
                (0..len)
                    .map(|_| (rng.range_u64(0, 4) * 7_000_000, rng.range_u64(1, 3)))
                    .collect(),
            );
            let sorted: Vec<(u64, u64)> = (0..len as u64).map(|i| (i * 1000, 1 + i % 5)).collect();
            cases.push(sorted.iter().rev().copied().collect());
            cases.push(sorted);
            cases.push(vec![(123_456_789, 2); len]);
        }
        cases.push(vec![(5, 0), (7, 0)]);
        // wide ranges, a tight mass with far outliers, values near 2^53 (radix passes)
        for len in [3000usize, 50_000] {
            cases.push(
                (0..len)
                    .map(|_| (rng.range_u64(0, 1 << 52), rng.range_u64(0, 5)))
                    .collect(),
            );
            cases.push(
                (0..len)
                    .map(|i| {
                        let x = if i % 97 == 0 {
                            rng.range_u64(1 << 40, 1 << 50)
                        } else {
                            rng.range_u64(9_000_000, 9_000_300)
                        };
                        (x, rng.range_u64(1, 4))
                    })
                    .collect(),
            );
        }
        for v in cases {
            let a = Dist::weighted_ns_as_ms(v.clone());
            let b = Dist::weighted(v.iter().map(|&(ns, w)| (ns as f64 / 1e6, w)).collect());
            let (Some(a), Some(b)) = (a, b) else {
                assert!(a.is_none() && b.is_none());
                continue;
            };
            assert_eq!(
                (a.p50, a.p90, a.p99),
                (b.p50, b.p90, b.p99),
                "{} values",
                v.len()
            );
            // the mean: the exact rational sum(ns * w) / sum(w) / 1e6, rounded
            let n: u128 = v.iter().map(|x| x.1 as u128).sum();
            let s: u128 = v.iter().map(|x| x.0 as u128 * x.1 as u128).sum();
            let exact_ns = (s / n) as f64 + (s % n) as f64 / n as f64;
            assert!((a.mean - exact_ns / 1e6).abs() <= 1e-15 * a.mean.abs().max(1e-300));
            assert!((a.mean - b.mean).abs() <= 1e-12 * a.mean.abs());
        }
    }

    #[test]
    fn weighted_percentiles_equal_expanded_list() {
        let w = Dist::weighted(vec![(5.0, 3), (1.0, 2), (9.0, 1)]).unwrap();
        let e = Dist::of([5.0, 5.0, 5.0, 1.0, 1.0, 9.0]).unwrap();
        assert_eq!(w, e);
        assert!(Dist::of(std::iter::empty()).is_none());
    }
}
