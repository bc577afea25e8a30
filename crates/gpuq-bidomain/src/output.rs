//! Files users can open: the activation map as a figure (PNG or SVG), VTK
//! legacy snapshots of v_m, phi_e and the activation times (ParaView,
//! VisIt), Matrix Market snapshots of the interleaved solution.

use gpuq_core::{Error, Result};
use gpuq_plot::HeatMap;
use gpuq_sparse::bidomain::Tissue;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Viridis, the perceptual colour map of the activation map (`gpuq-plot`'s).
pub use gpuq_plot::viridis;

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The activation map of the bottom layer (z = 0) as a figure: x and y in mm
/// (node k at k h), each node's activation time coloured by [`viridis`] from 0
/// (dark blue) to the latest activation (yellow), a colour bar in ms,
/// isochrones (black lines where the activation time, interpolated between
/// the nodes, crosses 2, 4, 6, ... ms; every [`isochrone_step`] ms on long
/// runs) over the map and across the bar with a legend entry, nodes never
/// activated in light grey with a legend entry, and a title saying the grid
/// and the latest activation. O(pixels).
///
/// Errors when `activation` does not have one value per node.
pub fn activation_figure(tissue: &Tissue, activation: &[f64]) -> Result<HeatMap> {
    gpuq_core::check_same_len("activation map", tissue.nodes(), activation.len())?;
    let [gx, gy, gz] = tissue.grid();
    let layer = &activation[..gx * gy];
    let latest = layer
        .iter()
        .filter(|t| !t.is_nan())
        .fold(0.0f64, |m, &t| m.max(t));
    let activated = layer.iter().filter(|t| !t.is_nan()).count();
    let what = if tissue.dim() == 2 {
        format!("2D sheet of {gx} x {gy} nodes")
    } else {
        format!("bottom layer z = 0 of {gx} x {gy} x {gz} nodes")
    };
    let title = format!(
        "Activation time, {what}: {:.1}% activated, the last at {latest:.2} ms",
        100.0 * activated as f64 / layer.len().max(1) as f64
    );
    let h = tissue.h;
    let mut map = HeatMap::new(
        title,
        ("x (mm)", "y (mm)"),
        (gx, gy),
        (0.0, (gx - 1) as f64 * h, 0.0, (gy - 1) as f64 * h),
        layer.to_vec(),
        "activation time (ms)",
    )?;
    map.colour_range = Some((0.0, if latest > 0.0 { latest } else { 1.0 }));
    map.missing_label = "not activated".into();
    let step = isochrone_step(latest);
    map.with_contours_every(step, format!("{step} ms isochrones"))
}

/// The spacing of the activation map's isochrones for a latest activation at
/// `latest` ms: 2 ms, or the first of 5, 10, 20, 50, 100, ... ms that draws at
/// most 30 lines. O(log latest).
pub fn isochrone_step(latest: f64) -> f64 {
    let mut step = 2.0;
    let mut k = 0;
    while latest / step > 30.0 && step < 1e12 {
        step = [5.0, 10.0, 20.0][k % 3] * 10f64.powi((k / 3) as i32);
        k += 1;
    }
    step
}

/// Writes [`activation_figure`] at `path`: SVG when the name ends in `.svg`,
/// else an 8-bit RGB PNG (about 1100 x 900 pixels for a square). O(pixels).
///
/// Errors when `activation` does not have one value per node, and on I/O or
/// encoding failures.
pub fn write_activation_png(path: &Path, tissue: &Tissue, activation: &[f64]) -> Result<()> {
    activation_figure(tissue, activation)?.save(path)?;
    Ok(())
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
    let [gx, gy, gz] = tissue.grid();
    let h = tissue.h;
    let write = |out: &mut BufWriter<File>| -> std::io::Result<()> {
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
    gpuq_core::files::write_atomically(path, |out| write(out).map_err(|e| io_error(path, e)))
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
        let (w, h) = (reader.info().width, reader.info().height);
        assert!(w >= 1000 && h >= 800, "{w} x {h}");
        // The same data, the same bytes; SVG by the name, with its text.
        write_activation_png(&dir.join("b.png"), &t, &act).unwrap();
        assert_eq!(std::fs::read(dir.join("b.png")).unwrap(), bytes);
        let svg_path = dir.join("a.svg");
        write_activation_png(&svg_path, &t, &act).unwrap();
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        for text in [
            "activation time (ms)",
            "x (mm)",
            "y (mm)",
            "not activated",
            "2D sheet of 4 x 4 nodes: 93.8% activated, the last at 15.00 ms",
        ] {
            assert!(svg.contains(text), "no '{text}' in the SVG");
        }
        let map = activation_figure(&t, &act).unwrap();
        assert_eq!(map.colour_range, Some((0.0, 15.0)));
        assert_eq!(map.contours, vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]);
        assert!(svg.contains("2 ms isochrones"));
        assert_eq!(isochrone_step(60.0), 2.0);
        assert_eq!(isochrone_step(61.0), 5.0);
        assert_eq!(isochrone_step(250.0), 10.0);
        assert_eq!(isochrone_step(3000.0), 100.0);
        assert_eq!(map.extent, (0.0, 3.0 * t.h, 0.0, 3.0 * t.h));
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
