//! Heat maps: values at the nodes of a regular grid, coloured by viridis, with
//! a colour bar.

use crate::colour::{rgb, viridis, MISSING};
use crate::ticks;
use crate::{
    font, render, title_font, write, Draw, DrawResult, Drawn, Format, Frame, Raster, LABEL_PX,
    TICK_PX,
};
use gpuq_core::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Values at the nodes of an `nx` x `ny` grid spanning `extent`, drawn as a
/// map (each pixel takes the value of the nearest node, coloured by
/// [`viridis`] over the colour range, missing values (NaN) in [`MISSING`]
/// grey) with axes in the grid's units, a title, a colour bar with tick
/// labels and its label, and a legend entry for missing values when there are
/// any. Optionally, contour lines (isolines, e.g. isochrones of an activation
/// map) at given values, black over the map and across the colour bar, with a
/// legend entry. The map keeps the grid's aspect ratio.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatMap {
    /// The title above the map.
    pub title: String,
    /// The x axis's label (quantity and unit).
    pub x_label: String,
    /// The y axis's label.
    pub y_label: String,
    /// Nodes along x and along y.
    pub nodes: (usize, usize),
    /// The coordinates of the first and last nodes: (x0, x1, y0, y1).
    pub extent: (f64, f64, f64, f64),
    /// `nx * ny` values, row by row from y0 (the bottom) up, x fastest.
    pub values: Vec<f64>,
    /// The colour bar's label (quantity and unit).
    pub colour_label: String,
    /// The values mapped to the ends of the colour map (default: the
    /// smallest and largest finite values).
    pub colour_range: Option<(f64, f64)>,
    /// The legend's text for missing values.
    pub missing_label: String,
    /// Values at which contour lines are drawn (none by default): a pixel is
    /// on the line of value `c` where the values interpolated bilinearly
    /// between the nodes at its centre and at its right or lower neighbour's
    /// lie on either side of `c` (cells with a missing corner have none).
    pub contours: Vec<f64>,
    /// The legend's text for the contour lines (shown when there are any).
    pub contour_label: String,
}

/// The colour of contour lines.
const CONTOUR: [u8; 3] = [0, 0, 0];

/// The part of the image right of the map: the colour bar and its labels.
const BAR_PART: u32 = 240;
/// The longer side of the map in pixels.
const MAP_SIDE: f64 = 720.0;

impl HeatMap {
    /// A map of `values` (see the fields) with the colour range of the data
    /// and missing values labelled "no value". Errors unless there are `nx *
    /// ny >= 1` values and the extent is finite.
    pub fn new(
        title: impl Into<String>,
        (x_label, y_label): (&str, &str),
        nodes: (usize, usize),
        extent: (f64, f64, f64, f64),
        values: Vec<f64>,
        colour_label: impl Into<String>,
    ) -> Result<HeatMap> {
        let (nx, ny) = nodes;
        if nx == 0 || ny == 0 {
            return Err(Error::InvalidArgument(format!(
                "a heat map needs at least one node ({nx} x {ny} given)"
            )));
        }
        gpuq_core::check_same_len("heat map", nx * ny, values.len())?;
        let (x0, x1, y0, y1) = extent;
        if ![x0, x1, y0, y1].iter().all(|v| v.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "a heat map's extent must be finite, not {extent:?}"
            )));
        }
        Ok(HeatMap {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            nodes,
            extent,
            values,
            colour_label: colour_label.into(),
            colour_range: None,
            missing_label: "no value".into(),
            contours: Vec::new(),
            contour_label: "contours".into(),
        })
    }

    /// Sets contour lines every `step` from the colour range's low end
    /// (`lo + step, lo + 2 step, ...` up to the high end), with the legend
    /// text `label`. Errors unless `step` is positive and finite, or when it
    /// would draw more than 1000 lines.
    pub fn with_contours_every(mut self, step: f64, label: impl Into<String>) -> Result<Self> {
        let (lo, hi) = self.colours();
        let lines = ((hi - lo) / step).floor();
        let valid = step.is_finite() && step > 0.0 && lines.is_finite() && lines <= 1000.0;
        if !valid {
            return Err(Error::InvalidArgument(format!(
                "contours every {step} over [{lo}, {hi}]: the step must be positive and give \
                 at most 1000 lines"
            )));
        }
        self.contours = (1..=lines as usize).map(|k| lo + k as f64 * step).collect();
        self.contour_label = label.into();
        Ok(self)
    }

    /// The values at the ends of the colour map: `colour_range`, else the
    /// smallest and largest finite values (widened when flat or absent).
    pub fn colours(&self) -> (f64, f64) {
        if let Some(r) = self.colour_range {
            return r;
        }
        let (lo, hi) = self
            .values
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        if lo > hi {
            (0.0, 1.0)
        } else if lo == hi {
            (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0))
        } else {
            (lo, hi)
        }
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

    /// Width over height of the grid (1 when degenerate).
    fn aspect(&self) -> f64 {
        let (x0, x1, y0, y1) = self.extent;
        let a = (x1 - x0).abs() / (y1 - y0).abs();
        if a.is_finite() && a > 0.0 {
            a.clamp(0.1, 10.0)
        } else {
            1.0
        }
    }

    /// The colour of `v`.
    fn colour(&self, v: f64, (lo, hi): (f64, f64)) -> [u8; 3] {
        if v.is_nan() {
            MISSING
        } else if hi > lo {
            viridis((v - lo) / (hi - lo))
        } else {
            viridis(0.0)
        }
    }

    /// The map's pixels for a `w` x `h` box: each pixel the nearest node's colour.
    fn raster(&self, w: u32, h: u32) -> Vec<u8> {
        let (nx, ny) = self.nodes;
        let range = self.colours();
        let node = |k: u32, pixels: u32, nodes: usize| -> usize {
            let s = (k as f64 + 0.5) / pixels as f64;
            ((s * (nodes - 1) as f64).round() as usize).min(nodes - 1)
        };
        let mut rgb = Vec::with_capacity(3 * w as usize * h as usize);
        for row in 0..h {
            let iy = ny - 1 - node(row, h, ny);
            for col in 0..w {
                let ix = node(col, w, nx);
                rgb.extend_from_slice(&self.colour(self.values[iy * nx + ix], range));
            }
        }
        if !self.contours.is_empty() {
            self.draw_contours(&mut rgb, w, h);
        }
        rgb
    }

    /// The value at the centre of pixel `(col, row)` of a `w` x `h` raster,
    /// interpolated bilinearly between the four nodes around it (NaN when one
    /// of them is missing).
    fn interpolated(&self, col: u32, row: u32, w: u32, h: u32) -> f64 {
        let (nx, ny) = self.nodes;
        let at = |k: u32, pixels: u32, nodes: usize| -> (usize, usize, f64) {
            let s = (k as f64 + 0.5) / pixels as f64 * (nodes - 1) as f64;
            let i = (s.floor() as usize).min(nodes.saturating_sub(2));
            let j = (i + 1).min(nodes - 1);
            (i, j, s - i as f64)
        };
        let (x0, x1, fx) = at(col, w, nx);
        let (y0, y1, fy) = at(h - 1 - row, h, ny);
        let v = |ix: usize, iy: usize| self.values[iy * nx + ix];
        let bottom = v(x0, y0) * (1.0 - fx) + v(x1, y0) * fx;
        let top = v(x0, y1) * (1.0 - fx) + v(x1, y1) * fx;
        bottom * (1.0 - fy) + top * fy
    }

    /// Paints the contour lines into the map's pixels: black where the
    /// contour count (how many of the sorted contour values are at most the
    /// pixel's interpolated value) changes between a pixel and its right or
    /// lower neighbour. O(pixels log contours).
    fn draw_contours(&self, rgb: &mut [u8], w: u32, h: u32) {
        let mut levels = self.contours.clone();
        levels.retain(|c| c.is_finite());
        levels.sort_by(f64::total_cmp);
        let band = |v: f64| -> Option<usize> {
            (!v.is_nan()).then(|| levels.partition_point(|&c| c <= v))
        };
        let bands: Vec<Option<usize>> = (0..h)
            .flat_map(|row| (0..w).map(move |col| (col, row)))
            .map(|(col, row)| band(self.interpolated(col, row, w, h)))
            .collect();
        let at = |col: u32, row: u32| (row * w + col) as usize;
        for row in 0..h {
            for col in 0..w {
                let Some(b) = bands[at(col, row)] else {
                    continue;
                };
                let right = col + 1 < w && bands[at(col + 1, row)].is_some_and(|r| r != b);
                let below = row + 1 < h && bands[at(col, row + 1)].is_some_and(|r| r != b);
                if right || below {
                    let k = 3 * at(col, row);
                    rgb[k..k + 3].copy_from_slice(&CONTOUR);
                }
            }
        }
    }
}

impl Draw for HeatMap {
    fn size(&self) -> (u32, u32) {
        let a = self.aspect();
        let (pw, ph) = if a >= 1.0 {
            (MAP_SIDE, (MAP_SIDE / a).max(240.0))
        } else {
            ((MAP_SIDE * a).max(240.0), MAP_SIDE)
        };
        (
            pw.round() as u32 + 2 * 24 + 110 + BAR_PART,
            ph.round() as u32 + 2 * 24 + 72 + 56,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<Drawn, DB> {
        root.fill(&WHITE)?;
        let area = root.titled(&self.title, title_font(root, &self.title))?;
        let (w, _) = area.dim_in_pixel();
        let (left, right) = area.split_horizontally(w.saturating_sub(BAR_PART));
        // The plot box left of the colour bar, shrunk to the grid's aspect.
        let (lw, lh) = left.dim_in_pixel();
        let (pw, ph) = (
            lw as f64 - 2.0 * 24.0 - 110.0,
            lh as f64 - 2.0 * 24.0 - 72.0,
        );
        let a = self.aspect();
        let (extra_right, extra_top) = if pw / ph > a {
            ((pw - ph * a).round() as i32, 0)
        } else {
            (0, (ph - pw / a).round() as i32)
        };
        let (x0, x1, y0, y1) = self.extent;
        let mut map = ChartBuilder::on(&left)
            .margin(24)
            .margin_right(24 + extra_right)
            .margin_top(24 + extra_top)
            .x_label_area_size(72)
            .y_label_area_size(110)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        let x_label = |v: &f64| ticks::linear_label(*v, x1 - x0);
        let y_label = |v: &f64| ticks::linear_label(*v, y1 - y0);
        map.configure_mesh()
            .disable_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style(font(LABEL_PX))
            .label_style(font(TICK_PX))
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .axis_style(BLACK.stroke_width(2))
            .set_all_tick_mark_size(6)
            .draw()?;
        let (mx, my) = map.plotting_area().get_pixel_range();
        let map_raster = Raster {
            x: mx.start,
            y: my.start,
            width: (mx.end - mx.start).max(1) as u32,
            height: (my.end - my.start).max(1) as u32,
            rgb: Vec::new(),
        };
        let map_raster = Raster {
            rgb: self.raster(map_raster.width, map_raster.height),
            ..map_raster
        };
        // The colour bar, as tall as the map.
        let (lo, hi) = self.colours();
        let base = right.get_base_pixel();
        let (_, rh) = right.dim_in_pixel();
        let mut bar = ChartBuilder::on(&right)
            .margin_top(my.start - base.1)
            .margin_bottom(base.1 + rh as i32 - my.end)
            .margin_left(30)
            .margin_right(BAR_PART as i32 - 30 - 28 - 140)
            .right_y_label_area_size(140)
            .build_cartesian_2d(0.0..1.0, lo..hi)?;
        let bar_label = |v: &f64| ticks::linear_label(*v, hi - lo);
        bar.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_desc(self.colour_label.as_str())
            .axis_desc_style(font(LABEL_PX))
            .label_style(font(TICK_PX))
            .y_labels(8)
            .y_label_formatter(&bar_label)
            .axis_style(BLACK.stroke_width(2))
            .set_all_tick_mark_size(6)
            .draw()?;
        let (bx, by) = bar.plotting_area().get_pixel_range();
        let (bw, bh) = (
            (bx.end - bx.start).max(1) as u32,
            (by.end - by.start).max(1) as u32,
        );
        let mut gradient = Vec::with_capacity(3 * bw as usize * bh as usize);
        // The rows of the bar where a contour value falls.
        let contour_rows: Vec<u32> = self
            .contours
            .iter()
            .filter(|&&c| hi > lo && c >= lo && c <= hi)
            .map(|&c| {
                ((1.0 - (c - lo) / (hi - lo)) * bh as f64)
                    .floor()
                    .min(bh as f64 - 1.0) as u32
            })
            .collect();
        for row in 0..bh {
            let c = if contour_rows.contains(&row) {
                CONTOUR
            } else {
                viridis(1.0 - (row as f64 + 0.5) / bh as f64)
            };
            for _ in 0..bw {
                gradient.extend_from_slice(&c);
            }
        }
        root.draw(&Rectangle::new(
            [(bx.start - 1, by.start - 1), (bx.end, by.end)],
            BLACK.stroke_width(1),
        ))?;
        let mut y = my.end + 28;
        if !self.contours.is_empty() {
            root.draw(&PathElement::new(
                [(bx.start, y + 10), (bx.start + 28, y + 10)],
                rgb(CONTOUR).stroke_width(2),
            ))?;
            root.draw(&Text::new(
                self.contour_label.clone(),
                (bx.start + 38, y + 10),
                font(TICK_PX).pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            y += 28;
        }
        if self.values.iter().any(|v| v.is_nan()) {
            root.draw(&Rectangle::new(
                [(bx.start, y), (bx.start + 28, y + 20)],
                rgb(MISSING).filled(),
            ))?;
            root.draw(&Rectangle::new(
                [(bx.start, y), (bx.start + 28, y + 20)],
                BLACK.stroke_width(1),
            ))?;
            root.draw(&Text::new(
                self.missing_label.clone(),
                (bx.start + 38, y + 10),
                font(TICK_PX).pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        Ok(Drawn {
            frame: Frame {
                x: (x0, x1),
                y: (y0, y1),
            },
            rasters: vec![
                map_raster,
                Raster {
                    x: bx.start,
                    y: by.start,
                    width: bw,
                    height: bh,
                    rgb: gradient,
                },
            ],
        })
    }
}
