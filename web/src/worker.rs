//! The sweep worker's runtime (wasm32, inside a dedicated Web Worker). Receives
//! [`ToWorker`] messages and runs a sweep or a comparison's prediction: with more than one
//! level and more than one core, its levels on level workers (fresh instances of this binary,
//! one per `navigator.hardwareConcurrency`, at most `level_pool::MAX_LEVEL_WORKERS`, started
//! by this worker and handed the next level as each finishes one; `level_pool::Assembly` keeps
//! the page's messages in level order); otherwise level by level here with
//! `protocol::SweepRun`. It posts [`FromWorker`] messages and yields to the event loop between
//! levels (or while its level workers run) so `Cancel` is seen. A level worker answers a
//! `level_pool::ToLevel` with `level_pool::FromLevel` messages.

use crate::level_pool::{Assembly, FromLevel, ToLevel, MAX_LEVEL_WORKERS};
use crate::protocol::{prepare_job, start_job, FromWorker, SweepRun, ToWorker};
use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, ErrorEvent, MessageEvent, Worker};

fn post(scope: &DedicatedWorkerGlobalScope, m: &FromWorker) {
    // Posting a string cannot fail for a live worker; nothing useful to do if it does.
    let _ = scope.post_message(&JsValue::from_str(&m.to_json()));
}

/// Resolves after the event loop has run once (lets queued `Cancel` messages in).
async fn yield_now(scope: &DedicatedWorkerGlobalScope) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Resolves after `ms` milliseconds (the sweep worker's poll of its level workers' messages).
async fn sleep_ms(scope: &DedicatedWorkerGlobalScope, ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// How many level workers a run of `levels` levels gets (below 2: none, it runs here).
fn level_workers(scope: &DedicatedWorkerGlobalScope, levels: usize) -> usize {
    let cores = scope.navigator().hardware_concurrency();
    let cores = if cores.is_finite() && cores >= 1.0 {
        cores as usize
    } else {
        1
    };
    cores.min(MAX_LEVEL_WORKERS).min(levels)
}

/// What a level worker sent, or how it died.
enum Inbound {
    Text(String),
    Died(String),
}

/// A level worker's `onmessage`, `onerror` and `onmessageerror` handlers.
type Handlers = (
    Closure<dyn Fn(MessageEvent)>,
    Closure<dyn Fn(ErrorEvent)>,
    Closure<dyn Fn(MessageEvent)>,
);

/// One run's level workers: the workers, their handlers (kept alive until they are
/// terminated) and the messages they sent since the last poll.
struct Crew {
    workers: Vec<Worker>,
    handlers: Vec<Handlers>,
    inbox: Rc<RefCell<VecDeque<(usize, Inbound)>>>,
}

impl Crew {
    fn start(n: usize) -> Result<Crew, String> {
        let inbox: Rc<RefCell<VecDeque<(usize, Inbound)>>> = Rc::default();
        let mut crew = Crew {
            workers: Vec::new(),
            handlers: Vec::new(),
            inbox: inbox.clone(),
        };
        for k in 0..n {
            let w = Worker::new("./worker_loader.js")
                .map_err(|e| format!("could not start a level worker: {e:?}"))?;
            let (i1, i2, i3) = (inbox.clone(), inbox.clone(), inbox.clone());
            let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
                if let Some(text) = ev.data().as_string() {
                    i1.borrow_mut().push_back((k, Inbound::Text(text)));
                }
            });
            let onerror = Closure::<dyn Fn(ErrorEvent)>::new(move |ev: ErrorEvent| {
                ev.prevent_default();
                let what = ev.message();
                let what = if what.is_empty() {
                    "an error".to_string()
                } else {
                    what
                };
                i2.borrow_mut()
                    .push_back((k, Inbound::Died(format!("stopped with {what}"))));
            });
            let onmessageerror = Closure::<dyn Fn(MessageEvent)>::new(move |_: MessageEvent| {
                i3.borrow_mut().push_back((
                    k,
                    Inbound::Died("sent a message that could not be read".into()),
                ));
            });
            w.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
            w.set_onerror(Some(onerror.as_ref().unchecked_ref()));
            w.set_onmessageerror(Some(onmessageerror.as_ref().unchecked_ref()));
            crew.workers.push(w);
            crew.handlers.push((onmessage, onerror, onmessageerror));
        }
        Ok(crew)
    }

    fn post(&self, k: usize, m: &ToLevel) {
        let _ = self.workers[k].post_message(&JsValue::from_str(&m.to_json()));
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        for w in &self.workers {
            w.terminate();
            w.set_onmessage(None);
            w.set_onerror(None);
            w.set_onmessageerror(None);
        }
    }
}

/// Runs a `Run` or `Predict` on the level workers of `crew`; the page gets the messages one worker
/// stepping through the levels would send.
async fn run_spread(
    scope: &DedicatedWorkerGlobalScope,
    id: u32,
    msg: &ToWorker,
    run: SweepRun<'_>,
    crew: Crew,
    cancelled: &Rc<RefCell<BTreeSet<u32>>>,
) {
    let send = |m: FromWorker| post(scope, &m);
    let mut assembly = Assembly::new(id, run, &mut |m| post(scope, &m));
    // The level each worker runs (a worker gets its first level when it says `ready`, the next
    // when it answers one).
    let mut busy: Vec<Option<usize>> = vec![None; crew.workers.len()];
    let hand_out = |k: usize, assembly: &mut Assembly, busy: &mut Vec<Option<usize>>| {
        busy[k] = assembly.next_level();
        if let Some(index) = busy[k] {
            crew.post(
                k,
                &ToLevel::RunLevel {
                    id,
                    job: msg.clone(),
                    index,
                },
            );
        }
    };
    loop {
        sleep_ms(scope, 10).await;
        if cancelled.borrow_mut().remove(&id) {
            drop(crew);
            return send(assembly.cancel());
        }
        let batch: Vec<(usize, Inbound)> = crew.inbox.borrow_mut().drain(..).collect();
        for (k, inbound) in batch {
            match inbound {
                Inbound::Text(text) if text.trim() == "\"ready\"" => {
                    hand_out(k, &mut assembly, &mut busy);
                }
                Inbound::Text(text) => {
                    let Some(m) = FromLevel::from_json(&text) else {
                        continue;
                    };
                    let finished = matches!(
                        m,
                        FromLevel::LevelDone { .. } | FromLevel::LevelFailed { .. }
                    );
                    assembly.on_message(m, &mut |m| post(scope, &m));
                    if finished {
                        hand_out(k, &mut assembly, &mut busy);
                    }
                }
                Inbound::Died(what) => {
                    let at = busy[k]
                        .map(|i| format!(" during level {} of {}", i + 1, assembly.total_levels()))
                        .unwrap_or_default();
                    drop(crew);
                    return send(FromWorker::Error {
                        id,
                        field: None,
                        message: format!(
                            "a level worker of the sweep {what}{at}. This usually means the run \
                             needed more memory than the browser gives a worker: use fewer or \
                             lower levels, fewer requests per level or a shorter simulated \
                             duration, then Run again."
                        ),
                    });
                }
            }
            if assembly.is_over() {
                return;
            }
        }
    }
}

/// Runs a `Run` (sweep) or `Predict` (comparison) request: on level workers when there are
/// several levels and cores, else level by level here.
async fn run(
    scope: DedicatedWorkerGlobalScope,
    id: u32,
    msg: ToWorker,
    cancelled: Rc<RefCell<BTreeSet<u32>>>,
) {
    let send = |m: FromWorker| post(&scope, &m);
    let (s, r) = match prepare_job(&msg) {
        Some(Ok(x)) => x,
        Some(Err(m)) => return send(*m),
        None => return,
    };
    let mut sweep = match start_job(&msg, &s, &r) {
        Ok(x) => x,
        Err(m) => return send(*m),
    };
    let n = level_workers(&scope, sweep.total_levels());
    // A browser that cannot start workers from a worker runs the levels here.
    if let Some(crew) = (n >= 2).then(|| Crew::start(n).ok()).flatten() {
        return run_spread(&scope, id, &msg, sweep, crew, &cancelled).await;
    }
    send(sweep.started());
    loop {
        yield_now(&scope).await;
        if cancelled.borrow_mut().remove(&id) {
            return send(sweep.cancel());
        }
        if !sweep.step(&mut |m| post(&scope, &m)) {
            return;
        }
    }
}

/// Entry point of the worker binary.
pub fn start() {
    console_error_panic_hook::set_once();
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let cancelled: Rc<RefCell<BTreeSet<u32>>> = Rc::default();
    let scope2 = scope.clone();
    let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        // A search worker's messages (`search_tools`): one candidate per message, synchronous.
        if let Ok(msg) = crate::search_tools::ToSearch::from_json(&text) {
            let answer = crate::search_tools::answer(&msg);
            let _ = scope2.post_message(&JsValue::from_str(&answer.to_json()));
            return;
        }
        // A level worker's message (`level_pool`): one level, synchronous.
        if let Some(msg) = ToLevel::from_json(&text) {
            crate::level_pool::run_level(&msg, &mut |m| {
                let _ = scope2.post_message(&JsValue::from_str(&m.to_json()));
            });
            return;
        }
        match ToWorker::from_json(&text) {
            Ok(msg @ (ToWorker::Run { .. } | ToWorker::Predict { .. })) => {
                let id = match &msg {
                    ToWorker::Run { id, .. } | ToWorker::Predict { id, .. } => *id,
                    _ => 0,
                };
                wasm_bindgen_futures::spawn_local(run(scope2.clone(), id, msg, cancelled.clone()));
            }
            Ok(ToWorker::Cancel { id }) => {
                cancelled.borrow_mut().insert(id);
            }
            Ok(
                msg @ (ToWorker::ParseCommand { .. }
                | ToWorker::Commands { .. }
                | ToWorker::Catalog { .. }
                | ToWorker::Check { .. }
                | ToWorker::Import { .. }),
            ) => {
                if let Some(answer) = crate::command_tools::answer(&msg) {
                    post(&scope2, &answer);
                }
            }
            Err(message) => post(
                &scope2,
                &FromWorker::Error {
                    id: 0,
                    field: None,
                    message,
                },
            ),
        }
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    post(&scope, &FromWorker::Ready);
}
