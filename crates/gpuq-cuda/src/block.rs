//! Dense products of blocks of device vectors (tall and thin, each column its
//! own vector), for block eigensolvers: the Gram matrix X^T Y and the
//! combination Z = beta Z + X C (kernels in `kernels-rs/src/device/block.rs`).
//! The columns' addresses go up as a table per call (8 bytes a column), the
//! small matrices as values.

use crate::backend::{dev, CudaBackend, THREADS};
use crate::vector::CudaVector;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use gpuq_core::{check_same_len, Backend, Result};
use gpuq_kernels::{COMBINE_COLUMNS, GRAM_TILE};

impl CudaBackend {
    /// The addresses of `columns` as a device table (each of `n` values).
    fn column_table(&self, columns: &[&CudaVector<f64>], n: usize) -> Result<CudaSlice<u8>> {
        let mut bytes = Vec::with_capacity(8 * columns.len());
        for v in columns {
            check_same_len("block of vectors", n, v.len)?;
            let (ptr, _record) = v.buf.device_ptr(&self.inner.stream);
            bytes.extend_from_slice(&ptr.to_le_bytes());
        }
        self.upload_bytes(&bytes)
    }

    /// The Gram matrix G = X^T Y (p x q, column-major: `G[i + j p] = x_i^T
    /// y_j`) of two blocks of vectors of one length n. Two launches (64 x 64
    /// output tiles by row splits, about four blocks per SM; then the splits
    /// added in order: the same inputs give the same bits) and a download of p
    /// q values. Cost: X read ceil(q / 64) and Y ceil(p / 64) times, 2 n p q
    /// flops.
    pub fn block_gram(&self, x: &[CudaVector<f64>], y: &[CudaVector<f64>]) -> Result<Vec<f64>> {
        let (p, q) = (x.len(), y.len());
        let n = x.first().or(y.first()).map_or(0, |v| v.len);
        if p == 0 || q == 0 {
            return Ok(vec![0.0; p * q]);
        }
        let xs: Vec<&CudaVector<f64>> = x.iter().collect();
        let ys: Vec<&CudaVector<f64>> = y.iter().collect();
        let tx = self.column_table(&xs, n)?;
        let ty = self.column_table(&ys, n)?;
        let tiles_i = p.div_ceil(GRAM_TILE);
        let tiles = tiles_i * q.div_ceil(GRAM_TILE);
        let sms = self.inner.info.multiprocessors;
        let splits = (4 * sms).div_ceil(tiles).clamp(1, n.div_ceil(256).max(1));
        let rows = n.div_ceil(splits);
        let mut partials = self.zeros::<f64>(splits * p * q)?;
        let mut out = self.zeros::<f64>(p * q)?;
        let f = self.function("block_gram_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        let tiles_i = tiles_i as u32;
        b.arg(&n)
            .arg(&p)
            .arg(&q)
            .arg(&tiles_i)
            .arg(&rows)
            .arg(&tx)
            .arg(&ty)
            .arg(&mut partials.buf);
        let config = LaunchConfig {
            grid_dim: (tiles as u32, splits as u32, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match `block_gram_f64`; the tables hold p and q
        // addresses of vectors of n values, `partials` splits p q values.
        unsafe { b.launch(config) }.map_err(dev("block_gram_f64"))?;
        self.inner.stats.launch("block_gram_f64");
        let f = self.function("block_gram_sum_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        let entries = p * q;
        b.arg(&entries)
            .arg(&splits)
            .arg(&partials.buf)
            .arg(&mut out.buf);
        // SAFETY: arguments match `block_gram_sum_f64`; sizes as allocated.
        unsafe { b.launch(Self::cfg(self.grid_blocks(entries))) }
            .map_err(dev("block_gram_sum_f64"))?;
        self.inner.stats.launch("block_gram_sum_f64");
        self.download(&out)
    }

    /// z_j = beta z_j + sum_i c[i + j p] x_i for the q vectors of `z` (`c`
    /// column-major p x q, p = `x.len()`; beta = 0 overwrites z). One
    /// launch (rows by groups of 16 output columns) after uploading the
    /// tables and C. Cost: X read ceil(q / 16) times, Z written once (and
    /// read when beta != 0), 2 n p q flops.
    pub fn block_combine(
        &self,
        x: &[CudaVector<f64>],
        c: &[f64],
        beta: f64,
        z: &mut [CudaVector<f64>],
    ) -> Result<()> {
        let (p, q) = (x.len(), z.len());
        check_same_len("block_combine (C)", p * q, c.len())?;
        let n = z.first().map_or(0, |v| v.len);
        if q == 0 || n == 0 {
            return Ok(());
        }
        if p == 0 {
            for v in z.iter_mut() {
                self.scal(beta, v)?;
            }
            return Ok(());
        }
        let xs: Vec<&CudaVector<f64>> = x.iter().collect();
        let zs: Vec<&CudaVector<f64>> = z.iter().collect();
        let tx = self.column_table(&xs, n)?;
        let tz = self.column_table(&zs, n)?;
        // C padded with zero columns to a multiple of 16.
        let groups = q.div_ceil(COMBINE_COLUMNS);
        let mut padded = c.to_vec();
        padded.resize(p * groups * COMBINE_COLUMNS, 0.0);
        let cd = self.upload_raw(&padded)?;
        let f = self.function("block_combine_f64")?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n)
            .arg(&p)
            .arg(&q)
            .arg(&tx)
            .arg(&cd.buf)
            .arg(&beta)
            .arg(&tz);
        let per_group = (8 * self.inner.info.multiprocessors)
            .div_ceil(groups)
            .clamp(1, n.div_ceil(THREADS as usize));
        let config = LaunchConfig {
            grid_dim: (per_group as u32, groups as u32, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match `block_combine_f64`; the tables hold p and
        // q addresses of vectors of n values (z distinct from x: `z` is
        // borrowed mutably, `x` shared), C p ceil(q / 16) 16 values.
        unsafe { b.launch(config) }.map_err(dev("block_combine_f64"))?;
        self.inner.stats.launch("block_combine_f64");
        Ok(())
    }
}
