//! NCCL between the GPUs of a distributed solve's ranks: the halo exchange
//! as a device pack kernel and `ncclSend`/`ncclRecv` in one group on a
//! communication stream, overlapped with the owned block's work on the
//! compute stream (events order the two), and the all-reduce of a method's
//! scalar slots as an NCCL all-gather of the partials summed on the device
//! in the host's fixed rank order (`gpuq_kernels::collective`), so it is
//! deterministic and gives the MPI path's bits; and the all-gather of a
//! vector split in row blocks of unequal sizes (a group of broadcasts, one
//! per rank: the distributed AMG's gathered levels).
//!
//! The library (`libnccl.so.2`) is loaded at run time, like the driver: a
//! machine without it builds and runs everything else, and
//! [`CudaBackend::nccl_available`] says whether it is there.

use crate::amg_setup::SetupVec;
use crate::backend::{dev, CudaBackend};
use crate::blas1::kernel;
use crate::vector::CudaVector;
use cudarc::driver::sys::CUstreamCaptureStatus;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, PushKernelArg};
use cudarc::nccl::{group_end, group_start, Comm, Id};
use gpuq_core::{Error, Result, Scalar};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Bytes of an NCCL unique id (made by one rank, sent to the others).
pub const NCCL_ID_BYTES: usize = 128;

/// The longest scalar array whose slots [`CudaBackend::nccl_sum_slots`] sums
/// on the devices (its summing kernel takes the slots as a 64-bit mask).
pub const NCCL_SLOTS: usize = 64;

/// An NCCL communicator and the point-to-point links it has made. NCCL's
/// communicator is not thread-safe: every call takes the mutex around it, so
/// no two calls run at once.
struct SharedComm {
    comm: Comm,
    /// Per rank: whether a send to it and a receive from it have been
    /// connected (NCCL connects each direction at its first use).
    linked: Vec<(bool, bool)>,
    /// The error of the background linking (`link_in_background`), if it
    /// failed: every later link reports it instead of sending messages a
    /// neighbour whose own linking succeeded would never match.
    failed: Option<String>,
}

// SAFETY: an NCCL communicator may be used from any thread as long as no two
// calls on it run concurrently; `Nccl` only reaches it through a mutex.
unsafe impl Send for SharedComm {}

/// The rank's NCCL communicator and its stream.
pub(crate) struct Nccl {
    comm: Mutex<SharedComm>,
    /// The communication stream (forked from the backend's compute stream).
    stream: Arc<CudaStream>,
    size: usize,
    /// [`CudaBackend::nccl_sum_slots`]'s all-gather buffer ([`NCCL_SLOTS`]
    /// of the widest scalar per rank), made with the communicator: a
    /// recorded iteration (a CUDA graph) keeps its address. Reused in stream
    /// order (each all-gather waits for the compute stream's work queued
    /// before it, the summing kernel that read the last one included).
    gathered: Mutex<CudaSlice<u8>>,
    /// With `GPUQ_NCCL_TRACE` set: host nanoseconds per step of the
    /// exchanges (pack, wait, group, overlap, wait back) and their count,
    /// printed to stderr when the communicator is dropped.
    trace: Option<Mutex<[u64; 6]>>,
}

impl Drop for Nccl {
    fn drop(&mut self) {
        if let Some(t) = &self.trace {
            let t = t.lock().unwrap_or_else(|e| e.into_inner());
            let per = |k: usize| t[k] as f64 / t[5].max(1) as f64 / 1e3;
            eprintln!(
                "gpuq: NCCL halo trace: {} exchanges, host us per exchange: pack {:.1}, comm waits {:.1}, group {:.1}, overlap {:.1}, compute waits {:.1}",
                t[5],
                per(0),
                per(1),
                per(2),
                per(3),
                per(4)
            );
        }
    }
}

/// The device side of one matrix's halo exchange
/// ([`CudaBackend::nccl_halo_plan`]).
pub struct NcclHalo {
    pack: DeviceIndices,
    /// The packed values (16 bytes per entry: any scalar).
    staging: Mutex<CudaSlice<u8>>,
    sends: Vec<(usize, Range<usize>)>,
    /// Where every send is a run of consecutive entries of x (a banded
    /// matrix split in row blocks: a slab's first and last planes), each
    /// send's range of x: sent straight from x, with no pack kernel.
    direct: Option<Vec<Range<usize>>>,
    recvs: Vec<(usize, Range<usize>)>,
    /// Ghost values the receives fill (the end of the last range).
    ghosts: usize,
}

/// Each send's range of x where the pack list's entries for it are
/// consecutive (ascending by one), else `None`.
fn direct_ranges(pack: &[usize], sends: &[(usize, Range<usize>)]) -> Option<Vec<Range<usize>>> {
    sends
        .iter()
        .map(|(_, r)| {
            let idx = &pack[r.clone()];
            let start = idx.first().copied().unwrap_or(0);
            idx.iter()
                .enumerate()
                .all(|(k, &i)| i == start + k)
                .then_some(start..start + idx.len())
        })
        .collect()
}

/// Indices on the device (a halo's pack list, a method's slots) with their
/// bound, so a kernel that reads through them is checked against its vector.
pub struct DeviceIndices {
    buf: CudaSlice<u32>,
    /// One more than the largest index (0 when empty).
    bound: usize,
}

impl DeviceIndices {
    /// The number of indices.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 0
    }
}

/// Maps an NCCL error to [`Error::Device`] naming the call.
fn nccl_error(op: &str) -> impl Fn(cudarc::nccl::result::NcclError) -> Error + '_ {
    move |e| Error::Device(format!("{op}: {e:?}"))
}

impl CudaBackend {
    /// Whether the NCCL library can be loaded on this machine. Cost: one
    /// attempt to open the library.
    pub fn nccl_available() -> bool {
        // SAFETY: probing only tries to open the library by name.
        unsafe { cudarc::nccl::sys::is_culib_present() }
    }

    /// A fresh NCCL unique id: one rank makes it and sends it to the others
    /// (over MPI), which pass it to [`CudaBackend::attach_nccl`]. Errors when
    /// the library is missing or NCCL fails.
    pub fn nccl_unique_id() -> Result<[u8; NCCL_ID_BYTES]> {
        if !Self::nccl_available() {
            return Err(Error::Device(
                "the NCCL library (libnccl.so.2) was not found".into(),
            ));
        }
        let id = Id::new().map_err(nccl_error("ncclGetUniqueId"))?;
        Ok(id.internal().map(|c| c as u8))
    }

    /// A stream for NCCL's kernels at the device's highest priority, ordered
    /// after the compute stream's work so far: where NCCL's kernel and a
    /// compute kernel wait for multiprocessors together, NCCL's blocks are
    /// dispatched first. (A grid-stride product already running keeps every
    /// multiprocessor until its blocks drain: the kernel timeline of CG on
    /// four H100s shows the halo's kernel starting near the owned product's
    /// end, 15 us against 20 us at the default priority; `docs/benchmarks.md`.)
    fn communication_stream(&self) -> Result<Arc<CudaStream>> {
        let ctx = self.inner.stream.context();
        ctx.bind_to_thread().map_err(dev("binding the context"))?;
        let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
            .map_err(dev("reading the stream priorities"))?;
        let stream = ctx
            .new_stream_with_priority(greatest)
            .map_err(dev("creating the communication stream"))?;
        stream
            .join(&self.inner.stream)
            .map_err(dev("ordering the communication stream"))?;
        Ok(stream)
    }

    /// Joins this backend's GPU to the NCCL communicator of `size` ranks as
    /// rank `rank` (`id` from [`CudaBackend::nccl_unique_id`], the same on
    /// every rank), with a communication stream of its own. Collective: every
    /// rank calls it at once. Each rank needs a GPU of its own (NCCL refuses
    /// two ranks on one device). The collectives are connected before it
    /// returns; the links to the ranks beside this one are made in the
    /// background (`link_in_background`). Errors when the library is
    /// missing, NCCL fails, or a communicator is already attached.
    pub fn attach_nccl(&self, rank: usize, size: usize, id: &[u8; NCCL_ID_BYTES]) -> Result<()> {
        if !Self::nccl_available() {
            return Err(Error::Device(
                "the NCCL library (libnccl.so.2) was not found".into(),
            ));
        }
        if self.inner.nccl.get().is_some() {
            return Err(Error::InvalidArgument(
                "this GPU already has an NCCL communicator".into(),
            ));
        }
        let stream = self.communication_stream()?;
        let id = Id::uninit(id.map(|b| b as core::ffi::c_char));
        let comm = Comm::from_rank(stream.clone(), rank, size, id)
            .map_err(nccl_error("ncclCommInitRank"))?;
        // The collectives connect at their first call: one all-gather of a
        // byte now, waited for (see `connect`).
        {
            let one = self
                .inner
                .stream
                .alloc_zeros::<u8>(size)
                .map_err(|e| self.alloc_error("connecting NCCL", size, e))?;
            let mine = one.slice(rank..rank + 1);
            let mut all = self
                .inner
                .stream
                .alloc_zeros::<u8>(size)
                .map_err(|e| self.alloc_error("connecting NCCL", size, e))?;
            self.synchronize()?;
            comm.all_gather(&mine, &mut all)
                .map_err(nccl_error("ncclAllGather"))?;
            stream.synchronize().map_err(dev("connecting NCCL"))?;
        }
        let gathered_bytes = size * NCCL_SLOTS * 16;
        let gathered = self
            .inner
            .stream
            .alloc_zeros::<u8>(gathered_bytes)
            .map_err(|e| self.alloc_error("the slot sums' buffer", gathered_bytes, e))?;
        self.inner
            .nccl
            .set(Nccl {
                comm: Mutex::new(SharedComm {
                    comm,
                    linked: vec![(false, false); size],
                    failed: None,
                }),
                stream,
                size,
                gathered: Mutex::new(gathered),
                trace: std::env::var_os("GPUQ_NCCL_TRACE").map(|_| Mutex::new([0; 6])),
            })
            .map_err(|_| Error::InvalidArgument("NCCL attached twice".into()))?;
        self.link_in_background(rank, size);
        Ok(())
    }

    /// Starts connecting this rank's sends to and receives from ranks
    /// `rank - 1` and `rank + 1` (the neighbours of a row-block partition of
    /// a banded or mesh matrix) on a thread of its own, which holds the
    /// communicator until the links are made: the program reads its input
    /// meanwhile, and the first halo plan of a matrix whose neighbours are
    /// these finds them linked instead of waiting about 0.2 s for NCCL to
    /// connect them. Every rank starts it at the same point, so the messages
    /// pair up. A failure there is kept: the rank's next link (its first halo
    /// plan, which the ranks agree on) reports it.
    fn link_in_background(&self, rank: usize, size: usize) {
        let peers: Vec<usize> = [rank.checked_sub(1), Some(rank + 1).filter(|&p| p < size)]
            .into_iter()
            .flatten()
            .collect();
        if peers.is_empty() {
            return;
        }
        let backend = self.clone();
        let started = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let Ok(nccl) = backend.nccl("linking the neighbours") else {
                return;
            };
            let mut comm = nccl.comm.lock().unwrap_or_else(|e| e.into_inner());
            let _ = started.0.send(());
            let linked = backend
                .inner
                .stream
                .context()
                .bind_to_thread()
                .map_err(dev("binding the context"))
                .and_then(|_| backend.link(nccl, &mut comm, &peers, &peers));
            if let Err(e) = linked {
                comm.failed = Some(format!("linking the neighbouring GPUs: {e}"));
            }
        });
        // The communicator is held before `attach_nccl` returns, so no NCCL
        // call of the program can come between.
        let _ = started.1.recv();
    }

    /// Whether an NCCL communicator is attached ([`CudaBackend::attach_nccl`]).
    pub fn has_nccl(&self) -> bool {
        self.inner.nccl.get().is_some()
    }

    /// The attached communicator, or an error naming `op`.
    fn nccl(&self, op: &str) -> Result<&Nccl> {
        self.inner.nccl.get().ok_or_else(|| {
            Error::InvalidArgument(format!("{op}: no NCCL communicator is attached"))
        })
    }

    /// `idx` as 32-bit indices on the device (a halo's pack list, a method's
    /// slots), uploaded once. Errors when an index does not fit 32 bits.
    pub fn upload_indices(&self, idx: &[usize]) -> Result<DeviceIndices> {
        let narrow = idx
            .iter()
            .map(|&i| u32::try_from(i))
            .collect::<std::result::Result<Vec<u32>, _>>()
            .map_err(|_| Error::InvalidArgument("an index beyond 32 bits".into()))?;
        let bound = idx.iter().max().map_or(0, |&m| m + 1);
        self.inner.stats.upload(4 * narrow.len());
        let buf = if narrow.is_empty() {
            self.inner.stream.null::<u32>().map_err(dev("upload"))?
        } else {
            self.inner
                .stream
                .clone_htod(&narrow)
                .map_err(|e| self.alloc_error("uploading indices", 4 * narrow.len(), e))?
        };
        Ok(DeviceIndices { buf, bound })
    }

    /// out_k = x_{idx_k} for the `idx.len()` entries of `idx` (on the compute
    /// stream). `out` must hold at least that many values.
    fn pack<T: Scalar, E>(
        &self,
        (x, x_len): (&CudaSlice<E>, usize),
        idx: &DeviceIndices,
        out: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let n = idx.len();
        if n == 0 {
            return Ok(());
        }
        if idx.bound > x_len || out.len() < n * std::mem::size_of::<T>() {
            return Err(Error::InvalidArgument(format!(
                "halo pack: indices up to {} in a vector of {x_len}, or {n} values into a shorter buffer",
                idx.bound
            )));
        }
        let idx = &idx.buf;
        let f = self.function(&kernel::<T>("halo_pack"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&n).arg(x).arg(idx).arg(out);
        // SAFETY: `halo_pack_*` takes (n, x, idx, out); the caller's indices
        // lie in x and out holds n values.
        unsafe { b.launch(Self::cfg(self.grid_blocks(n))) }.map_err(dev("halo_pack"))?;
        self.inner.stats.launch("halo_pack");
        Ok(())
    }

    /// Inside a stream capture, a kernel of one block that does nothing,
    /// queued on the communication stream before an exchange's NCCL group,
    /// so that in a recorded iteration (a CUDA graph) the owned product is
    /// always dispatched before NCCL's kernel. Both are otherwise ready at
    /// once and either may go first; where NCCL's kernel goes first on some
    /// ranks and not on others, it spins on the former, waiting for
    /// neighbours whose kernel waits for their product's grid-stride grid
    /// to end, while the product's blocks it displaced start late (four
    /// H100s: iterations of 550 against 495 us where every rank had the same
    /// order). Behind this kernel NCCL's runs after the product on every
    /// rank, as outside a graph. Outside a capture nothing is queued.
    fn delay_in_capture<T: Scalar, E>(
        &self,
        nccl: &Nccl,
        x: &CudaSlice<E>,
        h: &NcclHalo,
        staging: &CudaSlice<u8>,
    ) -> Result<()> {
        let capturing = self
            .inner
            .stream
            .capture_status()
            .map_err(dev("reading the capture status"))?;
        if capturing != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Ok(());
        }
        let f = self.function(&kernel::<T>("halo_pack"))?;
        let none = 0usize;
        let mut b = nccl.stream.launch_builder(&f);
        b.arg(&none).arg(x).arg(&h.pack.buf).arg(staging);
        // SAFETY: `halo_pack_*` takes (n, x, idx, out); with n = 0 it reads
        // and writes nothing.
        unsafe { b.launch(Self::cfg(1)) }.map_err(dev("halo_pack"))?;
        self.inner.stats.launch("halo_pack");
        Ok(())
    }

    /// Makes the communication stream wait for the work queued so far on the
    /// compute stream.
    fn comm_waits(&self, nccl: &Nccl) -> Result<()> {
        let ready = self
            .inner
            .stream
            .record_event(None)
            .map_err(dev("recording an event"))?;
        nccl.stream
            .wait(&ready)
            .map_err(dev("waiting for an event"))
    }

    /// Makes the compute stream wait for the work queued so far on the
    /// communication stream.
    fn compute_waits(&self, nccl: &Nccl) -> Result<()> {
        let done = nccl
            .stream
            .record_event(None)
            .map_err(dev("recording an event"))?;
        self.inner
            .stream
            .wait(&done)
            .map_err(dev("waiting for an event"))
    }

    /// The device side of one matrix's halo exchange between GPUs: `pack`,
    /// the owned entries to send in sending order; `sends`, each neighbour's
    /// rank and its range of the packed entries; `recvs`, each neighbour's
    /// rank and its range of the ghost vector. Uploads the pack list and a
    /// staging buffer for it once. Errors when no communicator is attached,
    /// a rank lies outside it, or a send range outside the pack.
    pub fn nccl_halo_plan(
        &self,
        pack: &[usize],
        sends: Vec<(usize, Range<usize>)>,
        recvs: Vec<(usize, Range<usize>)>,
    ) -> Result<NcclHalo> {
        let nccl = self.nccl("nccl_halo_plan")?;
        let bad = sends
            .iter()
            .chain(&recvs)
            .any(|(p, r)| *p >= nccl.size || r.start > r.end)
            || sends.iter().any(|(_, r)| r.end > pack.len());
        if bad {
            return Err(Error::InvalidArgument(
                "nccl_halo_plan: a rank outside the communicator or a range outside the pack"
                    .into(),
            ));
        }
        // Room for the widest scalar (Complex<f64>).
        let bytes = 16 * pack.len();
        let staging = self
            .inner
            .stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| self.alloc_error("the halo's staging buffer", bytes, e))?;
        let ghosts = recvs.iter().map(|(_, r)| r.end).max().unwrap_or(0);
        let h = NcclHalo {
            pack: self.upload_indices(pack)?,
            staging: Mutex::new(staging),
            direct: direct_ranges(pack, &sends),
            sends,
            recvs,
            ghosts,
        };
        self.connect(nccl, &h)?;
        Ok(h)
    }

    /// NCCL connects a pair of ranks at their first exchange (about 0.2 s
    /// between two H100s, measured): one byte to and from each neighbour of
    /// `h` not linked yet in that direction, waited for, so that the solve's
    /// first exchange does not pay it; nothing (no wait) where every
    /// neighbour is linked already. Collective among the neighbours (every
    /// rank builds its plans at the same point, and the two ends of a link
    /// record it at the same plan).
    fn connect(&self, nccl: &Nccl, h: &NcclHalo) -> Result<()> {
        let peers = |list: &[(usize, Range<usize>)]| list.iter().map(|(p, _)| *p).collect();
        let (sends, recvs): (Vec<usize>, Vec<usize>) = (peers(&h.sends), peers(&h.recvs));
        let mut comm = nccl.comm.lock().unwrap_or_else(|e| e.into_inner());
        self.link(nccl, &mut comm, &sends, &recvs)
    }

    /// Connects the sends to `sends` and the receives from `recvs` that
    /// `comm` has not linked yet: one NCCL group of one-byte messages on
    /// the communication stream (its own buffers, allocated there), waited
    /// for; then records them linked. Nothing where all are linked; an
    /// error where the background linking failed (`SharedComm::failed`).
    fn link(
        &self,
        nccl: &Nccl,
        comm: &mut SharedComm,
        sends: &[usize],
        recvs: &[usize],
    ) -> Result<()> {
        if let Some(e) = &comm.failed {
            return Err(Error::Device(e.clone()));
        }
        let sends: Vec<usize> = sends
            .iter()
            .copied()
            .filter(|&p| !comm.linked[p].0)
            .collect();
        let recvs: Vec<usize> = recvs
            .iter()
            .copied()
            .filter(|&p| !comm.linked[p].1)
            .collect();
        if sends.is_empty() && recvs.is_empty() {
            return Ok(());
        }
        let alloc = |n: usize| {
            nccl.stream
                .alloc_zeros::<u8>(n)
                .map_err(|e| self.alloc_error("connecting the halo", n, e))
        };
        let (one, mut into) = (alloc(1)?, alloc(recvs.len().max(1))?);
        group_start().map_err(nccl_error("ncclGroupStart"))?;
        let mut queued = Ok(());
        for &peer in &sends {
            if queued.is_ok() {
                queued = comm.comm.send(&one, peer as i32);
            }
        }
        for (k, &peer) in recvs.iter().enumerate() {
            if queued.is_ok() {
                queued = comm
                    .comm
                    .recv(&mut into.slice_mut(k..k + 1), peer as i32)
                    .map(|_| ());
            }
        }
        let ended = group_end().map_err(nccl_error("ncclGroupEnd"));
        queued.map_err(nccl_error("ncclSend/ncclRecv"))?;
        ended?;
        nccl.stream
            .synchronize()
            .map_err(dev("connecting the halo"))?;
        for &p in &sends {
            comm.linked[p].0 = true;
        }
        for &p in &recvs {
            comm.linked[p].1 = true;
        }
        Ok(())
    }

    /// One halo exchange between GPUs: packs `x`'s entries of the plan `h`
    /// into its staging buffer (compute stream; where every send is a run of
    /// consecutive entries, none: they are sent from x), then on the communication
    /// stream sends each neighbour its range and receives each neighbour's
    /// values into its range of `ghosts`, all in one NCCL group, while
    /// `overlap` (the owned block's SpMV) is queued on the compute stream;
    /// the compute stream then waits for the exchange. No host
    /// synchronisation. Errors when `x` or `ghosts` is too short for the
    /// plan, or NCCL fails.
    pub fn nccl_exchange<T: Scalar>(
        &self,
        h: &NcclHalo,
        x: &CudaVector<T>,
        ghosts: &mut CudaVector<T>,
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let nccl = self.nccl("nccl_exchange")?;
        self.exchange_in::<T, u8>(
            nccl,
            h,
            (&x.buf, x.len),
            (&mut ghosts.buf, ghosts.len, 0),
            overlap,
        )
    }

    /// [`CudaBackend::nccl_exchange`] for the setup's vectors (its Lanczos
    /// estimates across ranks): the plan's entries of `x` sent, the
    /// neighbours' values received into `y` from entry `at` on (the ghost
    /// entries after the rank's), nothing run meanwhile. No host
    /// synchronisation. Errors when `x` or `y` is too short for the plan, no
    /// communicator is attached, or NCCL fails.
    pub fn nccl_setup_exchange(
        &self,
        h: &NcclHalo,
        x: &SetupVec,
        (y, at): (&mut SetupVec, usize),
    ) -> Result<()> {
        let nccl = self.nccl("nccl_setup_exchange")?;
        self.exchange_in::<f64, f64>(
            nccl,
            h,
            (&x.buf, x.len),
            (&mut y.buf, y.len, at),
            &mut || Ok(()),
        )
    }

    /// The exchange of [`CudaBackend::nccl_exchange`] over buffers of `E`
    /// holding `T` values (`x_len` of x; `len` of the ghosts' vector, the
    /// ghosts from entry `at`): the messages are the values' bytes.
    fn exchange_in<T: Scalar, E: DeviceRepr>(
        &self,
        nccl: &Nccl,
        h: &NcclHalo,
        (x, x_len): (&CudaSlice<E>, usize),
        (ghosts, len, at): (&mut CudaSlice<E>, usize, usize),
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if len < at + h.ghosts {
            return Err(Error::InvalidArgument(format!(
                "nccl_exchange: {} ghosts from entry {at} into a vector of {len}",
                h.ghosts
            )));
        }
        let size = std::mem::size_of::<T>();
        let too_short = |what: &str| {
            Error::InvalidArgument(format!("nccl_exchange: a buffer shorter than its {what}"))
        };
        let mut marks = [std::time::Instant::now(); 6];
        let mut staging = h.staging.lock().unwrap_or_else(|e| e.into_inner());
        match &h.direct {
            Some(d) => {
                if let Some(r) = d.iter().find(|r| r.end > x_len) {
                    return Err(Error::InvalidArgument(format!(
                        "nccl_exchange: entries {r:?} of a vector of {x_len}"
                    )));
                }
            }
            None => self.pack::<T, E>((x, x_len), &h.pack, &mut staging)?,
        }
        marks[1] = std::time::Instant::now();
        self.comm_waits(nccl)?;
        self.delay_in_capture::<T, E>(nccl, x, h, &staging)?;
        marks[2] = std::time::Instant::now();
        let bytes = |r: &Range<usize>| r.start * size..r.end * size;
        // SAFETY (both views): every T value is `size` plain bytes, and
        // the views cover the vectors' values (`x_len`, `len` of them).
        let xb = unsafe { x.transmute::<u8>(x_len * size) }.ok_or_else(|| too_short("vector"))?;
        let mut gb =
            unsafe { ghosts.transmute_mut::<u8>(len * size) }.ok_or_else(|| too_short("ghosts"))?;
        {
            let comm = nccl.comm.lock().unwrap_or_else(|e| e.into_inner());
            group_start().map_err(nccl_error("ncclGroupStart"))?;
            let mut queued = Ok(());
            for (k, (peer, r)) in h.sends.iter().enumerate() {
                if queued.is_ok() && !r.is_empty() {
                    queued = match &h.direct {
                        Some(d) => comm.comm.send(&xb.slice(bytes(&d[k])), *peer as i32),
                        None => comm.comm.send(&staging.slice(bytes(r)), *peer as i32),
                    };
                }
            }
            for (peer, r) in h.recvs.iter().filter(|(_, r)| !r.is_empty()) {
                if queued.is_ok() {
                    let into = bytes(&(at + r.start..at + r.end));
                    queued = comm
                        .comm
                        .recv(&mut gb.slice_mut(into), *peer as i32)
                        .map(|_| ());
                }
            }
            let ended = group_end().map_err(nccl_error("ncclGroupEnd"));
            queued.map_err(nccl_error("ncclSend/ncclRecv"))?;
            ended?;
        }
        self.inner.stats.launch("nccl_exchange");
        marks[3] = std::time::Instant::now();
        overlap()?;
        marks[4] = std::time::Instant::now();
        self.compute_waits(nccl)?;
        marks[5] = std::time::Instant::now();
        if let Some(t) = &nccl.trace {
            let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
            for k in 0..5 {
                t[k] += (marks[k + 1] - marks[k]).as_nanos() as u64;
            }
            t[5] += 1;
        }
        Ok(())
    }

    /// A vector split in contiguous row blocks, made whole on every rank:
    /// rank r's `mine` (`counts[r]` values) lands at offset
    /// `counts[..r].sum()` of `whole`. One NCCL group of a broadcast per rank
    /// (an all-gather of unequal blocks) on the communication stream, ordered
    /// after the compute stream's work and before its next (events); no host
    /// synchronisation. Collective. Errors when no communicator is attached,
    /// `counts` does not have one entry per rank, or the lengths do not match.
    pub fn nccl_allgather_rows<T: Scalar>(
        &self,
        counts: &[usize],
        mine: &CudaVector<T>,
        whole: &mut CudaVector<T>,
    ) -> Result<()> {
        let nccl = self.nccl("nccl_allgather_rows")?;
        let comm = nccl.comm.lock().unwrap_or_else(|e| e.into_inner());
        let rank = comm.comm.rank();
        let total: usize = counts.iter().sum();
        if counts.len() != nccl.size || mine.len != counts[rank] || whole.len != total {
            return Err(Error::InvalidArgument(format!(
                "nccl_allgather_rows: {} blocks for {} ranks, {} values of this rank's {}, a whole of {} for {total}",
                counts.len(),
                nccl.size,
                mine.len,
                counts.get(rank).copied().unwrap_or(0),
                whole.len
            )));
        }
        let size = std::mem::size_of::<T>();
        self.comm_waits(nccl)?;
        group_start().map_err(nccl_error("ncclGroupStart"))?;
        let mut queued = Ok(());
        let mut at = 0;
        for (root, &c) in counts.iter().enumerate() {
            if c > 0 && queued.is_ok() {
                let src = (root == rank).then(|| mine.buf.slice(..c * size));
                let mut dst = whole.buf.slice_mut(at * size..(at + c) * size);
                queued = comm
                    .comm
                    .broadcast(src.as_ref(), &mut dst, root as i32)
                    .map(|_| ());
            }
            at += c;
        }
        let ended = group_end().map_err(nccl_error("ncclGroupEnd"));
        queued.map_err(nccl_error("ncclBroadcast"))?;
        ended?;
        drop(comm);
        self.compute_waits(nccl)?;
        self.inner.stats.launch("nccl_allgather_rows");
        Ok(())
    }

    /// The all-reduce of a method's scalar slots: `sc[k]` becomes the sum
    /// over ranks of every rank's `sc[k]` for each `k` of `slots`, added in
    /// the fixed pairwise rank order of the host's allreduce (the same bits).
    /// One NCCL all-gather of every rank's whole array on the communication
    /// stream (no pack: the array is a few scalars) into a buffer made when
    /// the communicator was attached, and one summing kernel given the slots
    /// by value (a bit mask); no host synchronisation, no allocation, so a
    /// recorded iteration (a CUDA graph) may hold it. Returns `false`, doing
    /// nothing, for an array longer than [`NCCL_SLOTS`] (the caller sums
    /// through the host). Errors when a slot lies outside `sc` or NCCL fails.
    pub fn nccl_sum_slots<T: Scalar>(
        &self,
        sc: &mut CudaVector<T>,
        slots: &[usize],
    ) -> Result<bool> {
        let nccl = self.nccl("nccl_sum_slots")?;
        self.sum_slots_in::<T, u8>(nccl, (&mut sc.buf, sc.len), slots)
    }

    /// [`CudaBackend::nccl_sum_slots`] for the setup's scalars (its Lanczos
    /// estimates across ranks): the same all-gather and summing kernel, the
    /// same bits as the hosts' sum. Returns `false`, doing nothing, for an
    /// array longer than [`NCCL_SLOTS`].
    pub fn nccl_sum_setup_slots(&self, sc: &mut SetupVec, slots: &[usize]) -> Result<bool> {
        let nccl = self.nccl("nccl_sum_setup_slots")?;
        self.sum_slots_in::<f64, f64>(nccl, (&mut sc.buf, sc.len), slots)
    }

    /// The slot sums of [`CudaBackend::nccl_sum_slots`] over a buffer of `E`
    /// holding `len` values of `T`.
    fn sum_slots_in<T: Scalar, E: DeviceRepr>(
        &self,
        nccl: &Nccl,
        (sc, len): (&mut CudaSlice<E>, usize),
        slots: &[usize],
    ) -> Result<bool> {
        gpuq_core::check_indices("nccl_sum_slots", len, slots)?;
        if len > NCCL_SLOTS {
            return Ok(false);
        }
        if slots.is_empty() {
            return Ok(true);
        }
        let mask = slots.iter().fold(0u64, |m, &k| m | 1 << k);
        let size = std::mem::size_of::<T>();
        let mut gathered = nccl.gathered.lock().unwrap_or_else(|e| e.into_inner());
        self.comm_waits(nccl)?;
        {
            // Every rank's whole scalar array (a few dozen bytes): no pack.
            // SAFETY: the view covers the array's `len` values, each `size`
            // plain bytes.
            let bytes = unsafe { sc.transmute::<u8>(len * size) }.ok_or_else(|| {
                Error::InvalidArgument("nccl_sum_slots: a buffer shorter than its values".into())
            })?;
            let comm = nccl.comm.lock().unwrap_or_else(|e| e.into_inner());
            comm.comm
                .all_gather(&bytes, &mut gathered.slice_mut(..nccl.size * len * size))
                .map_err(nccl_error("ncclAllGather"))?;
        }
        self.compute_waits(nccl)?;
        let f = self.function(&kernel::<T>("rank_sum"))?;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&mask)
            .arg(&nccl.size)
            .arg(&len)
            .arg(&*gathered)
            .arg(&mut *sc);
        // SAFETY: `rank_sum_*` takes (mask, size, len, gathered, sc);
        // gathered holds size * len values, sc len, and the mask names
        // slots below len (checked above).
        unsafe { b.launch(Self::cfg(self.grid_blocks(len))) }.map_err(dev("rank_sum"))?;
        self.inner.stats.launch("rank_sum");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::direct_ranges;

    #[test]
    fn runs_of_consecutive_entries_are_sent_straight_from_the_vector() {
        // a slab's two planes: to rank 0 entries 0..3, to rank 2 entries 7..10
        let pack = [0, 1, 2, 7, 8, 9];
        let sends = [(0, 0..3), (2, 3..6)];
        assert_eq!(direct_ranges(&pack, &sends), Some(vec![0..3, 7..10]));
        // one send out of order or with a hole: every send is packed
        assert_eq!(direct_ranges(&[0, 2, 3], &[(1, 0..3)]), None);
        assert_eq!(direct_ranges(&[0, 1, 5, 4], &[(0, 0..2), (1, 2..4)]), None);
        // an empty send is a run
        assert_eq!(
            direct_ranges(&[4, 5], &[(0, 0..0), (1, 0..2)]),
            Some(vec![0..0, 4..6])
        );
    }
}
