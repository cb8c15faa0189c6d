//! Pinned runs on the page (docs/web.md "Pinned runs"), wasm32 only: "Pin this run" keeps the
//! finished run's scenario and results; the charts overlay every pin's curves (`pins::overlay`);
//! the pins panel shows each pin's scenario diff against the form's scenario (`pins::diff`), its
//! output tok/s per level, and Remove. Pins travel in the link (`&p=`, `pins::with_pins`); a link's
//! pins are simulated again in a worker of their own (an instance of the worker binary, `run`
//! messages), which gives the same results as the run that was pinned.

use super::State;
use crate::browser;
use crate::core_api::{LevelResult, OperatingPoint, Scenario};
use crate::pins::{self, MAX_PINS};
use crate::protocol::{FromWorker, ToWorker};
use crate::table;
use leptos::prelude::*;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

/// One pinned run.
#[derive(Clone, Debug, PartialEq)]
pub struct PinRun {
    pub label: String,
    pub scenario: Scenario,
    /// The results (None while the pin is simulated again).
    pub rows: Option<Vec<LevelResult>>,
    pub op: Option<OperatingPoint>,
    /// The worker run id re-simulating it (0: not running).
    pub run_id: u32,
    pub status: String,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    static READY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static PENDING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static NEXT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Levels received per run id.
    static ROWS: RefCell<std::collections::BTreeMap<u32, Vec<LevelResult>>> = RefCell::new(Default::default());
}

fn post(text: String) {
    let sent = READY.with(|r| r.get())
        && WORKER.with(|w| {
            w.borrow()
                .as_ref()
                .is_some_and(|w| w.post_message(&JsValue::from_str(&text)).is_ok())
        });
    if !sent {
        PENDING.with(|p| p.borrow_mut().push(text));
    }
}

fn set_pin(st: State, id: u32, f: impl FnOnce(&mut PinRun)) {
    st.pins.update(|ps| {
        if let Some(p) = ps.iter_mut().find(|p| p.run_id == id) {
            f(p);
        }
    });
}

fn ensure_worker(st: State) -> Result<(), String> {
    if WORKER.with(|w| w.borrow().is_some()) {
        return Ok(());
    }
    let worker = browser::spawn_worker()?;
    let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let Ok(msg) = FromWorker::from_json(&text) else {
            return;
        };
        match msg {
            FromWorker::Ready => {
                READY.with(|r| r.set(true));
                let pending: Vec<String> = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
                for p in pending {
                    post(p);
                }
            }
            FromWorker::Level { id, result, .. } => {
                ROWS.with(|r| r.borrow_mut().entry(id).or_default().push(*result));
                let n = ROWS.with(|r| r.borrow().get(&id).map_or(0, Vec::len));
                set_pin(st, id, |p| {
                    p.status = format!("simulating again: {n} levels done")
                });
            }
            FromWorker::Done {
                id,
                operating_point,
                ..
            } => {
                let rows = ROWS
                    .with(|r| r.borrow_mut().remove(&id))
                    .unwrap_or_default();
                set_pin(st, id, |p| {
                    p.rows = Some(rows);
                    p.op = operating_point;
                    p.run_id = 0;
                    p.status = "simulated again from the link".into();
                });
            }
            FromWorker::Error { id, message, .. } => {
                ROWS.with(|r| r.borrow_mut().remove(&id));
                set_pin(st, id, |p| {
                    p.run_id = 0;
                    p.status = format!("could not run: {message}");
                });
            }
            _ => {}
        }
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    READY.with(|r| r.set(false));
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
    Ok(())
}

/// Loads a link's pins (the `p=` part of `frag`): unchanged pins are kept with their results;
/// others are simulated again. A fragment without `p=` (a search candidate's link, a link made
/// elsewhere) leaves the pins as they are, so runs can be compared across scenarios opened by
/// link; Remove takes a pin away. Returns the decoder's message for a damaged part.
pub(super) fn load_pins(st: State, frag: &str) -> Option<String> {
    let wanted = match pins::pins_part(frag).map(|c| pins::decode(&c)) {
        None => return None,
        Some(Ok(p)) => p,
        Some(Err(e)) => return Some(e),
    };
    let same = st.pins.with_untracked(|ps| {
        ps.len() == wanted.len()
            && ps
                .iter()
                .zip(&wanted)
                .all(|(p, (l, s))| p.label == *l && p.scenario == *s)
    });
    if same {
        return None;
    }
    let old = st.pins.get_untracked();
    let mut next = Vec::new();
    for (label, scenario) in wanted {
        if let Some(p) = old
            .iter()
            .find(|p| p.scenario == scenario && p.rows.is_some())
        {
            next.push(PinRun { label, ..p.clone() });
            continue;
        }
        if let Err(e) = ensure_worker(st) {
            return Some(e);
        }
        let id = NEXT.with(|n| {
            n.set(n.get() + 1);
            n.get()
        });
        post(
            ToWorker::Run {
                id,
                scenario: scenario.to_json(),
            }
            .to_json(),
        );
        next.push(PinRun {
            label,
            scenario,
            rows: None,
            op: None,
            run_id: id,
            status: "simulating again…".into(),
        });
    }
    st.pins.set(next);
    None
}

/// "Pin this run": the finished run's scenario and results.
pub(super) fn pin_button(st: State) -> impl IntoView {
    let can = move || {
        st.report.with(|r| r.is_some())
            && !st.stale.get()
            && st.results_for.with(|s| s.is_some())
            && st.pins.with(|p| p.len() < MAX_PINS)
    };
    let pin = move |_| {
        let Some(s) = st.results_for.get_untracked() else {
            return;
        };
        let n = st.pins.with_untracked(|p| p.len()) + 1;
        st.pins.update(|p| {
            p.push(PinRun {
                label: format!("pin {n}: {}", crate::form::scenario_label(&s)),
                scenario: s,
                rows: Some(st.rows.get_untracked()),
                op: st.op.get_untracked(),
                run_id: 0,
                status: "pinned".into(),
            })
        });
    };
    view! {
        <button class="btn small" id="pin-btn" disabled=move || !can()
            title="Keep this run's curves on the charts and compare its scenario with the next ones (at most 4; they travel in the link)"
            on:click=pin>"Pin this run"</button>
    }
}

/// The pins panel: each pin's diff against the form's scenario, its output tok/s, Remove.
pub(super) fn pins_panel(st: State) -> impl IntoView {
    let body = move || {
        let current = st.scenario.get().ok();
        st.pins
            .get()
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let diff = current
                    .as_ref()
                    .map(|c| pins::diff(&p.scenario, c))
                    .unwrap_or_default();
                let same = diff.is_empty();
                let rows = diff
                    .into_iter()
                    .map(|d| view! { <tr><td><code>{d.path}</code></td><td>{d.pinned}</td><td>{d.current}</td></tr> })
                    .collect_view();
                let levels = p
                    .rows
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| {
                        view! {
                            <li data-level=table::fmt_level(&l.level) data-value=l.output_tokens_per_s.map(|v| v.to_string()).unwrap_or_default()>
                                {format!("{}: {} output tok/s", table::fmt_level(&l.level), l.output_tokens_per_s.map(table::fmt_num).unwrap_or_else(|| "no value".into()))}
                            </li>
                        }
                    })
                    .collect_view();
                let remove = move |_| {
                    st.pins.update(|ps| {
                        if i < ps.len() {
                            ps.remove(i);
                        }
                    })
                };
                view! {
                    <div class="pin" data-pin=i.to_string()>
                        <div class="card-head">
                            <strong class="pin-label">{p.label.clone()}</strong>
                            <span class="muted pin-status">{p.status.clone()}</span>
                            <button class="btn small pin-remove" on:click=remove>"Remove"</button>
                        </div>
                        {if same {
                            view! { <p class="muted pin-same">"Same scenario as the form."</p> }.into_any()
                        } else {
                            view! {
                                <table class="results pin-diff">
                                    <thead><tr><th>"field"</th><th>"pinned"</th><th>"form"</th></tr></thead>
                                    <tbody>{rows}</tbody>
                                </table>
                            }.into_any()
                        }}
                        <ul class="pin-levels">{levels}</ul>
                    </div>
                }
            })
            .collect_view()
    };
    view! {
        <Show when=move || st.pins.with(|p| !p.is_empty())>
            <section class="card" id="pins-card" aria-labelledby="pins-title">
                <div class="card-head"><h2 id="pins-title">"Pinned runs"</h2></div>
                <p class="hint">"Each pin's curves are dashed on the charts. The table lists the scenario fields that differ from the form's."</p>
                <div id="pins">{body}</div>
            </section>
        </Show>
    }
}
