//! What keeps the AMG hierarchy on the device after its setup: the block
//! diagonals and rows of zeros of matrices the host never sees, their row
//! lengths, and their conversion into the cycle's matrices (CSR or SELL in
//! the cycle's precision) without a round trip through the host.

use crate::amg_setup::{SetupCsr, SetupVec};
use crate::backend::{dev, CudaBackend};
use crate::spmv::{csr_lanes_log2, Arrays, CudaMatrix};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, PushKernelArg};
use gpuq_core::{Error, Result, Scalar, ScalarKind};
use gpuq_sparse::Layout;

impl CudaBackend {
    /// `bytes` zeroed bytes on the device.
    fn resident_bytes(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.inner
            .stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| self.alloc_error("an AMG level matrix", bytes, e))
    }

    /// The stored entries of each row of a setup matrix: its row pointers
    /// downloaded (8 bytes per row) and differenced.
    pub fn setup_row_lengths(&self, a: &SetupCsr) -> Result<Vec<u32>> {
        let ptr = self.setup_get(&a.ptr, a.shape().0 + 1)?;
        Ok(ptr.windows(2).map(|w| (w[1] - w[0]) as u32).collect())
    }

    /// The bs x bs diagonal blocks of a setup matrix whose columns are
    /// numbered from `first` (0 for a whole matrix; a rank's first row for
    /// its rows with the level's columns: node k's block on the columns
    /// `first + bs k..`), row-major, bs^2 values per node; with `l1` the
    /// l1-Jacobi matrix's: each row's |a_ij| outside its block added to the
    /// diagonal. The host's `BlockDiagonal::of_rows` sums in its order
    /// (kernel `amg_block_diagonal`, one thread per row), left on the
    /// device. Errors when bs does not divide the rows. O(nnz) on the
    /// device.
    pub fn setup_block_diagonal_on(
        &self,
        a: &SetupCsr,
        (first, bs): (usize, usize),
        l1: bool,
    ) -> Result<SetupVec> {
        let n = a.shape().0;
        if bs == 0 || n % bs != 0 {
            return Err(Error::InvalidArgument(format!(
                "block size {bs} does not divide the {n} rows"
            )));
        }
        let mut blocks = self.setup_vec_zeros(n * bs)?;
        if n > 0 {
            let f = self.function("amg_block_diagonal")?;
            let mut l = self.inner.stream.launch_builder(&f);
            let l1 = u32::from(l1);
            l.arg(&n)
                .arg(&first)
                .arg(&bs)
                .arg(&l1)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&mut blocks.buf);
            // SAFETY: arguments match `amg_block_diagonal`; the matrix is a
            // validated setup CSR of n rows, blocks holds n bs zeros.
            unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }
                .map_err(dev("amg_block_diagonal"))?;
            self.inner.stats.launch("amg_block_diagonal");
        }
        Ok(blocks)
    }

    /// The inverse of each bs x bs block of `blocks` (row-major, bs^2
    /// values per node, on the device) by the host's Gauss-Jordan
    /// elimination (`gpuq_kernels::amg::invert_block`, the same values bit
    /// for bit; kernel `amg_block_inverse`, a thread per node), left on the
    /// device, and the first node whose block is singular or not finite
    /// (`None`: every block inverted). O(nodes bs^3) on the device, 8 bytes
    /// back. Errors when bs is 0 or above `MAX_SETUP_BLOCK`, or `blocks` is
    /// not whole blocks.
    pub fn setup_block_inverse(
        &self,
        blocks: &SetupVec,
        bs: usize,
    ) -> Result<(SetupVec, Option<usize>)> {
        let max = gpuq_kernels::amg::MAX_SETUP_BLOCK;
        if bs == 0 || bs > max || blocks.len() % (bs * bs) != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} block values are not blocks of {bs} x {bs} (1 to {max})",
                blocks.len()
            )));
        }
        let nodes = blocks.len() / (bs * bs);
        let mut inv = self.setup_vec_zeros(blocks.len())?;
        if nodes == 0 {
            return Ok((inv, None));
        }
        let mut singular = self.setup_put(&[u64::MAX])?;
        let f = self.function("amg_block_inverse")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&nodes)
            .arg(&bs)
            .arg(&blocks.buf)
            .arg(&mut inv.buf)
            .arg(&mut singular);
        // SAFETY: arguments match `amg_block_inverse`; blocks and inv hold
        // nodes bs^2 values, singular one u64.
        unsafe { l.launch(Self::cfg(self.grid_blocks(nodes))) }
            .map_err(dev("amg_block_inverse"))?;
        self.inner.stats.launch("amg_block_inverse");
        let first = self.setup_get_at(&singular, 0)?;
        Ok((inv, (first != u64::MAX).then_some(first as usize)))
    }

    /// The rows of a setup matrix that store only zeros (or nothing), in
    /// increasing order: kernel `amg_zero_rows` and 8 bytes back, then 4
    /// bytes per row where any row is found.
    pub fn setup_zero_rows(&self, a: &SetupCsr) -> Result<Vec<usize>> {
        let n = a.shape().0;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut flags = self.setup_zeros::<u32>(n)?;
        let mut found = self.setup_zeros::<u64>(1)?;
        let f = self.function("amg_zero_rows")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&n)
            .arg(&a.ptr)
            .arg(&a.val)
            .arg(&mut flags)
            .arg(&mut found);
        // SAFETY: arguments match `amg_zero_rows`; flags holds n values,
        // found one.
        unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("amg_zero_rows"))?;
        self.inner.stats.launch("amg_zero_rows");
        // Usually none: one 8-byte read instead of the flags.
        if self.setup_get(&found, 1)?[0] == 0 {
            return Ok(Vec::new());
        }
        let flags = self.setup_get(&flags, n)?;
        Ok(flags
            .iter()
            .enumerate()
            .filter(|(_, &z)| z != 0)
            .map(|(i, _)| i)
            .collect())
    }

    /// The plan of SELL-`c`-`sigma` for a setup matrix, made on the device
    /// as the host's [`gpuq_sparse::sell_plan`] makes it (the same order and
    /// offsets): the row order as u32 bytes (`None` for sigma = 1; kernel
    /// `sell_window_perm`, O(sigma) per row), the slice offsets as u64 bytes
    /// (`sell_slice_widths` and a device prefix sum) and the stored entries,
    /// padding included (one 8-byte read back). Errors on a bad c or sigma.
    fn setup_sell_plan(
        &self,
        a: &SetupCsr,
        c: usize,
        sigma: usize,
    ) -> Result<(Option<CudaSlice<u8>>, CudaSlice<u8>, usize)> {
        let n = a.shape().0;
        if c == 0 || sigma == 0 || (sigma != 1 && sigma % c != 0) {
            return Err(Error::InvalidArgument(format!(
                "SELL-{c}-{sigma}: c must be at least 1 and sigma 1 or a multiple of c"
            )));
        }
        let perm = if sigma == 1 || n == 0 {
            None
        } else {
            let mut perm = self.resident_bytes(4 * n)?;
            let f = self.function("sell_window_perm")?;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&n).arg(&sigma).arg(&a.ptr).arg(&mut perm);
            // SAFETY: arguments match `sell_window_perm`; perm holds n u32.
            unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("sell_window_perm"))?;
            self.inner.stats.launch("sell_window_perm");
            Some(perm)
        };
        let slices = n.div_ceil(c);
        let mut widths = self.setup_zeros::<u64>(slices)?;
        if slices > 0 {
            let f = self.function("sell_slice_widths")?;
            let mut l = self.inner.stream.launch_builder(&f);
            let has_perm = u32::from(perm.is_some());
            l.arg(&n).arg(&c).arg(&has_perm);
            match &perm {
                Some(p) => l.arg(p),
                None => l.arg(&a.ptr),
            };
            l.arg(&a.ptr).arg(&mut widths);
            // SAFETY: arguments match `sell_slice_widths`; perm (when
            // has_perm) holds n rows, widths one value per slice.
            unsafe { l.launch(Self::cfg(self.grid_blocks(slices))) }
                .map_err(dev("sell_slice_widths"))?;
            self.inner.stats.launch("sell_slice_widths");
        }
        let mut slice_ptr = self.resident_bytes(8 * (slices + 1))?;
        self.setup_offsets_into(&widths, slices, &mut slice_ptr)?;
        let mut total = [0u8; 8];
        self.inner.stats.download(8);
        self.inner
            .stream
            .memcpy_dtoh(&slice_ptr.slice(8 * slices..8 * slices + 8), &mut total)
            .map_err(dev("download"))?;
        Ok((perm, slice_ptr, u64::from_ne_bytes(total) as usize))
    }

    /// The entries SELL-`c`-`sigma` stores for a setup matrix, padding
    /// included: the total of the plan [`CudaBackend::setup_to_matrix`] lays
    /// SELL out by (O(nrows sigma) on the device, 8 bytes back).
    pub fn setup_sell_stored(&self, a: &SetupCsr, c: usize, sigma: usize) -> Result<usize> {
        Ok(self.setup_sell_plan(a, c, sigma)?.2)
    }

    /// A setup matrix as one of the cycle's matrices in `layout` with values
    /// of `T`, built on the device: CSR by copying the row pointers and
    /// columns and converting the values (kernel `setup_to_csr_*`), SELL by
    /// the plan made on the device (`setup_sell_plan`) and one
    /// thread per row (`setup_to_sell_*`). `None` for BSR2 and complex `T`
    /// (the caller converts on the host). Cost: O(nnz + padding + nrows
    /// sigma) on the device, 8 bytes back for SELL.
    pub fn setup_to_matrix<T: Scalar>(
        &self,
        a: &SetupCsr,
        layout: Layout,
    ) -> Result<Option<CudaMatrix<T>>> {
        let suffix = match T::KIND {
            ScalarKind::F32 => "f32",
            ScalarKind::F64 => "f64",
            _ => return Ok(None),
        };
        let ((n, ncols), nnz) = (a.shape(), a.nnz());
        let size = std::mem::size_of::<T>();
        let arrays = match layout {
            Layout::Csr => {
                let mut ptr = self.resident_bytes(8 * (n + 1))?;
                let mut col = self.resident_bytes(4 * nnz)?;
                let mut val = self.resident_bytes(size * nnz)?;
                let name = if suffix == "f32" {
                    "setup_to_csr_f32"
                } else {
                    "setup_to_csr_f64"
                };
                let f = self.function(name)?;
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(&n)
                    .arg(&nnz)
                    .arg(&a.ptr)
                    .arg(&a.col)
                    .arg(&a.val)
                    .arg(&mut ptr)
                    .arg(&mut col)
                    .arg(&mut val);
                // SAFETY: arguments match `setup_to_csr_*`; the outputs hold
                // n + 1 row pointers, nnz columns and nnz values of T.
                unsafe { l.launch(Self::cfg(self.grid_blocks(nnz.max(n + 1)))) }
                    .map_err(dev(name))?;
                self.inner.stats.launch(name);
                Arrays::Csr {
                    row_ptr: ptr,
                    col,
                    val,
                    lanes_log2: csr_lanes_log2(nnz, n),
                }
            }
            Layout::Sell { c, sigma } => {
                let c32 = u32::try_from(c)
                    .map_err(|_| Error::InvalidArgument(format!("slice height {c} too large")))?;
                let (perm, slice_ptr, stored) = self.setup_sell_plan(a, c, sigma)?;
                let mut col = self.resident_bytes(4 * stored)?;
                let mut val = self.resident_bytes(size * stored)?;
                if n > 0 {
                    let name = if suffix == "f32" {
                        "setup_to_sell_f32"
                    } else {
                        "setup_to_sell_f64"
                    };
                    let f = self.function(name)?;
                    let mut l = self.inner.stream.launch_builder(&f);
                    let has_perm = u32::from(perm.is_some());
                    l.arg(&n).arg(&c).arg(&has_perm);
                    match &perm {
                        Some(p) => l.arg(p),
                        None => l.arg(&slice_ptr),
                    };
                    l.arg(&slice_ptr)
                        .arg(&a.ptr)
                        .arg(&a.col)
                        .arg(&a.val)
                        .arg(&mut col)
                        .arg(&mut val);
                    // SAFETY: arguments match `setup_to_sell_*`; perm (when
                    // has_perm) holds n rows, slice_ptr n / c + 1 offsets
                    // from the plan of these row lengths, the outputs
                    // `stored` columns and values of T.
                    unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev(name))?;
                    self.inner.stats.launch(name);
                }
                Arrays::Sell {
                    slice_ptr,
                    col,
                    val,
                    perm,
                    c: c32,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(CudaMatrix::from_arrays(
            arrays,
            (n, ncols),
            nnz,
            layout,
        )))
    }

    /// The inverse diagonal blocks `blocks` (bs x bs, row-major, one per
    /// node of an n-row matrix, on the device) as a CSR matrix with values
    /// of `T` (`BlockDiagonal::to_csr` converted), built on the device
    /// (kernel `amg_block_diag_csr_*`), O(n bs). `None` for complex `T`.
    /// Errors when `blocks` is not n bs values.
    pub fn setup_block_diagonal_matrix<T: Scalar>(
        &self,
        n: usize,
        bs: usize,
        blocks: &SetupVec,
    ) -> Result<Option<CudaMatrix<T>>> {
        let name = match T::KIND {
            ScalarKind::F32 => "amg_block_diag_csr_f32",
            ScalarKind::F64 => "amg_block_diag_csr_f64",
            _ => return Ok(None),
        };
        if bs == 0 || n % bs != 0 || blocks.len() != n * bs {
            return Err(Error::shape("block diagonal", n * bs, blocks.len()));
        }
        let nnz = n * bs;
        let d = blocks;
        let mut ptr = self.resident_bytes(8 * (n + 1))?;
        let mut col = self.resident_bytes(4 * nnz)?;
        let mut val = self.resident_bytes(std::mem::size_of::<T>() * nnz)?;
        let f = self.function(name)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&n)
            .arg(&bs)
            .arg(&d.buf)
            .arg(&mut ptr)
            .arg(&mut col)
            .arg(&mut val);
        // SAFETY: arguments match `amg_block_diag_csr_*`; blocks holds n bs
        // values, the outputs n + 1 row pointers and n bs columns and values.
        unsafe { l.launch(Self::cfg(self.grid_blocks(nnz.max(n + 1)))) }.map_err(dev(name))?;
        self.inner.stats.launch(name);
        let arrays = Arrays::Csr {
            row_ptr: ptr,
            col,
            val,
            lanes_log2: csr_lanes_log2(nnz, n),
        };
        Ok(Some(CudaMatrix::from_arrays(
            arrays,
            (n, n),
            nnz,
            Layout::Csr,
        )))
    }

    /// The CSR matrix `a` with row i scaled by `d[i]` (each value
    /// `a_ij * d_i` in T, as the host computes it), made on the device: the
    /// row pointers and columns copied there, the values by kernel
    /// `csr_scale_rows_*` (a thread per row). O(nnz + rows). `None` for
    /// other layouts and complex `T`. Errors when `d` is not of a's rows.
    pub fn csr_scaled_rows<T: Scalar>(
        &self,
        a: &CudaMatrix<T>,
        d: &CudaVector<T>,
    ) -> Result<Option<CudaMatrix<T>>> {
        let name = match T::KIND {
            ScalarKind::F32 => "csr_scale_rows_f32",
            ScalarKind::F64 => "csr_scale_rows_f64",
            _ => return Ok(None),
        };
        let Arrays::Csr {
            row_ptr,
            col,
            val,
            lanes_log2,
        } = &a.arrays
        else {
            return Ok(None);
        };
        let (n, nnz) = (a.shape.0, gpuq_sparse::DeviceMatrix::nnz(a));
        gpuq_core::check_same_len("csr_scaled_rows (d vs rows)", n, d.len)?;
        let stream = &self.inner.stream;
        let copy = |s: &CudaSlice<u8>| {
            stream
                .clone_dtod(s)
                .map_err(|e| self.alloc_error("a scaled ghost block", s.len(), e))
        };
        let (ptr_out, col_out) = (copy(row_ptr)?, copy(col)?);
        let mut val_out = self.resident_bytes(std::mem::size_of::<T>() * nnz)?;
        if n > 0 {
            let f = self.function(name)?;
            let mut l = stream.launch_builder(&f);
            l.arg(&n)
                .arg(row_ptr)
                .arg(&d.buf)
                .arg(val)
                .arg(&mut val_out);
            // SAFETY: arguments match `csr_scale_rows_*`; row_ptr holds n + 1
            // offsets into val (nnz values of T, as val_out), d n values.
            unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev(name))?;
            self.inner.stats.launch(name);
        }
        let arrays = Arrays::Csr {
            row_ptr: ptr_out,
            col: col_out,
            val: val_out,
            lanes_log2: *lanes_log2,
        };
        Ok(Some(CudaMatrix::from_arrays(
            arrays,
            a.shape,
            nnz,
            Layout::Csr,
        )))
    }

    /// omega times the point diagonal `d` (block size 1, on the device) as
    /// a vector of `T`: kernel `amg_scaled_diag_*`, O(n). `None` for
    /// complex `T`.
    pub fn setup_scaled_diagonal<T: Scalar>(
        &self,
        d: &SetupVec,
        omega: f64,
    ) -> Result<Option<CudaVector<T>>> {
        let name = match T::KIND {
            ScalarKind::F32 => "amg_scaled_diag_f32",
            ScalarKind::F64 => "amg_scaled_diag_f64",
            _ => return Ok(None),
        };
        let n = d.len();
        let x = d;
        let mut y = self.resident_bytes(std::mem::size_of::<T>() * n)?;
        if n > 0 {
            let f = self.function(name)?;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&n).arg(&omega).arg(&x.buf).arg(&mut y);
            // SAFETY: arguments match `amg_scaled_diag_*`; x and y hold n values.
            unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev(name))?;
            self.inner.stats.launch(name);
        }
        Ok(Some(CudaVector {
            buf: y,
            len: n,
            _t: std::marker::PhantomData,
        }))
    }

    /// The AMG input checks on the device (`amg_check_rows`, then
    /// `amg_check_symmetry`: two passes over the matrix, one 104-byte read
    /// back): whether every value is finite, which candidate null vectors
    /// (the bs block-component constants, then all ones for bs > 1) have
    /// ||A v||_inf above 1e-10 times the largest row sum of |a_ij|, and
    /// whether A equals its transpose to 1e-12 of its largest entry, each as
    /// the host's checks decide it. `None` for a block size above
    /// `MAX_SETUP_BLOCK` (or one that does not divide the rows).
    pub fn setup_input_checks(&self, a: &SetupCsr, bs: usize) -> Result<Option<InputChecks>> {
        use gpuq_kernels::amg::MAX_SETUP_BLOCK;
        const SLOTS: usize = MAX_SETUP_BLOCK + 5;
        let n = a.shape().0;
        if bs == 0 || bs > MAX_SETUP_BLOCK || n % bs != 0 || a.shape().1 != n {
            return Ok(None);
        }
        let mut stats = self.setup_zeros::<u64>(SLOTS)?;
        if n > 0 {
            for name in ["amg_check_rows", "amg_check_symmetry"] {
                let f = self.function(name)?;
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(&n);
                if name == "amg_check_rows" {
                    l.arg(&bs);
                }
                l.arg(&a.ptr).arg(&a.col).arg(&a.val).arg(&mut stats);
                // SAFETY: arguments match the kernel; a validated square
                // CSR matrix of n rows, stats holds CHECK_SLOTS zeros and
                // bs <= MAX_SETUP_BLOCK divides n.
                unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev(name))?;
                self.inner.stats.launch(name);
            }
        }
        let stats = self.setup_get(&stats, SLOTS)?;
        let norm = f64::from_bits(stats[1]);
        let candidates = if bs > 1 { bs + 1 } else { 1 };
        Ok(Some(InputChecks {
            finite: stats[0] == 0,
            large: (0..candidates)
                .map(|c| f64::from_bits(stats[3 + c]) > 1e-10 * norm)
                .collect(),
            symmetric: stats[SLOTS - 1] == 0,
        }))
    }
}

/// What [`CudaBackend::setup_input_checks`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct InputChecks {
    /// Every stored value is finite (the rest is meaningless otherwise).
    pub finite: bool,
    /// Per candidate null vector (the block-component constants, then all
    /// ones for blocks above 1): ||A v||_inf > 1e-10 max_i sum_j |a_ij|.
    pub large: Vec<bool>,
    /// A equals its transpose to 1e-12 of its largest entry.
    pub symmetric: bool,
}
