//! `gpuq generate`.

use crate::args::GenerateArgs;
use gpuq_core::{Complex, Result, Scalar};
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::matrix_market as mm;
use std::process::ExitCode;

/// Builds the named problem in double precision (complex when it needs it) and
/// writes A, and b if asked, as Matrix Market files.
pub fn run(args: &GenerateArgs) -> Result<ExitCode> {
    let spec = ProblemSpec::parse(&args.spec)?;
    if spec.is_complex() {
        write::<Complex<f64>>(&spec, args)
    } else {
        write::<f64>(&spec, args)
    }
}

fn write<T: Scalar>(spec: &ProblemSpec, args: &GenerateArgs) -> Result<ExitCode> {
    let g = spec.build::<T>()?;
    mm::save_csr(&g.matrix, &args.out)?;
    if let Some(path) = &args.rhs_out {
        let b = match g.rhs {
            Some(b) => b,
            None => g.matrix.mul_vec(&vec![T::one(); g.matrix.ncols()])?,
        };
        mm::save_dense_vector(&b, path)?;
    }
    eprintln!(
        "gpuq: wrote {} ({} x {}, {} nonzeros, {})",
        args.out.display(),
        g.matrix.nrows(),
        g.matrix.ncols(),
        g.matrix.nnz(),
        T::KIND.name()
    );
    Ok(ExitCode::SUCCESS)
}
