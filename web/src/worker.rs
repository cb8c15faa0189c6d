//! The sweep worker's runtime (wasm32, inside a dedicated Web Worker). Receives
//! [`ToWorker`] messages, runs a sweep or a comparison's prediction level by level with
//! `protocol::SweepRun`, and posts
//! [`FromWorker`] messages. Between levels it yields to the event loop so `Cancel` is seen.

use crate::protocol::{prepare_job, start_job, FromWorker, ToWorker};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

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

/// Runs a `Run` (sweep) or `Predict` (comparison) request level by level.
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
                | ToWorker::Check { .. }),
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
