//! The request generator: arrival process + content, reacting to completions.

use super::{Agentic, Arrival, Content, WorkloadSpec};
use crate::engine::IdMap;
use crate::engine::{Request, Segment};
use crate::rng::{hash2, Rng, Stream};
use crate::units::Ticks;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

const SYS_SALT: u64 = 0x5359_5354_454d_0001;
const GROUP_SALT: u64 = 0x4752_4f55_5000_0002;
const SESSION_SALT: u64 = 0x5345_5353_0000_0003;
const UNIQUE_SALT: u64 = 0x554e_4951_0000_0004;
const POOL_SALT: u64 = 0x504f_4f4c_0000_0005;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pending {
    /// Closed-loop client `c` sends its next request.
    Client(u32),
    /// The next turn of session `s`.
    Turn(u64),
    /// An open-loop (or burst) arrival.
    Open,
}

struct Session {
    stream: u64,
    /// Conversation tokens after the system prompt, before this turn's output.
    conv_len: u64,
    turn: u32,
    client: Option<u32>,
}

/// A prompt pool (`shared_prefix.prompts_per_group`): each prompt's question length, drawn once,
/// and the shuffled order in which the prompts are sent, cycled. Prompt `k` belongs to group
/// `k / per_group`, as inference-perf builds its pool group by group.
struct Pool {
    lens: Vec<u64>,
    order: Vec<u32>,
    per_group: u32,
}

impl Pool {
    fn new(
        input: &super::LengthDist,
        p: &super::SharedPrefix,
        inputs: &mut Rng,
        shuffle: &mut Rng,
    ) -> Option<Pool> {
        let per_group = p.prompts_per_group?;
        let n = p.pool_size()?;
        let lens = (0..n).map(|_| input.sample(inputs)).collect();
        // Fisher-Yates over the prompt indices (inference-perf shuffles its pool once).
        let mut order: Vec<u32> = (0..n).map(|k| k as u32).collect();
        for i in (1..order.len()).rev() {
            let j = shuffle.range_u64(0, i as u64) as usize;
            order.swap(i, j);
        }
        Some(Pool {
            lens,
            order,
            per_group,
        })
    }

    /// The prompt the `i`-th request sends: (its group, its index in the pool, its question's
    /// length).
    fn prompt(&self, i: u64) -> (u64, u64, u64) {
        let k = self.order[(i % self.order.len() as u64) as usize];
        (
            u64::from(k / self.per_group),
            u64::from(k),
            self.lens[k as usize],
        )
    }
}

struct Owner {
    client: Option<u32>,
    session: Option<u64>,
    output_len: u64,
}

/// Generates the requests of one level. Drive it with [`WorkloadGen::peek_time`],
/// [`WorkloadGen::pop`] and [`WorkloadGen::on_done`].
pub struct WorkloadGen {
    spec: WorkloadSpec,
    /// `spec.content`, shared so that building a request borrows it instead of cloning it
    /// (a trace or an empirical length list would otherwise be copied per request).
    content: Rc<Content>,
    max_model_len: u64,
    limit: Option<u64>,
    issued: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(Ticks, u64, Pending)>>,
    arrivals: Rng,
    inputs: Rng,
    outputs: Rng,
    prefixes: Rng,
    sessions_rng: Rng,
    sessions: IdMap<Session>,
    next_session: u64,
    pool: Option<Pool>,
    owners: IdMap<Owner>,
    trace_pos: usize,
    /// Open-loop arrival clock (continuous seconds, to avoid rounding drift).
    open_clock_s: f64,
    open_remaining: Option<u64>,
    trace_scale: f64,
    /// Requests issued whose prompt + output exceed max_model_len (the engine rejects them).
    pub over_max_model_len: u64,
}

impl WorkloadGen {
    /// A generator for `spec` (already at its level). `limit` caps the number of requests issued.
    pub fn new(spec: &WorkloadSpec, max_model_len: u64, limit: Option<u64>) -> WorkloadGen {
        let seed = spec.seed;
        let mut g = WorkloadGen {
            spec: spec.clone(),
            content: Rc::new(spec.content.clone()),
            max_model_len: max_model_len.max(2),
            limit,
            issued: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            arrivals: Rng::stream(seed, Stream::Arrivals),
            inputs: Rng::stream(seed, Stream::InputLengths),
            outputs: Rng::stream(seed, Stream::OutputLengths),
            prefixes: Rng::stream(seed, Stream::Prefixes),
            sessions_rng: Rng::stream(seed, Stream::Sessions),
            sessions: IdMap::default(),
            next_session: 0,
            pool: None,
            owners: IdMap::default(),
            trace_pos: 0,
            open_clock_s: 0.0,
            open_remaining: None,
            trace_scale: 1.0,
            over_max_model_len: 0,
        };
        if let Content::Synthetic {
            input,
            shared_prefix: Some(p),
            ..
        } = &spec.content
        {
            g.pool = Pool::new(input, p, &mut g.inputs, &mut g.prefixes);
        }
        match spec.arrival.clone() {
            Arrival::ClosedLoop { concurrency, .. } => {
                for c in 0..concurrency {
                    g.push(Ticks::ZERO, Pending::Client(c));
                }
            }
            Arrival::Burst { count } => {
                g.open_remaining = Some(count);
                g.push(Ticks::ZERO, Pending::Open);
            }
            Arrival::Trace { rate } => {
                if let Content::Trace(t) = &spec.content {
                    let first = t.first().map(|r| r.timestamp_ms).unwrap_or(0);
                    let last = t.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
                    if let Some(r) = rate {
                        if t.len() > 1 && last > first {
                            let native = (t.len() - 1) as f64 / ((last - first) as f64 / 1000.0);
                            g.trace_scale = native / r;
                        }
                    }
                    g.push(Ticks::ZERO, Pending::Open);
                }
            }
            _ => {
                let first = g.next_gap_s();
                g.open_clock_s = first;
                g.push(Ticks::from_secs_f64(first), Pending::Open);
            }
        }
        g
    }

    fn push(&mut self, t: Ticks, p: Pending) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, p)));
    }

    fn next_gap_s(&mut self) -> f64 {
        match self.spec.arrival {
            Arrival::Poisson { rate } => self.arrivals.exponential(1.0 / rate),
            Arrival::Constant { rate } => 1.0 / rate,
            Arrival::Gamma { rate, cv } => {
                let k = 1.0 / (cv * cv);
                self.arrivals.gamma(k, 1.0 / (rate * k))
            }
            _ => 0.0,
        }
    }

    /// Requests issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Time of the next arrival, if any.
    pub fn peek_time(&self) -> Option<Ticks> {
        if self.limit.is_some_and(|l| self.issued >= l) {
            return None;
        }
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Produces the request arriving at [`WorkloadGen::peek_time`]. `None` when nothing is left
    /// (for example a trace ran out).
    pub fn pop(&mut self) -> Option<Request> {
        loop {
            if self.limit.is_some_and(|l| self.issued >= l) {
                return None;
            }
            let Reverse((t, _, p)) = self.heap.pop()?;
            let made = match p {
                Pending::Client(c) => self.make(t, Some(c), None),
                Pending::Turn(s) => self.make(t, None, Some(s)),
                Pending::Open => {
                    self.schedule_next_open(t);
                    self.make(t, None, None)
                }
            };
            if let Some(r) = made {
                self.issued += 1;
                return Some(r);
            }
        }
    }

    fn schedule_next_open(&mut self, t: Ticks) {
        match &self.spec.arrival {
            Arrival::Burst { .. } => {
                let rem = self.open_remaining.unwrap_or(0);
                if rem > 1 {
                    self.open_remaining = Some(rem - 1);
                    self.push(t, Pending::Open);
                } else {
                    self.open_remaining = Some(0);
                }
            }
            Arrival::Trace { .. } => {
                if let Content::Trace(tr) = &self.spec.content {
                    let next = self.trace_pos + 1;
                    if next < tr.len() {
                        let first = tr[0].timestamp_ms;
                        let dt_ms = tr[next].timestamp_ms.saturating_sub(first) as f64;
                        let at = Ticks::from_secs_f64(dt_ms / 1000.0 * self.trace_scale);
                        self.push(at.max(t), Pending::Open);
                    }
                }
            }
            Arrival::ClosedLoop { .. } => {}
            _ => {
                let gap = self.next_gap_s();
                self.open_clock_s += gap;
                self.push(Ticks::from_secs_f64(self.open_clock_s), Pending::Open);
            }
        }
    }

    fn next_id(&self) -> u64 {
        self.issued
    }

    /// Builds the next request for a client / session / open arrival.
    fn make(&mut self, t: Ticks, client: Option<u32>, session: Option<u64>) -> Option<Request> {
        let id = self.next_id();
        let content = Rc::clone(&self.content);
        match &*content {
            Content::Synthetic {
                input,
                output,
                shared_prefix,
            } => {
                let mml = self.max_model_len;
                let mut prompt = Vec::with_capacity(2);
                let unique = hash2(UNIQUE_SALT, id);
                // The question: the pool's prompt for this request, or a new one.
                let (group, question, suffix) = match (&self.pool, shared_prefix) {
                    (Some(pool), _) => {
                        let (g, k, len) = pool.prompt(id);
                        (Some(g), hash2(POOL_SALT, k), len)
                    }
                    (None, p) => {
                        let g = p.map(|p| self.prefixes.range_u64(0, u64::from(p.groups) - 1));
                        (g, unique, input.sample(&mut self.inputs))
                    }
                };
                if let (Some(g), Some(p)) = (group, shared_prefix) {
                    prompt.push(Segment {
                        stream: hash2(GROUP_SALT, g),
                        start: 0,
                        len: p.tokens,
                    });
                }
                let out = output.sample(&mut self.outputs);
                prompt.push(Segment {
                    stream: question,
                    start: 0,
                    len: suffix,
                });
                let plen: u64 = prompt.iter().map(|s| s.len).sum();
                // As vLLM: a request whose prompt + output exceeds max_model_len is sent as is and
                // rejected by the engine (counted), never shortened.
                if plen.saturating_add(out) > mml {
                    self.over_max_model_len += 1;
                }
                self.owners.insert(
                    id,
                    Owner {
                        client,
                        session: None,
                        output_len: out,
                    },
                );
                Some(Request {
                    id,
                    arrival: t,
                    prompt,
                    output_stream: unique,
                    output_start: plen,
                    output_len: out,
                })
            }
            Content::Trace(tr) => {
                let r = tr.get(self.trace_pos)?.clone();
                self.trace_pos += 1;
                let unique = hash2(UNIQUE_SALT, id);
                self.owners.insert(
                    id,
                    Owner {
                        client,
                        session: None,
                        output_len: r.output_length,
                    },
                );
                // Trace lengths are replayed as recorded: requests that do not fit are rejected
                // by the engine (and counted), never silently shortened.
                Some(Request {
                    id,
                    arrival: t,
                    prompt: r.prompt,
                    output_stream: unique,
                    output_start: 0,
                    output_len: r.output_length,
                })
            }
            Content::Agentic(a) => {
                let sid = match session {
                    Some(s) => s,
                    None => self.new_session(a, client)?,
                };
                let out = a.output_tokens.sample(&mut self.outputs);
                let s = self.sessions.get(&sid).expect("session exists");
                let mut prompt = Vec::with_capacity(2);
                if a.system_prompt_tokens > 0 {
                    prompt.push(Segment {
                        stream: hash2(SYS_SALT, self.spec.seed),
                        start: 0,
                        len: a.system_prompt_tokens,
                    });
                }
                prompt.push(Segment {
                    stream: s.stream,
                    start: 0,
                    len: s.conv_len,
                });
                let plen = a.system_prompt_tokens + s.conv_len;
                let out = out.min(self.max_model_len.saturating_sub(plen)).max(1);
                let stream = s.stream;
                let conv = s.conv_len;
                self.owners.insert(
                    id,
                    Owner {
                        client,
                        session: Some(sid),
                        output_len: out,
                    },
                );
                Some(Request {
                    id,
                    arrival: t,
                    prompt,
                    output_stream: stream,
                    output_start: conv,
                    output_len: out,
                })
            }
        }
    }

    fn new_session(&mut self, a: &Agentic, client: Option<u32>) -> Option<u64> {
        let sid = self.next_session;
        self.next_session += 1;
        let salt = self.sessions_rng.next_u64();
        self.sessions.insert(
            sid,
            Session {
                stream: hash2(SESSION_SALT, salt ^ sid),
                conv_len: a.first_turn_tokens - a.system_prompt_tokens,
                turn: 1,
                client,
            },
        );
        Some(sid)
    }

    /// Reports that request `id` finished (or was rejected) at `t`: closed-loop clients and
    /// sessions schedule their next request.
    pub fn on_done(&mut self, id: u64, t: Ticks) {
        let Some(owner) = self.owners.remove(&id) else {
            return;
        };
        let client_think = match self.spec.arrival {
            Arrival::ClosedLoop { think_s, .. } => think_s,
            _ => 0.0,
        };
        let content = Rc::clone(&self.content);
        if let (Some(sid), Content::Agentic(a)) = (owner.session, &*content) {
            let added = a.tokens_per_turn.sample(&mut self.inputs);
            let mml = self.max_model_len;
            let s = self.sessions.get_mut(&sid).expect("session exists");
            s.conv_len = s
                .conv_len
                .saturating_add(owner.output_len)
                .saturating_add(added);
            s.turn += 1;
            let next_prompt = a.system_prompt_tokens + s.conv_len;
            // A session also ends when its next turn could not fit max_model_len.
            let more = s.turn <= a.turns
                && next_prompt.saturating_add(a.output_tokens.nominal_mean() as u64) <= mml;
            let client = s.client.or(owner.client);
            if more {
                // the next turn inherits the client (closed loop) or stays open-loop
                self.sessions.get_mut(&sid).expect("session").client = client;
                let at = t + Ticks::from_secs_f64(a.think_s);
                self.push(at, Pending::Turn(sid));
                return;
            }
            self.sessions.remove(&sid);
            if let Some(c) = client {
                let at = t + Ticks::from_secs_f64(client_think);
                self.push(at, Pending::Client(c));
            }
            return;
        }
        if let Some(c) = owner.client {
            let at = t + Ticks::from_secs_f64(client_think);
            self.push(at, Pending::Client(c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::RawWorkloadSpec;

    /// The requests of a burst of `n` with request content `content` (JSON).
    fn burst(content: &str, n: u64) -> Vec<Request> {
        let spec = RawWorkloadSpec::from_json(&format!(
            r#"{{"arrival":{{"type":"burst","count":{n}}},"requests":{content},"seed":7}}"#
        ))
        .unwrap()
        .validate()
        .unwrap();
        let mut g = WorkloadGen::new(&spec, 1 << 20, None);
        std::iter::from_fn(|| g.pop()).collect()
    }

    const POOL: &str = r#"{"type":"synthetic","input":{"type":"uniform","min":300,"max":500},
        "output":{"type":"constant","tokens":20},
        "shared_prefix":{"groups":2,"tokens":100,"prompts_per_group":5}}"#;

    #[test]
    fn a_prompt_pool_sends_each_prompt_once_per_cycle_in_a_fixed_order() {
        let reqs = burst(POOL, 35);
        assert_eq!(reqs.len(), 35);
        // Every request repeats the prompt of the request one pool (10 prompts) earlier.
        for i in 10..35 {
            assert_eq!(reqs[i].prompt, reqs[i - 10].prompt, "request {i}");
        }
        // The first cycle holds the 10 prompts once each: 2 groups of 5 questions.
        let first = &reqs[..10];
        let questions: std::collections::BTreeSet<u64> =
            first.iter().map(|r| r.prompt[1].stream).collect();
        assert_eq!(questions.len(), 10);
        let mut per_group = std::collections::BTreeMap::<u64, usize>::new();
        for r in first {
            assert_eq!(r.prompt[0].len, 100);
            *per_group.entry(r.prompt[0].stream).or_default() += 1;
            assert!((300..=500).contains(&r.prompt[1].len));
            assert_eq!(r.output_start, 100 + r.prompt[1].len);
        }
        assert_eq!(per_group.values().copied().collect::<Vec<_>>(), vec![5, 5]);
        // Outputs are each request's own.
        let outs: std::collections::BTreeSet<u64> = reqs.iter().map(|r| r.output_stream).collect();
        assert_eq!(outs.len(), 35);
        // The same seed gives the same pool and order.
        assert_eq!(burst(POOL, 35), reqs);
    }

    #[test]
    fn without_a_pool_every_question_is_new() {
        let content = POOL.replace(r#","prompts_per_group":5"#, "");
        let reqs = burst(&content, 30);
        let questions: std::collections::BTreeSet<u64> =
            reqs.iter().map(|r| r.prompt[1].stream).collect();
        assert_eq!(questions.len(), 30);
        let groups: std::collections::BTreeSet<u64> =
            reqs.iter().map(|r| r.prompt[0].stream).collect();
        assert_eq!(groups.len(), 2);
    }
}
