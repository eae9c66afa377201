//! PNG line charts with plotters' bitmap backend. Text is drawn with an embedded DejaVu Sans,
//! so a machine without any system font renders the same picture.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::error::Error;
use std::path::Path;
use std::sync::Once;

/// The family name the embedded font is registered under.
const FONT: &str = "sans-serif";

/// A palette that stays apart for readers with the common colour-vision deficiencies
/// (Okabe–Ito, then black and grey), the first colour reserved for the baseline.
pub const COLORS: [RGBColor; 8] = [
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 114, 178),   // blue
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(230, 159, 0),   // orange
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(136, 136, 136), // grey
];

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    /// The legend's label.
    pub label: String,
    /// (x, y) points, x ascending.
    pub points: Vec<(f64, f64)>,
    /// Stroke width in pixels.
    pub width: u32,
}

/// One chart: a title, axis descriptions and lines.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Above the plot.
    pub title: String,
    /// Under the x axis.
    pub x_label: String,
    /// Beside the y axis.
    pub y_label: String,
    /// In legend order; line `i` is drawn in `COLORS[i % 8]`.
    pub lines: Vec<Line>,
    /// A labelled band of x values shaded grey behind the lines, such as an outage.
    pub band: Option<(f64, f64, String)>,
    /// A logarithmic y axis, for lines that differ by orders of magnitude.
    pub log_y: bool,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
}

/// Marks each line whose points are those of an earlier line: its label gains `(= earlier)`,
/// and the earlier line is drawn wider, so that both stay visible where they coincide.
pub fn mark_duplicates(lines: &mut [Line]) {
    for j in 1..lines.len() {
        if let Some(i) = (0..j).find(|&i| lines[i].points == lines[j].points) {
            let earlier = lines[i].label.clone();
            lines[j].label = format!("{} (= {earlier})", lines[j].label);
            lines[i].width = lines[i].width.max(lines[j].width + 4);
        }
    }
}

fn register_embedded_font() -> Result<(), Box<dyn Error>> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| "the embedded DejaVu Sans font did not load".into());
    });
    result
}

/// Draws `charts` side by side into one PNG of `width`×`height` pixels.
pub fn draw(path: &Path, size: (u32, u32), charts: &[Chart]) -> Result<(), Box<dyn Error>> {
    draw_grid(path, size, 1, charts)
}

/// Draws `charts` in `rows` rows (filled left to right, top to bottom) into one PNG of
/// `width`×`height` pixels.
pub fn draw_grid(
    path: &Path,
    (width, height): (u32, u32),
    rows: usize,
    charts: &[Chart],
) -> Result<(), Box<dyn Error>> {
    register_embedded_font()?;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let rows = rows.max(1);
    let columns = charts.len().div_ceil(rows).max(1);
    let panels = root.split_evenly((rows, columns));
    for (chart, area) in charts.iter().zip(&panels) {
        draw_chart(area, chart)?;
    }
    root.present()?;
    Ok(())
}

fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let points = chart.lines.iter().flat_map(|l| &l.points);
    let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let y_max = points.clone().map(|p| p.1).fold(0.0, f64::max).max(1.0);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&chart.title, (FONT, 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    if chart.log_y {
        let y_min = points
            .map(|p| p.1)
            .filter(|y| *y > 0.0)
            .fold(y_max, f64::min);
        let ctx =
            builder.build_cartesian_2d(0.0..x_max, (y_min * 0.8..y_max * 1.25).log_scale())?;
        draw_into(ctx, chart, y_min * 0.8)
    } else {
        let ctx = builder.build_cartesian_2d(0.0..x_max, 0.0..y_max * 1.05)?;
        draw_into(ctx, chart, 0.0)
    }
}

/// The mesh, the band, the lines and the legend, on linear or logarithmic y.
fn draw_into<'a, DB, Y>(
    mut ctx: ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    chart: &Chart,
    y_bottom: f64,
) -> Result<(), Box<dyn Error>>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let y_top = ctx.y_range().end;
    ctx.configure_mesh()
        .x_label_formatter(&number)
        .y_label_formatter(&number)
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if let Some((from, to, label)) = &chart.band {
        let grey = RGBColor(228, 228, 228);
        ctx.draw_series([Rectangle::new(
            [(*from, y_bottom), (*to, y_top)],
            grey.filled(),
        )])?
        .label(label.as_str())
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 24, y + 6)], grey.filled()));
    }
    for (i, line) in chart.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        ctx.draw_series(LineSeries::new(
            line.points.iter().copied(),
            color.stroke_width(line.width),
        ))?
        .label(line.label.as_str())
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], color.stroke_width(4)));
    }
    ctx.configure_series_labels()
        .position(chart.legend.clone())
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// An axis label without a trailing `.0`: `1000`, `2.5`.
fn number(v: &f64) -> String {
    let text = format!("{v:.1}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_equal_to_an_earlier_one_says_so_and_the_earlier_widens() {
        let line = |label: &str, y: f64| Line {
            label: label.to_owned(),
            points: vec![(0.0, y), (1.0, y)],
            width: 2,
        };
        let mut lines = vec![line("a", 1.0), line("b", 2.0), line("c", 1.0)];
        mark_duplicates(&mut lines);
        assert_eq!(lines[2].label, "c (= a)");
        assert_eq!((lines[0].width, lines[1].width, lines[2].width), (6, 2, 2));
        assert_eq!(lines[1].label, "b");
    }
}
