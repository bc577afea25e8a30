//! The figures of the UQ procedures, with their text (title, axes with tick
//! labels and units, legend), built on `gpuq-plot` (re-exported here): each
//! function returns a [`Chart`] to [`Chart::save`] (PNG, or SVG when the file
//! name ends in `.svg`) or [`Chart::render`]. The beam and the SDOF
//! oscillator of seed 001 are non-dimensional, so their displacements and
//! spectra are in model units; time is in seconds, frequency in rad/s.
//! Cost: O(points) to build, O(pixels) to render.

pub use gpuq_plot::{palette, viridis, Axis, Chart, Data, Format, Frame, HeatMap, Legend, Series};

use crate::{HistogramSpec, SdofResult, StaticResult};

/// `n` with a comma between groups of three digits.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A histogram: `counts` of equal bins from `lo` to `hi`, the x axis over
/// exactly that range; `note` (e.g. the samples outside the range) goes into
/// the legend when not empty.
pub fn histogram(
    title: &str,
    x_label: &str,
    lo: f64,
    hi: f64,
    counts: &[u64],
    note: &str,
) -> Chart {
    let width = (hi - lo) / counts.len().max(1) as f64;
    let bars = counts.iter().enumerate().map(|(i, &c)| {
        let left = lo + i as f64 * width;
        [left, left + width, c as f64]
    });
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    Chart::new(
        title,
        Axis::new(x_label).range(lo, hi),
        Axis::new("samples per bin"),
    )
    .with(Series::bars(note, bars))
}

/// (i) The histogram of the response at DOF `dof` over the samples (`bins`
/// equal bins over the samples' range).
pub fn static_histogram(r: &StaticResult, dof: usize, bins: usize) -> Chart {
    let bins = bins.max(1);
    let (lo, hi) = match (r.values.first(), r.values.last()) {
        (Some(&lo), Some(&hi)) => (lo, hi),
        _ => (0.0, 1.0),
    };
    let width = (hi - lo).max(f64::MIN_POSITIVE) / bins as f64;
    let mut counts = vec![0u64; bins];
    for v in &r.values {
        counts[(((v - lo) / width) as usize).min(bins - 1)] += 1;
    }
    histogram(
        &format!(
            "Static response at DOF {dof}: {} samples, mean {:.4e}, std {:.4e}",
            count(r.samples as u64),
            r.mean,
            r.std
        ),
        &format!("displacement u[{dof}] (model units)"),
        lo,
        lo + width * bins as f64,
        &counts,
        "",
    )
    .legend(Legend::Hidden)
}

/// (iv) The mean of x(t) and the band mean +/- 2 standard deviations.
pub fn sdof_chart(r: &SdofResult) -> Chart {
    let band = |k: f64| -> Vec<(f64, f64)> {
        r.times
            .iter()
            .zip(r.mean.iter().zip(&r.variance))
            .map(|(t, (m, v))| (*t, m + k * v.sqrt()))
            .collect()
    };
    Chart::new(
        format!(
            "SDOF oscillator, Monte Carlo over {} samples",
            count(r.samples)
        ),
        Axis::new("time t (s)"),
        Axis::new("displacement x (model units)"),
    )
    .with(Series::line("mean of x(t)", band(0.0)).colour(0))
    .with(Series::dashed("mean ± 2 standard deviations", band(2.0)).colour(1))
    .with(Series::dashed("mean ± 2 standard deviations", band(-2.0)).colour(1))
}

/// (iv) The histogram of x at the `k`-th time of `spec` (`spec.steps[k]`,
/// time step `dt`), its under- and overflow counted in the legend. `None`
/// when `k` is past the histograms `r` holds.
pub fn sdof_histogram(spec: &HistogramSpec, r: &SdofResult, k: usize, dt: f64) -> Option<Chart> {
    let (step, counts) = (spec.steps.get(k)?, r.histograms.get(k)?);
    if counts.len() < spec.bins + 2 {
        return None;
    }
    let (below, above) = (counts[0], counts[spec.bins + 1]);
    Some(histogram(
        &format!(
            "SDOF oscillator: x at t = {} s over {} samples",
            *step as f64 * dt,
            count(r.samples)
        ),
        "displacement x (model units)",
        spec.lo,
        spec.hi,
        &counts[1..=spec.bins],
        &format!(
            "samples ({} below, {} above the range)",
            count(below),
            count(above)
        ),
    ))
}

/// (ii) The beam's response PSD: the first output's (the tip displacement)
/// and the load's `s_ff` at the same frequencies, on a logarithmic axis
/// (values that are not positive left out).
pub fn psd_chart(r: &crate::psd_model::ModelPsdResult, s_ff: &[f64]) -> Chart {
    let tip = r
        .outputs
        .first()
        .map(|o| r.frequencies.iter().copied().zip(o.psd.iter().copied()));
    Chart::new(
        "Response PSD of the cantilever to an AR(1) tip load",
        Axis::new("angular frequency ω (rad/s)"),
        Axis::log("power spectral density (model units)"),
    )
    .with(Series::line(
        "tip displacement S_uu(ω)",
        tip.into_iter().flatten().collect::<Vec<_>>(),
    ))
    .with(Series::line(
        "load S_ff(ω)",
        r.frequencies.iter().copied().zip(s_ff.iter().copied()),
    ))
}

/// Most outputs whose cross-PSDs [`model_psd_chart`] draws (their pairs).
pub const CROSS_PSD_OUTPUTS: usize = 4;

/// (ii) A model's response PSDs: S_xx of every output and |S_xy| of each pair
/// among the first [`CROSS_PSD_OUTPUTS`] outputs, on a logarithmic axis
/// (values that are not positive left out).
pub fn model_psd_chart(r: &crate::psd_model::ModelPsdResult) -> Chart {
    let mut chart = Chart::new(
        "Response PSDs and cross-PSDs of the model's outputs",
        Axis::new("angular frequency ω (rad/s)"),
        Axis::log("power spectral density (model units)"),
    );
    let w = &r.frequencies;
    for o in &r.outputs {
        chart = chart.with(Series::line(
            format!("S_xx, DOF {}", o.dof),
            w.iter().copied().zip(o.psd.iter().copied()),
        ));
    }
    let shown = r.outputs.len().min(CROSS_PSD_OUTPUTS);
    for x in 0..shown {
        for y in x + 1..shown {
            let magnitude = r.cross.iter().map(|m| m.re[x][y].hypot(m.im[x][y]));
            chart = chart.with(Series::line(
                format!("|S_xy|, DOFs {} and {}", r.outputs[x].dof, r.outputs[y].dof),
                w.iter().copied().zip(magnitude),
            ));
        }
    }
    chart
}

/// (iii) The tip response of the samples `histories` holds (`steps` values
/// each, time step `dt`).
pub fn convolution_chart(histories: &[f64], steps: usize, dt: f64) -> Chart {
    let mut chart = Chart::new(
        "Tip response to AR(1) load samples (FFT convolution)",
        Axis::new("time t (s)"),
        Axis::new("tip displacement (model units)"),
    );
    for (s, y) in histories.chunks(steps.max(1)).enumerate() {
        chart = chart.with(Series::line(
            format!("sample {}", s + 1),
            y.iter().enumerate().map(|(k, v)| (k as f64 * dt, *v)),
        ));
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(chart: &Chart) -> String {
        String::from_utf8(chart.render(Format::Svg).unwrap()).unwrap()
    }

    #[test]
    fn figures_carry_their_text_and_write_files() {
        let r = SdofResult {
            samples: 12000,
            times: (0..50).map(|j| 0.1 * j as f64).collect(),
            mean: (0..50).map(|j| (0.1 * j as f64).sin()).collect(),
            variance: vec![0.01; 50],
            trajectories: Vec::new(),
            histograms: vec![vec![3, 1, 5, 9, 4, 2]],
            time_s: 0.0,
        };
        let svg = texts(&sdof_chart(&r));
        assert!(svg.contains("12,000 samples") && svg.contains("time t (s)"));
        assert_eq!(svg.matches("mean ± 2 standard deviations").count(), 1);
        let spec = HistogramSpec {
            steps: vec![20],
            lo: -1.0,
            hi: 1.0,
            bins: 4,
        };
        let h = sdof_histogram(&spec, &r, 0, 0.1).unwrap();
        assert_eq!(h.frame().x, (-1.0, 1.0));
        let svg = texts(&h);
        assert!(svg.contains("x at t = 2 s") && svg.contains("(3 below, 2 above the range)"));
        assert!(sdof_histogram(&spec, &r, 1, 0.1).is_none());

        let s = StaticResult {
            samples: 3,
            mean: 1.0,
            std: 0.1,
            quantiles: Vec::new(),
            failed: 0,
            solver: crate::StaticSolver::Band,
            time_s: 0.0,
            converged: true,
            values: vec![0.9, 1.0, 1.1],
        };
        let svg = texts(&static_histogram(&s, 126, 10));
        assert!(svg.contains("displacement u[126] (model units)"));

        let dir = std::env::temp_dir().join(format!("gpuq-uq-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = convolution_chart(&[0.0, 1.0, 0.5, 0.0, -1.0, 0.2], 3, 0.01);
        assert_eq!(c.series.len(), 2);
        let f = c.save(&dir.join("conv.png")).unwrap();
        assert!(f.x.0 < 0.0 && f.x.1 > 0.02);
        assert_eq!(&std::fs::read(dir.join("conv.png")).unwrap()[1..4], b"PNG");
        c.save(&dir.join("conv.svg")).unwrap();
        assert!(std::fs::read_to_string(dir.join("conv.svg"))
            .unwrap()
            .contains("sample 2"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(c.save(&dir.join("missing/x.png")).is_err());
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
    }
}
