//! The AMG setup's device steps (kernels in `kernels-rs/src/device/amg_setup.rs`):
//! a CSR matrix of f64 held on the device ([`SetupCsr`]), its product, sum and
//! transpose, and the strength graph with the distance-2 maximal-independent-set
//! aggregation. Each step is a count pass, a prefix sum of the counts and a
//! fill pass; the prefix sums run on the host (the counts come down, the row
//! pointers go up: 12 bytes per row), everything else on the device.

use crate::backend::{dev, CudaBackend, THREADS};
use cudarc::driver::{CudaSlice, DeviceRepr, PushKernelArg, ValidAsZeroBits};
use gpuq_core::{Error, Result};
use gpuq_kernels::amg::{table_slots, MAX_SETUP_BLOCK, ROW_LANES};
use gpuq_sparse::Csr;
use rayon::prelude::*;

/// Hash-table slots one product pass may use at once (12 bytes each): rows are
/// taken in chunks whose tables fit, so a product needs at most about 1.6 GB
/// of scratch beyond its operands and result.
const TABLE_BUDGET: u64 = 1 << 27;

/// Rows `first..end` of a sparse product and the hash-table slots they take:
/// `(first, end, slots)`.
type Chunk = (usize, usize, u64);

/// The count pass of the sparse products (kernel `spgemm_count_rows`).
const COUNT_KERNEL: &str = "spgemm_count_rows";

/// The fill pass of the sparse products (kernel `spgemm_fill_rows`).
const FILL_KERNEL: &str = "spgemm_fill_rows";

/// The count pass with several whole warps per row (few rows).
const COUNT_WIDE_KERNEL: &str = "spgemm_count_wide";

/// The fill pass with several whole warps per row (few rows).
const FILL_WIDE_KERNEL: &str = "spgemm_fill_wide";

/// The operands of a pass of the sparse products' kernels: A, B, the smoothing (block
/// size, omega, inverse diagonal blocks) of a smoothed prolongator, the
/// global tables (running totals on the device and chunks), whether the
/// pass counts again only the rows that filled their shared tables, the
/// lanes per row, the spread and whether it is wide (`wide`: `spread` whole
/// warps per row, kernels `spgemm_*_wide`; else every `spread`-th warp
/// works, with the shared memory of the idle ones).
struct RowsPass<'a> {
    a: &'a SetupCsr,
    b: &'a SetupCsr,
    smooth: Option<(usize, f64, &'a CudaSlice<f64>)>,
    tables: &'a (CudaSlice<u64>, Vec<Chunk>),
    retry: bool,
    lanes: u32,
    spread: u32,
    wide: bool,
}

/// Slots of a row's table in its group's share of the shared region in the
/// fill pass of a sparse product, per lane of the group (`kernels-rs`: 8 w
/// columns and their values for a group of w lanes); rows that need more get
/// tables in global memory.
const FILL_SHARED_SLOTS_PER_LANE: u64 = 8;

/// Fewest lanes per row the product passes use.
const MIN_LANES: u32 = 2;

/// Lanes per row of a product pass (a power of two, `MIN_LANES` to 32): at
/// least the average length `b_row` of the B rows each step of a row's walk
/// spreads over the lanes, and at least `table / slots_per_lane` so that a
/// row of average size finds its hash table in the group's shared share
/// (`table` slots wanted, `slots_per_lane` slots per lane there).
fn group_lanes(b_row: f64, table: f64, slots_per_lane: f64) -> u32 {
    let want = b_row.max(table / slots_per_lane).clamp(1.0, 32.0);
    (want.ceil() as u32)
        .next_power_of_two()
        .clamp(MIN_LANES, 32)
}

/// Launches the 1D kernel `$name` over `$n` items with the arguments the
/// block pushes on `$l`; counts the launch.
macro_rules! setup_launch {
    ($self:ident, $name:literal, $n:expr, $l:ident => $push:block) => {{
        let (f, cfg) = $self.launch_1d($name, $n)?;
        let mut $l = $self.inner.stream.launch_builder(&f);
        $push
        // SAFETY: every use pushes the arguments of kernel `$name` in
        // order, with the lengths its caller checked (each use's comment
        // says which).
        unsafe { $l.launch(cfg) }.map_err(dev($name))?;
        $self.inner.stats.launch($name);
        Ok::<(), Error>(())
    }};
}

/// The row pointers of `a` as u64: the same bytes, borrowed, where usize is
/// 64 bits wide.
fn row_pointers(a: &Csr<f64>) -> std::borrow::Cow<'_, [u64]> {
    #[cfg(target_pointer_width = "64")]
    // SAFETY: usize is 8 bytes here, with u64's layout and alignment.
    let ptr: &[u64] = unsafe {
        std::slice::from_raw_parts(a.row_ptr().as_ptr().cast::<u64>(), a.row_ptr().len())
    };
    #[cfg(target_pointer_width = "64")]
    return std::borrow::Cow::Borrowed(ptr);
    #[cfg(not(target_pointer_width = "64"))]
    std::borrow::Cow::Owned(a.row_ptr().iter().map(|&p| p as u64).collect())
}

/// A real CSR matrix on the device, as the setup kernels read it: u64 row
/// pointers, u32 columns (sorted, unique in each row), f64 values.
pub struct SetupCsr {
    pub(crate) nrows: usize,
    pub(crate) ncols: usize,
    nnz: usize,
    pub(crate) ptr: CudaSlice<u64>,
    pub(crate) col: CudaSlice<u32>,
    pub(crate) val: CudaSlice<f64>,
}

impl SetupCsr {
    /// Rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
}

/// The output of a kernel that makes a CSR matrix in two launches: a count
/// pass (a null `c_ptr`: each row's entries into `counts`) and a fill pass
/// (`c_ptr` the counts' prefix sum, the entries written into `c_col` and
/// `c_val`), as `csr_add` and `csr_column_range` take them last.
struct CountedRows {
    rows: usize,
    counts: CudaSlice<u64>,
    c_ptr: Option<CudaSlice<u64>>,
    c_col: CudaSlice<u32>,
    c_val: CudaSlice<f64>,
    nnz: usize,
    null: u64,
}

impl CountedRows {
    /// Zeroed counts for `rows` rows, empty outputs.
    fn new(g: &CudaBackend, rows: usize) -> Result<Self> {
        Ok(CountedRows {
            rows,
            counts: g.setup_zeros::<u64>(rows)?,
            c_ptr: None,
            c_col: g.setup_zeros::<u32>(0)?,
            c_val: g.setup_zeros::<f64>(0)?,
            nnz: 0,
            null: 0,
        })
    }

    /// Before pass 1 (the fill): the counts' prefix sum as row pointers and
    /// the entry arrays of its total (8 bytes read back), not zeroed: every
    /// fill pass writes each row's counted entries, so all of them.
    fn prepare(&mut self, g: &CudaBackend, pass: usize) -> Result<()> {
        if pass == 1 {
            let (p, total) = g.setup_offsets(&self.counts, self.rows)?;
            self.nnz = total as usize;
            self.c_ptr = Some(p);
            // SAFETY: the fill passes (`csr_add`, `csr_column_range`,
            // `csr_select_rows`) write row i's counts[i] entries from
            // c_ptr[i], the counts' prefix sum: every entry of the total.
            self.c_col = unsafe { g.setup_uninit::<u32>(self.nnz)? };
            // SAFETY: as for c_col.
            self.c_val = unsafe { g.setup_uninit::<f64>(self.nnz)? };
        }
        Ok(())
    }

    /// The pass's last four arguments: c_ptr (null in the count pass),
    /// counts, c_col, c_val.
    fn push_args<'a>(&'a mut self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        match &self.c_ptr {
            Some(p) => l.arg(p),
            None => l.arg(&self.null),
        };
        l.arg(&mut self.counts)
            .arg(&mut self.c_col)
            .arg(&mut self.c_val);
    }

    /// The matrix of `ncols` columns the fill pass wrote.
    fn finish(self, ncols: usize) -> Result<SetupCsr> {
        Ok(SetupCsr {
            nrows: self.rows,
            ncols,
            nnz: self.nnz,
            ptr: self
                .c_ptr
                .ok_or_else(|| Error::Device("a counted matrix without its fill pass".into()))?,
            col: self.c_col,
            val: self.c_val,
        })
    }
}

impl CudaBackend {
    pub(crate) fn setup_zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>> {
        self.inner
            .stream
            .alloc_zeros::<T>(n.max(1))
            .map_err(dev("allocating AMG setup buffers"))
    }

    /// A buffer of `n` values (at least one) left as the allocator gives
    /// it: no memset, for outputs a kernel writes whole.
    ///
    /// # Safety
    /// Every value must be written before any is read.
    pub(crate) unsafe fn setup_uninit<T: DeviceRepr>(&self, n: usize) -> Result<CudaSlice<T>> {
        self.inner
            .stream
            .alloc::<T>(n.max(1))
            .map_err(dev("allocating AMG setup buffers"))
    }

    pub(crate) fn setup_put<T: DeviceRepr>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        let bytes = std::mem::size_of_val(host);
        if bytes < crate::staging::STAGED_FROM {
            self.inner.stats.upload(bytes);
            if host.is_empty() {
                // SAFETY: one element of a plain type, never read (length 0).
                return unsafe { self.inner.stream.alloc::<T>(1) }.map_err(dev("upload"));
            }
            return self.inner.stream.clone_htod(host).map_err(dev("upload"));
        }
        self.setup_put_parts(&[host])
    }

    /// `parts` one after the other in one new buffer: each large part staged
    /// through pinned memory (as [`CudaBackend::setup_put`]), each small one
    /// copied straight; no host copy of the parts joined. O(total) across.
    fn setup_put_parts<T: DeviceRepr>(&self, parts: &[&[T]]) -> Result<CudaSlice<T>> {
        self.setup_put_below(None, parts)
    }

    /// The first `top.1` elements of the device buffer `top.0` (copied on
    /// the device), then `parts` (host, as [`CudaBackend::setup_put_parts`])
    /// in one new buffer. O(total) across, the parts' bytes over PCIe.
    fn setup_put_below<T: DeviceRepr>(
        &self,
        top: Option<(&CudaSlice<T>, usize)>,
        parts: &[&[T]],
    ) -> Result<CudaSlice<T>> {
        let above = top.map_or(0, |(_, n)| n);
        let len: usize = above + parts.iter().map(|p| p.len()).sum::<usize>();
        let bytes = len * std::mem::size_of::<T>();
        self.inner
            .stats
            .upload(bytes - above * std::mem::size_of::<T>());
        // SAFETY: every element is written by the copies below before any
        // kernel reads it (the stream orders them); at least one element.
        let mut buf = unsafe { self.inner.stream.alloc::<T>(len.max(1)) }
            .map_err(|e| self.alloc_error("an AMG setup upload", bytes, e))?;
        if let Some((src, n)) = top.filter(|&(_, n)| n > 0) {
            self.inner
                .stream
                .memcpy_dtod(&src.slice(..n), &mut buf.slice_mut(..n))
                .map_err(dev("copying rows on the device"))?;
        }
        // SAFETY: T is a plain device type (DeviceRepr): its bytes are
        // initialised, u8 has alignment 1, and the views cover the buffer.
        let mut view = unsafe { buf.transmute_mut::<u8>(bytes) }
            .ok_or_else(|| Error::InvalidArgument("staged upload: buffer too small".into()))?;
        let mut at = above * std::mem::size_of::<T>();
        for part in parts {
            let size = std::mem::size_of_val(*part);
            // SAFETY: as above, the part's bytes are initialised.
            let src = unsafe { std::slice::from_raw_parts(part.as_ptr().cast::<u8>(), size) };
            let mut dst = view.slice_mut(at..at + size);
            if size >= crate::staging::STAGED_FROM {
                self.staged_upload(src, &mut dst)?;
            } else if size > 0 {
                self.inner
                    .stream
                    .memcpy_htod(src, &mut dst)
                    .map_err(dev("upload"))?;
            }
            at += size;
        }
        Ok(buf)
    }

    pub(crate) fn setup_get<T: DeviceRepr + Default + Clone>(
        &self,
        buf: &CudaSlice<T>,
        n: usize,
    ) -> Result<Vec<T>> {
        let bytes = n * std::mem::size_of::<T>();
        self.inner.stats.download(bytes);
        if n == 0 {
            return Ok(Vec::new());
        }
        if bytes >= crate::staging::STAGED_DOWN_FROM {
            let mut out: Vec<T> = Vec::with_capacity(n);
            let src = buf.slice(..n);
            // SAFETY: T is a plain device type (DeviceRepr): the view's n
            // elements are `bytes` initialised bytes, and the spare
            // capacity's first n elements are `bytes` bytes, written by the
            // staged download before `set_len`.
            let src = unsafe { src.transmute::<u8>(bytes) }
                .ok_or_else(|| Error::InvalidArgument("staged download: view too short".into()))?;
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    out.spare_capacity_mut()
                        .as_mut_ptr()
                        .cast::<std::mem::MaybeUninit<u8>>(),
                    bytes,
                )
            };
            self.staged_download(&src, dst)?;
            // SAFETY: all n elements were written above.
            unsafe { out.set_len(n) };
            return Ok(out);
        }
        let mut out = vec![T::default(); n];
        self.inner
            .stream
            .memcpy_dtoh(&buf.slice(..n), &mut out)
            .map_err(dev("download"))?;
        Ok(out)
    }

    /// The value at `index` of a device array (one 8-byte download).
    pub(crate) fn setup_get_at(&self, buf: &CudaSlice<u64>, index: usize) -> Result<u64> {
        self.inner.stats.download(8);
        let mut out = [0u64];
        self.inner
            .stream
            .memcpy_dtoh(&buf.slice(index..index + 1), &mut out)
            .map_err(dev("download"))?;
        Ok(out[0])
    }

    /// The rows of the `n` rows of `ptr` (row offsets, n + 1 values) that
    /// hold an entry, or with `empty` those that hold none, increasing, on
    /// the device, and their number (kernels `listed_rows_flags`,
    /// `listed_rows_scatter`, a prefix sum; one 8-byte read back). O(n).
    pub(crate) fn list_rows(
        &self,
        ptr: &CudaSlice<u64>,
        n: usize,
        empty: bool,
    ) -> Result<(CudaSlice<u64>, usize)> {
        let empty = u32::from(empty);
        let mut flags = self.setup_zeros::<u64>(n)?;
        // SAFETY: ptr holds n + 1 offsets, flags `n` values.
        setup_launch!(self, "listed_rows_flags", n, l => {
            l.arg(&n).arg(ptr).arg(&empty).arg(&mut flags);
        })?;
        let (offs, k) = self.setup_offsets(&flags, n)?;
        let k = k as usize;
        let mut rows = self.setup_zeros::<u64>(k)?;
        // SAFETY: offs holds the n + 1 offsets of the flags, whose total k
        // is rows' length: each flagged row writes its own slot.
        setup_launch!(self, "listed_rows_scatter", n, l => {
            l.arg(&n).arg(ptr).arg(&empty).arg(&offs).arg(&mut rows);
        })?;
        Ok((rows, k))
    }

    /// The exclusive prefix sum of `n` counts on the device, as row pointers
    /// (n + 1 values, the last the total) and their total: three launches
    /// (`scan_tile_sums`, `scan_tile_offsets`, `scan_tile_apply`: tiles of 512
    /// entries per warp, then one warp over the tiles' sums) and one 8-byte
    /// download. O(n).
    fn setup_offsets(&self, counts: &CudaSlice<u64>, n: usize) -> Result<(CudaSlice<u64>, u64)> {
        let mut out = self.setup_zeros::<u64>(n + 1)?;
        self.setup_offsets_into(counts, n, &mut out)?;
        let total = self.setup_get_at(&out, n)?;
        Ok((out, total))
    }

    /// The prefix sum of [`CudaBackend::setup_offsets`] written as n + 1 u64
    /// values into `out` (a buffer of any element type holding at least 8 (n
    /// + 1) bytes), with no read back.
    pub(crate) fn setup_offsets_into<O: DeviceRepr>(
        &self,
        counts: &CudaSlice<u64>,
        n: usize,
        out: &mut CudaSlice<O>,
    ) -> Result<()> {
        if out.len() * std::mem::size_of::<O>() < 8 * (n + 1) {
            return Err(Error::shape(
                "prefix sum",
                8 * (n + 1),
                out.len() * std::mem::size_of::<O>(),
            ));
        }
        let tiles = (n + 1).div_ceil(512);
        let mut sums = self.setup_zeros::<u64>(tiles)?;
        let warps = Self::cfg(self.grid_blocks(tiles * 32));
        let f = self.function("scan_tile_sums")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&n).arg(counts).arg(&mut sums);
        // SAFETY: arguments match `scan_tile_sums`; counts holds n values,
        // sums one per tile of (n + 1) entries.
        unsafe { l.launch(warps) }.map_err(dev("scan_tile_sums"))?;
        let f = self.function("scan_tile_offsets")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&tiles).arg(&mut sums);
        // SAFETY: arguments match `scan_tile_offsets`; one block, whose
        // first warp scans the `tiles` sums.
        unsafe { l.launch(Self::cfg(1)) }.map_err(dev("scan_tile_offsets"))?;
        let f = self.function("scan_tile_apply")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&n).arg(counts).arg(&sums).arg(out);
        // SAFETY: arguments match `scan_tile_apply`; out holds n + 1 u64
        // values (the caller's contract).
        unsafe { l.launch(warps) }.map_err(dev("scan_tile_apply"))?;
        for name in ["scan_tile_sums", "scan_tile_offsets", "scan_tile_apply"] {
            self.inner.stats.launch(name);
        }
        Ok(())
    }

    fn launch_1d(
        &self,
        name: &'static str,
        items: usize,
    ) -> Result<(cudarc::driver::CudaFunction, cudarc::driver::LaunchConfig)> {
        Ok((self.function(name)?, Self::cfg(self.grid_blocks(items))))
    }

    /// Kernel `name` and a cooperative launch of it over `items` threads:
    /// the blocks [`CudaBackend::grid_blocks`] gives, at most as many as
    /// can be resident on the device at once (its occupancy), so that its
    /// grid barriers (`sync_grid`) cannot wait for a block that never runs.
    pub(crate) fn cooperative(
        &self,
        name: &'static str,
        items: usize,
    ) -> Result<(cudarc::driver::CudaFunction, cudarc::driver::LaunchConfig)> {
        let f = self.function(name)?;
        let resident = self.blocks_per_sm(&f)? * self.inner.info.multiprocessors;
        let blocks = (self.grid_blocks(items) as usize).min(resident.max(1));
        Ok((f, Self::cfg(blocks as u32)))
    }

    /// Copies a host CSR matrix to the device: 16 bytes per row and 12 per
    /// entry.
    pub fn setup_upload(&self, a: &Csr<f64>) -> Result<SetupCsr> {
        Ok(SetupCsr {
            nrows: a.nrows(),
            ncols: a.ncols(),
            nnz: a.nnz(),
            ptr: self.setup_put(&row_pointers(a))?,
            col: self.setup_put(a.col_idx())?,
            val: self.setup_put(a.values())?,
        })
    }

    /// The rows of `parts` (each of `ncols` columns) stacked in order,
    /// uploaded part by part into the device arrays (the first part's row
    /// pointers as they are, the others' shifted by the entries before them
    /// on the host), with no host copy of the stacked matrix. Errors when a
    /// part has another column count. O(rows + nnz) across, O(rows of the
    /// parts after the first) on the host.
    pub fn setup_upload_stacked(&self, parts: &[&Csr<f64>], ncols: usize) -> Result<SetupCsr> {
        if let Some(p) = parts.iter().find(|p| p.ncols() != ncols) {
            return Err(Error::shape("stacked rows (columns)", ncols, p.ncols()));
        }
        let (mut at, mut shifted) = (0, Vec::with_capacity(parts.len()));
        for (k, p) in parts.iter().enumerate() {
            if k > 0 {
                shifted.push(
                    p.row_ptr()[1..]
                        .iter()
                        .map(|&e| (at + e) as u64)
                        .collect::<Vec<u64>>(),
                );
            }
            at += p.nnz();
        }
        let first = parts.first().map(|p| row_pointers(p));
        let zero = [0u64];
        let ptr_parts: Vec<&[u64]> = std::iter::once(first.as_deref().unwrap_or(&zero))
            .chain(shifted.iter().map(|v| &v[..]))
            .collect();
        let cols: Vec<&[u32]> = parts.iter().map(|p| p.col_idx()).collect();
        let vals: Vec<&[f64]> = parts.iter().map(|p| p.values()).collect();
        Ok(SetupCsr {
            nrows: parts.iter().map(|p| p.nrows()).sum(),
            ncols,
            nnz: at,
            ptr: self.setup_put_parts(&ptr_parts)?,
            col: self.setup_put_parts(&cols)?,
            val: self.setup_put_parts(&vals)?,
        })
    }

    /// The first `rows` rows of the device matrix `top`, then the rows of
    /// the host matrix `below` (the same columns), as one new device matrix:
    /// `top`'s rows copied on the device, `below` uploaded with its row
    /// pointers shifted on the host, one 8-byte read back (where `top`'s
    /// rows end). What a product kept on the device and the ghost rows
    /// fetched for it make as the right operand of the next product. Errors
    /// when `rows` exceeds `top`'s rows or the columns differ. O(rows + nnz)
    /// on the device, O(`below`) over PCIe and on the host.
    pub fn setup_stack_below(
        &self,
        top: &SetupCsr,
        rows: usize,
        below: &Csr<f64>,
    ) -> Result<SetupCsr> {
        if rows > top.nrows {
            return Err(Error::shape(
                "stacked rows (rows kept)",
                format!("at most {}", top.nrows),
                rows,
            ));
        }
        if below.ncols() != top.ncols {
            return Err(Error::shape(
                "stacked rows (columns)",
                top.ncols,
                below.ncols(),
            ));
        }
        let above = self.setup_get_at(&top.ptr, rows)? as usize;
        let shifted: Vec<u64> = below.row_ptr()[1..]
            .iter()
            .map(|&e| (above + e) as u64)
            .collect();
        Ok(SetupCsr {
            nrows: rows + below.nrows(),
            ncols: top.ncols,
            nnz: above + below.nnz(),
            ptr: self.setup_put_below(Some((&top.ptr, rows + 1)), &[&shifted])?,
            col: self.setup_put_below(Some((&top.col, above)), &[below.col_idx()])?,
            val: self.setup_put_below(Some((&top.val, above)), &[below.values()])?,
        })
    }

    /// A copy of the CSR matrix `m`, already on this device (64-bit row
    /// pointers, 32-bit columns, f64 values: a [`CudaBackend::foreign_csr`]
    /// view of another library's arrays), in the setup's layout: three
    /// device-to-device copies, nothing through the host. Errors for a
    /// matrix in another layout. O(n + nnz) on the device.
    pub fn setup_copy(&self, m: &crate::spmv::CudaMatrix<f64>) -> Result<SetupCsr> {
        let crate::spmv::Arrays::Csr {
            row_ptr, col, val, ..
        } = &m.arrays
        else {
            return Err(Error::InvalidArgument(
                "the AMG setup copies a CSR matrix from the device (this one is in another layout)"
                    .into(),
            ));
        };
        let ((nrows, ncols), nnz) = (m.shape, gpuq_sparse::DeviceMatrix::nnz(m));
        Ok(SetupCsr {
            nrows,
            ncols,
            nnz,
            ptr: self.setup_copy_bytes::<u64>(row_ptr, nrows + 1)?,
            col: self.setup_copy_bytes::<u32>(col, nnz)?,
            val: self.setup_copy_bytes::<f64>(val, nnz)?,
        })
    }

    /// `n` values of `T` copied on the device from the bytes `src` (at least
    /// one element allocated, as every setup buffer).
    fn setup_copy_bytes<T: DeviceRepr>(
        &self,
        src: &CudaSlice<u8>,
        n: usize,
    ) -> Result<CudaSlice<T>> {
        let bytes = n * std::mem::size_of::<T>();
        // SAFETY: every element of the first n is written by the copy below
        // before any kernel reads it (the stream orders them); n = 0 leaves
        // one element that is never read.
        let mut buf = unsafe { self.inner.stream.alloc::<T>(n.max(1)) }
            .map_err(|e| self.alloc_error("an AMG setup copy", bytes, e))?;
        if bytes == 0 {
            return Ok(buf);
        }
        // SAFETY: T is a plain device type: its n elements are `bytes` bytes.
        let mut dst = unsafe { buf.transmute_mut::<u8>(bytes) }
            .ok_or_else(|| Error::InvalidArgument("setup copy: buffer too small".into()))?;
        let src = src.slice(..bytes);
        self.inner
            .stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(dev("copying a matrix on the device"))?;
        Ok(buf)
    }

    /// Whether the host matrix `a` has the pattern of the device matrix `m`
    /// (shape, row pointers, columns): `a`'s pattern uploaded (8 bytes per
    /// row, 4 per entry), compared entry by entry by kernel
    /// `csr_same_pattern`, 4 bytes back. O(nrows + nnz).
    pub fn setup_same_pattern(&self, m: &SetupCsr, a: &Csr<f64>) -> Result<bool> {
        if m.shape() != a.shape() || m.nnz != a.nnz() {
            return Ok(false);
        }
        let ptr = self.setup_put(&row_pointers(a))?;
        let col = self.setup_put(a.col_idx())?;
        let mut differ = self.setup_zeros::<u32>(1)?;
        let (n, nnz) = (m.nrows, m.nnz);
        // SAFETY: arguments match `csr_same_pattern`; both patterns hold
        // n + 1 row pointers and nnz columns, differ one value.
        setup_launch!(self, "csr_same_pattern", (n + 1).max(nnz), l => {
            l.arg(&n).arg(&nnz).arg(&m.ptr).arg(&m.col).arg(&ptr).arg(&col).arg(&mut differ);
        })?;
        Ok(self.setup_get(&differ, 1)?[0] == 0)
    }

    /// Copies a device CSR matrix back to the host (and validates it).
    pub fn setup_download(&self, a: &SetupCsr) -> Result<Csr<f64>> {
        let ptr = self.setup_get(&a.ptr, a.nrows + 1)?;
        let col = self.setup_get(&a.col, a.nnz)?;
        let val = self.setup_get(&a.val, a.nnz)?;
        Csr::try_new(
            a.nrows,
            a.ncols,
            ptr.into_iter().map(|p| p as usize).collect(),
            col,
            val,
        )
    }

    /// C = A B on the device, one warp per row with a hash table in shared
    /// memory: a count pass (tables of at most 1024 columns; rows with more
    /// are counted again in global tables sized by their product counts,
    /// `gpuq_kernels::amg::table_slots`), a prefix sum of the counts, and a
    /// fill pass in tables sized by the exact counts (shared up to 128
    /// columns, global beyond) that accumulates each row's products in the
    /// order of the host's Gustavson product (so the values are the host's
    /// bit for bit) and writes the row sorted. Global tables go in chunks of
    /// rows that fit a fixed scratch. Cost: two passes of O(flops) hash
    /// probes, O(row^2 / 32) ranking per row, a device prefix sum and one
    /// 24-byte read back (where rows overflowed their shared tables, the
    /// global tables' prefix sum, a second sum of the counts and two more
    /// 8-byte reads).
    /// Errors when the inner dimensions differ.
    pub fn setup_spgemm(&self, a: &SetupCsr, b: &SetupCsr) -> Result<SetupCsr> {
        self.setup_spgemm_within(a, b, TABLE_BUDGET, None)
    }

    /// [`CudaBackend::setup_spgemm`] with at most `budget` hash-table slots
    /// in use at once (12 bytes each): rows go in chunks whose tables fit
    /// (a row needing more alone), and `lanes` lanes per row (a power of two
    /// up to 32, each group on its own share of shared memory; None: chosen
    /// from the operands' average rows, fill passes of few long rows spread
    /// over idle warps' shares, and too few rows to fill the device given
    /// several whole warps each). The result depends on neither.
    pub fn setup_spgemm_within(
        &self,
        a: &SetupCsr,
        b: &SetupCsr,
        budget: u64,
        lanes: Option<u32>,
    ) -> Result<SetupCsr> {
        if let Some(w) = lanes {
            if !w.is_power_of_two() || w > 32 {
                return Err(Error::InvalidArgument(format!(
                    "lanes per row must be a power of two up to 32, not {w}"
                )));
            }
        }
        if a.ncols != b.nrows {
            return Err(Error::shape(
                "spgemm",
                format!("B with {} rows", a.ncols),
                format!("{} rows", b.nrows),
            ));
        }
        self.hashed_rows(a, b, None, budget, lanes)
    }

    /// The smoothed prolongator P = P_T - omega D^-1 A P_T of smoothed
    /// aggregation, from the square A, its inverse diagonal blocks `dinv`
    /// (row-major, bs^2 per node, on the device) and the tentative prolongator `pt`, in the
    /// passes of [`CudaBackend::setup_spgemm`] with the host's fused order of
    /// operations (`gpuq_amg::prolong::smooth`): the same values bit for
    /// bit. Errors on mismatched sizes.
    pub fn setup_smoothed_prolongator(
        &self,
        a: &SetupCsr,
        bs: usize,
        omega: f64,
        dinv: &SetupVec,
        pt: &SetupCsr,
    ) -> Result<SetupCsr> {
        if a.nrows != a.ncols || pt.nrows != a.nrows || bs == 0 || a.nrows % bs != 0 {
            return Err(Error::shape(
                "smoothed prolongator",
                format!("a square A of {} rows in blocks of {bs}", pt.nrows),
                format!("{:?}", a.shape()),
            ));
        }
        if dinv.len() != a.nrows * bs {
            return Err(Error::shape(
                "smoothed prolongator (inverse diagonal blocks)",
                a.nrows * bs,
                dinv.len(),
            ));
        }
        self.hashed_rows(a, pt, Some((bs, omega, &dinv.buf)), TABLE_BUDGET, None)
    }

    /// The tentative prolongator of smoothed aggregation for one
    /// near-null-space vector `b` (`gpuq_amg::prolong::tentative` with a
    /// single vector): row r holds `b[r] / ||b restricted to r's aggregate||`
    /// in column `agg[r / bs]` (0 where that norm is 0), and the norms (the
    /// next level's near-null-space vector). On the device: an upload of the
    /// aggregates and of b, the pattern, its transpose (each aggregate's rows
    /// in order, so each norm sums in the host's order: the same values bit
    /// for bit), the norms and the scaling; the norms come back. O(nrows).
    /// Where b is all ones (the default for one unknown per node) nothing of
    /// b goes up and there is no transpose: the pattern takes 1 for b, and
    /// each norm is the square root of its aggregate's row count
    /// (`tentative_counts`, `tentative_count_norms`), which the host's sum of
    /// squares of ones gives exactly. A node in no aggregate (`agg`
    /// u32::MAX) has empty rows. Errors when `agg` or `b` do not match (bs
    /// nodes per aggregate entry) or an aggregate is out of range.
    pub fn setup_tentative_single(
        &self,
        agg: &[u32],
        naggs: usize,
        bs: usize,
        b: &[f64],
    ) -> Result<(SetupCsr, Vec<f64>)> {
        if bs == 0 || b.len() != agg.len() * bs {
            return Err(Error::shape(
                "tentative prolongator",
                agg.len() * bs,
                b.len(),
            ));
        }
        // The vector of ones (the default): nothing goes up, and each norm is
        // the square root of its aggregate's row count (one atomic per row:
        // exact, as the host's sum of squares of ones), with no transpose.
        let ones = b.par_iter().all(|&x| x == 1.0);
        let uploaded = if ones { None } else { Some(self.setup_put(b)?) };
        let pt = self.aggregate_pattern(agg, naggs, bs, uploaded.as_ref())?;
        self.scaled_tentative(pt, naggs, ones)
    }

    /// [`CudaBackend::setup_tentative_single`] of aggregates left on the
    /// device ([`CudaBackend::setup_aggregates_kept`] or
    /// [`CudaBackend::setup_aggregates_dropped`]): nothing goes up for the
    /// vector of ones. Errors when
    /// `b` does not have bs values per node.
    pub fn setup_tentative_single_kept(
        &self,
        kept: &DeviceAggregates,
        bs: usize,
        b: &[f64],
    ) -> Result<(SetupCsr, Vec<f64>)> {
        if bs == 0 || b.len() != kept.nodes * bs {
            return Err(Error::shape(
                "tentative prolongator",
                kept.nodes * bs,
                b.len(),
            ));
        }
        let ones = b.par_iter().all(|&x| x == 1.0);
        let uploaded = if ones { None } else { Some(self.setup_put(b)?) };
        let shape = (kept.nodes * bs, kept.count);
        let pt = match kept.unaggregated {
            false => self.full_pattern(&kept.agg, shape, bs, uploaded.as_ref())?,
            true => self.partial_pattern(&kept.agg, shape, bs, uploaded.as_ref())?,
        };
        self.scaled_tentative(pt, kept.count, ones)
    }

    /// The pattern `pt` (values b, or 1 with `ones`) scaled column by column
    /// to unit norm, and the norms (the coarse vector): by the row counts
    /// for the vector of ones, else through a transpose.
    fn scaled_tentative(
        &self,
        mut pt: SetupCsr,
        naggs: usize,
        ones: bool,
    ) -> Result<(SetupCsr, Vec<f64>)> {
        let nnz = pt.nnz;
        let mut norm = self.setup_zeros::<f64>(naggs)?;
        if ones {
            let mut counts = self.setup_zeros::<u64>(naggs)?;
            // SAFETY: arguments match `tentative_counts`; pt's nnz columns
            // are below naggs, counts holds naggs values.
            setup_launch!(self, "tentative_counts", nnz, l => {
                l.arg(&nnz).arg(&pt.col).arg(&mut counts);
            })?;
            // SAFETY: arguments match `tentative_count_norms`; counts and
            // norm hold naggs values.
            setup_launch!(self, "tentative_count_norms", naggs, l => {
                l.arg(&naggs).arg(&counts).arg(&mut norm);
            })?;
        } else {
            let t = self.setup_transpose(&pt)?;
            // SAFETY: arguments match `tentative_norms`; t describes naggs rows.
            setup_launch!(self, "tentative_norms", naggs, l => {
                l.arg(&naggs).arg(&t.ptr).arg(&t.val).arg(&mut norm);
            })?;
        }
        // SAFETY: arguments match `tentative_scale`; pt's nnz columns are
        // below naggs, norm holds naggs values, val nnz.
        setup_launch!(self, "tentative_scale", nnz, l => {
            l.arg(&nnz).arg(&pt.col).arg(&norm).arg(&mut pt.val);
        })?;
        let norm = self.setup_get(&norm, naggs)?;
        Ok((pt, norm))
    }

    /// The tentative prolongator of smoothed aggregation for k >= 1
    /// near-null-space vectors `b` (`gpuq_amg::prolong::tentative`): row r
    /// holds row r of Q in columns `agg[r / bs] k ..` (Q R the thin QR of
    /// the vectors over r's aggregate), and the coarse level's k vectors (R's
    /// entries). On the device: the upload of the aggregates and vectors,
    /// the pattern's transpose (each aggregate's rows in increasing order),
    /// then one thread per aggregate factorising as the host does (kernel
    /// `tentative_qr`: the same values bit for bit); the coarse vectors come
    /// back; a node in no aggregate (`NOT_AGGREGATED`) gets empty rows, as
    /// on the host. O(nrows k^2). Errors when `b` is empty, a vector does not
    /// match (bs nodes per aggregate entry), or an aggregate is out of range.
    pub fn setup_tentative_qr(
        &self,
        agg: &[u32],
        naggs: usize,
        bs: usize,
        b: &[Vec<f64>],
    ) -> Result<(SetupCsr, Vec<Vec<f64>>)> {
        let (nrows, k) = (agg.len() * bs, b.len());
        if k == 0 {
            return Err(Error::InvalidArgument(
                "the tentative prolongator needs a near-null-space vector".into(),
            ));
        }
        if let Some(v) = b.iter().find(|v| v.len() != nrows) {
            return Err(Error::shape("tentative prolongator", nrows, v.len()));
        }
        // The first vector, the concatenation's head, gives the pattern's
        // values (which the factorisation does not read).
        let d_b = self.setup_put(&b.concat())?;
        let t = self.setup_transpose(&self.aggregate_pattern(agg, naggs, bs, Some(&d_b))?)?;
        // Where a node is in no aggregate its rows are empty: the row
        // pointers from the host (k entries per row of an aggregated node);
        // otherwise the kernel writes them (row r from r k).
        let given = agg.contains(&NOT_AGGREGATED);
        let (mut ptr, nnz) = if given {
            let mut offsets = Vec::with_capacity(nrows + 1);
            offsets.push(0u64);
            for r in 0..nrows {
                let kept = agg[r / bs] != NOT_AGGREGATED;
                offsets.push(offsets[r] + if kept { k as u64 } else { 0 });
            }
            let nnz = offsets[nrows] as usize;
            (self.setup_put(&offsets)?, nnz)
        } else {
            (self.setup_zeros::<u64>(nrows + 1)?, nrows * k)
        };
        let mut q = self.setup_zeros::<f64>(nrows * k)?;
        let mut col = self.setup_zeros::<u32>(nnz)?;
        let mut val = self.setup_zeros::<f64>(nnz)?;
        let mut coarse = self.setup_zeros::<f64>(k * naggs * k)?;
        let ptr_given = u32::from(given);
        // SAFETY: arguments match `tentative_qr`; t is the transposed
        // pattern (naggs rows whose columns, the rows of each aggregate,
        // cover the aggregated rows of 0..nrows once), d_b holds k nrows
        // values, q nrows k, ptr nrows + 1 (the row pointers of nnz entries
        // when ptr_given), col and val nnz, coarse k naggs k zeros.
        setup_launch!(self, "tentative_qr", naggs.max(1), l => {
            l.arg(&naggs).arg(&k).arg(&nrows).arg(&t.ptr).arg(&t.col).arg(&d_b);
            l.arg(&mut q).arg(&mut ptr).arg(&mut col).arg(&mut val).arg(&mut coarse);
            l.arg(&ptr_given);
        })?;
        let coarse = self.setup_get(&coarse, k * naggs * k)?;
        let pt = SetupCsr {
            nrows,
            ncols: naggs * k,
            nnz,
            ptr,
            col,
            val,
        };
        let coarse = (0..k).map(|c| coarse[c * naggs * k..(c + 1) * naggs * k].to_vec());
        Ok((pt, coarse.collect()))
    }

    /// The tentative prolongator's pattern where every node is in an
    /// aggregate (`d_agg` on the device, all below `naggs`): row r holds
    /// b[r] (1 where `d_b` is `None`) in column `d_agg[r / bs]` (kernel
    /// `tentative_pattern`, a thread per row). O(nrows) on the device.
    fn full_pattern(
        &self,
        d_agg: &CudaSlice<u32>,
        (nrows, naggs): (usize, usize),
        bs: usize,
        d_b: Option<&CudaSlice<f64>>,
    ) -> Result<SetupCsr> {
        // The kernels take a null b for the vector of ones.
        let null = 0u64;
        let mut ptr = self.setup_zeros::<u64>(nrows + 1)?;
        let mut col = self.setup_zeros::<u32>(nrows)?;
        let mut val = self.setup_zeros::<f64>(nrows)?;
        // SAFETY: arguments match `tentative_pattern`; d_agg holds nrows / bs
        // aggregates below naggs, d_b at least nrows values, ptr nrows + 1,
        // col and val nrows.
        setup_launch!(self, "tentative_pattern", nrows + 1, l => {
            l.arg(&nrows).arg(&bs).arg(d_agg);
            match d_b {
                Some(b) => l.arg(b),
                None => l.arg(&null),
            };
            l.arg(&mut ptr).arg(&mut col).arg(&mut val);
        })?;
        Ok(SetupCsr {
            nrows,
            ncols: naggs,
            nnz: nrows,
            ptr,
            col,
            val,
        })
    }

    /// The pattern of the tentative prolongator with one value per row:
    /// row r holds column `agg[r / bs]` with value b[r], `b` on the device
    /// (its first nrows values), or 1 for `None` (the vector of ones; kernel
    /// `tentative_pattern`, or [`CudaBackend::partial_pattern`] where a node
    /// is in no aggregate; uploads `agg`). O(nrows). Errors when `b` is shorter than the rows (bs nodes per
    /// aggregate entry) or an aggregate is out of range.
    fn aggregate_pattern(
        &self,
        agg: &[u32],
        naggs: usize,
        bs: usize,
        d_b: Option<&CudaSlice<f64>>,
    ) -> Result<SetupCsr> {
        let nrows = agg.len() * bs;
        let b_len = d_b.map_or(nrows, |b| b.len());
        if bs == 0 || b_len < nrows {
            return Err(Error::shape("tentative prolongator", nrows, b_len));
        }
        // One parallel pass: an index out of range, and whether a node is in
        // no aggregate.
        let (bad, some_out) = agg
            .par_iter()
            .map(|&a| {
                (
                    a as usize >= naggs && a != NOT_AGGREGATED,
                    a == NOT_AGGREGATED,
                )
            })
            .reduce(|| (false, false), |x, y| (x.0 || y.0, x.1 || y.1));
        if bad {
            return Err(Error::InvalidArgument(format!(
                "an aggregate index is not below the {naggs} aggregates"
            )));
        }
        let d_agg = self.setup_put(agg)?;
        match some_out {
            false => self.full_pattern(&d_agg, (nrows, naggs), bs, d_b),
            true => self.partial_pattern(&d_agg, (nrows, naggs), bs, d_b),
        }
    }

    /// [`CudaBackend::full_pattern`] where some nodes are in no aggregate
    /// (`d_agg` u32::MAX; their rows empty): the row offsets by a prefix sum
    /// of the row counts on the device (kernels `tentative_row_counts`,
    /// `tentative_pattern_at`), one 8-byte read back. O(nrows).
    fn partial_pattern(
        &self,
        d_agg: &CudaSlice<u32>,
        (nrows, naggs): (usize, usize),
        bs: usize,
        d_b: Option<&CudaSlice<f64>>,
    ) -> Result<SetupCsr> {
        // The kernels take a null b for the vector of ones.
        let null = 0u64;
        let mut counts = self.setup_zeros::<u64>(nrows)?;
        // SAFETY: arguments match `tentative_row_counts`; d_agg holds nrows /
        // bs aggregates, counts nrows values.
        setup_launch!(self, "tentative_row_counts", nrows, l => {
            l.arg(&nrows).arg(&bs).arg(d_agg).arg(&mut counts);
        })?;
        let (ptr, nnz) = self.setup_offsets(&counts, nrows)?;
        let nnz = nnz as usize;
        let mut col = self.setup_zeros::<u32>(nnz)?;
        let mut val = self.setup_zeros::<f64>(nnz)?;
        // SAFETY: arguments match `tentative_pattern_at`; agg holds nrows / bs
        // aggregates below naggs or u32::MAX, d_b at least nrows values, ptr
        // the nrows + 1 offsets of nnz entries, col and val nnz.
        setup_launch!(self, "tentative_pattern_at", nrows, l => {
            l.arg(&nrows).arg(&bs).arg(d_agg);
            match d_b {
                Some(b) => l.arg(b),
                None => l.arg(&null),
            };
            l.arg(&ptr).arg(&mut col).arg(&mut val);
        })?;
        Ok(SetupCsr {
            nrows,
            ncols: naggs,
            nnz,
            ptr,
            col,
            val,
        })
    }

    /// The global hash tables of a product pass: per row `table_slots(
    /// per_row[i])` slots, at most `cap`, none for rows whose table fits
    /// their group's shared share (`shared_max` slots) or, with `only_max`, whose
    /// count is known; their running totals on the device (m + 1 values) and
    /// the chunks of rows whose tables fit `budget` slots (a longer row
    /// alone) as (first row, end row, slots): one chunk unless the tables are
    /// large, else cut where the running totals (downloaded) pass the budget.
    fn table_chunks(
        &self,
        (per_row, cap, shared_max, only_max): (&CudaSlice<u64>, u64, u64, Option<&CudaSlice<u64>>),
        m: usize,
        budget: u64,
    ) -> Result<(CudaSlice<u64>, Vec<Chunk>)> {
        let mut slots = self.setup_zeros::<u64>(m)?;
        let null = 0u64;
        // SAFETY: arguments match `spgemm_slots`; per_row, only_max and
        // slots hold m values.
        setup_launch!(self, "spgemm_slots", m, l => {
            l.arg(&m).arg(per_row).arg(&cap).arg(&shared_max);
            match only_max {
                Some(c) => l.arg(c),
                None => l.arg(&null),
            };
            l.arg(&mut slots);
        })?;
        let (toff, total) = self.setup_offsets(&slots, m)?;
        let mut chunks = Vec::new();
        if total <= budget {
            chunks.push((0, m, total));
        } else {
            let run = self.setup_get(&toff, m + 1)?;
            let mut lo = 0usize;
            for i in 1..=m {
                if run[i] - run[lo] > budget && i - 1 > lo {
                    chunks.push((lo, i - 1, run[i - 1] - run[lo]));
                    lo = i - 1;
                }
            }
            chunks.push((lo, m, run[m] - run[lo]));
        }
        Ok((toff, chunks))
    }

    /// The passes of [`CudaBackend::setup_spgemm`] (`smooth` None) and of
    /// [`CudaBackend::setup_smoothed_prolongator`] (block size, omega and
    /// inverse diagonal blocks), `lanes` lanes per row or, None, as many as
    /// `group_lanes` picks for each pass from the average rows of B, of the
    /// products and (fill) of the result: the count pass in the groups'
    /// shared tables (again in global tables for the rows that filled
    /// theirs), then the fill pass in shared tables or, for rows of more than
    /// a group's shared share, global ones. Where the rows are too few to
    /// fill the device, both passes give each row up to 8 whole warps and
    /// their shared memory (`rows_spread`, the `_wide` kernels); else, where
    /// the longest row's table would not fit, the fill pass spreads each
    /// group over the shared memory of up to 8 warps (the others idle). Where
    /// every table fits, no global tables are sized at all.
    fn hashed_rows(
        &self,
        a: &SetupCsr,
        b: &SetupCsr,
        smooth: Option<(usize, f64, &CudaSlice<f64>)>,
        budget: u64,
        lanes: Option<u32>,
    ) -> Result<SetupCsr> {
        let m = a.nrows;
        let per = |nnz: usize, rows: usize| nnz as f64 / rows.max(1) as f64;
        let b_row = per(b.nnz, b.nrows);
        let products = match smooth {
            Some((bs, _, _)) => per(a.nnz, a.nrows) * b_row * bs as f64 + b_row,
            None => per(a.nnz, a.nrows) * b_row,
        };
        let mut counts = self.setup_zeros::<u64>(m)?;
        // Rows that filled their count tables, the most distinct columns of
        // a row, and (once summed) the result's entries.
        let mut overflow = self.setup_zeros::<u64>(3)?;
        let whole = (self.setup_zeros::<u64>(0)?, vec![(0, m, 0)]);
        // Given lanes (tests) take one group per row; else too few rows take
        // several whole warps each.
        let spread = match lanes {
            Some(_) => 1,
            None => self.rows_spread(m, COUNT_WIDE_KERNEL)?,
        };
        let pass = RowsPass {
            a,
            b,
            smooth,
            tables: &whole,
            retry: false,
            lanes: match lanes {
                _ if spread > 1 => 32,
                Some(w) => w,
                None => group_lanes(b_row, 2.0 * products, 32.0),
            },
            spread,
            wide: spread > 1,
        };
        self.rows_pass(&pass, None, &mut counts, &mut overflow)?;
        // The row pointers are summed before the overflow is known, so that
        // one read brings back both (the total lands in overflow[2]).
        let mut c_ptr = self.setup_zeros::<u64>(m + 1)?;
        self.setup_offsets_into(&counts, m, &mut c_ptr)?;
        self.inner
            .stream
            .memcpy_dtod(&c_ptr.slice(m..m + 1), &mut overflow.slice_mut(2..3))
            .map_err(dev("copying a total"))?;
        let found = self.setup_get(&overflow, 3)?;
        let (mut most, mut nnz) = (found[1], found[2]);
        if found[0] > 0 {
            // Rows with more distinct columns than a shared table holds:
            // counted again in global tables sized by their products.
            let bound = self.product_bounds(a, b, smooth)?;
            let tables = self.table_chunks((&bound, u64::MAX, 0, Some(&counts)), m, budget)?;
            let pass = RowsPass {
                tables: &tables,
                retry: true,
                ..pass
            };
            self.rows_pass(&pass, None, &mut counts, &mut overflow)?;
            most = self.setup_get_at(&overflow, 1)?;
            (c_ptr, nnz) = self.setup_offsets(&counts, m)?;
        }
        // SAFETY: the fill pass writes each row's counted entries, all nnz.
        let (mut c_col, mut c_val) = unsafe {
            (
                self.setup_uninit::<u32>(nnz as usize)?,
                self.setup_uninit::<f64>(nnz as usize)?,
            )
        };
        let wide = match lanes {
            Some(_) => 1,
            None => self.rows_spread(m, FILL_WIDE_KERNEL)?,
        };
        let may_spread = lanes.is_none();
        let lanes = match lanes {
            _ if wide > 1 => 32,
            Some(w) => w,
            None => {
                let table = 2.0 * per(nnz as usize, m);
                group_lanes(b_row, table, FILL_SHARED_SLOTS_PER_LANE as f64)
            }
        };
        let room = |spread: u32| FILL_SHARED_SLOTS_PER_LANE * u64::from(lanes * spread);
        let need = table_slots(most);
        let mut spread = wide;
        if wide == 1 && may_spread {
            // Not wide: where the longest row's table does not fit, idle
            // warps lend their shared memory while the rows still fill the
            // device.
            let resident = self.spgemm_resident_blocks(FILL_KERNEL)? * THREADS as usize;
            while spread < 8 && room(spread) < need && m * (lanes * 2 * spread) as usize <= resident
            {
                spread *= 2;
            }
        }
        let sized;
        let tables = if need <= room(spread) {
            &whole
        } else {
            sized = self.table_chunks((&counts, u64::MAX, room(spread), None), m, budget)?;
            &sized
        };
        let pass = RowsPass {
            tables,
            retry: false,
            lanes,
            spread,
            wide: wide > 1,
            ..pass
        };
        let fill = Some((&c_ptr, &mut c_col, &mut c_val));
        self.rows_pass(&pass, fill, &mut counts, &mut overflow)?;
        Ok(SetupCsr {
            nrows: m,
            ncols: b.ncols,
            nnz: nnz as usize,
            ptr: c_ptr,
            col: c_col,
            val: c_val,
        })
    }

    /// Whole warps per row of a wide product pass (`RowsPass::spread`, a
    /// power of two up to 8) for `m` rows: more than one where the rows are
    /// so few that a warp each would leave most of the device's resident
    /// threads of `kernel` idle (each row then takes as many warps as keep
    /// `m` rows' lanes within half the resident threads). Two driver calls.
    fn rows_spread(&self, m: usize, kernel: &str) -> Result<u32> {
        let resident = self.spgemm_resident_blocks(kernel)? * THREADS as usize;
        let mut spread = 1u32;
        while spread < 8 && m.saturating_mul(64 * 2 * spread as usize) <= resident {
            spread *= 2;
        }
        Ok(spread)
    }

    /// Blocks of the product pass `kernel` (one of the four `spgemm_count_*`
    /// and `spgemm_fill_*` kernels) resident on the device at once: the passes run
    /// grid-stride with only these (a second, partial wave would leave most
    /// SMs idle). Two driver calls.
    fn spgemm_resident_blocks(&self, kernel: &str) -> Result<usize> {
        let f = self.function(kernel)?;
        Ok(self.blocks_per_sm(&f)? * self.inner.info.multiprocessors)
    }

    /// The products of each row of A B (or of the smoothed prolongator), at
    /// most B's column count: `spgemm_bound`, one thread per row.
    fn product_bounds(
        &self,
        a: &SetupCsr,
        b: &SetupCsr,
        smooth: Option<(usize, f64, &CudaSlice<f64>)>,
    ) -> Result<CudaSlice<u64>> {
        let m = a.nrows;
        let null = 0u64;
        let bs = smooth.map_or(1, |s| s.0);
        let mut bound = self.setup_zeros::<u64>(m)?;
        let b_cols = b.ncols as u64;
        // SAFETY: arguments match `spgemm_bound`; A's arrays describe m rows
        // whose columns index B's rows (and, smoothing, A is square with B's
        // rows and dinv holds bs^2 values per node); `bound` holds m values.
        setup_launch!(self, "spgemm_bound", m, l => {
            l.arg(&m).arg(&bs);
            match smooth {
                Some((_, _, d)) => l.arg(d),
                None => l.arg(&null),
            };
            l.arg(&a.ptr).arg(&a.col).arg(&b.ptr).arg(&b_cols).arg(&mut bound);
        })?;
        Ok(bound)
    }

    /// One pass over the chunks of `pass.tables`: the count pass
    /// (`spgemm_count_*`; `fill` None: each row's distinct columns into `counts`,
    /// rows that fill their table counted in `overflow`; with `pass.retry`
    /// only the rows marked so), or the fill pass (`spgemm_fill_*`; `fill` the row pointers,
    /// the prefix sum of the counts, and the columns and values to write).
    /// Allocates the chunks' largest global tables (values only to fill).
    fn rows_pass(
        &self,
        pass: &RowsPass<'_>,
        fill: Option<(&CudaSlice<u64>, &mut CudaSlice<u32>, &mut CudaSlice<f64>)>,
        counts: &mut CudaSlice<u64>,
        overflow: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let RowsPass {
            a,
            b,
            smooth,
            tables: (toff, chunks),
            retry,
            lanes,
            spread,
            wide,
        } = *pass;
        let null = 0u64;
        let (bs, omega) = smooth.map_or((1, 0.0), |s| (s.0, s.1));
        let biggest = chunks.iter().map(|c| c.2).max().unwrap_or(0) as usize;
        // SAFETY: a group clears its row's table before it reads any slot.
        let (mut tkeys, mut tvals) = unsafe {
            (
                self.setup_uninit::<u32>(biggest)?,
                self.setup_uninit::<f64>(if fill.is_some() { biggest } else { 0 })?,
            )
        };
        let kernel = match (fill.is_some(), wide) {
            (true, false) => FILL_KERNEL,
            (true, true) => FILL_WIDE_KERNEL,
            (false, false) => COUNT_KERNEL,
            (false, true) => COUNT_WIDE_KERNEL,
        };
        let (mut no_col, mut no_val) = (self.setup_zeros::<u32>(0)?, self.setup_zeros::<f64>(0)?);
        let (c_ptr, c_col, c_val) = match fill {
            Some((p, c, v)) => (Some(p), c, v),
            None => (None, &mut no_col, &mut no_val),
        };
        let (retry, b_cols) = (u32::from(retry), b.ncols as u64);
        let f = self.function(kernel)?;
        let resident = self.spgemm_resident_blocks(kernel)?;
        for &(lo, hi, slots) in chunks {
            let rows = hi - lo;
            let d_toff = (slots > 0).then(|| toff.slice(lo..hi + 1));
            // SAFETY: arguments match the kernel's (`group_rows`): rows lo..hi of A
            // whose columns index B's rows (smoothing: as for
            // `spgemm_bound`); the toff view (when given) holds rows + 1
            // running totals whose span is at most the tables' length;
            // counts holds one value per row of A. The count pass (null
            // c_ptr) writes no values; in the fill pass the tables are sized
            // from the exact counts (never full), c_ptr is the prefix sum of
            // the counts and c_col, c_val hold its total. `lanes` (a power
            // of two up to 32) lanes per row.
            let threads = rows.saturating_mul((lanes * spread) as usize);
            let cfg = Self::cfg(threads.div_ceil(THREADS as usize).clamp(1, resident) as u32);
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&lanes)
                .arg(&spread)
                .arg(&lo)
                .arg(&rows)
                .arg(&retry)
                .arg(&bs)
                .arg(&omega);
            match smooth {
                Some((_, _, d)) => l.arg(d),
                None => l.arg(&null),
            };
            l.arg(&a.ptr).arg(&a.col).arg(&a.val);
            l.arg(&b.ptr).arg(&b.col).arg(&b.val).arg(&b_cols);
            match &d_toff {
                Some(t) => l.arg(t),
                None => l.arg(&null),
            };
            l.arg(&mut tkeys).arg(&mut tvals);
            match c_ptr {
                Some(p) => l.arg(p),
                None => l.arg(&null),
            };
            l.arg(&mut *counts)
                .arg(&mut *overflow)
                .arg(&mut *c_col)
                .arg(&mut *c_val);
            // SAFETY: as above.
            unsafe { l.launch(cfg) }.map_err(dev(kernel))?;
            self.inner.stats.launch(kernel);
        }
        Ok(())
    }

    /// alpha A + beta B on the device (same shape; the union of the
    /// patterns, each value as the host's `add` computes it). Count pass,
    /// prefix sum, fill pass: O(nnz(A) + nnz(B)). Errors on different shapes.
    pub fn setup_add(&self, alpha: f64, a: &SetupCsr, beta: f64, b: &SetupCsr) -> Result<SetupCsr> {
        if a.shape() != b.shape() {
            return Err(Error::shape(
                "sparse add",
                format!("{:?}", a.shape()),
                format!("{:?}", b.shape()),
            ));
        }
        self.add_rows(alpha, a, beta, b, a.ncols)
    }

    /// [left | right] on the device, `right` (a host matrix of `left`'s
    /// rows, a rank's ghost block) given by its non-empty rows: `rows`
    /// (increasing) and their entries `block` (row k being row `rows[k]`).
    /// `block` is uploaded, its rows expanded there
    /// ([`CudaBackend::setup_expand_rows`]), then each row of `left` joined
    /// by the same row of `right`, its columns numbered after `left`'s
    /// (kernel `csr_beside`: a group of lanes per row copying both; every
    /// value kept bit for bit). Errors as `setup_expand_rows` with `left`'s
    /// rows, or when the columns exceed 32 bits. O(nnz + rows log rows) on
    /// the device, `right`'s rows and entries over PCIe.
    pub fn setup_beside(
        &self,
        left: &SetupCsr,
        (rows, block): (&[u32], &Csr<f64>),
    ) -> Result<SetupCsr> {
        let ncols = left.ncols + block.ncols();
        if u32::try_from(ncols).is_err() {
            return Err(Error::InvalidArgument(format!(
                "[A | B] of {ncols} columns (at most 2^32 - 1)"
            )));
        }
        let right = self.setup_expand_rows(self.setup_upload(block)?, rows, left.nrows)?;
        let (m, nnz) = (left.nrows, left.nnz + right.nnz);
        // SAFETY: `csr_beside` writes every pointer 0..=m and, row by row,
        // every entry below ptr[m] = nnz.
        let (mut ptr, mut col, mut val) = unsafe {
            (
                self.setup_uninit::<u64>(m + 1)?,
                self.setup_uninit::<u32>(nnz)?,
                self.setup_uninit::<f64>(nnz)?,
            )
        };
        let shift = left.ncols as u32;
        // a group of ROW_LANES lanes per row
        let (f, cfg) = self.launch_1d("csr_beside", m.max(1) * ROW_LANES)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&m)
            .arg(&left.ptr)
            .arg(&left.col)
            .arg(&left.val)
            .arg(&right.ptr)
            .arg(&right.col)
            .arg(&right.val)
            .arg(&shift)
            .arg(&mut ptr)
            .arg(&mut col)
            .arg(&mut val);
        // SAFETY: arguments match `csr_beside`; left and right have m rows
        // (m + 1 pointers each), ptr m + 1 values, col and val the nnz
        // entries of both.
        unsafe { l.launch(cfg) }.map_err(dev("csr_beside"))?;
        self.inner.stats.launch("csr_beside");
        Ok(SetupCsr {
            nrows: m,
            ncols,
            nnz,
            ptr,
            col,
            val,
        })
    }

    /// The first `rows` rows of `a` (all its columns) as a new device
    /// matrix: the leading parts of its arrays copied on the device, one
    /// 8-byte read back (where those rows end). Errors when `rows` exceeds
    /// `a`'s rows. O(rows + their entries) on the device.
    pub fn setup_first_rows(&self, a: &SetupCsr, rows: usize) -> Result<SetupCsr> {
        self.setup_stack_below(
            a,
            rows,
            &Csr::try_new(0, a.ncols, vec![0], Vec::new(), Vec::new())?,
        )
    }

    /// alpha A + beta B row by row (A and B of the same rows, any columns
    /// below `ncols`), a matrix of `ncols` columns: `csr_add`'s count pass,
    /// the prefix sum, its fill pass.
    fn add_rows(
        &self,
        alpha: f64,
        a: &SetupCsr,
        beta: f64,
        b: &SetupCsr,
        ncols: usize,
    ) -> Result<SetupCsr> {
        let m = a.nrows;
        let (f, cfg) = self.launch_1d("csr_add", m)?;
        let mut out = CountedRows::new(self, m)?;
        for pass in 0..2 {
            out.prepare(self, pass)?;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&m)
                .arg(&alpha)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&beta)
                .arg(&b.ptr)
                .arg(&b.col)
                .arg(&b.val);
            out.push_args(&mut l);
            // SAFETY: arguments match `csr_add`; A and B have m rows; the fill
            // pass's c_ptr is the prefix sum of the counts, c_col and c_val
            // hold its total.
            unsafe { l.launch(cfg) }.map_err(dev("csr_add"))?;
            self.inner.stats.launch("csr_add");
        }
        out.finish(ncols)
    }

    /// The block of `a`'s first `rows` rows on the columns `cols`, its
    /// columns numbered from `cols.start` (a rank's owned block of its rows
    /// over owned then ghost columns, or of a prolongator's rows over the
    /// rank's coarse columns), on the device: a count per row, their prefix
    /// sum, the entries copied in order (kernel `csr_column_range`, a group
    /// of lanes per row). Errors when `rows` exceeds `a`'s rows or `cols`
    /// does not lie within its columns. O(rows + nnz) on the device, 8 bytes
    /// back.
    pub fn setup_column_range(
        &self,
        a: &SetupCsr,
        rows: usize,
        cols: std::ops::Range<usize>,
    ) -> Result<SetupCsr> {
        if rows > a.nrows || cols.start > cols.end || cols.end > a.ncols {
            return Err(Error::InvalidArgument(format!(
                "column range: rows ..{rows}, columns {cols:?} of a {} x {} matrix",
                a.nrows, a.ncols
            )));
        }
        let mut out = CountedRows::new(self, rows)?;
        for pass in 0..2 {
            out.prepare(self, pass)?;
            self.column_range_pass(a, rows, (&cols, true), &mut out)?;
        }
        out.finish(cols.len())
    }

    /// One pass of kernel `csr_column_range` over `a`'s first `rows` rows
    /// (a group of `ROW_LANES` lanes per row) for `out`: its count pass
    /// before `out`'s prefix sum, its fill pass after; the entries inside
    /// `cols` (`inside`) or outside them. The caller has checked `rows` and
    /// `cols` against `a`.
    fn column_range_pass(
        &self,
        a: &SetupCsr,
        rows: usize,
        (cols, inside): (&std::ops::Range<usize>, bool),
        out: &mut CountedRows,
    ) -> Result<()> {
        let (lo, hi, inside) = (cols.start as u32, cols.end as u32, u32::from(inside));
        let (f, cfg) = self.launch_1d("csr_column_range", rows * ROW_LANES)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&rows)
            .arg(&a.ptr)
            .arg(&a.col)
            .arg(&a.val)
            .arg(&lo)
            .arg(&hi)
            .arg(&inside);
        out.push_args(&mut l);
        // SAFETY: arguments match `csr_column_range`; A has at least `rows`
        // rows (checked by the callers), out's counts `rows` values; the fill
        // pass's c_ptr is the prefix sum of the counts, c_col and c_val hold
        // its total.
        unsafe { l.launch(cfg) }.map_err(dev("csr_column_range"))?;
        self.inner.stats.launch("csr_column_range");
        Ok(())
    }

    /// The rows `idx` of `a` (in that order) on the host: gathered on the
    /// device (kernel `csr_select_rows`: a count per row, their prefix sum,
    /// the rows copied), only they downloaded. Errors name an index not
    /// below `a`'s rows. O(idx + their entries) on the device and across.
    pub fn setup_select_rows(&self, a: &SetupCsr, idx: &[usize]) -> Result<Csr<f64>> {
        gpuq_core::check_indices("select_rows", a.nrows, idx)?;
        let wide: Vec<u64> = idx.iter().map(|&i| i as u64).collect();
        let d_idx = self.setup_put(&wide)?;
        self.setup_download(&self.select_rows(a, &d_idx, idx.len())?)
    }

    /// The rows `d_idx[0..n]` of `a` (each below its rows), in that order,
    /// on the device: `csr_select_rows`' count pass, the prefix sum, its
    /// fill pass.
    fn select_rows(&self, a: &SetupCsr, d_idx: &CudaSlice<u64>, n: usize) -> Result<SetupCsr> {
        let (f, cfg) = self.launch_1d("csr_select_rows", n)?;
        let mut out = CountedRows::new(self, n)?;
        for pass in 0..2 {
            out.prepare(self, pass)?;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&n).arg(d_idx).arg(&a.ptr).arg(&a.col).arg(&a.val);
            out.push_args(&mut l);
            // SAFETY: arguments match `csr_select_rows`; d_idx holds n
            // indices below a's rows (the callers' checks); the fill pass's
            // c_ptr is the prefix sum of the counts, c_col and c_val hold
            // its total.
            unsafe { l.launch(cfg) }.map_err(dev("csr_select_rows"))?;
            self.inner.stats.launch("csr_select_rows");
        }
        out.finish(a.ncols)
    }

    /// The entries of `a`'s first `rows` rows outside the columns `cols`,
    /// their columns kept (a rank's entries on other ranks' columns), by
    /// the rows that hold any: those rows, increasing, and their entries (row
    /// k of the matrix being row `rows[k]`). On the device: the entries
    /// outside counted per row (`csr_column_range`'s count pass) and summed,
    /// nothing more where there are none; else the rows holding any listed
    /// (`listed_rows_flags`, a prefix sum, `listed_rows_scatter`) and
    /// only those cut (`csr_outside_listed`), so that only they are read
    /// twice and cross PCIe. Errors as [`CudaBackend::setup_column_range`].
    /// O(rows + nnz) on the device, O(the rows holding entries outside and
    /// their entries) across.
    pub fn setup_outside_rows(
        &self,
        a: &SetupCsr,
        rows: usize,
        cols: std::ops::Range<usize>,
    ) -> Result<(Vec<u32>, Csr<f64>)> {
        if rows > a.nrows || cols.start > cols.end || cols.end > a.ncols {
            return Err(Error::InvalidArgument(format!(
                "column range: rows ..{rows}, columns {cols:?} of a {} x {} matrix",
                a.nrows, a.ncols
            )));
        }
        let (lo, hi) = (cols.start as u32, cols.end as u32);
        // The count pass alone: each row's entries outside.
        let mut counted = CountedRows::new(self, rows)?;
        self.column_range_pass(a, rows, (&cols, false), &mut counted)?;
        let (offs, total) = self.setup_offsets(&counted.counts, rows)?;
        if total == 0 {
            return Ok((
                Vec::new(),
                Csr::try_new(0, a.ncols, vec![0], Vec::new(), Vec::new())?,
            ));
        }
        let (filled, k) = self.list_rows(&offs, rows, false)?;
        let nnz = total as usize;
        // SAFETY: `csr_outside_listed` writes the k + 1 pointers and, row by
        // row, the `total` entries.
        let (mut c_ptr, mut c_col, mut c_val) = unsafe {
            (
                self.setup_uninit::<u64>(k + 1)?,
                self.setup_uninit::<u32>(nnz)?,
                self.setup_uninit::<f64>(nnz)?,
            )
        };
        let (f, cfg) = self.launch_1d("csr_outside_listed", k * ROW_LANES)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&k)
            .arg(&filled)
            .arg(&a.ptr)
            .arg(&a.col)
            .arg(&a.val)
            .arg(&lo)
            .arg(&hi)
            .arg(&offs)
            .arg(&total)
            .arg(&mut c_ptr)
            .arg(&mut c_col)
            .arg(&mut c_val);
        // SAFETY: arguments match `csr_outside_listed`; filled lists k rows
        // below `rows`, offs their entries' places among `total`.
        unsafe { l.launch(cfg) }.map_err(dev("csr_outside_listed"))?;
        self.inner.stats.launch("csr_outside_listed");
        let block = self.setup_download(&SetupCsr {
            nrows: k,
            ncols: a.ncols,
            nnz,
            ptr: c_ptr,
            col: c_col,
            val: c_val,
        })?;
        let rows = self.setup_get(&filled, k)?;
        Ok((rows.into_iter().map(|r| r as u32).collect(), block))
    }

    /// The `nrows`-row matrix whose non-empty rows are `rows` (increasing,
    /// below `nrows`) with the entries of `block`'s rows (row k of `block`
    /// being row `rows[k]`): `block`'s columns and values kept and its row
    /// pointers expanded on the device (kernel `csr_expand_rows`, a binary
    /// search per row). Errors when `rows` does not have one index per row
    /// of `block`, or does not increase below `nrows`. O(nrows log rows)
    /// on the device, `rows` across.
    pub fn setup_expand_rows(
        &self,
        block: SetupCsr,
        rows: &[u32],
        nrows: usize,
    ) -> Result<SetupCsr> {
        let k = rows.len();
        if k != block.nrows
            || !rows.windows(2).all(|w| w[0] < w[1])
            || rows.last().is_some_and(|&r| r as usize >= nrows)
        {
            return Err(Error::InvalidArgument(format!(
                "expanded rows: {k} increasing rows below {nrows} for a block of {} rows",
                block.nrows
            )));
        }
        let d_rows = self.setup_put(rows)?;
        // SAFETY: every pointer 0..=nrows is written by `csr_expand_rows`.
        let mut ptr = unsafe { self.setup_uninit::<u64>(nrows + 1)? };
        // SAFETY: d_rows holds k increasing rows, block.ptr k + 1 pointers,
        // ptr nrows + 1 (one thread per pointer).
        setup_launch!(self, "csr_expand_rows", nrows + 1, l => {
            l.arg(&nrows).arg(&k).arg(&d_rows).arg(&block.ptr).arg(&mut ptr);
        })?;
        Ok(SetupCsr {
            nrows,
            ptr,
            ..block
        })
    }

    /// The largest magnitude of `a`'s values (0 without values, NaN where
    /// one is NaN: the host's maximum that lets a NaN through), on the
    /// device (kernel `largest_magnitude`: a grid-stride maximum per
    /// thread, then one atomic maximum of the bits). O(nnz) on the device,
    /// 8 bytes back.
    pub fn setup_largest_magnitude(&self, a: &SetupCsr) -> Result<f64> {
        let mut out = self.setup_put(&[0u64])?;
        let nnz = a.nnz;
        // SAFETY: arguments match `largest_magnitude`; a.val holds nnz
        // values and out one u64.
        setup_launch!(self, "largest_magnitude", nnz, l => {
            l.arg(&nnz).arg(&a.val).arg(&mut out);
        })?;
        Ok(f64::from_bits(self.setup_get_at(&out, 0)?))
    }

    /// A rank's rows `a` (global columns) as its extended rows: each row's
    /// entries on the rank's columns `own` first, numbered from 0, then
    /// those on the sorted columns `ghosts` (every other column of `a`),
    /// numbered `own.len()` plus their index there; `own.len() +
    /// ghosts.len()` columns, `a`'s row pointers copied, followed by
    /// `padding` empty rows (kernel `csr_extend_columns`, per row the host
    /// split's `gpuq_kernels::amg::extend_row`). Errors when `own` does not
    /// lie within `a`'s columns or a ghost column does not fit in u32. A
    /// column of `a` outside `own` and not in `ghosts` gives a wrong index,
    /// never a write out of bounds. O(rows + nnz log ghosts) on the device,
    /// the ghost columns and `padding` row pointers across.
    pub fn setup_extend_columns(
        &self,
        a: &SetupCsr,
        own: std::ops::Range<usize>,
        ghosts: &[usize],
        padding: usize,
    ) -> Result<SetupCsr> {
        if own.start > own.end || own.end > a.ncols || u32::try_from(a.ncols).is_err() {
            return Err(Error::InvalidArgument(format!(
                "extended rows: own columns {own:?} of a {} x {} matrix",
                a.nrows, a.ncols
            )));
        }
        let narrow: Vec<u32> = ghosts
            .iter()
            .map(|&g| u32::try_from(g))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::InvalidArgument("a ghost column beyond u32".into()))?;
        let d_ghosts = self.setup_put(&narrow)?;
        let (nrows, nnz, nghosts) = (a.nrows, a.nnz, narrow.len());
        let (lo, hi) = (own.start as u32, own.end as u32);
        // SAFETY: every entry is written by `csr_extend_columns` below (each
        // row's entries are its own, inside or outside `own`).
        let mut col = unsafe { self.setup_uninit::<u32>(nnz)? };
        // SAFETY: as for `col`.
        let mut val = unsafe { self.setup_uninit::<f64>(nnz)? };
        // SAFETY: arguments match `csr_extend_columns`; a's arrays hold its
        // rows, col and val nnz entries, d_ghosts nghosts columns.
        // a group of ROW_LANES lanes per row
        setup_launch!(self, "csr_extend_columns", nrows * ROW_LANES, l => {
            l.arg(&nrows)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&lo)
                .arg(&hi)
                .arg(&d_ghosts)
                .arg(&nghosts)
                .arg(&mut col)
                .arg(&mut val);
        })?;
        let tail = vec![nnz as u64; padding];
        Ok(SetupCsr {
            nrows: nrows + padding,
            ncols: own.len() + nghosts,
            nnz,
            ptr: self.setup_put_below(Some((&a.ptr, nrows + 1)), &[&tail])?,
            col,
            val,
        })
    }

    /// `a` with `offset` added to every column index and `ncols` columns
    /// (a rank's tentative prolongator numbered by the global coarse
    /// columns): the row pointers and values copied on the device, the
    /// columns shifted on the way (kernel `csr_shift_columns`). Errors when
    /// a shifted column would not lie below `ncols`. O(rows + nnz) on the
    /// device.
    pub fn setup_shift_columns(
        &self,
        a: &SetupCsr,
        offset: usize,
        ncols: usize,
    ) -> Result<SetupCsr> {
        if offset.saturating_add(a.ncols) > ncols || u32::try_from(ncols).is_err() {
            return Err(Error::InvalidArgument(format!(
                "columns shifted by {offset}: {} columns do not fit in {ncols}",
                a.ncols
            )));
        }
        let (nnz, offset32) = (a.nnz, offset as u32);
        // SAFETY: every entry is written by `csr_shift_columns` below.
        let mut col = unsafe { self.setup_uninit::<u32>(nnz)? };
        // SAFETY: arguments match `csr_shift_columns`; a.col and col hold nnz
        // values, each below a.ncols, so below ncols once shifted (checked
        // above).
        setup_launch!(self, "csr_shift_columns", nnz, l => {
            l.arg(&nnz).arg(&a.col).arg(&offset32).arg(&mut col);
        })?;
        let stream = &self.inner.stream;
        Ok(SetupCsr {
            nrows: a.nrows,
            ncols,
            nnz,
            ptr: stream
                .clone_dtod(&a.ptr)
                .map_err(dev("copy of row pointers"))?,
            col,
            val: stream.clone_dtod(&a.val).map_err(dev("copy of values"))?,
        })
    }

    /// A^T on the device: column counts (one atomic per column met in a
    /// warp's 32 entries, handing each entry a place in its column), their
    /// prefix sum, a scatter of (row, value) pairs to those places (one
    /// 16-byte store per entry), and each row's entries put in column order
    /// by one warp per row, so the result is the host's transpose exactly.
    /// O(nnz) plus O(len^2 / 32) per row for the ranks; 20 bytes of scratch
    /// per entry.
    pub fn setup_transpose(&self, a: &SetupCsr) -> Result<SetupCsr> {
        let (m, n, nnz) = (a.nrows, a.ncols, a.nnz);
        let mut counts = self.setup_zeros::<u64>(n)?;
        // SAFETY: every entry is written by `csr_column_counts` below.
        let mut pos = unsafe { self.setup_uninit::<u32>(nnz)? };
        // SAFETY: arguments match `csr_column_counts`; columns are below n,
        // pos holds nnz values.
        setup_launch!(self, "csr_column_counts", nnz, l => {
            l.arg(&nnz).arg(&a.col).arg(&mut counts).arg(&mut pos);
        })?;
        // The total is nnz: nothing to read back.
        let mut t_ptr = self.setup_zeros::<u64>(n + 1)?;
        self.setup_offsets_into(&counts, n, &mut t_ptr)?;
        // SAFETY: the scatter writes every pair (the places are distinct
        // per column and fill each column's range).
        let mut entries = unsafe { self.setup_uninit::<u64>(2 * nnz)? };
        // SAFETY: arguments match `csr_transpose_scatter`; t_ptr is the prefix
        // sum of the column counts and pos the places within them, so every
        // slot lies in `entries` (2 nnz values, 16-byte aligned as every
        // allocation is).
        setup_launch!(self, "csr_transpose_scatter", m, l => {
            l.arg(&m)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&t_ptr)
                .arg(&pos)
                .arg(&mut entries);
        })?;
        drop(pos);
        // SAFETY: the ranks write every entry of every row.
        let (mut t_col, mut t_val) = unsafe {
            (
                self.setup_uninit::<u32>(nnz)?,
                self.setup_uninit::<f64>(nnz)?,
            )
        };
        // SAFETY: arguments match `csr_rank_rows`; t_ptr describes n rows of
        // the scattered pairs, the outputs hold nnz values; one warp per row.
        setup_launch!(self, "csr_rank_rows", n.saturating_mul(32), l => {
            l.arg(&n).arg(&t_ptr).arg(&entries).arg(&mut t_col).arg(&mut t_val);
        })?;
        Ok(SetupCsr {
            nrows: n,
            ncols: m,
            nnz,
            ptr: t_ptr,
            col: t_col,
            val: t_val,
        })
    }

    /// Each node's aggregate (a download of 4 bytes per node).
    pub fn setup_aggregates_download(&self, kept: &DeviceAggregates) -> Result<Vec<u32>> {
        self.setup_get(&kept.agg, kept.nodes)
    }

    /// The aggregates of smoothed aggregation, on the device and left there
    /// ([`DeviceAggregates`]): the symmetrised strong-connection graph of
    /// the bs x bs block norms of A (test e_kl^2 >= eps e_kk e_ll), then
    /// rounds of the distance-2 maximal-independent-set keys (two
    /// max-propagations and an update per round, all rounds in one
    /// cooperative launch: no read back until the last), the roots numbered
    /// in node order (a prefix sum), and the two assignment passes: each
    /// node's aggregate and the number of aggregates (the same as the host's
    /// `mis2_aggregates` of its `strong_graph`), with the isolated nodes (no
    /// strong connection, increasing) listed on the device and brought to
    /// the host (8 bytes each) only where there are some. 32 bytes back
    /// besides. Errors where a node is left without an aggregate.
    ///
    /// Returns `Ok(None)` where the host must decide: a block size above
    /// `MAX_SETUP_BLOCK`, a zero diagonal block (the host reports it), or a
    /// block pattern that is not symmetric (the host symmetrises any pattern).
    pub fn setup_aggregates_kept(
        &self,
        a: &SetupCsr,
        bs: usize,
        eps: f64,
    ) -> Result<Option<DeviceAggregates>> {
        self.aggregates_on(a, (bs, eps), false)
    }

    /// [`CudaBackend::setup_aggregates_kept`] with the isolated nodes dropped
    /// there, one process's rule (`gpuq_amg::aggregate::drop_isolated`: an
    /// isolated node in no aggregate, the other aggregates renumbered in
    /// order; kernels `amg_drop_mark`, `amg_drop_renumber`): nothing comes
    /// back but counts, and the result lists no isolated node.
    pub fn setup_aggregates_dropped(
        &self,
        a: &SetupCsr,
        bs: usize,
        eps: f64,
    ) -> Result<Option<DeviceAggregates>> {
        self.aggregates_on(a, (bs, eps), true)
    }

    /// The device aggregation of `a` (blocks of `bs`, strength threshold
    /// `eps`), its isolated nodes listed on the host or, with `drop`,
    /// dropped on the device.
    fn aggregates_on(
        &self,
        a: &SetupCsr,
        (bs, eps): (usize, f64),
        drop: bool,
    ) -> Result<Option<DeviceAggregates>> {
        if bs == 0 || bs > MAX_SETUP_BLOCK || a.nrows % bs != 0 || a.nrows != a.ncols {
            return Ok(None);
        }
        let nodes = a.nrows / bs;
        let mut diag = self.setup_zeros::<f64>(nodes)?;
        // SAFETY: arguments match `amg_block_diag_norm`; A is square with
        // nodes x bs rows; diag holds `nodes` values.
        setup_launch!(self, "amg_block_diag_norm", nodes, l => {
            l.arg(&nodes)
                .arg(&bs)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&mut diag);
        })?;
        // Scalar rows: a group of lanes per node, a quarter warp for short
        // rows (a 7-point stencil's), a warp for long ones (coarse levels').
        let lanes = if a.nnz <= STRENGTH_SHORT_ROWS * nodes {
            8
        } else {
            32
        };
        let (f, cfg) = match bs {
            1 => self.launch_1d("amg_strength_rows", nodes * lanes)?,
            _ => self.launch_1d("amg_strength", nodes)?,
        };
        let mut counts = self.setup_zeros::<u64>(nodes)?;
        let mut flags = self.setup_zeros::<u64>(3)?;
        let mut adj = self.setup_zeros::<u32>(0)?;
        let null = 0u64;
        let mut gptr: Option<CudaSlice<u64>> = None;
        let mut isolated_count = 0;
        for pass in 0..2 {
            if pass == 1 {
                let f = self.setup_get(&flags, 3)?;
                if f[0] != 0 || f[1] != 0 {
                    return Ok(None);
                }
                isolated_count = f[2];
                let (p, total) = self.setup_offsets(&counts, nodes)?;
                adj = self.setup_zeros::<u32>(total as usize)?;
                gptr = Some(p);
            }
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&nodes);
            match bs {
                1 => l.arg(&lanes),
                _ => l.arg(&bs),
            };
            l.arg(&eps).arg(&a.ptr).arg(&a.col).arg(&a.val).arg(&diag);
            match &gptr {
                Some(p) => l.arg(p),
                None => l.arg(&null),
            };
            l.arg(&mut counts).arg(&mut adj).arg(&mut flags);
            // SAFETY: arguments match `amg_strength` (`amg_strength_rows`
            // for bs = 1, which takes `lanes` for bs); bs <= MAX_SETUP_BLOCK;
            // the fill pass's gptr is the prefix sum of the counts and adj
            // holds its total.
            unsafe { l.launch(cfg) }.map_err(dev("amg_strength"))?;
            self.inner.stats.launch(match bs {
                1 => "amg_strength_rows",
                _ => "amg_strength",
            });
        }
        let gptr = gptr.ok_or_else(|| Error::Device("strength: no graph".into()))?;
        // Rounds of the maximal independent set.
        let mut keys = self.setup_zeros::<u64>(nodes)?;
        let mut near = self.setup_zeros::<u64>(nodes)?;
        let mut far = self.setup_zeros::<u64>(nodes)?;
        // SAFETY: arguments match `amg_mis2_init`; keys holds `nodes` values.
        setup_launch!(self, "amg_mis2_init", nodes, l => {
            l.arg(&nodes).arg(&mut keys);
        })?;
        let mut left = self.setup_zeros::<u64>(2)?;
        let mut bar = self.setup_zeros::<u32>(2)?;
        let (f, cfg) = self.cooperative("amg_mis2_rounds", nodes)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&nodes)
            .arg(&gptr)
            .arg(&adj)
            .arg(&mut keys)
            .arg(&mut near)
            .arg(&mut far)
            .arg(&mut left)
            .arg(&mut bar);
        // SAFETY: arguments match `amg_mis2_rounds`; keys, near and far hold
        // `nodes` values, left and bar two zeros; the graph's neighbours
        // index the nodes; a cooperative launch of co-resident blocks.
        unsafe { l.launch_cooperative(cfg) }.map_err(dev("amg_mis2_rounds"))?;
        self.inner.stats.launch("amg_mis2_rounds");
        // Number the roots in node order: a prefix sum of the root flags.
        let mut roots = self.setup_zeros::<u64>(nodes)?;
        // SAFETY: arguments match `amg_mis2_roots`; both hold `nodes` values.
        setup_launch!(self, "amg_mis2_roots", nodes, l => {
            l.arg(&nodes).arg(&keys).arg(&mut roots);
        })?;
        let (prefix, count) = self.setup_offsets(&roots, nodes)?;
        let mut number = self.setup_zeros::<u32>(nodes)?;
        // SAFETY: arguments match `amg_root_numbers`; roots and number hold
        // `nodes` values, prefix nodes + 1.
        setup_launch!(self, "amg_root_numbers", nodes, l => {
            l.arg(&nodes).arg(&roots).arg(&prefix).arg(&mut number);
        })?;
        let mut first = self.setup_zeros::<u32>(nodes)?;
        // SAFETY: arguments match `amg_aggregate_first`; every array holds
        // `nodes` values and the graph's neighbours index them.
        setup_launch!(self, "amg_aggregate_first", nodes, l => {
            l.arg(&nodes)
                .arg(&gptr)
                .arg(&adj)
                .arg(&keys)
                .arg(&number)
                .arg(&mut first);
        })?;
        let mut agg = self.setup_zeros::<u32>(nodes)?;
        let mut missing = self.setup_zeros::<u64>(1)?;
        // SAFETY: as above; missing holds one zero.
        setup_launch!(self, "amg_aggregate_second", nodes, l => {
            l.arg(&nodes)
                .arg(&gptr)
                .arg(&adj)
                .arg(&first)
                .arg(&mut agg)
                .arg(&mut missing);
        })?;
        if self.setup_get_at(&missing, 0)? != 0 {
            return Err(Error::Device(
                "AMG aggregation left a node without an aggregate".into(),
            ));
        }
        let mut count = count as usize;
        let (mut isolated, mut unaggregated) = (Vec::new(), false);
        if isolated_count > 0 {
            // the isolated nodes listed on the device
            let (list, k) = self.list_rows(&gptr, nodes, true)?;
            if drop {
                count = self.drop_listed((&list, k), (&mut agg, nodes), count)?;
                unaggregated = true;
            } else {
                isolated = self
                    .setup_get(&list, k)?
                    .iter()
                    .map(|&i| i as u32)
                    .collect();
            }
        }
        Ok(Some(DeviceAggregates {
            agg,
            nodes,
            count,
            isolated,
            unaggregated,
        }))
    }

    /// `kept` with the aggregates of the nodes `drop` dropped (each such
    /// aggregate's nodes in none, the others renumbered in order: the host's
    /// `drop_isolated`), on the device: a copy of the aggregates, the list
    /// uploaded. `isolated` keeps the isolated nodes not dropped. O(nodes)
    /// on the device. Errors on a node out of range.
    pub fn setup_aggregates_without(
        &self,
        kept: &DeviceAggregates,
        drop: &[u32],
    ) -> Result<DeviceAggregates> {
        if let Some(&i) = drop.iter().find(|&&i| i as usize >= kept.nodes) {
            return Err(Error::InvalidArgument(format!(
                "dropping node {i} of {} aggregated nodes",
                kept.nodes
            )));
        }
        let mut agg = self.setup_zeros::<u32>(kept.nodes)?;
        self.inner
            .stream
            .memcpy_dtod(
                &kept.agg.slice(..kept.nodes),
                &mut agg.slice_mut(..kept.nodes),
            )
            .map_err(dev("copying the aggregates"))?;
        let list: Vec<u64> = drop.iter().map(|&i| u64::from(i)).collect();
        let count = match drop.len() {
            0 => kept.count,
            k => {
                let list = self.setup_put(&list)?;
                self.drop_listed((&list, k), (&mut agg, kept.nodes), kept.count)?
            }
        };
        let dropped: std::collections::HashSet<u32> = drop.iter().copied().collect();
        Ok(DeviceAggregates {
            agg,
            nodes: kept.nodes,
            count,
            isolated: kept
                .isolated
                .iter()
                .copied()
                .filter(|i| !dropped.contains(i))
                .collect(),
            unaggregated: kept.unaggregated || !drop.is_empty(),
        })
    }

    /// Drops the aggregates of the `k` nodes `list` (device, u64) from `agg`
    /// (`nodes` nodes' aggregates of `naggs`) on the device: each such aggregate's nodes in
    /// none, the others renumbered in order. Returns the aggregates left.
    /// One 8-byte read back.
    fn drop_listed(
        &self,
        (list, k): (&CudaSlice<u64>, usize),
        (agg, nodes): (&mut CudaSlice<u32>, usize),
        naggs: usize,
    ) -> Result<usize> {
        let mut dropped = self.setup_zeros::<u64>(naggs)?;
        // SAFETY: arguments match `amg_drop_mark`; list holds k nodes of
        // agg, whose aggregates are below naggs (or none), dropped naggs
        // zeros.
        setup_launch!(self, "amg_drop_mark", k, l => {
            l.arg(&k).arg(list).arg(&*agg).arg(&mut dropped);
        })?;
        let (before, gone) = self.setup_offsets(&dropped, naggs)?;
        // SAFETY: arguments match `amg_drop_renumber`; dropped holds naggs
        // flags and before their naggs + 1 prefix sums.
        setup_launch!(self, "amg_drop_renumber", nodes, l => {
            l.arg(&nodes).arg(&dropped).arg(&before).arg(agg);
        })?;
        Ok(naggs - gone as usize)
    }
}

/// The aggregates of [`CudaBackend::setup_aggregates_kept`]: each node's
/// aggregate on the device (every node in one), with the number of
/// aggregates and the isolated nodes on the host.
pub struct DeviceAggregates {
    agg: CudaSlice<u32>,
    nodes: usize,
    /// The number of aggregates.
    pub count: usize,
    /// The nodes without a strong connection, increasing (none where
    /// [`CudaBackend::setup_aggregates_dropped`] dropped them).
    pub isolated: Vec<u32>,
    /// Whether some node is in no aggregate (u32::MAX).
    unaggregated: bool,
}

impl DeviceAggregates {
    /// The nodes aggregated.
    pub fn nodes(&self) -> usize {
        self.nodes
    }
}

/// Scalar rows of at most this many entries on average are tested for
/// strength by a quarter warp each (`amg_strength_rows`), longer ones by a
/// warp.
const STRENGTH_SHORT_ROWS: usize = 12;

/// The aggregate of a node in no aggregate (a zero row of the tentative
/// prolongator; `gpuq_amg::aggregate::NOT_AGGREGATED`).
const NOT_AGGREGATED: u32 = u32::MAX;

/// A vector of f64 on the device for the setup's Lanczos estimates.
pub struct SetupVec {
    pub(crate) len: usize,
    pub(crate) buf: CudaSlice<f64>,
}

impl SetupVec {
    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` for an empty vector.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl CudaBackend {
    /// A zero vector of length n.
    pub fn setup_vec_zeros(&self, n: usize) -> Result<SetupVec> {
        Ok(SetupVec {
            len: n,
            buf: self.setup_zeros::<f64>(n)?,
        })
    }

    /// Copies host values to a new device vector.
    pub fn setup_vec_upload(&self, host: &[f64]) -> Result<SetupVec> {
        Ok(SetupVec {
            len: host.len(),
            buf: self.setup_put(host)?,
        })
    }

    /// `host` followed by `zeros` zeros, uploaded as one device vector
    /// without a host copy of the two joined. O(len) across.
    pub fn setup_vec_upload_padded(&self, host: &[f64], zeros: usize) -> Result<SetupVec> {
        Ok(SetupVec {
            len: host.len() + zeros,
            buf: self.setup_put_parts(&[host, &vec![0.0; zeros]])?,
        })
    }

    /// `x` followed by `zeros` zeros, as a new device vector: a device copy,
    /// nothing through the host. O(len) on the device.
    pub fn setup_vec_padded(&self, x: &SetupVec, zeros: usize) -> Result<SetupVec> {
        let mut y = self.setup_vec_zeros(x.len + zeros)?;
        if x.len > 0 {
            self.inner
                .stream
                .memcpy_dtod(&x.buf.slice(..x.len), &mut y.buf.slice_mut(..x.len))
                .map_err(dev("device copy"))?;
        }
        Ok(y)
    }

    /// Copies a device vector to the host.
    pub fn setup_vec_download(&self, v: &SetupVec) -> Result<Vec<f64>> {
        self.setup_get(&v.buf, v.len)
    }

    /// Entries `range` of a device vector, copied to the host. Errors on a
    /// range past its end. O(range) transfer.
    pub fn setup_vec_read(&self, v: &SetupVec, range: std::ops::Range<usize>) -> Result<Vec<f64>> {
        if range.start > range.end || range.end > v.len {
            return Err(Error::InvalidArgument(format!(
                "setup_vec_read: entries {range:?} of a vector of {}",
                v.len
            )));
        }
        self.inner.stats.download(8 * range.len());
        let mut out = vec![0.0; range.len()];
        if !out.is_empty() {
            self.inner
                .stream
                .memcpy_dtoh(&v.buf.slice(range), &mut out)
                .map_err(dev("download"))?;
        }
        Ok(out)
    }

    /// Writes `host` into a device vector from entry `at` on. Errors when it
    /// does not fit. O(host) transfer.
    pub fn setup_vec_write(&self, v: &mut SetupVec, at: usize, host: &[f64]) -> Result<()> {
        if at + host.len() > v.len {
            return Err(Error::InvalidArgument(format!(
                "setup_vec_write: {} values at {at} into a vector of {}",
                host.len(),
                v.len
            )));
        }
        self.inner.stats.upload(8 * host.len());
        if !host.is_empty() {
            self.inner
                .stream
                .memcpy_htod(host, &mut v.buf.slice_mut(at..at + host.len()))
                .map_err(dev("upload"))?;
        }
        Ok(())
    }

    /// y = x, on the device. Errors on mismatched lengths. O(n) on the
    /// device.
    pub fn setup_vec_copy(&self, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
        gpuq_core::check_same_len("setup_vec_copy", x.len, y.len)?;
        if x.len > 0 {
            self.inner
                .stream
                .memcpy_dtod(&x.buf.slice(..x.len), &mut y.buf.slice_mut(..x.len))
                .map_err(dev("device copy"))?;
        }
        Ok(())
    }

    /// The Lanczos start vector of length n
    /// (`gpuq_kernels::amg::lanczos_start` per entry).
    pub fn setup_lanczos_start(&self, n: usize) -> Result<SetupVec> {
        self.setup_lanczos_start_at(n, 0, n)
    }

    /// A rank's part of the Lanczos start vector, n entries: those of the
    /// global rows `first..first + own` (`gpuq_kernels::amg::lanczos_start`
    /// of each), then zeros (its ghosts). Errors when `own` exceeds n.
    /// O(n) on the device.
    pub fn setup_lanczos_start_at(&self, n: usize, first: usize, own: usize) -> Result<SetupVec> {
        if own > n {
            return Err(Error::InvalidArgument(format!(
                "Lanczos start: {own} rows of {n} entries"
            )));
        }
        // SAFETY: the kernel below writes all n values before any read (the
        // stream orders them); n = 0 leaves one value that is never read.
        let mut v = SetupVec {
            len: n,
            buf: unsafe { self.setup_uninit::<f64>(n) }?,
        };
        // SAFETY: arguments match `setup_lanczos_start`; v holds n values.
        setup_launch!(self, "setup_lanczos_start", n, l => {
            l.arg(&v.len).arg(&first).arg(&own).arg(&mut v.buf);
        })?;
        Ok(v)
    }

    /// y = A x, each row summed in `gpuq_kernels::amg::row_sum`'s order
    /// (a group of lanes per row). Errors on mismatched sizes.
    pub fn setup_spmv(&self, a: &SetupCsr, x: &SetupVec, y: &mut SetupVec) -> Result<()> {
        check_spmv(a, x, y)?;
        // a group of ROW_LANES lanes per row
        setup_launch!(self, "setup_spmv", a.nrows * ROW_LANES, l => {
            l.arg(&a.nrows)
                .arg(&a.ptr)
                .arg(&a.col)
                .arg(&a.val)
                .arg(&x.buf)
                .arg(&mut y.buf);
        })
    }

    /// y = D x for the block diagonal with row-major `blocks` (bs^2 per
    /// node, uploaded with [`CudaBackend::setup_vec_upload`]). Errors on
    /// mismatched sizes.
    pub fn setup_block_mul(
        &self,
        bs: usize,
        blocks: &SetupVec,
        x: &SetupVec,
        y: &mut SetupVec,
    ) -> Result<()> {
        check_block_mul(bs, blocks, x, y)?;
        setup_launch!(self, "setup_block_mul", x.len, l => {
            l.arg(&x.len)
                .arg(&bs)
                .arg(&blocks.buf)
                .arg(&x.buf)
                .arg(&mut y.buf);
        })
    }

    /// `scalars[at]` = x^T y, or sqrt(|x^T y|) when `root`, kept on the device:
    /// the partials of chunks of `DOT_CHUNK` entries (`chunk_dot`'s order, a
    /// warp each) into `partial` (at least that many values), then folded by
    /// one warp as the host's `fold_partials` folds them. Two launches, no
    /// read back. Errors on mismatched lengths or a short `partial` or
    /// `scalars`.
    pub fn setup_dot_into(
        &self,
        (x, y): (&SetupVec, &SetupVec),
        partial: &mut SetupVec,
        root: bool,
        (scalars, at): (&mut SetupVec, usize),
    ) -> Result<()> {
        let chunks = check_dot((x, y), partial, (scalars, at))?;
        // one warp per chunk
        setup_launch!(self, "setup_dot_chunks", chunks * 32, l => {
            l.arg(&x.len).arg(&x.buf).arg(&y.buf).arg(&mut partial.buf);
        })?;
        let root = u32::from(root);
        // SAFETY (both launches): partial holds `chunks` values, `at` is a
        // slot of scalars.
        setup_launch!(self, "setup_fold_partials", 32, l => {
            l.arg(&chunks)
                .arg(&partial.buf)
                .arg(&root)
                .arg(&at)
                .arg(&mut scalars.buf);
        })
    }

    /// `scalars[at]` = the sum of `from`'s values as [`CudaBackend::setup_dot_into`]
    /// folds its partials (one value: itself), or the square root of its
    /// absolute value with `root`: a Lanczos inner product summed over ranks
    /// in `from` made a scalar of the recurrence. One warp. Errors on a slot
    /// out of range.
    pub fn setup_fold_slot(
        &self,
        from: &SetupVec,
        root: bool,
        (scalars, at): (&mut SetupVec, usize),
    ) -> Result<()> {
        if at >= scalars.len {
            return Err(Error::InvalidArgument(format!(
                "setup_fold_slot: slot {at} of {}",
                scalars.len
            )));
        }
        let root = u32::from(root);
        // SAFETY: `from` holds `from.len` values, `at` is a slot of scalars.
        setup_launch!(self, "setup_fold_partials", 32, l => {
            l.arg(&from.len)
                .arg(&from.buf)
                .arg(&root)
                .arg(&at)
                .arg(&mut scalars.buf);
        })
    }

    /// w_i -= al v_i + b u_i with al = `scalars[al_at]`, b = `scalars[b_at]`
    /// (device scalars, [`CudaBackend::setup_dot_into`]). Errors on
    /// mismatched lengths or a slot out of range.
    pub fn setup_lanczos_update(
        &self,
        w: &mut SetupVec,
        (scalars, al_at, b_at): (&SetupVec, usize, usize),
        v: &SetupVec,
        u: &SetupVec,
    ) -> Result<()> {
        check_update(w, (scalars, al_at, b_at), v, u)?;
        setup_launch!(self, "setup_lanczos_update", w.len, l => {
            l.arg(&w.len)
                .arg(&scalars.buf)
                .arg(&al_at)
                .arg(&v.buf)
                .arg(&b_at)
                .arg(&u.buf)
                .arg(&mut w.buf);
        })
    }

    /// w_i /= b with b = `scalars[b_at]` (a device scalar). Errors on a slot
    /// out of range.
    pub fn setup_divide(
        &self,
        w: &mut SetupVec,
        (scalars, b_at): (&SetupVec, usize),
    ) -> Result<()> {
        check_slot("setup_divide", scalars, b_at)?;
        setup_launch!(self, "setup_divide", w.len, l => {
            l.arg(&w.len).arg(&scalars.buf).arg(&b_at).arg(&mut w.buf);
        })
    }
}

/// Errors unless y = A x fits: x of A's columns, y of its rows.
pub(crate) fn check_spmv(a: &SetupCsr, x: &SetupVec, y: &SetupVec) -> Result<()> {
    gpuq_core::check_same_len("setup_spmv (x)", a.ncols, x.len)?;
    gpuq_core::check_same_len("setup_spmv (y)", a.nrows, y.len)
}

/// Errors unless y = D x fits: x and y of one length, a multiple of `bs`,
/// and bs^2 values of `blocks` per node.
pub(crate) fn check_block_mul(
    bs: usize,
    blocks: &SetupVec,
    x: &SetupVec,
    y: &SetupVec,
) -> Result<()> {
    gpuq_core::check_same_len("setup_block_mul (y)", x.len, y.len)?;
    if bs == 0 || x.len % bs != 0 {
        return Err(Error::shape("setup_block_mul", "a multiple of bs", x.len));
    }
    gpuq_core::check_same_len("setup_block_mul (blocks)", x.len * bs, blocks.len)
}

/// The chunks of x^T y, after checking that x and y have one length,
/// `partial` room for a partial per chunk and `at` is a slot of `scalars`.
pub(crate) fn check_dot(
    (x, y): (&SetupVec, &SetupVec),
    partial: &SetupVec,
    (scalars, at): (&SetupVec, usize),
) -> Result<usize> {
    gpuq_core::check_same_len("setup_dot_into", x.len, y.len)?;
    let chunks = x.len.div_ceil(gpuq_kernels::amg::DOT_CHUNK);
    if partial.len < chunks || at >= scalars.len {
        return Err(Error::InvalidArgument(format!(
            "setup_dot_into: {} partials for {chunks} chunks, slot {at} of {}",
            partial.len, scalars.len
        )));
    }
    Ok(chunks)
}

/// Errors unless w -= al v + b u fits: v and u of w's length, both slots
/// in `scalars`.
pub(crate) fn check_update(
    w: &SetupVec,
    (scalars, al_at, b_at): (&SetupVec, usize, usize),
    v: &SetupVec,
    u: &SetupVec,
) -> Result<()> {
    gpuq_core::check_same_len("setup_lanczos_update (v)", w.len, v.len)?;
    gpuq_core::check_same_len("setup_lanczos_update (u)", w.len, u.len)?;
    check_slot("setup_lanczos_update", scalars, al_at.max(b_at))
}

/// Errors unless `at` is a slot of `scalars`.
pub(crate) fn check_slot(what: &str, scalars: &SetupVec, at: usize) -> Result<()> {
    if at >= scalars.len {
        return Err(Error::InvalidArgument(format!(
            "{what}: scalar slot {at} of {}",
            scalars.len
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{group_lanes, MIN_LANES};

    #[test]
    fn lanes_per_row_cover_the_b_rows_and_the_average_table() {
        // The smoothed prolongator of one vector: B rows of one entry, a few
        // products: the fewest lanes.
        assert_eq!(group_lanes(1.0, 8.0, 32.0), MIN_LANES);
        // A P on a 7-point Laplacian: B rows of about 4.5 entries.
        assert_eq!(group_lanes(4.5, 31.0, 32.0), 8);
        // R (A P): 1600 products a row need the whole warp's count table.
        assert_eq!(group_lanes(12.0, 1600.0, 32.0), 32);
        // Fill pass: 8 slots per lane, a table of twice 30 columns.
        assert_eq!(group_lanes(12.0, 60.0, 8.0), 16);
        // Never more than a warp, always a power of two.
        for (b, t) in [(100.0, 1.0), (0.0, 0.0), (3.0, 3.0), (33.0, 1e9)] {
            let w = group_lanes(b, t, 8.0);
            assert!(w.is_power_of_two() && (MIN_LANES..=32).contains(&w), "{w}");
        }
    }
}
