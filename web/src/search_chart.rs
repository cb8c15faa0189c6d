//! The search's Pareto chart (docs/search.md "Frontier"): output tok/s per GPU against E2E tok/s
//! per user, every simulated level of every candidate a dot (passing the SLA, or failing it), the
//! core's frontier as a line, the per-user SLA gate as a dashed vertical line, the best
//! candidate's operating point ringed. It is a `charts::ChartSpec` drawn by `charts::draw` (canvas
//! in the page, SVG in the native tests), so the page carries one chart routine. The points are
//! the report's.

use crate::charts::{ChartSpec, RefLine, Series, SeriesStyle};
use crate::search_view::SearchView;

/// The chart of a search report.
pub fn frontier_spec(v: &SearchView) -> ChartSpec {
    let mut pass = Vec::new();
    let mut fail = Vec::new();
    for l in v.candidates.iter().flat_map(|c| c.outcome.levels.iter()) {
        let Some(x) = l.e2e_tokens_per_s_per_user else {
            continue;
        };
        let y = l.output_tokens_per_s_per_gpu;
        if x.is_finite() && y.is_finite() {
            if l.passes_sla { &mut pass } else { &mut fail }.push((x, y));
        }
    }
    let best = v
        .ranking_by_throughput
        .first()
        .and_then(|i| v.candidates.get(*i))
        .and_then(|c| c.outcome.operating_point.as_ref())
        .and_then(|p| Some((p.e2e_tokens_per_s_per_user?, p.output_tokens_per_s_per_gpu)));
    ChartSpec {
        key: "search-frontier",
        title: "Output tok/s per GPU vs E2E tok/s per user".into(),
        x_label: "E2E tok/s per user".into(),
        y_label: "output tok/s per GPU".into(),
        log_x: false,
        log_y: false,
        series: vec![
            Series {
                label: "level passing the SLA".into(),
                points: pass,
                style: SeriesStyle::Points,
            },
            Series {
                label: "level failing it".into(),
                points: fail,
                style: SeriesStyle::Points,
            },
            Series {
                label: "Pareto frontier".into(),
                points: v
                    .frontier
                    .iter()
                    .map(|f| (f.e2e_tokens_per_s_per_user, f.output_tokens_per_s_per_gpu))
                    .collect(),
                style: SeriesStyle::Line,
            },
        ],
        ref_lines: v
            .per_user_gate()
            .map(|x| RefLine {
                vertical: true,
                value: x,
                label: format!("SLA: E2E tok/s per user ≥ {}", crate::table::fmt_tick(x)),
            })
            .into_iter()
            .collect(),
        highlight: best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::{draw, Theme};
    use crate::core_api::search::{self, RawSearch};
    use plotters::prelude::*;

    #[test]
    fn the_chart_of_a_real_search_draws_every_level_and_the_frontier_to_svg() {
        let json = crate::search_tools::tests::small_search();
        let space = RawSearch::from_json(&json).unwrap().validate().unwrap();
        let report = serde_json::to_string_pretty(&search::run(&space, true)).unwrap();
        let v = SearchView::from_report(&report).unwrap();
        let spec = frontier_spec(&v);
        let levels: usize = v.candidates.iter().map(|c| c.outcome.levels.len()).sum();
        assert!(levels >= 4, "{levels}");
        let dots = spec.series[0].points.len() + spec.series[1].points.len();
        assert_eq!(dots, levels, "every simulated level is a point");
        let frontier = spec.series[2].points.len();
        assert_eq!(frontier, v.frontier.len());
        assert!(frontier > 0);
        assert!(spec.highlight.is_some());
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
            draw(&root, &spec, &Theme::LIGHT).unwrap();
        }
        // Every level's dot, the frontier's dots and the best point's ring.
        let want = levels + frontier + 1;
        assert_eq!(svg.matches("<circle").count(), want, "{svg}");
        assert!(svg.contains("Pareto frontier"));
    }
}
