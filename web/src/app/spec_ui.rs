//! Speculative decoding on the page (docs/engine.md "Speculative decoding"): the engine's
//! `--speculative-config` and the acceptance (`form_spec`), and the per-level `spec_decode`
//! metrics of the last run (realised acceptance, drafts, per-position rates, ITL per streamed
//! chunk and per token). The drafter's capacity line is the capacity card's
//! (`CapacityView::drafter`).

use super::{field_with, select, State};
use crate::form::Form;
use crate::form_spec::{
    methods, takes_model, ACCEPTANCE, ACCEPTANCE_KINDS, DRAFT_MODEL, KEEP, MAX_SPECULATIVE_TOKENS,
    MEAN, METHOD, NUM_TOKENS, PMF, RATES, VALUES,
};
use crate::table;
use leptos::prelude::*;

fn list_field(
    st: State,
    key: &'static str,
    label: &'static str,
    get: fn(&Form) -> String,
    set: fn(&mut Form, String),
) -> impl IntoView {
    field_with(st, key, label.into(), "", get, set)
}

/// The speculative decoding fieldset.
pub(super) fn spec_fields(st: State) -> impl IntoView {
    let method = Memo::new(move |_| st.form.with(|f| f.spec.method.clone()));
    let kind = Memo::new(move |_| st.form.with(|f| f.spec.acceptance.clone()));
    let on = move || !method.get().trim().is_empty();
    let pd = move || st.form.with(|f| f.pd.enabled);
    // The core's drafters, plus a spelling the scenario states that the list lacks (an alias
    // such as `deepseek_mtp`), so the select shows what the scenario says.
    let method_opts = move || {
        let mut v: Vec<(String, String)> = methods()
            .into_iter()
            .map(|m| {
                let l = if m.is_empty() { "none" } else { m };
                (m.to_string(), l.to_string())
            })
            .collect();
        let cur = method.get();
        if !v.iter().any(|(m, _)| *m == cur) {
            v.push((cur.clone(), cur));
        }
        v
    };
    let err = move || st.errors.with(|e| e.get(METHOD).cloned());
    let mut kinds: Vec<(String, String)> = ACCEPTANCE_KINDS
        .iter()
        .map(|(v, l)| (v.to_string(), l.to_string()))
        .collect();
    kinds.push((KEEP.into(), "as in the scenario JSON".into()));
    kinds.insert(0, (String::new(), "not stated".into()));
    // Fields are always in the page and hidden when they do not apply (one `hidden` attribute
    // each, not a `<Show>`: every `<Show>` compiles its own view tree into the page binary).
    view! {
        <fieldset id="spec">
            <legend>"Speculative decoding (--speculative-config)"</legend>
            <div class="grid2">
                <div class="field" class:invalid=move || err().is_some()>
                    <label for=format!("f-{METHOD}")>"method"</label>
                    <select id=format!("f-{METHOD}")
                        prop:value=move || method.get()
                        on:change=move |ev| { let v = event_target_value(&ev); st.form.update(|f| f.spec.set_method(v)) }>
                        {move || method_opts().into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                    </select>
                    <div class="field-error" id=format!("e-{METHOD}") role="alert">{err}</div>
                </div>
                <div hidden=move || !on()>
                    {list_field(st, NUM_TOKENS, TOKENS_LABEL, |f| f.spec.num_speculative_tokens.clone(), |f, v| f.spec.num_speculative_tokens = v)}
                </div>
            </div>
            <div hidden=move || !takes_model(&method.get())>
                {list_field(st, DRAFT_MODEL, "model (draft_model: a catalog model id; EAGLE: the head's name)", |f| f.spec.model.clone(), |f, v| f.spec.model = v)}
            </div>
            <div hidden=move || !on()>
                {select(st, ACCEPTANCE, "Acceptance (servesim's input: vLLM measures it)", kinds,
                    |f| f.spec.acceptance.clone(), |f, v| f.spec.acceptance = v)}
                <div class="grid2">
                    <div hidden=move || !matches!(kind.get().as_str(), "mean" | "values")>
                        {list_field(st, MEAN, "mean acceptance length (1 + accepted / drafts)", |f| f.spec.mean.clone(), |f, v| f.spec.mean = v)}
                    </div>
                    <div hidden=move || kind.get() != "values">
                        {list_field(st, VALUES, "accepted values (one, or two adjacent: 2, 3)", |f| f.spec.values.clone(), |f, v| f.spec.values = v)}
                    </div>
                    <div hidden=move || kind.get() != "rates">
                        {list_field(st, RATES, "rate per position (k values, non-increasing)", |f| f.spec.rates.clone(), |f, v| f.spec.rates = v)}
                    </div>
                    <div hidden=move || kind.get() != "pmf">
                        {list_field(st, PMF, "P(accepted = j), j = 0..k (sums to 1)", |f| f.spec.pmf.clone(), |f, v| f.spec.pmf = v)}
                    </div>
                </div>
            </div>
            <p class="hint">"Each decode step verifies 1 + k tokens and draws the accepted drafts per request from this distribution (seeded). Mean alone: each position accepted with the same chance, a draft only after all before it. vLLM's rate_i = P(at least i + 1 accepted); mean acceptance length = 1 + the sum of the rates."</p>
            <p class="hint" id="spec-pd-note" hidden=move || !(pd() && on())>"Disaggregated: the decode pool runs the drafter; the prefill pool runs none (its requests emit one token), so its speculative_config is dropped."</p>
        </fieldset>
    }
}

/// The label of `num_speculative_tokens`, with the core's range.
const TOKENS_LABEL: &str = "num_speculative_tokens (1 to 32)";
const _: () = assert!(
    MAX_SPECULATIVE_TOKENS == 32,
    "TOKENS_LABEL states the core's range"
);

/// The per-level speculative decoding metrics of the last run (nothing without speculation).
pub(super) fn spec_results(st: State) -> impl IntoView {
    move || {
        let rows = st.rows.get();
        if rows.iter().all(|l| l.spec_decode.is_none()) {
            return None;
        }
        let opt =
            |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "—".into());
        let body = rows
            .iter()
            .filter_map(|l| l.spec_decode.clone().map(|s| (l, s)))
            .map(|(l, s)| {
                let rates = s
                    .acceptance_rate_per_pos
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                view! {
                    <tr>
                        <td>{table::fmt_level(&l.level)}</td>
                        <td class="num">{opt(s.mean_acceptance_length, 3)}</td>
                        <td class="num">{opt(s.draft_acceptance_rate, 3)}</td>
                        <td class="num">{s.num_drafts}</td><td class="num">{s.num_draft_tokens}</td>
                        <td class="num">{s.num_accepted_tokens}</td><td>{rates}</td>
                        <td class="num">{opt(l.itl_ms.map(|d| d.p50), 2)}</td>
                        <td class="num">{opt(l.itl_per_token_ms.map(|d| d.p50), 2)}</td>
                        <td class="num">{opt(l.tpot_ms_mean, 2)}</td>
                    </tr>
                }
            })
            .collect_view();
        Some(view! {
            <section id="spec-results">
                <h3>"Speculative decoding (realised in each level's window)"</h3>
                <table class="results">
                    <thead><tr>
                        <th>"level"</th><th>"mean acc. length"</th><th>"draft acc. rate"</th><th>"drafts"</th>
                        <th>"draft tok"</th><th>"accepted tok"</th><th>"rate per position"</th>
                        <th>"ITL p50 / chunk"</th><th>"ITL p50 / token"</th><th>"TPOT mean"</th>
                    </tr></thead>
                    <tbody>{body}</tbody>
                </table>
                <p class="hint">"ms. ITL per chunk is the gap between streamed chunks (vllm bench serve's ITL; a chunk carries 1 + accepted tokens); per token, a chunk of n tokens after a gap g counts n times g / n. TPOT = (E2E − TTFT) / (output tokens − 1)."</p>
            </section>
        })
    }
}
