//! PNG plots with `plotters` (bitmap backend only, no font support, so that it
//! builds without system libraries): the images carry lines, bars and a grid
//! but no text; [`Frame`] returns the axis ranges so that callers can print them.
//! Cost: O(points) drawing plus PNG encoding of the image.

use gpuq_core::{Error, Result};
use plotters::prelude::*;
use serde::Serialize;
use std::path::Path;

/// Image size in pixels.
const SIZE: (u32, u32) = (960, 600);

/// The data ranges an image spans (its grid has 10 x 5 major divisions).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Frame {
    /// Left and right ends of the x axis.
    pub x: (f64, f64),
    /// Bottom and top of the y axis.
    pub y: (f64, f64),
}

fn io(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |e| Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    }
}

/// Finite range of the values, widened when empty or flat.
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0))
    } else {
        let pad = 0.05 * (hi - lo);
        (lo - pad, hi + pad)
    }
}

/// Lines through each series' (x, y) points, colours in order blue, red, red,
/// green, black, ...; writes the PNG at `path` and returns the frame.
pub fn lines(path: &Path, series: &[Vec<(f64, f64)>]) -> Result<Frame> {
    let colors = [BLUE, RED, RED, GREEN, BLACK, MAGENTA];
    let frame = Frame {
        x: range(series.iter().flatten().map(|p| p.0)),
        y: range(series.iter().flatten().map(|p| p.1)),
    };
    let err = io(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .build_cartesian_2d(frame.x.0..frame.x.1, frame.y.0..frame.y.1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(10)
        .y_labels(5)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new())
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (k, s) in series.iter().enumerate() {
        let color = colors[k % colors.len()];
        chart
            .draw_series(LineSeries::new(
                s.iter()
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite()),
                &color,
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(frame)
}

/// A histogram: `counts` of equal bins from `lo` to `hi` (no under/overflow).
pub fn histogram(path: &Path, lo: f64, hi: f64, counts: &[u64]) -> Result<Frame> {
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let frame = Frame {
        x: (lo, hi),
        y: (0.0, 1.05 * top),
    };
    let err = io(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .build_cartesian_2d(frame.x.0..frame.x.1, frame.y.0..frame.y.1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(10)
        .y_labels(5)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new())
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let width = (hi - lo) / counts.len().max(1) as f64;
    chart
        .draw_series(counts.iter().enumerate().map(|(i, &c)| {
            let x0 = lo + i as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width, c as f64)], BLUE.mix(0.6).filled())
        }))
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_pngs() {
        let dir = std::env::temp_dir().join(format!("gpuq-uq-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("lines.png");
        let s: Vec<(f64, f64)> = (0..50)
            .map(|i| (i as f64, (i as f64 * 0.2).sin()))
            .collect();
        let f = lines(&a, &[s.clone(), s]).unwrap();
        assert!(f.x.0 < 0.0 && f.x.1 > 49.0);
        let b = dir.join("hist.png");
        histogram(&b, -1.0, 1.0, &[1, 5, 9, 4]).unwrap();
        for p in [&a, &b] {
            let bytes = std::fs::read(p).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(lines(&dir.join("missing/x.png"), &[]).is_err());
    }
}
