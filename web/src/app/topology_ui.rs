//! The page's topology controls (docs/topology.md): replicas of the deployment and the router in
//! front of them, disaggregated prefill/decode pools and their KV transfer (`form_pd`), a small
//! picture of the topology that follows the form, and the per-replica, per-pool and KV-transfer
//! results of the last run (read from the core's `SweepReport`, the tables `servesim sweep`
//! prints). Every value comes from the core through `core_api`; this file only lays it out.

use super::offload_ui::tier_fields;
use super::{field_with, State};
use crate::core_api::{self, PdSummary, RouterChoice, TopologySummary};
use crate::form::Form;
use crate::form_pd::{
    PoolForm, PoolKeys, DECODE_KEYS, KV_LATENCY, KV_NVLINK, KV_PATH, KV_RDMA, PREFILL_KEYS,
};
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
            {pd_fields(st)}
            {move || summary().map(picture)}
        </fieldset>
    }
}

/// The prefill/decode switch, each pool's fields and the KV transfer's.
fn pd_fields(st: State) -> impl IntoView {
    let on = Memo::new(move |_| st.form.with(|f| f.pd.enabled));
    let err = move |key: &'static str| st.errors.with(|e| e.get(key).cloned());
    view! {
        <div class="field">
            <label class="check"><input type="checkbox" id="f-pd_enabled"
                prop:checked=move || on.get()
                on:change=move |ev| {
                    let v = event_target_checked(&ev);
                    st.form.update(|f| f.pd.set_enabled(v));
                }/>" Disaggregated prefill/decode (a prefill pool hands the KV cache to a decode pool)"</label>
        </div>
        <Show when=move || on.get()>
            <div class="pd-pools" id="pd-pools">
                {pool_fields(st, &PREFILL_KEYS, |f| &f.pd.prefill, |f| &mut f.pd.prefill)}
                {pool_fields(st, &DECODE_KEYS, |f| &f.pd.decode, |f| &mut f.pd.decode)}
                <fieldset class="pd-kv">
                    <legend>"KV transfer (NIXL)"</legend>
                    <div class="grid2">
                        <div class="field" class:invalid=move || err(KV_PATH).is_some()>
                            <label for="f-kv_path">"Path"</label>
                            <select id="f-kv_path"
                                prop:value=move || st.form.with(|f| f.pd.kv_path.clone())
                                on:change=move |ev| { let v = event_target_value(&ev); st.form.update(|f| f.pd.kv_path = v) }>
                                <option value="">"auto (NVLink inside one NVLink domain, else RDMA)"</option>
                                <option value="nvlink">"NVLink"</option>
                                <option value="rdma">"RDMA"</option>
                            </select>
                            <div class="field-error" id="e-kv_path" role="alert">{move || err(KV_PATH)}</div>
                        </div>
                        {field_with(st, KV_RDMA, "RDMA per GPU (blank: 400)".into(), "Gb/s",
                            |f: &Form| f.pd.kv_rdma_gbps_per_gpu.clone(), |f: &mut Form, v| f.pd.kv_rdma_gbps_per_gpu = v)}
                        {field_with(st, KV_NVLINK, "NVLink per GPU (blank: the GPU's)".into(), "GB/s",
                            |f: &Form| f.pd.kv_nvlink_gb_s.clone(), |f: &mut Form, v| f.pd.kv_nvlink_gb_s = v)}
                        {field_with(st, KV_LATENCY, "Latency per transfer (blank: 0.05)".into(), "ms",
                            |f: &Form| f.pd.kv_latency_ms.clone(), |f: &mut Form, v| f.pd.kv_latency_ms = v)}
                    </div>
                </fieldset>
            </div>
        </Show>
    }
}

/// One pool's fields (blank = the scenario's GPU, TP, DP, EP and engine).
fn pool_fields(
    st: State,
    k: &'static PoolKeys,
    get: fn(&Form) -> &PoolForm,
    get_mut: fn(&mut Form) -> &mut PoolForm,
) -> impl IntoView {
    let err = move || st.errors.with(|e| e.get(k.pool).cloned());
    let title = if k.role == "prefill" {
        "Prefill pool"
    } else {
        "Decode pool"
    };
    let f = move |key: &'static str,
                  label: &'static str,
                  unit: &'static str,
                  g: fn(&PoolForm) -> &String,
                  s: fn(&mut PoolForm, String)| {
        field_with(
            st,
            key,
            label.into(),
            unit,
            move |f: &Form| g(get(f)).clone(),
            move |f: &mut Form, v| s(get_mut(f), v),
        )
    };
    let tier = if k.role == "prefill" {
        tier_fields(
            st,
            &k.offload,
            |f| &f.pd.prefill.offload,
            |f| &mut f.pd.prefill.offload,
        )
        .into_any()
    } else {
        tier_fields(
            st,
            &k.offload,
            |f| &f.pd.decode.offload,
            |f| &mut f.pd.decode.offload,
        )
        .into_any()
    };
    view! {
        <fieldset class="pd-pool" id=format!("pool-{}", k.role)>
            <legend>{title}</legend>
            <div class="grid2">
                {f(k.replicas, "Workers (replicas)", "", |p| &p.replicas, |p, v| p.replicas = v)}
                {f(k.gpu, "GPU (blank: the scenario's)", "", |p| &p.gpu, |p, v| p.gpu = v)}
            </div>
            <div class="grid4">
                {f(k.tp, "TP", "", |p| &p.tp, |p, v| p.tp = v)}
                {f(k.dp, "DP", "", |p| &p.dp, |p, v| p.dp = v)}
                {f(k.ep, "EP", "", |p| &p.ep, |p, v| p.ep = v)}
                {f(k.max_num_batched_tokens, "--max-num-batched-tokens", "tok", |p| &p.max_num_batched_tokens, |p, v| p.max_num_batched_tokens = v)}
            </div>
            <fieldset class="pd-offload" id=format!("pool-{}-offload", k.role)>
                <legend>"CPU KV offload tier (stacked on NIXL)"</legend>
                {tier}
            </fieldset>
            <div class="field-error" id=format!("e-{}", k.pool) role="alert">{err}</div>
        </fieldset>
    }
}

/// Router -> replicas, or router -> prefill pool -> KV transfer -> decode pool, as SVG.
fn picture(t: TopologySummary) -> AnyView {
    match t.pd.clone() {
        Some(pd) => pd_picture(&t, pd).into_any(),
        None => replicas_picture(t).into_any(),
    }
}

/// Router -> prefill pool -> KV transfer -> decode pool.
fn pd_picture(t: &TopologySummary, pd: PdSummary) -> impl IntoView {
    let pool = |p: &core_api::PoolSummary, role: &str| {
        format!("{role}: {} x {} {}", p.replicas, p.gpus_per_replica, p.gpu)
    };
    let pre = pool(&pd.prefill, "prefill");
    let dec = pool(&pd.decode, "decode");
    let kv = format!("KV transfer ({})", pd.path);
    let label = format!(
        "{} in front of a prefill pool ({pre}), KV transfer over {}, a decode pool ({dec})",
        t.router, pd.path
    );
    view! {
        <svg id="topology-picture" class="topology-picture" role="img"
            attr:data-replicas=(pd.prefill.replicas + pd.decode.replicas).to_string()
            attr:data-pd="true"
            attr:aria-label=label
            viewBox="0 0 450 150" width="100%">
            <rect x="4" y="10" width="146" height="28" rx="4" class="topo-box"/>
            <text x="12" y="28" class="topo-text">{t.router_short.clone()}</text>
            <line x1="150" y1="24" x2="190" y2="24" class="topo-link"/>
            <rect x="190" y="10" width="250" height="28" rx="4" class="topo-box"/>
            <text x="198" y="28" class="topo-text" id="topo-prefill">{pre}</text>
            <line x1="315" y1="38" x2="315" y2="60" class="topo-link"/>
            <rect x="190" y="60" width="250" height="28" rx="4" class="topo-box topo-kv"/>
            <text x="198" y="78" class="topo-text" id="topo-kv">{kv}</text>
            <line x1="315" y1="88" x2="315" y2="110" class="topo-link"/>
            <rect x="190" y="110" width="250" height="28" rx="4" class="topo-box"/>
            <text x="198" y="128" class="topo-text" id="topo-decode">{dec}</text>
        </svg>
    }
}

/// Router -> replicas, as SVG (at most 8 replica boxes drawn; the rest are counted).
fn replicas_picture(t: TopologySummary) -> impl IntoView {
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
            let pools = pool_tables(&levels);
            view! {
                {pools}
                <section id="replica-results">
                    <h3>{format!("Per replica ({router})")}</h3>
                    <table class="results">
                        <thead><tr>
                            <th>"level"</th><th>"pool"</th><th>"replica"</th><th>"routed"</th><th>"completed"</th>
                            <th>"out tok/s"</th><th>"KV use"</th><th>"prefix hit"</th>
                        </tr></thead>
                        <tbody>
                        {levels.into_iter().map(|l| {
                            let imb = l.imbalance.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
                            let level = l.level;
                            let rows = l.replicas.into_iter().map(move |r| view! {
                                <tr>
                                    <td>{level.to_string()}</td>
                                    <td>{r.pool.clone()}</td>
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
                                    <td colspan="7">{format!("imbalance (max / mean output tok/s): {imb}")}</td></tr>
                            }
                        }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }
        })
    }
}

/// The per-pool and KV-transfer tables of a disaggregated run (`servesim sweep` prints the same
/// two tables, `crates/servesim-cli/src/cmd_sweep.rs` `print_pools`); nothing otherwise.
fn pool_tables(levels: &[core_api::topology::TopologyLevel]) -> Option<impl IntoView> {
    if levels.iter().all(|l| l.pools.is_empty()) {
        return None;
    }
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
    let dist = |x: &Option<core_api::topology::Dist>, f: fn(&core_api::topology::Dist) -> f64| {
        x.as_ref()
            .map(|v| format!("{:.3}", f(v)))
            .unwrap_or_else(|| "-".into())
    };
    let pool_rows = levels
        .iter()
        .flat_map(|l| l.pools.iter().map(move |p| (l.level, p.clone())))
        .map(|(level, p)| {
            view! {
                <tr data-pool=p.pool.clone()>
                    <td>{level.to_string()}</td><td>{p.pool.clone()}</td><td>{p.gpus}</td>
                    <td>{p.completed_requests}</td><td>{format!("{:.3}", p.busy_fraction)}</td>
                    <td>{format!("{:.1}", p.prefill_tokens_per_s)}</td><td>{format!("{:.1}", p.output_tokens_per_s)}</td>
                    <td>{format!("{:.1}", p.output_tokens_per_s_per_gpu)}</td>
                    <td>{format!("{:.3}", p.kv_utilization_mean)}</td><td>{format!("{:.3}", p.kv_utilization_peak)}</td>
                    <td>{opt(p.prefix_cache_hit_rate)}</td>
                </tr>
            }
        })
        .collect_view();
    let transfer_rows = levels
        .iter()
        .filter_map(|l| l.transfer.clone().map(|x| (l.level, x)))
        .map(|(level, x)| {
            view! {
                <tr>
                    <td>{level.to_string()}</td><td>{x.transfers}</td><td>{x.nvlink_transfers}</td><td>{x.rdma_transfers}</td>
                    <td>{x.bytes_per_transfer_mean.map(|b| format!("{:.2}", b / 1e6)).unwrap_or_else(|| "-".into())}</td>
                    <td>{dist(&x.transfer_ms, |v| v.mean)}</td><td>{dist(&x.transfer_ms, |v| v.p99)}</td>
                    <td>{dist(&x.link_queue_ms, |v| v.p99)}</td>
                    <td>{dist(&x.block_wait_ms, |v| v.mean)}</td><td>{dist(&x.block_wait_ms, |v| v.p99)}</td>
                    <td>{dist(&x.handoff_ms, |v| v.p99)}</td>
                </tr>
            }
        })
        .collect_view();
    Some(view! {
        <section id="pool-results">
            <h3>"Per pool (over the window)"</h3>
            <table class="results">
                <thead><tr>
                    <th>"level"</th><th>"pool"</th><th>"GPUs"</th><th>"completed"</th><th>"busy"</th>
                    <th>"prefill tok/s"</th><th>"out tok/s"</th><th>"out tok/s/GPU"</th><th>"KV use"</th>
                    <th>"KV peak"</th><th>"prefix hit"</th>
                </tr></thead>
                <tbody>{pool_rows}</tbody>
            </table>
        </section>
        <section id="transfer-results">
            <h3>"KV transfers (completed in the window; ms)"</h3>
            <table class="results">
                <thead><tr>
                    <th>"level"</th><th>"transfers"</th><th>"NVLink"</th><th>"RDMA"</th><th>"MB/transfer"</th>
                    <th>"xfer mean"</th><th>"xfer p99"</th><th>"link-queue p99"</th><th>"block wait mean"</th>
                    <th>"block wait p99"</th><th>"handoff p99"</th>
                </tr></thead>
                <tbody>{transfer_rows}</tbody>
            </table>
        </section>
    })
}
