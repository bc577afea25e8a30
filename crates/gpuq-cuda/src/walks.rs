//! Monte Carlo walks on the device (kernels in `kernels-rs/src/device/mcls.rs`,
//! the walk itself shared with the CPU through `gpuq_kernels::walk`).

use crate::backend::{dev, CudaBackend, THREADS};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use gpuq_core::{Error, Result};
use gpuq_kernels::walk::{Record, Stop};

/// Walk data resident on the device in one of the two layouts.
pub struct DeviceWalkData {
    n: usize,
    ptr: CudaSlice<u8>,
    /// SoA: cdf, w, h, col; AoS: the records only.
    arrays: Vec<CudaSlice<u8>>,
}

impl std::fmt::Debug for DeviceWalkData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceWalkData(n = {}, arrays = {})",
            self.n,
            self.arrays.len()
        )
    }
}

impl DeviceWalkData {
    fn is_aos(&self) -> bool {
        self.arrays.len() == 1
    }
}

/// Which forward kernel: one thread per entry, or one per history with atomic sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardMapping {
    /// One thread runs all of an entry's histories.
    PerEntry,
    /// One thread per history; sums by atomic add.
    PerHistory,
}

/// Bytes of tally replicas the adjoint kernel may use.
const REPLICA_BUDGET: usize = 32 << 20;

/// Most tally replicas.
const MAX_REPLICAS: usize = 64;

/// Most blocks of a launch (grid-stride beyond).
const MAX_BLOCKS: usize = 1 << 20;

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: called with u32, f64 and `Record` (repr(C): three f64, two u32, no
    // padding) only: every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn blocks(items: usize) -> u32 {
    items.div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS) as u32
}

fn cfg(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaBackend {
    /// Uploads structure-of-arrays walk data (row starts, cumulative
    /// probabilities, weights, values, columns). One upload per array. Errors
    /// unless the row starts rise from 0 to the number of entries and every column
    /// is below the number of rows (one host pass over the entries).
    pub fn upload_walks_soa(
        &self,
        ptr: &[u32],
        cdf: &[f64],
        w: &[f64],
        h: &[f64],
        col: &[u32],
    ) -> Result<DeviceWalkData> {
        if w.len() != cdf.len() || h.len() != cdf.len() || col.len() != cdf.len() {
            return Err(Error::shape(
                "walk data",
                cdf.len(),
                "arrays of other lengths",
            ));
        }
        check_walks(ptr, col.iter().copied())?;
        Ok(DeviceWalkData {
            n: ptr.len() - 1,
            ptr: self.upload_bytes(bytes_of(ptr))?,
            arrays: vec![
                self.upload_bytes(bytes_of(cdf))?,
                self.upload_bytes(bytes_of(w))?,
                self.upload_bytes(bytes_of(h))?,
                self.upload_bytes(bytes_of(col))?,
            ],
        })
    }

    /// Uploads array-of-records walk data (row starts and 32-byte records), checked
    /// as for [`CudaBackend::upload_walks_soa`].
    pub fn upload_walks_aos(&self, ptr: &[u32], records: &[Record]) -> Result<DeviceWalkData> {
        check_walks(ptr, records.iter().map(|r| r.col))?;
        Ok(DeviceWalkData {
            n: ptr.len() - 1,
            ptr: self.upload_bytes(bytes_of(ptr))?,
            arrays: vec![self.upload_bytes(bytes_of(records))?],
        })
    }

    /// Runs forward histories `first..first + count` of every entry (streams
    /// `i per_entry + j` under `seed`) and returns per-entry score sums and the
    /// moves made. `tally` is b^ (collision) or H b^ (`expected`). One launch, one
    /// download of n values.
    #[allow(clippy::too_many_arguments)]
    pub fn mc_forward(
        &self,
        walks: &DeviceWalkData,
        bhat: &CudaVector<f64>,
        tally: &CudaVector<f64>,
        (per_entry, first, count): (u64, u64, u64),
        expected: bool,
        mapping: ForwardMapping,
        seed: u64,
        stop: Stop,
    ) -> Result<(Vec<f64>, u64)> {
        let n = walks.n;
        check_vec(n, bhat.len)?;
        check_vec(n, tally.len)?;
        let mut sums = self.zeroed(8 * n.max(1))?;
        let mut steps = self.zeroed(8)?;
        if n > 0 && count > 0 {
            let (kind, items) = match mapping {
                ForwardMapping::PerEntry => ("entry", n),
                ForwardMapping::PerHistory => ("hist", n.saturating_mul(count as usize)),
            };
            let name = kernel_name(&format!("mc_fwd_{kind}"), walks, expected);
            let f = self.function(&name)?;
            let grid = self.resident_blocks(&f, items)?;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n);
            push_walks(&mut b, walks);
            b.arg(&bhat.buf)
                .arg(&tally.buf)
                .arg(&per_entry)
                .arg(&first)
                .arg(&count)
                .arg(&seed)
                .arg(&stop.max_steps)
                .arg(&stop.cutoff)
                .arg(&mut sums)
                .arg(&mut steps);
            // SAFETY: arguments match the `mc_fwd_*` signature; the walk data was
            // validated at upload (row starts within the entries, every column
            // below n: `check_walks`); bhat, tally and sums hold n values.
            unsafe { b.launch(cfg(grid)) }.map_err(dev("mc_forward"))?;
            self.inner.stats.launch("mc_forward");
        }
        self.sums_and_steps(&sums, &steps, n)
    }

    /// Runs adjoint histories `first..first + count` (start states from
    /// `start_cdf`, weights ||b^||_1 sign(b^)) and returns the per-state tally
    /// sums and the moves made. Two launches (walks, then the replica sum), one
    /// download of n values.
    #[allow(clippy::too_many_arguments)]
    pub fn mc_adjoint(
        &self,
        walks: &DeviceWalkData,
        start_cdf: &CudaVector<f64>,
        bhat: &CudaVector<f64>,
        bhat_l1: f64,
        (first, count): (u64, u64),
        expected: bool,
        seed: u64,
        stop: Stop,
    ) -> Result<(Vec<f64>, u64)> {
        let n = walks.n;
        check_vec(n, bhat.len)?;
        check_vec(n, start_cdf.len)?;
        let f = self.function(&kernel_name("mc_adj", walks, expected))?;
        let grid = self.resident_blocks(&f, count as usize)?;
        let copies = (REPLICA_BUDGET / (8 * n.max(1)))
            .clamp(1, MAX_REPLICAS)
            .min(grid as usize) as u32;
        let mut tallies = self.zeroed(8 * n.max(1) * copies as usize)?;
        let mut sums = self.zeroed(8 * n.max(1))?;
        let mut steps = self.zeroed(8)?;
        if n > 0 && count > 0 {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n);
            push_walks(&mut b, walks);
            b.arg(&start_cdf.buf)
                .arg(&bhat.buf)
                .arg(&bhat_l1)
                .arg(&first)
                .arg(&count)
                .arg(&seed)
                .arg(&stop.max_steps)
                .arg(&stop.cutoff)
                .arg(&mut tallies)
                .arg(&copies)
                .arg(&mut steps);
            // SAFETY: arguments match `mc_adj_*`; the walk data was validated at
            // upload (`check_walks`: every column below n), start states come from
            // a search over n entries; tallies holds copies x n values and every
            // block's replica index is below copies.
            unsafe { b.launch(cfg(grid)) }.map_err(dev("mc_adjoint"))?;
            self.inner.stats.launch("mc_adjoint");
            let f = self.function("mc_sum_copies")?;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&n).arg(&copies).arg(&tallies).arg(&mut sums);
            // SAFETY: arguments match `mc_sum_copies`; sizes as allocated above.
            unsafe { b.launch(cfg(blocks(n).min(self.grid_blocks(n)))) }
                .map_err(dev("mc_sum_copies"))?;
            self.inner.stats.launch("mc_sum_copies");
        }
        self.sums_and_steps(&sums, &steps, n)
    }

    /// Blocks of a persistent walk launch over `items` items: as many as can be
    /// resident at once (the driver's occupancy for this kernel times the SMs),
    /// fewer when the items need fewer.
    fn resident_blocks(&self, f: &cudarc::driver::CudaFunction, items: usize) -> Result<u32> {
        let per_sm = self.blocks_per_sm(f)?;
        Ok(items
            .div_ceil(THREADS as usize)
            .clamp(1, per_sm * self.info().multiprocessors) as u32)
    }

    /// A zeroed device buffer of `bytes` bytes.
    fn zeroed(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.inner
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(dev("allocating walk buffers"))
    }

    /// Downloads n sums and the step counter (two downloads, one wait).
    fn sums_and_steps(
        &self,
        sums: &CudaSlice<u8>,
        steps: &CudaSlice<u8>,
        n: usize,
    ) -> Result<(Vec<f64>, u64)> {
        let mut host = vec![0.0f64; n];
        self.download_into(&sums.slice(..), &mut host)?;
        // The counter is a u64; it travels as the bits of one f64 (downloads are
        // typed by scalar) and is read back bit for bit.
        let mut moves = [0.0f64; 1];
        self.download_into(&steps.slice(..), &mut moves)?;
        Ok((host, moves[0].to_bits()))
    }
}

/// `{base}_{soa|aos}_{col|exp}`.
fn kernel_name(base: &str, walks: &DeviceWalkData, expected: bool) -> String {
    let layout = if walks.is_aos() { "aos" } else { "soa" };
    let est = if expected { "exp" } else { "col" };
    format!("{base}_{layout}_{est}")
}

/// Null pointers for the AoS layout's unused walk-data arguments.
static NULLS: [u64; 3] = [0; 3];

/// Pushes the five walk-data pointer arguments (AoS: row starts, records, then
/// three null pointers the kernel never reads).
fn push_walks<'a>(b: &mut cudarc::driver::LaunchArgs<'a>, walks: &'a DeviceWalkData) {
    b.arg(&walks.ptr);
    for a in &walks.arrays {
        b.arg(a);
    }
    if walks.is_aos() {
        for z in &NULLS {
            b.arg(z);
        }
    }
}

/// Errors unless `ptr` is a valid row-start array over the entries whose target
/// states `cols` lists, and every target state is below the number of rows: the
/// kernels index with them unchecked. Cost: one pass over the entries.
fn check_walks(ptr: &[u32], cols: impl ExactSizeIterator<Item = u32>) -> Result<()> {
    let nnz = cols.len();
    let ok = !ptr.is_empty()
        && ptr[0] == 0
        && ptr.windows(2).all(|w| w[0] <= w[1])
        && ptr[ptr.len() - 1] as usize == nnz;
    if !ok {
        return Err(Error::InvalidArgument(
            "walk data: row starts must rise from 0 to the number of entries".into(),
        ));
    }
    let n = ptr.len() - 1;
    for (k, c) in cols.enumerate() {
        if c as usize >= n {
            return Err(Error::InvalidArgument(format!(
                "walk data: entry {k} moves to state {c}, beyond the {n} states"
            )));
        }
    }
    Ok(())
}

fn check_vec(n: usize, len: usize) -> Result<()> {
    gpuq_core::check_same_len("monte carlo walk", n, len)
}

impl CudaBackend {
    /// Measures the device's rate of random 32-byte reads: a table of `2^log2_records`
    /// records (zeros), `threads` threads of `reads` independent random reads each;
    /// returns reads per second of the fastest of three timed launches after a
    /// warm-up. The reference the walks' moves per second are compared with.
    pub fn random_read_rate_32b(
        &self,
        log2_records: u32,
        threads: usize,
        reads: u32,
    ) -> Result<f64> {
        let m = 1usize << log2_records;
        let threads = threads.div_ceil(THREADS as usize) * THREADS as usize;
        let table = self.zeroed(32 * m)?;
        let mut out = self.zeroed(8 * threads)?;
        let f = self.function("gather32")?;
        let mut best = f64::INFINITY;
        for rep in 0..4u64 {
            let t = std::time::Instant::now();
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&m).arg(&table).arg(&reads).arg(&rep).arg(&mut out);
            // SAFETY: arguments match `gather32`; m is a power of two and the
            // table holds m records; out holds one value per thread.
            unsafe { b.launch(cfg(blocks(threads))) }.map_err(dev("gather32"))?;
            self.synchronize()?;
            if rep > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        Ok(threads as f64 * f64::from(reads) / best)
    }
}
