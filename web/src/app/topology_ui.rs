//! The page's topology controls (docs/topology.md): replicas of the deployment and the router in
//! front of them, a small picture of the topology that follows the form, and the per-replica
//! results of the last run (read from the core's `SweepReport`). Every value comes from the core
//! through `core_api`; this file only lays it out.

use super::State;
use crate::core_api::{self, RouterChoice, TopologySummary};
use leptos::prelude::*;

/// The "Replicas and router" fieldset.
pub(super) fn topology_fieldset(st: State) -> impl IntoView {
    let err = move |key: &'static str| st.errors.with(|e| e.get(key).cloned());
    let replicas_text = move || st.form.with(|f| core_api::topology_replicas_text(&f.base));
    let router_value = move || st.form.with(|f| core_api::router_choice(&f.base).value());
    let summary = move || {
        st.scenario
            .with(|s| s.as_ref().ok().map(core_api::topology_summary))
    };
    view! {
        <fieldset id="topology">
            <legend>"Replicas and router"</legend>
            <div class="grid2">
                <div class="field" class:invalid=move || err("replicas").is_some()>
                    <label for="f-replicas">"Replicas"</label>
                    <div class="input-row">
                        <input id="f-replicas" type="text" inputmode="numeric" autocomplete="off"
                            placeholder="default: GPUs / (TP x DP)"
                            prop:value=replicas_text
                            on:input=move |ev| {
                                let v = event_target_value(&ev);
                                st.form.update(|f| core_api::set_topology_replicas(&mut f.base, &v));
                            }/>
                    </div>
                    <div class="field-error" id="e-replicas" role="alert">{move || err("replicas")}</div>
                </div>
                <div class="field" class:invalid=move || err("router").is_some()>
                    <label for="f-router">"Router"</label>
                    <select id="f-router" prop:value=router_value
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            st.form.update(|f| core_api::set_router_choice(&mut f.base, RouterChoice::from_value(&v)));
                        }>
                        {RouterChoice::ALL.iter().map(|c| view! {
                            <option value=c.value()>{c.label()}</option>
                        }).collect_view()}
                    </select>
                    <div class="field-error" id="e-router" role="alert">{move || err("router")}</div>
                </div>
            </div>
            {move || summary().map(picture)}
        </fieldset>
    }
}

/// Router -> replicas, as SVG (at most 8 replica boxes drawn; the rest are counted).
fn picture(t: TopologySummary) -> impl IntoView {
    let shown = t.replicas.min(8);
    let h = 24 + 30 * shown.max(1);
    let mid = h as f64 / 2.0;
    let boxes = (0..shown)
        .map(|i| {
            let y = 12 + 30 * i;
            let label = if i + 1 == shown && t.replicas > shown {
                format!("... {} replicas in all", t.replicas)
            } else {
                format!("replica {i}: {} GPU(s), API server", t.gpus_per_replica)
            };
            view! {
                <line x1="150" y1=mid.to_string() x2="190" y2=(y + 11).to_string() class="topo-link"/>
                <rect x="190" y=y.to_string() width="250" height="22" rx="4" class="topo-box"/>
                <text x="198" y=(y + 15).to_string() class="topo-text">{label}</text>
            }
        })
        .collect_view();
    view! {
        <svg id="topology-picture" class="topology-picture" role="img"
            attr:data-replicas=t.replicas.to_string()
            attr:aria-label=format!("{} in front of {} replica(s)", t.router, t.replicas)
            viewBox=format!("0 0 450 {h}") width="100%">
            <rect x="4" y=(mid - 14.0).to_string() width="146" height="28" rx="4" class="topo-box"/>
            <text x="12" y=(mid + 4.0).to_string() class="topo-text">{t.router_short.clone()}</text>
            {boxes}
        </svg>
    }
}

/// Per-replica results of the last run (nothing for one replica).
pub(super) fn replica_results(st: State) -> impl IntoView {
    let levels = move || {
        st.report
            .with(|r| r.as_ref().map(|(json, _)| core_api::report_topology(json)))
            .unwrap_or_default()
    };
    move || {
        let levels = levels();
        (!levels.is_empty()).then(|| {
            let router = levels[0].router.clone();
            view! {
                <section id="replica-results">
                    <h3>{format!("Per replica ({router})")}</h3>
                    <table class="results">
                        <thead><tr>
                            <th>"level"</th><th>"replica"</th><th>"routed"</th><th>"completed"</th>
                            <th>"out tok/s"</th><th>"KV use"</th><th>"prefix hit"</th>
                        </tr></thead>
                        <tbody>
                        {levels.into_iter().map(|l| {
                            let imb = l.imbalance.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
                            let level = l.level;
                            let rows = l.replicas.into_iter().map(move |r| view! {
                                <tr>
                                    <td>{level.to_string()}</td>
                                    <td>{r.replica}</td>
                                    <td>{r.routed_requests}</td>
                                    <td>{r.completed_requests}</td>
                                    <td>{format!("{:.1}", r.output_tokens_per_s)}</td>
                                    <td>{format!("{:.3}", r.kv_utilization_mean)}</td>
                                    <td>{r.prefix_cache_hit_rate.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())}</td>
                                </tr>
                            }).collect_view();
                            view! {
                                {rows}
                                <tr class="imbalance"><td>{level.to_string()}</td>
                                    <td colspan="6">{format!("imbalance (max / mean output tok/s): {imb}")}</td></tr>
                            }
                        }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }
        })
    }
}
