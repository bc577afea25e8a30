//! The fused AMG cycle steps on the device (kernels in
//! `kernels-rs/src/device/amg.rs`): one pass over A that writes the residual
//! b - A x or a damped point-Jacobi iterate (`amg_sweep_*`), one pass over a
//! colour's rows for multicolour Gauss-Seidel (`amg_gs_*`), one pass per
//! Chebyshev step (`amg_cheb_*`), and the precision conversions of a
//! mixed-precision cycle (`convert_*`).

use crate::backend::{dev, CudaBackend};
use crate::blas1::{kernel, ScalarArg};
use crate::spmv::{Arrays, CudaMatrix};
use crate::vector::CudaVector;
use cudarc::driver::{CudaFunction, LaunchArgs, PushKernelArg};
use gpuq_core::{check_same_len, Error, Result, Scalar};
use gpuq_kernels::amg::{CHEB_PENDING, CHEB_STEP, CHEB_X_ZERO, CHEB_ZERO_START};

/// The arguments every row kernel of this file starts with: the rows, the
/// lanes per row (CSR) or the slice height (SELL), then the matrix's arrays
/// (SELL: its permutation, or a null pointer for the identity).
fn push_rows<'a, T>(l: &mut LaunchArgs<'a>, rows: &'a usize, a: &'a CudaMatrix<T>, null: &'a u64) {
    match &a.arrays {
        Arrays::Csr {
            row_ptr,
            col,
            val,
            lanes_log2,
        } => {
            l.arg(rows).arg(lanes_log2).arg(row_ptr).arg(col).arg(val);
        }
        Arrays::Sell {
            slice_ptr,
            col,
            val,
            perm,
            c,
        } => {
            l.arg(rows).arg(c).arg(slice_ptr).arg(col).arg(val);
            match perm {
                Some(p) => l.arg(p),
                None => l.arg(null),
            };
        }
        Arrays::Bsr { .. } => {}
    }
}

impl CudaBackend {
    /// The kernel `{csr}_*` or `{sell}_*` for `a`, the threads its launch
    /// needs (CSR: lanes per row times rows; SELL: one per row) and its name
    /// for the counters, or `None` for a BSR matrix.
    fn row_kernel<T: Scalar>(
        &self,
        [csr, sell]: [&'static str; 2],
        a: &CudaMatrix<T>,
    ) -> Result<Option<(CudaFunction, usize, &'static str)>> {
        let rows = a.shape.0;
        let (name, threads) = match &a.arrays {
            Arrays::Csr { lanes_log2, .. } => (csr, rows << lanes_log2),
            Arrays::Sell { .. } => (sell, rows),
            Arrays::Bsr { .. } => return Ok(None),
        };
        Ok(Some((self.function(&kernel::<T>(name))?, threads, name)))
    }

    /// One pass over the square CSR or SELL matrix `a`: `out = b - A x`, or
    /// with `dinv = Some(d)` (A's inverse diagonal) the damped Jacobi iterate
    /// `out = x + omega d .* (b - A x)`. Reads A once and b, x, d once each and
    /// writes `out` once: about 12 nnz + 32 n bytes for f64, against 12 nnz +
    /// 64 n for a copy, an SpMV and a diagonal product. `out` must be a
    /// distinct vector (Rust's borrows ensure it).
    ///
    /// Returns `Ok(false)` without launching for a BSR matrix (the caller
    /// takes its unfused path); errors on a non-square matrix or mismatched
    /// lengths.
    pub fn amg_sweep<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        omega: T,
        b: &CudaVector<T>,
        x: &CudaVector<T>,
        dinv: Option<&CudaVector<T>>,
        out: &mut CudaVector<T>,
    ) -> Result<bool> {
        let (m, n) = a.shape;
        if m != n {
            return Err(Error::shape("amg_sweep (A square)", m, n));
        }
        check_same_len("amg_sweep (b)", m, b.len)?;
        check_same_len("amg_sweep (x)", m, x.len)?;
        check_same_len("amg_sweep (out)", m, out.len)?;
        if let Some(d) = dinv {
            check_same_len("amg_sweep (dinv)", m, d.len)?;
        }
        let Some((f, threads, name)) = self.row_kernel(["amg_sweep_csr", "amg_sweep_sell"], a)?
        else {
            return Ok(false);
        };
        let om = ScalarArg::of(omega);
        let null = 0u64;
        let mut l = self.inner.stream.launch_builder(&f);
        push_rows(&mut l, &m, a, &null);
        om.push(&mut l);
        l.arg(&b.buf).arg(&x.buf);
        match dinv {
            Some(d) => l.arg(&d.buf),
            None => l.arg(&null),
        };
        l.arg(&mut out.buf);
        // SAFETY: arguments match `amg_sweep_csr_*` / `amg_sweep_sell_*` (a
        // null dinv means the residual; a null perm the identity); the arrays
        // describe a validated square matrix of m rows (SELL's from
        // `Sell::from_csr`); b, x, dinv and out hold m values (checked
        // above); out is a distinct buffer (borrows).
        unsafe { l.launch(Self::cfg(self.grid_blocks(threads))) }.map_err(dev(name))?;
        self.inner.stats.launch(name);
        Ok(true)
    }

    /// One colour's Gauss-Seidel update in place (`amg_gs_csr_*` /
    /// `amg_gs_sell_*`): for each row k of `scaled` (D^-1 S A, CSR or SELL),
    /// x\[i\] += d b\[i\] - scaled_k x, with i and d the column and value of row k
    /// of `select` (D^-1 S in CSR with one entry per row). One pass: reads
    /// `scaled` once and b, x at the colour's rows, writes x there. With
    /// `zero`, x is zeroed first and `scaled` is not read.
    ///
    /// Returns `Ok(false)` without launching when `select` is not CSR with
    /// one entry per row or `scaled` is BSR (the caller takes its unfused
    /// path); errors on mismatched shapes.
    pub fn amg_gs_color<T: Scalar>(
        &self,
        scaled: &CudaMatrix<T>,
        select: &CudaMatrix<T>,
        b: &CudaVector<T>,
        x: &mut CudaVector<T>,
        zero: bool,
    ) -> Result<bool> {
        let (m, n) = scaled.shape;
        if select.shape != (m, n) {
            return Err(Error::shape("amg_gs_color (select)", m, select.shape.0));
        }
        check_same_len("amg_gs_color (b)", n, b.len)?;
        check_same_len("amg_gs_color (x)", n, x.len)?;
        let one_per_row = gpuq_sparse::DeviceMatrix::nnz(select) == m;
        let (
            Arrays::Csr {
                col: sel_col,
                val: sel_val,
                ..
            },
            true,
        ) = (&select.arrays, one_per_row)
        else {
            return Ok(false);
        };
        let Some((f, threads, name)) = self.row_kernel(["amg_gs_csr", "amg_gs_sell"], scaled)?
        else {
            return Ok(false);
        };
        if zero {
            gpuq_core::Backend::fill(self, x, T::zero())?;
        }
        let null = 0u64;
        let flag = u32::from(zero);
        let mut l = self.inner.stream.launch_builder(&f);
        push_rows(&mut l, &m, scaled, &null);
        l.arg(sel_col)
            .arg(sel_val)
            .arg(&b.buf)
            .arg(&mut x.buf)
            .arg(&flag);
        // SAFETY: arguments match `amg_gs_csr_*` / `amg_gs_sell_*`; the arrays
        // describe validated matrices of m rows with columns below n (SELL's
        // from `Sell::from_csr`, a null perm the identity); the selection
        // has one entry per row (checked), each below n; b and x hold n
        // values (checked); no two rows of a colour select the same entry of
        // x (the colouring).
        unsafe { l.launch(Self::cfg(self.grid_blocks(threads))) }.map_err(dev(name))?;
        self.inner.stats.launch(name);
        Ok(true)
    }
}

/// The vectors of one Chebyshev pass ([`CudaBackend::amg_chebyshev`]).
pub enum ChebPass<'v, T> {
    /// The start: r = b - A x (r = b with `zero`, x then not read),
    /// d = alpha D^-1 r; x is not written.
    Start {
        /// The right-hand side.
        b: &'v CudaVector<T>,
        /// The iterate the residual is taken of.
        x: &'v CudaVector<T>,
        /// The first direction, written.
        d: &'v mut CudaVector<T>,
        /// Whether x is zero (no product with A).
        zero: bool,
    },
    /// A step: r -= A d_old, d_new = alpha D^-1 r + beta d_old, and
    /// x = x (or 0 with `zero`) (+ d_old with `pending`) + d_new.
    Step {
        /// The previous direction, read (also at the neighbours of a row).
        d_old: &'v CudaVector<T>,
        /// The new direction, written.
        d_new: &'v mut CudaVector<T>,
        /// The iterate, updated in place (written only, with `zero`).
        x: &'v mut CudaVector<T>,
        /// Whether the start's direction is still to be added to x.
        pending: bool,
        /// Whether x is taken as zero.
        zero: bool,
    },
}

impl CudaBackend {
    /// One Chebyshev start or step ([`ChebPass`]) in one pass over the
    /// square CSR or SELL matrix `a` (`amg_cheb_csr_*` / `amg_cheb_sell_*`),
    /// with D^-1 = diag(`dinv`) and `coef` = [alpha, beta] (beta unused by
    /// a start). A step reads A once and d_old, r, dinv, x once each and
    /// writes r, d_new and x: about 12 nnz + 56 n bytes for f64, against
    /// 12 nnz + 80 n for an SpMV, a diagonal product and an axpy in three
    /// launches; a start from zero reads no matrix.
    ///
    /// Returns `Ok(false)` without launching for a BSR matrix (the caller
    /// takes its unfused path); errors on a non-square matrix or mismatched
    /// lengths.
    pub fn amg_chebyshev<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        dinv: &CudaVector<T>,
        coef: [T; 2],
        r: &mut CudaVector<T>,
        pass: ChebPass<'_, T>,
    ) -> Result<bool> {
        let (m, n) = a.shape;
        if m != n {
            return Err(Error::shape("amg_chebyshev (A square)", m, n));
        }
        check_same_len("amg_chebyshev (dinv)", m, dinv.len)?;
        check_same_len("amg_chebyshev (r)", m, r.len)?;
        let (lens, flags) = match &pass {
            ChebPass::Start { b, x, d, zero } => (
                [b.len, x.len, d.len],
                if *zero { CHEB_ZERO_START } else { 0 },
            ),
            ChebPass::Step {
                d_old,
                d_new,
                x,
                pending,
                zero,
            } => (
                [d_old.len, d_new.len, x.len],
                CHEB_STEP
                    | if *pending { CHEB_PENDING } else { 0 }
                    | if *zero { CHEB_X_ZERO } else { 0 },
            ),
        };
        for len in lens {
            check_same_len("amg_chebyshev (vectors)", m, len)?;
        }
        let Some((f, threads, name)) = self.row_kernel(["amg_cheb_csr", "amg_cheb_sell"], a)?
        else {
            return Ok(false);
        };
        let [alpha, beta] = coef.map(ScalarArg::of);
        let null = 0u64;
        let mut l = self.inner.stream.launch_builder(&f);
        push_rows(&mut l, &m, a, &null);
        alpha.push(&mut l);
        beta.push(&mut l);
        l.arg(&flags);
        match pass {
            ChebPass::Start { b, x, d, .. } => {
                l.arg(&b.buf)
                    .arg(&dinv.buf)
                    .arg(&x.buf)
                    .arg(&mut r.buf)
                    .arg(&mut d.buf)
                    .arg(&null);
            }
            ChebPass::Step {
                d_old, d_new, x, ..
            } => {
                l.arg(&null)
                    .arg(&dinv.buf)
                    .arg(&d_old.buf)
                    .arg(&mut r.buf)
                    .arg(&mut d_new.buf)
                    .arg(&mut x.buf);
            }
        }
        // SAFETY: arguments match `amg_cheb_csr_*` / `amg_cheb_sell_*`; the
        // arrays describe a validated square matrix of m rows (SELL's from
        // `Sell::from_csr`, a null perm the identity); every vector holds m
        // values (checked); a start reads b (never null there) and writes no
        // x (null), a step reads no b (null); the written vectors are
        // distinct from the read ones (borrows), so no row reads a value
        // another thread writes.
        unsafe { l.launch(Self::cfg(self.grid_blocks(threads))) }.map_err(dev(name))?;
        self.inner.stats.launch(name);
        Ok(true)
    }
}

impl CudaBackend {
    /// y = x converted element by element between single and double
    /// precision (f64 and f32, or their complex types): one pass, 12 bytes
    /// per real moved. Errors on unequal lengths or on another pair of types.
    pub fn convert_precision<S: Scalar, T: Scalar>(
        &self,
        x: &CudaVector<S>,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        use gpuq_core::ScalarKind::{C32, C64, F32, F64};
        check_same_len("convert_precision", x.len, y.len)?;
        let (op, reals) = match (S::KIND, T::KIND) {
            (F64, F32) => ("convert_f64_f32", x.len),
            (F32, F64) => ("convert_f32_f64", x.len),
            (C64, C32) => ("convert_f64_f32", 2 * x.len),
            (C32, C64) => ("convert_f32_f64", 2 * x.len),
            (s, t) => {
                return Err(Error::InvalidArgument(format!(
                    "convert_precision: {} to {} is not a change of precision",
                    s.name(),
                    t.name()
                )))
            }
        };
        if reals == 0 {
            return Ok(());
        }
        let f = self.function(op)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&reals).arg(&x.buf).arg(&mut y.buf);
        // SAFETY: arguments match `convert_*`; x holds `reals` values of the
        // source precision and y as many of the target's (equal lengths,
        // checked; a complex value is two reals).
        unsafe { l.launch(Self::cfg(self.grid_blocks(reals))) }.map_err(dev(op))?;
        self.inner.stats.launch(op);
        Ok(())
    }
}
