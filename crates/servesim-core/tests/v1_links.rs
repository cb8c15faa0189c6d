//! Version-1 compatibility: share links (`#s=v1...`) exactly as `share.rs` produced them before
//! scenario version 2 and the topology plan, with the sweep JSON they gave
//! (`tests/golden/v1_links/NAME.link` and `NAME.json`). Each link must still decode, open and
//! give the same report byte for byte. Recorded before the change with `RECORD_V1_LINKS=1`
//! (which writes both files from the scenarios below); never re-record them to make a change pass.

use servesim_core::scenario::{Scenario, SweepReport};
use servesim_core::share;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/v1_links")
}

/// The scenarios the fixtures were made from (used only when recording).
fn scenario_of(name: &str) -> Scenario {
    let mut s = Scenario::default_scenario();
    match name {
        // The page's first view, as its link says today.
        "default" => {}
        // DP=2 MoE on 2 GPUs (two engines behind vLLM's internal DP balancer), chat endpoint,
        // open loop with shared prefixes.
        "qwen3moe_dp2_chat_poisson" => {
            let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
                "../../tests/golden/scenarios/qwen3moe_2xh100_dp2_shared_prefix_poisson.json",
            ))
            .unwrap();
            s = Scenario::from_json(&text).unwrap();
            s.endpoint = Some(servesim_core::scenario::Endpoint::Chat);
        }
        // Agentic preset on gpt-oss (hybrid sliding window), closed loop, short levels.
        "gptoss_agentic_closed" => {
            let text = std::fs::read_to_string(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../tests/golden/scenarios/gptoss20b_h100_agentic.json"),
            )
            .unwrap();
            s = Scenario::from_json(&text).unwrap();
            s.sweep.concurrency = Some(vec![4.0, 32.0]);
            s.sweep.request_rates = None;
            s.workload.arrival = servesim_core::workload::RawArrival::ClosedLoop {
                concurrency: 1.0,
                think_time_s: None,
            };
            s.sweep.duration_s = Some(60.0);
            s.sweep.warmup_s = Some(5.0);
        }
        other => panic!("no fixture scenario {other}"),
    }
    s
}

const NAMES: [&str; 3] = [
    "default",
    "qwen3moe_dp2_chat_poisson",
    "gptoss_agentic_closed",
];

fn report_of_link(link: &str) -> String {
    let json = share::decode(link).expect("link decodes");
    let s = Scenario::from_json(&json).expect("link opens");
    let r = s.resolve().expect("resolves");
    let res = r.run().expect("runs");
    SweepReport::new(&s, &r, &res).to_json_pretty()
}

#[test]
fn v1_links_open_and_give_identical_reports() {
    if std::env::var("RECORD_V1_LINKS").is_ok_and(|v| v == "1") {
        for n in NAMES {
            let link = share::encode(&scenario_of(n).to_json());
            std::fs::write(dir().join(format!("{n}.link")), format!("{link}\n")).unwrap();
            std::fs::write(dir().join(format!("{n}.json")), report_of_link(&link)).unwrap();
        }
        return;
    }
    for n in NAMES {
        let link = std::fs::read_to_string(dir().join(format!("{n}.link"))).unwrap();
        let link = link.trim();
        assert!(link.starts_with("v1."), "{n}: fixture is a v1 link");
        let want = std::fs::read_to_string(dir().join(format!("{n}.json"))).unwrap();
        let got = report_of_link(link);
        assert!(
            got == want,
            "{n}: the v1 link no longer gives the recorded report"
        );
    }
}
