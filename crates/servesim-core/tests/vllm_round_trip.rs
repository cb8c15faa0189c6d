//! Scenario -> `vllm serve` command -> scenario is the identity for every scenario in
//! tests/scenarios/. A command is one replica's deployment: the topology (replicas, router,
//! prefill/decode pools), workload and sweep come from the form it is pasted into (the base).

use servesim_core::scenario::Scenario;
use servesim_core::vllm::{parse_command, to_vllm_command};

#[test]
fn every_scenario_file_round_trips_through_its_vllm_serve_command() {
    let dir = format!("{}/../../tests/scenarios", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in names {
        if path.extension().map(|e| e == "json") != Some(true) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let s = Scenario::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let cmd = to_vllm_command(&s);
        let mut base = Scenario::default_scenario();
        base.workload = s.workload.clone();
        base.sweep = s.sweep.clone();
        base.topology = s.topology.clone();
        let p =
            parse_command(&cmd, &base).unwrap_or_else(|e| panic!("{}: {e}\n{cmd}", path.display()));
        let refusals = p.refusals();
        let back = p
            .scenario
            .unwrap_or_else(|| panic!("{}: {refusals:?}\n{cmd}", path.display()));
        assert_eq!(back, s, "{}\n{cmd}", path.display());
        // and the scenario it reads back gives the same JSON text
        assert_eq!(back.to_json(), s.to_json(), "{}", path.display());
        n += 1;
    }
    assert!(n >= 9, "{n} scenario files");
}
