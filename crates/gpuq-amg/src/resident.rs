//! A level's matrix where the setup left it: on the host, on the backend that
//! built it, or both. A device setup keeps its prolongators, restrictions and
//! coarse operators on the device ([`ResidentMatrix`]); the cycle converts
//! them there ([`crate::AmgKernels::amg_level_matrix`]) and the host copy is
//! made only when something asks for it ([`LevelMatrix::host`]).

use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A matrix kept by a backend for the setup (for the CUDA backend, a CSR
/// matrix in device memory), as a [`LevelMatrix`] holds it.
pub trait ResidentMatrix: Send + Sync {
    /// A host copy of the matrix. Cost: a download of 8 bytes per row and 12
    /// per stored entry, and the host's validation, O(nnz).
    fn download(&self) -> Result<Csr<f64>>;

    /// The stored entries of each row. Cost: a download of 8 bytes per row.
    fn row_lengths(&self) -> Result<Vec<u32>>;

    /// The entries SELL-`c`-`sigma` would store, padding included (per
    /// slice of c rows, after sorting each window of sigma rows by length,
    /// c times its longest row). Default: from
    /// [`ResidentMatrix::row_lengths`]; a backend may count where the matrix
    /// lives.
    fn sell_stored(&self, c: usize, sigma: usize) -> Result<usize> {
        Ok(sell_stored(self.row_lengths()?, c, sigma))
    }

    /// The rows `idx` (in that order) on the host. Default: from a download
    /// ([`ResidentMatrix::download`]); a backend may gather them where the
    /// matrix lives and bring only them.
    fn rows(&self, idx: &[usize]) -> Result<Csr<f64>> {
        self.download()?.select_rows(idx)
    }

    /// The backend's own type, for the backend that made it to find its data.
    fn as_any(&self) -> &dyn Any;
}

struct Inner {
    shape: (usize, usize),
    nnz: usize,
    host: OnceLock<Csr<f64>>,
    resident: OnceLock<Arc<dyn ResidentMatrix>>,
}

/// A level matrix of the hierarchy: a host copy, a backend's resident copy,
/// or both, each made on first need and then kept. Clones share both copies.
#[derive(Clone)]
pub struct LevelMatrix(Arc<Inner>);

impl LevelMatrix {
    /// A matrix held on the host.
    pub fn from_host(a: Csr<f64>) -> Self {
        let inner = Inner {
            shape: a.shape(),
            nnz: a.nnz(),
            host: OnceLock::new(),
            resident: OnceLock::new(),
        };
        let _ = inner.host.set(a);
        LevelMatrix(Arc::new(inner))
    }

    /// A matrix held by a backend: `shape` and `nnz` describe it; the host
    /// copy is downloaded on the first [`LevelMatrix::host`].
    pub fn from_resident(
        shape: (usize, usize),
        nnz: usize,
        resident: Arc<dyn ResidentMatrix>,
    ) -> Self {
        let inner = Inner {
            shape,
            nnz,
            host: OnceLock::new(),
            resident: OnceLock::new(),
        };
        let _ = inner.resident.set(resident);
        LevelMatrix(Arc::new(inner))
    }

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.0.shape.0
    }

    /// Columns.
    pub fn ncols(&self) -> usize {
        self.0.shape.1
    }

    /// Rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        self.0.shape
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.0.nnz
    }

    /// The host copy, downloaded from the resident copy on the first call
    /// (see [`ResidentMatrix::download`]); free afterwards.
    pub fn host(&self) -> Result<&Csr<f64>> {
        if let Some(h) = self.0.host.get() {
            return Ok(h);
        }
        let r = self.0.resident.get().ok_or_else(|| {
            Error::InvalidArgument("AMG level matrix with neither a host nor a device copy".into())
        })?;
        let a = r.download()?;
        Ok(self.0.host.get_or_init(|| a))
    }

    /// The rows `idx` (in that order) on the host: from the host copy where
    /// there is one, else gathered by the resident copy
    /// ([`ResidentMatrix::rows`]: the CUDA backend brings only those rows).
    /// Errors name an index not below the rows. O(idx + their entries).
    pub fn rows(&self, idx: &[usize]) -> Result<Csr<f64>> {
        match (self.0.host.get(), self.0.resident.get()) {
            (None, Some(r)) => r.rows(idx),
            _ => self.host()?.select_rows(idx),
        }
    }

    /// Whether a host copy exists (no download needed).
    pub fn on_host(&self) -> bool {
        self.0.host.get().is_some()
    }

    /// The backend's copy, if one was made.
    pub fn resident(&self) -> Option<&dyn ResidentMatrix> {
        self.0.resident.get().map(|r| r.as_ref())
    }

    /// Keeps `make()` as the backend's copy unless one exists, and returns
    /// the copy kept (a backend's upload of a host matrix, made once).
    pub fn resident_or_init(
        &self,
        make: impl FnOnce() -> Result<Arc<dyn ResidentMatrix>>,
    ) -> Result<&dyn ResidentMatrix> {
        if let Some(r) = self.0.resident.get() {
            return Ok(r.as_ref());
        }
        let made = make()?;
        Ok(self.0.resident.get_or_init(|| made).as_ref())
    }

    /// The entries SELL-`c`-`sigma` would store, padding included: from the
    /// host copy where there is one, else counted by the resident copy
    /// ([`ResidentMatrix::sell_stored`]). O(nrows log sigma).
    pub fn sell_stored(&self, c: usize, sigma: usize) -> Result<usize> {
        match (self.0.host.get(), self.0.resident.get()) {
            (None, Some(r)) => r.sell_stored(c, sigma),
            _ => Ok(sell_stored(self.row_lengths()?, c, sigma)),
        }
    }

    /// The stored entries of each row: from the host copy where there is
    /// one, else from the resident copy. O(nrows).
    pub fn row_lengths(&self) -> Result<Vec<u32>> {
        match (self.0.host.get(), self.0.resident.get()) {
            (None, Some(r)) => r.row_lengths(),
            _ => self.host().map(host_row_lengths),
        }
    }
}

/// The stored entries of each row of the host matrix `a`. O(nrows),
/// parallel.
pub(crate) fn host_row_lengths<T: Scalar>(a: &Csr<T>) -> Vec<u32> {
    a.row_ptr()
        .par_windows(2)
        .map(|w| (w[1] - w[0]) as u32)
        .collect()
}

/// Stored entries in SELL-`c`-`sigma` of a matrix whose rows hold `lens`
/// entries (sorted in place by windows when sigma > 1): per slice of c
/// consecutive rows (after sorting each window of sigma rows by length,
/// longest first), c times its longest row. O(nrows log sigma), parallel.
pub(crate) fn sell_stored(mut lens: Vec<u32>, c: usize, sigma: usize) -> usize {
    if sigma > 1 {
        lens.par_chunks_mut(sigma)
            .for_each(|w| w.sort_unstable_by(|x, y| y.cmp(x)));
    }
    lens.par_chunks(c.max(1))
        .map(|s| c * *s.iter().max().unwrap_or(&0) as usize)
        .sum()
}

impl From<Csr<f64>> for LevelMatrix {
    fn from(a: Csr<f64>) -> Self {
        LevelMatrix::from_host(a)
    }
}

impl fmt::Debug for LevelMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LevelMatrix({} x {}, {} stored, host copy: {}, resident copy: {})",
            self.nrows(),
            self.ncols(),
            self.nnz(),
            self.on_host(),
            self.resident().is_some()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(Csr<f64>);

    impl ResidentMatrix for Fake {
        fn download(&self) -> Result<Csr<f64>> {
            Ok(self.0.clone())
        }
        fn row_lengths(&self) -> Result<Vec<u32>> {
            Ok(vec![7; self.0.nrows()])
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn a_resident_matrix_is_downloaded_once_on_demand() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(4);
        let m = LevelMatrix::from_resident(a.shape(), a.nnz(), Arc::new(Fake(a.clone())));
        assert_eq!((m.nrows(), m.ncols(), m.nnz()), (16, 16, a.nnz()));
        assert!(!m.on_host());
        assert_eq!(m.row_lengths().unwrap(), vec![7; 16]);
        let copy = m.clone();
        assert_eq!(m.host().unwrap(), &a);
        assert!(copy.on_host(), "clones share the host copy");
        let rows_of = |m: &LevelMatrix| m.rows(&[15, 0, 3, 3]).unwrap();
        let want = a.select_rows(&[15, 0, 3, 3]).unwrap();
        assert_eq!(
            rows_of(&LevelMatrix::from_resident(
                a.shape(),
                a.nnz(),
                Arc::new(Fake(a.clone()))
            )),
            want,
            "rows from the resident copy"
        );
        assert_eq!(rows_of(&m), want, "rows from the host copy");
        assert!(m.rows(&[16]).is_err());
        let lens: Vec<u32> = a
            .row_ptr()
            .windows(2)
            .map(|w| (w[1] - w[0]) as u32)
            .collect();
        assert_eq!(
            m.row_lengths().unwrap(),
            lens,
            "the host copy wins once made"
        );
        assert!(m.resident().unwrap().as_any().is::<Fake>());
    }

    #[test]
    fn a_host_matrix_keeps_the_first_resident_copy() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(3);
        let m = LevelMatrix::from_host(a.clone());
        assert!(m.resident().is_none());
        m.resident_or_init(|| Ok(Arc::new(Fake(a.clone()))))
            .unwrap();
        let again = m.resident_or_init(|| Err(Error::InvalidArgument("made twice".into())));
        assert!(again.is_ok());
        assert_eq!(m.host().unwrap(), &a);
    }
}
