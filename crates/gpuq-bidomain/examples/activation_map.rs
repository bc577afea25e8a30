//! A 2D bidomain run on the CPU with AMG, as a library user writes it: the
//! conductivities calibrated to 0.6 / 0.2 m/s along / across the fibres, the
//! activation map (with isochrones) as a PNG and per-step timings.
//!
//! ```text
//! cargo run --release -p gpuq-bidomain --example activation_map -- [N] [STEPS] [OUT.png]
//! ```

use gpuq_bidomain::{
    amg, calibrate, output, BidomainConfig, CalibrationOptions, CvTarget, Simulation, Tissue,
};
use gpuq_cpu::CpuBackend;
use gpuq_sparse::Layout;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(96), |s| s.parse())?;
    let steps: usize = args.next().map_or(Ok(400), |s| s.parse())?;
    let out = PathBuf::from(args.next().unwrap_or_else(|| "activation.png".into()));
    let backend = CpuBackend::new();
    let config = BidomainConfig::new(Tissue::square(n)?);
    let calibration = calibrate(&config, CvTarget::default(), &CalibrationOptions::default())?;
    println!(
        "calibrated: {:.4} / {:.4} m/s with the conductivities x {:.2} / {:.2}",
        calibration.cv_along_m_s,
        calibration.cv_across_m_s,
        calibration.scale_along,
        calibration.scale_across
    );
    let config = calibration.apply(config);
    let mut sim = Simulation::new(&backend, config, &mut |b, a| {
        amg(b, a, &Default::default(), Layout::Csr)
    })?;
    let s = sim.setup();
    println!(
        "{} unknowns, {} nonzeros; preconditioner {} built once in {:.3} s",
        s.unknowns, s.nonzeros, s.preconditioner, s.precond_s
    );
    let report = sim.run(steps, &mut |r| {
        if r.step % 100 == 0 {
            println!(
                "step {:>5}  t = {:6.2} ms  {:>3} PCG iterations  {:.2} ms",
                r.step,
                r.time_ms,
                r.iterations,
                1e3 * r.step_s
            );
        }
    })?;
    let state = sim.state()?;
    output::write_activation_png(&out, &sim.config().tissue, &state.activation)?;
    println!(
        "{} steps in {:.2} s ({:.1} PCG iterations a step); {:.1}% activated; wrote {}",
        report.steps.len(),
        report.total_s,
        report.total_iterations as f64 / report.steps.len().max(1) as f64,
        100.0 * report.activated_fraction,
        out.display()
    );
    Ok(())
}
