//! What keeps the AMG hierarchy on the device after its setup: the block
//! diagonals and rows of zeros of matrices the host never sees, their row
//! lengths, and their conversion into the cycle's matrices (CSR or SELL in
//! the cycle's precision) without a round trip through the host.

use crate::amg_setup::SetupCsr;
use crate::backend::{dev, CudaBackend};
use crate::spmv::{csr_lanes_log2, Arrays, CudaMatrix};
use cudarc::driver::{CudaSlice, PushKernelArg};
use gpuq_core::{Error, Result, Scalar, ScalarKind};
use gpuq_sparse::{sell_plan, Layout};

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

    /// The bs x bs diagonal blocks of a setup matrix (row-major, bs^2 values
    /// per node; with `l1` the l1-Jacobi matrix's: each row's |a_ij| outside
    /// its block added to the diagonal), the host's `BlockDiagonal::of` sums
    /// in its order (kernel `amg_block_diagonal`, one thread per row), then
    /// downloaded: O(nnz) on the device, n bs values back.
    pub fn setup_block_diagonal(&self, a: &SetupCsr, bs: usize, l1: bool) -> Result<Vec<f64>> {
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
        self.setup_get(&blocks.buf, n * bs)
    }

    /// The rows of a setup matrix that store only zeros (or nothing), in
    /// increasing order: kernel `amg_zero_rows` and 4 bytes per row back.
    pub fn setup_zero_rows(&self, a: &SetupCsr) -> Result<Vec<usize>> {
        let n = a.shape().0;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut flags = self.setup_zeros::<u32>(n)?;
        let f = self.function("amg_zero_rows")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&n).arg(&a.ptr).arg(&a.val).arg(&mut flags);
        // SAFETY: arguments match `amg_zero_rows`; flags holds n values.
        unsafe { l.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("amg_zero_rows"))?;
        self.inner.stats.launch("amg_zero_rows");
        let flags = self.setup_get(&flags, n)?;
        Ok(flags
            .iter()
            .enumerate()
            .filter(|(_, &z)| z != 0)
            .map(|(i, _)| i)
            .collect())
    }

    /// A setup matrix as one of the cycle's matrices in `layout` with values
    /// of `T`, built on the device: CSR by copying the row pointers and
    /// columns and converting the values (kernel `setup_to_csr_*`), SELL by
    /// the host's plan from the row lengths `lens` ([`sell_plan`], the row
    /// order and slice offsets uploaded) and one thread per row
    /// (`setup_to_sell_*`). `None` for BSR2 and complex `T` (the caller
    /// converts on the host) and for SELL without `lens`. Cost: O(nnz +
    /// padding) on the device, O(nrows log sigma) on the host for SELL.
    pub fn setup_to_matrix<T: Scalar>(
        &self,
        a: &SetupCsr,
        layout: Layout,
        lens: Option<&[u32]>,
    ) -> Result<Option<CudaMatrix<T>>> {
        let suffix = match T::KIND {
            ScalarKind::F32 => "f32",
            ScalarKind::F64 => "f64",
            _ => return Ok(None),
        };
        let ((n, ncols), nnz) = (a.shape(), a.nnz());
        let size = std::mem::size_of::<T>();
        let arrays = match (layout, lens) {
            (Layout::Csr, _) => {
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
            (Layout::Sell { c, sigma }, Some(lens)) => {
                if c == 0 || sigma == 0 || (sigma != 1 && sigma % c != 0) || lens.len() != n {
                    return Err(Error::InvalidArgument(format!(
                        "SELL-{c}-{sigma} of a {n}-row matrix from {} row lengths",
                        lens.len()
                    )));
                }
                let c32 = u32::try_from(c)
                    .map_err(|_| Error::InvalidArgument(format!("slice height {c} too large")))?;
                let (perm, slice_ptr) = sell_plan(n, |i| lens[i] as usize, c, sigma);
                let stored = slice_ptr[n.div_ceil(c)];
                let slice_bytes: Vec<u8> = slice_ptr
                    .iter()
                    .flat_map(|&p| (p as u64).to_ne_bytes())
                    .collect();
                let slice_ptr = self.upload_bytes(&slice_bytes)?;
                let perm = if sigma == 1 {
                    None
                } else {
                    let bytes: Vec<u8> = perm.iter().flat_map(|p| p.to_ne_bytes()).collect();
                    Some(self.upload_bytes(&bytes)?)
                };
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
}
