//! The CPU KV offload tier on the page (docs/engine.md "CPU KV offload tier"): the engine's
//! `--kv-transfer-config` connector and sizes (`form_offload`), and the per-level `cpu_offload`
//! metrics of the last run (the table `servesim sweep` prints under "CPU KV offload tier"). The
//! tier's capacity line is the capacity card's (`CapacityView::cpu_tier`). A P/D pool's tier uses
//! the same fields (`tier_fields`, laid out in `topology_ui`).

use super::{field_with, State};
use crate::form::Form;
use crate::form_offload::{OffloadForm, OffloadKeys, CONNECTORS, ENGINE_KEYS, KEEP};
use crate::table;
use leptos::prelude::*;

/// The engine's offload tier fields.
pub(super) fn offload_fields(st: State) -> impl IntoView {
    view! {
        <fieldset id="offload">
            <legend>"CPU KV offload tier (--kv-transfer-config)"</legend>
            {tier_fields(st, &ENGINE_KEYS, |f| &f.offload, |f| &mut f.offload)}
            <p class="hint">"OffloadingConnector's cpu_bytes_to_use is the whole engine's (all TP ranks); SimpleCPUOffloadConnector's is per rank and needs prefix caching. A disaggregated pool's tier is set in its pool (stacked on NIXL); other MultiConnector stacks are edited in the Scenario JSON box."</p>
        </fieldset>
    }
}

/// One tier's connector select and sizes, on `k`'s keys (the engine's, or a P/D pool's).
pub(super) fn tier_fields(
    st: State,
    k: &'static OffloadKeys,
    get: fn(&Form) -> &OffloadForm,
    get_mut: fn(&mut Form) -> &mut OffloadForm,
) -> impl IntoView {
    let err = move || st.errors.with(|e| e.get(k.connector).cloned());
    let connector = Memo::new(move |_| st.form.with(|f| get(f).connector.clone()));
    let kept = move || st.form.with(|f| get(f).kept.clone());
    view! {
        <div class="field" class:invalid=move || err().is_some()>
            <label for=format!("f-{}", k.connector)>"Connector"</label>
            <select id=format!("f-{}", k.connector)
                prop:value=move || connector.get()
                on:change=move |ev| { let v = event_target_value(&ev); st.form.update(|f| get_mut(f).connector = v) }>
                {CONNECTORS.iter().map(|(v, l)| view! { <option value=*v>{*l}</option> }).collect_view()}
                <Show when=move || connector.get() == KEEP>
                    <option value=KEEP>{move || format!("as in the scenario JSON ({})", kept())}</option>
                </Show>
            </select>
            <div class="field-error" id=format!("e-{}", k.connector) role="alert">{err}</div>
        </div>
        <Show when=move || { let c = connector.get(); !c.is_empty() && c != KEEP }>
            <div class="grid2">
                {field_with(st, k.cpu_bytes, "cpu_bytes_to_use (blank: the connector's default)".into(), "bytes",
                    move |f: &Form| get(f).cpu_bytes_to_use.clone(), move |f: &mut Form, v| get_mut(f).cpu_bytes_to_use = v)}
                {field_with(st, k.blocks_per_chunk, "blocks_per_chunk (blank: 1)".into(), "",
                    move |f: &Form| get(f).blocks_per_chunk.clone(), move |f: &mut Form, v| get_mut(f).blocks_per_chunk = v)}
            </div>
        </Show>
    }
}

/// The per-level CPU offload metrics of the last run (nothing without a tier).
pub(super) fn offload_results(st: State) -> impl IntoView {
    move || {
        let rows = st.rows.get();
        if rows.iter().all(|l| l.cpu_offload.is_none()) {
            return None;
        }
        let opt =
            |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
        let body = rows
            .iter()
            .filter_map(|l| {
                l.cpu_offload
                    .clone()
                    .map(|c| (table::fmt_level(&l.level), c))
            })
            .map(|(level, c)| {
                view! {
                    <tr>
                        <td>{level}</td><td>{c.cpu_hit_tokens}</td><td>{opt(c.cpu_hit_rate, 3)}</td>
                        <td>{c.loads}</td>
                        <td>{format!("{:.3}", c.loaded_bytes_per_rank as f64 / 1e9)}</td>
                        <td>{format!("{:.3}", c.stored_bytes_per_rank as f64 / 1e9)}</td>
                        <td>{opt(c.load_wait_ms_mean, 2)}</td>
                        <td>{c.host_link_gb_s_mean.map_or_else(|| "no value".into(), |v| format!("{v:.2}"))}</td>
                    </tr>
                }
            })
            .collect_view();
        Some(view! {
            <section id="offload-results">
                <h3>"CPU KV offload tier (bytes per rank over the host link)"</h3>
                <table class="results">
                    <thead><tr>
                        <th>"level"</th><th>"CPU hit tok"</th><th>"CPU hit"</th><th>"loads"</th>
                        <th>"loaded GB"</th><th>"stored GB"</th><th>"wait ms"</th><th>"link GB/s"</th>
                    </tr></thead>
                    <tbody>{body}</tbody>
                </table>
            </section>
        })
    }
}
