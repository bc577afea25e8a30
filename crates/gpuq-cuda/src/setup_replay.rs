//! The setup's small vector operations recorded and run by one launch: a
//! Lanczos estimate on a coarse level is a few hundred launches of kernels
//! that each take a few microseconds, so the driver's launch latency, not the
//! device, sets its time. [`SetupOps`] records the same operations
//! ([`CudaBackend::setup_spmv`], [`CudaBackend::setup_block_mul`],
//! [`CudaBackend::setup_dot_into`], [`CudaBackend::setup_lanczos_update`],
//! [`CudaBackend::setup_divide`], with their checks), and
//! [`CudaBackend::setup_replay`] runs them in order in one cooperative launch
//! of `setup_replay` (a grid barrier between operations), with each
//! operation's own per-item code: the same values bit for bit.

use crate::amg_setup::{check_block_mul, check_dot, check_slot, check_spmv, check_update};
use crate::backend::{dev, CudaBackend};
use crate::{SetupCsr, SetupVec};
use cudarc::driver::{CudaSlice, DevicePtr, PushKernelArg};
use gpuq_core::Result;
use gpuq_kernels::amg::{
    DOT_CHUNK, REPLAY_BLOCK_MUL, REPLAY_DIVIDE, REPLAY_DOT, REPLAY_SPMV, REPLAY_UPDATE,
    REPLAY_WORDS, ROW_LANES,
};

/// Device vector operations of the setup, recorded in order for one
/// [`CudaBackend::setup_replay`] (each as `REPLAY_WORDS` words: an opcode,
/// lengths, slots and the device addresses of its buffers).
#[derive(Debug, Default)]
pub struct SetupOps {
    words: Vec<u64>,
    /// The most threads an operation has work for.
    threads: usize,
}

impl SetupOps {
    /// No operations yet.
    pub fn new() -> SetupOps {
        SetupOps::default()
    }

    /// Operations recorded so far.
    pub fn len(&self) -> usize {
        self.words.len() / REPLAY_WORDS
    }

    /// `true` when none is recorded.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Appends one operation: `op`, then `args` (at most seven), zeros after;
    /// it has work for `threads` threads.
    fn push(&mut self, op: u64, args: &[u64], threads: usize) {
        debug_assert!(args.len() < REPLAY_WORDS);
        self.words.push(op);
        self.words.extend_from_slice(args);
        self.words
            .extend(std::iter::repeat_n(0, REPLAY_WORDS - 1 - args.len()));
        self.threads = self.threads.max(threads);
    }
}

impl CudaBackend {
    /// The device address of `buf`, as a recorded operation holds it.
    fn address<T>(&self, buf: &CudaSlice<T>) -> u64 {
        buf.device_ptr(&self.inner.stream).0
    }

    /// Records y = A x ([`CudaBackend::setup_spmv`]). Errors on mismatched
    /// sizes.
    pub fn record_spmv(
        &self,
        ops: &mut SetupOps,
        a: &SetupCsr,
        x: &SetupVec,
        y: &mut SetupVec,
    ) -> Result<()> {
        check_spmv(a, x, y)?;
        let m = [a.nrows as u64, self.address(&a.ptr), self.address(&a.col)];
        let v = [
            self.address(&a.val),
            self.address(&x.buf),
            self.address(&y.buf),
        ];
        let lanes = a.nrows * ROW_LANES;
        ops.push(REPLAY_SPMV, &[m[0], m[1], m[2], v[0], v[1], v[2]], lanes);
        Ok(())
    }

    /// Records y = D x ([`CudaBackend::setup_block_mul`]). Errors on
    /// mismatched sizes.
    pub fn record_block_mul(
        &self,
        ops: &mut SetupOps,
        bs: usize,
        blocks: &SetupVec,
        x: &SetupVec,
        y: &mut SetupVec,
    ) -> Result<()> {
        check_block_mul(bs, blocks, x, y)?;
        let a = [self.address(&blocks.buf), self.address(&x.buf)];
        let args = [x.len as u64, bs as u64, a[0], a[1], self.address(&y.buf)];
        ops.push(REPLAY_BLOCK_MUL, &args, x.len);
        Ok(())
    }

    /// Records `scalars[at]` = x^T y, or sqrt(|x^T y|) when `root`
    /// ([`CudaBackend::setup_dot_into`]). Errors as it does.
    pub fn record_dot(
        &self,
        ops: &mut SetupOps,
        (x, y): (&SetupVec, &SetupVec),
        partial: &mut SetupVec,
        root: bool,
        (scalars, at): (&mut SetupVec, usize),
    ) -> Result<()> {
        check_dot((x, y), partial, (scalars, at))?;
        let v = [self.address(&x.buf), self.address(&y.buf)];
        let (p, s) = (self.address(&partial.buf), self.address(&scalars.buf));
        let args = [x.len as u64, v[0], v[1], p, u64::from(root), at as u64, s];
        ops.push(REPLAY_DOT, &args, x.len.div_ceil(DOT_CHUNK) * 32);
        Ok(())
    }

    /// Records w_i -= al v_i + b u_i with device scalars
    /// ([`CudaBackend::setup_lanczos_update`]). Errors as it does.
    pub fn record_lanczos_update(
        &self,
        ops: &mut SetupOps,
        w: &mut SetupVec,
        (scalars, al_at, b_at): (&SetupVec, usize, usize),
        v: &SetupVec,
        u: &SetupVec,
    ) -> Result<()> {
        check_update(w, (scalars, al_at, b_at), v, u)?;
        let s = self.address(&scalars.buf);
        let (v, u, w_at) = (
            self.address(&v.buf),
            self.address(&u.buf),
            self.address(&w.buf),
        );
        let args = [w.len as u64, s, al_at as u64, v, b_at as u64, u, w_at];
        ops.push(REPLAY_UPDATE, &args, w.len);
        Ok(())
    }

    /// Records w_i /= b with a device scalar ([`CudaBackend::setup_divide`]).
    /// Errors on a slot out of range.
    pub fn record_divide(
        &self,
        ops: &mut SetupOps,
        w: &mut SetupVec,
        (scalars, b_at): (&SetupVec, usize),
    ) -> Result<()> {
        check_slot("setup_divide", scalars, b_at)?;
        let (s, w_at) = (self.address(&scalars.buf), self.address(&w.buf));
        ops.push(REPLAY_DIVIDE, &[w.len as u64, s, b_at as u64, w_at], w.len);
        Ok(())
    }

    /// Queues `ops` (taken: each runs once) in one cooperative launch of `setup_replay` (blocks for
    /// the operation with work for the most threads, at most as many as are
    /// resident at once), after an upload of their words; nothing waits. Nothing is
    /// queued for no operations. Cost: one small upload and one launch.
    ///
    /// # Safety
    /// Every buffer an operation of `ops` names must still be allocated
    /// (the launch reads and writes it), and none may have been freed and
    /// allocated again since it was recorded.
    pub unsafe fn setup_replay(&self, ops: SetupOps) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let words = self.setup_put(&ops.words)?;
        let mut bar = self.setup_zeros::<u32>(2)?;
        let (f, cfg) = self.cooperative("setup_replay", ops.threads)?;
        let count = ops.len();
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&words).arg(&count).arg(&mut bar);
        // SAFETY: arguments match `setup_replay`; each operation was checked
        // when it was recorded and its buffers are alive (the caller's
        // contract); bar holds two zeros; a cooperative launch.
        unsafe { l.launch_cooperative(cfg) }.map_err(dev("setup_replay"))?;
        self.inner.stats.launch("setup_replay");
        Ok(())
    }
}
