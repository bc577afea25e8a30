//! Figures of gpuq with their text: a title, axes with tick labels and their
//! quantities and units, a legend where several series share a plot, and a
//! colour bar on maps. The one drawing module the CLI's `--plot` options,
//! `gpuq-uq`'s plots and `gpuq-bidomain`'s activation map share.
//!
//! Two kinds of figure:
//!
//! * [`Chart`]: lines, dashed lines, markers, horizontal reference lines and
//!   bars ([`Series`]) on linear or logarithmic axes ([`Axis`]);
//! * [`HeatMap`]: values on a regular grid of nodes coloured by
//!   [`viridis`], with a colour bar, a legend entry for missing values (NaN)
//!   and optional contour lines ([`HeatMap::with_contours_every`]: the
//!   isochrones of an activation map).
//!
//! Built on them, the figures of the solvers' reports: [`residual_chart`] (a
//! solve's residual history) and [`hierarchy_chart`] (an AMG hierarchy's
//! levels).
//!
//! Each renders to bytes ([`Chart::render`]) or to a file ([`Chart::save`]):
//! SVG when the file name ends in `.svg` ([`Format::of`]), else PNG. The
//! text is drawn with DejaVu Sans, embedded in the binary (no system fonts,
//! no fontconfig: `fonts/DejaVuSans.ttf`, under the DejaVu fonts licence, a
//! permissive licence derived from Bitstream Vera's, in
//! `fonts/LICENSE-DejaVu.txt`); in an SVG the text stays text (`<text>`
//! elements, font family `DejaVu Sans, sans-serif`). Rendering is
//! deterministic: the same figure gives the same bytes on every run (no time
//! stamps, no hash-ordered output, no state kept between renderings but the
//! registered font).
//!
//! ```
//! use gpuq_plot::{Axis, Chart, Format, Series};
//!
//! let chart = Chart::new("Decay", Axis::new("time t (s)"), Axis::log("amplitude (m)"))
//!     .with(Series::line("exp(-t)", (0..50).map(|i| {
//!         let t = 0.1 * i as f64;
//!         (t, (-t).exp())
//!     })))
//!     .with(Series::horizontal("threshold", 1e-2));
//! let svg = String::from_utf8(chart.render(Format::Svg)?).unwrap();
//! assert!(svg.contains(">\nDecay\n</text>") && svg.contains(">\ntime t (s)\n</text>"));
//! let png = chart.render(Format::Png)?;
//! assert_eq!(&png[1..4], b"PNG");
//! assert_eq!(png, chart.render(Format::Png)?);
//! # Ok::<(), gpuq_core::Error>(())
//! ```

mod chart;
mod colour;
mod heat;
mod pixels;
mod reports;
mod ticks;

pub use chart::{Axis, Chart, Data, Legend, Series};
pub use colour::{palette, viridis, MISSING};
pub use heat::HeatMap;
pub use reports::{hierarchy_chart, residual_chart};

use gpuq_core::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The data ranges a chart's axes span (a logarithmic axis's widened to whole
/// decades), which callers may print beside the figure.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Frame {
    /// Left and right ends of the x axis.
    pub x: (f64, f64),
    /// Bottom and top of the y axis.
    pub y: (f64, f64),
}

/// The file format of a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// 8-bit RGB PNG.
    Png,
    /// SVG with the text as `<text>` elements (a map's raster embedded as a
    /// base64 PNG `<image>`).
    Svg,
}

impl Format {
    /// SVG when the file name ends in `.svg` (any case), else PNG.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("svg") => Format::Svg,
            _ => Format::Png,
        }
    }

    /// The file name extension: `png` or `svg`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
}

/// The family name the embedded font is registered under; an SVG names it
/// with `sans-serif` as the fallback of viewers without DejaVu Sans.
const FAMILY: &str = "DejaVu Sans, sans-serif";

/// DejaVu Sans 2.37 (see `fonts/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Text sizes in pixels.
pub(crate) const TITLE_PX: f64 = 30.0;
pub(crate) const LABEL_PX: f64 = 22.0;
pub(crate) const TICK_PX: f64 = 18.0;

/// The embedded font at `size` pixels, registered with plotters on first use.
pub(crate) fn font(size: f64) -> TextStyle<'static> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    TextStyle::from((FontFamily::Name(FAMILY), size)).color(&BLACK)
}

/// The title's font: [`TITLE_PX`] pixels, smaller (down to 14) when the
/// title would not fit the width of `area` with 24 pixels either side.
pub(crate) fn title_font<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
) -> TextStyle<'static> {
    let room = f64::from(area.dim_in_pixel().0.saturating_sub(48));
    let width = area
        .estimate_text_size(title, &font(TITLE_PX))
        .map_or(0.0, |(w, _)| f64::from(w));
    if width <= room {
        font(TITLE_PX)
    } else {
        font((TITLE_PX * room / width).floor().max(14.0))
    }
}

/// An RGB image painted over a figure after plotters has drawn it: into the
/// pixels of a PNG, as an `<image>` of an SVG.
pub(crate) struct Raster {
    /// Top-left corner in pixels.
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
    /// Row-major RGB, top row first.
    pub rgb: Vec<u8>,
}

/// What a figure's drawing returns.
pub(crate) struct Drawn {
    pub frame: Frame,
    pub rasters: Vec<Raster>,
}

/// The drawing error plotters reports, as text.
pub(crate) type DrawResult<T, DB> =
    std::result::Result<T, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A figure plotters can draw on any backend.
pub(crate) trait Draw {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws the figure on `root` (already white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<Drawn, DB>;
}

/// Renders `figure` in `format`: the file's bytes and the frame.
pub(crate) fn render<F: Draw>(figure: &F, format: Format) -> Result<(Vec<u8>, Frame)> {
    let (w, h) = figure.size();
    let failed = |e: String| Error::InvalidArgument(format!("cannot draw the figure: {e}"));
    match format {
        Format::Png => {
            let mut pixels = vec![255u8; 3 * w as usize * h as usize];
            let drawn = {
                let root = pixels::Pixels(BitMapBackend::with_buffer(&mut pixels, (w, h)))
                    .into_drawing_area();
                let drawn = figure.draw(&root).map_err(|e| failed(e.to_string()))?;
                root.present().map_err(|e| failed(e.to_string()))?;
                drawn
            };
            for r in &drawn.rasters {
                paint(&mut pixels, (w, h), r);
            }
            Ok((encode_png(&pixels, w, h)?, drawn.frame))
        }
        Format::Svg => {
            let mut text = String::new();
            let drawn = {
                let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
                let drawn = figure.draw(&root).map_err(|e| failed(e.to_string()))?;
                root.present().map_err(|e| failed(e.to_string()))?;
                drawn
            };
            let mut images = String::new();
            for r in &drawn.rasters {
                images.push_str(&svg_image(r)?);
            }
            let end = text
                .rfind("</svg>")
                .ok_or_else(|| failed("the SVG has no end tag".into()))?;
            text.insert_str(end, &images);
            Ok((text.into_bytes(), drawn.frame))
        }
    }
}

/// Writes `bytes` at `path`, atomically (no truncated figure is left behind).
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    gpuq_core::files::write_bytes_atomically(path, bytes)
}

/// Copies the raster into an RGB image of `size`, clipped to it.
fn paint(pixels: &mut [u8], (w, h): (u32, u32), r: &Raster) {
    for row in 0..r.height as i32 {
        let y = r.y + row;
        if y < 0 || y >= h as i32 {
            continue;
        }
        for col in 0..r.width as i32 {
            let x = r.x + col;
            if x < 0 || x >= w as i32 {
                continue;
            }
            let src = 3 * (row as usize * r.width as usize + col as usize);
            let dst = 3 * (y as usize * w as usize + x as usize);
            pixels[dst..dst + 3].copy_from_slice(&r.rgb[src..src + 3]);
        }
    }
}

/// An 8-bit RGB PNG of the pixels (row-major, top row first).
pub(crate) fn encode_png(pixels: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let failed = |e: png::EncodingError| {
        Error::InvalidArgument(format!("cannot encode the PNG ({width} x {height}): {e}"))
    };
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Best);
        encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut writer = encoder.write_header().map_err(failed)?;
        writer.write_image_data(pixels).map_err(failed)?;
        writer.finish().map_err(failed)?;
    }
    Ok(out)
}

/// The raster as an SVG `<image>` holding it as a base64 PNG, drawn pixelated.
fn svg_image(r: &Raster) -> Result<String> {
    let png = encode_png(&r.rgb, r.width, r.height)?;
    Ok(format!(
        "<image x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" preserveAspectRatio=\"none\" \
         style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{}\"/>\n",
        r.x,
        r.y,
        r.width,
        r.height,
        base64(&png)
    ))
}

/// Standard base64 with padding (RFC 4648).
fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(DIGITS[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(Format::of(Path::new("a/b.svg")), Format::Svg);
        assert_eq!(Format::of(Path::new("B.SVG")), Format::Svg);
        assert_eq!(Format::of(Path::new("b.png")), Format::Png);
        assert_eq!(Format::of(Path::new("b")), Format::Png);
        assert_eq!(Format::Svg.extension(), "svg");
    }
}
