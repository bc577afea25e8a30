//! The communication a distributed GPU solve pays per iteration, measured
//! under `mpirun` with one GPU per rank: the 8-byte all-reduce (the host's
//! MPI allreduce of a downloaded scalar, and the device slots summed over
//! NCCL), and a halo exchange of `K` f64 each way between neighbouring ranks
//! (through host memory and MPI, and over NCCL), each timed to completion
//! (the GPU synchronised) and averaged over many repetitions, and queued back
//! to back with one synchronisation at the end (the host's rate of issuing
//! them where it is below the GPUs'). Rank 0 prints
//! one line per measurement, in microseconds per operation.
//!
//! ```text
//! cargo build --release -p gpuq-dist --features mpi,cuda --example comm_bench
//! mpirun -n 2 target/release/examples/comm_bench [K=90000] [REPS=2000]
//! ```
//!
//! The halo matrix couples row i of each rank to row i of the next rank and
//! of the previous one (a ring of K-row blocks): every exchange moves K values
//! to each neighbour, as a plane of laplace3d:300 (K = 90,000) does in a slab
//! partition; its owned block is the identity, so the SpMV around the
//! exchange costs next to nothing.

use gpuq_core::{Backend, Result};
use gpuq_cuda::CudaBackend;
use gpuq_dist::{Communicator, Dist, DistMatrix, MpiComm, RowPartition};
use gpuq_sparse::{Csr, Layout, SparseBackend};
use std::sync::Arc;
use std::time::Instant;

/// Rank `rank`'s rows of the ring matrix of `size` blocks of `k` rows.
fn ring_rows(k: usize, rank: usize, size: usize) -> Result<Csr<f64>> {
    let n = k * size;
    let mut ptr = vec![0];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in 0..k {
        let mut row = vec![(rank * k + i, 1.0)];
        if size > 1 {
            row.push((((rank + 1) % size) * k + i, 0.5));
            if size > 2 {
                row.push((((rank + size - 1) % size) * k + i, 0.25));
            }
        }
        row.sort_by_key(|e| e.0);
        for (c, v) in row {
            cols.push(c as u32);
            vals.push(v);
        }
        ptr.push(cols.len());
    }
    Csr::try_new(k, n, ptr, cols, vals)
}

/// Mean microseconds of `reps` calls of `f` queued back to back on `gpu`,
/// one synchronisation at the end (after 20 to warm up).
fn queued(gpu: &CudaBackend, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    per_call(1, || {
        for _ in 0..reps {
            f()?;
        }
        gpu.synchronize()
    })
    .map(|us| us / reps as f64)
}

/// Mean microseconds of `reps` calls of `f` (after 20 to warm up).
fn per_call(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..20 {
        f()?;
    }
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() / reps as f64 * 1e6)
}

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    let k = args.first().copied().filter(|&v| v > 0).unwrap_or(90_000);
    let reps = args.get(1).copied().filter(|&v| v > 0).unwrap_or(2000);
    let mpi = MpiComm::init()?;
    let (node_rank, _) = mpi.node_rank();
    let comm: Arc<dyn Communicator> = Arc::new(mpi);
    let (rank, size) = (comm.rank(), comm.size());
    let device = node_rank % CudaBackend::device_count()?.max(1);
    // Two backends on the rank's GPU: one exchanging through the host, one
    // over NCCL.
    let host_gpu = CudaBackend::new(device)?;
    let nccl_gpu = CudaBackend::new(device)?;
    let mut id = if rank == 0 {
        CudaBackend::nccl_unique_id()?.to_vec()
    } else {
        Vec::new()
    };
    comm.broadcast(0, &mut id)?;
    let id: [u8; gpuq_cuda::NCCL_ID_BYTES] = id
        .try_into()
        .map_err(|_| gpuq_core::Error::InvalidArgument("malformed NCCL id".into()))?;
    nccl_gpu.attach_nccl(rank, size, &id)?;
    let partition = RowPartition::contiguous(k * size, size)?;
    let rows = ring_rows(k, rank, size)?;
    let mut lines = Vec::new();
    for (name, gpu) in [("mpi (host)", host_gpu), ("nccl", nccl_gpu)] {
        let dist = Dist::new(gpu.clone(), comm.clone());
        // The 8-byte all-reduce as a Krylov method meets it: one slot of the
        // device scalar array summed over ranks, then read back.
        let mut sc = dist.upload(&[1.0f64])?;
        let slot = per_call(reps, || {
            dist.sum_slots(&mut sc, &[0])?;
            gpu.synchronize()
        })?;
        // The same queued back to back, one wait at the end: the GPUs'
        // own time per operation (what a queued iteration meets).
        let queued_slot = queued(&gpu, reps, || dist.sum_slots(&mut sc, &[0]))?;
        let m = DistMatrix::new(&dist, &partition, &rows, Layout::Csr)?;
        let x = dist.upload(&vec![1.0f64; k])?;
        let mut y = dist.zeros::<f64>(k)?;
        let spmv = per_call(reps / 4, || {
            dist.spmv(1.0, &m, &x, 0.0, &mut y)?;
            gpu.synchronize()
        })?;
        let queued_spmv = queued(&gpu, reps / 4, || dist.spmv(1.0, &m, &x, 0.0, &mut y))?;
        lines.push(format!(
            "{name:>10}: 8-byte slot all-reduce {slot:8.1} us ({queued_slot:.1} queued); halo of {k} f64 each way (SpMV of the ring, identity owned block) {spmv:8.1} us ({queued_spmv:.1} queued) = {:.1} GB/s per direction",
            8.0 * k as f64 / spmv * 1e-3
        ));
    }
    // The host's scalar all-reduce (dot products, norms).
    let host = per_call(reps, || comm.allreduce_sum(&[1.0]).map(|_| ()))?;
    lines.push(format!(
        "{:>10}: 8-byte MPI allreduce of a host scalar {host:8.1} us",
        "mpi"
    ));
    // The local SpMV alone, for the part of the ring's time that is not the
    // exchange.
    let local = CudaBackend::new(device)?;
    let own = local.upload_matrix(&Csr::<f64>::identity(k), Layout::Csr)?;
    let x = local.upload(&vec![1.0f64; k])?;
    let mut y = local.zeros::<f64>(k)?;
    let alone = per_call(reps / 4, || {
        local.spmv(1.0, &own, &x, 0.0, &mut y)?;
        local.synchronize()
    })?;
    lines.push(format!(
        "{:>10}: the owned block's SpMV alone {alone:8.1} us",
        "local"
    ));
    if rank == 0 {
        println!("comm_bench: {size} ranks, {reps} repetitions");
        for l in lines {
            println!("{l}");
        }
    }
    Ok(())
}
