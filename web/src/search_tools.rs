//! The page's configuration search (docs/search.md, docs/web.md "Which deployment?") on the
//! worker side, and its messages. The page sends the panel's options as typed and the scenario;
//! the first search worker writes them as the core's `RawSearch` JSON (`search_form`), validates
//! it into the core's `SearchSpace` and answers with the JSON and the candidates (or the fields
//! at fault); every later message carries that JSON (a worker keeps its `SearchSpace` while the
//! same JSON comes back), evaluates the candidates it is given by index with the core's
//! `search::evaluate`, and one worker assembles the outcomes, in candidate order, with the core's
//! `search::assemble` into the report `servesim search --json` prints. Ranking, pruning and the
//! frontier are the core's; nothing here re-implements them. Outcomes travel between workers
//! with every number as a decimal string in Rust's shortest round-trip form ([`WireOutcome`]):
//! serde_json's default float parser is not exact to the last bit, and the assembled report must
//! equal the CLI's byte for byte whichever worker evaluated which candidate.

use serde::{Deserialize, Serialize};
use servesim_core::search::{
    self, CandidateResult, LevelPoint, OperatingPoint, Outcome, PruneStage, RawSearch, SearchSpace,
};
use std::cell::RefCell;

/// Page -> search worker (externally tagged: `{"search_start":{…}}`, distinct from `ToWorker`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToSearch {
    /// Write the panel's options over the scenario (`base`: its JSON) as the search JSON,
    /// validate it and list its candidates.
    SearchStart {
        id: u32,
        base: String,
        options: Box<crate::search_view::SearchOptions>,
    },
    /// Evaluate candidate `index` of the search (prune = the CLI's default, cheap bounds on).
    SearchEvaluate {
        id: u32,
        search: String,
        index: usize,
    },
    /// Assemble the outcomes (`outcomes[i]` = candidate i's [`WireOutcome`] JSON) into the report.
    SearchAssemble {
        id: u32,
        search: String,
        outcomes: Vec<String>,
    },
}

/// One candidate as the page lists it before the search runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireCandidate {
    pub index: usize,
    pub label: String,
    pub num_gpus: u32,
}

/// Search worker -> page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromSearch {
    /// The search JSON (`servesim search --search FILE`) and its candidates in enumeration
    /// order (the index order of the report).
    SearchCandidates {
        id: u32,
        search: String,
        candidates: Vec<WireCandidate>,
    },
    /// Candidate `index` done: the CLI's outcome word (`evaluated`, `pruned (budget)`, …) for the
    /// progress list and the outcome to hand to the assembler (opaque to the page).
    SearchEvaluated {
        id: u32,
        index: usize,
        word: String,
        outcome: String,
    },
    /// The assembled report: `report` = what `servesim search --json` prints (pretty JSON and a
    /// newline); `links[i]` = candidate i's share-link fragment (`s=v1.…`).
    SearchReport {
        id: u32,
        report: String,
        links: Vec<String>,
    },
    /// The search was refused: messages by the panel's field key (`search_max_gpus`, …;
    /// `search` for the search as a whole).
    SearchError {
        id: u32,
        errors: crate::search_form::SearchFieldErrors,
    },
}

impl ToSearch {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }
}

impl FromSearch {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }
}

/// A number on the wire: Rust's shortest round-trip decimal (`str::parse` gives the same bits).
fn num(x: f64) -> String {
    x.to_string()
}
fn opt(x: Option<f64>) -> Option<String> {
    x.map(num)
}
fn back(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .map_err(|_| format!("bad number `{s}` in a search outcome"))
}
fn back_opt(s: &Option<String>) -> Result<Option<f64>, String> {
    s.as_deref().map(back).transpose()
}

/// One simulated level with exact numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireLevel {
    pub level: String,
    pub passes_sla: bool,
    pub output_tokens_per_s_per_gpu: Option<String>,
    pub e2e_tokens_per_s_per_user: Option<String>,
    pub ttft_ms_p50: Option<String>,
    pub usd_per_m_output_tokens: Option<String>,
    pub usd_per_m_input_tokens: Option<String>,
}

/// An operating point with exact numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WirePoint {
    pub level: String,
    pub basis: String,
    pub output_tokens_per_s: String,
    pub output_tokens_per_s_per_gpu: String,
    pub e2e_tokens_per_s_per_user: Option<String>,
    pub ttft_ms_p50: Option<String>,
    pub usd_per_m_output_tokens: Option<String>,
    pub usd_per_m_input_tokens: Option<String>,
    pub level_in_budget: String,
}

/// The core's `search::Outcome` with exact numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireOutcome {
    Pruned {
        stage: PruneStage,
        reason: String,
    },
    Failed {
        error: String,
    },
    Evaluated {
        levels: Vec<WireLevel>,
        operating_point: Option<Box<WirePoint>>,
        skipped_levels: Vec<String>,
    },
}

impl WireOutcome {
    pub fn of(o: &Outcome) -> WireOutcome {
        match o {
            Outcome::Pruned { stage, reason } => WireOutcome::Pruned {
                stage: *stage,
                reason: reason.clone(),
            },
            Outcome::Failed { error } => WireOutcome::Failed {
                error: error.clone(),
            },
            Outcome::Evaluated {
                levels,
                operating_point,
                skipped_levels,
            } => WireOutcome::Evaluated {
                levels: levels
                    .iter()
                    .map(|l| WireLevel {
                        level: num(l.level),
                        passes_sla: l.passes_sla,
                        output_tokens_per_s_per_gpu: opt(l.output_tokens_per_s_per_gpu),
                        e2e_tokens_per_s_per_user: opt(l.e2e_tokens_per_s_per_user),
                        ttft_ms_p50: opt(l.ttft_ms_p50),
                        usd_per_m_output_tokens: opt(l.usd_per_m_output_tokens),
                        usd_per_m_input_tokens: opt(l.usd_per_m_input_tokens),
                    })
                    .collect(),
                operating_point: operating_point.as_ref().map(|p| {
                    Box::new(WirePoint {
                        level: num(p.level),
                        basis: p.basis.clone(),
                        output_tokens_per_s: num(p.output_tokens_per_s),
                        output_tokens_per_s_per_gpu: num(p.output_tokens_per_s_per_gpu),
                        e2e_tokens_per_s_per_user: opt(p.e2e_tokens_per_s_per_user),
                        ttft_ms_p50: opt(p.ttft_ms_p50),
                        usd_per_m_output_tokens: opt(p.usd_per_m_output_tokens),
                        usd_per_m_input_tokens: opt(p.usd_per_m_input_tokens),
                        level_in_budget: num(p.level_in_budget),
                    })
                }),
                skipped_levels: skipped_levels.iter().map(|x| num(*x)).collect(),
            },
        }
    }

    pub fn to_outcome(&self) -> Result<Outcome, String> {
        Ok(match self {
            WireOutcome::Pruned { stage, reason } => Outcome::Pruned {
                stage: *stage,
                reason: reason.clone(),
            },
            WireOutcome::Failed { error } => Outcome::Failed {
                error: error.clone(),
            },
            WireOutcome::Evaluated {
                levels,
                operating_point,
                skipped_levels,
            } => Outcome::Evaluated {
                levels: levels
                    .iter()
                    .map(|l| {
                        Ok(LevelPoint {
                            level: back(&l.level)?,
                            passes_sla: l.passes_sla,
                            output_tokens_per_s_per_gpu: back_opt(&l.output_tokens_per_s_per_gpu)?,
                            e2e_tokens_per_s_per_user: back_opt(&l.e2e_tokens_per_s_per_user)?,
                            ttft_ms_p50: back_opt(&l.ttft_ms_p50)?,
                            usd_per_m_output_tokens: back_opt(&l.usd_per_m_output_tokens)?,
                            usd_per_m_input_tokens: back_opt(&l.usd_per_m_input_tokens)?,
                        })
                    })
                    .collect::<Result<_, String>>()?,
                operating_point: operating_point
                    .as_ref()
                    .map(|p| {
                        Ok::<_, String>(OperatingPoint {
                            level: back(&p.level)?,
                            basis: p.basis.clone(),
                            output_tokens_per_s: back(&p.output_tokens_per_s)?,
                            output_tokens_per_s_per_gpu: back(&p.output_tokens_per_s_per_gpu)?,
                            e2e_tokens_per_s_per_user: back_opt(&p.e2e_tokens_per_s_per_user)?,
                            ttft_ms_p50: back_opt(&p.ttft_ms_p50)?,
                            usd_per_m_output_tokens: back_opt(&p.usd_per_m_output_tokens)?,
                            usd_per_m_input_tokens: back_opt(&p.usd_per_m_input_tokens)?,
                            level_in_budget: back(&p.level_in_budget)?,
                        })
                    })
                    .transpose()?,
                skipped_levels: skipped_levels
                    .iter()
                    .map(|x| back(x))
                    .collect::<Result<_, String>>()?,
            },
        })
    }
}

thread_local! {
    /// The last search validated, by its JSON (a worker evaluates many candidates of one search).
    static SPACE: RefCell<Option<(String, std::rc::Rc<SearchSpace>)>> = const { RefCell::new(None) };
}

fn space_of(json: &str) -> Result<std::rc::Rc<SearchSpace>, search::SearchError> {
    if let Some(s) = SPACE.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(j, _)| j == json)
            .map(|(_, s)| s.clone())
    }) {
        return Ok(s);
    }
    let space = RawSearch::from_json(json).and_then(|r| r.validate())?;
    let space = std::rc::Rc::new(space);
    SPACE.with(|c| *c.borrow_mut() = Some((json.to_string(), space.clone())));
    Ok(space)
}

/// Candidate `index`'s outcome as the wire carries it (the worker's `SearchEvaluate`).
pub fn evaluate(space: &SearchSpace, index: usize) -> Option<(String, String)> {
    let c = space.candidates.get(index)?;
    let r = search::evaluate(space, c, true);
    let wire = serde_json::to_string(&WireOutcome::of(&r.outcome)).unwrap_or_default();
    Some((r.outcome.summary(), wire))
}

/// The report from every candidate's wire outcome, in candidate order: the core's `assemble`,
/// printed as `servesim search --json` prints it (pretty, then a newline).
pub fn assemble(space: &SearchSpace, outcomes: &[String]) -> Result<String, String> {
    if outcomes.len() != space.candidates.len() {
        return Err(format!(
            "{} outcomes for {} candidates",
            outcomes.len(),
            space.candidates.len()
        ));
    }
    let results = space
        .candidates
        .iter()
        .zip(outcomes)
        .map(|(c, o)| {
            let w: WireOutcome = serde_json::from_str(o).map_err(|e| e.to_string())?;
            Ok(CandidateResult {
                candidate: c.clone(),
                outcome: w.to_outcome()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let report = search::assemble(space, results);
    serde_json::to_string_pretty(&report)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// The worker's answer to one search message.
pub fn answer(msg: &ToSearch) -> FromSearch {
    let written;
    let (id, json) = match msg {
        ToSearch::SearchStart { id, base, options } => {
            match crate::search_form::search_json(options, base) {
                Ok(j) => {
                    written = j;
                    (*id, written.as_str())
                }
                Err(errors) => return FromSearch::SearchError { id: *id, errors },
            }
        }
        ToSearch::SearchEvaluate { id, search, .. }
        | ToSearch::SearchAssemble { id, search, .. } => (*id, search.as_str()),
    };
    let space = match space_of(json) {
        Ok(s) => s,
        Err(e) => {
            return FromSearch::SearchError {
                id,
                errors: crate::search_form::errors_of(&e),
            };
        }
    };
    let err = |message: String| FromSearch::SearchError {
        id,
        errors: [("search".to_string(), message)].into(),
    };
    match msg {
        ToSearch::SearchStart { .. } => FromSearch::SearchCandidates {
            id,
            search: json.to_string(),
            candidates: space
                .candidates
                .iter()
                .map(|c| WireCandidate {
                    index: c.index,
                    label: c.label.clone(),
                    num_gpus: c.num_gpus,
                })
                .collect(),
        },
        ToSearch::SearchEvaluate { index, .. } => match evaluate(&space, *index) {
            Some((word, outcome)) => FromSearch::SearchEvaluated {
                id,
                index: *index,
                word,
                outcome,
            },
            None => err(format!("no candidate {index}")),
        },
        ToSearch::SearchAssemble { outcomes, .. } => match assemble(&space, outcomes) {
            Ok(report) => FromSearch::SearchReport {
                id,
                report,
                links: space
                    .candidates
                    .iter()
                    .map(|c| crate::core_api::fragment_for(&c.scenario))
                    .collect(),
            },
            Err(m) => err(m),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core_api::Scenario;

    /// A small search of the default deployment: two TPs on two GPU types, short levels.
    pub(crate) fn small_search() -> String {
        let mut base = Scenario::default_scenario();
        base.sweep.concurrency = Some(vec![1.0, 8.0]);
        base.sweep.duration_s = Some(20.0);
        base.sweep.warmup_s = Some(2.0);
        base.sweep.sla =
            vec![serde_json::from_str(r#"{"metric":"ttft_ms_p50","op":"<","value":200}"#).unwrap()];
        serde_json::json!({
            "base": serde_json::from_str::<serde_json::Value>(&base.to_json()).unwrap(),
            "gpus": ["H100-SXM", "H200"],
            "max_gpus": 2,
            "tp": [1, 2],
            "refine_steps": 2,
        })
        .to_string()
    }

    #[test]
    fn outcomes_assembled_in_any_order_of_workers_equal_the_clis_report() {
        let json = small_search();
        let space = RawSearch::from_json(&json).unwrap().validate().unwrap();
        let n = space.candidates.len();
        assert!(n >= 4, "{n}");
        // Evaluated in reverse order, as a second worker might finish first.
        let mut outs = vec![String::new(); n];
        for i in (0..n).rev() {
            match answer(&ToSearch::SearchEvaluate {
                id: 1,
                search: json.clone(),
                index: i,
            }) {
                FromSearch::SearchEvaluated { index, outcome, .. } => outs[index] = outcome,
                other => panic!("{other:?}"),
            }
        }
        let native = search::run(&space, true);
        assert!(
            native.summary.evaluated >= 2 && !native.ranking_by_throughput.is_empty(),
            "{:?}",
            native.summary
        );
        let want = serde_json::to_string_pretty(&native).unwrap() + "\n";
        match answer(&ToSearch::SearchAssemble {
            id: 2,
            search: json,
            outcomes: outs,
        }) {
            FromSearch::SearchReport { report, links, .. } => {
                assert!(
                    report == want,
                    "the page's report is the CLI's, byte for byte"
                );
                assert_eq!(links.len(), n);
                assert!(links[0].starts_with("s=v1."));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn awkward_numbers_cross_the_wire_exactly() {
        let o = Outcome::Evaluated {
            levels: vec![LevelPoint {
                level: 0.1 + 0.2,
                passes_sla: true,
                output_tokens_per_s_per_gpu: Some(1.0 / 3.0),
                e2e_tokens_per_s_per_user: Some(f64::MIN_POSITIVE),
                ttft_ms_p50: None,
                usd_per_m_output_tokens: Some(123456.789e-7),
                usd_per_m_input_tokens: Some(9007199254740993.0),
            }],
            operating_point: None,
            skipped_levels: vec![2.0f64.sqrt()],
        };
        let text = serde_json::to_string(&WireOutcome::of(&o)).unwrap();
        let back: WireOutcome = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_outcome().unwrap(), o);
    }

    #[test]
    fn the_first_worker_writes_the_search_json_or_names_the_fields() {
        let options = crate::search_view::SearchOptions {
            gpus: "H100-SXM, H200".into(),
            max_gpus: "2".into(),
            tp: "1, 2".into(),
            refine_steps: "2".into(),
            ..Default::default()
        };
        let base = Scenario::default_scenario().to_json();
        match answer(&ToSearch::SearchStart {
            id: 3,
            base: base.clone(),
            options: Box::new(options.clone()),
        }) {
            FromSearch::SearchCandidates {
                search, candidates, ..
            } => {
                let space = RawSearch::from_json(&search).unwrap().validate().unwrap();
                assert_eq!(candidates.len(), space.candidates.len());
                assert_eq!(candidates[3].label, space.candidates[3].label);
            }
            other => panic!("{other:?}"),
        }
        // A budget of 0 reads as a number but the core refuses it: its message, under the field.
        let bad = crate::search_view::SearchOptions {
            max_gpus: "0".into(),
            weight_precisions: "fp8".into(),
            ..options
        };
        match answer(&ToSearch::SearchStart {
            id: 4,
            base,
            options: Box::new(bad),
        }) {
            FromSearch::SearchError { errors, .. } => {
                let m = &errors["search_max_gpus"];
                assert!(
                    m.contains("`search.max_gpus` = 0") && m.contains("between 1"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
