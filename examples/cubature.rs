//! Adaptive cubature of a Rust closure and of an expression string on the
//! backend chosen at run time, each checked against its closed form.
//!
//! ```text
//! cargo run --release --example cubature
//! ```
//!
//! * the closure cos(x1) cos(x2) cos(x3) cos(x4) over [0, 1]^4 by the
//!   two-phase parallel algorithm: sin(1)^4;
//! * the expression `exp(-sum(i, 1, n, x[i]))` over [0, 1]^5 by sequential
//!   CUHRE: (1 - 1/e)^5;
//! * the expression `x1^2 * x2 + 3 * x3` over [0, 2]^3 by tensor
//!   Gauss-Legendre with 3 points per axis (exact for polynomials of degree 5
//!   per axis): 8/3 * 2 * 2 + 3 * 2 * 2 * 2 = 104/3.
//!
//! `GPUQ_BACKEND=cpu|cuda|auto` (default `auto`) picks the backend (an
//! expression on CUDA needs NVRTC on `LD_LIBRARY_PATH`). Exits non-zero unless
//! every run converges and is within 1e-8 (relative) of its closed form.

use gpuq::prelude::*;
use std::error::Error as StdError;
use std::process::ExitCode;

/// One integration on the chosen backend.
struct Integrate<'a> {
    method: CubatureMethod,
    f: Func<'a>,
    lo: &'a [f64],
    hi: &'a [f64],
}

impl OnBackend for Integrate<'_> {
    type Output = Result<Outcome>;

    fn run<B: FullBackend>(self, backend: &B) -> Result<Outcome> {
        let opts = CubatureOptions {
            rel_tol: 1e-10,
            ..CubatureOptions::default()
        };
        integrate(backend, self.method, self.f, self.lo, self.hi, &opts)
    }
}

/// Runs the example; prints the error and exits with status 1 on failure.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn StdError>> {
    let choice: BackendChoice =
        std::env::var("GPUQ_BACKEND").map_or(Ok(BackendChoice::Auto), |s| s.parse())?;
    let backend = choose(choice)?;
    println!("backend: {}", backend.name());

    let closure = |x: &[f64]| x.iter().map(|xi| xi.cos()).product::<f64>();
    let decay = Expr::parse("exp(-sum(i, 1, n, x[i]))", 5)?;
    let poly = Expr::parse("x1^2 * x2 + 3 * x3", 3)?;
    let cases = [
        (
            "closure prod cos(x_i), [0,1]^4, two-phase",
            Integrate {
                method: CubatureMethod::TwoPhase,
                f: Func::Closure(&closure),
                lo: &[0.0; 4],
                hi: &[1.0; 4],
            },
            1f64.sin().powi(4),
        ),
        (
            "expr exp(-sum x_i), [0,1]^5, cuhre",
            Integrate {
                method: CubatureMethod::Cuhre,
                f: Func::Expr(&decay),
                lo: &[0.0; 5],
                hi: &[1.0; 5],
            },
            (1.0 - (-1f64).exp()).powi(5),
        ),
        (
            "expr x1^2 x2 + 3 x3, [0,2]^3, gauss-legendre:3",
            Integrate {
                method: CubatureMethod::GaussLegendre(3),
                f: Func::Expr(&poly),
                lo: &[0.0; 3],
                hi: &[2.0; 3],
            },
            104.0 / 3.0,
        ),
    ];
    let mut failed = 0;
    for (name, job, exact) in cases {
        let out = backend.run(job)?;
        let rel = (out.estimate - exact).abs() / exact.abs();
        let ok = out.converged() && rel <= 1e-8;
        println!(
            "{name}: {:.15} (exact {exact:.15}, relative error {rel:.1e}, {} evaluations){}",
            out.estimate,
            out.evaluations,
            if ok { "" } else { "  FAILED" }
        );
        failed += usize::from(!ok);
    }
    if failed > 0 {
        return Err(format!("{failed} integration(s) missed their closed form").into());
    }
    println!("ok");
    Ok(())
}
