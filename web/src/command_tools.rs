//! The page's `vllm serve` paste box and "copy command" buttons, answered in the worker: the
//! core's command reader (`servesim_core::vllm::command`) is large, so it is linked into the
//! worker binary only and the page asks for it with [`ToWorker::ParseCommand`] and
//! [`ToWorker::Commands`] (docs/web.md "vLLM commands"). Plain Rust, tested natively.

use crate::protocol::{FromWorker, ToWorker, WireArg};
use servesim_core::scenario::Scenario;
use servesim_core::vllm::command::{parse_command, to_bench_command, to_vllm_command};

/// The answer to a command request (None for every other message).
pub fn answer(msg: &ToWorker) -> Option<FromWorker> {
    match msg {
        ToWorker::ParseCommand { id, text, base } => Some(parse(*id, text, base)),
        ToWorker::Commands { id, scenario } => Some(match Scenario::from_json(scenario) {
            Ok(s) => FromWorker::Commands {
                id: *id,
                serve: to_vllm_command(&s),
                bench: to_bench_command(&s),
            },
            Err(e) => FromWorker::Error {
                id: *id,
                field: Some(e.field()),
                message: e.to_string(),
            },
        }),
        _ => None,
    }
}

/// Reads a pasted command against the form's scenario (`base`: the settings a command does not
/// mention, such as the GPU and the workload, stay as they are).
fn parse(id: u32, text: &str, base: &str) -> FromWorker {
    let base = Scenario::from_json(base).unwrap_or_else(|_| Scenario::default_scenario());
    match parse_command(text, &base) {
        Ok(p) => FromWorker::Parsed {
            id,
            scenario: p.scenario.as_ref().map(Scenario::to_json),
            args: p
                .args
                .iter()
                .map(|a| WireArg {
                    arg: a.arg.clone(),
                    value: a.value.clone(),
                    status: a.status.label().to_string(),
                    detail: a.detail.clone(),
                })
                .collect(),
            notes: p.notes,
            error: None,
        },
        Err(e) => FromWorker::Parsed {
            id,
            scenario: None,
            args: Vec::new(),
            notes: Vec::new(),
            error: Some(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over_json(msg: ToWorker) -> FromWorker {
        let msg = ToWorker::from_json(&msg.to_json()).unwrap();
        FromWorker::from_json(&answer(&msg).unwrap().to_json()).unwrap()
    }

    #[test]
    fn a_pasted_recipe_command_fills_the_scenario_and_lists_every_argument() {
        // vllm-project/recipes `DeepSeek/DeepSeek-V3.md` (snapshot 8959cf6), as in the core's
        // recipe table (crates/servesim-core/src/vllm/recipe_tests.rs).
        let text = "vllm serve deepseek-ai/DeepSeek-R1-0528 \\\n  --trust-remote-code \\\n  --tensor-parallel-size 8 \\\n  --enable-expert-parallel";
        let base = Scenario::default_scenario().to_json();
        let FromWorker::Parsed {
            id,
            scenario,
            args,
            error,
            ..
        } = over_json(ToWorker::ParseCommand {
            id: 3,
            text: text.into(),
            base,
        })
        else {
            panic!("a Parsed answer")
        };
        assert_eq!((id, error), (3, None));
        let s = Scenario::from_json(&scenario.expect("a scenario")).unwrap();
        assert_eq!((s.tp, s.ep), (8, 8));
        let native = parse_command(text, &Scenario::default_scenario()).unwrap();
        assert_eq!(
            s,
            native.scenario.unwrap(),
            "the worker answers the core's parse"
        );
        let statuses: Vec<(&str, &str)> = args
            .iter()
            .map(|a| (a.arg.as_str(), a.status.as_str()))
            .collect();
        assert_eq!(statuses.len(), native.args.len());
        assert!(
            statuses.contains(&("--trust-remote-code", "ignored")),
            "{statuses:?}"
        );
        assert!(
            statuses.contains(&("--tensor-parallel-size", "understood")),
            "{statuses:?}"
        );
    }

    #[test]
    fn unreadable_text_is_an_error_not_a_panic() {
        let FromWorker::Parsed {
            scenario, error, ..
        } = over_json(ToWorker::ParseCommand {
            id: 1,
            text: "vllm serve 'unclosed".into(),
            base: "{".into(),
        })
        else {
            panic!()
        };
        assert_eq!(scenario, None);
        assert!(error.unwrap().contains("quote"));
    }

    #[test]
    fn commands_of_a_scenario_are_the_cores_and_read_back_to_it() {
        let s = Scenario::default_scenario();
        let FromWorker::Commands { id, serve, bench } = over_json(ToWorker::Commands {
            id: 4,
            scenario: s.to_json(),
        }) else {
            panic!()
        };
        assert_eq!(id, 4);
        assert_eq!(serve, to_vllm_command(&s));
        assert_eq!(bench, to_bench_command(&s));
        // The ServeSim-only fields ride in a `# servesim:` comment line the reader understands.
        assert!(
            serve.lines().any(|l| l.starts_with("vllm serve ")),
            "{serve}"
        );
        assert!(bench.contains("vllm bench serve"), "{bench}");
        let back = parse_command(&serve, &s).unwrap().scenario.unwrap();
        assert_eq!(back, s, "scenario -> vllm serve -> scenario");
    }
}
