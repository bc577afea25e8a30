//! `gpuq generate`.

use crate::args::GenerateArgs;
use crate::rhs::RightHandSide;
use gpuq_core::{Complex, Error, Result, Scalar};
use gpuq_sparse::generators::ProblemSpec;
use gpuq_sparse::matrix_market as mm;
use std::process::ExitCode;

/// Builds the named problem in double precision (complex when it needs it) and
/// writes A, and b if asked, as Matrix Market files.
pub fn run(args: &GenerateArgs) -> Result<ExitCode> {
    if args.spec.starts_with("beam:") && args.coords_out.is_some() {
        return Err(Error::InvalidArgument(
            "--coords-out is for elasticity2d:N and elasticity3d:N".into(),
        ));
    }
    if let Some(ne) = args.spec.strip_prefix("beam:") {
        return beam(ne, args);
    }
    if args.mass_out.is_some() {
        return Err(Error::InvalidArgument(
            "--mass-out is for beam:NE (the other problems have no mass matrix)".into(),
        ));
    }
    let spec = ProblemSpec::parse(&args.spec)?;
    if let Some(path) = &args.coords_out {
        let coords = spec.node_coordinates().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "--coords-out is for elasticity2d:N and elasticity3d:N ({} has no node coordinates)",
                args.spec
            ))
        })?;
        mm::save_dense_columns(&coords, path)?;
    }
    if spec.is_complex() {
        write::<Complex<f64>>(&spec, args)
    } else {
        write::<f64>(&spec, args)
    }
}

fn write<T: Scalar>(spec: &ProblemSpec, args: &GenerateArgs) -> Result<ExitCode> {
    let choice = args.rhs.choice();
    if choice.file().is_some() {
        return Err(Error::InvalidArgument(
            "gpuq generate --rhs takes random, a1 or ones, not a file".into(),
        ));
    }
    let g = spec.build::<T>()?;
    let rhs = if args.rhs_out.is_some() || args.solution_out.is_some() {
        Some(RightHandSide::make(
            &g.matrix,
            g.rhs,
            &choice,
            args.rhs.rhs_seed,
        )?)
    } else {
        None
    };
    let solution = match (&args.solution_out, &rhs) {
        (Some(path), Some(rhs)) => Some((
            path,
            rhs.solution.as_ref().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "--solution-out: x* is not known for this right-hand side ({}); \
                     use --rhs random or a1",
                    rhs.info.kind
                ))
            })?,
        )),
        _ => None,
    };
    let petsc = args.format == "petsc";
    save_matrix(&g.matrix, &args.out, petsc)?;
    if let (Some(path), Some(rhs)) = (&args.rhs_out, &rhs) {
        save_vector(&rhs.b, path, petsc)?;
    }
    if let Some((path, x)) = solution {
        save_vector(x, path, petsc)?;
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

/// Seed 001's cantilever of `ne` elements as a model: K (and M, and a unit tip
/// load) on its 2 ne free DOFs, the clamped node's DOFs removed.
fn beam(ne: &str, args: &GenerateArgs) -> Result<ExitCode> {
    let ne: usize = ne.parse().map_err(|_| {
        Error::InvalidArgument(format!("beam:NE needs a number of elements, not {ne:?}"))
    })?;
    let b = gpuq_uq::Beam::unit(2 * ne)?;
    let k = b.stiffness().to_csr()?;
    let petsc = args.format == "petsc";
    save_matrix(&k, &args.out, petsc)?;
    if let Some(path) = &args.mass_out {
        save_matrix(&b.mass().to_csr()?, path, petsc)?;
    }
    if let Some(path) = &args.rhs_out {
        let mut f = vec![0.0; b.dofs()];
        f[b.tip()] = 1.0;
        save_vector(&f, path, petsc)?;
    }
    eprintln!(
        "gpuq: wrote {} (beam of {ne} elements: {} DOFs, tip deflection DOF {}, {} nonzeros)",
        args.out.display(),
        b.dofs(),
        b.tip(),
        k.nnz()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `a` at `path`: PETSc binary when `petsc`, else Matrix Market.
fn save_matrix<T: Scalar>(
    a: &gpuq_sparse::Csr<T>,
    path: &std::path::Path,
    petsc: bool,
) -> Result<()> {
    if petsc {
        gpuq_sparse::petsc::save_csr(a, path)
    } else {
        mm::save_csr(a, path)
    }
}

/// Writes `x` at `path`: PETSc binary when `petsc`, else Matrix Market.
fn save_vector<T: Scalar>(x: &[T], path: &std::path::Path, petsc: bool) -> Result<()> {
    if petsc {
        gpuq_sparse::petsc::save_vector(x, path)
    } else {
        mm::save_dense_vector(x, path)
    }
}
