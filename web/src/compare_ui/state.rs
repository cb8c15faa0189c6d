//! The comparison's plain state (no browser): what the user typed (kept in localStorage so a
//! reload or an import error never loses it), each arm's pairing, and the assembly of what gets
//! scored.

use crate::core_api::compare::{
    parse_kv_cache_tokens, score_all, ColumnMapping, ComparisonReport, MeasuredRun,
    PredictedSeries, ScoreOptions,
};
use crate::core_api::metric::MetricId;
use crate::core_api::scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::import_view::SourceFile;

/// localStorage key of [`CompareInput`].
pub const STORAGE_KEY: &str = "servesim.compare.v1";

/// A level the user excluded from scoring, with the reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exclusion {
    pub level: f64,
    pub reason: String,
}

/// How one arm is set up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArmSetup {
    /// Canonical scenario JSON when pinned; `None` = pair with the page's current scenario.
    #[serde(default)]
    pub scenario: Option<String>,
    /// Pasted vLLM start-up log (for "GPU KV cache size: N tokens").
    #[serde(default)]
    pub kv_log: String,
    #[serde(default)]
    pub exclusions: Vec<Exclusion>,
}

/// Everything the user entered, persisted as JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareInput {
    /// The pasted text (kept even when it does not import).
    #[serde(default)]
    pub pasted: String,
    /// Uploaded files (name, text); they replace the pasted text while present.
    #[serde(default)]
    pub files: Vec<SourceFile>,
    /// Header -> metric name, or "" to ignore the column.
    #[serde(default)]
    pub mapping: BTreeMap<String, String>,
    #[serde(default)]
    pub arms: BTreeMap<String, ArmSetup>,
}

impl CompareInput {
    /// The inputs the importer reads: the uploaded files, else the pasted text.
    pub fn sources(&self) -> Vec<SourceFile> {
        if !self.files.is_empty() {
            self.files.clone()
        } else if self.pasted.trim().is_empty() {
            Vec::new()
        } else {
            vec![SourceFile {
                name: "pasted".into(),
                text: self.pasted.clone(),
            }]
        }
    }

    /// The core's mapping type from the stored names (unknown names are dropped with the
    /// header listed in the returned vector).
    pub fn column_mapping(&self) -> (ColumnMapping, Vec<String>) {
        let mut m = ColumnMapping::new();
        let mut bad = Vec::new();
        for (h, name) in &self.mapping {
            if name.is_empty() {
                m.insert(h.clone(), None);
            } else if let Some(id) = MetricId::from_name(name) {
                m.insert(h.clone(), Some(id));
            } else {
                bad.push(h.clone());
            }
        }
        (m, bad)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("input serialises")
    }

    /// Reads the stored input; a damaged entry gives an empty input (and the reason).
    pub fn from_json(s: &str) -> Result<CompareInput, String> {
        serde_json::from_str(s).map_err(|e| format!("the saved comparison could not be read: {e}"))
    }
}

/// One arm ready to predict: its measured run (exclusions and logged KV applied) and scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmPlan {
    pub run: MeasuredRun,
    /// The scenario predictions come from (pinned, else the current one).
    pub scenario: Scenario,
    pub pinned: bool,
    /// A problem with this arm's setup (bad pinned scenario, bad log) shown beside it.
    pub problems: Vec<String>,
}

/// Applies each arm's setup to the measured runs.
pub fn plan_arms(
    runs: &[MeasuredRun],
    arms: &BTreeMap<String, ArmSetup>,
    current: Option<&Scenario>,
) -> Vec<Result<ArmPlan, String>> {
    runs.iter()
        .map(|r| {
            let setup = arms.get(&r.arm).cloned().unwrap_or_default();
            let mut run = r.clone();
            let mut problems = Vec::new();
            for e in &setup.exclusions {
                if !run.exclude(e.level, &e.reason) {
                    problems.push(format!("excluded level {} is not measured", e.level));
                }
            }
            if !setup.kv_log.trim().is_empty() {
                match parse_kv_cache_tokens(&setup.kv_log) {
                    Ok(Some(n)) => run.kv_cache_tokens_logged = Some(n),
                    Ok(None) => problems.push(
                        "the pasted log has no \"GPU KV cache size: N tokens\" line".to_string(),
                    ),
                    Err(e) => problems.push(e.to_string()),
                }
            }
            let (scenario, pinned) = match &setup.scenario {
                Some(json) => (
                    Scenario::from_json(json)
                        .map_err(|e| format!("arm \"{}\": its scenario: {e}", r.arm))?,
                    true,
                ),
                None => (
                    current.cloned().ok_or_else(|| {
                        format!(
                            "arm \"{}\": the page's scenario has errors; fix them or pin a scenario to this arm",
                            r.arm
                        )
                    })?,
                    false,
                ),
            };
            Ok(ArmPlan {
                run,
                scenario,
                pinned,
                problems,
            })
        })
        .collect()
}

/// A finished (or failed) prediction of one arm.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The scenario JSON it was made for, and the levels; a plan that differs makes it stale.
    pub scenario_json: String,
    pub levels: Vec<f64>,
    pub result: Result<PredictedSeries, String>,
}

impl Prediction {
    /// True when this prediction still belongs to the plan (same scenario, covers its levels).
    pub fn matches(&self, plan: &ArmPlan) -> bool {
        self.scenario_json == plan.scenario.to_json()
            && plan.run.levels.iter().all(|l| {
                self.levels
                    .iter()
                    .any(|p| crate::core_api::compare::levels_equal(*p, l.level))
            })
    }
}

/// The report of the arms that could be scored, and (arm, why) for the others.
pub type Scored = (Option<ComparisonReport>, Vec<(String, String)>);

/// Scores every arm that has a matching, successful prediction; the others are listed with why.
pub fn score(plans: &[ArmPlan], predictions: &BTreeMap<String, Prediction>) -> Scored {
    let mut pairs = Vec::new();
    let mut missing = Vec::new();
    for p in plans {
        match predictions.get(&p.run.arm) {
            Some(pr) if pr.matches(p) => match &pr.result {
                Ok(series) => pairs.push((p.run.clone(), series.clone())),
                Err(e) => missing.push((p.run.arm.clone(), e.clone())),
            },
            Some(_) => missing.push((
                p.run.arm.clone(),
                "the scenario or levels changed since the last prediction: run the predictions again"
                    .into(),
            )),
            None => missing.push((p.run.arm.clone(), "not predicted yet".into())),
        }
    }
    if pairs.is_empty() {
        return (None, missing);
    }
    match score_all(&pairs, &ScoreOptions::default()) {
        Ok(r) => (Some(r), missing),
        Err(e) => {
            missing.push(("(all)".into(), e.to_string()));
            (None, missing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::compare::{import_text, ImportOptions, LevelKind};

    fn runs() -> Vec<MeasuredRun> {
        import_text(
            "arm,concurrency,output_throughput\nTP1,8,1000\nTP1,16,1800\nTP2,8,1500\n",
            &ImportOptions::default(),
        )
        .unwrap()
        .runs
    }

    fn series(points: &[(f64, f64)]) -> PredictedSeries {
        PredictedSeries {
            level_kind: LevelKind::Concurrency,
            points: points
                .iter()
                .map(|(l, v)| (*l, [(MetricId::OutputTokensPerS, *v)].into_iter().collect()))
                .collect(),
            kv_capacity_tokens: Some(200_000),
            evidence: None,
        }
    }

    #[test]
    fn arms_follow_the_current_scenario_unless_pinned() {
        let cur = Scenario::default_scenario();
        let mut tp2 = cur.clone();
        tp2.tp = 2;
        let mut arms = BTreeMap::new();
        arms.insert(
            "TP2".to_string(),
            ArmSetup {
                scenario: Some(tp2.to_json()),
                kv_log: "INFO ... GPU KV cache size: 100,000 tokens".into(),
                exclusions: vec![],
            },
        );
        arms.insert(
            "TP1".to_string(),
            ArmSetup {
                exclusions: vec![Exclusion {
                    level: 16.0,
                    reason: "client-bound".into(),
                }],
                ..ArmSetup::default()
            },
        );
        let plans: Vec<ArmPlan> = plan_arms(&runs(), &arms, Some(&cur))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(plans[0].scenario, cur);
        assert!(!plans[0].pinned);
        assert_eq!(
            plans[0].run.levels[1].excluded.as_deref(),
            Some("client-bound")
        );
        assert_eq!(plans[1].scenario.tp, 2);
        assert_eq!(plans[1].run.kv_cache_tokens_logged, Some(100_000));
        // Without a valid current scenario an unpinned arm cannot be planned.
        assert!(plan_arms(&runs(), &arms, None)[0].is_err());
        assert!(plan_arms(&runs(), &arms, None)[1].is_ok());
    }

    #[test]
    fn scoring_uses_only_matching_predictions() {
        let cur = Scenario::default_scenario();
        let plans: Vec<ArmPlan> = plan_arms(&runs(), &BTreeMap::new(), Some(&cur))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let mut preds = BTreeMap::new();
        preds.insert(
            "TP1".to_string(),
            Prediction {
                scenario_json: cur.to_json(),
                levels: vec![8.0, 16.0],
                result: Ok(series(&[(8.0, 1100.0), (16.0, 1980.0)])),
            },
        );
        let mut other = cur.clone();
        other.tp = 4;
        preds.insert(
            "TP2".to_string(),
            Prediction {
                scenario_json: other.to_json(),
                levels: vec![8.0],
                result: Ok(series(&[(8.0, 1.0)])),
            },
        );
        let (report, missing) = score(&plans, &preds);
        let report = report.unwrap();
        assert_eq!(report.arms.len(), 1);
        let m = &report.arms[0].metrics[0];
        assert!((m.signed_mean_pct - 10.0).abs() < 1e-9);
        assert!(m.shape_error_pct.unwrap().abs() < 1e-9);
        assert_eq!(missing.len(), 1);
        assert!(missing[0].1.contains("changed"));
    }

    #[test]
    fn stored_input_round_trips_and_bad_mapping_names_are_reported() {
        let mut i = CompareInput {
            pasted: "concurrency,x\n1,2".into(),
            ..CompareInput::default()
        };
        i.mapping.insert("x".into(), "output_tokens_per_s".into());
        i.mapping.insert("y".into(), "".into());
        i.mapping.insert("z".into(), "nonsense".into());
        assert_eq!(CompareInput::from_json(&i.to_json()).unwrap(), i);
        let (m, bad) = i.column_mapping();
        assert_eq!(m["x"], Some(MetricId::OutputTokensPerS));
        assert_eq!(m["y"], None);
        assert_eq!(bad, vec!["z".to_string()]);
        assert!(CompareInput::from_json("{garbage").is_err());
        assert_eq!(i.sources()[0].name, "pasted");
    }
}
