//! The results charts. [`chart_specs`] turns sweep rows into what to draw; [`draw`] draws one
//! chart on any plotters `DrawingBackend`: the page uses the canvas backend, the native tests SVG.

use crate::core_api::metric::{MetricId, Stat};
use crate::core_api::sweep::{Gate, GateOp};
use crate::core_api::{LevelResult, OperatingPoint, Scenario};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One line of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// How the points are drawn.
    pub style: SeriesStyle,
}

/// A series' look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesStyle {
    /// A line through the points, each point a dot.
    Line,
    /// A dashed line through the points (a pinned run's curve, `pins::overlay`).
    Dashed,
    /// Dots only (the search's levels, `search_chart`).
    Points,
}

/// A reference line: vertical (`x = value`) or horizontal (`y = value`).
#[derive(Clone, Debug, PartialEq)]
pub struct RefLine {
    pub vertical: bool,
    pub value: f64,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ChartSpec {
    /// Stable key, used for element ids and file names.
    pub key: &'static str,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    /// A logarithmic y axis (the latency charts, when the user asks for it); points at or
    /// below zero are left out, as a log axis cannot place them.
    pub log_y: bool,
    pub series: Vec<Series>,
    pub ref_lines: Vec<RefLine>,
    /// A point to ring (the SLA operating point).
    pub highlight: Option<(f64, f64)>,
}

/// Colours for light or dark pages.
#[derive(Clone, Copy, Debug)]
pub struct Theme {
    pub background: RGBColor,
    pub text: RGBColor,
    pub grid: RGBColor,
    pub series: [RGBColor; 3],
    pub reference: RGBColor,
}

impl Theme {
    pub const LIGHT: Theme = Theme {
        background: RGBColor(255, 255, 255),
        text: RGBColor(30, 35, 45),
        grid: RGBColor(225, 228, 235),
        series: [
            RGBColor(37, 99, 235),
            RGBColor(217, 119, 6),
            RGBColor(5, 150, 105),
        ],
        reference: RGBColor(220, 38, 38),
    };
    pub const DARK: Theme = Theme {
        background: RGBColor(24, 27, 34),
        text: RGBColor(225, 228, 235),
        grid: RGBColor(55, 60, 72),
        series: [
            RGBColor(96, 165, 250),
            RGBColor(251, 191, 36),
            RGBColor(52, 211, 153),
        ],
        reference: RGBColor(248, 113, 113),
    };
}

fn series_of(rows: &[LevelResult], label: &str, x: MetricOrLevel, y: MetricId) -> Series {
    Series {
        label: label.into(),
        style: SeriesStyle::Line,
        points: rows
            .iter()
            .filter_map(|r| {
                let xv = match x {
                    MetricOrLevel::Level => Some(r.level.value()),
                    MetricOrLevel::Metric(m) => r.get(m),
                }?;
                Some((xv, r.get(y)?))
            })
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .collect(),
    }
}

#[derive(Clone, Copy)]
enum MetricOrLevel {
    Level,
    Metric(MetricId),
}

fn gate_label(g: &Gate) -> String {
    let op = match g.op {
        GateOp::Ge => "≥",
        GateOp::Gt => ">",
        GateOp::Le => "≤",
        GateOp::Lt => "<",
    };
    // "TTFT p90 (ms)" -> "SLA: TTFT p90 < 400 ms".
    let label = g.metric.label();
    let (name, unit) = match label.rsplit_once(" (") {
        Some((n, u)) => (n.to_string(), format!(" {}", u.trim_end_matches(')'))),
        None => (label.clone(), String::new()),
    };
    format!("SLA: {name} {op} {}{unit}", crate::table::fmt_tick(g.value))
}

/// SLA gates on any of `metrics`, as lines (horizontal on the y axis, or vertical on x).
fn gate_lines(gates: &[Gate], metrics: &[MetricId], vertical: bool) -> Vec<RefLine> {
    gates
        .iter()
        .filter(|g| metrics.contains(&g.metric))
        .map(|g| RefLine {
            vertical,
            value: g.value,
            label: gate_label(g),
        })
        .collect()
}

/// The five charts of a sweep. SLA gates are drawn where their metric is plotted; the
/// operating point's crossing is a vertical line on the level charts and the highest passing
/// level is ringed on the throughput-per-GPU chart. `log_latency` puts the TTFT and ITL charts
/// on a logarithmic y axis (latencies span decades across a sweep).
pub fn chart_specs(
    scenario: &Scenario,
    rows: &[LevelResult],
    op: Option<&OperatingPoint>,
    log_latency: bool,
) -> Vec<ChartSpec> {
    use MetricOrLevel::Level as L;
    let gates: Vec<Gate> = scenario.sweep.validate().map(|s| s.sla).unwrap_or_default();
    let xl = crate::core_api::level_axis(rows).to_string();
    let crossing: Vec<RefLine> = op
        .and_then(|o| o.crossing.as_ref())
        .map(|c| RefLine {
            vertical: true,
            value: c.level,
            label: format!("crossing ≈ {} ", crate::table::fmt_num(c.level)),
        })
        .into_iter()
        .collect();
    let with = |mut v: Vec<RefLine>, extra: &[RefLine]| {
        v.extend_from_slice(extra);
        v
    };
    let per_user = [
        MetricId::OutputTokensPerSPerUser,
        MetricId::E2eTokensPerSPerUser,
    ];
    let ttft = [MetricId::TtftMs(Stat::P50), MetricId::TtftMs(Stat::P90)];
    let itl = [MetricId::ItlMs(Stat::P50), MetricId::ItlMs(Stat::P90)];
    let pareto_x = if gates
        .iter()
        .any(|g| g.metric == MetricId::E2eTokensPerSPerUser)
    {
        MetricId::E2eTokensPerSPerUser
    } else {
        MetricId::OutputTokensPerSPerUser
    };
    let highest = op.and_then(|o| o.highest_passing).and_then(|h| {
        rows.iter()
            .find(|r| r.level.value() == h)
            .and_then(|r| Some((r.get(pareto_x)?, r.output_tokens_per_s_per_gpu?)))
    });
    let mut specs = vec![
        ChartSpec {
            key: "throughput",
            title: "Output throughput (all GPUs)".into(),
            x_label: xl.clone(),
            y_label: "output tok/s".into(),
            log_x: true,
            log_y: false,
            series: vec![series_of(
                rows,
                "output tok/s",
                L,
                MetricId::OutputTokensPerS,
            )],
            ref_lines: with(
                gate_lines(&gates, &[MetricId::OutputTokensPerS], false),
                &crossing,
            ),
            highlight: None,
        },
        ChartSpec {
            key: "per_user",
            title: "Speed per user".into(),
            x_label: xl.clone(),
            y_label: "tok/s per user".into(),
            log_x: true,
            log_y: false,
            series: vec![
                series_of(rows, "output tok/s per user", L, per_user[0]),
                series_of(rows, "E2E tok/s per user", L, per_user[1]),
            ],
            ref_lines: with(gate_lines(&gates, &per_user, false), &crossing),
            highlight: None,
        },
        ChartSpec {
            key: "ttft",
            title: "Time to first token".into(),
            x_label: xl.clone(),
            y_label: "TTFT (ms)".into(),
            log_x: true,
            log_y: log_latency,
            series: vec![
                series_of(rows, "p50", L, ttft[0]),
                series_of(rows, "p90", L, ttft[1]),
            ],
            ref_lines: with(gate_lines(&gates, &ttft, false), &crossing),
            highlight: None,
        },
        ChartSpec {
            key: "itl",
            title: "Inter-token latency".into(),
            x_label: xl,
            y_label: "ITL (ms)".into(),
            log_x: true,
            log_y: log_latency,
            series: vec![
                series_of(rows, "p50", L, itl[0]),
                series_of(rows, "p90", L, itl[1]),
            ],
            ref_lines: with(gate_lines(&gates, &itl, false), &crossing),
            highlight: None,
        },
        ChartSpec {
            key: "pareto",
            title: "Throughput per GPU vs speed per user".into(),
            x_label: pareto_x.label(),
            y_label: MetricId::OutputTokensPerSPerGpu.label(),
            log_x: false,
            log_y: false,
            series: vec![series_of(
                rows,
                "levels",
                MetricOrLevel::Metric(pareto_x),
                MetricId::OutputTokensPerSPerGpu,
            )],
            ref_lines: gate_lines(&gates, &[pareto_x], true),
            highlight: highest,
        },
    ];
    for spec in specs.iter_mut().filter(|s| s.log_y) {
        for series in &mut spec.series {
            series.points.retain(|p| p.1 > 0.0);
        }
        spec.ref_lines.retain(|r| r.vertical || r.value > 0.0);
    }
    specs
}

fn padded(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        let lo = lo.max(1e-9);
        let hi = hi.max(lo);
        if hi / lo < 1.5 {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo / 1.25, hi * 1.25)
        }
    } else if hi - lo < 1e-12 {
        let pad = if hi.abs() > 0.0 { hi.abs() * 0.1 } else { 1.0 };
        ((lo - pad).max(0.0), hi + pad)
    } else {
        ((lo - (hi - lo) * 0.05).max(0.0), hi + (hi - lo) * 0.05)
    }
}

/// The x and y ranges a spec needs: every point and reference line, padded.
pub fn ranges(spec: &ChartSpec) -> ((f64, f64), (f64, f64)) {
    let mut xs: Vec<f64> = spec
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let mut ys: Vec<f64> = spec
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    for r in &spec.ref_lines {
        if r.vertical {
            xs.push(r.value)
        } else {
            ys.push(r.value)
        }
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let x = padded(min(&xs), max(&xs), spec.log_x);
    if spec.log_y {
        return (x, padded(min(&ys), max(&ys), true));
    }
    // Every charted metric is non-negative: the y axis starts at 0 so heights compare honestly.
    let (_, y1) = padded(min(&ys), max(&ys), false);
    (x, (0.0, y1))
}

/// A log axis labels only 1, 2 and 5 times a power of ten (the other ticks stay unlabelled, so
/// labels never crowd near the end of a decade).
pub fn log_tick(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return String::new();
    }
    let mut m = v;
    while m >= 10.0 {
        m /= 10.0;
    }
    while m < 1.0 {
        m *= 10.0;
    }
    let near = |t: f64| (m - t).abs() < 1e-6 * t;
    if near(1.0) || near(2.0) || near(5.0) || near(10.0) {
        crate::table::fmt_tick(v)
    } else {
        String::new()
    }
}

/// The plot corner the lines cross least, for the legend: every series is sampled along its
/// segments (17 points per segment, in normalised plot coordinates, so a line between two far
/// points counts where it runs, not only at its ends), and the corner box with the fewest samples
/// wins (ties: upper left, upper right, lower right, lower left).
fn legend_corner(spec: &ChartSpec, x: (f64, f64), y: (f64, f64)) -> SeriesLabelPosition {
    let tx = |v: f64| {
        if spec.log_x {
            (libm::log(v.max(1e-12)) - libm::log(x.0)) / (libm::log(x.1) - libm::log(x.0))
        } else {
            (v - x.0) / (x.1 - x.0)
        }
    };
    let ty = |v: f64| {
        if spec.log_y {
            (libm::log(v.max(1e-12)) - libm::log(y.0)) / (libm::log(y.1) - libm::log(y.0))
        } else {
            (v - y.0) / (y.1 - y.0)
        }
    };
    let corners = [
        (SeriesLabelPosition::UpperLeft, 0.0, 1.0),
        (SeriesLabelPosition::UpperRight, 1.0, 1.0),
        (SeriesLabelPosition::LowerRight, 1.0, 0.0),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.0),
    ];
    const STEPS: usize = 16;
    let mut samples: Vec<(f64, f64)> = Vec::new();
    for s in &spec.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (tx(p.0), ty(p.1)))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        if let [only] = pts.as_slice() {
            samples.push(*only);
        }
        for w in pts.windows(2) {
            for k in 0..=STEPS {
                let f = k as f64 / STEPS as f64;
                samples.push((
                    w[0].0 + (w[1].0 - w[0].0) * f,
                    w[0].1 + (w[1].1 - w[0].1) * f,
                ));
            }
        }
    }
    let crowd = |cx: f64, cy: f64| {
        samples
            .iter()
            .filter(|p| (p.0 - cx).abs() < 0.45 && (p.1 - cy).abs() < 0.35)
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|(_, cx, cy)| crowd(*cx, *cy))
        .map(|c| c.0)
        .unwrap_or(SeriesLabelPosition::UpperLeft)
}

/// Draws one chart filling `root`.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &ChartSpec,
    theme: &Theme,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("chart `{}`: {e:?}", spec.key);
    root.fill(&theme.background).map_err(err)?;
    let ((x0, x1), (y0, y1)) = ranges(spec);
    // A log y axis is drawn as a linear axis over log10(y), its ticks labelled with the values
    // they stand for (1, 2 and 5 times a power of ten): plotters' log and linear ranges are
    // different types, and each combination compiles the whole chart again into the page.
    let log_y = spec.log_y;
    let owned;
    let (spec, (y0, y1)) = if log_y {
        owned = log10_y(spec);
        (&owned, (libm::log10(y0), libm::log10(y1)))
    } else {
        (spec, (y0, y1))
    };
    let text = theme.text;
    let title_style = ("sans-serif", 15).into_font().color(&text);
    let label_style = ("sans-serif", 12).into_font().color(&text);
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&spec.title, title_style)
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(58);
    let tick = |log: bool, v: f64| {
        if log {
            log_tick(v)
        } else {
            crate::table::fmt_tick(v)
        }
    };
    let x_fmt = |v: &f64| tick(spec.log_x, *v);
    let y_fmt = |v: &f64| {
        if log_y {
            log_tick(libm::pow(10.0, *v))
        } else {
            tick(false, *v)
        }
    };
    // One body for both x axes (a log range and a linear one are different types).
    macro_rules! plot {
        ($x:expr, $y:expr) => {{
            let mut chart = builder.build_cartesian_2d($x, $y).map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(spec.x_label.as_str())
                .y_desc(spec.y_label.as_str())
                .label_style(label_style.clone())
                .axis_desc_style(label_style.clone())
                .light_line_style(theme.grid.mix(0.5))
                .bold_line_style(theme.grid)
                .x_max_light_lines(if spec.log_x { 0 } else { 1 })
                .y_max_light_lines(1)
                .axis_style(text.mix(0.6))
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .draw()
                .map_err(err)?;
            draw_series_and_refs(&mut chart, spec, theme, (x0, x1), (y0, y1)).map_err(err)?;
        }};
    }
    if spec.log_x {
        plot!((x0..x1).log_scale(), y0..y1)
    } else {
        plot!(x0..x1, y0..y1)
    }
    root.present().map_err(err)?;
    Ok(())
}

/// The spec with every y value (points, horizontal reference lines, the highlight) as log10(y)
/// on a linear axis (`log_y` off); values at or below zero were left out by `chart_specs`.
fn log10_y(spec: &ChartSpec) -> ChartSpec {
    let l = |v: f64| libm::log10(v.max(1e-12));
    let mut t = spec.clone();
    t.log_y = false;
    for s in &mut t.series {
        for p in &mut s.points {
            p.1 = l(p.1);
        }
    }
    for r in &mut t.ref_lines {
        if !r.vertical {
            r.value = l(r.value);
        }
    }
    t.highlight = t.highlight.map(|(x, y)| (x, l(y)));
    t
}

fn draw_series_and_refs<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    spec: &ChartSpec,
    theme: &Theme,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let label_style = ("sans-serif", 12).into_font().color(&theme.text);
    for (i, s) in spec.series.iter().enumerate() {
        let color = theme.series[i % theme.series.len()];
        let legend = s.label.as_str();
        match s.style {
            SeriesStyle::Dashed => {
                chart
                    .draw_series(DashedLineSeries::new(
                        s.points.iter().copied(),
                        5,
                        3,
                        color.stroke_width(2),
                    ))?
                    .label(legend)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 5, y)], color.stroke_width(2))
                    });
            }
            SeriesStyle::Line => {
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().copied(),
                        color.stroke_width(2),
                    ))?
                    .label(legend)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
            }
            SeriesStyle::Points => {
                chart
                    .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
                    .label(legend)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x + 6, y), (x + 8, y)], color.stroke_width(5))
                    });
            }
        }
        chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    for r in &spec.ref_lines {
        let style = theme.reference.stroke_width(1);
        let pts = if r.vertical {
            vec![(r.value, y0), (r.value, y1)]
        } else {
            vec![(x0, r.value), (x1, r.value)]
        };
        // The line is named in the legend (never as free text in the plot, where it would
        // collide with curves, other lines or the legend).
        let colour = theme.reference;
        chart
            .draw_series(DashedLineSeries::new(pts, 6, 4, style))?
            .label(r.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 6, y)], colour.stroke_width(1))
            });
    }
    if let Some(p) = spec.highlight {
        chart.draw_series(std::iter::once(Circle::new(
            p,
            8,
            theme.reference.stroke_width(2),
        )))?;
    }
    if spec.series.len() > 1 || !spec.ref_lines.is_empty() {
        chart
            .configure_series_labels()
            .position(legend_corner(spec, (x0, x1), (y0, y1)))
            .background_style(theme.background.mix(0.85))
            .border_style(theme.grid)
            .label_font(label_style)
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(series: Vec<Vec<(f64, f64)>>, log_x: bool) -> ChartSpec {
        ChartSpec {
            key: "t",
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_x,
            log_y: false,
            series: series
                .into_iter()
                .enumerate()
                .map(|(i, points)| Series {
                    label: format!("s{i}"),
                    points,
                    style: SeriesStyle::Line,
                })
                .collect(),
            ref_lines: Vec::new(),
            highlight: None,
        }
    }

    #[test]
    fn legend_avoids_the_corner_a_line_runs_through_between_its_points() {
        // Speed per user falling from 117 at c=1 to 74 at c=16 (log x 1..20, y 0..120): only
        // the end points are far from the upper right, but the segment crosses it.
        let s = spec_with(
            vec![
                vec![(1.0, 117.0), (4.0, 104.0), (16.0, 74.0)],
                vec![(1.0, 116.0), (4.0, 106.0), (16.0, 74.0)],
            ],
            true,
        );
        let c = legend_corner(&s, (1.0, 20.0), (0.0, 120.0));
        assert!(
            matches!(
                c,
                SeriesLabelPosition::LowerRight | SeriesLabelPosition::LowerLeft
            ),
            "{c:?}"
        );
        // A rising line leaves the upper left free.
        let s = spec_with(vec![vec![(1.0, 10.0), (100.0, 1000.0)]], false);
        let c = legend_corner(&s, (0.0, 100.0), (0.0, 1000.0));
        assert!(matches!(c, SeriesLabelPosition::UpperLeft), "{c:?}");
    }
    use crate::core_api::sweep::SweepResult;

    fn run() -> (Scenario, SweepResult) {
        let mut s = Scenario::default_scenario();
        s.sweep.concurrency = Some(vec![1.0, 8.0, 64.0, 256.0]);
        s.sweep.duration_s = Some(20.0);
        s.sweep.warmup_s = Some(2.0);
        s.sweep.sla =
            crate::form::parse_sla("e2e_tokens_per_s_per_user>=100, ttft_ms_p90<=2000").unwrap();
        let r = s.resolve().unwrap().run().unwrap();
        (s, r)
    }

    #[test]
    fn specs_take_their_points_from_the_level_results() {
        let (s, r) = run();
        let specs = chart_specs(&s, &r.levels, r.operating_point.as_ref(), false);
        let keys: Vec<&str> = specs.iter().map(|c| c.key).collect();
        assert_eq!(keys, ["throughput", "per_user", "ttft", "itl", "pareto"]);
        let ttft = &specs[2];
        assert_eq!(ttft.series.len(), 2);
        // Every level that has a TTFT p90 is a point at (level, p90), in level order.
        let expected: Vec<(f64, f64)> = r
            .levels
            .iter()
            .filter_map(|l| l.ttft_ms.map(|t| (l.level.value(), t.p90)))
            .collect();
        assert!(expected.len() >= 3, "{expected:?}");
        assert_eq!(ttft.series[1].points, expected);
        assert!(ttft.log_x);
        assert_eq!(ttft.x_label, "concurrency (clients)");
        // The TTFT gate is a horizontal line on the TTFT chart only; the E2E tok/s/user gate
        // on the per-user chart and as the pareto chart's vertical line.
        assert!(ttft
            .ref_lines
            .iter()
            .any(|l| !l.vertical && l.value == 2000.0));
        assert!(!specs[3].ref_lines.iter().any(|l| !l.vertical));
        assert!(specs[1].ref_lines.iter().any(|l| l.value == 100.0));
        assert_eq!(specs[4].ref_lines[0].value, 100.0);
        assert!(specs[4].ref_lines[0].vertical);
        // Pareto: x = E2E tok/s/user (the gated metric), y = tok/s/GPU.
        let p = specs[4].series[0].points[0];
        assert_eq!(
            p,
            (
                r.levels[0].e2e_tokens_per_s_per_user.unwrap(),
                r.levels[0].output_tokens_per_s_per_gpu.unwrap()
            )
        );
    }

    #[test]
    fn log_latency_puts_ttft_and_itl_on_a_log_y_axis_from_the_same_points() {
        let (s, r) = run();
        let lin = chart_specs(&s, &r.levels, r.operating_point.as_ref(), false);
        let log = chart_specs(&s, &r.levels, r.operating_point.as_ref(), true);
        let flags: Vec<bool> = log.iter().map(|c| c.log_y).collect();
        assert_eq!(flags, [false, false, true, true, false]);
        assert!(lin.iter().all(|c| !c.log_y));
        for i in [2, 3] {
            // Latencies are positive: the log chart plots exactly the linear chart's points.
            assert_eq!(log[i].series, lin[i].series, "{}", log[i].key);
            let ((_, _), (y0, y1)) = ranges(&log[i]);
            let lo = log[i]
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .fold(f64::INFINITY, f64::min);
            assert!(y0 > 0.0 && y0 < lo && y1 > lo, "{}: {y0}..{y1}", log[i].key);
            assert_eq!(ranges(&lin[i]).1 .0, 0.0);
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
                draw(&root, &log[i], &Theme::LIGHT).unwrap();
            }
            let points: usize = log[i].series.iter().map(|s| s.points.len()).sum();
            assert_eq!(svg.matches("<circle").count(), points);
        }
        // A zero cannot sit on a log axis: it is left out, not drawn at the bottom edge.
        let specs = {
            let mut rows = r.levels.clone();
            rows[0].ttft_ms.as_mut().unwrap().p50 = 0.0;
            chart_specs(&s, &rows, None, true)
        };
        assert!(specs[2].series[0].points.iter().all(|p| p.1 > 0.0));
        assert_eq!(
            specs[2].series[0].points.len(),
            log[2].series[0].points.len() - 1
        );
    }

    #[test]
    fn log_axis_labels_only_1_2_5_steps() {
        let labelled: Vec<String> = [1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 10.0, 20.0, 40.0, 500.0]
            .iter()
            .map(|v| log_tick(*v))
            .collect();
        assert_eq!(labelled, ["1", "2", "", "5", "", "", "10", "20", "", "500"]);
    }

    #[test]
    fn ranges_cover_points_and_reference_lines() {
        let (s, r) = run();
        let specs = chart_specs(&s, &r.levels, None, false);
        let ((x0, x1), (y0, y1)) = ranges(&specs[2]);
        let top = specs[2]
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(0.0, f64::max);
        assert!(top >= 64.0, "{top}");
        assert!(x0 > 0.0 && x0 < 1.0 && x1 > top, "log x range {x0}..{x1}");
        assert!(
            y0 <= 0.0 && y1 >= 2000.0,
            "must include the 2000 ms SLA line"
        );
    }

    #[test]
    fn single_point_and_empty_charts_get_usable_ranges() {
        let one = ChartSpec {
            key: "t",
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                label: "a".into(),
                points: vec![(8.0, 5.0)],
                style: SeriesStyle::Line,
            }],
            ref_lines: vec![],
            highlight: None,
        };
        let ((x0, x1), (y0, y1)) = ranges(&one);
        assert!(x0 < 8.0 && x1 > 8.0 && y0 < 5.0 && y1 > 5.0);
        let empty = ChartSpec {
            series: vec![],
            ..one
        };
        let ((x0, x1), (y0, y1)) = ranges(&empty);
        assert!(x0 > 0.0 && x1 > x0 && y1 > y0);
    }

    #[test]
    fn every_chart_renders_to_svg_with_its_title_and_points() {
        let (s, r) = run();
        for spec in chart_specs(&s, &r.levels, r.operating_point.as_ref(), false) {
            for theme in [Theme::LIGHT, Theme::DARK] {
                let mut svg = String::new();
                {
                    let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
                    draw(&root, &spec, &theme).unwrap();
                }
                assert!(svg.starts_with("<svg"), "{}", spec.key);
                assert!(svg.contains(&spec.title), "{} title missing", spec.key);
                // One filled circle per point of every series (plus the ring of the highlight).
                let points: usize = spec.series.iter().map(|s| s.points.len()).sum();
                let circles = svg.matches("<circle").count();
                let extra = usize::from(spec.highlight.is_some());
                assert_eq!(circles, points + extra, "{}", spec.key);
            }
        }
    }
}
