//! The "vLLM command" box (wasm32 only): paste a `vllm serve ...` command (also
//! `python -m vllm.entrypoints.openai.api_server ...`, `docker run ... vllm/vllm-openai ...`,
//! environment variables in front) or a deployment manifest (YAML, read in the worker); Apply
//! fills the form and lists what happened to every argument and field; the current scenario as the `vllm serve` and `vllm bench serve` commands that would
//! measure it, with copy buttons. The reading and writing of commands is the core's
//! (`servesim_core::vllm::command`), run in the tools worker (`command_tools`, `tools`), so the page's
//! wasm does not carry the command reader and a running sweep does not delay it.

use super::tools::{self, next_id, post};
use super::State;
use crate::browser;
use crate::core_api::Scenario;
use crate::form::Form;
use crate::protocol::{FromWorker, ToWorker, WireArg};
use leptos::prelude::*;
use std::time::Duration;

/// What the last Apply gave.
#[derive(Clone, Debug, PartialEq)]
struct Applied {
    args: Vec<WireArg>,
    notes: Vec<String>,
    error: Option<String>,
    /// The scenario was built and loaded into the form.
    loaded: bool,
}

#[component]
pub(super) fn CommandBox(st: State) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let applied = RwSignal::new(None::<Applied>);
    let serve = RwSignal::new(String::new());
    let bench = RwSignal::new(String::new());
    let parse_id = RwSignal::new(0u32);
    let cmd_id = RwSignal::new(0u32);
    let copied = RwSignal::new(String::new());

    match tools::start() {
        Ok(()) => tools::listen(move |msg| match msg.clone() {
            FromWorker::Parsed {
                id,
                scenario,
                args,
                notes,
                error,
            } if id == parse_id.get_untracked() => {
                let mut error = error;
                let mut loaded = false;
                if let Some(json) = scenario {
                    match Scenario::from_json(&json) {
                        Ok(s) => {
                            st.form.set(Form::from_scenario(&s));
                            loaded = true;
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
                applied.set(Some(Applied {
                    args,
                    notes,
                    error,
                    loaded,
                }));
            }
            FromWorker::Commands {
                id,
                serve: s,
                bench: b,
            } if id == cmd_id.get_untracked() => {
                serve.set(s);
                bench.set(b);
            }
            FromWorker::Error { id, message, .. } if id == cmd_id.get_untracked() => {
                serve.set(format!("(no command: {message})"));
                bench.set(String::new());
            }
            _ => {}
        }),
        Err(e) => applied.set(Some(Applied {
            args: Vec::new(),
            notes: Vec::new(),
            error: Some(e),
            loaded: false,
        })),
    }

    // The commands follow the scenario.
    Effect::new(move |_| {
        if let Ok(s) = st.scenario.get() {
            let id = next_id();
            cmd_id.set(id);
            post(&ToWorker::Commands {
                id,
                scenario: s.to_json(),
            });
        }
    });

    let apply = move |_| {
        let id = next_id();
        parse_id.set(id);
        let base = st
            .scenario
            .get_untracked()
            .unwrap_or_else(|_| Scenario::default_scenario());
        post(&ToWorker::ParseCommand {
            id,
            text: text.get_untracked(),
            base: base.to_json(),
        });
    };
    let copy = move |what: &'static str| {
        let t = if what == "serve" {
            serve.get_untracked()
        } else {
            bench.get_untracked()
        };
        wasm_bindgen_futures::spawn_local(async move {
            let ok = browser::copy_text(&t).await;
            copied.set(if ok {
                "Copied".into()
            } else {
                "Copy failed: select the text and copy it".into()
            });
            set_timeout(
                move || copied.set(String::new()),
                Duration::from_millis(2500),
            );
        });
    };
    view! {
        <details class="tool-box" id="vllm-command-box">
            <summary>"vLLM command or deployment manifest: paste one, or copy this scenario's command"</summary>
            <div class="field">
                <label for="vllm-command">"Paste a vllm serve command (also python -m vllm.entrypoints.openai.api_server, docker run … vllm/vllm-openai, environment variables in front) or a deployment manifest (Kubernetes, LeaderWorkerSet, KServe, Dynamo, llm-d or production-stack YAML)"</label>
                <textarea id="vllm-command" rows="4" spellcheck="false"
                    placeholder="vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-num-seqs 128"
                    prop:value=move || text.get()
                    on:input=move |ev| text.set(event_target_value(&ev))></textarea>
            </div>
            <div class="btn-row">
                <button class="btn small" id="apply-command" on:click=apply>"Apply"</button>
            </div>
            {move || applied.get().map(|a| view! {
                <div id="command-result">
                    {a.error.clone().map(|e| view! { <p class="error-text" id="command-error" role="alert">{e}</p> })}
                    {a.loaded.then(|| view! { <p class="hint" id="command-loaded">"Loaded into the form; settings the command does not mention are kept."</p> })}
                    <ul class="command-args" id="command-args">
                        {a.args.into_iter().map(|x| {
                            let status = x.status.clone();
                            view! {
                                <li data-status=status.clone() data-arg=x.arg.clone()>
                                    <code>{match &x.value { Some(v) => format!("{} {v}", x.arg), None => x.arg.clone() }}</code>
                                    " "<span class=format!("arg-status s-{}", status.replace(' ', "-"))>{status.clone()}</span>
                                    {(!x.detail.is_empty()).then(|| format!(": {}", x.detail))}
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                    <ul class="notes">
                        {a.notes.into_iter().map(|n| view! { <li class="muted">{n}</li> }).collect_view()}
                    </ul>
                </div>
            })}
            <p class="hint">"This scenario as the commands that would measure it:"</p>
            <pre class="command" id="serve-command">{move || serve.get()}</pre>
            <pre class="command" id="bench-command">{move || bench.get()}</pre>
            <div class="btn-row">
                <button class="btn small" id="copy-serve" disabled=move || serve.with(|s| s.is_empty()) on:click=move |_| copy("serve")>"Copy vllm serve command"</button>
                <button class="btn small" id="copy-bench" disabled=move || bench.with(|s| s.is_empty()) on:click=move |_| copy("bench")>"Copy vllm bench serve command"</button>
                <span class="copied" role="status" aria-live="polite">{move || copied.get()}</span>
            </div>
        </details>
    }
}
