//! Resident sparse matrices and SpMV on the device: the [`SparseBackend`]
//! implementation of [`CudaBackend`].

use crate::backend::{dev, CudaBackend, THREADS};
use crate::blas1::{kernel, Dest, GridReduce, ScalarArg};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, LaunchArgs, PushKernelArg};
use gpuq_core::{check_same_len, scalars_as_bytes, Backend, Error, FusedDot, Result, Scalar};
use gpuq_sparse::{Bsr, Csr, DeviceMatrix, Layout, Sell, SparseBackend};
use std::marker::PhantomData;
use std::ops::Range;

/// The device arrays of a matrix, per layout. Index arrays are `u64` (pointers)
/// and `u32` (column indices, permutation), stored as bytes.
pub(crate) enum Arrays {
    Csr {
        row_ptr: CudaSlice<u8>,
        col: CudaSlice<u8>,
        val: CudaSlice<u8>,
        lanes_log2: u32,
    },
    Sell {
        slice_ptr: CudaSlice<u8>,
        col: CudaSlice<u8>,
        val: CudaSlice<u8>,
        perm: Option<CudaSlice<u8>>,
        c: u32,
    },
    Bsr {
        brow_ptr: CudaSlice<u8>,
        bcol: CudaSlice<u8>,
        blocks: CudaSlice<u8>,
        b: u32,
    },
}

/// A sparse matrix resident on the device, in the layout it was uploaded with.
pub struct CudaMatrix<T> {
    pub(crate) arrays: Arrays,
    pub(crate) shape: (usize, usize),
    nnz: usize,
    layout: Layout,
    _t: PhantomData<T>,
}

impl<T> CudaMatrix<T> {
    /// A matrix over arrays already on the device.
    pub(crate) fn from_arrays(
        arrays: Arrays,
        shape: (usize, usize),
        nnz: usize,
        layout: Layout,
    ) -> Self {
        CudaMatrix {
            arrays,
            shape,
            nnz,
            layout,
            _t: PhantomData,
        }
    }
}

impl<T: Scalar> DeviceMatrix for CudaMatrix<T> {
    fn shape(&self) -> (usize, usize) {
        self.shape
    }
    fn nnz(&self) -> usize {
        self.nnz
    }
    fn layout(&self) -> Layout {
        self.layout
    }
}

/// Offsets as the device's 64-bit integers, in native byte order: a view of
/// the slice itself where `usize` is 64 bits wide (no copy), else a copy.
fn u64_bytes(v: &[usize]) -> std::borrow::Cow<'_, [u8]> {
    #[cfg(target_pointer_width = "64")]
    {
        // SAFETY: usize is 8 bytes here, with u64's layout and no padding, so
        // every byte is initialised; u8 has alignment 1.
        std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        std::borrow::Cow::Owned(v.iter().flat_map(|&p| (p as u64).to_ne_bytes()).collect())
    }
}

/// The bytes of 32-bit indices in native byte order (a view, no copy).
fn u32_bytes(v: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding, so every byte is initialised; u8 has
    // alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// log2 of the lanes per row of the CSR kernel: the largest power of two not above
/// max(mean / 4, min(mean, 4)) for the mean row length, between 1 and 32 lanes.
///
/// Short rows get a lane per entry up to 4; longer ones at least 4 entries per lane
/// (the kernel's unrolled batch). A warp of the grid-stride kernel takes its rows one
/// group at a time, each a chain of dependent loads (row pointers, then columns and
/// values, then the gathered x), so the rows in flight, not the bytes per row, bound
/// a long-row matrix: with 32 lanes for the 34-entry rows of an AMG coarse operator
/// (716,728 rows) a pass ran at a quarter of the copy bandwidth on the H200.
pub(crate) fn csr_lanes_log2(nnz: usize, nrows: usize) -> u32 {
    let mean = nnz / nrows.max(1);
    (mean / 4).max(mean.min(4)).max(1).ilog2().min(5)
}

impl CudaBackend {
    /// Blocks of [`THREADS`] threads for one thread per item (no grid-stride loop).
    fn blocks_for(&self, items: usize) -> Result<u32> {
        u32::try_from(items.div_ceil(THREADS as usize).max(1)).map_err(|_| {
            Error::InvalidArgument(format!("{items} threads exceed one launch's grid"))
        })
    }
}

impl SparseBackend for CudaBackend {
    type Matrix<T: Scalar> = CudaMatrix<T>;

    /// One device-to-device copy of nnz values over the CSR's values.
    fn set_csr_values<T: Scalar>(
        &self,
        a: &mut CudaMatrix<T>,
        values: &CudaVector<T>,
    ) -> Result<()> {
        let Arrays::Csr { val, .. } = &mut a.arrays else {
            return Err(Error::InvalidArgument(
                "set_csr_values: the matrix is not stored as CSR".into(),
            ));
        };
        gpuq_core::check_same_len("set_csr_values", a.nnz, values.len)?;
        let bytes = a.nnz * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        if val.len() < bytes || values.buf.len() < bytes {
            return Err(Error::Device(
                "set_csr_values: a buffer is shorter than nnz values".into(),
            ));
        }
        self.inner
            .stream
            .memcpy_dtod(&values.buf.slice(0..bytes), &mut val.slice_mut(0..bytes))
            .map_err(dev("set_csr_values"))?;
        self.inner.stats.launch("memcpy_dtod");
        Ok(())
    }

    fn upload_matrix<T: Scalar>(&self, a: &Csr<T>, layout: Layout) -> Result<CudaMatrix<T>> {
        let arrays = match layout {
            Layout::Csr => Arrays::Csr {
                row_ptr: self.upload_bytes(&u64_bytes(a.row_ptr()))?,
                col: self.upload_bytes(u32_bytes(a.col_idx()))?,
                val: self.upload_bytes(scalars_as_bytes(a.values()))?,
                lanes_log2: csr_lanes_log2(a.nnz(), a.nrows()),
            },
            Layout::Sell { c, sigma } => {
                let s = Sell::from_csr(a, c, sigma)?;
                let c = u32::try_from(c)
                    .map_err(|_| Error::InvalidArgument(format!("slice height {c} too large")))?;
                let perm = if sigma == 1 {
                    None
                } else {
                    Some(self.upload_bytes(u32_bytes(s.perm()))?)
                };
                Arrays::Sell {
                    slice_ptr: self.upload_bytes(&u64_bytes(s.slice_ptr()))?,
                    col: self.upload_bytes(u32_bytes(s.col_idx()))?,
                    val: self.upload_bytes(scalars_as_bytes(s.values()))?,
                    perm,
                    c,
                }
            }
            Layout::Bsr { b } => {
                let m = Bsr::from_csr(a, b)?;
                Arrays::Bsr {
                    brow_ptr: self.upload_bytes(&u64_bytes(m.block_row_ptr()))?,
                    bcol: self.upload_bytes(u32_bytes(m.block_col()))?,
                    blocks: self.upload_bytes(scalars_as_bytes(m.values()))?,
                    b: b as u32,
                }
            }
        };
        Ok(CudaMatrix {
            arrays,
            shape: a.shape(),
            nnz: a.nnz(),
            layout,
            _t: PhantomData,
        })
    }

    fn spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &CudaMatrix<T>,
        x: &CudaVector<T>,
        beta: T,
        y: &mut CudaVector<T>,
    ) -> Result<()> {
        let (m, n) = a.shape;
        check_same_len("spmv (x vs columns)", n, x.len)?;
        check_same_len("spmv (y vs rows)", m, y.len)?;
        if m == 0 {
            return Ok(());
        }
        self.launch_spmv(alpha, a, x, beta, y, None)
    }

    /// y = A x and x^H y with the dot product fused into the SpMV kernel (CSR and
    /// SELL; BSR falls back to an SpMV and a dot): the dot costs no extra pass over
    /// memory, and its reduction is deterministic like the BLAS-1 ones.
    fn spmv_dotc<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        x: &CudaVector<T>,
        y: &mut CudaVector<T>,
    ) -> Result<T> {
        let m = check_square("spmv_dotc", a, x, y)?;
        if m == 0 {
            return Ok(T::zero());
        }
        if matches!(a.arrays, Arrays::Bsr { .. }) {
            self.spmv(T::one(), a, x, T::zero(), y)?;
            return self.dotc(x, y);
        }
        self.reduce_with(|reduce| {
            let dot = Some((&x.buf, reduce));
            self.launch_spmv(T::one(), a, x, T::zero(), y, dot)
        })
    }

    /// Fused into the CSR and SELL kernels (their last block writes the slot;
    /// nothing waits); BSR computes y only and returns `false`.
    fn spmv_dot<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        x: &CudaVector<T>,
        y: &mut CudaVector<T>,
        dot: FusedDot<'_, Self, T>,
    ) -> Result<bool> {
        let m = check_square("spmv_dot", a, x, y)?;
        dot.check("spmv_dot (w vs rows)", m)?;
        if m == 0 || matches!(a.arrays, Arrays::Bsr { .. }) {
            self.spmv(T::one(), a, x, T::zero(), y)?;
            return Ok(false);
        }
        let at = dot.slot * std::mem::size_of::<T>();
        self.reduce_into::<T>(
            |reduce| {
                let dot = Some((&dot.w.buf, reduce));
                self.launch_spmv(T::one(), a, x, T::zero(), y, dot)
            },
            Dest::Device(&mut dot.sc.buf, at),
        )?;
        Ok(true)
    }
}

impl CudaBackend {
    /// Blocks of the grid-stride SpMV kernels: one thread (CSR: one sub-warp group)
    /// per row up to the device-filling cap of [`CudaBackend::grid_blocks`].
    fn spmv_blocks<T>(&self, a: &CudaMatrix<T>) -> u32 {
        match &a.arrays {
            Arrays::Csr { lanes_log2, .. } => self.grid_blocks(a.shape.0 << lanes_log2),
            _ => self.grid_blocks(a.shape.0),
        }
    }

    /// y = y + alpha A x over the row ranges `runs` (which must hold every
    /// non-empty row of A; every row where `None`) for a CSR `a` of any
    /// shape, and with `dot` also `sc[slot] += w^H (alpha A x)`, the dot of
    /// the increment (`dot.w` of A's rows' length): one CSR kernel per two
    /// runs (the second after the first: the kernel jumps over the rows
    /// between them), which at A's empty rows neither reads nor writes y nor
    /// reads w, its last block adding the launch's sum to the slot on the
    /// device (nothing waits). Returns `false`, doing nothing, for the other layouts. The
    /// ghost block of a distributed product, whose non-empty rows are a few
    /// runs (a slab's first and last planes): O(rows in the runs + nnz).
    pub fn spmv_add_rows<T: Scalar>(
        &self,
        alpha: T,
        a: &CudaMatrix<T>,
        x: &CudaVector<T>,
        y: &mut CudaVector<T>,
        dot: Option<FusedDot<'_, Self, T>>,
        runs: Option<&[Range<usize>]>,
    ) -> Result<bool> {
        let (m, n) = a.shape;
        check_same_len("spmv_add_rows (x vs columns)", n, x.len)?;
        check_same_len("spmv_add_rows (y vs rows)", m, y.len)?;
        if let Some(d) = &dot {
            d.check("spmv_add_rows (w vs rows)", m)?;
        }
        let every = 0..m;
        let runs = runs.unwrap_or(std::slice::from_ref(&every));
        if let Some(bad) = runs.iter().find(|r| r.start > r.end || r.end > m) {
            return Err(gpuq_core::Error::InvalidArgument(format!(
                "spmv_add_rows: row range {bad:?} outside the {m} rows"
            )));
        }
        let Arrays::Csr {
            row_ptr,
            col,
            val,
            lanes_log2,
        } = &a.arrays
        else {
            return Ok(false);
        };
        let f = self.function(&kernel::<T>("spmv_csr"))?;
        let size = std::mem::size_of::<T>();
        let (al, one) = (ScalarArg::of(alpha), ScalarArg::of(T::one()));
        // the CSR kernel's beta mode 2: an increment
        let (mode, null) = (2u32, 0u64);
        // A pair of runs (or one) per launch: the rows of `r` and, where
        // given, of `next`, the kernel jumping over the rows between them.
        let launch = |(r, next): (&Range<usize>, Option<&Range<usize>>),
                      y: &mut CudaVector<T>,
                      w: Option<(&CudaSlice<u8>, &GridReduce)>|
         -> Result<()> {
            let end = next.map_or(r.end, |n| n.end);
            let (split, jump) = (r.len(), next.map_or(0, |n| n.start - r.end));
            let rows = split + next.map_or(0, |n| n.len());
            let rp = row_ptr.slice(8 * r.start..8 * (end + 1));
            let mut yv = y.buf.slice_mut(size * r.start..size * end);
            let wv = w.map(|(w, reduce)| (w.slice(size * r.start..size * end), reduce));
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&rows).arg(lanes_log2);
            al.push(&mut b);
            one.push(&mut b);
            b.arg(&mode)
                .arg(&rp)
                .arg(col)
                .arg(val)
                .arg(&x.buf)
                .arg(&mut yv);
            match &wv {
                Some((w, reduce)) => {
                    b.arg(w);
                    reduce.push(&mut b);
                    b.arg(&reduce.out);
                }
                None => {
                    b.arg(&null).arg(&null).arg(&null).arg(&null);
                }
            }
            b.arg(&split).arg(&jump);
            // SAFETY: arguments match `spmv_csr_*` in its increment mode:
            // the views hold the rows from the first run's start to the last
            // one's end + 1 row pointers (absolute offsets into the whole col
            // and val) and those rows of y and w, of which the kernel touches
            // the runs' (`split`, `jump`); x has A's columns; the scratch has
            // one partial per block, the counter and the result.
            unsafe { b.launch(Self::cfg(self.grid_blocks(rows << lanes_log2))) }
                .map_err(dev("spmv_csr"))?;
            self.inner.stats.launch("spmv_csr");
            Ok(())
        };
        let mut dot = dot;
        for unit in launch_units(runs) {
            match dot.as_mut() {
                Some(FusedDot { w, sc, slot }) => {
                    // `dot.check` bounded the slot by sc's length.
                    let at = *slot * size;
                    self.reduce_into::<T>(
                        |reduce| launch(unit, y, Some((&w.buf, reduce))),
                        Dest::Device(&mut sc.buf, at),
                    )?;
                }
                None => launch(unit, y, None)?,
            }
        }
        Ok(true)
    }

    /// Launches the SpMV kernel of `a`'s layout; with `dot = (w, reduce)`, the
    /// CSR and SELL kernels also reduce w^H y through `reduce` into its `out`
    /// (the caller checked that `a` is square, that w has its rows, and that
    /// `dot` is not used with BSR).
    fn launch_spmv<T: Scalar>(
        &self,
        alpha: T,
        a: &CudaMatrix<T>,
        x: &CudaVector<T>,
        beta: T,
        y: &mut CudaVector<T>,
        dot: Option<(&CudaSlice<u8>, &GridReduce)>,
    ) -> Result<()> {
        let m = a.shape.0;
        let (al, be) = (ScalarArg::of(alpha), ScalarArg::of(beta));
        // The kernels' beta mode (1: beta zero, 0: general; the CSR kernel's
        // increment mode 2 is `spmv_add_rows`').
        let beta_zero = u32::from(beta.is_zero_value());
        let null = 0u64;
        let blocks = self.spmv_blocks(a);
        match &a.arrays {
            Arrays::Csr {
                row_ptr,
                col,
                val,
                lanes_log2,
            } => {
                let f = self.function(&kernel::<T>("spmv_csr"))?;
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&m).arg(lanes_log2);
                al.push(&mut b);
                be.push(&mut b);
                b.arg(&beta_zero)
                    .arg(row_ptr)
                    .arg(col)
                    .arg(val)
                    .arg(&x.buf)
                    .arg(&mut y.buf);
                push_dot(&mut b, &dot, &null);
                // Every row: no jump.
                let (split, jump) = (m, 0usize);
                b.arg(&split).arg(&jump);
                // SAFETY: arguments match `spmv_csr_*` (a null `w` means no dot);
                // the arrays describe a validated CSR matrix of shape (m, n), x and
                // y have n and m elements, w m; the scratch has one partial per
                // block of the grid, the counter and the result.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("spmv_csr"))?;
                self.inner.stats.launch("spmv_csr");
            }
            Arrays::Sell {
                slice_ptr,
                col,
                val,
                perm,
                c,
            } => {
                let f = self.function(&kernel::<T>("spmv_sell"))?;
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&m).arg(c);
                al.push(&mut b);
                be.push(&mut b);
                b.arg(&beta_zero).arg(slice_ptr).arg(col).arg(val);
                match perm {
                    Some(p) => b.arg(p),
                    None => b.arg(&null),
                };
                b.arg(&x.buf).arg(&mut y.buf);
                push_dot(&mut b, &dot, &null);
                // SAFETY: arguments match `spmv_sell_*` (a null perm means identity,
                // a null w no dot); the arrays come from `Sell::from_csr` of a
                // validated matrix; as for CSR otherwise.
                unsafe { b.launch(Self::cfg(blocks)) }.map_err(dev("spmv_sell"))?;
                self.inner.stats.launch("spmv_sell");
            }
            Arrays::Bsr {
                brow_ptr,
                bcol,
                blocks: vals,
                b: bs,
            } => {
                let f = self.function(&kernel::<T>("spmv_bsr"))?;
                let mut b = self.inner.stream.launch_builder(&f);
                b.arg(&m).arg(bs);
                al.push(&mut b);
                be.push(&mut b);
                b.arg(&beta_zero)
                    .arg(brow_ptr)
                    .arg(bcol)
                    .arg(vals)
                    .arg(&x.buf)
                    .arg(&mut y.buf);
                // SAFETY: arguments match `spmv_bsr_*`; the arrays come from
                // `Bsr::from_csr` of a validated matrix; one thread per row.
                unsafe { b.launch(Self::cfg(self.blocks_for(m)?)) }.map_err(dev("spmv_bsr"))?;
                self.inner.stats.launch("spmv_bsr");
            }
        }
        Ok(())
    }
}

/// Errors unless `a` is square and x and y have its size (for the SpMVs with a
/// fused dot product, `op`); returns the size.
fn check_square<T>(
    op: &'static str,
    a: &CudaMatrix<T>,
    x: &CudaVector<T>,
    y: &CudaVector<T>,
) -> Result<usize> {
    let (m, n) = a.shape;
    if m != n {
        return Err(Error::shape(
            op,
            format!("a square matrix ({m} x {m})"),
            format!("{m} x {n}"),
        ));
    }
    check_same_len(op, n, x.len)?;
    check_same_len(op, m, y.len)?;
    Ok(m)
}

/// Pushes the SpMV kernels' last four arguments: `w`, the partials, the
/// counter and the result's address, or four nulls without a dot.
fn push_dot<'a>(
    b: &mut LaunchArgs<'a>,
    dot: &'a Option<(&CudaSlice<u8>, &GridReduce)>,
    null: &'a u64,
) {
    match dot {
        Some((w, reduce)) => {
            b.arg(*w);
            reduce.push(b);
            b.arg(&reduce.out);
        }
        None => {
            b.arg(null).arg(null).arg(null).arg(null);
        }
    }
}

/// The launches of [`CudaBackend::spmv_add_rows`] over `runs`: the non-empty
/// runs two at a time where the second starts after the first ends (the
/// kernel jumps over the rows between them), else one at a time.
fn launch_units(runs: &[Range<usize>]) -> Vec<(&Range<usize>, Option<&Range<usize>>)> {
    let mut units = Vec::new();
    let mut left = runs.iter().filter(|r| !r.is_empty()).peekable();
    while let Some(r) = left.next() {
        let next = left.next_if(|n| n.start >= r.end);
        units.push((r, next));
    }
    units
}

#[cfg(test)]
mod tests {
    use super::{csr_lanes_log2, launch_units};

    #[test]
    fn runs_are_launched_two_at_a_time_in_order() {
        let runs = [0..3, 5..7, 7..7, 9..10];
        let units = launch_units(&runs);
        assert_eq!(units, vec![(&(0..3), Some(&(5..7))), (&(9..10), None)]);
        // a run before the one it would follow goes on its own
        let back = [5..7, 0..3, 9..10];
        let units = launch_units(&back);
        assert_eq!(units, vec![(&(5..7), None), (&(0..3), Some(&(9..10)))]);
        assert!(launch_units(&[]).is_empty());
    }

    #[test]
    fn lanes_follow_the_mean_row_length() {
        assert_eq!(csr_lanes_log2(0, 0), 0);
        assert_eq!(csr_lanes_log2(7, 1), 2);
        assert_eq!(csr_lanes_log2(64, 2), 3);
        assert_eq!(csr_lanes_log2(34, 1), 3);
        assert_eq!(csr_lanes_log2(3, 1), 1);
        assert_eq!(csr_lanes_log2(12, 1), 2);
        assert_eq!(csr_lanes_log2(1000, 1), 5);
    }
}
