//! [`MpiComm`]: the [`Communicator`] over MPI (rsmpi; OpenMPI or MPICH found
//! at build time), one rank per process.

use crate::comm::{check_gathered, check_rank, comm_error, Communicator};
use gpuq_core::Result;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives, Destination, Root, Source};
use mpi::Threading;
use std::sync::Mutex;

/// The world communicator of an MPI job. Create it once per process with
/// [`MpiComm::init`]; MPI is finalised when it is dropped.
///
/// Calls into MPI are serialised by a lock (MPI initialised at the
/// `Serialized` threading level), so the communicator may be shared with the
/// threads of the local backend. Collectives use MPI's allgather and
/// broadcast (the deterministic sums are done afterwards, as for every
/// communicator); an exchange posts its sends non-blocking, runs the overlap,
/// then receives.
pub struct MpiComm {
    world: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
    /// (rank on the node, ranks on the node).
    node: (usize, usize),
    _universe: Universe,
}

// SAFETY: MPI was initialised with at least `Threading::Serialized` (checked
// in `init`), every MPI call goes through the `world` lock, so no two threads
// call MPI at once, which is what that level requires; MPI's handles are
// process-wide, valid on any thread.
unsafe impl Send for MpiComm {}
// SAFETY: as for `Send`: shared access only reaches MPI through the lock.
unsafe impl Sync for MpiComm {}

impl MpiComm {
    /// Initialises MPI and returns the world communicator. Errors when MPI was
    /// initialised already or cannot serialise calls from several threads.
    pub fn init() -> Result<Self> {
        let (universe, level) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| comm_error("MPI is already initialised"))?;
        if level < Threading::Serialized {
            return Err(comm_error(format!(
                "MPI provides threading level {level:?}, gpuq needs Serialized"
            )));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        // The ranks that share this rank's memory (its node), numbered in
        // world order: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
        let node = world.split_shared(rank as i32);
        let node_rank = (node.rank() as usize, node.size() as usize);
        Ok(MpiComm {
            world: Mutex::new(world),
            rank,
            size,
            node: node_rank,
            _universe: universe,
        })
    }

    /// This rank's index among the ranks of its node and their number, from
    /// MPI's shared-memory split (whatever the launcher): the GPU a rank
    /// takes on a node with several, so one command line serves one node or
    /// several.
    pub fn node_rank(&self) -> (usize, usize) {
        self.node
    }

    /// Runs `f` with the world communicator, holding the lock.
    fn with<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        let world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&world)
    }
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&self, local: &[f64]) -> Result<Vec<f64>> {
        let mut all = vec![0.0; local.len() * self.size];
        if !local.is_empty() {
            self.with(|w| w.all_gather_into(local, &mut all[..]));
        } else {
            self.with(|w| w.barrier());
        }
        check_gathered(all.len(), local.len(), self.size)?;
        Ok(all)
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        check_rank("broadcast", root, self.size)?;
        self.with(|w| {
            let root_process = w.process_at_rank(root as i32);
            let mut len = data.len() as u64;
            root_process.broadcast_into(&mut len);
            if self.rank != root {
                *data = vec![0u8; len as usize];
            }
            if len > 0 {
                root_process.broadcast_into(&mut data[..]);
            }
        });
        Ok(())
    }

    fn send(&self, dest: usize, tag: u16, data: &[u8]) -> Result<()> {
        check_rank("send", dest, self.size)?;
        self.with(|w| {
            w.process_at_rank(dest as i32)
                .send_with_tag(data, i32::from(tag))
        });
        Ok(())
    }

    fn recv(&self, src: usize, tag: u16) -> Result<Vec<u8>> {
        check_rank("recv", src, self.size)?;
        Ok(self.with(|w| {
            w.process_at_rank(src as i32)
                .receive_vec_with_tag::<u8>(i32::from(tag))
                .0
        }))
    }

    fn exchange(
        &self,
        tag: u16,
        sends: &[(usize, &[u8])],
        from: &[usize],
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<Vec<u8>>> {
        for &(dest, _) in sends {
            check_rank("exchange (send)", dest, self.size)?;
        }
        for &src in from {
            check_rank("exchange (receive)", src, self.size)?;
        }
        let world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        mpi::request::scope(|scope| {
            let requests: Vec<_> = sends
                .iter()
                .map(|&(dest, data)| {
                    world.process_at_rank(dest as i32).immediate_send_with_tag(
                        scope,
                        data,
                        i32::from(tag),
                    )
                })
                .collect();
            // The sends are in flight; the overlap does not call MPI.
            let overlapped = overlap();
            let received: Vec<Vec<u8>> = from
                .iter()
                .map(|&src| {
                    world
                        .process_at_rank(src as i32)
                        .receive_vec_with_tag::<u8>(i32::from(tag))
                        .0
                })
                .collect();
            for r in requests {
                r.wait();
            }
            overlapped.map(|_| received)
        })
    }
}
