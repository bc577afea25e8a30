//! The cycle's fusable steps: [`AmgKernels`], with default bodies made of
//! SpMV and BLAS-1 operations (so any [`SparseBackend`] runs the cycle), and
//! one-pass Rayon versions for [`CpuBackend`] (the residual, Chebyshev and
//! Jacobi-into steps over CSR, BSR or SELL with slices of up to 16 rows, the
//! block-Jacobi sweep over CSR or BSR with a CSR or BSR block-diagonal
//! inverse; other layouts take the defaults). The CPU cycle stores scalar
//! levels in SELL-8 ([`CPU_SLICE`]), whose slices these kernels sum in
//! lockstep.
//!
//! The CUDA backend (behind the `cuda` feature) fuses, over CSR and SELL
//! matrices, the residual and the point-Jacobi sweep
//! ([`gpuq_cuda::CudaBackend::amg_sweep`]), a colour's Gauss-Seidel update
//! ([`gpuq_cuda::CudaBackend::amg_gs_color`]) and the Chebyshev start and step
//! ([`gpuq_cuda::CudaBackend::amg_chebyshev`]) into one kernel each; 2x2-block
//! smoothing and BSR matrices take the defaults (a copy, an SpMV with beta = 1
//! and a block-diagonal SpMV, and so on).

use crate::blockdiag::BlockDiagonal;
use crate::resident::LevelMatrix;
use gpuq_core::{check_same_len, DeviceVector, Result, Scalar};
use gpuq_cpu::{CpuBackend, CpuMatrix, CpuVector};
use gpuq_sparse::{Bsr, Csr, DeviceMatrix, Layout, Sell, SparseBackend};
use rayon::prelude::*;

/// `a` with its values converted to `T` (rows and values copied in
/// parallel). O(nnz).
pub(crate) fn convert<T: Scalar>(a: &Csr<f64>) -> Result<Csr<T>> {
    a.map_values(T::from_f64)
}

/// Whether a device can convert and lay out the f64 matrix `m` itself as a
/// cycle matrix in `layout` with values of `T` (the CUDA backend's
/// `setup_to_matrix`): [`device_values_fit`] and [`device_lays_out`].
/// O(nnz) for f32 (one parallel pass), O(1) otherwise.
pub fn device_layout_fits<T: Scalar>(m: &Csr<f64>, layout: Layout) -> bool {
    device_lays_out(layout) && device_values_fit::<T>(m)
}

/// Whether a device converts the values of `m` to `T` itself: f32 or f64,
/// and for f32 every value within its range (a value beyond it is left to
/// the host conversion, which reports it). O(nnz) for f32 (one parallel
/// pass), O(1) otherwise.
pub fn device_values_fit<T: Scalar>(m: &Csr<f64>) -> bool {
    match T::KIND {
        gpuq_core::ScalarKind::F64 => true,
        gpuq_core::ScalarKind::F32 => m.values().par_iter().all(|&v| (v as f32).is_finite()),
        _ => false,
    }
}

/// [`device_values_fit`] for a matrix whose largest magnitude is
/// `largest` (known from a pass made anyway). O(1).
pub fn device_largest_fits<T: Scalar>(largest: f64) -> bool {
    match T::KIND {
        gpuq_core::ScalarKind::F64 => true,
        gpuq_core::ScalarKind::F32 => (largest as f32).is_finite(),
        _ => false,
    }
}

/// Whether a device lays out a cycle matrix in `layout` itself (CSR or
/// SELL). O(1).
pub fn device_lays_out(layout: Layout) -> bool {
    matches!(layout, Layout::Csr | Layout::Sell { .. })
}

/// The steps of an AMG cycle that a backend can fuse.
pub trait AmgKernels: SparseBackend {
    /// r = b - A x. Default: a copy and an SpMV (two passes over r); fused: one.
    fn amg_residual<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
    ) -> Result<()> {
        default_residual(self, a, b, x, r)
    }

    /// One damped block-Jacobi sweep x <- x + omega D^-1 (b - A x), D^-1 the
    /// block-diagonal matrix `dinv` with blocks of `block` rows (for block 1
    /// also given as `diag`, the vector of omega D^-1's diagonal, the damping
    /// folded in); `scratch` (of x's length) is overwritten. Default: the residual into `scratch`, then
    /// x += omega D^-1 scratch as one SpMV with beta = 1; fused: one pass that
    /// writes the new iterate.
    #[allow(clippy::too_many_arguments)]
    fn amg_jacobi<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        dinv: &Self::Matrix<T>,
        diag: Option<&Self::Vector<T>>,
        block: usize,
        omega: T,
        b: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        scratch: &mut Self::Vector<T>,
    ) -> Result<()> {
        let _ = (block, diag);
        default_jacobi(self, a, dinv, omega, b, x, scratch)
    }

    /// One damped Jacobi sweep out of place, out = x + d o (b - A x), with
    /// `d` the point diagonal omega D^-1 (block 1, the damping folded in);
    /// `tmp` (of x's length) may be overwritten. x is only read, so another
    /// reader of x (a halo exchange of its entries) may be queued beside it.
    /// Default: the backend's residual into `tmp`, `d o tmp` into `out`,
    /// then `out += x` (three passes); fused: one.
    #[allow(clippy::too_many_arguments)]
    fn amg_jacobi_into<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        d: &Self::Vector<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        out: &mut Self::Vector<T>,
        tmp: &mut Self::Vector<T>,
    ) -> Result<()> {
        default_jacobi_into(self, a, d, b, x, out, tmp)
    }

    /// One colour's Gauss-Seidel update ([`crate::coloring::ColorSweep`]):
    /// t = select b - scaled x, then x += scatter t, i.e. the colour's nodes
    /// x_u += D_u^-1 (b_u - A_u x). With `zero`, x is taken as zero on entry
    /// and overwritten (the colour's rows get D^-1 b, the others 0). `t`
    /// holds the colour's n_c values. Default: three SpMVs (two from zero);
    /// fused: one pass over `scaled` that updates x in place (the colour's
    /// rows read only other colours' entries of x and their own).
    #[allow(clippy::too_many_arguments)]
    fn amg_gs_color<T: Scalar>(
        &self,
        scaled: &Self::Matrix<T>,
        select: &Self::Matrix<T>,
        scatter: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &mut Self::Vector<T>,
        t: &mut Self::Vector<T>,
        zero: bool,
    ) -> Result<()> {
        default_gs_color(self, scaled, select, scatter, b, x, t, zero)
    }

    /// The layout the cycle stores a level's operator, prolongator or
    /// restriction `m` in, `layout` the one [`Amg::new`](crate::Amg::new)'s
    /// rules chose for it from the request and `block` the level's unknowns
    /// per node. Default: `layout`. O(1).
    fn amg_cycle_layout(&self, layout: Layout, _m: &LevelMatrix, _block: usize) -> Result<Layout> {
        Ok(layout)
    }

    /// The hierarchy's level matrix `m` on this backend in `layout`, its
    /// values converted to `T`. Default: the host copy ([`LevelMatrix::host`])
    /// through [`AmgKernels::amg_host_matrix`]; the CUDA backend converts a
    /// matrix its setup left on the device in place (CSR or SELL, no
    /// transfer but 8 bytes per row of row lengths for SELL).
    fn amg_level_matrix<T: Scalar>(
        &self,
        m: &LevelMatrix,
        layout: Layout,
    ) -> Result<Self::Matrix<T>> {
        self.amg_host_matrix(m.host()?, layout)
    }

    /// The host matrix `m` (a level's operator, transfer or inverse
    /// diagonal, or a rank's block of one) on this backend in `layout`, its
    /// values converted to `T`. Default: converted on the host and uploaded,
    /// O(nnz) host work and a transfer; the CPU backend builds SELL with the
    /// values converted as they are placed; the CUDA backend uploads the f64
    /// CSR arrays and converts and lays them out on the device.
    fn amg_host_matrix<T: Scalar>(&self, m: &Csr<f64>, layout: Layout) -> Result<Self::Matrix<T>> {
        self.upload_matrix_owned(convert::<T>(m)?, layout)
    }

    /// The smoother's inverse block diagonal `d` as a matrix of this backend
    /// in `layout` with values of `T`. Default: [`BlockDiagonal::to_csr`],
    /// converted and uploaded (O(n bs) host work and the CSR arrays across);
    /// the CUDA backend builds it on the device from the blocks alone.
    fn amg_block_diagonal_matrix<T: Scalar>(
        &self,
        d: &BlockDiagonal,
        layout: Layout,
    ) -> Result<Self::Matrix<T>> {
        self.upload_matrix_owned(convert::<T>(&d.to_csr()?)?, layout)
    }

    /// `omega` times the point diagonal `d` (block size 1) as a vector of
    /// `T`. Default: converted on the host and uploaded, O(n).
    fn amg_scaled_diagonal<T: Scalar>(
        &self,
        d: &BlockDiagonal,
        omega: f64,
    ) -> Result<Self::Vector<T>> {
        let v: Vec<T> = d
            .blocks()?
            .par_iter()
            .map(|&x| T::from_f64(omega * x))
            .collect();
        self.upload(&v)
    }

    /// y = x converted element by element to another precision (the vectors
    /// entering and leaving a single-precision cycle inside a
    /// double-precision solve, [`crate::MixedAmg`]). Default: through the
    /// host (a download and an upload); fused: one pass on the backend.
    fn amg_convert<S: Scalar, T: Scalar>(
        &self,
        x: &Self::Vector<S>,
        y: &mut Self::Vector<T>,
    ) -> Result<()> {
        check_same_len("amg_convert", x.len(), y.len())?;
        let v: Vec<T> = self.download(x)?.into_iter().map(convert_scalar).collect();
        *y = self.upload(&v)?;
        Ok(())
    }

    /// The start of one Chebyshev application (Saad's algorithm 12.1,
    /// preconditioned by the block-diagonal D^-1 = `dinv`, or for block 1
    /// its diagonal `diag` as a vector): r = b - A x (r = b with `zero`,
    /// x then not read), d = alpha D^-1 r. x is not written: its update
    /// waits for the first [`AmgKernels::amg_chebyshev_step`] (`pending`),
    /// so that a fused pass can read x's neighbours while it runs. Default:
    /// the residual (or a copy) and one SpMV with `dinv`; fused: one pass.
    #[allow(clippy::too_many_arguments)]
    fn amg_chebyshev_start<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        dinv: &Self::Matrix<T>,
        diag: Option<&Self::Vector<T>>,
        alpha: T,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        r: &mut Self::Vector<T>,
        d: &mut Self::Vector<T>,
        zero: bool,
    ) -> Result<()> {
        let _ = diag;
        default_chebyshev_start(self, a, dinv, alpha, b, x, r, d, zero)
    }

    /// One Chebyshev step after the start: r -= A d_old, d_new = alpha D^-1
    /// r + beta d_old, and x = x + d_new, where x is taken as zero with
    /// `zero` and, with `pending`, first gets the start's direction d_old
    /// (x = (x + d_old) + d_new). `d_old` and `d_new` are distinct vectors,
    /// swapped by the caller between steps. Default: an SpMV with A, a copy
    /// and an SpMV with `dinv`, one or two axpys (or a copy); fused: one
    /// pass over A that updates r and x in place and writes d_new.
    #[allow(clippy::too_many_arguments)]
    fn amg_chebyshev_step<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        dinv: &Self::Matrix<T>,
        diag: Option<&Self::Vector<T>>,
        [alpha, beta]: [T; 2],
        r: &mut Self::Vector<T>,
        d_old: &Self::Vector<T>,
        d_new: &mut Self::Vector<T>,
        x: &mut Self::Vector<T>,
        [pending, zero]: [bool; 2],
    ) -> Result<()> {
        let _ = diag;
        default_chebyshev_step(
            self,
            a,
            dinv,
            [alpha, beta],
            r,
            d_old,
            d_new,
            x,
            pending,
            zero,
        )
    }

    /// The residual restricted: scratch = b - A x, then bc = R scratch.
    /// Default: [`AmgKernels::amg_residual`] and one SpMV.
    fn amg_residual_restrict<T: Scalar>(
        &self,
        a: &Self::Matrix<T>,
        r: &Self::Matrix<T>,
        b: &Self::Vector<T>,
        x: &Self::Vector<T>,
        scratch: &mut Self::Vector<T>,
        bc: &mut Self::Vector<T>,
    ) -> Result<()> {
        self.amg_residual(a, b, x, scratch)?;
        self.spmv(T::one(), r, scratch, T::zero(), bc)
    }
}

/// The default residual: r = b, then r = -A x + r.
fn default_residual<B: SparseBackend, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    b: &B::Vector<T>,
    x: &B::Vector<T>,
    r: &mut B::Vector<T>,
) -> Result<()> {
    be.copy(b, r)?;
    be.spmv(-T::one(), a, x, T::one(), r)
}

/// The default Jacobi sweep: the backend's residual (fused where it has
/// one), then x += omega D^-1 r as one SpMV with beta = 1.
fn default_jacobi<B: AmgKernels, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    dinv: &B::Matrix<T>,
    omega: T,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    scratch: &mut B::Vector<T>,
) -> Result<()> {
    be.amg_residual(a, b, x, scratch)?;
    be.spmv(omega, dinv, scratch, T::one(), x)
}

/// The default out-of-place sweep: the backend's residual into `tmp`, then
/// out = d o tmp + x.
fn default_jacobi_into<B: AmgKernels, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    d: &B::Vector<T>,
    b: &B::Vector<T>,
    x: &B::Vector<T>,
    out: &mut B::Vector<T>,
    tmp: &mut B::Vector<T>,
) -> Result<()> {
    be.amg_residual(a, b, x, tmp)?;
    be.mul_elementwise(d, tmp, out)?;
    be.axpy(T::one(), x, out)
}

/// The default Chebyshev start: the backend's residual (fused where it has
/// one) or a copy of b, then d = alpha D^-1 r.
#[allow(clippy::too_many_arguments)]
fn default_chebyshev_start<B: AmgKernels, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    dinv: &B::Matrix<T>,
    alpha: T,
    b: &B::Vector<T>,
    x: &B::Vector<T>,
    r: &mut B::Vector<T>,
    d: &mut B::Vector<T>,
    zero: bool,
) -> Result<()> {
    if zero {
        be.copy(b, r)?;
    } else {
        be.amg_residual(a, b, x, r)?;
    }
    be.spmv(alpha, dinv, r, T::zero(), d)
}

/// The default Chebyshev step: an SpMV with A, a copy and an SpMV with
/// `dinv`, then the iterate update.
#[allow(clippy::too_many_arguments)]
fn default_chebyshev_step<B: SparseBackend, T: Scalar>(
    be: &B,
    a: &B::Matrix<T>,
    dinv: &B::Matrix<T>,
    [alpha, beta]: [T; 2],
    r: &mut B::Vector<T>,
    d_old: &B::Vector<T>,
    d_new: &mut B::Vector<T>,
    x: &mut B::Vector<T>,
    pending: bool,
    zero: bool,
) -> Result<()> {
    be.spmv(-T::one(), a, d_old, T::one(), r)?;
    be.copy(d_old, d_new)?;
    be.spmv(alpha, dinv, r, beta, d_new)?;
    chebyshev_add(be, d_old, d_new, x, pending, zero)
}

/// x = (x + d_old) + d_new, x taken as zero with `zero` and d_old left out
/// without `pending`: the iterate update of a Chebyshev step.
fn chebyshev_add<B: SparseBackend, T: Scalar>(
    be: &B,
    d_old: &B::Vector<T>,
    d_new: &B::Vector<T>,
    x: &mut B::Vector<T>,
    pending: bool,
    zero: bool,
) -> Result<()> {
    match (pending, zero) {
        (true, true) => be.copy(d_old, x)?,
        (true, false) => be.axpy(T::one(), d_old, x)?,
        (false, true) => return be.copy(d_new, x),
        (false, false) => {}
    }
    be.axpy(T::one(), d_new, x)
}

/// `x` in the precision of `T` (real and imaginary parts rounded apart).
fn convert_scalar<S: Scalar, T: Scalar>(x: S) -> T {
    use gpuq_core::RealScalar;
    T::from_parts(
        <T::Real as RealScalar>::of_f64(x.re().to_f64_lossless()),
        <T::Real as RealScalar>::of_f64(x.im().to_f64_lossless()),
    )
}

/// The default colour update: three SpMVs (two from zero).
#[allow(clippy::too_many_arguments)]
fn default_gs_color<B: SparseBackend, T: Scalar>(
    be: &B,
    scaled: &B::Matrix<T>,
    select: &B::Matrix<T>,
    scatter: &B::Matrix<T>,
    b: &B::Vector<T>,
    x: &mut B::Vector<T>,
    t: &mut B::Vector<T>,
    zero: bool,
) -> Result<()> {
    be.spmv(T::one(), select, b, T::zero(), t)?;
    if zero {
        return be.spmv(T::one(), scatter, t, T::zero(), x);
    }
    be.spmv(-T::one(), scaled, x, T::one(), t)?;
    be.spmv(T::one(), scatter, t, T::one(), x)
}

/// Row access to the CPU matrix layouts the block-Jacobi sweep handles.
enum Rows<'a, T> {
    Csr(&'a Csr<T>),
    Bsr(&'a Bsr<T>),
}

impl<'a, T: Scalar> Rows<'a, T> {
    fn of(m: &'a CpuMatrix<T>) -> Option<Self> {
        match m {
            CpuMatrix::Csr(a) => Some(Rows::Csr(a)),
            CpuMatrix::Bsr(a, _) => Some(Rows::Bsr(a)),
            CpuMatrix::Sell(..) => None,
        }
    }

    /// Row i times x.
    #[inline(always)]
    fn dot(&self, i: usize, x: &[T]) -> T {
        match self {
            Rows::Csr(a) => {
                let (c, v) = a.row(i);
                c.iter()
                    .zip(v)
                    .fold(T::zero(), |s, (&j, &aij)| s + aij * x[j as usize])
            }
            Rows::Bsr(a) => {
                let b = a.block_size();
                let (bi, r) = (i / b, i % b);
                let (ptr, col, vals) = (a.block_row_ptr(), a.block_col(), a.values());
                (ptr[bi]..ptr[bi + 1]).fold(T::zero(), |s, q| {
                    let j = b * col[q] as usize;
                    let row = &vals[(q * b + r) * b..][..b];
                    row.iter()
                        .zip(&x[j..j + b])
                        .fold(s, |s, (&v, &xc)| s + v * xc)
                })
            }
        }
    }
}

/// The CPU matrix layouts the point-wise fused kernels (residual, Chebyshev,
/// Jacobi into a vector) read.
enum Layouts<'a, T> {
    Csr(&'a Csr<T>),
    Bsr(&'a Bsr<T>),
    /// SELL with slices that tile a [`GROUP`] of rows (height at most 16).
    Sell(&'a Sell<T>),
}

impl<'a, T: Scalar> Layouts<'a, T> {
    fn of(m: &'a CpuMatrix<T>) -> Option<Self> {
        match m {
            CpuMatrix::Csr(a) => Some(Layouts::Csr(a)),
            CpuMatrix::Bsr(a, _) => Some(Layouts::Bsr(a)),
            CpuMatrix::Sell(a, _) if GROUP % a.c() == 0 => Some(Layouts::Sell(a)),
            CpuMatrix::Sell(..) => None,
        }
    }
}

/// Products of a CPU matrix's rows with x, for one layout: the fused
/// kernels pick the layout once per call ([`with_rows`]) so their row loops
/// are compiled for it.
trait RowDot<T: Scalar>: Sync {
    /// `out[k]` = the row stored at position `first + k` ([`Self::row_at`])
    /// times x, each row's products summed in its stored order (`first` a
    /// multiple of [`GROUP`], `out` at most a group). O(entries).
    fn dots(&self, first: usize, x: &[T], out: &mut [T]);

    /// The row stored at position `pos` (SELL sorts rows within windows). O(1).
    #[inline(always)]
    fn row_at(&self, pos: usize) -> usize {
        pos
    }

    /// Rows per task of the fused kernels: [`TASK_ROWS`], or for a layout
    /// that reorders rows within windows the least multiple of its window
    /// from [`TASK_ROWS`] on (a task then holds whole windows).
    fn task_rows(&self) -> usize {
        TASK_ROWS
    }
}

impl<T: Scalar> RowDot<T> for Csr<T> {
    #[inline(always)]
    fn dots(&self, first: usize, x: &[T], out: &mut [T]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = Rows::Csr(self).dot(first + k, x);
        }
    }
}

impl<T: Scalar> RowDot<T> for Bsr<T> {
    #[inline(always)]
    fn dots(&self, first: usize, x: &[T], out: &mut [T]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = Rows::Bsr(self).dot(first + k, x);
        }
    }
}

impl<T: Scalar> RowDot<T> for Sell<T> {
    /// A slice's rows in lockstep, one accumulator per row: no branch on
    /// where a row ends and no chain of dependent additions along a row (the
    /// padding adds exact zeros, so each sum is CSR's).
    #[inline(always)]
    fn dots(&self, first: usize, x: &[T], out: &mut [T]) {
        match self.c() {
            1 => sell_dots::<T, 1>(self, first, x, out),
            2 => sell_dots::<T, 2>(self, first, x, out),
            4 => sell_dots::<T, 4>(self, first, x, out),
            8 => sell_dots::<T, 8>(self, first, x, out),
            _ => sell_dots::<T, 16>(self, first, x, out),
        }
    }

    #[inline(always)]
    fn row_at(&self, pos: usize) -> usize {
        self.perm()[pos] as usize
    }

    fn task_rows(&self) -> usize {
        let window = self.sigma().max(self.c());
        TASK_ROWS.div_ceil(window) * window
    }
}

/// [`RowDot::dots`] for SELL slices of `C` rows, `first` a multiple of `C`.
#[inline(always)]
fn sell_dots<T: Scalar, const C: usize>(a: &Sell<T>, first: usize, x: &[T], out: &mut [T]) {
    let (ptr, col, vals) = (a.slice_ptr(), a.col_idx(), a.values());
    for (g, o) in out.chunks_mut(C).enumerate() {
        let s = first / C + g;
        let r = ptr[s]..ptr[s + 1];
        let mut acc = [T::zero(); C];
        for (cc, vv) in col[r.clone()].chunks_exact(C).zip(vals[r].chunks_exact(C)) {
            for l in 0..C {
                acc[l] += vv[l] * x[cc[l] as usize];
            }
        }
        // A whole slice as a fixed-size copy, the last partial one out of
        // line: a copy of the run-time length `o.len()` (or both copies,
        // which LLVM merges into one of a selected length) calls memcpy
        // once per slice (5% of the samples of a two-core cycle).
        match <&mut [T; C]>::try_from(&mut *o) {
            Ok(full) => *full = acc,
            Err(_) => copy_partial(o, &acc),
        }
    }
}

/// `o` = the first `o.len()` values of `acc`: the last, partial slice of
/// [`sell_dots`], out of line so that the whole slices' copies stay
/// fixed-size stores. O(o.len()).
#[cold]
#[inline(never)]
fn copy_partial<T: Copy>(o: &mut [T], acc: &[T]) {
    o.copy_from_slice(&acc[..o.len()]);
}

/// Rows whose products [`for_row_dots`] computes together.
const GROUP: usize = 16;

/// Calls `f(k, d_k)` once for each k in 0..len, d_k the product of row
/// `first + k` of `a` with x (zero when `skip`), the products computed a
/// [`GROUP`] of stored rows at a time (rows in their stored order: sorted
/// within windows for SELL, the task holding whole windows).
#[inline(always)]
fn for_row_dots<T: Scalar, A: RowDot<T>>(
    a: &A,
    (first, len): (usize, usize),
    x: &[T],
    skip: bool,
    mut f: impl FnMut(usize, T),
) {
    let mut d = [T::zero(); GROUP];
    for g in (0..len).step_by(GROUP) {
        let m = GROUP.min(len - g);
        if !skip {
            a.dots(first + g, x, &mut d[..m]);
        }
        for (k, &dk) in d[..m].iter().enumerate() {
            f(a.row_at(first + g + k) - first, dk);
        }
    }
}

/// Evaluates `$body` with `$a` bound to the CSR, BSR or SELL matrix of
/// `$rows` (a [`Layouts`]), the body compiled once per layout.
macro_rules! with_rows {
    ($rows:expr, $a:ident => $body:expr) => {
        match $rows {
            Layouts::Csr($a) => $body,
            Layouts::Bsr($a) => $body,
            Layouts::Sell($a) => $body,
        }
    };
}

/// Calls `f(first, chunks)` for each task of `task_rows` rows, in
/// parallel: `chunks` the task's rows of each of the `N` vectors (of equal
/// length, checked by the caller), `first` its first row. The kernels' loops
/// then index plain slices.
fn par_row_chunks<T: Scalar, const N: usize>(
    task_rows: usize,
    vectors: [&mut [T]; N],
    f: impl Fn(usize, [&mut [T]; N]) + Sync + Send,
) {
    let len = vectors.first().map_or(0, |v| v.len());
    let mut chunks = vectors.map(|v| v.chunks_mut(task_rows));
    let tasks: Vec<(usize, [&mut [T]; N])> = (0..len.div_ceil(task_rows))
        .map(|c| {
            let task = std::array::from_fn(|k| chunks[k].next().unwrap_or_default());
            (c * task_rows, task)
        })
        .collect();
    tasks
        .into_par_iter()
        .for_each(|(first, task)| f(first, task));
}

/// Largest block the fused CPU Jacobi sweep keeps on the stack.
const MAX_BLOCK: usize = 8;

/// Rows per task of the fused CPU kernels (a multiple of every block up to 8
/// that divides 840).
const TASK_ROWS: usize = 1680;

/// Rows per slice of the SELL storage the CPU cycle uses for scalar levels
/// ([`CpuBackend`]'s `amg_cycle_layout`).
pub const CPU_SLICE: usize = 8;

/// Stored entries (padding included) per nonzero above which the CPU cycle
/// keeps a scalar level's matrix in CSR even with rows sorted within
/// windows: rows of wildly different lengths (a few dense rows) would make
/// SELL read and hold mostly padding.
pub const CPU_MAX_SORTED_PADDING: f64 = 1.25;

impl AmgKernels for CpuBackend {
    /// CSR becomes SELL-[`CPU_SLICE`] for the matrices of scalar levels
    /// (sigma 1, or rows sorted within windows of 8 slices where slices of
    /// rows in order would pad by more than 10%; CSR still where sorted
    /// slices would pad by more than [`CPU_MAX_SORTED_PADDING`]): the fused kernels and the
    /// SpMV then sum a slice's rows in lockstep, with no branch where a row
    /// ends and no chain of dependent additions along it, and each sum is
    /// CSR's bit for bit (the padding adds exact zeros). On two cores this
    /// took anisotropic diffusion's cycle from 11.9 to 8.0 ms and its solve
    /// by about a quarter (docs/benchmarks.md, issue 47). Block levels keep
    /// CSR (their block-Jacobi sweep reads rows one at a time). O(rows).
    fn amg_cycle_layout(&self, layout: Layout, m: &LevelMatrix, block: usize) -> Result<Layout> {
        if layout != Layout::Csr || block != 1 || m.nnz() == 0 {
            return Ok(layout);
        }
        let pads = |sigma: usize| -> Result<f64> {
            Ok(m.sell_stored(CPU_SLICE, sigma)? as f64 / m.nnz() as f64)
        };
        let sorted = crate::cycle::SORT_SLICES * CPU_SLICE;
        Ok(if pads(1)? <= crate::cycle::MAX_PADDING {
            Layout::Sell {
                c: CPU_SLICE,
                sigma: 1,
            }
        } else if pads(sorted)? <= CPU_MAX_SORTED_PADDING {
            Layout::Sell {
                c: CPU_SLICE,
                sigma: sorted,
            }
        } else {
            Layout::Csr
        })
    }

    /// SELL built with the values converted as they are placed (one pass);
    /// other layouts as the default does. O(nnz).
    fn amg_host_matrix<T: Scalar>(&self, m: &Csr<f64>, layout: Layout) -> Result<CpuMatrix<T>> {
        let Layout::Sell { c, sigma } = layout else {
            return self.upload_matrix_owned(convert::<T>(m)?, layout);
        };
        self.sell_from(m, c, sigma, T::from_f64)
    }

    /// One Rayon pass.
    fn amg_convert<S: Scalar, T: Scalar>(
        &self,
        x: &CpuVector<S>,
        y: &mut CpuVector<T>,
    ) -> Result<()> {
        check_same_len("amg_convert", x.len(), y.len())?;
        y.as_mut_slice()
            .par_iter_mut()
            .zip(x.as_slice().par_iter())
            .for_each(|(t, &s)| *t = convert_scalar(s));
        Ok(())
    }

    /// One pass: r_i = b_i - A_i x, in tasks of about 1680 rows (CSR, BSR
    /// or SELL; other layouts the default).
    fn amg_residual<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        b: &CpuVector<T>,
        x: &CpuVector<T>,
        r: &mut CpuVector<T>,
    ) -> Result<()> {
        let Some(rows) = Layouts::of(a) else {
            return default_residual(self, a, b, x, r);
        };
        let (m, n) = a.shape();
        check_same_len("amg_residual (x vs columns)", n, x.len())?;
        check_same_len("amg_residual (b vs rows)", m, b.len())?;
        check_same_len("amg_residual (r vs rows)", m, r.len())?;
        let (b, x) = (b.as_slice(), x.as_slice());
        self.run("amg_residual", || {
            with_rows!(rows, a => par_row_chunks(a.task_rows(), [r.as_mut_slice()], |first, [rc]| {
                let bc = &b[first..first + rc.len()];
                for_row_dots(a, (first, rc.len()), x, false, |k, d| rc[k] = bc[k] - d);
            }))
        });
        Ok(())
    }

    /// With a point diagonal (block 1) over CSR, BSR or SELL: one Rayon pass;
    /// otherwise the default.
    fn amg_chebyshev_start<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        dinv: &CpuMatrix<T>,
        diag: Option<&CpuVector<T>>,
        alpha: T,
        b: &CpuVector<T>,
        x: &CpuVector<T>,
        r: &mut CpuVector<T>,
        d: &mut CpuVector<T>,
        zero: bool,
    ) -> Result<()> {
        let (Some(rows), Some(dg)) = (Layouts::of(a), diag) else {
            return default_chebyshev_start(self, a, dinv, alpha, b, x, r, d, zero);
        };
        let m = a.shape().0;
        for (what, len) in [
            ("x", x.len()),
            ("b", b.len()),
            ("r", r.len()),
            ("d", d.len()),
        ] {
            check_same_len(what, m, len)?;
        }
        check_same_len("amg_chebyshev_start (A square, diag)", m, dg.len())?;
        let (bs, xs, dg) = (b.as_slice(), x.as_slice(), dg.as_slice());
        self.run("amg_chebyshev_start", || {
            let vectors = [r.as_mut_slice(), d.as_mut_slice()];
            with_rows!(rows, a => par_row_chunks(a.task_rows(), vectors, |first, [rc, dc]| {
                let rows = first..first + rc.len();
                let (bc, gc) = (&bs[rows.clone()], &dg[rows]);
                for_row_dots(a, (first, rc.len()), xs, zero, |k, s| {
                    rc[k] = bc[k] - s;
                    dc[k] = alpha * (gc[k] * rc[k]);
                });
            }))
        });
        Ok(())
    }

    /// With a point diagonal (block 1) over CSR, BSR or SELL: one Rayon pass;
    /// otherwise the default.
    fn amg_chebyshev_step<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        dinv: &CpuMatrix<T>,
        diag: Option<&CpuVector<T>>,
        [alpha, beta]: [T; 2],
        r: &mut CpuVector<T>,
        d_old: &CpuVector<T>,
        d_new: &mut CpuVector<T>,
        x: &mut CpuVector<T>,
        [pending, zero]: [bool; 2],
    ) -> Result<()> {
        let (Some(rows), Some(dg)) = (Layouts::of(a), diag) else {
            let coef = [alpha, beta];
            return default_chebyshev_step(self, a, dinv, coef, r, d_old, d_new, x, pending, zero);
        };
        let m = a.shape().0;
        for (what, len) in [
            ("r", r.len()),
            ("d_old", d_old.len()),
            ("d_new", d_new.len()),
            ("x", x.len()),
        ] {
            check_same_len(what, m, len)?;
        }
        check_same_len("amg_chebyshev_step (A square, diag)", m, dg.len())?;
        let (old, dg) = (d_old.as_slice(), dg.as_slice());
        self.run("amg_chebyshev_step", || {
            let vectors = [r.as_mut_slice(), d_new.as_mut_slice(), x.as_mut_slice()];
            with_rows!(rows, a => par_row_chunks(a.task_rows(), vectors, |first, [rc, nc, xc]| {
                let rows = first..first + rc.len();
                let (oc, gc) = (&old[rows.clone()], &dg[rows]);
                for_row_dots(a, (first, rc.len()), old, false, |k, s| {
                    rc[k] -= s;
                    nc[k] = alpha * (gc[k] * rc[k]) + beta * oc[k];
                    let mut v = if zero { T::zero() } else { xc[k] };
                    if pending {
                        v += oc[k];
                    }
                    xc[k] = v + nc[k];
                });
            }))
        });
        Ok(())
    }

    /// One pass writing the new iterate into `scratch` (each block's residual
    /// kept on the stack), then the two vectors are swapped (no copy).
    fn amg_jacobi<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        dinv: &CpuMatrix<T>,
        _diag: Option<&CpuVector<T>>,
        block: usize,
        omega: T,
        b: &CpuVector<T>,
        x: &mut CpuVector<T>,
        scratch: &mut CpuVector<T>,
    ) -> Result<()> {
        let (Some(rows), Some(drows)) = (Rows::of(a), Rows::of(dinv)) else {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        };
        let bsr_mismatch = matches!(&drows, Rows::Bsr(d) if d.block_size() != block);
        if block == 0 || block > MAX_BLOCK || TASK_ROWS % block != 0 || bsr_mismatch {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        }
        let (m, n) = a.shape();
        check_same_len("amg_jacobi (A square)", m, n)?;
        check_same_len("amg_jacobi (D^-1 vs A)", m, dinv.shape().0)?;
        check_same_len("amg_jacobi (x vs rows)", m, x.len())?;
        check_same_len("amg_jacobi (b vs rows)", m, b.len())?;
        check_same_len("amg_jacobi (scratch vs rows)", m, scratch.len())?;
        if m % block != 0 {
            return default_jacobi(self, a, dinv, omega, b, x, scratch);
        }
        let (bs, xs) = (b.as_slice(), x.as_slice());
        self.run("amg_jacobi", || {
            scratch
                .as_mut_slice()
                .par_chunks_mut(TASK_ROWS)
                .enumerate()
                .for_each(|(c, out)| {
                    let row0 = c * TASK_ROWS;
                    let mut res = [T::zero(); MAX_BLOCK];
                    for (k, blk) in out.chunks_mut(block).enumerate() {
                        let first = row0 + k * block;
                        for (q, rq) in res.iter_mut().take(blk.len()).enumerate() {
                            *rq = bs[first + q] - rows.dot(first + q, xs);
                        }
                        // D^-1 only couples rows of the block: read its rows
                        // against the block's residual placed at its columns.
                        for (q, o) in blk.iter_mut().enumerate() {
                            let i = first + q;
                            let corr = drows.dot_local(i, first, &res);
                            *o = xs[i] + omega * corr;
                        }
                    }
                })
        });
        std::mem::swap(x, scratch);
        Ok(())
    }

    /// Two passes over the colour's rows with CSR `scaled` and `select`
    /// (any block size; other layouts take the default): t = select b -
    /// scaled x in parallel (nothing written to x), then each t_k added to
    /// its row of x. The colour's k-th row is row r of a node whose bs rows
    /// `select`'s row k names in order, with r = k mod bs (a colour's rows
    /// come node by node). The default's scatter SpMV reads and writes all
    /// of x per colour; this touches the colour's rows only.
    #[allow(clippy::too_many_arguments)]
    fn amg_gs_color<T: Scalar>(
        &self,
        scaled: &CpuMatrix<T>,
        select: &CpuMatrix<T>,
        scatter: &CpuMatrix<T>,
        b: &CpuVector<T>,
        x: &mut CpuVector<T>,
        t: &mut CpuVector<T>,
        zero: bool,
    ) -> Result<()> {
        let (CpuMatrix::Csr(sc), CpuMatrix::Csr(se)) = (scaled, select) else {
            return default_gs_color(self, scaled, select, scatter, b, x, t, zero);
        };
        let (m, n) = sc.shape();
        check_same_len("amg_gs_color (select rows)", m, se.nrows())?;
        check_same_len("amg_gs_color (t)", m, t.len())?;
        check_same_len("amg_gs_color (b)", n, b.len())?;
        check_same_len("amg_gs_color (x)", n, x.len())?;
        let bs = b.as_slice();
        self.run("amg_gs_color", || {
            let xs = x.as_slice();
            t.as_mut_slice()
                .par_iter_mut()
                .enumerate()
                .with_min_len(TASK_ROWS)
                .for_each(|(k, tk)| {
                    let (c, v) = se.row(k);
                    let mut s = c
                        .iter()
                        .zip(v)
                        .fold(T::zero(), |s, (&j, &d)| s + d * bs[j as usize]);
                    if !zero {
                        let (c, v) = sc.row(k);
                        s = c
                            .iter()
                            .zip(v)
                            .fold(s, |s, (&j, &a)| s - a * xs[j as usize]);
                    }
                    *tk = s;
                });
            let xs = x.as_mut_slice();
            if zero {
                xs.par_iter_mut().for_each(|v| *v = T::zero());
            }
            for (k, &tk) in t.as_slice().iter().enumerate() {
                let cols = se.row(k).0;
                let i = cols.first().map(|&c| c as usize + k % cols.len());
                match i.and_then(|i| xs.get_mut(i)) {
                    Some(xi) => *xi += tk,
                    None => {
                        return Err(gpuq_core::Error::InvalidArgument(format!(
                            "amg_gs_color: row {k} of the colour's selection names no row of x"
                        )))
                    }
                }
            }
            Ok(())
        })
    }

    /// One Rayon pass over a CSR, BSR or SELL matrix (other layouts take
    /// the default).
    fn amg_jacobi_into<T: Scalar>(
        &self,
        a: &CpuMatrix<T>,
        d: &CpuVector<T>,
        b: &CpuVector<T>,
        x: &CpuVector<T>,
        out: &mut CpuVector<T>,
        tmp: &mut CpuVector<T>,
    ) -> Result<()> {
        let Some(rows) = Layouts::of(a) else {
            return default_jacobi_into(self, a, d, b, x, out, tmp);
        };
        let (m, n) = a.shape();
        check_same_len("amg_jacobi_into (A square)", m, n)?;
        check_same_len("amg_jacobi_into (d vs rows)", m, d.len())?;
        check_same_len("amg_jacobi_into (b vs rows)", m, b.len())?;
        check_same_len("amg_jacobi_into (x vs rows)", m, x.len())?;
        check_same_len("amg_jacobi_into (out vs rows)", m, out.len())?;
        let (ds, bs, xs) = (d.as_slice(), b.as_slice(), x.as_slice());
        self.run("amg_jacobi_into", || {
            with_rows!(rows, a => par_row_chunks(a.task_rows(), [out.as_mut_slice()], |first, [oc]| {
                for_row_dots(a, (first, oc.len()), xs, false, |k, s| {
                    let i = first + k;
                    oc[k] = xs[i] + ds[i] * (bs[i] - s);
                });
            }))
        });
        Ok(())
    }
}

impl<T: Scalar> Rows<'_, T> {
    /// Row i of a block-diagonal matrix times a vector whose only nonzeros are
    /// `local[0..]` at positions `first..` (the block's residual).
    #[inline(always)]
    fn dot_local(&self, i: usize, first: usize, local: &[T]) -> T {
        match self {
            Rows::Csr(a) => {
                let (c, v) = a.row(i);
                c.iter()
                    .zip(v)
                    .fold(T::zero(), |s, (&j, &d)| s + d * local[j as usize - first])
            }
            Rows::Bsr(a) => {
                let b = a.block_size();
                let (bi, r) = (i / b, i % b);
                let (ptr, col, vals) = (a.block_row_ptr(), a.block_col(), a.values());
                (ptr[bi]..ptr[bi + 1]).fold(T::zero(), |s, q| {
                    let j = b * col[q] as usize - first;
                    let row = &vals[(q * b + r) * b..][..b];
                    row.iter()
                        .zip(&local[j..j + b])
                        .fold(s, |s, (&v, &lc)| s + v * lc)
                })
            }
        }
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::{
        default_chebyshev_start, default_chebyshev_step, default_gs_color, default_jacobi,
        default_jacobi_into, default_residual, AmgKernels,
    };
    use crate::blockdiag::BlockDiagonal;
    use crate::resident::LevelMatrix;
    use gpuq_core::{Backend, Result, Scalar};
    use gpuq_cuda::{ChebPass, CudaBackend, CudaMatrix, CudaVector};
    use gpuq_sparse::{Csr, Layout, SparseBackend};

    impl AmgKernels for CudaBackend {
        /// CSR built on the device from the uploaded blocks
        /// ([`CudaBackend::setup_block_diagonal_matrix`]) for every layout
        /// but BSR (a block-diagonal matrix gains nothing from SELL's
        /// slices); BSR and complex `T` take the default.
        fn amg_block_diagonal_matrix<T: Scalar>(
            &self,
            d: &BlockDiagonal,
            layout: Layout,
        ) -> Result<CudaMatrix<T>> {
            if !matches!(layout, Layout::Bsr { .. }) {
                let n = d.rows();
                let blocks = crate::setup::cuda::device_blocks(self, d)?;
                if let Some(m) = self.setup_block_diagonal_matrix::<T>(n, d.block(), &blocks)? {
                    return Ok(m);
                }
            }
            self.upload_matrix(&super::convert::<T>(&d.to_csr()?)?, layout)
        }

        /// Scaled and converted on the device
        /// ([`CudaBackend::setup_scaled_diagonal`]).
        fn amg_scaled_diagonal<T: Scalar>(
            &self,
            d: &BlockDiagonal,
            omega: f64,
        ) -> Result<CudaVector<T>> {
            let blocks = crate::setup::cuda::device_blocks(self, d)?;
            match self.setup_scaled_diagonal::<T>(&blocks, omega)? {
                Some(v) => Ok(v),
                None => {
                    let v: Vec<T> = d
                        .blocks()?
                        .iter()
                        .map(|&x| T::from_f64(omega * x))
                        .collect();
                    self.upload(&v)
                }
            }
        }

        /// A matrix this backend's setup left on the device, in CSR or SELL:
        /// converted there ([`CudaBackend::setup_to_matrix`]); anything else
        /// from the host copy ([`AmgKernels::amg_host_matrix`]).
        fn amg_level_matrix<T: Scalar>(
            &self,
            m: &LevelMatrix,
            layout: Layout,
        ) -> Result<CudaMatrix<T>> {
            if let Some(d) = crate::setup::cuda::device_copy(self, m) {
                if let Some(out) = self.setup_to_matrix::<T>(&d, layout)? {
                    return Ok(out);
                }
            }
            self.amg_host_matrix(m.host()?, layout)
        }

        /// CSR or SELL in f32 or f64: the f64 CSR arrays uploaded as they are
        /// ([`CudaBackend::setup_upload`], 12 bytes per entry and 8 per row),
        /// then converted and laid out on the device
        /// ([`CudaBackend::setup_to_matrix`]; the f64 copy freed), so the host
        /// makes no converted copy and no SELL layout (for f32, one parallel
        /// pass checks that every value fits). Other layouts and scalars, and
        /// a value beyond f32's range: the default (which reports that value).
        fn amg_host_matrix<T: Scalar>(
            &self,
            m: &Csr<f64>,
            layout: Layout,
        ) -> Result<CudaMatrix<T>> {
            if super::device_layout_fits::<T>(m, layout) {
                if let Some(out) = self.setup_to_matrix::<T>(&self.setup_upload(m)?, layout)? {
                    return Ok(out);
                }
            }
            self.upload_matrix(&super::convert::<T>(m)?, layout)
        }

        /// One fused pass over a CSR or SELL matrix; BSR takes the default.
        fn amg_residual<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            b: &CudaVector<T>,
            x: &CudaVector<T>,
            r: &mut CudaVector<T>,
        ) -> Result<()> {
            if self.amg_sweep(a, T::zero(), b, x, None, r)? {
                Ok(())
            } else {
                default_residual(self, a, b, x, r)
            }
        }

        /// Block 1 over a CSR or SELL matrix: one fused pass writing the new
        /// iterate into `scratch`, then a copy back into x (x may be the
        /// caller's vector, and a recorded iteration keeps its buffers, so
        /// the two are not swapped). Blocks of 2 and BSR take the default.
        fn amg_jacobi<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            dinv: &CudaMatrix<T>,
            diag: Option<&CudaVector<T>>,
            block: usize,
            omega: T,
            b: &CudaVector<T>,
            x: &mut CudaVector<T>,
            scratch: &mut CudaVector<T>,
        ) -> Result<()> {
            if let (1, Some(d)) = (block, diag) {
                // d already holds omega D^-1
                if self.amg_sweep(a, T::one(), b, x, Some(d), scratch)? {
                    return self.copy(scratch, x);
                }
            }
            default_jacobi(self, a, dinv, omega, b, x, scratch)
        }

        /// One fused pass over a CSR or SELL matrix; BSR takes the default.
        fn amg_jacobi_into<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            d: &CudaVector<T>,
            b: &CudaVector<T>,
            x: &CudaVector<T>,
            out: &mut CudaVector<T>,
            tmp: &mut CudaVector<T>,
        ) -> Result<()> {
            if self.amg_sweep(a, T::one(), b, x, Some(d), out)? {
                return Ok(());
            }
            default_jacobi_into(self, a, d, b, x, out, tmp)
        }

        /// With a point diagonal (block 1) over a CSR or SELL matrix: one
        /// fused pass; otherwise the default.
        fn amg_chebyshev_start<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            dinv: &CudaMatrix<T>,
            diag: Option<&CudaVector<T>>,
            alpha: T,
            b: &CudaVector<T>,
            x: &CudaVector<T>,
            r: &mut CudaVector<T>,
            d: &mut CudaVector<T>,
            zero: bool,
        ) -> Result<()> {
            if let Some(dg) = diag {
                let pass = ChebPass::Start {
                    b,
                    x,
                    d: &mut *d,
                    zero,
                };
                if self.amg_chebyshev(a, dg, [alpha, T::zero()], r, pass)? {
                    return Ok(());
                }
            }
            default_chebyshev_start(self, a, dinv, alpha, b, x, r, d, zero)
        }

        /// With a point diagonal (block 1) over a CSR or SELL matrix: one
        /// fused pass; otherwise the default.
        fn amg_chebyshev_step<T: Scalar>(
            &self,
            a: &CudaMatrix<T>,
            dinv: &CudaMatrix<T>,
            diag: Option<&CudaVector<T>>,
            coef: [T; 2],
            r: &mut CudaVector<T>,
            d_old: &CudaVector<T>,
            d_new: &mut CudaVector<T>,
            x: &mut CudaVector<T>,
            [pending, zero]: [bool; 2],
        ) -> Result<()> {
            if let Some(dg) = diag {
                let pass = ChebPass::Step {
                    d_old,
                    d_new: &mut *d_new,
                    x: &mut *x,
                    pending,
                    zero,
                };
                if self.amg_chebyshev(a, dg, coef, r, pass)? {
                    return Ok(());
                }
            }
            default_chebyshev_step(self, a, dinv, coef, r, d_old, d_new, x, pending, zero)
        }

        /// One pass on the device.
        fn amg_convert<S: Scalar, T: Scalar>(
            &self,
            x: &CudaVector<S>,
            y: &mut CudaVector<T>,
        ) -> Result<()> {
            self.convert_precision(x, y)
        }

        /// One fused in-place pass over `scaled` where `select` has one
        /// entry per row (block 1) and `scaled` is CSR or SELL (from zero:
        /// x zeroed, then the pass without reading `scaled`). Blocks of 2
        /// and BSR take the default.
        fn amg_gs_color<T: Scalar>(
            &self,
            scaled: &CudaMatrix<T>,
            select: &CudaMatrix<T>,
            scatter: &CudaMatrix<T>,
            b: &CudaVector<T>,
            x: &mut CudaVector<T>,
            t: &mut CudaVector<T>,
            zero: bool,
        ) -> Result<()> {
            if self.amg_gs_color(scaled, select, b, x, zero)? {
                return Ok(());
            }
            default_gs_color(self, scaled, select, scatter, b, x, t, zero)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_core::Backend;
    use gpuq_sparse::generators::laplace3d;
    use gpuq_sparse::Layout;
    use proptest::prelude::*;

    /// A test system with `bs` unknowns per node: 3D or 2D elasticity, or a
    /// 3D Laplacian, of a size growing with `k`.
    fn block_system(k: usize, bs: usize) -> Csr<f64> {
        match bs {
            3 => gpuq_sparse::elasticity3d::elasticity3d::<f64>(k).unwrap().0,
            2 => {
                gpuq_sparse::elasticity::elasticity2d::<f64>(k + 2)
                    .unwrap()
                    .0
            }
            _ => laplace3d::<f64>(k + 1),
        }
    }

    /// An n x n matrix whose row i holds its diagonal and 0 to 11 other
    /// entries at pseudo-random columns (rows of varied length, so SELL
    /// pads and sorts).
    fn varied_rows(n: usize, seed: u64) -> Csr<f64> {
        let mut ptr = vec![0];
        let (mut col, mut val) = (Vec::new(), Vec::new());
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for i in 0..n {
            let mut cols: Vec<u32> = (0..next() % 12).map(|_| (next() % n) as u32).collect();
            cols.push(i as u32);
            cols.sort_unstable();
            cols.dedup();
            for &j in &cols {
                col.push(j);
                val.push(if j as usize == i {
                    8.0
                } else {
                    -((next() % 97) as f64) / 97.0
                });
            }
            ptr.push(col.len());
        }
        Csr::try_new(n, n, ptr, col, val).unwrap()
    }

    fn vector(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.7548).sin()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The fused Rayon Chebyshev start and step give the default bodies'
        /// r, d and x to rounding, for every flag, CSR and BSR.
        #[test]
        fn fused_chebyshev_matches_defaults(
            k in 2usize..7,
            zero: bool,
            pending: bool,
            x_zero: bool,
            bsr: bool,
            alpha in 0.1f64..2.0,
            beta in -1.0f64..1.0,
        ) {
            let be = CpuBackend::new();
            let a = laplace3d::<f64>(k);
            let n = a.nrows();
            let layout = if bsr && n % 2 == 0 { Layout::Bsr { b: 2 } } else { Layout::Csr };
            let am = be.upload_matrix(&a, layout).unwrap();
            let dv: Vec<f64> = (0..n).map(|i| 1.0 / (6.0 + (i % 3) as f64)).collect();
            let ident: Vec<u32> = (0..n as u32).collect();
            let dcsr = Csr::try_new(n, n, (0..=n).collect(), ident, dv.clone()).unwrap();
            let dinv = be.upload_matrix(&dcsr, Layout::Csr).unwrap();
            let diag = be.upload(&dv).unwrap();
            let (b, x0) = (be.upload(&vector(n, 0.3)).unwrap(), be.upload(&vector(n, 1.9)).unwrap());
            // start: fused against default
            let (mut r1, mut d1) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
            let (mut r2, mut d2) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
            be.amg_chebyshev_start(&am, &dinv, Some(&diag), alpha, &b, &x0, &mut r1, &mut d1, zero).unwrap();
            default_chebyshev_start(&be, &am, &dinv, alpha, &b, &x0, &mut r2, &mut d2, zero).unwrap();
            let close = |p: &CpuVector<f64>, q: &CpuVector<f64>| {
                p.as_slice().iter().zip(q.as_slice()).all(|(u, v)| (u - v).abs() <= 1e-13 * (1.0 + u.abs()))
            };
            prop_assert!(close(&r1, &r2) && close(&d1, &d2));
            // step: fused against default
            let (mut x1, mut x2) = (x0.clone(), x0.clone());
            let (mut n1, mut n2) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
            let flags = [pending, x_zero];
            be.amg_chebyshev_step(&am, &dinv, Some(&diag), [alpha, beta], &mut r1, &d1, &mut n1, &mut x1, flags).unwrap();
            default_chebyshev_step(&be, &am, &dinv, [alpha, beta], &mut r2, &d2, &mut n2, &mut x2, pending, x_zero).unwrap();
            prop_assert!(close(&r1, &r2) && close(&n1, &n2) && close(&x1, &x2));
        }

        /// The fused out-of-place Jacobi sweep gives the default body's
        /// iterate to rounding, over CSR, BSR and SELL (the default), and
        /// leaves x alone.
        #[test]
        fn fused_jacobi_into_matches_the_default(k in 2usize..7, layout in 0usize..3) {
            let be = CpuBackend::new();
            let a = laplace3d::<f64>(k);
            let n = a.nrows();
            let layout = match layout {
                0 => Layout::Csr,
                1 if n % 2 == 0 => Layout::Bsr { b: 2 },
                _ => Layout::Sell { c: 4, sigma: 1 },
            };
            let am = be.upload_matrix(&a, layout).unwrap();
            let dv: Vec<f64> = (0..n).map(|i| 0.9 / (6.0 + (i % 3) as f64)).collect();
            let d = be.upload(&dv).unwrap();
            let (b, x) = (be.upload(&vector(n, 0.3)).unwrap(), be.upload(&vector(n, 1.9)).unwrap());
            let (mut o1, mut o2, mut t) = (be.zeros(n).unwrap(), be.zeros(n).unwrap(), be.zeros(n).unwrap());
            be.amg_jacobi_into(&am, &d, &b, &x, &mut o1, &mut t).unwrap();
            default_jacobi_into(&be, &am, &d, &b, &x, &mut o2, &mut t).unwrap();
            let ax = a.mul_vec(x.as_slice()).unwrap();
            let xs = x.as_slice();
            for i in 0..n {
                let want = xs[i] + dv[i] * (b.as_slice()[i] - ax[i]);
                prop_assert!((o1.as_slice()[i] - want).abs() <= 1e-13 * (1.0 + want.abs()));
                prop_assert!((o2.as_slice()[i] - want).abs() <= 1e-13 * (1.0 + want.abs()));
            }
            prop_assert_eq!(xs, &vector(n, 1.9)[..]);
        }

        /// The fused block-Jacobi sweep gives the default body's iterate to
        /// rounding for blocks of 1, 2 and 3, A and D^-1 in CSR or BSR.
        #[test]
        fn fused_block_jacobi_matches_the_default(k in 2usize..5, bs in 1usize..4, bsr: bool) {
            let be = CpuBackend::new();
            let a = block_system(k, bs);
            let n = a.nrows();
            let layout = if bsr { Layout::Bsr { b: bs } } else { Layout::Csr };
            let am = be.upload_matrix(&a, layout).unwrap();
            let dinv_csr = BlockDiagonal::of(&a, bs, false).inverse().unwrap().to_csr().unwrap();
            let dinv = be.upload_matrix(&dinv_csr, layout).unwrap();
            let b = be.upload(&vector(n, 0.3)).unwrap();
            let (mut x1, mut x2) = (be.upload(&vector(n, 1.9)).unwrap(), be.upload(&vector(n, 1.9)).unwrap());
            let (mut s1, mut s2) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
            be.amg_jacobi(&am, &dinv, None, bs, 0.7, &b, &mut x1, &mut s1).unwrap();
            default_jacobi(&be, &am, &dinv, 0.7, &b, &mut x2, &mut s2).unwrap();
            for (p, q) in x1.as_slice().iter().zip(x2.as_slice()) {
                prop_assert!((p - q).abs() <= 1e-12 * (1.0 + q.abs()), "{} vs {}", p, q);
            }
            prop_assert!(x1.as_slice() != &vector(n, 1.9)[..]);
        }

        /// Over SELL (slices of 1 to 16 rows, in order or sorted within
        /// windows, several tasks) the fused residual, Chebyshev start and
        /// step and Jacobi-into give CSR's results bit for bit, on rows of
        /// varied length.
        #[test]
        fn fused_kernels_over_sell_equal_csr(
            n in 1usize..4000,
            seed in 0u64..1000,
            c_log in 0u32..5,
            sorted: bool,
            zero: bool,
            pending: bool,
        ) {
            let be = CpuBackend::new();
            let a = varied_rows(n, seed);
            let c = 1usize << c_log;
            let sigma = if sorted { 8 * c } else { 1 };
            let csr = be.upload_matrix(&a, Layout::Csr).unwrap();
            let sell = be.upload_matrix(&a, Layout::Sell { c, sigma }).unwrap();
            let dv: Vec<f64> = (0..n).map(|i| 0.9 / (6.0 + (i % 3) as f64)).collect();
            let (d, b, x0) = (be.upload(&dv).unwrap(), be.upload(&vector(n, 0.3)).unwrap(), be.upload(&vector(n, 1.9)).unwrap());
            let dinv = be.upload_matrix(&Csr::try_new(n, n, (0..=n).collect(), (0..n as u32).collect(), dv.clone()).unwrap(), Layout::Csr).unwrap();
            let run = |m: &CpuMatrix<f64>| {
                let (mut r, mut dir, mut new, mut x) = (be.zeros(n).unwrap(), be.zeros(n).unwrap(), be.zeros(n).unwrap(), x0.clone());
                let mut res = be.zeros(n).unwrap();
                be.amg_residual(m, &b, &x0, &mut res).unwrap();
                be.amg_chebyshev_start(m, &dinv, Some(&d), 0.7, &b, &x0, &mut r, &mut dir, zero).unwrap();
                be.amg_chebyshev_step(m, &dinv, Some(&d), [0.4, -0.3], &mut r, &dir, &mut new, &mut x, [pending, zero]).unwrap();
                let (mut out, mut t) = (be.zeros(n).unwrap(), be.zeros(n).unwrap());
                be.amg_jacobi_into(m, &d, &b, &x0, &mut out, &mut t).unwrap();
                [res, r, dir, new, x, out].map(|v| v.as_slice().to_vec())
            };
            let (want, got) = (run(&csr), run(&sell));
            prop_assert_eq!(&got, &want);
            // and CSR's are the products themselves
            let ax = a.mul_vec(x0.as_slice()).unwrap();
            for i in 0..n {
                prop_assert!((want[0][i] - (b.as_slice()[i] - ax[i])).abs() <= 1e-12 * (1.0 + ax[i].abs()));
            }
        }

        /// The CPU cycle's layout of a scalar level: SELL-8 in order for even
        /// rows, sorted within windows for varied rows, CSR for a few dense
        /// rows; block levels and other requests as asked.
        #[test]
        fn cpu_cycle_layouts_follow_padding(k in 3usize..6, seed in 0u64..50) {
            let be = CpuBackend::new();
            let layout = |a: Csr<f64>, block: usize| {
                be.amg_cycle_layout(Layout::Csr, &LevelMatrix::from_host(a), block).unwrap()
            };
            let sell = |sigma| Layout::Sell { c: CPU_SLICE, sigma };
            // rows of three entries each (a periodic chain)
            let n = 100 * k;
            let mut cols: Vec<u32> = Vec::new();
            for i in 0..n {
                let mut r = [(i + n - 1) % n, i, (i + 1) % n].map(|j| j as u32);
                r.sort_unstable();
                cols.extend(r);
            }
            let chain = Csr::try_new(n, n, (0..=n).map(|i| 3 * i).collect(), cols, vec![1.0; 3 * n]);
            prop_assert_eq!(layout(chain.unwrap(), 1), sell(1));
            prop_assert_eq!(layout(laplace3d::<f64>(k), 3), Layout::Csr);
            prop_assert_eq!(layout(varied_rows(3000, seed), 1), sell(64));
            // one dense row per 64: sorted slices still mostly padding
            let n = 1024;
            let mut ptr = vec![0];
            let mut col = Vec::new();
            for i in 0..n {
                if i % 64 == 0 {
                    col.extend(0..n as u32);
                } else {
                    col.push(i as u32);
                }
                ptr.push(col.len());
            }
            let val = vec![1.0; col.len()];
            prop_assert_eq!(layout(Csr::try_new(n, n, ptr, col, val).unwrap(), 1), Layout::Csr);
            let other = Layout::Bsr { b: 2 };
            let fine = LevelMatrix::from_host(laplace3d::<f64>(k));
            prop_assert_eq!(be.amg_cycle_layout(other, &fine, 1).unwrap(), other);
        }

        /// The fused CPU colour update gives the default's iterate to
        /// rounding for blocks of 1, 2 and 3, from x and from zero.
        #[test]
        fn fused_gs_color_matches_the_default(k in 2usize..5, bs in 1usize..4, zero: bool) {
            use crate::coloring::{color_sweeps, greedy};
            let be = CpuBackend::new();
            let a = block_system(k, bs);
            let n = a.nrows();
            let dinv = BlockDiagonal::of(&a, bs, false).inverse().unwrap();
            let sweeps = color_sweeps(&a, bs, &dinv, &greedy(&a, bs).unwrap()).unwrap();
            let b = be.upload(&vector(n, 0.3)).unwrap();
            let (mut x1, mut x2) = (be.upload(&vector(n, 1.9)).unwrap(), be.upload(&vector(n, 1.9)).unwrap());
            for s in &sweeps {
                let up = |m: &Csr<f64>| be.upload_matrix(m, Layout::Csr).unwrap();
                let (sc, se, st) = (up(&s.scaled), up(&s.select), up(&s.scatter));
                let mut t = be.zeros(s.scaled.nrows()).unwrap();
                be.amg_gs_color(&sc, &se, &st, &b, &mut x1, &mut t, zero).unwrap();
                default_gs_color(&be, &sc, &se, &st, &b, &mut x2, &mut t, zero).unwrap();
                for (p, q) in x1.as_slice().iter().zip(x2.as_slice()) {
                    prop_assert!((p - q).abs() <= 1e-12 * (1.0 + q.abs()), "{} vs {}", p, q);
                }
            }
        }
    }
}
