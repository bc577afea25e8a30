//! The measurements behind `Method::Auto`'s rule on the host: sequential
//! CUHRE, breadth-first and two-phase on seed 004's f1-f5 and Genz's six
//! families (a = 5, u = 0.5) over [0, 1]^n for n and relative tolerances
//! given on the command line, each run capped (evaluations and seconds), one
//! CSV line per run: integrand, n, tolerance, method, evaluations, converged,
//! seconds, threads.
//!
//! `cargo run --release -p gpuq-cubature --example cub_method_grid -- 3,5,7 1e-3,1e-5,1e-7 [max_evals] [max_time_s]`

use gpuq_cpu::CpuBackend;
use gpuq_cubature::{builtin, integrate, kind_of, Func, Method, Options};

fn list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',').filter_map(|v| v.parse().ok()).collect()
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let dims: Vec<usize> = list(a.get(1).map_or("3,5,7", |s| s));
    let tols: Vec<f64> = list(a.get(2).map_or("1e-3,1e-5,1e-7", |s| s));
    let cap: f64 = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(2e7);
    let secs: f64 = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(20.0);
    // seed 004's f1-f5 and Genz's six families (every built-in but the sum of squares)
    let names: Vec<&str> = gpuq_cubature::func::NAMES
        .into_iter()
        .filter(|&n| n != "sum-of-squares")
        .collect();
    let cpu = CpuBackend::new();
    println!("integrand,n,tol,method,evaluations,converged,seconds,threads");
    for &n in &dims {
        for &tol in &tols {
            for &name in &names {
                let f = builtin(kind_of(name).unwrap(), n, &[], &[]).unwrap();
                for m in [Method::Cuhre, Method::BreadthFirst, Method::TwoPhase] {
                    let opts = Options {
                        rel_tol: tol,
                        max_evals: cap as u64,
                        max_time: Some(secs),
                        max_boxes: 1 << 18,
                        ..Options::default()
                    };
                    let (lo, hi) = (vec![0.0; n], vec![1.0; n]);
                    let o = integrate(&cpu, m, Func::Builtin(f), &lo, &hi, &opts).unwrap();
                    println!(
                        "{name},{n},{tol:e},{m},{},{},{:.4},{}",
                        o.evaluations,
                        o.converged(),
                        o.timings.total_s,
                        cpu.threads()
                    );
                }
            }
        }
    }
}
