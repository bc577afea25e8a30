//! Matrix and vector files by their content: Matrix Market text
//! ([`crate::matrix_market`]) or PETSc binary ([`crate::petsc`]), whatever
//! the file's name. What the CLI, the UQ models and the distributed readers
//! call to read a user's file.

use crate::{matrix_market as mm, petsc, Csr};
use gpuq_core::{Error, Result, Scalar, ScalarKind};
use std::path::Path;

/// What a matrix or vector file holds, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// Anything else: read as Matrix Market text (whose reader names what is
    /// wrong with a file that is not).
    MatrixMarket,
    /// A PETSc binary matrix (class id 1211216).
    PetscMatrix,
    /// A PETSc binary vector (class id 1211214).
    PetscVector,
}

/// The format of the file at `path` from its first 8 bytes: a PETSc class id
/// as a big-endian 32-bit integer (or a 64-bit one, PETSc's 64-bit indices),
/// else Matrix Market. Errors when the file cannot be opened or read. O(1).
pub fn format_of(path: impl AsRef<Path>) -> Result<FileFormat> {
    use std::io::Read;
    let path = path.as_ref();
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(path)
        .map_err(io)?
        .take(8)
        .read_to_end(&mut head)
        .map_err(io)?;
    let word = |k: usize| {
        head.get(4 * k..4 * k + 4)
            .map(|w| u32::from_be_bytes(w.try_into().expect("4 bytes")))
    };
    let id = match (word(0), word(1)) {
        (Some(0), Some(id)) => id,
        (Some(id), _) => id,
        _ => 0,
    };
    Ok(match i64::from(id) {
        petsc::MAT_FILE_CLASSID => FileFormat::PetscMatrix,
        petsc::VEC_FILE_CLASSID => FileFormat::PetscVector,
        _ => FileFormat::MatrixMarket,
    })
}

/// The matrix in the file at `path` as CSR: Matrix Market or a PETSc binary
/// matrix. Errors as those readers do, and for a PETSc vector. O(file).
pub fn read_csr<T: Scalar>(path: impl AsRef<Path>) -> Result<Csr<T>> {
    let path = path.as_ref();
    match format_of(path)? {
        FileFormat::MatrixMarket => mm::read_csr(path),
        FileFormat::PetscMatrix => petsc::read_csr(path),
        FileFormat::PetscVector => Err(not_a(path, "matrix", "vector")),
    }
}

/// The vector in the file at `path`: a Matrix Market vector (`n x 1` or
/// `1 x n`) or a PETSc binary vector. Errors as those readers do, and for a
/// PETSc matrix. O(file).
pub fn read_vector<T: Scalar>(path: impl AsRef<Path>) -> Result<Vec<T>> {
    let path = path.as_ref();
    match format_of(path)? {
        FileFormat::MatrixMarket => mm::read_dense_vector(path),
        FileFormat::PetscVector => petsc::read_vector(path),
        FileFormat::PetscMatrix => Err(not_a(path, "vector", "matrix")),
    }
}

/// Whether the matrix or vector in the file at `path` is complex: a Matrix
/// Market banner's field, or a PETSc file's scalar size. Reads the head (a
/// PETSc matrix: its header, from which the size follows).
pub fn is_complex(path: impl AsRef<Path>) -> Result<bool> {
    let path = path.as_ref();
    Ok(match format_of(path)? {
        FileFormat::MatrixMarket => mm::read_header_of(path)?.field == mm::MmField::Complex,
        FileFormat::PetscMatrix => complex(petsc::read_mat_header(path)?.scalar),
        FileFormat::PetscVector => complex(petsc::read_vec_header(path)?.scalar),
    })
}

fn complex(kind: ScalarKind) -> bool {
    matches!(kind, ScalarKind::C32 | ScalarKind::C64)
}

fn not_a(path: &Path, want: &str, found: &str) -> Error {
    Error::InvalidArgument(format!(
        "{}: expected a {want}, found a PETSc binary {found}",
        path.display()
    ))
}
