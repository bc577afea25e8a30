//! Charts: series of lines, markers, reference lines and bars on two axes.

use crate::colour::{palette, rgb};
use crate::ticks;
use crate::{
    font, render, title_font, write, Draw, DrawResult, Drawn, Format, Frame, LABEL_PX, TICK_PX,
};
use gpuq_core::Result;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// An axis: its label (the quantity and its unit, e.g. `time t (s)`), its
/// scale, and optionally its range (else the data's: padded by 5% on a linear
/// axis, widened to whole decades on a logarithmic one).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The label under the x axis or beside the y axis.
    pub label: String,
    /// Logarithmic (base 10; the ticks at powers of ten are labelled 10ⁿ and
    /// the values that are not positive are left out).
    pub log: bool,
    /// The range, when the data's is not wanted.
    pub range: Option<(f64, f64)>,
    /// Label only the whole numbers (levels, indices).
    pub integers: bool,
}

impl Axis {
    /// A linear axis.
    pub fn new(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            range: None,
            integers: false,
        }
    }

    /// A logarithmic axis.
    pub fn log(label: impl Into<String>) -> Axis {
        Axis {
            log: true,
            ..Axis::new(label)
        }
    }

    /// This axis over `lo..hi`.
    pub fn range(self, lo: f64, hi: f64) -> Axis {
        Axis {
            range: Some((lo, hi)),
            ..self
        }
    }

    /// This axis with its whole numbers labelled only.
    pub fn integers(self) -> Axis {
        Axis {
            integers: true,
            ..self
        }
    }

    fn label_of(&self, span: f64) -> impl Fn(&f64) -> String {
        let (log, integers) = (self.log, self.integers);
        move |v: &f64| {
            if log {
                ticks::log_label(*v)
            } else if integers {
                ticks::integer_label(*v)
            } else {
                ticks::linear_label(*v, span)
            }
        }
    }
}

/// What a series draws.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// A solid line through the points.
    Line(Vec<(f64, f64)>),
    /// A dashed line through the points.
    Dashed(Vec<(f64, f64)>),
    /// A filled circle at each point.
    Markers(Vec<(f64, f64)>),
    /// A dashed horizontal line across the chart at this y.
    Horizontal(f64),
    /// Bars `[left, right, height]`, from 0 (a logarithmic y axis: from its
    /// bottom) to the height.
    Bars(Vec<[f64; 3]>),
}

/// One series of a chart: its data, its legend label (none when empty; a
/// label repeated by later series is listed once, so that for instance the two
/// lines of a band share an entry) and its colour (the index into
/// [`palette`], by default its position among the chart's series).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// Index into [`palette`]; `None`: the series' position in the chart.
    pub colour: Option<usize>,
    /// What to draw.
    pub data: Data,
}

impl Series {
    fn of(label: impl Into<String>, data: Data) -> Series {
        Series {
            label: label.into(),
            colour: None,
            data,
        }
    }

    /// A solid line.
    pub fn line(label: impl Into<String>, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series::of(label, Data::Line(points.into_iter().collect()))
    }

    /// A dashed line.
    pub fn dashed(
        label: impl Into<String>,
        points: impl IntoIterator<Item = (f64, f64)>,
    ) -> Series {
        Series::of(label, Data::Dashed(points.into_iter().collect()))
    }

    /// Markers.
    pub fn markers(
        label: impl Into<String>,
        points: impl IntoIterator<Item = (f64, f64)>,
    ) -> Series {
        Series::of(label, Data::Markers(points.into_iter().collect()))
    }

    /// A horizontal reference line at `y`.
    pub fn horizontal(label: impl Into<String>, y: f64) -> Series {
        Series::of(label, Data::Horizontal(y))
    }

    /// Bars `[left, right, height]`.
    pub fn bars(label: impl Into<String>, bars: impl IntoIterator<Item = [f64; 3]>) -> Series {
        Series::of(label, Data::Bars(bars.into_iter().collect()))
    }

    /// This series in colour `k` of [`palette`].
    pub fn colour(self, k: usize) -> Series {
        Series {
            colour: Some(k),
            ..self
        }
    }
}

/// Where a chart's legend goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Legend {
    /// Inside the plot, upper right (the default).
    #[default]
    UpperRight,
    /// Inside the plot, upper left.
    UpperLeft,
    /// Inside the plot, lower right.
    LowerRight,
    /// Inside the plot, lower left.
    LowerLeft,
    /// No legend.
    Hidden,
}

/// A chart: a title, two axes and series, with a legend of the labelled
/// series. Rendered at [`Chart::SIZE`] unless `size` says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// The title above the plot.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// The series, drawn in order (later ones on top).
    pub series: Vec<Series>,
    /// Where the legend goes.
    pub legend: Legend,
    /// Width and height in pixels.
    pub size: (u32, u32),
}

impl Chart {
    /// The default size in pixels: 1200 x 750.
    pub const SIZE: (u32, u32) = (1200, 750);

    /// A chart without series.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            legend: Legend::default(),
            size: Chart::SIZE,
        }
    }

    /// This chart with `series` added on top.
    pub fn with(mut self, series: Series) -> Chart {
        self.series.push(series);
        self
    }

    /// This chart with its legend at `legend`.
    pub fn legend(self, legend: Legend) -> Chart {
        Chart { legend, ..self }
    }

    /// The ranges the axes will span. O(points).
    pub fn frame(&self) -> Frame {
        let xs = self.series.iter().flat_map(|s| -> Vec<f64> {
            match &s.data {
                Data::Line(p) | Data::Dashed(p) | Data::Markers(p) => {
                    p.iter().map(|q| q.0).collect()
                }
                Data::Horizontal(_) => Vec::new(),
                Data::Bars(b) => b.iter().flat_map(|q| [q[0], q[1]]).collect(),
            }
        });
        let ys = self.series.iter().flat_map(|s| -> Vec<f64> {
            match &s.data {
                Data::Line(p) | Data::Dashed(p) | Data::Markers(p) => {
                    p.iter().map(|q| q.1).collect()
                }
                Data::Horizontal(y) => vec![*y],
                Data::Bars(b) => b.iter().map(|q| q[2]).collect(),
            }
        });
        let bars = self.series.iter().any(|s| matches!(s.data, Data::Bars(_)));
        let range = |axis: &Axis, values: Vec<f64>, from_zero: bool| {
            if let Some(r) = axis.range {
                return r;
            }
            if axis.log {
                return ticks::log_range(values.into_iter());
            }
            let nonnegative = values.iter().all(|v| !v.is_finite() || *v >= 0.0);
            let (lo, hi) = ticks::linear_range(values.into_iter().chain(from_zero.then_some(0.0)));
            if from_zero && nonnegative {
                (0.0, hi)
            } else {
                (lo, hi)
            }
        };
        let mut y = range(&self.y, ys.collect(), bars);
        // Room above the data for a legend at the top, on a linear axis of the
        // data's range: 7% of the range per entry.
        let upper = matches!(self.legend, Legend::UpperLeft | Legend::UpperRight);
        if upper && !self.y.log && self.y.range.is_none() {
            y.1 += 0.07 * (y.1 - y.0) * self.legend_entries().len() as f64;
        }
        Frame {
            x: range(&self.x, xs.collect(), false),
            y,
        }
    }

    /// The legend's texts: the series' non-empty labels, each once.
    fn legend_entries(&self) -> Vec<&str> {
        let mut listed: Vec<&str> = Vec::new();
        for s in &self.series {
            if !s.label.is_empty() && !listed.contains(&s.label.as_str()) {
                listed.push(&s.label);
            }
        }
        listed
    }

    /// The figure as PNG or SVG bytes.
    pub fn render(&self, format: Format) -> Result<Vec<u8>> {
        render(self, format).map(|r| r.0)
    }

    /// Writes the figure at `path` (SVG when the name ends in `.svg`, else
    /// PNG); returns the axes' ranges. Errors on I/O failures.
    pub fn save(&self, path: &Path) -> Result<Frame> {
        let (bytes, frame) = render(self, Format::of(path))?;
        write(path, &bytes)?;
        Ok(frame)
    }

    fn draw_on<DB, X, Y>(
        &self,
        root: &DrawingArea<DB, Shift>,
        frame: Frame,
        xr: X,
        yr: Y,
    ) -> DrawResult<(), DB>
    where
        DB: DrawingBackend,
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, title_font(root, &self.title))
            .margin(24)
            .x_label_area_size(72)
            .y_label_area_size(120)
            .build_cartesian_2d(xr, yr)?;
        let x_label = self.x.label_of(frame.x.1 - frame.x.0);
        let y_label = self.y.label_of(frame.y.1 - frame.y.0);
        let x_count = if self.x.integers {
            ((frame.x.1 - frame.x.0).abs() as usize + 1).clamp(2, 12)
        } else {
            10
        };
        chart
            .configure_mesh()
            .x_desc(self.x.label.as_str())
            .y_desc(self.y.label.as_str())
            .axis_desc_style(font(LABEL_PX))
            .label_style(font(TICK_PX))
            .x_labels(x_count)
            .y_labels(if self.y.log { 12 } else { 8 })
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .bold_line_style(BLACK.mix(0.15))
            .light_line_style(BLACK.mix(0.05))
            .axis_style(BLACK.stroke_width(2))
            .set_all_tick_mark_size(6)
            .draw()?;
        let (xlog, ylog) = (self.x.log, self.y.log);
        let keep = move |p: &(f64, f64)| {
            p.0.is_finite() && p.1.is_finite() && (!xlog || p.0 > 0.0) && (!ylog || p.1 > 0.0)
        };
        let mut listed: Vec<&str> = Vec::new();
        for (k, s) in self.series.iter().enumerate() {
            let c = rgb(palette(s.colour.unwrap_or(k)));
            let labelled = !s.label.is_empty() && !listed.contains(&s.label.as_str());
            if labelled {
                listed.push(&s.label);
            }
            let line = c.stroke_width(3);
            match &s.data {
                Data::Line(p) => {
                    let a =
                        chart.draw_series(LineSeries::new(p.iter().copied().filter(keep), line))?;
                    if labelled {
                        a.label(s.label.as_str())
                            .legend(move |(x, y)| PathElement::new([(x, y), (x + 36, y)], line));
                    }
                }
                Data::Dashed(p) => {
                    let a = chart.draw_series(DashedLineSeries::new(
                        p.iter().copied().filter(keep),
                        12,
                        8,
                        line,
                    ))?;
                    if labelled {
                        a.label(s.label.as_str()).legend(move |(x, y)| {
                            EmptyElement::at((x, y))
                                + PathElement::new([(0, 0), (14, 0)], line)
                                + PathElement::new([(22, 0), (36, 0)], line)
                        });
                    }
                }
                Data::Horizontal(v) => {
                    let ends = [(frame.x.0, *v), (frame.x.1, *v)];
                    let a = chart.draw_series(DashedLineSeries::new(
                        ends.into_iter().filter(keep),
                        12,
                        8,
                        line,
                    ))?;
                    if labelled {
                        a.label(s.label.as_str()).legend(move |(x, y)| {
                            EmptyElement::at((x, y))
                                + PathElement::new([(0, 0), (14, 0)], line)
                                + PathElement::new([(22, 0), (36, 0)], line)
                        });
                    }
                }
                Data::Markers(p) => {
                    let a = chart.draw_series(
                        p.iter()
                            .copied()
                            .filter(keep)
                            .map(|q| Circle::new(q, 7, c.filled())),
                    )?;
                    if labelled {
                        a.label(s.label.as_str())
                            .legend(move |(x, y)| Circle::new((x + 18, y), 7, c.filled()));
                    }
                }
                Data::Bars(b) => {
                    let base = if ylog { frame.y.0 } else { 0.0 };
                    let fill = c.mix(0.8).filled();
                    let a = chart.draw_series(
                        b.iter()
                            .filter(|q| keep(&(q[0], q[2])) && keep(&(q[1], q[2])))
                            .map(|q| Rectangle::new([(q[0], base), (q[1], q[2])], fill)),
                    )?;
                    if labelled {
                        a.label(s.label.as_str()).legend(move |(x, y)| {
                            Rectangle::new([(x, y - 8), (x + 36, y + 8)], fill)
                        });
                    }
                }
            }
        }
        let position = match self.legend {
            Legend::UpperRight => SeriesLabelPosition::UpperRight,
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
            Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
            Legend::Hidden => return Ok(()),
        };
        if !listed.is_empty() {
            chart
                .configure_series_labels()
                .position(position)
                .margin(16)
                .legend_area_size(44)
                .label_font(font(TICK_PX))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.5))
                .draw()?;
        }
        Ok(())
    }
}

impl Draw for Chart {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<Drawn, DB> {
        root.fill(&WHITE)?;
        let f = self.frame();
        let (x, y) = (f.x.0..f.x.1, f.y.0..f.y.1);
        match (self.x.log, self.y.log) {
            (false, false) => self.draw_on(root, f, x, y)?,
            (false, true) => self.draw_on(root, f, x, y.log_scale())?,
            (true, false) => self.draw_on(root, f, x.log_scale(), y)?,
            (true, true) => self.draw_on(root, f, x.log_scale(), y.log_scale())?,
        }
        Ok(Drawn {
            frame: f,
            rasters: Vec::new(),
        })
    }
}
