//! The page (Leptos, client-side rendered). State lives in a few signals; the scenario is a
//! [`Form`] of text fields validated on every change; capacity is computed on the main thread
//! (it is instant), sweeps run in the worker (see [`crate::protocol`]).

use crate::browser;
use crate::charts::{self, Theme};
use crate::core_api::dtype::KvCacheDtype;
use crate::core_api::{self, CapacityView, Level, LevelResult, OperatingPoint, Recent, Scenario};
use crate::form::{
    DistForm, DistKeys, FieldErrors, Form, ARRIVALS, CONTENTS, DIST_KEYS, DIST_KINDS, PRESETS,
    WEIGHT_PRECISIONS,
};
use crate::form_engine::{Control, ENGINE_ARGS};
use crate::protocol::{sweep_fraction, FromWorker, ToWorker};
use crate::table::{self, fmt_gib, fmt_num, group_thousands};
use leptos::prelude::*;
use std::cell::{Cell, RefCell};
use std::time::Duration;
use wasm_bindgen::prelude::*;

mod command_ui;
mod offload_ui;
mod pins_ui;
mod search_ui;
mod spec_ui;
pub(crate) mod tools;
mod topology_ui;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

const RECENT_KEY: &str = "servesim.recent.v1";
const THEME_KEY: &str = "servesim.theme";
/// A new history entry at most this often while the user edits; edits in between replace it.
const HISTORY_PUSH_MS: f64 = 1500.0;
/// How long a cancelled worker may take to acknowledge before it is terminated.
const CANCEL_GRACE_MS: u64 = 400;

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    static PENDING: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The worker has said `ready` (messages posted before that are lost, so they wait).
    static READY: Cell<bool> = const { Cell::new(false) };
    static LAST_PUSH: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
    /// When the current worker last sent anything (or the run started), for the stall check.
    static LAST_HEARD: Cell<f64> = const { Cell::new(0.0) };
    /// Which worker is current: events of a terminated one are ignored.
    static WORKER_GEN: Cell<u32> = const { Cell::new(0) };
}

#[derive(Clone, Debug, PartialEq)]
enum RunStatus {
    Idle,
    Running {
        done: usize,
        levels: usize,
    },
    /// Every level ran; the SLA operating point is being refined (at most this many runs).
    Refining(usize),
    Cancelling,
    Done,
    Cancelled,
    Failed(String),
}

/// A `Checked` answer of the tools worker (`ToWorker::Check`).
#[derive(Clone, Debug, PartialEq)]
struct Checked {
    /// The scenario JSON it answers.
    scenario: String,
    /// The core's first error: JSON path, message.
    error: Option<(String, String)>,
    defaults: std::collections::BTreeMap<String, String>,
    capacity: Option<Result<CapacityView, String>>,
}

/// The catalogs' names (`ToWorker::Catalog`).
#[derive(Clone, Debug, PartialEq)]
struct Catalog {
    models: Vec<String>,
    gpus: Vec<core_api::GpuEntry>,
}

#[derive(Clone, Copy)]
struct State {
    form: RwSignal<Form>,
    scenario: Memo<Result<Scenario, FieldErrors>>,
    errors: Memo<FieldErrors>,
    defaults: Memo<std::collections::BTreeMap<String, String>>,
    /// The scenario the form gives and its canonical JSON (the form's own parse only).
    candidate: Memo<Result<(Scenario, String), FieldErrors>>,
    /// The tools worker's latest check answer.
    checked: RwSignal<Option<Checked>>,
    /// The catalogs' names for the pickers, from the tools worker.
    catalog: RwSignal<Option<Catalog>>,
    /// Why the tools worker could not start.
    tools_error: RwSignal<Option<String>>,
    run_id: RwSignal<u32>,
    status: RwSignal<RunStatus>,
    rows: RwSignal<Vec<LevelResult>>,
    op: RwSignal<Option<OperatingPoint>>,
    /// The operating point refined by simulation (or why the refinement failed).
    refined: RwSignal<Option<Result<crate::core_api::sla_refine::Refinement, String>>>,
    /// Set while the worker refines (its step budget).
    refining: RwSignal<Option<usize>>,
    /// The levels of the current run (sorted, as the worker runs them).
    levels: RwSignal<Vec<Level>>,
    /// The core's `SweepReport` JSON and the CSV of the last finished (or cancelled) run.
    report: RwSignal<Option<(String, String)>>,
    results_for: RwSignal<Option<Scenario>>,
    /// The results on screen are for another scenario than the form's (or the form is invalid).
    stale: Memo<bool>,
    notice: RwSignal<Option<String>>,
    /// A link that could not be opened: its fragment (kept in the address bar and offered for
    /// editing until the form changes) and the decoder's message.
    damaged: RwSignal<Option<(String, String)>>,
    /// The TTFT and ITL charts use a logarithmic y axis.
    log_latency: RwSignal<bool>,
    theme: RwSignal<String>,
    recent: RwSignal<Vec<Recent>>,
    started_ms: RwSignal<f64>,
    elapsed_ms: RwSignal<Option<f64>>,
    /// How far the running level has got (0..=1), from the worker's `LevelProgress`.
    level_frac: RwSignal<f64>,
    compare: crate::compare_ui::CompareState,
    /// Pinned runs (`pins_ui`), overlaid on the charts and carried in the link.
    pins: RwSignal<Vec<pins_ui::PinRun>>,
}

/// Mounts the page.
pub fn start() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
    // The loading indicator of index.html has done its job.
    if let Some(el) = browser::window()
        .document()
        .and_then(|d| d.get_element_by_id("loading"))
    {
        el.remove();
    }
}

fn load_recent() -> Vec<Recent> {
    browser::storage_get(RECENT_KEY)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The message shown for a link that could not be opened.
fn damaged_notice(e: &str) -> String {
    format!(
        "This link could not be opened: {e}. Showing the default scenario until the link is fixed \
         (edit it below) or the form is changed."
    )
}

/// The scenario in the URL, or the default when the link is damaged (then `damaged` holds the
/// fragment and the decoder's message).
fn initial_form(damaged: &mut Option<(String, String)>) -> Form {
    let hash = browser::hash();
    match core_api::scenario_from_fragment(&crate::compare_ui::link::scenario_part(&hash)) {
        Ok(Some(s)) => Form::from_scenario(&s),
        Ok(None) => Form::from_scenario(&Scenario::default_scenario()),
        Err(e) => {
            *damaged = Some((hash, e.to_string()));
            Form::from_scenario(&Scenario::default_scenario())
        }
    }
}

fn post_to_worker(msg: &ToWorker) {
    let text = msg.to_json();
    let sent = READY.with(|r| r.get())
        && WORKER.with(|w| {
            w.borrow()
                .as_ref()
                .map(|w| w.post_message(&JsValue::from_str(&text)).is_ok())
                .unwrap_or(false)
        });
    if !sent {
        PENDING.with(|p| *p.borrow_mut() = Some(text));
    }
}

fn spawn_worker(st: State) {
    let worker = match browser::spawn_worker() {
        Ok(w) => w,
        Err(e) => {
            st.status.set(RunStatus::Failed(e));
            return;
        }
    };
    let gen = WORKER_GEN.with(|g| {
        g.set(g.get().wrapping_add(1));
        g.get()
    });
    let current = move || WORKER_GEN.with(|g| g.get()) == gen;
    let onerror = Closure::<dyn Fn(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
        ev.prevent_default();
        if current() {
            let what = ev.message();
            let what = if what.is_empty() {
                "an error".to_string()
            } else {
                what
            };
            worker_lost(st, &format!("stopped with {what}"));
        }
    });
    worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
    onerror.forget();
    let onmessageerror = Closure::<dyn Fn(MessageEvent)>::new(move |_: MessageEvent| {
        if current() {
            worker_lost(st, "sent a message that could not be read");
        }
    });
    worker.set_onmessageerror(Some(onmessageerror.as_ref().unchecked_ref()));
    onmessageerror.forget();
    let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        if !current() {
            return;
        }
        LAST_HEARD.with(|l| l.set(browser::now_ms()));
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let msg = match FromWorker::from_json(&text) {
            Ok(m) => m,
            Err(e) => return st.status.set(RunStatus::Failed(e)),
        };
        if msg == FromWorker::Ready {
            READY.with(|r| r.set(true));
            // Messages posted before the worker's wasm was loaded would be lost: send them now.
            if let Some(p) = PENDING.with(|p| p.borrow_mut().take()) {
                WORKER.with(|w| {
                    if let Some(w) = w.borrow().as_ref() {
                        let _ = w.post_message(&JsValue::from_str(&p));
                    }
                });
            }
            return;
        }
        if msg.run_id() != Some(st.run_id.get_untracked()) {
            return; // a late message from a run that was cancelled
        }
        match msg {
            FromWorker::Started { levels, .. } => {
                if st.status.get_untracked() != RunStatus::Cancelling {
                    st.status.set(RunStatus::Running {
                        done: 0,
                        levels: levels.len(),
                    });
                }
                st.levels.set(levels);
            }
            FromWorker::Progress { index, levels, .. } => {
                st.level_frac.set(0.0);
                if st.status.get_untracked() != RunStatus::Cancelling {
                    st.status.set(RunStatus::Running {
                        done: index,
                        levels,
                    })
                }
            }
            FromWorker::LevelProgress { fraction, .. } => st.level_frac.set(fraction),
            FromWorker::Level { result, .. } => {
                st.level_frac.set(1.0);
                st.rows.update(|r| r.push(*result))
            }
            FromWorker::Refining { max_steps, .. } => {
                st.refining.set(Some(max_steps));
                if st.status.get_untracked() != RunStatus::Cancelling {
                    st.status.set(RunStatus::Refining(max_steps));
                }
            }
            FromWorker::Done {
                operating_point,
                refined,
                refine_error,
                report,
                csv,
                ..
            } => {
                st.refining.set(None);
                st.refined.set(refined.map(Ok).or(refine_error.map(Err)));
                st.op.set(operating_point);
                st.report.set(Some((report, csv)));
                st.status.set(RunStatus::Done);
                st.elapsed_ms
                    .set(Some(browser::now_ms() - st.started_ms.get_untracked()));
            }
            FromWorker::Cancelled { report, csv, .. } => {
                st.report.set(report.zip(csv));
                st.status.set(RunStatus::Cancelled)
            }
            FromWorker::Error { message, .. } => st.status.set(RunStatus::Failed(message)),
            // Answers to the comparison's `Predict` and to the command box (each has its own
            // worker instance).
            FromWorker::Ready
            | FromWorker::Predicted { .. }
            | FromWorker::Parsed { .. }
            | FromWorker::Commands { .. }
            | FromWorker::Catalog { .. }
            | FromWorker::Checked { .. }
            | FromWorker::Imported { .. } => {}
        }
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    READY.with(|r| r.set(false));
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
}

/// The worker died (an uncaught error such as a wasm trap when it runs out of memory, an
/// unreadable message, or no progress for `protocol::DEFAULT_STALL_MS`): a running sweep fails with what to
/// change, the worker is terminated and a fresh one started so the next Run works.
fn worker_lost(st: State, what: &str) {
    WORKER.with(|w| {
        if let Some(w) = w.borrow_mut().take() {
            w.terminate();
        }
    });
    PENDING.with(|p| *p.borrow_mut() = None);
    READY.with(|r| r.set(false));
    let status = st.status.get_untracked();
    if matches!(
        status,
        RunStatus::Running { .. } | RunStatus::Refining(_) | RunStatus::Cancelling
    ) {
        // Late messages of the dead run (none should come) are ignored from here on.
        st.run_id.update(|id| *id += 1);
        let at = match status {
            RunStatus::Running { done, levels } if levels > 0 => {
                let l = st.levels.with(|l| l.get(done).map(table::fmt_level));
                format!(
                    " during level {} of {levels}{}",
                    done + 1,
                    l.map(|l| format!(" ({l})")).unwrap_or_default()
                )
            }
            _ => String::new(),
        };
        st.status
            .set(RunStatus::Failed(worker_lost_message(what, &at)));
    }
    spawn_worker(st);
}

/// The run status after the worker died: what happened and what to change.
fn worker_lost_message(what: &str, at: &str) -> String {
    format!(
        "the sweep worker {what}{at}. This usually means the run needed more memory than the \
         browser gives a worker: use fewer or lower levels, fewer requests per level or a shorter \
         simulated duration, then Run again (a fresh worker has been started)."
    )
}

fn start_run(st: State) {
    let Ok(s) = st.scenario.get_untracked() else {
        return;
    };
    let id = st.run_id.get_untracked() + 1;
    st.run_id.set(id);
    st.rows.set(Vec::new());
    st.op.set(None);
    st.refined.set(None);
    st.refining.set(None);
    st.report.set(None);
    st.levels.set(Vec::new());
    st.elapsed_ms.set(None);
    st.started_ms.set(browser::now_ms());
    st.results_for.set(Some(s.clone()));
    st.status.set(RunStatus::Running { done: 0, levels: 0 });
    LAST_HEARD.with(|l| l.set(browser::now_ms()));
    // Only scenarios a link can carry go to the recent list (it stores their links).
    if let core_api::ShareLink::Fits(fragment) = core_api::share_link(&s) {
        st.recent.update(|l| {
            core_api::push_recent(
                l,
                Recent {
                    label: crate::form::scenario_label(&s),
                    fragment,
                },
            )
        });
    }
    if let Ok(t) = serde_json::to_string(&st.recent.get_untracked()) {
        browser::storage_set(RECENT_KEY, &t);
    }
    post_to_worker(&ToWorker::Run {
        id,
        scenario: s.to_json(),
    });
}

fn cancel_run(st: State) {
    let id = st.run_id.get_untracked();
    st.status.set(RunStatus::Cancelling);
    post_to_worker(&ToWorker::Cancel { id });
    // A level can take long; if the worker does not answer between levels, stop it outright.
    set_timeout(
        move || {
            if st.run_id.get_untracked() == id && st.status.get_untracked() == RunStatus::Cancelling
            {
                WORKER.with(|w| {
                    if let Some(w) = w.borrow_mut().take() {
                        w.terminate();
                    }
                });
                PENDING.with(|p| *p.borrow_mut() = None);
                st.status.set(RunStatus::Cancelled);
                spawn_worker(st);
            }
        },
        Duration::from_millis(CANCEL_GRACE_MS),
    );
}

fn load_fragment(st: State, frag: &str) {
    if let Some(e) = pins_ui::load_pins(st, frag) {
        st.notice.set(Some(e));
    }
    match core_api::scenario_from_fragment(&crate::compare_ui::link::scenario_part(frag)) {
        Ok(Some(s)) => {
            let f = Form::from_scenario(&s);
            if f != st.form.get_untracked() {
                st.form.set(f);
            }
            st.notice.set(None);
            st.damaged.set(None);
        }
        Ok(None) => {}
        Err(e) => {
            st.notice.set(Some(damaged_notice(&e.to_string())));
            st.damaged.set(Some((frag.to_string(), e.to_string())));
            st.form
                .set(Form::from_scenario(&Scenario::default_scenario()));
        }
    }
}

/// The fragment of a link as pasted: a whole URL (`…#s=v1.…`), `#s=…` or `s=…`.
fn fragment_of_pasted(text: &str) -> String {
    let t = text.trim();
    match t.split_once('#') {
        Some((_, f)) => f.to_string(),
        None => t.to_string(),
    }
}

/// True while a damaged link is shown and the form is still the default it fell back to: the
/// address bar keeps the damaged link so the user can fix it.
fn holding_damaged_link(st: State) -> bool {
    st.damaged.with_untracked(|d| d.is_some())
        && st
            .form
            .with_untracked(|f| *f == Form::from_scenario(&Scenario::default_scenario()))
}

fn effective_theme(choice: &str) -> Theme {
    match choice {
        "dark" => Theme::DARK,
        "light" => Theme::LIGHT,
        _ if browser::prefers_dark() => Theme::DARK,
        _ => Theme::LIGHT,
    }
}

#[component]
fn App() -> impl IntoView {
    let mut damaged0 = None;
    let form = RwSignal::new(initial_form(&mut damaged0));
    let notice0 = damaged0
        .as_ref()
        .map(|(_, e): &(String, String)| damaged_notice(e));
    // The core's check (resolve, capacity) runs in the tools worker (`tools`, `command_tools`):
    // the form's own parse is immediate; the core's errors and the capacity card arrive for the
    // scenario JSON they were computed from, and count only while the form still gives it.
    let checked = RwSignal::new(None::<Checked>);
    let catalog = RwSignal::new(None::<Catalog>);
    let tools_error = RwSignal::new(tools::start().err());
    tools::listen(move |msg| match msg {
        FromWorker::Checked {
            scenario,
            error,
            defaults,
            capacity,
            ..
        } => checked.set(Some(Checked {
            scenario: scenario.clone(),
            error: error.clone(),
            defaults: defaults.iter().cloned().collect(),
            capacity: capacity.clone(),
        })),
        FromWorker::Catalog { models, gpus, .. } => catalog.set(Some(Catalog {
            models: models.clone(),
            gpus: gpus.clone(),
        })),
        _ => {}
    });
    tools::post(&ToWorker::Catalog {
        id: tools::next_id(),
    });
    let candidate = Memo::new(move |_| {
        form.with(|f| {
            f.to_scenario().map(|s| {
                let json = s.to_json();
                (s, json)
            })
        })
    });
    Effect::new(move |_| {
        if let Ok((_, json)) = candidate.get() {
            tools::request_check(json);
        }
    });
    let scenario = Memo::new(move |_| {
        candidate.with(|c| {
            let (s, json) = c.as_ref().map_err(Clone::clone)?;
            checked.with(|k| match k {
                Some(k) if k.scenario == *json => match &k.error {
                    Some((path, message)) => {
                        let mut e = FieldErrors::new();
                        e.insert(crate::form_keys::form_key(s, path), message.clone());
                        Err(e)
                    }
                    None => Ok(s.clone()),
                },
                _ => Ok(s.clone()),
            })
        })
    });
    let errors = Memo::new(move |_| scenario.with(|s| s.clone().err().unwrap_or_default()));
    // vLLM's defaults for blank engine fields, shown as placeholders (from the latest check).
    let defaults = Memo::new(move |_| {
        checked.with(|k| k.as_ref().map(|k| k.defaults.clone()).unwrap_or_default())
    });
    let results_for = RwSignal::new(None::<Scenario>);
    let stale = Memo::new(move |_| {
        results_for.with(|r| {
            r.as_ref()
                .is_some_and(|r| scenario.with(|s| s.as_ref().ok() != Some(r)))
        })
    });
    let theme0 = browser::storage_get(THEME_KEY).unwrap_or_else(|| "auto".into());
    browser::apply_theme(&theme0);
    let st = State {
        form,
        scenario,
        errors,
        defaults,
        candidate,
        checked,
        catalog,
        tools_error,
        run_id: RwSignal::new(0),
        status: RwSignal::new(RunStatus::Idle),
        rows: RwSignal::new(Vec::new()),
        op: RwSignal::new(None),
        refined: RwSignal::new(None),
        refining: RwSignal::new(None),
        levels: RwSignal::new(Vec::new()),
        report: RwSignal::new(None),
        results_for,
        stale,
        notice: RwSignal::new(notice0),
        damaged: RwSignal::new(damaged0),
        log_latency: RwSignal::new(false),
        theme: RwSignal::new(theme0),
        recent: RwSignal::new(load_recent()),
        started_ms: RwSignal::new(0.0),
        elapsed_ms: RwSignal::new(None),
        level_frac: RwSignal::new(0.0),
        compare: crate::compare_ui::CompareState::new(),
        pins: RwSignal::new(Vec::new()),
    };
    spawn_worker(st);
    // A link's pinned runs (`&p=`) are simulated again.
    if let Some(e) = pins_ui::load_pins(st, &browser::hash()) {
        st.notice.set(Some(e));
    }
    // A running sweep whose worker has gone silent is reported and the worker replaced
    // (`protocol::DEFAULT_STALL_MS`, or `?stall_ms=N` in the page's address).
    let stall_ms = crate::protocol::stall_ms_from_query(
        &browser::window().location().search().unwrap_or_default(),
    );
    set_interval(
        move || {
            // Refining runs up to `k` levels without progress messages: allow each the time.
            let limit = match st.status.get_untracked() {
                RunStatus::Running { .. } => Some(stall_ms),
                RunStatus::Refining(k) => Some(stall_ms * (k as f64 + 1.0)),
                _ => None,
            };
            let silent = browser::now_ms() - LAST_HEARD.with(|l| l.get());
            if limit.is_some_and(|l| silent > l) {
                worker_lost(
                    st,
                    &format!(
                        "sent no progress for {}",
                        crate::protocol::fmt_stall(stall_ms)
                    ),
                );
            }
        },
        Duration::from_millis((stall_ms / 4.0).clamp(100.0, 1000.0) as u64),
    );

    // The URL fragment follows the scenario; a damaged link stays until the form changes.
    Effect::new(move |prev: Option<()>| {
        if let Ok(s) = scenario.get() {
            if holding_damaged_link(st) {
                return;
            }
            // A scenario the link cannot carry (a large trace) leaves no fragment: a link that
            // cannot be reopened is never made (the Copy link card offers the file instead).
            let frag = match core_api::share_link(&s) {
                core_api::ShareLink::Fits(f) => {
                    let pinned: Vec<(String, Scenario)> = st.pins.with(|p| {
                        p.iter()
                            .map(|x| (x.label.clone(), x.scenario.clone()))
                            .collect()
                    });
                    crate::pins::with_pins(&st.compare.fragment(&f), &pinned)
                }
                core_api::ShareLink::TooLarge { .. } => String::new(),
            };
            if frag != browser::hash() {
                let now = browser::now_ms();
                let push = prev.is_some() && now - LAST_PUSH.with(|l| l.get()) > HISTORY_PUSH_MS;
                if push {
                    LAST_PUSH.with(|l| l.set(now));
                }
                browser::set_hash(&frag, push);
            }
        }
    });
    // Back/Forward and links pasted into the address bar.
    for event in ["popstate", "hashchange"] {
        let cb = Closure::<dyn Fn()>::new(move || load_fragment(st, &browser::hash()));
        let _ =
            browser::window().add_event_listener_with_callback(event, cb.as_ref().unchecked_ref());
        cb.forget();
    }

    view! {
        <header class="topbar">
            <div class="brand">
                <h1>"ServeSim"</h1>
                <span class="tagline">"vLLM capacity and serving simulator"</span>
            </div>
            <div class="top-actions">
                <RecentMenu st=st/>
                <CopyLink st=st/>
                <ThemeToggle st=st/>
            </div>
        </header>
        <Show when=move || st.notice.get().is_some()>
            <div class="banner error" id="notice" role="alert">
                <span>{move || st.notice.get().unwrap_or_default()}</span>
                <button class="link-btn" on:click=move |_| { st.notice.set(None); st.damaged.set(None); } aria-label="Dismiss">"Dismiss"</button>
            </div>
        </Show>
        <DamagedLink st=st/>
        <main class="layout">
            <ScenarioPanel st=st/>
            <section class="results-col">
                <CapacityCard st=st/>
                <RunPanel st=st/>
                <StaleBanner st=st/>
                <ResultsTable st=st/>
                <Charts st=st/>
                {pins_ui::pins_panel(st)}
                {search_ui::search_panel(st)}
                <crate::compare_ui::ComparePanel compare=st.compare
                    current=Signal::derive(move || st.scenario.get().ok())/>
            </section>
        </main>
        <footer class="foot">
            "Numbers trace to formulas in the project's docs/. Runs entirely in your browser; nothing is uploaded."
        </footer>
    }
}

/// A link that could not be opened, for editing: its text and the decoder's message; "Open"
/// tries the edited text (a whole URL or just its fragment).
#[component]
fn DamagedLink(st: State) -> impl IntoView {
    let text = RwSignal::new(String::new());
    Effect::new(move |_| {
        if let Some((f, _)) = st.damaged.get() {
            text.set(f);
        }
    });
    let open = move |_| {
        let frag = fragment_of_pasted(&text.get_untracked());
        load_fragment(st, &frag);
        if st.damaged.with_untracked(|d| d.is_none()) {
            browser::set_hash(&frag, true);
        }
    };
    view! {
        <Show when=move || st.damaged.with(|d| d.is_some())>
            <div class="banner damaged" id="damaged-box">
                <label for="damaged-link">"The link as opened (fix it and press Open):"</label>
                <textarea id="damaged-link" rows="2" spellcheck="false"
                    prop:value=move || text.get()
                    on:input=move |ev| text.set(event_target_value(&ev))></textarea>
                <div class="field-error" id="damaged-error" role="alert">{move || st.damaged.with(|d| d.as_ref().map(|d| d.1.clone()))}</div>
                <button class="btn small" id="open-damaged" on:click=open>"Open"</button>
            </div>
        </Show>
    }
}

/// Shown when the results on screen belong to another scenario than the form's.
#[component]
fn StaleBanner(st: State) -> impl IntoView {
    let running = move || {
        matches!(
            st.status.get(),
            RunStatus::Running { .. } | RunStatus::Refining(_) | RunStatus::Cancelling
        )
    };
    view! {
        <Show when=move || st.stale.get()>
            <div class="banner warn stale-banner" id="stale-banner" role="status">
                <span>"The results below are for the previous scenario: the form has changed since they ran."</span>
                <button class="btn small primary" id="rerun-btn"
                    disabled=move || running() || st.scenario.with(|s| s.is_err())
                    on:click=move |_| start_run(st)>"Run again"</button>
            </div>
        </Show>
    }
}

#[component]
fn ThemeToggle(st: State) -> impl IntoView {
    view! {
        <label class="inline">
            <span class="sr-only">"Theme"</span>
            <select id="theme" aria-label="Theme"
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    browser::apply_theme(&v);
                    browser::storage_set(THEME_KEY, &v);
                    st.theme.set(v);
                }
                prop:value=move || st.theme.get()>
                <option value="auto">"Theme: system"</option>
                <option value="light">"Theme: light"</option>
                <option value="dark">"Theme: dark"</option>
            </select>
        </label>
    }
}

#[component]
fn CopyLink(st: State) -> impl IntoView {
    let copied = RwSignal::new(String::new());
    let on_click = move |_| {
        let url = format!("{}#{}", browser::base_url(), browser::hash());
        wasm_bindgen_futures::spawn_local(async move {
            let ok = browser::copy_text(&url).await;
            copied.set(if ok {
                "Link copied".into()
            } else {
                "Copy failed: copy the address bar".into()
            });
            set_timeout(
                move || copied.set(String::new()),
                Duration::from_millis(2500),
            );
        });
    };
    // None: no valid scenario; Some(Err(message)): the link cannot carry it.
    let link = Memo::new(move |_| {
        st.scenario.with(|s| {
            s.as_ref().ok().map(|s| match core_api::share_link(s) {
                core_api::ShareLink::Fits(_) => Ok(()),
                core_api::ShareLink::TooLarge {
                    encoded_bytes,
                    json_bytes,
                } => Err(core_api::link_too_large_message(encoded_bytes, json_bytes)),
            })
        })
    });
    let download = move |_| {
        if let Ok(s) = st.scenario.get_untracked() {
            browser::download_text(&s.to_json_pretty(), "scenario.json", "application/json");
        }
    };
    view! {
        <button id="copy-link" class="btn" on:click=on_click
            disabled=move || !matches!(link.get(), Some(Ok(())))
            title="Copy a link that opens this exact scenario">"Copy link"</button>
        <span class="copied" role="status" aria-live="polite">{move || copied.get()}</span>
        {move || match link.get() {
            Some(Err(m)) => view! {
                <div class="link-too-large" id="link-too-large" role="alert">
                    <span>{m}</span>" "
                    <button class="btn small" id="download-scenario-file" on:click=download>"Download scenario.json"</button>
                </div>
            }.into_any(),
            _ => ().into_any(),
        }}
    }
}

#[component]
fn RecentMenu(st: State) -> impl IntoView {
    view! {
        <label class="inline">
            <span class="sr-only">"Recent scenarios"</span>
            <select id="recent" aria-label="Recent scenarios"
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    if !v.is_empty() {
                        load_fragment(st, &v);
                    }
                }
                prop:value="">
                <option value="">{move || format!("Recent scenarios ({})", st.recent.with(|r| r.len()))}</option>
                {move || st.recent.get().into_iter().map(|r| view! {
                    <option value=r.fragment.clone()>{r.label.clone()}</option>
                }).collect_view()}
            </select>
        </label>
    }
}

/// A labelled text input bound to one form field, with its error beside it.
fn field(
    st: State,
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    get: fn(&Form) -> &String,
    set: fn(&mut Form, String),
) -> impl IntoView {
    field_with(
        st,
        key,
        label.to_string(),
        unit,
        move |f| get(f).clone(),
        set,
    )
}

/// [`field`] with getter and setter closures (for nested fields such as distributions).
fn field_with(
    st: State,
    key: &'static str,
    label: String,
    unit: &'static str,
    get: impl Fn(&Form) -> String + Copy + Send + Sync + 'static,
    set: impl Fn(&mut Form, String) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let id = format!("f-{key}");
    let err_id = format!("e-{key}");
    let err = move || st.errors.with(|e| e.get(key).cloned());
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for=id.clone()>{label}</label>
            <div class="input-row">
                <input id=id type="text" autocomplete="off" spellcheck="false"
                    list=(key == "model_id").then_some("model-list")
                    aria-invalid=move || if err().is_some() { "true" } else { "false" }
                    aria-describedby=err_id.clone()
                    placeholder=move || st.defaults.with(|d| d.get(key).map(|v| format!("default {v}")).unwrap_or_default())
                    prop:value=move || st.form.with(get)
                    on:input=move |ev| { let v = event_target_value(&ev); st.form.update(|f| set(f, v)) }/>
                {(!unit.is_empty()).then(|| view! { <span class="unit">{unit}</span> })}
            </div>
            <div class="field-error" id=err_id role="alert">{err}</div>
        </div>
    }
}

/// A labelled select bound to one form field; `options` are (value, label).
fn select(
    st: State,
    key: &'static str,
    label: &'static str,
    options: Vec<(String, String)>,
    get: impl Fn(&Form) -> String + Copy + Send + Sync + 'static,
    set: impl Fn(&mut Form, String) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let id = format!("f-{key}");
    let err = move || st.errors.with(|e| e.get(key).cloned());
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for=id.clone()>{label}</label>
            <select id=id
                prop:value=move || st.form.with(get)
                on:change=move |ev| { let v = event_target_value(&ev); st.form.update(|f| set(f, v)) }>
                {options.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
            </select>
            <div class="field-error" id=format!("e-{key}") role="alert">{err}</div>
        </div>
    }
}

/// The catalog GPU select: its options arrive from the tools worker (`ToWorker::Catalog`), so
/// each option carries its own `selected` state (a value set before the options exist would
/// not stick).
fn gpu_select(st: State) -> impl IntoView {
    let key = "gpu_id";
    let err = move || st.errors.with(|e| e.get(key).cloned());
    let options = move || {
        let current = st.form.with(|f| f.gpu_id.clone());
        let mut list: Vec<(String, String)> = st.catalog.with(|c| {
            c.as_ref()
                .map(|c| {
                    c.gpus
                        .iter()
                        .map(|g| (g.id.clone(), format!("{} ({:.0} GiB)", g.id, g.memory_gib)))
                        .collect()
                })
                .unwrap_or_default()
        });
        // Until the catalog arrives (or for an id it lacks) the form's value is still an option.
        if !list.iter().any(|(v, _)| *v == current) {
            list.insert(0, (current.clone(), current.clone()));
        }
        list.into_iter()
            .map(|(v, l)| {
                let sel = v == current;
                view! { <option value=v prop:selected=sel>{l}</option> }
            })
            .collect_view()
    };
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for="f-gpu_id">"GPU"</label>
            <select id="f-gpu_id"
                prop:value=move || st.form.with(|f| f.gpu_id.clone())
                on:change=move |ev| { let v = event_target_value(&ev); st.form.update(|f| f.gpu_id = v) }>
                {options}
            </select>
            <div class="field-error" id="e-gpu_id" role="alert">{err}</div>
        </div>
    }
}

fn opts(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(v, l)| (v.to_string(), l.to_string()))
        .collect()
}

/// The text fields of the engine arguments in `form_engine::ENGINE_ARGS`, in the table's order.
fn engine_text_fields(st: State) -> impl IntoView {
    ENGINE_ARGS
        .iter()
        .filter(|a| a.control == Control::Text)
        .map(|a| {
            let key = a.key;
            field_with(
                st,
                key,
                a.label.to_string(),
                a.unit,
                move |f| f.engine.get(key).cloned().unwrap_or_default(),
                move |f, v| f.engine.set(key, v),
            )
        })
        .collect_view()
}

/// The on/off selects of the engine arguments in `form_engine::ENGINE_ARGS`, in order.
fn engine_on_off_fields(st: State) -> impl IntoView {
    ENGINE_ARGS
        .iter()
        .filter_map(|a| match a.control {
            Control::OnOff { default } => Some((a, default)),
            Control::Text => None,
        })
        .map(|(a, default)| {
            let key = a.key;
            select(
                st,
                key,
                a.label,
                tri_state(default),
                move |f| f.engine.get(key).cloned().unwrap_or_default(),
                move |f, v| f.engine.set(key, v),
            )
        })
        .collect_view()
}

/// "" / "true" / "false" for a vLLM boolean flag.
fn tri_state(default_label: &str) -> Vec<(String, String)> {
    vec![
        (String::new(), format!("vLLM default ({default_label})")),
        ("true".into(), "on".into()),
        ("false".into(), "off".into()),
    ]
}

/// A length distribution: its type and the fields that type uses.
fn dist_editor(
    st: State,
    keys: DistKeys,
    title: &'static str,
    get: fn(&Form) -> &DistForm,
    get_mut: fn(&mut Form) -> &mut DistForm,
) -> impl IntoView {
    let kind = Memo::new(move |_| st.form.with(|f| get(f).kind.clone()));
    view! {
        <div class="dist">
            {select(st, keys.kind, title, opts(DIST_KINDS),
                move |f| get(f).kind.clone(), move |f, v| get_mut(f).kind = v)}
            <div class="grid2">
                {move || DistForm::fields(&kind.get()).iter().map(|(name, label)| {
                    let name: &'static str = name;
                    let (label, optional) = match label.strip_suffix('?') {
                        Some(l) => (l, true),
                        None => (*label, false),
                    };
                    let unit = if name.ends_with("ratio") { "×" } else { "tok" };
                    let text = if optional { format!("{label} (optional)") } else { label.to_string() };
                    field_with(st, keys.key(name), text, unit,
                        move |f| get(f).get(name).clone(), move |f, v| get_mut(f).set(name, v))
                }).collect_view()}
            </div>
        </div>
    }
}

#[component]
fn ScenarioPanel(st: State) -> impl IntoView {
    let models = move || {
        st.catalog
            .with(|c| c.as_ref().map(|c| c.models.clone()).unwrap_or_default())
    };
    let model_mode = Memo::new(move |_| st.form.with(|f| f.model_mode.clone()));
    let gpu_mode = Memo::new(move |_| st.form.with(|f| f.gpu_mode.clone()));
    let content = Memo::new(move |_| st.form.with(|f| f.content.clone()));
    let arrival = Memo::new(move |_| st.form.with(|f| f.arrival.clone()));
    let stop = Memo::new(move |_| st.form.with(|f| f.stop.clone()));
    let on_trace = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|l| l.get(0)) else {
            return;
        };
        let Ok(reader) = web_sys::FileReader::new() else {
            return;
        };
        let r2 = reader.clone();
        let onload = Closure::<dyn Fn()>::new(move || {
            if let Some(text) = r2.result().ok().and_then(|v| v.as_string()) {
                st.form.update(|f| f.trace = text);
            }
        });
        reader.set_onload(Some(onload.as_ref().unchecked_ref()));
        onload.forget();
        let _ = reader.read_as_text(&file);
    };
    let [kin, kout, kturn, kagout] = DIST_KEYS;
    let mut preset_opts: Vec<(String, String)> = PRESETS
        .iter()
        .map(|p| (p.key.to_string(), p.label.to_string()))
        .collect();
    preset_opts.push(("custom".into(), "Custom (edited below)".into()));
    let cudagraph_opts = {
        let mut v = vec![(String::new(), "vLLM default".to_string())];
        v.extend(
            [
                "FULL_AND_PIECEWISE",
                "FULL_DECODE_ONLY",
                "PIECEWISE",
                "FULL",
                "NONE",
            ]
            .iter()
            .map(|m| (m.to_string(), m.to_string())),
        );
        v
    };
    let arrival_label = move || match arrival.get().as_str() {
        "closed_loop" => "Clients, if no levels",
        "burst" => "Requests, if no levels",
        "trace" => "Rate, req/s (blank: trace's)",
        _ => "Rate, req/s, if no levels",
    };
    view! {
        <aside class="scenario" aria-label="Scenario">
            <h2>"Scenario"</h2>
            <command_ui::CommandBox st=st/>
            <fieldset>
                <legend>"Model"</legend>
                <div class="seg" role="radiogroup" aria-label="Model source">
                    <label><input type="radio" name="model_mode" value="catalog"
                        prop:checked=move || model_mode.get() == "catalog"
                        on:change=move |_| st.form.update(|f| f.model_mode = "catalog".into())/>"Catalog"</label>
                    <label><input type="radio" name="model_mode" value="custom" id="f-model_mode-config"
                        prop:checked=move || model_mode.get() == "custom"
                        on:change=move |_| st.form.update(|f| f.model_mode = "custom".into())/>"Paste config.json"</label>
                </div>
                <Show when=move || model_mode.get() == "catalog">
                    {field(st, "model_id", "Model (type to search)", "", |f| &f.model_id, |f, v| f.model_id = v)}
                </Show>
                <datalist id="model-list">
                    {move || models().into_iter().map(|m| view! { <option value=m></option> }).collect_view()}
                </datalist>
                <Show when=move || model_mode.get() == "custom">
                    {field(st, "custom_model_name", "Model name", "", |f| &f.custom_model_name, |f, v| f.custom_model_name = v)}
                    <div class="field" class:invalid=move || st.errors.with(|e| e.contains_key("config_json"))>
                        <label for="f-config_json">"Hugging Face config.json"</label>
                        <textarea id="f-config_json" rows="6" spellcheck="false"
                            placeholder="{ \"architectures\": [...], \"hidden_size\": ... }"
                            prop:value=move || st.form.with(|f| f.config_json.clone())
                            on:input=move |ev| { let v = event_target_value(&ev); st.form.update(|f| f.config_json = v) }></textarea>
                        <div class="field-error" id="e-config_json" role="alert">{move || st.errors.with(|e| e.get("config_json").cloned())}</div>
                    </div>
                </Show>
            </fieldset>
            <fieldset>
                <legend>"Hardware and parallelism"</legend>
                <div class="seg" role="radiogroup" aria-label="GPU source">
                    <label><input type="radio" name="gpu_mode" value="catalog"
                        prop:checked=move || gpu_mode.get() == "catalog"
                        on:change=move |_| st.form.update(|f| f.gpu_mode = "catalog".into())/>"Catalog GPU"</label>
                    <label><input type="radio" name="gpu_mode" value="custom"
                        prop:checked=move || gpu_mode.get() == "custom"
                        on:change=move |_| st.form.update(|f| f.gpu_mode = "custom".into())/>"Custom GPU"</label>
                </div>
                <Show when=move || gpu_mode.get() == "catalog">
                    {gpu_select(st)}
                </Show>
                <Show when=move || gpu_mode.get() == "custom">
                    {field(st, "custom_gpu_name", "Name", "", |f| &f.custom_gpu_name, |f, v| f.custom_gpu_name = v)}
                    <div class="grid2">
                        {field(st, "custom_gpu_memory_gib", "Memory vLLM sees", "GiB", |f| &f.custom_gpu_memory_gib, |f, v| f.custom_gpu_memory_gib = v)}
                        {field(st, "custom_gpu_bandwidth_tb_s", "HBM bandwidth", "TB/s", |f| &f.custom_gpu_bandwidth_tb_s, |f, v| f.custom_gpu_bandwidth_tb_s = v)}
                        {field(st, "custom_gpu_bf16_tflops", "BF16 dense", "TFLOPS", |f| &f.custom_gpu_bf16_tflops, |f, v| f.custom_gpu_bf16_tflops = v)}
                        {field(st, "custom_gpu_fp8_tflops", "FP8 dense (optional)", "TFLOPS", |f| &f.custom_gpu_fp8_tflops, |f, v| f.custom_gpu_fp8_tflops = v)}
                        {field(st, "custom_gpu_fp4_tflops", "FP4 dense (optional)", "TFLOPS", |f| &f.custom_gpu_fp4_tflops, |f, v| f.custom_gpu_fp4_tflops = v)}
                        {field(st, "custom_gpu_link_gb_s", "Scale-up link, one way", "GB/s", |f| &f.custom_gpu_link_gb_s, |f, v| f.custom_gpu_link_gb_s = v)}
                        {field(st, "custom_gpu_domain", "GPUs per scale-up domain", "", |f| &f.custom_gpu_domain, |f, v| f.custom_gpu_domain = v)}
                    </div>
                </Show>
                <div class="grid4">
                    {field(st, "gpus", "GPUs", "", |f| &f.gpus, |f, v| f.gpus = v)}
                    {field(st, "tp", "TP", "", |f| &f.tp, |f, v| f.tp = v)}
                    {field(st, "dp", "DP", "", |f| &f.dp, |f, v| f.dp = v)}
                    {field(st, "ep", "EP", "", |f| &f.ep, |f, v| f.ep = v)}
                </div>
                <div class="grid2">
                    {select(st, "enable_expert_parallel", "--enable-expert-parallel (DP lockstep)",
                        vec![
                            (String::new(), "not stated (independent DP ranks)".into()),
                            ("true".into(), "on (ep = tp x dp)".into()),
                            ("false".into(), "off (experts tensor-parallel)".into()),
                        ],
                        |f| f.enable_expert_parallel.clone(), |f, v| f.enable_expert_parallel = v)}
                    {select(st, "all2all_backend", "--all2all-backend",
                        std::iter::once((String::new(), "vLLM default (allgather_reducescatter)".to_string()))
                            .chain(core_api::all2all_backends().into_iter().map(|b| (b.to_string(), b.to_string())))
                            .collect(),
                        |f| f.all2all_backend.clone(), |f, v| f.all2all_backend = v)}
                </div>
                <div class="grid2">
                    {select(st, "performance_mode", "--performance-mode (vLLM >= 0.17)",
                        std::iter::once((String::new(), "not stated (balanced)".to_string()))
                            .chain(core_api::performance_modes().into_iter().map(|m| (m.to_string(), m.to_string())))
                            .collect(),
                        |f| f.performance_mode.clone(), |f, v| f.performance_mode = v)}
                </div>
                <div class="grid2">
                    {select(st, "weight_precision", "Weights", opts(WEIGHT_PRECISIONS),
                        |f| f.weight_precision.clone(), |f, v| f.weight_precision = v)}
                    {select(st, "kv_cache_dtype", "KV cache dtype",
                        KvCacheDtype::NAMES.iter().map(|n| (n.to_string(), n.to_string())).collect(),
                        |f| f.kv_cache_dtype.clone(), |f, v| f.kv_cache_dtype = v)}
                </div>
            </fieldset>
            {topology_ui::topology_fieldset(st)}
            <details class="advanced">
                <summary>"Advanced: vLLM engine arguments"</summary>
                <div class="grid2">
                    {field(st, "vllm_version", "vLLM version (blank: 0.15+)", "", |f| &f.vllm_version, |f, v| f.vllm_version = v)}
                    {engine_text_fields(st)}
                    {select(st, "cudagraph_mode", "cudagraph_mode", cudagraph_opts,
                        |f| f.cudagraph_mode.clone(), |f, v| f.cudagraph_mode = v)}
                    {engine_on_off_fields(st)}
                </div>
                <p class="hint">"Blank fields take vLLM's default for this model and GPU (shown greyed). Other settings: edit the scenario JSON below."</p>
            </details>
            {spec_ui::spec_fields(st)}
            {offload_ui::offload_fields(st)}
            <fieldset>
                <legend>"Workload"</legend>
                {select(st, "preset", "Preset", preset_opts,
                    |f| f.preset_key().to_string(), |f, v| f.apply_preset(&v))}
                <div class="grid2">
                    {select(st, "arrival", "Arrival", opts(ARRIVALS), |f| f.arrival.clone(), |f, v| f.arrival = v)}
                    {move || field_with(st, "arrival_value", arrival_label().to_string(), "",
                        |f| f.arrival_value.clone(), |f, v| f.arrival_value = v)}
                </div>
                // Hidden rather than `<Show>`: each `<Show>` compiles its own view tree into the page
                // binary (docs/performance.md "Web").
                <div hidden=move || arrival.get() != "closed_loop">
                    {field(st, "think_time_s", "Think time between requests (optional)", "s", |f| &f.think_time_s, |f, v| f.think_time_s = v)}
                </div>
                <div hidden=move || arrival.get() != "gamma">
                    {field(st, "arrival_cv", "Coefficient of variation of gaps", "", |f| &f.arrival_cv, |f, v| f.arrival_cv = v)}
                </div>
                {select(st, "content", "Requests", opts(CONTENTS), |f| f.content.clone(), |f, v| f.content = v)}
                <Show when=move || content.get() == "preset">
                    <p class="hint" id="preset-desc">
                        {move || st.form.with(|f| f.preset_name.clone())}
                        ": sessions of 11 turns; 16,384-token system prompt, 34,000-token first turn, +5,600 new tokens per turn, 400 output tokens (mean input 64K, ~90% prefix reuse; docs/workloads.md). "
                        <button class="link-btn" id="expand-preset" on:click=move |_| st.form.update(|f| f.expand_preset())>"Edit as sessions"</button>
                    </p>
                </Show>
                <Show when=move || content.get() == "synthetic">
                    {dist_editor(st, kin, "Input length", |f| &f.input, |f| &mut f.input)}
                    {dist_editor(st, kout, "Output length", |f| &f.output, |f| &mut f.output)}
                    <div class="grid2">
                        {field(st, "prefix_tokens", "Shared prefix (optional)", "tok", |f| &f.prefix_tokens, |f, v| f.prefix_tokens = v)}
                        {field(st, "prefix_groups", "Distinct prefixes", "", |f| &f.prefix_groups, |f, v| f.prefix_groups = v)}
                        {field(st, "prefix_prompts", "Prompts per prefix (cycled; optional)", "", |f| &f.prefix_prompts, |f, v| f.prefix_prompts = v)}
                    </div>
                    <p class="hint">"Input length counts the tokens after the shared prefix. Prompts per prefix: a fixed pool the client sends over and over (inference-perf's shared_prefix), so whole prompts hit the prefix cache."</p>
                </Show>
                <div hidden=move || content.get() != "agentic">
                    <div class="grid2">
                        {field(st, "ag_system", "System prompt (shared)", "tok", |f| &f.ag_system, |f, v| f.ag_system = v)}
                        {field(st, "ag_first", "First turn input (incl. system)", "tok", |f| &f.ag_first, |f, v| f.ag_first = v)}
                        {field(st, "ag_turns", "Turns per session", "", |f| &f.ag_turns, |f, v| f.ag_turns = v)}
                        {field(st, "ag_think", "Think time (optional)", "s", |f| &f.ag_think, |f, v| f.ag_think = v)}
                    </div>
                    {dist_editor(st, kturn, "New tokens per turn", |f| &f.turn, |f| &mut f.turn)}
                    {dist_editor(st, kagout, "Output tokens per turn", |f| &f.agout, |f| &mut f.agout)}
                </div>
                <div hidden=move || content.get() != "mooncake">
                    <div class="field" class:invalid=move || st.errors.with(|e| e.contains_key("trace"))>
                        <label for="f-trace">"Mooncake trace (JSONL)"</label>
                        <input id="f-trace" type="file" accept=".jsonl,.json,.txt" on:change=on_trace/>
                        <div class="hint">{move || st.form.with(|f| if f.trace.is_empty() { "No trace loaded.".to_string() } else {
                            format!("{} requests loaded (embedded in the scenario, and in the link when it fits).", group_thousands(f.trace.lines().filter(|l| !l.trim().is_empty()).count() as u64))
                        })}</div>
                        <div class="field-error" id="e-trace" role="alert">{move || st.errors.with(|e| e.get("trace").cloned())}</div>
                    </div>
                    {field(st, "trace_block_tokens", "Tokens per hash id (blank: 512)", "tok", |f| &f.trace_block_tokens, |f, v| f.trace_block_tokens = v)}
                </div>
                {field(st, "seed", "Seed", "", |f| &f.seed, |f, v| f.seed = v)}
            </fieldset>
            <fieldset>
                <legend>"Sweep and SLA"</legend>
                {move || {
                    let label = if st.form.with(|f| f.levels_are_concurrency()) { "Concurrency levels (blank: 1, 2, 4, …, 512)" } else { "Request rates, req/s (blank: the arrival's rate)" };
                    field_with(st, "levels", label.to_string(), "", |f| f.levels.clone(), |f, v| f.levels = v)
                }}
                {select(st, "stop", "Each level runs", vec![("duration".into(), "for a simulated duration".into()), ("requests".into(), "until N requests finish".into())],
                    |f| f.stop.clone(), |f, v| f.stop = v)}
                <Show when=move || stop.get() == "duration"
                    fallback=move || field(st, "num_requests", "Requests per level", "", |f| &f.num_requests, |f, v| f.num_requests = v)>
                    <div class="grid2">
                        {field(st, "duration_s", "Simulated time per level (blank: 900)", "s", |f| &f.duration_s, |f, v| f.duration_s = v)}
                        {field(st, "warmup_s", "Warm-up excluded (blank: 10%)", "s", |f| &f.warmup_s, |f, v| f.warmup_s = v)}
                    </div>
                </Show>
                {field(st, "sla", "SLA gates (all must pass)", "", |f| &f.sla, |f, v| f.sla = v)}
                <p class="hint">"As servesim sweep --sla: metric>=value, comma-separated; e.g. e2e_tokens_per_s_per_user>=50, ttft_ms_p50<5000, itl_ms_p90<=50."</p>
            </fieldset>
            <ScenarioJson st=st/>
        </aside>
    }
}

/// The scenario as JSON: what the link carries and `servesim sweep --scenario FILE` reads.
/// Editable: "Apply" loads edited JSON into the form.
#[component]
fn ScenarioJson(st: State) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if let Ok(s) = st.scenario.get() {
            text.set(s.to_json_pretty());
            error.set(None);
        }
    });
    let apply = move |_| match Scenario::from_json(&text.get_untracked()) {
        Ok(s) => {
            st.form.set(Form::from_scenario(&s));
            error.set(None);
        }
        Err(e) => error.set(Some(e.to_string())),
    };
    let download = move |_| {
        browser::download_text(&text.get_untracked(), "scenario.json", "application/json");
    };
    // A scenario file (e.g. one too large for a link) loads into the form.
    let open_file = move |ev: web_sys::Event| {
        let Some(file) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
            .and_then(|i| i.files())
            .and_then(|l| l.get(0))
        else {
            return;
        };
        wasm_bindgen_futures::spawn_local(async move {
            let t = wasm_bindgen_futures::JsFuture::from(file.text())
                .await
                .ok()
                .and_then(|v| v.as_string())
                .unwrap_or_default();
            match Scenario::from_json(&t) {
                Ok(s) => {
                    st.form.set(Form::from_scenario(&s));
                    error.set(None);
                }
                Err(e) => error.set(Some(format!("{}: {e}", file.name()))),
            }
        });
    };
    view! {
        <details class="advanced" id="scenario-json-box">
            <summary>"Scenario JSON (servesim sweep --scenario)"</summary>
            <textarea id="scenario-json" rows="14" spellcheck="false"
                prop:value=move || text.get()
                on:input=move |ev| text.set(event_target_value(&ev))></textarea>
            <div class="field-error" role="alert">{move || error.get()}</div>
            <div class="btn-row">
                <button class="btn small" id="apply-json" on:click=apply>"Apply JSON"</button>
                <button class="btn small" on:click=download>"Download scenario.json"</button>
                <label class="btn small" for="open-scenario-file">"Open scenario file"</label>
                <input id="open-scenario-file" type="file" accept=".json,application/json" class="sr-only" on:change=open_file/>
            </div>
            <p class="hint">"Run the same scenario natively: servesim sweep --scenario scenario.json --json"</p>
        </details>
    }
}

#[component]
fn CapacityCard(st: State) -> impl IntoView {
    // The card shows only the answer for the form's current scenario: while the tools worker
    // computes it, the card says so (never an earlier scenario's numbers).
    let cap = Memo::new(move |_| {
        if st.scenario.with(|s| s.is_err()) {
            return None;
        }
        let json = st
            .candidate
            .with(|c| c.as_ref().ok().map(|(_, j)| j.clone()));
        Some(st.checked.with(|k| match k {
            Some(k) if Some(&k.scenario) == json.as_ref() => k.capacity.clone(),
            _ => None,
        }))
    });
    let body = move || -> AnyView {
        match cap.get() {
            Some(None) => match st.tools_error.get() {
                Some(e) => view! { <p class="error-text" id="cap-error">{e}</p> }.into_any(),
                None => view! { <p class="muted cap-pending" id="cap-pending" role="status">"Computing the capacity…"</p> }.into_any(),
            },
            None => view! {
                <div id="cap-invalid">
                    <p class="muted">"Fix the highlighted fields to see the capacity."</p>
                    <ul class="error-list">
                        {move || st.errors.get().into_iter().map(|(k, m)| view! { <li><code>{k}</code>": "{m}</li> }).collect_view()}
                    </ul>
                </div>
            }.into_any(),
            Some(Some(Err(e))) => view! { <p class="error-text" id="cap-error">{e}</p> }.into_any(),
            Some(Some(Ok(c))) => capacity_body(c).into_any(),
        }
    };
    view! {
        <section class="card" id="capacity-card" aria-labelledby="cap-title">
            <h2 id="cap-title">"Capacity at start-up"</h2>
            {body}
        </section>
    }
}

fn capacity_body(c: CapacityView) -> impl IntoView {
    let used: f64 = c.per_gpu.iter().map(|s| s.bytes).sum();
    let free = (c.gpu_bytes - used).max(0.0);
    let total = c.gpu_bytes.max(used).max(1.0);
    let pct = move |b: f64| format!("{:.2}%", 100.0 * b / total);
    let classes = ["seg-a", "seg-b", "seg-c", "seg-d", "seg-e"];
    let segs = c
        .per_gpu
        .iter()
        .enumerate()
        .map(|(i, s)| (classes[i % classes.len()], s.label.clone(), s.bytes))
        .collect::<Vec<_>>();
    let fits = c.fits;
    let fixes = c.fixes.clone();
    view! {
        <div class="cap-head">
            <span id="cap-fits" class=if fits { "badge ok" } else { "badge bad" }>
                {if fits { "Fits" } else { "Does not fit" }}
            </span>
            <div class="kpis">
                <div class="kpi"><span class="kpi-v" id="cap-kv-tokens">{group_thousands(c.kv_cache_tokens)}</span><span class="kpi-l">"KV cache tokens per engine"</span></div>
                <div class="kpi"><span class="kpi-v" id="cap-requests">{c.requests_that_fit.map(group_thousands).unwrap_or_else(|| "—".into())}</span><span class="kpi-l">{match c.shape {
                    Some((i, o)) => format!("requests of {} in + {} out tokens at once, per engine", group_thousands(i), group_thousands(o)),
                    None => "requests at once, per engine".to_string(),
                }}</span></div>
                <div class="kpi"><span class="kpi-v" id="cap-replicas">{format!("{} × {}", c.replicas, c.engines / c.replicas.max(1))}</span><span class="kpi-l">"replicas × engines (DP) each"</span></div>
            </div>
        </div>
        <p id="cap-reason" class:error-text=!fits>{c.reason.clone()}</p>
        {c.vllm_error.clone().map(|r| view! { <pre class="vllm-error" id="cap-vllm-error">{r}</pre> })}
        {(!fixes.is_empty()).then(|| view! {
            <div class="fix" id="cap-fix"><strong>"To make it fit:"</strong>
                <ul>{fixes.into_iter().map(|(setting, value, effect)| view! {
                    <li><code>{format!("{setting} {value}")}</code>" — "{effect}</li>
                }).collect_view()}</ul>
            </div>
        })}
        <div class="membar" role="img" aria-label=format!("Memory of one GPU: {}", fmt_gib(c.gpu_bytes))>
            {segs.iter().map(|(cls, label, b)| view! {
                <div class=format!("membar-seg {cls}") style:width=pct(*b) title=format!("{label}: {}", fmt_gib(*b))></div>
            }).collect_view()}
        </div>
        <ul class="legend">
            {segs.into_iter().map(|(cls, label, b)| view! {
                <li><span class=format!("swatch {cls}")></span>{label}" "<span class="num">{fmt_gib(b)}</span></li>
            }).collect_view()}
            <li><span class="swatch seg-free"></span>"headroom "<span class="num">{fmt_gib(free)}</span></li>
            <li class="muted">"of "{fmt_gib(c.gpu_bytes)}" visible per GPU"</li>
        </ul>
        {c.cpu_tier.clone().map(|t| view! { <p id="cap-cpu-tier">{t}</p> })}
        {c.drafter.clone().map(|t| view! { <p id="cap-drafter">{t}</p> })}
        <p class="muted" id="cap-calibration" title="the step-time model's efficiency table for this GPU and vLLM version (docs/accuracy.md)">{c.calibration.clone()}</p>
        {(!c.evidence.is_empty()).then(|| view! {
            <p class="muted" id="cap-evidence" title="ServeSim against the public measured runs fitted in this calibration key, for this model family">
                {c.evidence.clone()}" ("<a href=crate::compare_ui::accuracy::ACCURACY_DOC_URL>"accuracy.md"</a>")"
            </p>
        })}
        <details class="cap-details">
            <summary>"vLLM start-up log, notes"</summary>
            <pre id="cap-log">{c.log_lines.join("\n")}</pre>
            <ul class="notes">
                {c.warnings.into_iter().map(|w| view! { <li class="error-text">{w}</li> }).collect_view()}
                {c.notes.into_iter().map(|n| view! { <li class="muted">{n}</li> }).collect_view()}
            </ul>
        </details>
    }
}

#[component]
fn RunPanel(st: State) -> impl IntoView {
    let running = move || {
        matches!(
            st.status.get(),
            RunStatus::Running { .. } | RunStatus::Refining(_) | RunStatus::Cancelling
        )
    };
    let sweep_frac = move || match st.status.get() {
        RunStatus::Running { done, levels } if done < levels => {
            sweep_fraction(done, levels) + st.level_frac.get() / levels as f64
        }
        RunStatus::Running { done, levels } => sweep_fraction(done, levels),
        RunStatus::Done | RunStatus::Refining(_) => 1.0,
        _ => 0.0,
    };
    let level_frac = move || match st.status.get() {
        RunStatus::Running { .. } | RunStatus::Cancelling => st.level_frac.get(),
        RunStatus::Done => 1.0,
        _ => 0.0,
    };
    let status_text = move || match st.status.get() {
        RunStatus::Idle => "Ready.".to_string(),
        RunStatus::Running { levels: 0, .. } => "Starting…".to_string(),
        RunStatus::Running { done, levels } => {
            let l = st.levels.with(|l| l.get(done).map(table::fmt_level));
            let what = match st.levels.with(|l| l.first().copied()) {
                Some(Level::RequestRate(_)) => "request rate",
                _ => "concurrency",
            };
            format!(
                "Running level {} of {levels} ({what} {})…",
                done + 1,
                l.unwrap_or_default()
            )
        }
        RunStatus::Refining(k) => {
            format!("Refining the SLA operating point by simulation (at most {k} more levels)…")
        }
        RunStatus::Cancelling => "Cancelling…".into(),
        RunStatus::Done => match st.elapsed_ms.get() {
            Some(ms) => format!(
                "Done in {:.1} s (wall clock, in this browser).",
                ms / 1000.0
            ),
            None => "Done.".into(),
        },
        RunStatus::Cancelled => "Cancelled.".into(),
        RunStatus::Failed(e) => format!("Failed: {e}"),
    };
    view! {
        <section class="card run" aria-label="Sweep">
            <div class="run-row">
                <button id="run-btn" class="btn primary"
                    disabled=move || running() || st.scenario.with(|s| s.is_err())
                    on:click=move |_| start_run(st)>"Run sweep"</button>
                <button id="cancel-btn" class="btn" disabled=move || !running() on:click=move |_| cancel_run(st)>"Cancel"</button>
                <span id="run-status" role="status" aria-live="polite"
                    data-elapsed-ms=move || st.elapsed_ms.get().map(|v| format!("{v}"))
                    class:error-text=move || matches!(st.status.get(), RunStatus::Failed(_))>{status_text}</span>
            </div>
            <div class="progress-grid">
                <label for="level-progress">"Current level"</label>
                <progress id="level-progress" max="1" prop:value=level_frac></progress>
                <label for="sweep-progress">"Whole sweep"</label>
                <progress id="sweep-progress" max="1" prop:value=sweep_frac></progress>
            </div>
            {move || st.op.get().map(|o| {
                let what = match st.levels.with(|l| l.first().copied()) {
                    Some(Level::RequestRate(_)) => ("rate", " req/s"),
                    _ => ("C", ""),
                };
                let lv = table::fmt_tick;
                let headline = match (&o.crossing, o.highest_passing) {
                    (Some(c), _) => format!("{} ≈ {}{} → {} output tok/s per GPU",
                        what.0, fmt_num(c.level), what.1, fmt_num(c.output_tokens_per_s_per_gpu)),
                    (None, Some(h)) => format!("{} = {}{} → {} output tok/s per GPU (every level passes)",
                        what.0, lv(h), what.1, o.highest_passing_output_tokens_per_s_per_gpu.map(fmt_num).unwrap_or_default()),
                    (None, None) => "no level passes the SLA".to_string(),
                };
                let passing = o.highest_passing.map(|h| {
                    let tput = o.highest_passing_output_tokens_per_s_per_gpu.map(fmt_num).unwrap_or_default();
                    format!("Highest level passing every gate: {}{} ({tput} output tok/s per GPU).", lv(h), what.1)
                });
                let crossing = o.crossing.as_ref().map(|c| format!(
                    "The gates are crossed between {} and {} (interpolated in log(level)).",
                    lv(c.lower), lv(c.upper)));
                let refined = st.refined.get().map(|r| match r {
                    Ok(r) => view! {
                        <p id="op-refined"><strong>{format!("Refined by simulation ({} extra run{}): ", r.steps.len(), if r.steps.len() == 1 { "" } else { "s" })}</strong>
                            {format!("{} = {}{} passes every gate, {} = {}{} fails → {} output tok/s per GPU.",
                                what.0, lv(r.highest_passing), what.1, what.0, lv(r.lowest_failing), what.1,
                                r.highest_passing_output_tokens_per_s_per_gpu.map(fmt_num).unwrap_or_else(|| "no value".into()))}</p>
                    }.into_any(),
                    Err(e) => view! { <p id="op-refined" class="error-text">{format!("Could not refine by simulation: {e}")}</p> }.into_any(),
                });
                let headline = if o.crossing.is_some() { format!("{headline} (interpolated)") } else { headline };
                view! {
                    <div id="operating-point" class="op" class:stale=move || st.stale.get() title=format!("servesim: {}", o.summary)>
                        <p><strong>"SLA operating point: "</strong><span id="op-summary">{headline}</span></p>
                        {refined}
                        <p class="muted">{passing.unwrap_or_else(|| "No level passes every gate.".into())}" "{crossing}</p>
                    </div>
                }
            })}
            {move || (st.status.get() == RunStatus::Done && st.op.get().is_none()).then(|| view! {
                <p id="operating-point" class="op muted">"No SLA gates set: add some under Sweep and SLA to get an operating point."</p>
            })}
        </section>
    }
}

#[component]
fn ResultsTable(st: State) -> impl IntoView {
    let cols = table::table_columns();
    let cols2 = cols.clone();
    let export_csv = move |_| {
        if let Some((_, csv)) = st.report.get_untracked() {
            browser::download_text(&csv, "servesim-sweep.csv", "text/csv");
        }
    };
    let export_json = move |_| {
        if let Some((json, _)) = st.report.get_untracked() {
            browser::download_text(&json, "servesim-sweep.json", "application/json");
        }
    };
    let level_head = move || {
        st.rows
            .with(|r| core_api::level_axis(r))
            .split(" (")
            .next()
            .unwrap_or("level")
            .to_string()
    };
    let unmeasured = move || {
        let levels: Vec<String> = st.rows.with(|r| {
            r.iter()
                .filter(|r| r.measured_requests == 0)
                .map(|r| table::fmt_level(&r.level))
                .collect()
        });
        let by_requests = st
            .results_for
            .with(|s| s.as_ref().is_some_and(|s| s.sweep.num_requests.is_some()));
        (!levels.is_empty()).then(|| unmeasured_note(&levels, by_requests))
    };
    view! {
        <section class="card" id="results-card" aria-labelledby="res-title"
            class:stale=move || st.stale.get()
            data-stale=move || if st.stale.get() { "true" } else { "false" }>
            <div class="card-head">
                <h2 id="res-title">"Results"</h2>
                <div class="btn-row">
                    <button class="btn small" id="export-csv" title="Every metric, as servesim sweep --csv" disabled=move || st.report.with(|r| r.is_none()) on:click=export_csv>"CSV"</button>
                    {pins_ui::pin_button(st)}
                    <button class="btn small" id="export-json" title="The sweep report, byte for byte what servesim sweep --scenario S --json prints" disabled=move || st.report.with(|r| r.is_none()) on:click=export_json>"JSON"</button>
                </div>
            </div>
            <div class="table-wrap">
                <table id="results-table">
                    <thead><tr>
                        <th scope="col">{level_head}</th>
                        {cols.iter().map(|m| view! { <th scope="col" title=table::column_title(*m)>{table::column_label(*m)}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {move || {
                            let op_l = st.op.with(|o| o.as_ref().and_then(|o| o.highest_passing));
                            st.rows.get().into_iter().map(|r| {
                                let is_op = Some(r.level.value()) == op_l;
                                let unmeasured = r.measured_requests == 0;
                                let cells = cols2.iter().map(|m| {
                                    let v = r.get(*m);
                                    // A window rate without a value says so, with the reason.
                                    let no_value = v.is_none().then_some(r.no_value.as_deref()).flatten().filter(|_| table::is_window_rate(*m));
                                    let title = match no_value {
                                        Some(why) => Some(format!("no value: {why}")),
                                        None => (v.is_none() && unmeasured).then(|| UNMEASURED_TITLE.to_string()),
                                    };
                                    let text = v.map(|v| table::fmt_metric(*m, v)).unwrap_or_else(|| if no_value.is_some() { "no value".into() } else { "—".into() });
                                    view! { <td class="num" data-metric=m.name() title=title data-value=v.map(|v| format!("{v}")).unwrap_or_default()>{text}</td> }
                                }).collect_view();
                                view! { <tr class:op-row=is_op class:unmeasured=unmeasured data-unmeasured=unmeasured.then_some("true")><th scope="row" class="num">{table::fmt_level(&r.level)}{unmeasured.then_some(" *")}</th>{cells}</tr> }
                            }).collect_view()
                        }}
                    </tbody>
                </table>
                <Show when=move || st.rows.with(|r| r.is_empty())>
                    <p class="muted empty">"Run a sweep to fill the table."</p>
                </Show>
                {move || unmeasured().map(|t| view! { <p class="hint warn-text" id="unmeasured-note">{t}</p> })}
                <Show when=move || st.op.with(|o| o.as_ref().and_then(|o| o.highest_passing).is_some())>
                    <p class="hint">"Highlighted: the highest level passing every SLA gate."</p>
                </Show>
            </div>
            {spec_ui::spec_results(st)}
            {offload_ui::offload_results(st)}
            {topology_ui::replica_results(st)}
            <pre id="report-json" hidden>{move || st.report.with(|r| r.as_ref().map(|r| r.0.clone()).unwrap_or_default())}</pre>
        </section>
    }
}

/// The tooltip of a dash in a level without measured requests.
const UNMEASURED_TITLE: &str = "no request finished inside the measurement window";

/// The note under the table for levels where no request was measured.
fn unmeasured_note(levels: &[String], by_requests: bool) -> String {
    let fix = if by_requests {
        "raise the requests per level or lower the warm-up"
    } else {
        "lengthen the simulated duration or lower the warm-up"
    };
    format!(
        "* {} {}: no request finished inside the measurement window (after the warm-up, before the \
         end of the level), so its latencies and per-user speeds are blank: {fix}.",
        if levels.len() == 1 { "Level" } else { "Levels" },
        levels.join(", ")
    )
}

/// Each pin with results: its label and its charts (`track`: inside an effect).
fn pinned_specs(st: State, log: bool, track: bool) -> Vec<(String, Vec<charts::ChartSpec>)> {
    let pins = if track {
        st.pins.get()
    } else {
        st.pins.get_untracked()
    };
    pins.iter()
        .filter_map(|p| {
            let rows = p.rows.as_ref()?;
            Some((
                p.label.clone(),
                charts::chart_specs(&p.scenario, rows, p.op.as_ref(), log),
            ))
        })
        .collect()
}

#[component]
fn Charts(st: State) -> impl IntoView {
    let keys = ["throughput", "per_user", "ttft", "itl", "pareto"];
    let refs: [NodeRef<leptos::html::Canvas>; 5] = std::array::from_fn(|_| NodeRef::new());
    Effect::new(move |_| {
        let rows = st.rows.get();
        let op = st.op.get();
        let theme = effective_theme(&st.theme.get());
        let log = st.log_latency.get();
        let Some(s) = st.results_for.get() else {
            return;
        };
        let mut specs = charts::chart_specs(&s, &rows, op.as_ref(), log);
        crate::pins::overlay(&mut specs, &pinned_specs(st, log, true));
        for (spec, r) in specs.iter().zip(refs.iter()) {
            let Some(canvas) = r.get() else { continue };
            let w = canvas.client_width().max(320) as u32;
            canvas.set_width(w);
            canvas.set_height(300);
            if let Some(backend) =
                plotters_canvas::CanvasBackend::with_canvas_object(canvas.clone())
            {
                let root = plotters::prelude::IntoDrawingArea::into_drawing_area(backend);
                if let Err(e) = charts::draw(&root, spec, &theme) {
                    web_sys::console::error_1(&e.into());
                }
                // What was drawn, for tests and styling.
                let _ =
                    canvas.set_attribute("data-log-y", if spec.log_y { "true" } else { "false" });
            }
        }
    });
    let save_png = move |i: usize| {
        if let Some(c) = refs[i].get() {
            browser::download_canvas_png(&c, &format!("servesim-{}.png", keys[i]));
        }
    };
    let save_svg = move |i: usize| {
        let Some(s) = st.results_for.get_untracked() else {
            return;
        };
        let rows = st.rows.get_untracked();
        let log = st.log_latency.get_untracked();
        let mut specs = charts::chart_specs(&s, &rows, st.op.get_untracked().as_ref(), log);
        crate::pins::overlay(&mut specs, &pinned_specs(st, log, false));
        let mut svg = String::new();
        {
            let root = plotters::prelude::IntoDrawingArea::into_drawing_area(
                plotters::prelude::SVGBackend::with_string(&mut svg, (800, 420)),
            );
            if charts::draw(
                &root,
                &specs[i],
                &effective_theme(&st.theme.get_untracked()),
            )
            .is_err()
            {
                return;
            }
        }
        browser::download_text(&svg, &format!("servesim-{}.svg", keys[i]), "image/svg+xml");
    };
    view! {
        <section class="card" id="charts-card" aria-labelledby="charts-title"
            class:stale=move || st.stale.get()
            data-stale=move || if st.stale.get() { "true" } else { "false" }>
            <div class="card-head">
                <h2 id="charts-title">"Charts"</h2>
                <label class="inline check" for="log-latency">
                    <input type="checkbox" id="log-latency"
                        prop:checked=move || st.log_latency.get()
                        on:change=move |ev| st.log_latency.set(event_target_checked(&ev))/>
                    " Log scale for TTFT and ITL"
                </label>
            </div>
            <Show when=move || st.rows.with(|r| r.is_empty())>
                <p class="muted">"Charts appear as levels complete."</p>
            </Show>
            <div class="charts" class:hidden=move || st.rows.with(|r| r.is_empty())>
                {keys.iter().enumerate().map(|(i, k)| {
                    view! {
                        <figure class="chart">
                            <canvas id=format!("chart-{k}") node_ref=refs[i] aria-label=format!("chart {k}")></canvas>
                            <figcaption class="btn-row">
                                <button class="btn small" on:click=move |_| save_png(i)>"PNG"</button>
                                <button class="btn small" on:click=move |_| save_svg(i)>"SVG"</button>
                            </figcaption>
                        </figure>
                    }
                }).collect_view()}
            </div>
        </section>
    }
}
