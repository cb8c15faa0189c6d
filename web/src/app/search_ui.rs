//! The "Which deployment?" panel (docs/web.md, docs/search.md), wasm32 only: the search options
//! (`search_view::SearchOptions`, written as the core's search JSON by the first search worker,
//! `search_form`, with errors under their fields) over the form's scenario, candidates evaluated
//! across Web
//! Workers (one per `navigator.hardwareConcurrency`, at most [`MAX_WORKERS`]; each a fresh
//! instance of the worker binary, handed the next candidate index when it finishes one), the
//! outcomes assembled by candidate index in one of them (`search_tools`: the core's
//! `search::evaluate` and `search::assemble`), progress per candidate and Cancel (the workers
//! are terminated). Results: the frontier chart (`search_chart`), the best candidates, the
//! ranking, what was pruned and why, and each candidate's link.

use super::{effective_theme, State};
use crate::browser;
use crate::charts;
use crate::search_chart::frontier_spec;
use crate::search_tools::{FromSearch, ToSearch, WireCandidate};
use crate::search_view::{default_price, SearchOptions, SearchView};
use crate::table;
use leptos::prelude::*;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

/// At most this many search workers (each holds a whole simulation in memory).
pub const MAX_WORKERS: usize = 4;

/// The panel's signals.
#[derive(Clone, Copy)]
struct SearchState {
    opts: RwSignal<SearchOptions>,
    /// Messages by field key (`search_form::FIELDS`; `search` for the search as a whole).
    errors: RwSignal<std::collections::BTreeMap<String, String>>,
    status: RwSignal<String>,
    running: RwSignal<bool>,
    /// Candidates in index order and each one's progress text.
    cands: RwSignal<Vec<(WireCandidate, String)>>,
    /// The search JSON of the last search (`servesim search --search FILE --json`).
    search_json: RwSignal<Option<String>>,
    /// The report (what `servesim search --json` prints) and each candidate's link fragment.
    report: RwSignal<Option<(String, Vec<String>)>>,
    view: Memo<Option<SearchView>>,
}

/// One search's workers and bookkeeping.
struct Pool {
    id: u32,
    /// The scenario's JSON and the options, until the first worker has written the search JSON.
    start: Option<(String, SearchOptions)>,
    /// The search JSON (after `SearchCandidates`).
    json: String,
    workers: Vec<Worker>,
    ready: Vec<bool>,
    busy: Vec<bool>,
    /// Candidates known (after `SearchCandidates`).
    total: Option<usize>,
    next: usize,
    outcomes: Vec<Option<String>>,
    started_ms: f64,
    assembling: bool,
}

thread_local! {
    static POOL: RefCell<Option<Pool>> = const { RefCell::new(None) };
    static NEXT_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn stop_pool() {
    POOL.with(|p| {
        if let Some(p) = p.borrow_mut().take() {
            for w in p.workers {
                w.terminate();
            }
        }
    });
}

fn post_to(w: &Worker, m: &ToSearch) {
    let _ = w.post_message(&JsValue::from_str(&m.to_json()));
}

/// Hands worker `k` the next candidate, if any.
fn dispatch(ss: SearchState, p: &mut Pool, k: usize) {
    let Some(total) = p.total else { return };
    if p.busy[k] || !p.ready[k] || p.next >= total {
        return;
    }
    let i = p.next;
    p.next += 1;
    p.busy[k] = true;
    post_to(
        &p.workers[k],
        &ToSearch::SearchEvaluate {
            id: p.id,
            search: p.json.clone(),
            index: i,
        },
    );
    ss.cands.update(|c| {
        if let Some(x) = c.get_mut(i) {
            x.1 = format!("running (worker {})", k + 1);
        }
    });
}

fn fail(ss: SearchState, msg: String) {
    stop_pool();
    ss.running.set(false);
    ss.status.set(format!("Failed: {msg}"));
}

fn on_message(ss: SearchState, k: usize, text: &str) {
    if text.trim() == "\"ready\"" {
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            let Some(p) = p.as_mut() else { return };
            p.ready[k] = true;
            if k == 0 && p.total.is_none() {
                if let Some((base, options)) = p.start.take() {
                    post_to(
                        &p.workers[0],
                        &ToSearch::SearchStart {
                            id: p.id,
                            base,
                            options: Box::new(options),
                        },
                    );
                }
            } else {
                dispatch(ss, p, k);
            }
        });
        return;
    }
    let Ok(msg) = FromSearch::from_json(text) else {
        return;
    };
    let current = POOL.with(|p| p.borrow().as_ref().map(|p| p.id));
    let id = match &msg {
        FromSearch::SearchCandidates { id, .. }
        | FromSearch::SearchEvaluated { id, .. }
        | FromSearch::SearchReport { id, .. }
        | FromSearch::SearchError { id, .. } => *id,
    };
    if current != Some(id) {
        return;
    }
    match msg {
        FromSearch::SearchCandidates {
            candidates, search, ..
        } => {
            let n = candidates.len();
            ss.search_json.set(Some(search.clone()));
            ss.cands.set(
                candidates
                    .into_iter()
                    .map(|c| (c, "waiting".to_string()))
                    .collect(),
            );
            ss.status.set(format!("Evaluating {n} candidates…"));
            POOL.with(|p| {
                let mut p = p.borrow_mut();
                let Some(p) = p.as_mut() else { return };
                p.total = Some(n);
                p.json = search;
                p.outcomes = vec![None; n];
                for j in 0..p.workers.len() {
                    dispatch(ss, p, j);
                }
            });
        }
        FromSearch::SearchEvaluated {
            index,
            word,
            outcome,
            ..
        } => {
            ss.cands.update(|c| {
                if let Some(x) = c.get_mut(index) {
                    x.1 = word;
                }
            });
            POOL.with(|p| {
                let mut p = p.borrow_mut();
                let Some(p) = p.as_mut() else { return };
                p.busy[k] = false;
                if let Some(o) = p.outcomes.get_mut(index) {
                    *o = Some(outcome);
                }
                let done = p.outcomes.iter().filter(|o| o.is_some()).count();
                let total = p.total.unwrap_or(0);
                if done == total && !p.assembling {
                    p.assembling = true;
                    ss.status.set(format!(
                        "All {total} candidates evaluated; assembling the report…"
                    ));
                    let outcomes = p
                        .outcomes
                        .iter()
                        .map(|o| o.clone().unwrap_or_default())
                        .collect();
                    post_to(
                        &p.workers[k],
                        &ToSearch::SearchAssemble {
                            id: p.id,
                            search: p.json.clone(),
                            outcomes,
                        },
                    );
                } else {
                    ss.status.set(format!(
                        "Evaluated {done} of {total} candidates on {} workers…",
                        p.workers.len()
                    ));
                    dispatch(ss, p, k);
                }
            });
        }
        FromSearch::SearchReport { report, links, .. } => {
            let (secs, w) = POOL.with(|p| {
                p.borrow()
                    .as_ref()
                    .map(|p| ((browser::now_ms() - p.started_ms) / 1000.0, p.workers.len()))
                    .unwrap_or((0.0, 0))
            });
            stop_pool();
            ss.report.set(Some((report, links)));
            ss.running.set(false);
            ss.status.set(format!(
                "Done: {} candidates in {secs:.1} s on {w} workers.",
                ss.cands.with_untracked(|c| c.len())
            ));
        }
        FromSearch::SearchError { errors, .. } => {
            let message = match errors.get("search") {
                Some(m) => m.clone(),
                None => "fix the search options marked above.".into(),
            };
            ss.errors.set(errors);
            fail(ss, message);
        }
    }
}

fn start(ss: SearchState, st: State) {
    stop_pool();
    ss.report.set(None);
    ss.search_json.set(None);
    ss.cands.set(Vec::new());
    let Ok(base) = st.scenario.get_untracked() else {
        ss.status
            .set("Fix the scenario's fields first: the search starts from it.".into());
        return;
    };
    let start = (base.to_json(), ss.opts.get_untracked());
    ss.errors.set(Default::default());
    let n = (browser::window().navigator().hardware_concurrency() as usize).clamp(1, MAX_WORKERS);
    let id = NEXT_ID.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let mut workers = Vec::new();
    for k in 0..n {
        let w = match browser::spawn_worker() {
            Ok(w) => w,
            Err(e) => {
                for w in workers {
                    Worker::terminate(&w);
                }
                return fail(ss, e);
            }
        };
        let onmessage = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string() {
                on_message(ss, k, &text);
            }
        });
        w.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        onmessage.forget();
        let onerror =
            Closure::<dyn Fn(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
                fail(
                    ss,
                    format!(
                        "search worker {} stopped: {} (fewer or shorter levels, a smaller budget)",
                        k + 1,
                        ev.message()
                    ),
                );
            });
        w.set_onerror(Some(onerror.as_ref().unchecked_ref()));
        onerror.forget();
        workers.push(w);
    }
    ss.running.set(true);
    ss.status.set(format!("Starting {n} search workers…"));
    POOL.with(|p| {
        *p.borrow_mut() = Some(Pool {
            id,
            start: Some(start),
            json: String::new(),
            ready: vec![false; n],
            busy: vec![false; n],
            workers,
            total: None,
            next: 0,
            outcomes: Vec::new(),
            started_ms: browser::now_ms(),
            assembling: false,
        })
    });
}

fn cancel(ss: SearchState) {
    let done = ss.cands.with_untracked(|c| {
        c.iter()
            .filter(|x| !matches!(x.1.as_str(), "waiting") && !x.1.starts_with("running"))
            .count()
    });
    let total = ss.cands.with_untracked(|c| c.len());
    stop_pool();
    ss.running.set(false);
    ss.status
        .set(format!("Cancelled after {done} of {total} candidates."));
}

/// A text input bound to one search option.
fn opt_field(
    ss: SearchState,
    key: &'static str,
    label: &'static str,
    placeholder: &'static str,
    get: fn(&SearchOptions) -> &String,
    set: fn(&mut SearchOptions, String),
) -> impl IntoView {
    let err = move || ss.errors.with(|e| e.get(key).cloned());
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for=format!("f-{key}")>{label}</label>
            <div class="input-row">
                <input id=format!("f-{key}") type="text" autocomplete="off" spellcheck="false"
                    placeholder=placeholder
                    prop:value=move || ss.opts.with(|o| get(o).clone())
                    on:input=move |ev| { let v = event_target_value(&ev); ss.opts.update(|o| set(o, v)) }/>
            </div>
            <div class="field-error" id=format!("e-{key}") role="alert">{err}</div>
        </div>
    }
}

/// The choices of the off/on selects (expert parallelism, speculative decoding).
const ON_OFF: &[(&str, &str)] = &[
    ("", "default"),
    ("off", "off"),
    ("on", "on"),
    ("off,on", "both"),
];
/// Disaggregated prefill/decode candidates: none, also (with the aggregated ones) or only. The
/// P:D and pool fields are used only when this is not "none".
const DISAGG: &[(&str, &str)] = &[
    ("", "none"),
    ("also", "also (with aggregated)"),
    ("only", "only"),
];

/// Whether a candidate's sweep stops at its first failing level (`stop_at_crossing`).
const STOP: &[(&str, &str)] = &[
    ("", "simulated (default)"),
    ("on", "skipped (stop at the crossing)"),
];

/// A select bound to one search option (one routine for every select of the panel).
fn select_field(
    ss: SearchState,
    key: &'static str,
    label: &'static str,
    choices: &'static [(&'static str, &'static str)],
    get: fn(&SearchOptions) -> &String,
    set: fn(&mut SearchOptions, String),
) -> impl IntoView {
    let err = move || ss.errors.with(|e| e.get(key).cloned());
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for=format!("f-{key}")>{label}</label>
            <select id=format!("f-{key}")
                prop:value=move || ss.opts.with(|o| get(o).clone())
                on:change=move |ev| { let v = event_target_value(&ev); ss.opts.update(|o| set(o, v)) }>
                {choices.iter().map(|(v, t)| view! { <option value=*v>{*t}</option> }).collect_view()}
            </select>
            <div class="field-error" id=format!("e-{key}") role="alert">{err}</div>
        </div>
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(table::fmt_num).unwrap_or_else(|| "-".into())
}

/// The panel.
pub(super) fn search_panel(st: State) -> impl IntoView {
    let report = RwSignal::new(None::<(String, Vec<String>)>);
    let ss = SearchState {
        opts: RwSignal::new(SearchOptions {
            max_gpus: "8".into(),
            ..SearchOptions::default()
        }),
        errors: RwSignal::new(Default::default()),
        status: RwSignal::new(String::new()),
        running: RwSignal::new(false),
        cands: RwSignal::new(Vec::new()),
        search_json: RwSignal::new(None),
        report,
        view: Memo::new(move |_| {
            report.with(|r| {
                r.as_ref()
                    .and_then(|(t, _)| SearchView::from_report(t).ok())
            })
        }),
    };
    let gpu_list = move || {
        let base = st.scenario.get().ok();
        base.map(|b| ss.opts.with(|o| o.gpu_list(&b)))
            .unwrap_or_default()
    };
    let prices = move || {
        gpu_list()
            .into_iter()
            .map(|g| {
                let (ph, title) = match default_price(&g) {
                    Some((p, src)) => (format!("default {p}"), src.to_string()),
                    None => ("no default: give one".to_string(), "docs/search.md \"Cost\"".to_string()),
                };
                let g2 = g.clone();
                let g3 = g.clone();
                view! {
                    <div class="field">
                        <label for=format!("f-search_price-{g}")>{format!("$/GPU-hour, {g}")}</label>
                        <div class="input-row">
                            <input id=format!("f-search_price-{g}") type="text" autocomplete="off"
                                placeholder=ph title=title
                                prop:value=move || ss.opts.with(|o| o.prices.get(&g2).cloned().unwrap_or_default())
                                on:input=move |ev| { let v = event_target_value(&ev); let g = g3.clone(); ss.opts.update(|o| { o.prices.insert(g, v); }) }/>
                            <span class="unit">"$"</span>
                        </div>
                    </div>
                }
            })
            .collect_view()
    };
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        let theme = effective_theme(&st.theme.get());
        let Some(v) = ss.view.get() else { return };
        let Some(c) = canvas.get() else { return };
        let w = c.client_width().max(320) as u32;
        c.set_width(w);
        c.set_height(360);
        if let Some(backend) = plotters_canvas::CanvasBackend::with_canvas_object(c.clone()) {
            let root = plotters::prelude::IntoDrawingArea::into_drawing_area(backend);
            if let Err(e) = charts::draw(&root, &frontier_spec(&v), &theme) {
                web_sys::console::error_1(&e.into());
            }
        }
    });
    let save_svg = move |_| {
        let Some(v) = ss.view.get_untracked() else {
            return;
        };
        let mut svg = String::new();
        {
            let root = plotters::prelude::IntoDrawingArea::into_drawing_area(
                plotters::prelude::SVGBackend::with_string(&mut svg, (800, 460)),
            );
            if charts::draw(
                &root,
                &frontier_spec(&v),
                &effective_theme(&st.theme.get_untracked()),
            )
            .is_err()
            {
                return;
            }
        }
        browser::download_text(&svg, "servesim-search-frontier.svg", "image/svg+xml");
    };
    let link_of = move |i: usize| {
        ss.report
            .with(|r| r.as_ref().and_then(|(_, l)| l.get(i).cloned()))
            .map(|f| format!("#{f}"))
            .unwrap_or_default()
    };
    let row = move |v: &SearchView, i: usize, rank: usize| {
        let c = v.candidates[i].clone();
        let p = c.outcome.operating_point.clone();
        let href = link_of(i);
        view! {
            <tr data-candidate=i.to_string()>
                <td>{rank}</td>
                <td>{c.label.clone()}</td>
                <td>{c.num_gpus}</td>
                <td>{p.as_ref().map(|p| format!("{}{}", table::fmt_num(p.level), if p.basis == "sweep_level" { "+" } else { "" })).unwrap_or_default()}</td>
                <td data-value=p.as_ref().map(|p| p.output_tokens_per_s_per_gpu.to_string())>{p.as_ref().map(|p| table::fmt_num(p.output_tokens_per_s_per_gpu)).unwrap_or_default()}</td>
                <td>{fmt_opt(p.as_ref().and_then(|p| p.e2e_tokens_per_s_per_user))}</td>
                <td>{fmt_opt(p.as_ref().and_then(|p| p.ttft_ms_p50))}</td>
                <td>{fmt_opt(p.as_ref().and_then(|p| p.usd_per_m_output_tokens))}</td>
                <td><a class="cand-link" href=href>"open"</a></td>
            </tr>
        }
    };
    let results = move || {
        let v = ss.view.get()?;
        let s = &v.summary;
        let summary = format!(
            "{} candidates: {} simulated; pruned {} by the GPU budget, {} by capacity, {} by the per-user bound; {} failed.",
            v.candidates.len(), s.evaluated, s.budget, s.capacity, s.bound, s.failed
        );
        let best = |title: &'static str, id: &'static str, i: Option<usize>| {
            let i = i?;
            let c = &v.candidates[i];
            let href = link_of(i);
            Some(view! {
                <p id=id><strong>{title}</strong>" "<a href=href>{c.label.clone()}</a></p>
            })
        };
        let table = |id: &'static str, order: &[usize]| {
            let body = order
                .iter()
                .enumerate()
                .map(|(r, &i)| row(&v, i, r + 1))
                .collect_view();
            view! {
                <div class="table-wrap"><table class="results" id=id>
                    <thead><tr>
                        <th>"#"</th><th>"candidate"</th><th>"GPUs"</th><th>"level at SLA"</th>
                        <th>"output tok/s per GPU"</th><th>"E2E tok/s per user"</th><th>"TTFT p50 ms"</th>
                        <th>"$/M output tok"</th><th>"scenario"</th>
                    </tr></thead>
                    <tbody>{body}</tbody>
                </table></div>
            }
        };
        let not_sim = v
            .not_simulated()
            .into_iter()
            .map(|(c, why)| view! { <li>{format!("{}: {why}", c.label)}</li> })
            .collect_view();
        let no_sla = v
            .candidates
            .iter()
            .filter(|c| c.outcome.status == "evaluated" && c.outcome.operating_point.is_none())
            .map(|c| view! { <li>{format!("{}: no level passes the SLA", c.label)}</li> })
            .collect_view();
        let evidence = v
            .evidence
            .iter()
            .map(|(g, e)| view! { <li data-gpu=g.clone()>{format!("{g}: {e}")}</li> })
            .collect_view();
        Some(view! {
            <p id="search-summary">{summary}</p>
            {best("Most output tok/s per GPU at the SLA:", "search-best-throughput", v.ranking_by_throughput.first().copied())}
            {best("Lowest $ per million output tokens at the SLA:", "search-best-cost", v.ranking_by_cost.first().copied())}
            <h3>"Ranked by output tok/s per GPU at the SLA"</h3>
            {table("search-ranking", &v.ranking_by_throughput)}
            <h3>"Ranked by $ per million output tokens"</h3>
            {table("search-cost", &v.ranking_by_cost)}
            <h3>"Not at the SLA"</h3>
            <ul id="search-pruned">{not_sim}{no_sla}</ul>
            <h3>"Measured evidence per GPU"</h3>
            <ul id="search-evidence">{evidence}</ul>
        })
    };
    let progress = move || {
        ss.cands
            .get()
            .into_iter()
            .map(|(c, s)| {
                view! {
                    <li data-index=c.index.to_string()>
                        <span class="cand-label">{format!("{}. {} ({} GPUs)", c.index + 1, c.label, c.num_gpus)}</span>
                        ": " <span class="cand-status">{s}</span>
                    </li>
                }
            })
            .collect_view()
    };
    let search_err = move || ss.errors.with(|e| e.get("search").cloned());
    view! {
        <section class="card" id="search-card" aria-labelledby="search-title">
            <div class="card-head"><h2 id="search-title">"Which deployment?"</h2></div>
            <p class="hint">"Searches deployments of the scenario's model and workload under its SLA gates (docs/search.md): every candidate is a normal scenario simulated at the scenario's sweep levels, its operating point refined by simulation, pruned when it cannot start or cannot meet a per-user gate. The same search runs with servesim search --search FILE --json."</p>
            <div class="grid2">
                {opt_field(ss, "search_gpus", "GPU types (comma-separated; blank: the scenario's)", "e.g. H100-SXM, H200", |o| &o.gpus, |o, v| o.gpus = v)}
                {opt_field(ss, "search_max_gpus", "GPU budget", "", |o| &o.max_gpus, |o, v| o.max_gpus = v)}
                {opt_field(ss, "search_tp", "TP sizes (blank: 1, 2, 4, 8 up to the budget)", "e.g. 4, 8", |o| &o.tp, |o, v| o.tp = v)}
                {opt_field(ss, "search_dp", "DP sizes (blank: 1)", "e.g. 1, 2", |o| &o.dp, |o, v| o.dp = v)}
                {select_field(ss, "search_ep", "Expert parallelism (default: both for MoE)", ON_OFF, |o| &o.ep, |o, v| o.ep = v)}
                {opt_field(ss, "search_replicas", "Replicas (blank: 1)", "e.g. 1, 2", |o| &o.replicas, |o, v| o.replicas = v)}
                {select_field(ss, "search_spec", "Speculative decoding (default: both when the scenario has it)", ON_OFF, |o| &o.spec, |o, v| o.spec = v)}
                {opt_field(ss, "search_kv", "KV cache dtypes (blank: the scenario's)", "e.g. auto, fp8", |o| &o.kv, |o, v| o.kv = v)}
                {opt_field(ss, "search_weight_precisions", "Weight precisions, as vLLM serves the checkpoint (blank: the scenario's)", "e.g. checkpoint, fp8", |o| &o.weight_precisions, |o, v| o.weight_precisions = v)}
                {opt_field(ss, "search_max_num_seqs", "max_num_seqs values (blank: the scenario's)", "e.g. 128, 256", |o| &o.max_num_seqs, |o, v| o.max_num_seqs = v)}
                {opt_field(ss, "search_max_num_batched_tokens", "max_num_batched_tokens values, aggregated and prefill (blank: the scenario's)", "e.g. 2048, 8192", |o| &o.max_num_batched_tokens, |o, v| o.max_num_batched_tokens = v)}
                {opt_field(ss, "search_refine_steps", "Refinement steps per candidate (blank: 6)", "0 to 32", |o| &o.refine_steps, |o, v| o.refine_steps = v)}
                {select_field(ss, "search_stop_at_crossing", "Levels past a candidate's first failing one", STOP, |o| &o.stop_at_crossing, |o, v| o.stop_at_crossing = v)}
                {select_field(ss, "search_disagg", "Disaggregated prefill/decode (P:D and pool fields below)", DISAGG, |o| &o.disagg, |o, v| o.disagg = v)}
                {opt_field(ss, "search_pd_ratios", "P:D replica ratios (blank: 1:1)", "e.g. 1:1, 1:2, 2:1", |o| &o.pd_ratios, |o, v| o.pd_ratios = v)}
                {opt_field(ss, "search_pd_prefill_tp", "Prefill pool TP sizes (blank: the TP sizes)", "e.g. 2", |o| &o.pd_prefill_tp, |o, v| o.pd_prefill_tp = v)}
                {opt_field(ss, "search_pd_prefill_dp", "Prefill pool DP sizes (blank: the DP sizes)", "e.g. 1", |o| &o.pd_prefill_dp, |o, v| o.pd_prefill_dp = v)}
                {select_field(ss, "search_pd_prefill_ep", "Prefill pool expert parallelism (default: as above)", ON_OFF, |o| &o.pd_prefill_ep, |o, v| o.pd_prefill_ep = v)}
                {opt_field(ss, "search_pd_prefill_mnbt", "Prefill pool max_num_batched_tokens (blank: the values above, else the scenario's)", "e.g. 8192, 16384", |o| &o.pd_prefill_mnbt, |o, v| o.pd_prefill_mnbt = v)}
                {opt_field(ss, "search_pd_decode_tp", "Decode pool TP sizes (blank: the TP sizes)", "e.g. 2, 4", |o| &o.pd_decode_tp, |o, v| o.pd_decode_tp = v)}
                {opt_field(ss, "search_pd_decode_dp", "Decode pool DP sizes (blank: the DP sizes)", "e.g. 1", |o| &o.pd_decode_dp, |o, v| o.pd_decode_dp = v)}
                {select_field(ss, "search_pd_decode_ep", "Decode pool expert parallelism (default: as above)", ON_OFF, |o| &o.pd_decode_ep, |o, v| o.pd_decode_ep = v)}
                {opt_field(ss, "search_pd_decode_mnbt", "Decode pool max_num_batched_tokens (blank: the scenario's)", "e.g. 2048", |o| &o.pd_decode_mnbt, |o, v| o.pd_decode_mnbt = v)}
            </div>
            <div class="grid2" id="search-prices">{prices}</div>
            <div class="field-error" id="e-search_prices" role="alert">{move || ss.errors.with(|e| e.get("search_prices").cloned())}</div>
            <p class="hint">{move || {
                let gates = st.scenario.with(|s| s.as_ref().map(|s| s.sweep.sla.len()).unwrap_or(0));
                format!("SLA: the scenario's {gates} gate(s); levels: the scenario's sweep levels.")
            }}</p>
            <div class="btn-row">
                <button class="btn primary" id="search-btn" disabled=move || ss.running.get()
                    on:click=move |_| start(ss, st)>"Search"</button>
                <button class="btn" id="search-cancel" disabled=move || !ss.running.get()
                    on:click=move |_| cancel(ss)>"Cancel"</button>
            </div>
            <div class="field-error" id="e-search" role="alert">{search_err}</div>
            <p id="search-status" aria-live="polite">{move || ss.status.get()}</p>
            <ol id="search-progress" class="cand-progress">{progress}</ol>
            <div class:hidden=move || ss.view.with(|v| v.is_none())>
                <figure class="chart">
                    <canvas id="search-chart" node_ref=canvas aria-label="Pareto frontier of the search"></canvas>
                    <figcaption class="btn-row"><button class="btn small" on:click=save_svg>"SVG"</button></figcaption>
                </figure>
            </div>
            {results}
            <details hidden=move || ss.search_json.with(|s| s.is_none())>
                <summary>"Search JSON (servesim search --search FILE --json)"</summary>
                <pre id="search-input">{move || ss.search_json.get().unwrap_or_default()}</pre>
            </details>
            <div hidden=move || ss.report.with(|r| r.is_none())>
                <details>
                    <summary>"Search report JSON"</summary>
                    <div class="btn-row"><button class="btn small" on:click=move |_| {
                        if let Some((r, _)) = ss.report.get_untracked() { browser::download_text(&r, "servesim-search.json", "application/json"); }
                    }>"Download"</button></div>
                    <pre id="search-report">{move || ss.report.with(|r| r.as_ref().map(|x| x.0.clone()).unwrap_or_default())}</pre>
                </details>
            </div>
        </section>
    }
}
