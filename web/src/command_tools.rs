//! The page's questions answered in the worker (the tools worker): the paste box for a `vllm
//! serve` command or a deployment manifest and the "copy command" buttons
//! ([`ToWorker::ParseCommand`], [`ToWorker::Commands`]: the core's command and manifest readers
//! `servesim_core::vllm::{command, manifest}`, `parse_pasted` telling YAML from a command line), the catalogs' names for the pickers
//! ([`ToWorker::Catalog`]) and the form's check and capacity card ([`ToWorker::Check`]: the
//! resolver, the model and GPU catalogs, the capacity model) and the comparison's import of
//! measured results ([`ToWorker::Import`]: the core's importers). These are large, so they are linked
//! into the worker binary only (ARCHITECTURE.md "page binary"; docs/web.md "Tools worker").
//! Plain Rust, tested natively.

use crate::compare_ui::import_view::run_import;
use crate::protocol::{FromWorker, ToWorker, WireArg, WireImport};
use servesim_core::scenario::Scenario;
use servesim_core::vllm::command::{to_bench_command, to_vllm_command};
use servesim_core::vllm::manifest::parse_pasted;

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
        ToWorker::Catalog { id } => Some(FromWorker::Catalog {
            id: *id,
            models: crate::core_api::models()
                .into_iter()
                .map(|m| m.id)
                .collect(),
            gpus: crate::core_api::gpus(),
        }),
        ToWorker::Check { id, scenario } => Some(check(*id, scenario)),
        ToWorker::Import { id, files, mapping } => Some(FromWorker::Imported {
            id: *id,
            result: Box::new(run_import(files, mapping, None).map(|v| WireImport::from_view(&v))),
        }),
        _ => None,
    }
}

/// The form's check: the core's first error (`form_keys::check`'s source), vLLM's defaults for
/// blank engine fields and, when the scenario resolves, the capacity card, exactly as the page
/// computed them on its main thread before they moved here.
fn check(id: u32, json: &str) -> FromWorker {
    let (error, defaults, capacity) = match Scenario::from_json(json) {
        Err(e) => (Some((e.field(), e.to_string())), Vec::new(), None),
        Ok(s) => {
            let defaults = crate::core_api::engine_defaults(&s)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            match s.resolve() {
                Err(e) => (Some((e.field(), e.to_string())), defaults, None),
                Ok(_) => (None, defaults, Some(crate::core_api::capacity(&s))),
            }
        }
    };
    FromWorker::Checked {
        id,
        scenario: json.to_string(),
        error,
        defaults,
        capacity,
    }
}

/// Reads a pasted command against the form's scenario (`base`: the settings a command does not
/// mention, such as the GPU and the workload, stay as they are).
fn parse(id: u32, text: &str, base: &str) -> FromWorker {
    let base = Scenario::from_json(base).unwrap_or_else(|_| Scenario::default_scenario());
    match parse_pasted(text, &base) {
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
    use crate::compare_ui::import_view::SourceFile;
    use servesim_core::compare::ColumnMapping;

    fn over_json(msg: ToWorker) -> FromWorker {
        let msg = ToWorker::from_json(&msg.to_json()).unwrap();
        FromWorker::from_json(&answer(&msg).unwrap().to_json()).unwrap()
    }

    /// A real export from `servesim-core/tests/data/imports` (README there: its source).
    fn import_fixture(name: &str) -> SourceFile {
        let path = format!(
            "{}/../crates/servesim-core/tests/data/imports/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        SourceFile {
            name: name.into(),
            text: std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        }
    }

    #[test]
    fn an_import_in_the_worker_reaches_the_page_bit_for_bit() {
        // Two `vllm bench serve --save-result` files (one per level) and the user's mapping:
        // the page gets exactly what the importer returns in-process, floats to the last bit.
        let files = vec![
            import_fixture("vllm_c8.json"),
            import_fixture("vllm_c16.json"),
        ];
        let mut mapping = ColumnMapping::new();
        mapping.insert("p99_ttft_ms".into(), None);
        let native = run_import(&files, &mapping, None);
        let FromWorker::Imported { id, result } = over_json(ToWorker::Import {
            id: 7,
            files: files.clone(),
            mapping: mapping.clone(),
        }) else {
            panic!("an Imported answer")
        };
        assert_eq!(id, 7);
        let result = result.map(WireImport::into_view);
        let view = result.as_ref().expect("the fixtures import");
        assert_eq!(view.imported.runs.len(), 1);
        assert_eq!(view.imported.runs[0].levels.len(), 2);
        assert!(view.imported.runs[0].levels[0].metrics.len() >= 5);
        for (a, b) in view.imported.runs[0]
            .levels
            .iter()
            .zip(&native.as_ref().unwrap().imported.runs[0].levels)
        {
            for (m, v) in &a.metrics {
                assert_eq!(v.to_bits(), b.metrics[m].to_bits(), "{m:?}");
            }
        }
        assert_eq!(result, native);
        // A failure comes back with its location.
        let bad = vec![SourceFile {
            name: "pasted".into(),
            text: "concurrency,ttft_ms_p50\n1,5\n2,x\n".into(),
        }];
        let FromWorker::Imported { result, .. } = over_json(ToWorker::Import {
            id: 8,
            files: bad.clone(),
            mapping: ColumnMapping::new(),
        }) else {
            panic!("an Imported answer")
        };
        let failure = result.expect_err("a bad cell");
        assert_eq!(
            Err(failure.clone()),
            run_import(&bad, &ColumnMapping::new(), None)
        );
        assert_eq!((failure.line, failure.column), (Some(3), Some(2)));
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
        let native =
            servesim_core::vllm::parse_command(text, &Scenario::default_scenario()).unwrap();
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
        let back = servesim_core::vllm::parse_command(&serve, &s)
            .unwrap()
            .scenario
            .unwrap();
        assert_eq!(back, s, "scenario -> vllm serve -> scenario");
    }

    #[test]
    fn the_check_answer_is_the_cores_check_defaults_and_capacity_over_the_wire() {
        let s = Scenario::default_scenario();
        let FromWorker::Checked {
            id,
            scenario,
            error,
            defaults,
            capacity,
        } = over_json(ToWorker::Check {
            id: 5,
            scenario: s.to_json(),
        })
        else {
            panic!("a Checked answer")
        };
        assert_eq!((id, scenario, error), (5, s.to_json(), None));
        let want: Vec<(String, String)> = crate::core_api::engine_defaults(&s)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(defaults, want);
        assert_eq!(capacity, Some(crate::core_api::capacity(&s)));
        // TP 3 cannot split Llama-3.1-8B's 32 heads: the error names the field, no capacity.
        let bad = Scenario {
            num_gpus: Some(3),
            tp: 3,
            ..Scenario::default_scenario()
        };
        let FromWorker::Checked {
            error, capacity, ..
        } = over_json(ToWorker::Check {
            id: 6,
            scenario: bad.to_json(),
        })
        else {
            panic!()
        };
        let (path, message) = error.expect("an error");
        assert_eq!(crate::form_keys::form_key(&bad, &path), "tp");
        assert_eq!(
            crate::form_keys::check(&bad).get("tp"),
            Some(&message),
            "the page shows the core's message"
        );
        assert_eq!(capacity, None);
    }

    #[test]
    fn the_catalog_answer_lists_the_cores_models_and_gpus() {
        let FromWorker::Catalog { id, models, gpus } = over_json(ToWorker::Catalog { id: 2 })
        else {
            panic!()
        };
        assert_eq!(id, 2);
        assert_eq!(
            models,
            servesim_core::model::ids::known_ids()
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        );
        assert_eq!(gpus, crate::core_api::gpus());
        assert!(gpus.iter().any(|g| g.id == "H200"));
    }

    #[test]
    fn a_pasted_manifest_fills_the_pools_and_lists_every_field() {
        // llm-d/llm-d guides/pd-disaggregation/ms-pd/values.yaml (0b8cde6), as in
        // tests/manifests/ (cited there) and the core's manifest tests.
        let text = include_str!("../../tests/manifests/llm-d-pd-disaggregation-values.yaml");
        let FromWorker::Parsed {
            scenario,
            args,
            error,
            ..
        } = over_json(ToWorker::ParseCommand {
            id: 5,
            text: text.into(),
            base: Scenario::default_scenario().to_json(),
        })
        else {
            panic!("a Parsed answer")
        };
        assert_eq!(error, None);
        let s = Scenario::from_json(&scenario.expect("a scenario")).unwrap();
        let t = s.topology.as_ref().unwrap();
        assert_eq!(t.prefill.as_ref().unwrap().replicas, Some(2));
        assert_eq!(t.decode.as_ref().unwrap().replicas, Some(1));
        let native =
            servesim_core::vllm::parse_manifest(text, &Scenario::default_scenario()).unwrap();
        assert_eq!(s, native.scenario.unwrap());
        assert_eq!(args.len(), native.args.len());
        assert!(args
            .iter()
            .any(|a| a.arg == "prefill: prefill.replicas" && a.status == "understood"));
    }
}
