//! Monte Carlo benchmarks: seed 000's setups redone on the CPU and GPU backends in
//! one run, and MCSA on generated diagonally dominant systems of size 10^5.
//! Run through `cargo xtask gpu-pack` on the device machine (`bash
//! gpu-pack/run.sh bench-mcls`), or `cargo bench --bench mcls` anywhere (without
//! a GPU the GPU rows are left out). `--quick`: smaller history counts.
//!
//! Systems: the 2D Laplacian of size 900 (30 x 30) and the 1D Laplacian of size
//! 10^6 shifted by 0.5 (rho(H) = 0.8), b = ones, seed 1. Histories stop at a
//! weight cutoff of 1e-9 (at most 10^4 moves) or run exactly 10^4 moves. The
//! forward method runs the seed's histories per entry (10^3 for the 2D system, 5
//! for the 1D one). Where a CPU run of the full history count would take minutes,
//! the CPU runs fewer histories (the `histories` column says how many) and its
//! rates are the comparable figures. Times are the walks only (`walks_s`), after
//! one warm-up solve of the same configuration on a small history count.
//!
//! Reference rate: the GPU's random reads of 32-byte records per second,
//! measured here (`CudaBackend::random_read_rate_32b`) on a table of the system's
//! own size (its walk entries, rounded up to a power of two: 4 K records = 128 KiB
//! for the 2D Laplacian, which the caches hold; 2 M records = 64 MiB for the 1D
//! one, which they do not) and, for scale, on a 1 GiB table. Each move of a walk
//! makes at least one such read (its entry), so moves/s over the same-size rate
//! says how close the walks come to the memory system's random-access limit.

use gpuq::cpu::CpuBackend;
use gpuq::cuda::CudaBackend;
use gpuq::mcls::{
    mcsa, Estimator, Layout, Mapping, McMethod, McOptions, McResult, McSetup, McsaOptions,
    MonteCarlo, WalkBackend,
};
use gpuq::sparse::{generators, Csr};
use std::time::Instant;

struct Row {
    system: &'static str,
    label: String,
    backend: String,
    r: McResult,
    /// The seed's time, when this row ran the seed's history count.
    seed_s: Option<f64>,
    /// The GPU's random 32-byte read rate on a table of this system's size.
    read_rate: Option<f64>,
}

/// One configuration: method, estimator, layout, mapping, stop, GPU histories,
/// CPU histories, and the seed's time in seconds for the same setup.
struct Config {
    method: McMethod,
    estimator: Estimator,
    layout: Layout,
    mapping: Mapping,
    fixed: bool,
    gpu_histories: u64,
    cpu_histories: u64,
    seed_s: Option<f64>,
}

fn options(c: &Config, histories: u64) -> McOptions {
    McOptions {
        method: c.method,
        estimator: c.estimator,
        layout: c.layout,
        mapping: c.mapping,
        histories,
        max_steps: 10_000,
        cutoff: if c.fixed { 0.0 } else { 1e-9 },
        seed: 1,
        batches: 10,
        tolerance: None,
    }
}

fn label(c: &Config) -> String {
    let m = match c.method {
        McMethod::Forward => match c.mapping {
            Mapping::ThreadPerEntry => "forward, thread/entry",
            Mapping::ThreadPerHistory => "forward, thread/history",
        },
        McMethod::Adjoint => "adjoint",
    };
    format!(
        "{m}, {}, {}, {}",
        c.estimator.name(),
        c.layout.name(),
        if c.fixed { "10^4 moves" } else { "cutoff 1e-9" }
    )
}

fn run<B: WalkBackend>(
    backend: &B,
    a: &Csr<f64>,
    setup: &McSetup,
    b: &[f64],
    c: &Config,
    histories: u64,
) -> McResult {
    let mc = MonteCarlo::from_setup(backend, a, setup.clone(), c.layout).expect("setup");
    let warm = options(c, (a.nrows() as u64).clamp(1, 10_000));
    mc.solve(b, &warm).expect("warm-up");
    mc.solve(b, &options(c, histories)).expect("solve")
}

/// A row of the configuration tables: (method, estimator, layout, mapping, fixed
/// length, GPU histories, CPU histories, the seed's seconds).
type ConfigRow = (
    McMethod,
    Estimator,
    Layout,
    Mapping,
    bool,
    u64,
    u64,
    Option<f64>,
);

impl From<ConfigRow> for Config {
    fn from(r: ConfigRow) -> Self {
        let (method, estimator, layout, mapping, fixed, gpu_histories, cpu_histories, seed_s) = r;
        Config {
            method,
            estimator,
            layout,
            mapping,
            fixed,
            gpu_histories,
            cpu_histories,
            seed_s,
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let q = |h: u64| if quick { (h / 100).max(1000) } else { h };
    let cpu = CpuBackend::new();
    let gpu = match CudaBackend::new(0) {
        Ok(g) => Some(g),
        Err(gpuq::core::Error::NoCudaDevice(_)) => None,
        Err(e) => panic!("the CUDA backend failed to start: {e}"),
    };
    let threads = rayon::current_num_threads();
    match &gpu {
        Some(g) => println!("device: {}; CPU threads: {threads}", g.info().name),
        None => println!("no CUDA device: CPU rows only; CPU threads: {threads}"),
    }
    let rate = |log2_records: u32| {
        gpu.as_ref().map(|g| {
            let r = g
                .random_read_rate_32b(log2_records, 1 << 22, 64)
                .expect("random read rate");
            println!(
                "GPU random 32-byte reads: {r:.3e} per second ({} KiB table)",
                32u64 << log2_records >> 10
            );
            r
        })
    };
    rate(25);

    use Estimator::{Collision as Col, Expected as Exp};
    use Layout::{Aos, Soa};
    use Mapping::{ThreadPerEntry as PerEntry, ThreadPerHistory as PerHistory};
    use McMethod::{Adjoint, Forward};
    // Seed 000's times (ms -> s): adjoint Tables 19 (cutoff, ldg), 21 (struct,
    // cutoff) and 20 (struct, fixed length); forward Tables 31/30 (struct, ldg,
    // thread per entry) and 24/22 (thread per history).
    // (method, estimator, layout, mapping, fixed length, GPU histories, CPU
    // histories, the seed's seconds).
    #[rustfmt::skip]
    let lap2d = [
        (Adjoint, Col, Soa, PerEntry, false, q(10_000_000), q(1_000_000), Some(22.634)),
        (Adjoint, Col, Aos, PerEntry, false, q(10_000_000), q(1_000_000), Some(24.669)),
        (Adjoint, Exp, Soa, PerEntry, false, q(10_000_000), q(1_000_000), None),
        (Adjoint, Col, Soa, PerEntry, true, q(10_000_000), q(20_000), Some(105.010)),
        (Adjoint, Col, Aos, PerEntry, true, q(10_000_000), q(20_000), Some(105.093)),
        (Forward, Col, Soa, PerEntry, false, q(900_000), q(90_000), Some(9.316)),
        (Forward, Col, Aos, PerEntry, false, q(900_000), q(90_000), Some(8.950)),
        (Forward, Col, Soa, PerHistory, false, q(900_000), q(90_000), Some(206.439)),
        (Forward, Exp, Soa, PerEntry, false, q(900_000), q(90_000), None),
        (Forward, Col, Soa, PerEntry, true, q(900_000), q(9_000), Some(50.159)),
        (Forward, Col, Soa, PerHistory, true, q(900_000), q(9_000), Some(437.444)),
    ];
    #[rustfmt::skip]
    let lap1d = [
        (Adjoint, Col, Soa, PerEntry, false, 10_000, 10_000, Some(26.907)),
        (Adjoint, Col, Aos, PerEntry, false, 10_000, 10_000, Some(26.907)),
        (Adjoint, Col, Soa, PerEntry, false, q(10_000_000), q(1_000_000), Some(30.773)),
        (Adjoint, Col, Aos, PerEntry, false, q(10_000_000), q(1_000_000), Some(30.773)),
        (Adjoint, Col, Soa, PerEntry, true, 10_000, 10_000, Some(27.404)),
        (Adjoint, Col, Soa, PerEntry, true, q(10_000_000), q(20_000), Some(422.197)),
        (Forward, Col, Soa, PerEntry, false, q(5_000_000), q(1_000_000), Some(30.314)),
        (Forward, Col, Aos, PerEntry, false, q(5_000_000), q(1_000_000), Some(30.314)),
        (Forward, Col, Soa, PerHistory, false, q(5_000_000), q(1_000_000), Some(39.295)),
        (Forward, Col, Soa, PerEntry, true, q(5_000_000), q(1_000_000), Some(67.993)),
    ];
    let lap2d: Vec<Config> = lap2d.into_iter().map(Config::from).collect();
    let lap1d: Vec<Config> = lap1d.into_iter().map(Config::from).collect();

    let mut rows = vec![];
    for (system, a, configs) in [
        (
            "laplace2d 900",
            generators::seed000_laplace2d_900::<f64>(),
            lap2d,
        ),
        (
            "shifted laplace1d 10^6",
            generators::seed000_shifted_laplace1d::<f64>(),
            lap1d,
        ),
    ] {
        // b = ones: with b = A * ones the forward collision scores telescope to
        // the exact answer (zero variance), which would flatter the method.
        let b = vec![1.0; a.nrows()];
        let setup = McSetup::new(&a).expect("rho(H) < 1");
        let read_rate = rate(setup.forward().nnz().next_power_of_two().trailing_zeros());
        println!(
            "{system}: rho(H) = {:.6}, rho(H^) forward {:.6}, adjoint {:.6}",
            setup.rho_h.value, setup.rho_hat_forward.value, setup.rho_hat_adjoint.value
        );
        for c in &configs {
            if let Some(g) = &gpu {
                let r = run(g, &a, &setup, &b, c, c.gpu_histories);
                eprintln!("{system}: {} gpu {:.4} s", label(c), r.timing.walks_s);
                let seed_s = c.seed_s.filter(|_| !quick);
                let backend = r.backend.clone();
                rows.push(Row {
                    system,
                    label: label(c),
                    backend,
                    r,
                    seed_s,
                    read_rate,
                });
            }
            // The CPU runs one entry's histories in one task whatever the mapping,
            // so the mapping variants are GPU rows only; cpu_histories 0 skips a
            // configuration too long for the CPU.
            if c.mapping == Mapping::ThreadPerHistory || c.cpu_histories == 0 {
                continue;
            }
            let r = run(&cpu, &a, &setup, &b, c, c.cpu_histories);
            eprintln!("{system}: {} cpu {:.4} s", label(c), r.timing.walks_s);
            let seed_s = c
                .seed_s
                .filter(|_| !quick && c.cpu_histories == c.gpu_histories);
            rows.push(Row {
                system,
                label: label(c),
                backend: "cpu".into(),
                r,
                seed_s,
                read_rate: None,
            });
        }
    }

    println!();
    println!("| system | configuration | backend | histories | walks (s) | rel. residual | histories/s | moves/s | moves/s over random reads/s (same-size table) | seed 000 (s) | vs seed |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        let r = &row.r;
        let frac = row.read_rate.map_or(String::new(), |rate| {
            format!("{:.3}", r.steps_per_s() / rate)
        });
        let (seed, vs) = match row.seed_s {
            Some(s) => (format!("{s:.1}"), format!("{:.0}x", s / r.timing.walks_s)),
            None => ("".into(), "".into()),
        };
        println!(
            "| {} | {} | {} | {:.0e} | {:.4} | {:.3e} | {:.3e} | {:.3e} | {} | {} | {} |",
            row.system,
            row.label,
            row.backend,
            r.histories as f64,
            r.timing.walks_s,
            r.relative_residual,
            r.histories_per_s(),
            r.steps_per_s(),
            frac,
            seed,
            vs
        );
    }
    println!("(`seed 000` and `vs seed` only where the row ran the seed's history count.)");

    // MCSA on 10^5 unknowns, rho(H) 0.5 and 0.9, to 1e-8.
    println!();
    println!(
        "| system | backend | iterations | rel. residual | time (s) | histories per correction |"
    );
    println!("|---|---|---|---|---|---|");
    for rho in [0.5, 0.9] {
        let n = 100_000;
        let a = generators::laplace1d::<f64>(n, 2.0 / rho - 2.0);
        let b = a.mul_vec(&vec![1.0; n]).unwrap();
        let mut opts = McsaOptions::default();
        opts.inner.histories = if quick { 100_000 } else { 1_000_000 };
        opts.inner.estimator = Estimator::Expected;
        let go = |name: &str, report: (usize, f64, f64)| {
            println!(
                "| laplace1d:{n}:{:.4} (rho {rho}) | {name} | {} | {:.3e} | {:.3} | {} |",
                2.0 / rho - 2.0,
                report.0,
                report.1,
                report.2,
                opts.inner.histories
            );
        };
        if let Some(g) = &gpu {
            go(&g.info().name.clone(), mcsa_run(g, &a, &b, &opts));
        }
        go("cpu", mcsa_run(&cpu, &a, &b, &opts));
    }
}

/// (iterations, true residual, seconds) of MCSA, setup included.
fn mcsa_run<B: WalkBackend>(
    backend: &B,
    a: &Csr<f64>,
    b: &[f64],
    opts: &McsaOptions,
) -> (usize, f64, f64) {
    let t = Instant::now();
    let mc = MonteCarlo::new(backend, a, Layout::Soa).expect("setup");
    match mcsa(&mc, b, opts) {
        Ok((_, r)) => (r.iterations, r.relative_residual, t.elapsed().as_secs_f64()),
        Err(e) => {
            eprintln!("mcsa: {e}");
            let r = e.report().cloned().unwrap_or_default();
            (r.iterations, r.relative_residual, t.elapsed().as_secs_f64())
        }
    }
}
