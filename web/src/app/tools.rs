//! The page's side of the tools worker (wasm32 only): one Web Worker, started with the page, that
//! answers the page's questions needing core code the page binary does not link
//! (`command_tools`): the form's check and capacity card, the catalogs' names, and the vLLM
//! command box, and the comparison's import of measured results. Messages posted before the worker
//! says `ready` wait in order; listeners get every answer. At most one `Check` and one `Import` are
//! in flight: while one runs, only the newest request of its kind waits, so typing does not queue
//! a check or an import per keystroke. An import answer reaches its callback only when it
//! answers the newest request ([`request_import`]).

use crate::browser;
use crate::compare_ui::import_view::{ImportFailure, ImportView, SourceFile};
use crate::core_api::compare::ColumnMapping;
use crate::protocol::{FromWorker, ToWorker};
use std::cell::{Cell, RefCell};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

type Listener = Box<dyn Fn(&FromWorker)>;
/// Receives the answer to import request `generation` (always the newest one asked for).
type ImportCallback = Box<dyn Fn(u64, Result<ImportView, ImportFailure>)>;
/// One import request: its generation, the files and the column mapping.
type ImportRequest = (u64, Vec<SourceFile>, ColumnMapping);

thread_local! {
    static TOOLS: RefCell<Option<Worker>> = const { RefCell::new(None) };
    static READY: Cell<bool> = const { Cell::new(false) };
    /// Requests posted before the worker said `ready` (sent in order once it does).
    static PENDING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static LISTENERS: RefCell<Vec<Listener>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
    /// The id of the `Check` in flight, if any.
    static CHECK_IN_FLIGHT: Cell<Option<u32>> = const { Cell::new(None) };
    /// The newest scenario JSON waiting for the check in flight to answer.
    static CHECK_NEXT: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The generation of the newest import asked for (`request_import`).
    static IMPORT_WANTED: Cell<u64> = const { Cell::new(0) };
    /// The message id and generation of the `Import` in flight, if any.
    static IMPORT_IN_FLIGHT: Cell<Option<(u32, u64)>> = const { Cell::new(None) };
    /// The newest import request waiting for the one in flight to answer.
    static IMPORT_NEXT: RefCell<Option<ImportRequest>> = const { RefCell::new(None) };
    static IMPORT_CALLBACK: RefCell<Option<ImportCallback>> = const { RefCell::new(None) };
}

pub(crate) fn next_id() -> u32 {
    NEXT_ID.with(|n| {
        n.set(n.get().wrapping_add(1));
        n.get()
    })
}

/// Starts the tools worker (once); an error says why it could not start.
pub(crate) fn start() -> Result<(), String> {
    if TOOLS.with(|w| w.borrow().is_some()) {
        return Ok(());
    }
    let worker = browser::spawn_worker()?;
    let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(t) = ev.data().as_string() else {
            return;
        };
        let Ok(msg) = FromWorker::from_json(&t) else {
            return;
        };
        if let FromWorker::Ready = msg {
            READY.with(|r| r.set(true));
            let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            TOOLS.with(|w| {
                if let Some(w) = w.borrow().as_ref() {
                    for m in pending {
                        let _ = w.post_message(&JsValue::from_str(&m));
                    }
                }
            });
        }
        if let FromWorker::Checked { id, .. } = &msg {
            if CHECK_IN_FLIGHT.with(|c| c.get()) == Some(*id) {
                CHECK_IN_FLIGHT.with(|c| c.set(None));
            }
        }
        if let FromWorker::Imported { id, result } = msg {
            let generation = match IMPORT_IN_FLIGHT.with(|c| c.get()) {
                Some((i, g)) if i == id => {
                    IMPORT_IN_FLIGHT.with(|c| c.set(None));
                    Some(g)
                }
                _ => None,
            };
            match IMPORT_NEXT.with(|n| n.borrow_mut().take()) {
                // A newer request waited: this answer is stale.
                Some(next) => send_import(next),
                None => {
                    if let Some(g) = generation.filter(|g| *g == IMPORT_WANTED.with(|w| w.get())) {
                        IMPORT_CALLBACK.with(|c| {
                            if let Some(f) = c.borrow().as_ref() {
                                f(g, (*result).map(crate::protocol::WireImport::into_view));
                            }
                        });
                    }
                }
            }
            return;
        }
        LISTENERS.with(|l| {
            for f in l.borrow().iter() {
                f(&msg);
            }
        });
        if CHECK_IN_FLIGHT.with(|c| c.get()).is_none() {
            if let Some(next) = CHECK_NEXT.with(|n| n.borrow_mut().take()) {
                send_check(next);
            }
        }
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    TOOLS.with(|w| *w.borrow_mut() = Some(worker));
    Ok(())
}

/// Every answer of the tools worker goes to `f` (listeners live as long as the page).
pub(crate) fn listen(f: impl Fn(&FromWorker) + 'static) {
    LISTENERS.with(|l| l.borrow_mut().push(Box::new(f)));
}

pub(crate) fn post(msg: &ToWorker) {
    let text = msg.to_json();
    let sent = READY.with(|r| r.get())
        && TOOLS.with(|w| {
            w.borrow()
                .as_ref()
                .is_some_and(|w| w.post_message(&JsValue::from_str(&text)).is_ok())
        });
    if !sent {
        PENDING.with(|p| p.borrow_mut().push(text));
    }
}

fn send_check(scenario: String) {
    let id = next_id();
    CHECK_IN_FLIGHT.with(|c| c.set(Some(id)));
    post(&ToWorker::Check { id, scenario });
}

/// Asks for the check of this scenario JSON: now, or after the check in flight answers (then
/// only the newest scenario asked for meanwhile is checked).
pub(crate) fn request_check(scenario: String) {
    if CHECK_IN_FLIGHT.with(|c| c.get()).is_some() {
        CHECK_NEXT.with(|n| *n.borrow_mut() = Some(scenario));
    } else {
        send_check(scenario);
    }
}

fn send_import((generation, files, mapping): ImportRequest) {
    let id = next_id();
    IMPORT_IN_FLIGHT.with(|c| c.set(Some((id, generation))));
    post(&ToWorker::Import { id, files, mapping });
}

/// Where import answers go (one callback: the comparison panel's).
pub(crate) fn on_import(f: impl Fn(u64, Result<ImportView, ImportFailure>) + 'static) {
    IMPORT_CALLBACK.with(|c| *c.borrow_mut() = Some(Box::new(f)));
}

/// Asks the worker to import `files` with `mapping`; returns the request's generation, which the
/// answer carries. Only the newest request is answered: one asked for while another is in flight
/// replaces any request still waiting.
pub(crate) fn request_import(files: Vec<SourceFile>, mapping: ColumnMapping) -> u64 {
    let generation = IMPORT_WANTED.with(|w| {
        w.set(w.get() + 1);
        w.get()
    });
    let req = (generation, files, mapping);
    if IMPORT_IN_FLIGHT.with(|c| c.get()).is_some() {
        IMPORT_NEXT.with(|n| *n.borrow_mut() = Some(req));
    } else {
        send_import(req);
    }
    generation
}

/// Forgets every import request (the input became empty): a late answer is dropped.
pub(crate) fn cancel_import() {
    IMPORT_WANTED.with(|w| w.set(w.get() + 1));
    IMPORT_NEXT.with(|n| *n.borrow_mut() = None);
}
