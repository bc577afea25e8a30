//! The sparse side of a backend: resident matrices and SpMV.

use crate::Csr;
use gpuq_core::{Backend, FusedDot, LinearOperator, Result, Scalar};

/// How a backend stores a matrix it was given in CSR form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layout {
    /// Compressed sparse row, as given.
    #[default]
    Csr,
    /// SELL-C-sigma with slice height `c` and sorting window `sigma`
    /// (see [`crate::Sell`]).
    Sell {
        /// Slice height.
        c: usize,
        /// Sorting window (1 or a multiple of `c`).
        sigma: usize,
    },
    /// Square blocks of `b` unknowns (see [`crate::Bsr`]); `b` must divide
    /// both dimensions. Where AMG stores a hierarchy in BSR, each level's
    /// operators take that level's own node blocks, whatever `b` says.
    Bsr {
        /// Block size, 1 to [`crate::MAX_BSR_BLOCK`].
        b: usize,
    },
}

impl Layout {
    /// The names [`Layout::parse`] accepts (`sell` also as `sell:C:SIGMA`,
    /// `bsr` only as `bsr:B`).
    pub const NAMES: &'static [&'static str] = &["csr", "sell", "bsr"];

    /// Parses `csr`, `sell` (C = 8, sigma = 256), `sell:C:SIGMA`, `bsr:B`
    /// (B = 1 to 8) or `bsr2` (the same as `bsr:2`).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            gpuq_core::Error::InvalidArgument(format!(
                "layout '{s}': expected csr, sell, sell:C:SIGMA or bsr:B (B = 1 to {})",
                crate::MAX_BSR_BLOCK
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            ["csr"] => Ok(Layout::Csr),
            ["bsr2"] => Ok(Layout::Bsr { b: 2 }),
            ["bsr", b] => match b.parse() {
                Ok(b) if (1..=crate::MAX_BSR_BLOCK).contains(&b) => Ok(Layout::Bsr { b }),
                _ => Err(bad()),
            },
            ["sell"] => Ok(Layout::Sell { c: 8, sigma: 256 }),
            ["sell", c, sigma] => Ok(Layout::Sell {
                c: c.parse().map_err(|_| bad())?,
                sigma: sigma.parse().map_err(|_| bad())?,
            }),
            _ => Err(bad()),
        }
    }
}

/// Most stored entries per non-zero (padding included) at which [`Layout::auto`]
/// still picks SELL-32-1 on a device: 1.25.
pub const AUTO_SELL_MAX_PADDING: f64 = 1.25;

/// Longest mean row (non-zeros) at which [`Layout::auto`] still picks SELL on a
/// device: 32. Longer rows are read faster by the CSR kernels, which give a row
/// several lanes.
pub const AUTO_SELL_MAX_MEAN_ROW: f64 = 32.0;

impl Layout {
    /// The layout `--layout auto` means for `a`: on a device (a backend with its
    /// own memory, `device`), SELL-32-1 when the rows are short and even (mean at
    /// most [`AUTO_SELL_MAX_MEAN_ROW`] entries, slices of 32 rows padded to at most
    /// [`AUTO_SELL_MAX_PADDING`] times the non-zeros), CSR otherwise; on the host
    /// always CSR. The rule follows measurements on the H100: SELL-32-1 runs
    /// laplace3d:200's SpMV at the copy bandwidth where gpuq's CSR kernel runs at
    /// 0.82x cuSPARSE, and irregular rows make SELL read padding instead
    /// (docs/benchmarks.md). O(n).
    pub fn auto<T: Scalar>(a: &Csr<T>, device: bool) -> Layout {
        let n = a.nrows();
        if !device || n == 0 || a.nnz() == 0 {
            return Layout::Csr;
        }
        let rp = a.row_ptr();
        let stored: usize = (0..n)
            .step_by(32)
            .map(|start| {
                let end = (start + 32).min(n);
                let longest = (start..end).map(|i| rp[i + 1] - rp[i]).max().unwrap_or(0);
                32 * longest
            })
            .sum();
        let padding = stored as f64 / a.nnz() as f64;
        let mean = a.nnz() as f64 / n as f64;
        if mean <= AUTO_SELL_MAX_MEAN_ROW && padding <= AUTO_SELL_MAX_PADDING {
            Layout::Sell { c: 32, sigma: 1 }
        } else {
            Layout::Csr
        }
    }

    /// Parses a layout as [`Layout::parse`] does, or `auto` (`None`: choose with
    /// [`Layout::auto`] once the matrix is known).
    pub fn parse_or_auto(s: &str) -> Result<Option<Self>> {
        if s == "auto" {
            return Ok(None);
        }
        Layout::parse(s).map(Some).map_err(|_| {
            gpuq_core::Error::InvalidArgument(format!(
                "layout '{s}': expected auto, csr, sell, sell:C:SIGMA or bsr:B (B = 1 to 8)"
            ))
        })
    }

    /// The name of the layout as `--layout` spells it (`csr`, `sell:C:SIGMA`, `bsr:B`).
    pub fn spelling(&self) -> String {
        match self {
            Layout::Csr => "csr".into(),
            Layout::Sell { c, sigma } => format!("sell:{c}:{sigma}"),
            Layout::Bsr { b } => format!("bsr:{b}"),
        }
    }
}

/// A matrix resident on a backend.
pub trait DeviceMatrix {
    /// (rows, columns).
    fn shape(&self) -> (usize, usize);
    /// Stored nonzeros of the source matrix (padding excluded).
    fn nnz(&self) -> usize;
    /// The storage layout.
    fn layout(&self) -> Layout;
}

/// A backend that can hold sparse matrices and multiply by them.
///
/// Matrices are uploaded once (in the chosen [`Layout`]) and stay resident.
pub trait SparseBackend: Backend {
    /// A matrix of `T` resident on this backend.
    type Matrix<T: Scalar>: DeviceMatrix + Send + Sync;

    /// Uploads `a`, converting it to `layout` on the way. O(nnz) plus the conversion.
    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<Self::Matrix<T>>;

    /// Uploads `a`, which the caller gives up: as
    /// [`SparseBackend::upload_matrix`], but a backend that keeps CSR in host
    /// memory takes the arrays as they are (no copy). Default:
    /// `upload_matrix(&a, layout)`.
    fn upload_matrix_owned<T: Scalar>(&self, a: Csr<T>, layout: Layout) -> Result<Self::Matrix<T>> {
        self.upload_matrix(&a, layout)
    }

    /// y = alpha A x + beta y. Minimal traffic (CSR, f64): 12 nnz + 4 (n+1) + 8 n (x)
    /// + 8 n (y written; y also read when beta != 0) bytes.
    fn spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        beta: T,
        y: &mut Self::Vector<T>,
    ) -> Result<()>;

    /// Replaces the values of `a`, stored in [`Layout::Csr`], by `values`
    /// (nnz of them, in the CSR order of the matrix uploaded; the pattern
    /// stays), on the backend: a matrix whose values change per sample
    /// (K(theta) = K0 + sum theta_k K_k on one pattern) without a transfer.
    /// Default: an error (the backend keeps no CSR it can rewrite). O(nnz).
    fn set_csr_values<T: Scalar>(
        &self,
        a: &mut Self::Matrix<T>,
        values: &Self::Vector<T>,
    ) -> Result<()> {
        let _ = (a, values);
        Err(gpuq_core::Error::InvalidArgument(format!(
            "the {} backend cannot rewrite a resident matrix's values",
            self.name()
        )))
    }

    /// y = A x and returns x^H y, in one pass where the backend can fuse them
    /// (the default is an SpMV followed by a dot product).
    fn spmv_dotc<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
    ) -> Result<T> {
        self.spmv(T::one(), a, x, T::zero(), y)?;
        self.dotc(x, y)
    }

    /// y = A x and, fused into the same kernel where the backend can (then it
    /// returns `true`), `sc[slot] = w^H y` into the scalar array `dot` holds.
    /// Fused, the dot product costs one extra read of w and no pass over y. The
    /// default (and any layout a backend does not fuse) computes y only and
    /// returns `false`: the caller then reduces on its own. Errors on a shape
    /// mismatch, a non-square A, or a slot outside the array.
    fn spmv_dot<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        x: &Self::Vector<T>,
        y: &mut Self::Vector<T>,
        dot: FusedDot<'_, Self, T>,
    ) -> Result<bool> {
        let _ = dot;
        self.spmv(T::one(), a, x, T::zero(), y)?;
        Ok(false)
    }
}

/// How a [`MatrixOperator`] applies A^T.
enum Transpose<M> {
    /// Not prepared: `apply_transpose` errors.
    Unavailable,
    /// A^T = A: the matrix itself.
    Symmetric,
    /// A^T uploaded as its own matrix.
    Stored(M),
}

/// A resident matrix seen as a [`LinearOperator`]: `apply` is y = A x, and,
/// when built by [`MatrixOperator::with_transpose`], `apply_transpose` is y = A^T x.
pub struct MatrixOperator<B: SparseBackend, T: Scalar> {
    backend: B,
    matrix: B::Matrix<T>,
    transpose: Transpose<B::Matrix<T>>,
}

impl<B: SparseBackend, T: Scalar> MatrixOperator<B, T> {
    /// Uploads `a` to `backend` in `layout`. O(nnz) transfer.
    pub fn new(backend: &B, a: &Csr<T>, layout: Layout) -> Result<Self> {
        Ok(MatrixOperator {
            backend: backend.clone(),
            matrix: backend.upload_matrix(a, layout)?,
            transpose: Transpose::Unavailable,
        })
    }

    /// Uploads `a` and prepares A^T (unconjugated) as well: when A is symmetric
    /// (A^T = A, which includes complex symmetric matrices) the same resident
    /// matrix serves both, otherwise A^T is uploaded too. O(nnz) on the host to
    /// transpose and compare, plus at most twice the transfer of [`Self::new`].
    pub fn with_transpose(backend: &B, a: &Csr<T>, layout: Layout) -> Result<Self> {
        let at = a.transpose(false);
        let transpose = if at == *a {
            Transpose::Symmetric
        } else {
            Transpose::Stored(backend.upload_matrix(&at, layout)?)
        };
        Ok(MatrixOperator {
            transpose,
            ..Self::new(backend, a, layout)?
        })
    }

    /// A matrix already on `backend` as the operator (no transfer; without
    /// its transpose).
    pub fn from_resident(backend: &B, matrix: B::Matrix<T>) -> Self {
        MatrixOperator {
            backend: backend.clone(),
            matrix,
            transpose: Transpose::Unavailable,
        }
    }

    /// The resident matrix.
    pub fn matrix(&self) -> &B::Matrix<T> {
        &self.matrix
    }

    /// The backend holding it.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Replaces the matrix's values ([`SparseBackend::set_csr_values`]: a
    /// [`Layout::Csr`] matrix, the same pattern). Errors when A^T is stored
    /// apart (it would go stale), and as the backend does. O(nnz).
    pub fn set_csr_values(&mut self, values: &B::Vector<T>) -> Result<()> {
        if matches!(self.transpose, Transpose::Stored(_)) {
            return Err(gpuq_core::Error::InvalidArgument(
                "set_csr_values: the operator stores A^T apart".into(),
            ));
        }
        self.backend.set_csr_values(&mut self.matrix, values)
    }
}

impl<B: SparseBackend, T: Scalar> LinearOperator<B, T> for MatrixOperator<B, T> {
    fn shape(&self) -> (usize, usize) {
        self.matrix.shape()
    }

    fn apply(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        self.backend.spmv(T::one(), &self.matrix, x, T::zero(), y)
    }

    fn apply_dotc(&self, backend: &B, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<T> {
        backend.spmv_dotc(&self.matrix, x, y)
    }

    fn apply_dot(
        &self,
        backend: &B,
        x: &B::Vector<T>,
        y: &mut B::Vector<T>,
        dot: FusedDot<'_, B, T>,
    ) -> Result<bool> {
        backend.spmv_dot(&self.matrix, x, y, dot)
    }

    fn apply_transpose(&self, x: &B::Vector<T>, y: &mut B::Vector<T>) -> Result<()> {
        let at = match &self.transpose {
            Transpose::Unavailable => {
                return Err(gpuq_core::Error::Precondition {
                    method: "transpose",
                    reason: "matrix operator built without its transpose (use MatrixOperator::with_transpose)".into(),
                })
            }
            Transpose::Symmetric => &self.matrix,
            Transpose::Stored(at) => at,
        };
        self.backend.spmv(T::one(), at, x, T::zero(), y)
    }

    fn name(&self) -> &str {
        match self.matrix.layout() {
            Layout::Csr => "csr",
            Layout::Sell { .. } => "sell",
            Layout::Bsr { .. } => "bsr",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generators, Coo};

    #[test]
    fn auto_takes_sell_for_short_even_rows_on_a_device_only() {
        let a = generators::laplace3d::<f64>(12);
        assert_eq!(Layout::auto(&a, true), Layout::Sell { c: 32, sigma: 1 });
        assert_eq!(Layout::auto(&a, false), Layout::Csr);
    }

    #[test]
    fn auto_takes_csr_for_uneven_or_long_rows() {
        // An arrow matrix: one full row pads its slice 32-fold.
        let n = 256;
        let mut coo = Coo::new(n, n);
        for i in 0..n {
            coo.push(i, i, 4.0f64).unwrap();
            if i > 0 {
                coo.push(0, i, 1.0).unwrap();
            }
        }
        let arrow = Csr::from_coo(&coo).unwrap();
        assert_eq!(Layout::auto(&arrow, true), Layout::Csr);
        // Dense rows of 64 entries: even, but long.
        let mut coo = Coo::new(64, 64);
        for i in 0..64 {
            for j in 0..64 {
                coo.push(i, j, 1.0f64 + (i == j) as u8 as f64 * 64.0)
                    .unwrap();
            }
        }
        assert_eq!(
            Layout::auto(&Csr::from_coo(&coo).unwrap(), true),
            Layout::Csr
        );
    }

    #[test]
    fn spellings_parse_back_and_auto_is_not_a_layout() {
        for l in [
            Layout::Csr,
            Layout::Sell { c: 32, sigma: 1 },
            Layout::Bsr { b: 2 },
            Layout::Bsr { b: 3 },
        ] {
            assert_eq!(Layout::parse(&l.spelling()).unwrap(), l);
            assert_eq!(Layout::parse_or_auto(&l.spelling()).unwrap(), Some(l));
        }
        assert_eq!(Layout::parse_or_auto("auto").unwrap(), None);
        assert_eq!(Layout::parse("bsr2").unwrap(), Layout::Bsr { b: 2 });
        for bad in ["bsr", "bsr:0", "bsr:9", "bsr:x"] {
            assert!(Layout::parse(bad).is_err(), "{bad}");
        }
        assert!(Layout::parse("auto").is_err());
        let e = Layout::parse_or_auto("ell").unwrap_err().to_string();
        assert!(e.contains("auto") && e.contains("sell:C:SIGMA"), "{e}");
    }
}
