//! The "Predicted versus measured" panel (Leptos, wasm32 only). State: [`CompareState`] (one
//! field of the page's state); the panel: [`ComparePanel`] (mounted once in the results column).
//!
//! Predictions run in a Web Worker (`ToWorker::Predict`, answered level by level; see
//! `crate::protocol`) and imports in the page's tools worker (`ToWorker::Import`); the main
//! thread only scores and draws, so the page's wasm contains neither the simulator nor the
//! importers.

use super::import_view::{table_headers, ColumnStatus, ImportFailure, ImportView};
use super::link::{self, WithMeasured};
use super::state::{
    plan_arms, score, ArmPlan, ArmSetup, CompareInput, Exclusion, Prediction, Scored, STORAGE_KEY,
};
use super::{accuracy, import_view::SourceFile};
use crate::browser;
use crate::charts::Theme;
use crate::compare_charts::{draw_error, draw_fit, error_chart, fit_chart};
use crate::core_api::compare::{level_label, ArmScore, LevelKind, MeasuredRun, PredictedSeries};
use crate::core_api::metric::MetricId;
use crate::core_api::scenario::Scenario;
use crate::protocol::{FromWorker, ToWorker};
use leptos::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

/// The comparison's signals; `Copy`, so it sits in the page's state.
#[derive(Clone, Copy)]
pub struct CompareState {
    pub input: RwSignal<CompareInput>,
    /// Measured data opened from a link or a file (used instead of the pasted input).
    pub loaded: RwSignal<Option<Vec<MeasuredRun>>>,
    pub predictions: RwSignal<BTreeMap<String, Prediction>>,
    pub status: RwSignal<String>,
    pub running: RwSignal<bool>,
    pub notice: RwSignal<Option<String>>,
    /// Run the predictions once the scenario is valid (after opening a link or file).
    pub auto_run: RwSignal<bool>,
    /// The payload the link should carry (kept current by the panel).
    pub payload: RwSignal<Option<link::MeasuredPayload>>,
    pub link_state: RwSignal<Option<WithMeasured>>,
}

impl CompareState {
    /// Loads the saved input and any measured data in the page's URL fragment.
    pub fn new() -> CompareState {
        let mut notice = None;
        let mut input = match browser::storage_get(STORAGE_KEY) {
            Some(t) => CompareInput::from_json(&t).unwrap_or_else(|e| {
                notice = Some(e);
                CompareInput::default()
            }),
            None => CompareInput::default(),
        };
        let mut loaded = None;
        let mut auto = false;
        if let (_, Some(code)) = link::split_fragment(&browser::hash()) {
            match link::decode_payload(&code).and_then(|p| link::runs_of(&p)) {
                Ok((runs, arms)) => {
                    for (k, a) in arms {
                        input.arms.insert(k, a);
                    }
                    // The paste box shows what was restored (the importer reads it back).
                    input.pasted = link::runs_as_csv(&runs);
                    input.files.clear();
                    loaded = Some(runs);
                    auto = true;
                }
                Err(e) => notice = Some(format!("{e}. The comparison was not opened.")),
            }
        }
        CompareState {
            input: RwSignal::new(input),
            loaded: RwSignal::new(loaded),
            predictions: RwSignal::new(BTreeMap::new()),
            status: RwSignal::new(String::new()),
            running: RwSignal::new(false),
            notice: RwSignal::new(notice),
            auto_run: RwSignal::new(auto),
            payload: RwSignal::new(None),
            link_state: RwSignal::new(None),
        }
    }

    /// The page's fragment with the measured part added (tracked: the page's URL effect re-runs
    /// when the measured data changes).
    pub fn fragment(&self, scenario_fragment: &str) -> String {
        let p = self.payload.get();
        let w = link::with_measured(scenario_fragment, p.as_ref());
        let f = w.fragment().to_string();
        if self.link_state.get_untracked().as_ref() != Some(&w) {
            self.link_state.set(Some(w));
        }
        f
    }
}

impl Default for CompareState {
    fn default() -> Self {
        Self::new()
    }
}

fn theme() -> Theme {
    let attr = browser::window()
        .document()
        .and_then(|d| d.document_element())
        .and_then(|e| e.get_attribute("data-theme"));
    match attr.as_deref() {
        Some("dark") => Theme::DARK,
        Some("light") => Theme::LIGHT,
        _ if browser::prefers_dark() => Theme::DARK,
        _ => Theme::LIGHT,
    }
}

thread_local! {
    /// The comparison's own worker (a second instance of the sweep worker, `worker_loader.js`):
    /// a prediction never waits behind the page's sweep, and cancelling one never stops the other.
    static PWORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    /// The worker has said `ready`; requests posted before it wait in `PPENDING`.
    static PREADY: Cell<bool> = const { Cell::new(false) };
    static PPENDING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
    /// The request being answered: its id and the resolve function of the promise awaiting it.
    static WAITING: RefCell<Option<(u32, js_sys::Function)>> = const { RefCell::new(None) };
    static ANSWER: RefCell<Option<Result<PredictedSeries, String>>> = const { RefCell::new(None) };
    /// (arm number, arms, arm name) for the progress line.
    static LABEL: RefCell<(usize, usize, String)> = const { RefCell::new((0, 0, String::new())) };
    /// Set by Cancel: no further arm is started.
    static STOP: Cell<bool> = const { Cell::new(false) };
}

/// How long a cancelled prediction may take to acknowledge before its worker is terminated.
const CANCEL_GRACE_MS: i32 = 400;

/// Ends the wait for request `id` with `answer` (ignored when it is not the awaited request).
fn answer(id: u32, a: Result<PredictedSeries, String>) {
    let Some((_, resolve)) = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        if w.as_ref().is_some_and(|(i, _)| *i == id) {
            w.take()
        } else {
            None
        }
    }) else {
        return;
    };
    ANSWER.with(|x| *x.borrow_mut() = Some(a));
    let _ = resolve.call0(&JsValue::NULL);
}

fn stop_worker() {
    PWORKER.with(|w| {
        if let Some(w) = w.borrow_mut().take() {
            w.terminate();
        }
    });
    PREADY.with(|r| r.set(false));
    PPENDING.with(|p| p.borrow_mut().clear());
}

fn ensure_worker(cs: CompareState) -> Result<(), String> {
    if PWORKER.with(|w| w.borrow().is_some()) {
        return Ok(());
    }
    let worker = browser::spawn_worker()?;
    let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let msg = match FromWorker::from_json(&text) {
            Ok(m) => m,
            Err(e) => {
                let id = WAITING.with(|w| w.borrow().as_ref().map(|x| x.0));
                if let Some(id) = id {
                    answer(id, Err(e));
                }
                return;
            }
        };
        match msg {
            FromWorker::Ready => {
                PREADY.with(|r| r.set(true));
                let pending: Vec<String> = PPENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
                PWORKER.with(|w| {
                    if let Some(w) = w.borrow().as_ref() {
                        for p in pending {
                            let _ = w.post_message(&JsValue::from_str(&p));
                        }
                    }
                });
            }
            FromWorker::Progress { id, index, levels } => {
                if WAITING.with(|w| w.borrow().as_ref().is_some_and(|x| x.0 == id)) {
                    let (ai, n, arm) = LABEL.with(|l| l.borrow().clone());
                    cs.status.set(format!(
                        "Predicting arm {ai} of {n} (\"{arm}\"): level {} of {levels}…",
                        index + 1
                    ));
                }
            }
            FromWorker::Predicted { id, series } => answer(id, series.to_series()),
            FromWorker::Error { id, message, .. } => answer(id, Err(message)),
            FromWorker::Cancelled { id, .. } => answer(id, Err("cancelled".into())),
            FromWorker::Started { .. }
            | FromWorker::LevelProgress { .. }
            | FromWorker::Level { .. }
            | FromWorker::Parsed { .. }
            | FromWorker::Commands { .. }
            | FromWorker::Catalog { .. }
            | FromWorker::Checked { .. }
            | FromWorker::Imported { .. }
            | FromWorker::Refining { .. }
            | FromWorker::Done { .. } => {}
        }
    });
    worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    onmessage.forget();
    PREADY.with(|r| r.set(false));
    PWORKER.with(|w| *w.borrow_mut() = Some(worker));
    Ok(())
}

fn post(msg: &ToWorker) {
    let text = msg.to_json();
    let sent = PREADY.with(|r| r.get())
        && PWORKER.with(|w| {
            w.borrow()
                .as_ref()
                .is_some_and(|w| w.post_message(&JsValue::from_str(&text)).is_ok())
        });
    if !sent {
        PPENDING.with(|p| p.borrow_mut().push(text));
    }
}

/// Asks the comparison's worker for one arm's prediction and waits for the answer.
async fn ask_worker(
    cs: CompareState,
    scenario: String,
    kind: LevelKind,
    levels: &[f64],
) -> Result<PredictedSeries, String> {
    ensure_worker(cs)?;
    let id = NEXT_ID.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        WAITING.with(|w| *w.borrow_mut() = Some((id, resolve)));
    });
    post(&ToWorker::Predict {
        id,
        scenario,
        level_kind: kind,
        // Shortest round-trip decimal strings: the worker reads back exactly these levels.
        levels: levels.iter().map(|l| l.to_string()).collect(),
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    ANSWER
        .with(|a| a.borrow_mut().take())
        .unwrap_or_else(|| Err("the prediction worker stopped".into()))
}

/// Stops the predictions: the worker stops after its current level; one that does not answer
/// within [`CANCEL_GRACE_MS`] is terminated (a fresh one starts with the next prediction).
fn cancel_predictions() {
    STOP.with(|s| s.set(true));
    let Some(id) = WAITING.with(|w| w.borrow().as_ref().map(|x| x.0)) else {
        return;
    };
    post(&ToWorker::Cancel { id });
    let cb = Closure::once_into_js(move || {
        if WAITING.with(|w| w.borrow().as_ref().is_some_and(|x| x.0 == id)) {
            stop_worker();
            answer(id, Err("cancelled".into()));
        }
    });
    let _ = browser::window()
        .set_timeout_with_callback_and_timeout_and_arguments_0(cb.unchecked_ref(), CANCEL_GRACE_MS);
}

/// Predicts every planned arm at all of its measured levels, in the comparison's worker (the
/// main thread never runs the simulator), level by level with progress.
async fn run_predictions(cs: CompareState, plans: Vec<ArmPlan>) {
    cs.running.set(true);
    STOP.with(|s| s.set(false));
    let n_arms = plans.len();
    let mut cancelled = false;
    for (ai, plan) in plans.into_iter().enumerate() {
        if STOP.with(|s| s.get()) {
            cancelled = true;
            break;
        }
        let arm = plan.run.arm.clone();
        let levels: Vec<f64> = plan.run.levels.iter().map(|l| l.level).collect();
        let scenario_json = plan.scenario.to_json();
        LABEL.with(|l| *l.borrow_mut() = (ai + 1, n_arms, arm.clone()));
        cs.status.set(format!(
            "Predicting arm {} of {n_arms} (\"{arm}\")…",
            ai + 1
        ));
        let result = ask_worker(cs, scenario_json.clone(), plan.run.level_kind, &levels).await;
        if STOP.with(|s| s.get()) && result.as_ref().is_err_and(|e| e == "cancelled") {
            cancelled = true;
            break;
        }
        cs.predictions.update(|p| {
            p.insert(
                arm.clone(),
                Prediction {
                    scenario_json,
                    levels,
                    result,
                },
            );
        });
    }
    cs.status.set(if cancelled {
        "Predictions cancelled.".into()
    } else {
        "Predictions done.".into()
    });
    cs.running.set(false);
}

fn metric_options(selected: Option<MetricId>) -> impl IntoView {
    MetricId::all()
        .into_iter()
        .map(|m| {
            let name = m.name();
            let sel = selected == Some(m);
            view! { <option value=name.clone() selected=sel>{format!("{} ({name})", m.label())}</option> }
        })
        .collect_view()
}

fn status_text(s: &ColumnStatus) -> (String, &'static str) {
    match s {
        ColumnStatus::Level(k) => (format!("level ({})", k.name()), "ok"),
        ColumnStatus::Arm => ("arm name".into(), "ok"),
        ColumnStatus::Excluded => ("exclusion marker".into(), "ok"),
        ColumnStatus::Metric { metric, by_hand } => (
            format!(
                "→ {}{}",
                metric.name(),
                if *by_hand { " (mapped by hand)" } else { "" }
            ),
            "ok",
        ),
        ColumnStatus::Ignored => ("ignored (mapped by hand)".into(), "muted"),
        ColumnStatus::Unmatched(r) => (format!("not used: {r}"), "warn"),
    }
}

/// The offending line of the pasted text, for the message beside the input.
fn line_of(input: &CompareInput, f: &ImportFailure) -> Option<String> {
    let line = f.line?;
    let text = input
        .sources()
        .into_iter()
        .find(|s| s.name == f.file)
        .map(|s| s.text)?;
    text.lines()
        .nth(line - 1)
        .map(|l| l.chars().take(200).collect())
}

#[component]
pub fn ComparePanel(compare: CompareState, current: Signal<Option<Scenario>>) -> impl IntoView {
    let cs = compare;
    // Persist what the user typed on every change (a reload or an error never loses it).
    Effect::new(move |_| {
        let json = cs.input.with(|i| i.to_json());
        browser::storage_set(STORAGE_KEY, &json);
    });
    // The import runs in the tools worker. `wanted` is the generation of the newest request (0:
    // nothing to import), `answer` the newest answer with its generation; the panel shows an
    // answer only while it is the newest request's (`import`), and says it is reading otherwise.
    let request = Memo::new(move |_| {
        cs.input.with(|i| {
            let src = i.sources();
            (!src.is_empty()).then(|| (src, i.column_mapping().0))
        })
    });
    let wanted = RwSignal::new(0u64);
    let answer = RwSignal::new(None::<(u64, Result<ImportView, ImportFailure>)>);
    crate::app::tools::on_import(move |g, r| answer.set(Some((g, r))));
    Effect::new(move |_| match request.get() {
        Some((src, mapping)) => wanted.set(crate::app::tools::request_import(src, mapping)),
        None => {
            crate::app::tools::cancel_import();
            wanted.set(0);
        }
    });
    let import = Memo::new(move |_| {
        let w = wanted.get();
        answer.with(|a| {
            a.as_ref()
                .filter(|(g, _)| w != 0 && *g == w)
                .map(|(_, r)| r.clone())
        })
    });
    let reading = Memo::new(move |_| {
        let w = wanted.get();
        w != 0 && answer.with(|a| a.as_ref().map(|x| x.0) != Some(w))
    });
    // While the newest import is being read, the runs stay those of the previous answer (the
    // arms, predictions and link do not flicker); "Predict and score" waits for the answer.
    let last_runs = Memo::new(move |_| {
        if wanted.get() == 0 {
            return Vec::new();
        }
        answer.with(|a| match a {
            Some((_, Ok(v))) => v.imported.runs.clone(),
            _ => Vec::new(),
        })
    });
    let headers = Memo::new(move |_| {
        cs.input.with(|i| {
            i.sources()
                .first()
                .and_then(|s| table_headers(&s.text))
                .unwrap_or_default()
        })
    });
    let runs = Memo::new(move |_| match cs.loaded.get() {
        Some(r) => r,
        None => last_runs.get(),
    });
    let plans = Memo::new(move |_| {
        let cur = current.get();
        cs.input
            .with(|i| runs.with(|r| plan_arms(r, &i.arms, cur.as_ref())))
    });
    let ok_plans = Memo::new(move |_| {
        plans.with(|p| {
            p.iter()
                .filter_map(|x| x.as_ref().ok().cloned())
                .collect::<Vec<_>>()
        })
    });
    let scored = Memo::new(move |_| ok_plans.with(|p| cs.predictions.with(|pr| score(p, pr))));
    // The link carries the scored runs (exclusions and logged KV applied) and pinned scenarios.
    Effect::new(move |_| {
        let p = ok_plans.with(|plans| {
            if plans.is_empty() {
                None
            } else {
                let runs: Vec<MeasuredRun> = plans.iter().map(|p| p.run.clone()).collect();
                Some(cs.input.with(|i| link::payload_of(&runs, &i.arms)))
            }
        });
        if cs.payload.get_untracked() != p {
            cs.payload.set(p);
        }
    });
    // Opened from a link or a file: predict once the plans are ready.
    Effect::new(move |_| {
        if cs.auto_run.get() && !cs.running.get_untracked() {
            let p = ok_plans.get();
            if !p.is_empty() {
                cs.auto_run.set(false);
                wasm_bindgen_futures::spawn_local(run_predictions(cs, p));
            }
        }
    });

    let on_paste = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        cs.input.update(|i| {
            i.pasted = v;
            i.files.clear();
        });
        cs.loaded.set(None);
    };
    let on_files = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let Some(list) = input.files() else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        wasm_bindgen_futures::spawn_local(async move {
            let mut out = Vec::new();
            for f in files {
                let text = wasm_bindgen_futures::JsFuture::from(f.text())
                    .await
                    .ok()
                    .and_then(|v| v.as_string())
                    .unwrap_or_default();
                out.push(SourceFile {
                    name: f.name(),
                    text,
                });
            }
            cs.input.update(|i| i.files = out);
            cs.loaded.set(None);
        });
    };
    let predict = move |_| {
        let p = ok_plans.get_untracked();
        if !p.is_empty() {
            wasm_bindgen_futures::spawn_local(run_predictions(cs, p));
        }
    };
    let export_md = move |_| {
        if let (Some(r), _) = scored.get_untracked() {
            browser::download_text(&r.to_markdown(), "servesim-comparison.md", "text/markdown");
        }
    };
    let export_csv = move |_| {
        if let (Some(r), _) = scored.get_untracked() {
            browser::download_text(&r.to_csv(), "servesim-comparison.csv", "text/csv");
        }
    };
    let download_bundle = move |_| {
        let (Some(s), Some(p)) = (current.get_untracked(), cs.payload.get_untracked()) else {
            return;
        };
        browser::download_text(
            &link::bundle_json(&s.to_json(), &p),
            "servesim-comparison.json",
            "application/json",
        );
    };
    let open_bundle = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let Some(file) = input.files().and_then(|l| l.get(0)) else {
            return;
        };
        wasm_bindgen_futures::spawn_local(async move {
            let text = wasm_bindgen_futures::JsFuture::from(file.text())
                .await
                .ok()
                .and_then(|v| v.as_string())
                .unwrap_or_default();
            match link::read_bundle(&text)
                .and_then(|b| link::runs_of(&b.measured).map(|(r, a)| (b.scenario, r, a)))
            {
                Ok((scenario, runs, arms)) => {
                    cs.input.update(|i| {
                        i.arms.extend(arms);
                        i.pasted = link::runs_as_csv(&runs);
                        i.files.clear();
                    });
                    cs.loaded.set(Some(runs));
                    cs.notice.set(None);
                    cs.auto_run.set(true);
                    // The page reloads its form from the fragment (hashchange).
                    let frag = format!("s={}", crate::core_api::share::encode(&scenario));
                    let _ = browser::window().location().set_hash(&frag);
                }
                Err(e) => cs.notice.set(Some(e)),
            }
        });
    };

    let accuracy_view = match accuracy::embedded() {
        None => view! {
            <p class="muted" id="accuracy-missing">"The accuracy figures against the public runs are not in this build; see "
                <a href=accuracy::ACCURACY_DOC_URL>"accuracy.md"</a>"."</p>
        }
        .into_any(),
        Some(Err(e)) => view! { <p class="error-text">{e}</p> }.into_any(),
        Some(Ok(a)) => view! {
            <p class="muted">"For a model, GPU or vLLM release unlike the calibration runs, read the held-out columns: each model family (or source) predicted by a fit that never saw it. The capacity card quotes your scenario's own evidence: the runs of its GPU generation, vLLM release line and model family."</p>
            <div class="table-wrap">
            <table id="accuracy-table" class="compact">
                <thead><tr>
                    <th scope="col">"metric"</th><th scope="col">"points"</th>
                    <th scope="col" title="each model family (dense, MoE, MLA, sparse attention, hybrid linear attention) predicted by a fit on the other families">"held out: other model families"</th>
                    <th scope="col" title="each source (benchmark harness and vLLM release line) predicted by a fit on the other sources">"held out: other sources"</th>
                    <th scope="col" title="median absolute error with the shipped calibrated table, over the points it was fitted on">"in-sample"</th>
                    <th scope="col">"target (held out / in-sample)"</th><th scope="col">"met in-sample"</th>
                </tr></thead>
                <tbody>{a.rows.into_iter().map(|r| view! {
                    <tr data-met=r.met.to_string()>
                        <th scope="row">{r.metric}</th><td class="num">{r.n}</td>
                        <td class="num">{accuracy::fmt_pct(r.held_out_family_pct)}</td>
                        <td class="num">{accuracy::fmt_pct(r.held_out_source_pct)}</td>
                        <td class="num">{accuracy::fmt_pct(Some(r.median_abs_pct))}</td>
                        <td class="num">{format!("≤ {} / ≤ {:.0} %", r.held_out_target_pct.map(|t| format!("{t:.0}")).unwrap_or_else(|| "-".into()), r.target_pct)}</td>
                        <td>{if r.met { "yes" } else { "no" }}</td>
                    </tr>
                }).collect_view()}</tbody>
            </table>
            </div>
            <div class="table-wrap">
            <table id="accuracy-families" class="compact">
                <thead><tr>
                    <th scope="col">"model family"</th><th scope="col">"metric"</th><th scope="col">"points"</th>
                    <th scope="col">"held out: median |error|"</th><th scope="col">"held out: mean signed"</th>
                    <th scope="col">"in-sample: median |error|"</th><th scope="col">"in-sample: mean signed"</th>
                </tr></thead>
                <tbody>{a.families.into_iter().map(|f| view! {
                    <tr>
                        <th scope="row">{f.model_family}</th><td>{f.metric}</td><td class="num">{f.n}</td>
                        <td class="num">{accuracy::fmt_pct(f.held_out_pct)}</td>
                        <td class="num">{f.held_out_signed_pct.map(|v| format!("{v:+.1} %")).unwrap_or_else(|| "n/a".into())}</td>
                        <td class="num">{accuracy::fmt_pct(Some(f.median_abs_pct))}</td>
                        <td class="num">{format!("{:+.1} %", f.mean_signed_pct)}</td>
                    </tr>
                }).collect_view()}</tbody>
            </table>
            </div>
            {accuracy::never_fitted_sentence(&a.never_fitted).map(|t| view! { <p id="accuracy-never-fitted">{t}</p> })}
            <p class="muted">{format!("{} ({} of {} runs simulated). Method and every point: ", a.description, a.simulated, a.points)}
                <a href=accuracy::ACCURACY_DOC_URL id="accuracy-doc-link">"accuracy.md"</a>"."</p>
        }
        .into_any(),
    };

    view! {
        <section class="card" id="compare" aria-labelledby="compare-title">
            <h2 id="compare-title">"Predicted versus measured"</h2>
            <details class="trust" id="trust-panel">
                <summary>"How far to trust it"</summary>
                {accuracy_view}
            </details>
            <Show when=move || cs.notice.get().is_some()>
                <p class="error-text" role="alert" id="compare-notice">{move || cs.notice.get().unwrap_or_default()}</p>
            </Show>
            <div class="field">
                <label for="compare-paste">"Measured results: paste a table (CSV, TSV, Markdown) or a benchmark export (vllm bench serve, AIPerf, GuideLLM, InferenceX JSON)"</label>
                <textarea id="compare-paste" rows="7" spellcheck="false"
                    aria-invalid=move || import.with(|i| matches!(i, Some(Err(_)))).to_string()
                    aria-describedby="compare-error"
                    prop:value=move || cs.input.with(|i| i.pasted.clone())
                    on:input=on_paste></textarea>
                <div class="row">
                    <label for="compare-files">"or upload files (several: one per level)"</label>
                    <input id="compare-files" type="file" multiple accept=".csv,.tsv,.md,.txt,.json,.jsonl" on:change=on_files/>
                    <span class="hint">{move || cs.input.with(|i| if i.files.is_empty() { String::new() } else {
                        format!("{} file(s): {}", i.files.len(), i.files.iter().map(|f| f.name.clone()).collect::<Vec<_>>().join(", "))
                    })}</span>
                </div>
                {move || import.get().and_then(|r| r.err()).map(|f| {
                    let line = cs.input.with(|i| line_of(i, &f));
                    view! {
                        <div id="compare-error" class="error-box" role="alert">
                            <span class="badge bad" id="compare-error-loc">{if f.location().is_empty() { f.file.clone() } else { format!("{} {}", f.file, f.location()) }}</span>
                            <p class="error-text">{f.message.clone()}</p>
                            {line.map(|l| view! { <pre class="bad-line">{l}</pre> })}
                        </div>
                    }
                })}
            </div>
            <Show when=move || cs.loaded.with(|l| l.is_some())>
                <p class="muted" id="compare-from-link">"Measured data opened from a link or file. "
                    <button class="link-btn" on:click=move |_| cs.loaded.set(None)>"Use the pasted data instead"</button></p>
            </Show>
            <Show when=move || reading.get()>
                <p class="muted" id="compare-reading" role="status">"Reading the measured data…"</p>
            </Show>
            <MappingView cs=cs import=import reading=reading headers=headers/>
            <div class="run-row">
                <button id="compare-run" class="btn primary"
                    disabled=move || cs.running.get() || ok_plans.with(|p| p.is_empty())
                        || (reading.get() && cs.loaded.with(|l| l.is_none()))
                    on:click=predict>"Predict and score"</button>
                <Show when=move || cs.running.get()>
                    <button class="btn" id="compare-cancel" on:click=move |_| cancel_predictions()>"Cancel"</button>
                </Show>
                <span id="compare-status" role="status" aria-live="polite">{move || cs.status.get()}</span>
            </div>
            <ArmsView cs=cs plans=plans current=current/>
            <ScoreView cs=cs scored=scored runs=runs/>
            <div class="btn-row">
                <button class="btn small" id="compare-export-md" disabled=move || scored.with(|s| s.0.is_none()) on:click=export_md>"Markdown"</button>
                <button class="btn small" id="compare-export-csv" disabled=move || scored.with(|s| s.0.is_none()) on:click=export_csv>"CSV"</button>
                <button class="btn small" id="compare-download" disabled=move || cs.payload.with(|p| p.is_none()) on:click=download_bundle>"Download scenario + measured data"</button>
                <label class="btn small" for="compare-open">"Open file"</label>
                <input id="compare-open" class="sr-only" type="file" accept=".json" on:change=open_bundle/>
            </div>
            <p id="compare-link-state" class="muted">{move || match cs.link_state.get() {
                Some(WithMeasured::TooLong { encoded_len, .. }) => format!(
                    "The measured data is too large for a link ({:.1} KB encoded; the limit is {} KB): the link carries the scenario only. Use \"Download scenario + measured data\" and \"Open file\".",
                    encoded_len as f64 / 1024.0, link::MAX_LINK_MEASURED_BYTES / 1024),
                Some(WithMeasured::Fits(f)) if f.contains("&m=") => "The page's link (Copy link) carries this measured data.".to_string(),
                _ => String::new(),
            }}</p>
            <details>
                <summary>"Markdown report"</summary>
                <pre id="compare-markdown">{move || scored.with(|s| s.0.as_ref().map(|r| r.to_markdown()).unwrap_or_default())}</pre>
            </details>
        </section>
    }
}

#[component]
fn MappingView(
    cs: CompareState,
    import: Memo<Option<Result<ImportView, ImportFailure>>>,
    reading: Memo<bool>,
    headers: Memo<Vec<String>>,
) -> impl IntoView {
    let set_mapping = move |header: String, value: String| {
        cs.input.update(|i| {
            if value == "__auto" {
                i.mapping.remove(&header);
            } else {
                i.mapping.insert(header, value);
            }
        });
    };
    view! {
        <Show when=move || !headers.with(|h| h.is_empty()) || import.with(|i| matches!(i, Some(Ok(_))))>
            <details class="mapping" id="compare-mapping" open>
                <summary>"What was matched"</summary>
                <table class="compact" id="compare-columns">
                    <thead><tr><th scope="col">"column"</th><th scope="col">"header"</th><th scope="col">"read as"</th><th scope="col">"map by hand"</th></tr></thead>
                    <tbody>
                        {move || {
                            let cols = import.with(|i| match i { Some(Ok(v)) => v.columns.clone(), _ => Vec::new() });
                            let mapping = cs.input.with(|i| i.mapping.clone());
                            headers.get().into_iter().enumerate().map(|(idx, h)| {
                                let (txt, cls) = cols.iter().find(|c| c.column == idx + 1)
                                    .map(|c| status_text(&c.status))
                                    .unwrap_or_else(|| if reading.get() {
                                        ("reading…".into(), "muted")
                                    } else {
                                        ("(fix the error above)".into(), "muted")
                                    });
                                let cur = mapping.get(&h).cloned();
                                let sel_metric = cur.as_deref().and_then(MetricId::from_name);
                                let h2 = h.clone();
                                view! {
                                    <tr>
                                        <td class="num">{idx + 1}</td>
                                        <td><code>{h.clone()}</code></td>
                                        <td class=format!("col-status {cls}")>{txt}</td>
                                        <td><select class="map-select" data-header=h.clone() aria-label=format!("map column {h}")
                                            on:change=move |ev| set_mapping(h2.clone(), event_target_value(&ev))>
                                            <option value="__auto" selected=cur.is_none()>"automatic"</option>
                                            <option value="" selected=cur.as_deref() == Some("")>"ignore"</option>
                                            {metric_options(sel_metric)}
                                        </select></td>
                                    </tr>
                                }
                            }).collect_view()
                        }}
                    </tbody>
                </table>
                {move || import.with(|i| match i {
                    Some(Ok(v)) => {
                        let cols_empty = v.columns.is_empty();
                        let metrics = v.metrics.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
                        let unmatched = v.imported.unmatched.clone();
                        let notes = v.imported.notes.clone();
                        let arms = v.imported.runs.iter().map(|r| format!("{} ({} {} levels)", r.arm, r.levels.len(), r.level_kind.name())).collect::<Vec<_>>().join("; ");
                        view! {
                            <p id="compare-imported">{format!("Imported: {arms}. Metrics: {metrics}.")}</p>
                            {(cols_empty && !unmatched.is_empty()).then(|| view! {
                                <ul class="unmatched">{unmatched.into_iter().map(|u| view! { <li><code>{u.name}</code>": "{u.reason}</li> }).collect_view()}</ul>
                            })}
                            <ul class="notes">{notes.into_iter().map(|n| view! { <li class="muted">{n}</li> }).collect_view()}</ul>
                        }.into_any()
                    }
                    _ => ().into_any(),
                })}
            </details>
        </Show>
    }
}

#[component]
fn ArmsView(
    cs: CompareState,
    plans: Memo<Vec<Result<ArmPlan, String>>>,
    current: Signal<Option<Scenario>>,
) -> impl IntoView {
    // Only a change of the arm list re-creates the cards (typing in one keeps its focus).
    let names = Memo::new(move |_| {
        plans.with(|p| {
            p.iter()
                .map(|x| match x {
                    Ok(p) => Ok(p.run.arm.clone()),
                    Err(e) => Err(e.clone()),
                })
                .collect::<Vec<_>>()
        })
    });
    view! {
        <div id="compare-arms">
            {move || names.get().into_iter().enumerate().map(|(i, name)| match name {
                Err(err) => view! { <p class="error-text">{err}</p> }.into_any(),
                Ok(name) => view! { <ArmCard cs=cs plans=plans current=current index=i arm=name/> }.into_any(),
            }).collect_view()}
        </div>
    }
}

#[component]
fn ArmCard(
    cs: CompareState,
    plans: Memo<Vec<Result<ArmPlan, String>>>,
    current: Signal<Option<Scenario>>,
    index: usize,
    arm: String,
) -> impl IntoView {
    let plan = Memo::new(move |_| plans.with(|p| p.get(index).and_then(|x| x.clone().ok())));
    let arm_key = arm.clone();
    let setup = {
        let k = arm_key.clone();
        Memo::new(move |_| {
            cs.input
                .with(|i| i.arms.get(&k).cloned().unwrap_or_default())
        })
    };
    let update = {
        let k = arm_key.clone();
        move |f: &dyn Fn(&mut ArmSetup)| {
            cs.input.update(|i| f(i.arms.entry(k.clone()).or_default()));
        }
    };
    let scenario_text = RwSignal::new(String::new());
    let scenario_err = RwSignal::new(None::<String>);
    let up1 = update.clone();
    let pin = move |_| {
        if let Some(s) = current.get_untracked() {
            let j = s.to_json();
            up1(&|a: &mut ArmSetup| a.scenario = Some(j.clone()));
        }
    };
    let up2 = update.clone();
    let follow = move |_| up2(&|a: &mut ArmSetup| a.scenario = None);
    let up3 = update.clone();
    let on_scenario = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        scenario_text.set(v.clone());
        match Scenario::from_json(&v) {
            Ok(s) => {
                scenario_err.set(None);
                let j = s.to_json();
                up3(&|a: &mut ArmSetup| a.scenario = Some(j.clone()));
            }
            Err(e) => scenario_err.set(Some(e.to_string())),
        }
    };
    let up4 = update.clone();
    let on_log = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        up4(&|a: &mut ArmSetup| a.kv_log = v.clone());
    };
    let up5 = update.clone();
    let exclude = move |level: f64, reason: String| {
        let reason = if reason.trim().is_empty() {
            "excluded by the user".to_string()
        } else {
            reason
        };
        up5(&|a: &mut ArmSetup| {
            a.exclusions.retain(|e| e.level != level);
            a.exclusions.push(Exclusion {
                level,
                reason: reason.clone(),
            });
        });
    };
    let up6 = update.clone();
    let include =
        move |level: f64| up6(&|a: &mut ArmSetup| a.exclusions.retain(|e| e.level != level));
    let reason = RwSignal::new(String::new());
    let safe = arm.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    view! {
        <article class="arm card-inner" data-arm=arm.clone()>
            <h3>{format!("Arm: {arm}")}</h3>
            <p class="muted arm-pairing">{move || plan.with(|p| match p {
                Some(p) if p.pinned => format!("Paired with its own scenario: {} on {} × TP{}, DP{}", model_name(&p.scenario), gpu_name(&p.scenario), p.scenario.tp, p.scenario.dp),
                Some(p) => format!("Paired with the current scenario ({} on {}, TP{})", model_name(&p.scenario), gpu_name(&p.scenario), p.scenario.tp),
                None => String::new(),
            })}</p>
            <div class="btn-row">
                <button class="btn small pin-btn" on:click=pin disabled=move || current.with(|c| c.is_none())>"Pair with current scenario"</button>
                <button class="btn small" on:click=follow disabled=move || setup.with(|s| s.scenario.is_none())>"Follow the current scenario"</button>
            </div>
            <details>
                <summary>"This arm's scenario (JSON, e.g. TP4 vs TP8)"</summary>
                <textarea rows="6" spellcheck="false" id=format!("arm-scenario-{safe}")
                    prop:value=move || { let t = scenario_text.get(); if t.is_empty() { plan.with(|p| p.as_ref().map(|p| p.scenario.to_json_pretty()).unwrap_or_default()) } else { t } }
                    on:change=on_scenario></textarea>
                {move || scenario_err.get().map(|e| view! { <p class="error-text" role="alert">{e}</p> })}
            </details>
            <details>
                <summary>"vLLM start-up log (optional, for the KV pool ratio)"</summary>
                <textarea rows="3" spellcheck="false" placeholder="… GPU KV cache size: 1,234,567 tokens …"
                    prop:value=move || setup.with(|s| s.kv_log.clone()) on:input=on_log></textarea>
                <p class="muted">{move || plan.with(|p| p.as_ref().and_then(|p| p.run.kv_cache_tokens_logged).map(|n| format!("vLLM logged {n} KV tokens per engine.")).unwrap_or_default())}</p>
            </details>
            {move || plan.with(|p| p.as_ref().map(|p| p.problems.clone()).unwrap_or_default()).into_iter().map(|e| view! { <p class="error-text">{e}</p> }).collect_view()}
            <details class="levels">
                <summary>"Levels (exclude a level with a reason)"</summary>
                <label class="inline">"Reason: "<input type="text" class="exclude-reason" prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev)) placeholder="e.g. client-bound"/></label>
                <ul class="level-list">
                    {move || {
                        let p = plan.get();
                        let user: Vec<f64> = setup.with(|s| s.exclusions.iter().map(|e| e.level).collect());
                        p.map(|p| p.run.levels.iter().map(|l| {
                            let lv = l.level;
                            let label = level_label(p.run.level_kind, lv);
                            let by_user = user.contains(&lv);
                            let ex = exclude.clone();
                            let inc = include.clone();
                            view! {
                                <li data-level=lv.to_string()>
                                    <span>{label}</span>" "
                                    <span class="muted">{l.excluded.clone().map(|r| format!("excluded: {r}")).unwrap_or_else(|| "scored".into())}</span>" "
                                    {if by_user {
                                        view! { <button class="link-btn" on:click=move |_| inc(lv)>"include"</button> }.into_any()
                                    } else if l.excluded.is_none() {
                                        view! { <button class="link-btn exclude-btn" on:click=move |_| ex(lv, reason.get_untracked())>"exclude"</button> }.into_any()
                                    } else { ().into_any() }}
                                </li>
                            }
                        }).collect_view())
                    }}
                </ul>
            </details>
        </article>
    }
}

fn model_name(s: &Scenario) -> String {
    match &s.model {
        crate::core_api::scenario::ModelRef::Catalog(id) => {
            id.rsplit('/').next().unwrap_or(id).to_string()
        }
        crate::core_api::scenario::ModelRef::Custom(c) => c.name.clone(),
    }
}

fn gpu_name(s: &Scenario) -> String {
    match &s.gpu {
        crate::core_api::scenario::GpuRef::Catalog(id) => id.clone(),
        crate::core_api::scenario::GpuRef::Custom(_) => "custom GPU".into(),
    }
}

fn fmt_pct(v: f64) -> String {
    format!("{v:.1}")
}

#[component]
fn ScoreView(
    cs: CompareState,
    scored: Memo<Scored>,
    runs: Memo<Vec<MeasuredRun>>,
) -> impl IntoView {
    let _ = cs;
    view! {
        <div id="compare-results">
            {move || scored.with(|s| s.1.clone()).into_iter().map(|(arm, why)| view! {
                <p class="muted unscored-arm">{format!("{arm}: {why}")}</p>
            }).collect_view()}
            {move || scored.with(|s| s.0.clone()).map(|r| r.arms.into_iter().enumerate().map(|(i, a)| {
                view! { <ArmScoreView index=i arm=a cs=cs runs=runs/> }
            }).collect_view())}
        </div>
    }
}

#[component]
fn ArmScoreView(
    index: usize,
    arm: ArmScore,
    cs: CompareState,
    runs: Memo<Vec<MeasuredRun>>,
) -> impl IntoView {
    let first_metric = arm.metrics.first().map(|m| m.metric);
    let metric = RwSignal::new(first_metric);
    let fit_ref: NodeRef<leptos::html::Canvas> = NodeRef::new();
    let err_ref: NodeRef<leptos::html::Canvas> = NodeRef::new();
    let arm_for_draw = arm.clone();
    Effect::new(move |_| {
        let Some(m) = metric.get() else { return };
        let preds = cs.predictions.get();
        let Some(Ok(series)) = preds.get(&arm_for_draw.arm).map(|p| p.result.clone()) else {
            return;
        };
        let all: Vec<(f64, f64)> = runs.with(|r| {
            r.iter()
                .find(|r| r.arm == arm_for_draw.arm)
                .map(|r| {
                    r.levels
                        .iter()
                        .filter_map(|l| l.metrics.get(&m).map(|v| (l.level, *v)))
                        .collect()
                })
                .unwrap_or_default()
        });
        let th = theme();
        let fc = fit_chart(&arm_for_draw, m, &series, &all);
        let ec = error_chart(&arm_for_draw);
        for (r, which) in [(fit_ref, 0), (err_ref, 1)] {
            let Some(canvas) = r.get() else { continue };
            let w = canvas.client_width().max(320) as u32;
            canvas.set_width(w);
            canvas.set_height(280);
            if let Some(backend) = plotters_canvas::CanvasBackend::with_canvas_object(canvas) {
                let root = plotters::prelude::IntoDrawingArea::into_drawing_area(backend);
                let res = if which == 0 {
                    draw_fit(&root, &fc, &th)
                } else {
                    draw_error(&root, &ec, &th)
                };
                if let Err(e) = res {
                    web_sys::console::error_1(&e.into());
                }
            }
        }
    });
    let levels_line = arm.levels_line();
    let kv = match (
        arm.kv_pool_ratio,
        arm.kv_predicted_tokens,
        arm.kv_logged_tokens,
    ) {
        (Some(r), Some(p), Some(l)) => {
            format!("KV pool: ServeSim {p} tokens per engine / vLLM-logged {l} = {r:.2}")
        }
        (_, _, None) => {
            "KV pool ratio: not logged (paste the vLLM start-up log in the arm above)".into()
        }
        _ => "KV pool ratio: not predicted".into(),
    };
    let metric_opts: Vec<MetricId> = arm.metrics.iter().map(|m| m.metric).collect();
    let rows = arm.metrics.clone();
    let unscored = arm.unscored_metrics.clone();
    let name = arm.arm.clone();
    view! {
        <section class="arm-score" id=format!("compare-arm-{index}") data-arm=name.clone()>
            <h3>{format!("Scores: {name}")}</h3>
            <p class="levels-line">{levels_line}</p>
            <div class="table-wrap">
                <table class="compare-table" id=format!("compare-table-{index}")>
                    <thead><tr>
                        <th scope="col">"metric"</th><th scope="col">"signed mean"</th><th scope="col">"MAPE %"</th>
                        <th scope="col">"shape error %"</th><th scope="col">"sign"</th><th scope="col">"scored"</th><th scope="col">"skipped"</th>
                    </tr></thead>
                    <tbody>
                        {rows.into_iter().map(|m| {
                            let skipped = m.skipped.iter().map(|(l, r)| format!("{} ({r})", level_label(arm.level_kind, *l))).collect::<Vec<_>>().join("; ");
                            view! {
                                <tr data-metric=m.metric.name()>
                                    <th scope="row">{m.metric.label()}</th>
                                    <td class="num signed" data-value=m.signed_mean_pct.to_string()>{format!("{:+.1}%", m.signed_mean_pct)}</td>
                                    <td class="num mape" data-value=m.mape_pct.to_string()>{fmt_pct(m.mape_pct)}</td>
                                    <td class="num shape">{m.shape_error_pct.map(fmt_pct).unwrap_or_else(|| "n/a".into())}</td>
                                    <td class="sign">{m.sign.describe("ServeSim")}</td>
                                    <td class="num">{m.points.len()}</td>
                                    <td class="muted">{skipped}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
            {(!unscored.is_empty()).then(|| view! {
                <p class="muted">{format!("Not scored: {}", unscored.iter().map(|(m, r)| format!("{} ({r})", m.name())).collect::<Vec<_>>().join("; "))}</p>
            })}
            <p class="muted kv-line">{kv}</p>
            <label class="inline">"Chart metric: "
                <select class="chart-metric" on:change=move |ev| metric.set(MetricId::from_name(&event_target_value(&ev)))>
                    {metric_opts.into_iter().map(|m| view! { <option value=m.name() selected=Some(m) == first_metric>{m.label()}</option> }).collect_view()}
                </select>
            </label>
            <div class="charts">
                <figure class="chart"><canvas class="compare-fit" id=format!("compare-fit-{index}") node_ref=fit_ref aria-label="measured versus predicted"></canvas></figure>
                <figure class="chart"><canvas class="compare-error" id=format!("compare-err-{index}") node_ref=err_ref aria-label="signed error by level"></canvas></figure>
            </div>
        </section>
    }
}
