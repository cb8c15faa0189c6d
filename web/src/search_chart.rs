//! The search's Pareto chart (docs/search.md "Frontier"): output tok/s per GPU against E2E tok/s
//! per user, every simulated level of every candidate a point (filled when it passes the SLA),
//! the core's frontier as a line with its points ringed, the per-user SLA gate as a dashed
//! vertical line, the best candidate's operating point marked. Drawn on any plotters
//! `DrawingBackend`: canvas in the page, SVG in the native tests. The points are the report's.

use crate::charts::Theme;
use crate::search_view::SearchView;
use plotters::coord::Shift;
use plotters::prelude::*;

/// What the chart draws, from a report.
#[derive(Clone, Debug, PartialEq)]
pub struct FrontierSpec {
    /// (x = E2E tok/s per user, y = output tok/s per GPU, passes the SLA).
    pub points: Vec<(f64, f64, bool)>,
    /// The frontier, by x descending (the core's order).
    pub frontier: Vec<(f64, f64)>,
    /// The per-user gate's value.
    pub sla_x: Option<f64>,
    /// The best candidate by tok/s per GPU at its operating point.
    pub best: Option<(f64, f64)>,
}

impl FrontierSpec {
    pub fn of(v: &SearchView) -> FrontierSpec {
        let points = v
            .candidates
            .iter()
            .flat_map(|c| c.outcome.levels.iter())
            .filter_map(|l| {
                let x = l.e2e_tokens_per_s_per_user?;
                let y = l.output_tokens_per_s_per_gpu;
                (x.is_finite() && y.is_finite()).then_some((x, y, l.passes_sla))
            })
            .collect();
        let best = v
            .ranking_by_throughput
            .first()
            .and_then(|i| v.candidates.get(*i))
            .and_then(|c| c.outcome.operating_point.as_ref())
            .and_then(|p| Some((p.e2e_tokens_per_s_per_user?, p.output_tokens_per_s_per_gpu)));
        FrontierSpec {
            points,
            frontier: v
                .frontier
                .iter()
                .map(|f| (f.e2e_tokens_per_s_per_user, f.output_tokens_per_s_per_gpu))
                .collect(),
            sla_x: v.per_user_gate(),
            best,
        }
    }

    /// Axis ranges from 0 to 5% past the largest value (the SLA line included).
    pub fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let xm = self
            .points
            .iter()
            .map(|p| p.0)
            .chain(self.sla_x)
            .fold(0.0, f64::max);
        let ym = self.points.iter().map(|p| p.1).fold(0.0, f64::max);
        let pad = |m: f64| if m > 0.0 { m * 1.05 } else { 1.0 };
        ((0.0, pad(xm)), (0.0, pad(ym)))
    }
}

/// Draws the chart.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &FrontierSpec,
    theme: &Theme,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("frontier chart: {e:?}");
    root.fill(&theme.background).map_err(err)?;
    let ((x0, x1), (y0, y1)) = spec.ranges();
    let text = theme.text;
    let label_style = ("sans-serif", 12).into_font().color(&text);
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Output tok/s per GPU vs E2E tok/s per user",
            ("sans-serif", 15).into_font().color(&text),
        )
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(58)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    let fmt = |v: &f64| crate::table::fmt_tick(*v);
    chart
        .configure_mesh()
        .x_desc("E2E tok/s per user")
        .y_desc("output tok/s per GPU")
        .label_style(label_style.clone())
        .axis_desc_style(label_style.clone())
        .light_line_style(theme.grid.mix(0.5))
        .bold_line_style(theme.grid)
        .axis_style(text.mix(0.6))
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .draw()
        .map_err(err)?;
    let pass = theme.series[0];
    let fail = text.mix(0.35);
    chart
        .draw_series(
            spec.points
                .iter()
                .filter(|p| p.2)
                .map(|p| Circle::new((p.0, p.1), 3, pass.filled())),
        )
        .map_err(err)?
        .label("level passing the SLA")
        .legend(move |(x, y)| Circle::new((x + 8, y), 3, pass.filled()));
    chart
        .draw_series(
            spec.points
                .iter()
                .filter(|p| !p.2)
                .map(|p| Circle::new((p.0, p.1), 3, fail.stroke_width(1))),
        )
        .map_err(err)?
        .label("level failing it")
        .legend(move |(x, y)| Circle::new((x + 8, y), 3, fail.stroke_width(1)));
    let front = theme.series[1];
    chart
        .draw_series(LineSeries::new(
            spec.frontier.iter().copied(),
            front.stroke_width(2),
        ))
        .map_err(err)?
        .label("Pareto frontier")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], front.stroke_width(2)));
    chart
        .draw_series(
            spec.frontier
                .iter()
                .map(|p| Circle::new(*p, 5, front.stroke_width(2))),
        )
        .map_err(err)?;
    if let Some(x) = spec.sla_x {
        let r = theme.reference;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, y0), (x, y1)],
                6,
                4,
                r.stroke_width(1),
            ))
            .map_err(err)?
            .label(format!(
                "SLA: E2E tok/s per user ≥ {}",
                crate::table::fmt_tick(x)
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 6, y)], r.stroke_width(1)));
    }
    if let Some(b) = spec.best {
        let r = theme.reference;
        chart
            .draw_series(std::iter::once(Circle::new(b, 9, r.stroke_width(2))))
            .map_err(err)?
            .label("best tok/s per GPU at the SLA")
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, r.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(theme.background.mix(0.85))
        .border_style(theme.grid)
        .label_font(label_style)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use servesim_core::search::{self, RawSearch};

    #[test]
    fn the_chart_of_a_real_search_draws_every_level_and_the_frontier_to_svg() {
        let json = crate::search_tools::tests::small_search();
        let space = RawSearch::from_json(&json).unwrap().validate().unwrap();
        let report = serde_json::to_string_pretty(&search::run(&space, true)).unwrap();
        let v = SearchView::from_report(&report).unwrap();
        let spec = FrontierSpec::of(&v);
        let levels: usize = v.candidates.iter().map(|c| c.outcome.levels.len()).sum();
        assert!(levels >= 4, "{levels}");
        assert_eq!(
            spec.points.len(),
            levels,
            "every simulated level is a point"
        );
        assert_eq!(spec.frontier.len(), v.frontier.len());
        assert!(!spec.frontier.is_empty());
        assert!(spec.best.is_some());
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
            draw(&root, &spec, &Theme::LIGHT).unwrap();
        }
        // Points + frontier rings + the best ring + 3 legend marks.
        let want = levels + spec.frontier.len() + 1 + 3;
        assert_eq!(svg.matches("<circle").count(), want, "{svg}");
        assert!(svg.contains("Pareto frontier"));
    }
}
