//! The fit simulates a trial value of a field only on the rows whose simulation reads it
//! (`validate::FieldReach`). Checked here on every simulated calibration row: each fitted field
//! `FieldReach` says cannot reach a row gives that row exactly the shipped table's result at the
//! lowest and at the highest value the fit tries for it; and each rule skips some rows, so none is
//! idle.

use servesim_core::validate::{self, FieldReach, FIT_PARAMS};
use std::collections::BTreeMap;

const CSV_A: &str = include_str!("../data/calibration/measured-points.csv");
const CSV_B: &str = include_str!("../data/calibration/measured-points-more.csv");

#[test]
fn a_field_that_does_not_reach_a_row_leaves_its_result_unchanged() {
    let csv = validate::combine_csvs(&[CSV_A, CSV_B]).unwrap();
    let fitted = validate::fitted_efficiencies().unwrap();
    let rows = validate::prepare_rows(validate::parse_points(&csv).unwrap());
    // field -> rows it was checked not to reach
    let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
    let mut simulated = 0;
    for row in &rows {
        let Some(setup) = &row.setup else { continue };
        let Some(reach) = FieldReach::of(setup) else {
            continue;
        };
        let table = fitted.full_table_for_point(&row.point);
        let base = validate::simulate(setup, &table);
        simulated += 1;
        for fp in FIT_PARAMS.iter().filter(|f| !reach.reaches(f.field)) {
            let grid = fp.grid_for("");
            for v in [grid[0], grid[grid.len() - 1]] {
                let mut t = table.clone();
                t.as_object_mut()
                    .unwrap()
                    .insert(fp.field.to_string(), serde_json::json!(v));
                assert_eq!(
                    validate::simulate(setup, &t),
                    base,
                    "line {}: `{}` = {v} changed the result, but FieldReach says the row does not read it",
                    row.point.line,
                    fp.field
                );
            }
            *skipped.entry(fp.field).or_default() += 1;
        }
    }
    assert!(simulated > 500, "only {simulated} rows simulated");
    for f in [
        "api_latency_completions_s",
        "api_latency_chat_s",
        "api_render_chat_s",
        "grouped_gemm_vs_dense",
        "hbm_expert_weights",
        "moe_layer_floor_s",
        "mla_layer_floor_s",
        "allreduce_bus_eff",
        "allreduce_latency_s",
        "prefill_attention_paged",
        "prefill_attention_triton",
        "gemm_weight_only",
        "fp8_unfused_launch_s",
    ] {
        assert!(
            skipped.get(f).copied().unwrap_or(0) > 0,
            "`{f}` reaches every calibration row: its FieldReach rule skips nothing ({skipped:?})"
        );
    }
}
