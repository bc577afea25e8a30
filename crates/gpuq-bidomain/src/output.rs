//! Files users can open: the activation map as a PNG, VTK legacy snapshots of
//! v_m, phi_e and the activation times (ParaView, VisIt), Matrix Market
//! snapshots of the interleaved solution.

use gpuq_core::{Error, Result};
use gpuq_sparse::bidomain::Tissue;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The colour of nodes never activated.
const UNACTIVATED: [u8; 3] = [64, 64, 64];

/// Control points of the viridis colour map (Matplotlib's), at 0, 1/8, ..., 1.
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// Viridis at `s` in [0, 1] (clamped), linearly interpolated between its
/// control points. O(1).
pub fn viridis(s: f64) -> [u8; 3] {
    let s = if s.is_nan() { 0.0 } else { s.clamp(0.0, 1.0) };
    let pos = s * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|c| (a[c] as f64 + f * (b[c] as f64 - a[c] as f64)).round() as u8)
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes the activation map of the bottom layer (z = 0) as an 8-bit RGB PNG:
/// early activation dark blue, late yellow (viridis, scaled from 0 to the latest
/// activation time), never-activated nodes grey; x to the right, y up. Each
/// node is a square of pixels (at most 64 on a side), so that the image's
/// shorter side has at least 256 pixels. O(pixels).
///
/// Errors when `activation` does not have one value per node, and on I/O or
/// encoding failures.
pub fn write_activation_png(path: &Path, tissue: &Tissue, activation: &[f64]) -> Result<()> {
    gpuq_core::check_same_len("activation PNG", tissue.nodes(), activation.len())?;
    let [gx, gy, _] = tissue.grid();
    let scale = 256usize.div_ceil(gx.min(gy)).clamp(1, 64);
    let (width, height) = (gx * scale, gy * scale);
    let latest = activation
        .iter()
        .filter(|t| !t.is_nan())
        .fold(0.0f64, |m, &t| m.max(t));
    let mut data = Vec::with_capacity(width * height * 3);
    for row in 0..height {
        let iy = gy - 1 - row / scale;
        for col in 0..width {
            let t = activation[iy * gx + col / scale];
            let rgb = if t.is_nan() {
                UNACTIVATED
            } else {
                viridis(if latest > 0.0 { t / latest } else { 0.0 })
            };
            data.extend_from_slice(&rgb);
        }
    }
    let file = File::create(path).map_err(|e| io_error(path, e))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), width as u32, height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let encode = |e: png::EncodingError| Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    };
    let mut writer = encoder.write_header().map_err(encode)?;
    writer.write_image_data(&data).map_err(encode)?;
    writer.finish().map_err(encode)
}

/// Writes a VTK legacy (ASCII, STRUCTURED_POINTS) file with the point fields
/// `v_m` (mV), `phi_e` (mV) and `activation` (ms, -1 where not activated) on
/// the tissue's grid (spacing in mm). O(nodes).
///
/// Errors when a field does not have one value per node, and on I/O failures.
pub fn write_vtk(
    path: &Path,
    tissue: &Tissue,
    time_ms: f64,
    vm: &[f64],
    phi_e: &[f64],
    activation: &[f64],
) -> Result<()> {
    let n = tissue.nodes();
    for (what, len) in [("v_m", vm.len()), ("phi_e", phi_e.len())] {
        if len != n {
            return Err(Error::shape(
                "VTK snapshot",
                format!("{n} values"),
                format!("{len} of {what}"),
            ));
        }
    }
    gpuq_core::check_same_len("VTK snapshot (activation)", n, activation.len())?;
    let file = File::create(path).map_err(|e| io_error(path, e))?;
    let mut out = BufWriter::new(file);
    let [gx, gy, gz] = tissue.grid();
    let h = tissue.h;
    let mut write = || -> std::io::Result<()> {
        writeln!(out, "# vtk DataFile Version 3.0")?;
        writeln!(out, "gpuq bidomain t = {time_ms} ms")?;
        writeln!(out, "ASCII")?;
        writeln!(out, "DATASET STRUCTURED_POINTS")?;
        writeln!(out, "DIMENSIONS {gx} {gy} {gz}")?;
        writeln!(out, "ORIGIN 0 0 0")?;
        writeln!(out, "SPACING {h} {h} {h}")?;
        writeln!(out, "POINT_DATA {n}")?;
        let fields: [(&str, &[f64]); 3] =
            [("v_m", vm), ("phi_e", phi_e), ("activation", activation)];
        for (name, values) in fields {
            writeln!(out, "SCALARS {name} double 1")?;
            writeln!(out, "LOOKUP_TABLE default")?;
            for v in values {
                writeln!(out, "{}", if v.is_nan() { -1.0 } else { *v })?;
            }
        }
        out.flush()
    };
    write().map_err(|e| io_error(path, e))
}

/// Writes the interleaved solution `(phi_e, v_m)` per node as a Matrix Market
/// array file (the unknown order of the coupled system). O(nodes).
pub fn write_matrix_market(path: &Path, vm: &[f64], phi_e: &[f64]) -> Result<()> {
    gpuq_core::check_same_len("Matrix Market snapshot", vm.len(), phi_e.len())?;
    let x: Vec<f64> = phi_e.iter().zip(vm).flat_map(|(&p, &v)| [p, v]).collect();
    gpuq_sparse::matrix_market::save_dense_vector(&x, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_map_ends_and_monotone_brightness() {
        assert_eq!(viridis(0.0), VIRIDIS[0]);
        assert_eq!(viridis(1.0), VIRIDIS[8]);
        assert_eq!(viridis(2.0), VIRIDIS[8]);
        assert_eq!(viridis(f64::NAN), VIRIDIS[0]);
        let luma = |c: [u8; 3]| 0.3 * c[0] as f64 + 0.59 * c[1] as f64 + 0.11 * c[2] as f64;
        let mut last = -1.0;
        for i in 0..=100 {
            let l = luma(viridis(i as f64 / 100.0));
            assert!(l >= last - 1.0, "brightness drops at {i}");
            last = l;
        }
    }

    #[test]
    fn files_are_written_and_checked() {
        let dir = std::env::temp_dir().join(format!("gpuq-bidomain-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tissue::square(3).unwrap();
        let n = t.nodes();
        let act: Vec<f64> = (0..n)
            .map(|k| if k == 5 { f64::NAN } else { k as f64 })
            .collect();
        let png_path = dir.join("a.png");
        write_activation_png(&png_path, &t, &act).unwrap();
        let bytes = std::fs::read(&png_path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let decoder = png::Decoder::new(File::open(&png_path).unwrap());
        let reader = decoder.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), (256, 256));
        let vtk = dir.join("s.vtk");
        write_vtk(&vtk, &t, 1.5, &act, &act, &act).unwrap();
        let text = std::fs::read_to_string(&vtk).unwrap();
        assert!(text.contains("DIMENSIONS 4 4 1") && text.contains("POINT_DATA 16"));
        assert_eq!(text.lines().count(), 8 + 3 * (2 + 16));
        let mm = dir.join("x.mtx");
        write_matrix_market(&mm, &act[..4], &[0.5; 4]).unwrap();
        let x: Vec<f64> = gpuq_sparse::matrix_market::read_dense_vector(&mm).unwrap();
        assert_eq!(x, vec![0.5, 0.0, 0.5, 1.0, 0.5, 2.0, 0.5, 3.0]);
        assert!(write_activation_png(&png_path, &t, &act[1..]).is_err());
        assert!(write_vtk(&vtk, &t, 0.0, &act, &act[1..], &act).is_err());
        assert!(write_activation_png(&dir.join("no/such/dir.png"), &t, &act).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
