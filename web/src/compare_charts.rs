//! Charts of a comparison: measured points over the predicted line for one metric of one arm,
//! and the signed error by level for every scored metric of an arm. The `draw_*` functions are
//! generic over plotters' `DrawingBackend`: canvas in the page, SVG in the native tests.

use crate::charts::Theme;
use crate::core_api::compare::{ArmScore, LevelKind, PredictedSeries};
use crate::core_api::metric::MetricId;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Measured versus predicted for one metric of one arm.
#[derive(Clone, Debug, PartialEq)]
pub struct FitChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    /// The predicted line over every predicted level, ascending.
    pub predicted: Vec<(f64, f64)>,
    /// Scored measured points.
    pub measured: Vec<(f64, f64)>,
    /// Measured points not scored (excluded or skipped), drawn hollow.
    pub unscored: Vec<(f64, f64)>,
}

/// Signed error (percent, positive = ServeSim high) by level, one series per metric.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorChart {
    pub title: String,
    pub x_label: String,
    pub log_x: bool,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

fn x_label(kind: LevelKind) -> String {
    match kind {
        LevelKind::Concurrency => "concurrency".into(),
        LevelKind::RequestRate => "request rate (req/s)".into(),
        LevelKind::Burst => "burst size (requests)".into(),
    }
}

/// A log x axis when the levels span more than a factor of 8 (sweeps doubling concurrency).
fn wants_log(xs: impl Iterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for x in xs {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    lo > 0.0 && hi / lo > 8.0
}

/// The fit chart of `metric` in `arm`; `measured_all` are every measured (level, value) of the
/// arm for that metric, scored or not.
pub fn fit_chart(
    arm: &ArmScore,
    metric: MetricId,
    predicted: &PredictedSeries,
    measured_all: &[(f64, f64)],
) -> FitChart {
    let mut line: Vec<(f64, f64)> = predicted
        .points
        .iter()
        .filter_map(|(l, m)| m.get(&metric).map(|v| (*l, *v)))
        .collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    let scored: Vec<(f64, f64)> = arm
        .metrics
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| m.points.iter().map(|p| (p.level, p.measured)).collect())
        .unwrap_or_default();
    let unscored = measured_all
        .iter()
        .filter(|(l, _)| !scored.iter().any(|(s, _)| s == l))
        .copied()
        .collect();
    FitChart {
        title: format!("{}: {}", arm.arm, metric.label()),
        x_label: x_label(arm.level_kind),
        y_label: metric.label(),
        log_x: wants_log(line.iter().chain(measured_all).map(|p| p.0)),
        predicted: line,
        measured: scored,
        unscored,
    }
}

/// The signed-error chart of every scored metric of `arm`.
pub fn error_chart(arm: &ArmScore) -> ErrorChart {
    let series: Vec<(String, Vec<(f64, f64)>)> = arm
        .metrics
        .iter()
        .map(|m| {
            (
                m.metric.name(),
                m.points
                    .iter()
                    .map(|p| (p.level, p.signed_error_pct))
                    .collect(),
            )
        })
        .collect();
    ErrorChart {
        title: format!("{}: signed error by level", arm.arm),
        x_label: x_label(arm.level_kind),
        log_x: wants_log(series.iter().flat_map(|s| s.1.iter().map(|p| p.0))),
        series,
    }
}

/// "1.2k", "350", "0.25" for axis ticks.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .replace(".M", "M")
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        let s = format!("{:.1}", v / 1e3);
        format!("{}k", s.trim_end_matches('0').trim_end_matches('.'))
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn bounds(xs: impl Iterator<Item = f64> + Clone, log: bool) -> (f64, f64) {
    let lo = xs.clone().fold(f64::INFINITY, f64::min);
    let hi = xs.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.3, hi * 1.3)
    } else if lo == hi {
        (lo - 1.0, hi + 1.0)
    } else {
        let pad = (hi - lo) * 0.06;
        (lo - pad, hi + pad)
    }
}

type DrawErr<DB> = DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>;

/// Draws a fit chart: predicted line, measured points filled, unscored measured points hollow.
pub fn draw_fit<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &FitChart,
    theme: &Theme,
) -> Result<(), String> {
    let err = |e: DrawErr<DB>| format!("chart `{}`: {e:?}", c.title);
    root.fill(&theme.background).map_err(err)?;
    let all = || {
        c.predicted
            .iter()
            .chain(c.measured.iter())
            .chain(c.unscored.iter())
    };
    let (x0, x1) = bounds(all().map(|p| p.0), c.log_x);
    let (_, y1) = bounds(all().map(|p| p.1), false);
    let y1 = y1.max(1e-9);
    let text = theme.text;
    let mut b = ChartBuilder::on(root);
    b.caption(&c.title, ("sans-serif", 15).into_font().color(&text))
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(58);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(c.x_label.as_str())
                .y_desc(c.y_label.as_str())
                .label_style(("sans-serif", 12).into_font().color(&text))
                .light_line_style(theme.grid.mix(0.5))
                .bold_line_style(theme.grid)
                .axis_style(text.mix(0.6))
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .draw()
                .map_err(err)?;
            let pc = theme.series[0];
            let mc = theme.series[1];
            chart
                .draw_series(LineSeries::new(
                    c.predicted.iter().copied(),
                    pc.stroke_width(2),
                ))
                .map_err(err)?
                .label("ServeSim (predicted)")
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], pc.stroke_width(2))
                });
            chart
                .draw_series(c.measured.iter().map(|p| Circle::new(*p, 4, mc.filled())))
                .map_err(err)?
                .label("measured (scored)")
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, mc.filled()));
            if !c.unscored.is_empty() {
                chart
                    .draw_series(
                        c.unscored
                            .iter()
                            .map(|p| Circle::new(*p, 4, mc.stroke_width(1))),
                    )
                    .map_err(err)?
                    .label("measured (not scored)")
                    .legend(move |(x, y)| Circle::new((x + 8, y), 4, mc.stroke_width(1)));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(theme.background.mix(0.85))
                .border_style(theme.grid)
                .label_font(("sans-serif", 12).into_font().color(&text))
                .draw()
                .map_err(err)?;
        }};
    }
    if c.log_x {
        body!(b
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
            .map_err(err)?);
    } else {
        body!(b.build_cartesian_2d(x0..x1, 0.0..y1).map_err(err)?);
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Draws the signed error by level with a zero line.
pub fn draw_error<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &ErrorChart,
    theme: &Theme,
) -> Result<(), String> {
    let err = |e: DrawErr<DB>| format!("chart `{}`: {e:?}", c.title);
    root.fill(&theme.background).map_err(err)?;
    let pts = || c.series.iter().flat_map(|s| s.1.iter());
    let (x0, x1) = bounds(pts().map(|p| p.0), c.log_x);
    let (ya, yb) = bounds(pts().map(|p| p.1).chain([0.0]), false);
    let text = theme.text;
    let mut b = ChartBuilder::on(root);
    b.caption(&c.title, ("sans-serif", 15).into_font().color(&text))
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(58);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(c.x_label.as_str())
                .y_desc("signed error % (+ = ServeSim high)")
                .label_style(("sans-serif", 12).into_font().color(&text))
                .light_line_style(theme.grid.mix(0.5))
                .bold_line_style(theme.grid)
                .axis_style(text.mix(0.6))
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| format!("{v:+.0}%"))
                .draw()
                .map_err(err)?;
            chart
                .draw_series(LineSeries::new(
                    [(x0, 0.0), (x1, 0.0)],
                    theme.reference.stroke_width(1),
                ))
                .map_err(err)?;
            for (i, (name, points)) in c.series.iter().enumerate() {
                let color = theme.series[i % theme.series.len()];
                let shade = color.mix(1.0 - 0.25 * (i / theme.series.len()) as f64);
                chart
                    .draw_series(LineSeries::new(
                        points.iter().copied(),
                        shade.stroke_width(2),
                    ))
                    .map_err(err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], shade.stroke_width(2))
                    });
                chart
                    .draw_series(points.iter().map(|p| Circle::new(*p, 3, shade.filled())))
                    .map_err(err)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(theme.background.mix(0.85))
                .border_style(theme.grid)
                .label_font(("sans-serif", 12).into_font().color(&text))
                .draw()
                .map_err(err)?;
        }};
    }
    if c.log_x {
        body!(b
            .build_cartesian_2d((x0..x1).log_scale(), ya..yb)
            .map_err(err)?);
    } else {
        body!(b.build_cartesian_2d(x0..x1, ya..yb).map_err(err)?);
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::compare::{
        score_arm, MeasuredLevel, MeasuredRun, ScoreOptions, SourceFormat,
    };
    use crate::core_api::metric::Stat;

    fn arm() -> (ArmScore, PredictedSeries, Vec<(f64, f64)>) {
        let tput = MetricId::OutputTokensPerS;
        let ttft = MetricId::TtftMs(Stat::P50);
        let measured = MeasuredRun {
            arm: "H100 TP1".into(),
            level_kind: LevelKind::Concurrency,
            levels: [(1.0, 100.0, 20.0), (8.0, 700.0, 30.0), (64.0, 3000.0, 90.0)]
                .iter()
                .map(|(l, t, f)| MeasuredLevel {
                    level: *l,
                    metrics: [(tput, *t), (ttft, *f)].into_iter().collect(),
                    excluded: (*l == 64.0).then(|| "client-bound".to_string()),
                })
                .collect(),
            kv_cache_tokens_logged: None,
            source_format: SourceFormat::Csv,
        };
        let predicted = PredictedSeries {
            level_kind: LevelKind::Concurrency,
            points: [(1.0, 110.0, 15.0), (8.0, 650.0, 33.0), (64.0, 3300.0, 80.0)]
                .iter()
                .map(|(l, t, f)| (*l, [(tput, *t), (ttft, *f)].into_iter().collect()))
                .collect(),
            kv_capacity_tokens: None,
            evidence: None,
        };
        let a = score_arm(&measured, &predicted, &ScoreOptions::default()).unwrap();
        (
            a,
            predicted,
            vec![(1.0, 100.0), (8.0, 700.0), (64.0, 3000.0)],
        )
    }

    #[test]
    fn fit_chart_splits_scored_and_excluded_points_and_draws_the_full_predicted_line() {
        let (a, p, all) = arm();
        let c = fit_chart(&a, MetricId::OutputTokensPerS, &p, &all);
        assert_eq!(
            c.predicted,
            vec![(1.0, 110.0), (8.0, 650.0), (64.0, 3300.0)]
        );
        assert_eq!(c.measured, vec![(1.0, 100.0), (8.0, 700.0)]);
        assert_eq!(c.unscored, vec![(64.0, 3000.0)]);
        assert!(c.log_x, "1..64 spans more than 8x");
        let e = error_chart(&a);
        assert_eq!(e.series.len(), 2);
        let tput = e
            .series
            .iter()
            .find(|s| s.0 == "output_tokens_per_s")
            .unwrap();
        assert!((tput.1[0].1 - 10.0).abs() < 1e-9);
        assert!((tput.1[1].1 - (650.0 / 700.0 - 1.0) * 100.0).abs() < 1e-9);
    }

    #[test]
    fn both_charts_render_to_svg_with_their_points() {
        let (a, p, all) = arm();
        let c = fit_chart(&a, MetricId::OutputTokensPerS, &p, &all);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
            draw_fit(&root, &c, &Theme::LIGHT).unwrap();
        }
        assert!(svg.starts_with("<svg"));
        // Two filled + one hollow measured circle, three predicted... and legend markers.
        assert!(svg.matches("<circle").count() >= 3, "{svg}");
        assert!(svg.contains("ServeSim (predicted)"));
        assert!(svg.contains("measured (not scored)"));
        let mut svg2 = String::new();
        {
            let root = SVGBackend::with_string(&mut svg2, (640, 360)).into_drawing_area();
            draw_error(&root, &error_chart(&a), &Theme::DARK).unwrap();
        }
        assert!(svg2.contains("signed error"));
        assert!(svg2.contains("ttft_ms_p50"));
        // An empty chart (no points) still renders instead of failing.
        let empty = ErrorChart {
            title: "x".into(),
            x_label: "c".into(),
            log_x: false,
            series: vec![],
        };
        let mut svg3 = String::new();
        let root = SVGBackend::with_string(&mut svg3, (320, 200)).into_drawing_area();
        draw_error(&root, &empty, &Theme::LIGHT).unwrap();
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(1500.0), "1.5k");
        assert_eq!(tick(25000.0), "25k");
        assert_eq!(tick(350.0), "350");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(0.0), "0");
    }
}
