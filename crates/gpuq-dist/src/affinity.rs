//! A rank's share of its node's CPUs under `mpirun`: the node's online CPUs
//! split into equal contiguous blocks, one per rank on the node, the rank's
//! thread pool sized to its block, and its affinity widened to the block when
//! the launcher bound it to fewer CPUs (OpenMPI binds each of up to two
//! ranks to one core by default, which would run every host step of a GPU
//! rank's setup, and a CPU rank's whole solve, on that core).

use std::ops::Range;

/// How many CPUs each of `ranks` ranks on a node of `cpus` CPUs takes: an
/// equal share, at least one. O(1).
pub(crate) fn share_len(ranks: usize, cpus: usize) -> usize {
    (cpus / ranks.max(1)).max(1)
}

/// The CPUs of rank `index` of `ranks` on a node of `cpus` CPUs: the
/// `index`-th block of [`share_len`] CPUs, wrapping round when there are
/// more ranks than CPUs. O(1).
pub(crate) fn share(index: usize, ranks: usize, cpus: usize) -> Range<usize> {
    let len = share_len(ranks, cpus);
    let blocks = (cpus.max(1) / len).max(1);
    let start = (index % blocks) * len;
    start..start + len
}

/// The node's online CPUs (`sysconf`), else what this process may use, at
/// least 1. O(1).
pub(crate) fn node_cpus() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf reads a system constant.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if online > 0 {
            return online as usize;
        }
    }
    allowed_cpus()
}

/// The CPUs this thread may run on now (its affinity mask), at least 1.
fn allowed_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What [`take_share`] did: the threads the rank's pool gets, and a note
/// when it widened the rank's affinity.
pub(crate) struct Taken {
    /// The rank's threads: its share of the node's CPUs.
    pub(crate) threads: usize,
    /// Set when the launcher's binding was widened: what was done, for the
    /// user.
    pub(crate) note: Option<String>,
}

/// The share of rank `node.0` of the `node.1` ranks on its node: when its
/// affinity allows fewer CPUs than the share and `GPUQ_KEEP_AFFINITY` is
/// unset, the calling thread (and every thread it starts later: the thread
/// pools) is moved onto the share's CPUs (Linux; elsewhere nothing is
/// changed). Call before the thread pools start. O(CPUs).
pub(crate) fn take_share(node: (usize, usize)) -> Taken {
    let cpus = node_cpus();
    let mine = share(node.0, node.1, cpus);
    let (threads, allowed) = (mine.len(), allowed_cpus());
    let keep = std::env::var_os("GPUQ_KEEP_AFFINITY").is_some_and(|v| v != "0");
    let note = (allowed < threads && !keep && widen(&mine)).then(|| {
        format!(
            "the MPI launcher bound each rank to {allowed} CPU(s); the ranks now run on their \
             shares of their node's {cpus} CPUs ({threads} each; GPUQ_KEEP_AFFINITY=1 keeps the \
             launcher's binding)"
        )
    });
    Taken { threads, note }
}

/// Moves the calling thread onto the CPUs `cpus`; whether the system
/// accepted it. O(CPUs).
#[cfg(target_os = "linux")]
fn widen(cpus: &Range<usize>) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes bits below
    // CPU_SETSIZE only (checked); sched_setaffinity reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus.clone().filter(|&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Elsewhere the binding is kept.
#[cfg(not(target_os = "linux"))]
fn widen(_cpus: &Range<usize>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_split_the_node_into_equal_blocks() {
        assert_eq!(share(0, 2, 32), 0..16);
        assert_eq!(share(1, 2, 32), 16..32);
        assert_eq!(share(3, 4, 32), 24..32);
        // uneven: the last CPUs are left over
        assert_eq!(share(2, 3, 32), 20..30);
        // more ranks than CPUs: one CPU each, round robin
        assert_eq!(share(5, 8, 4), 1..2);
        assert_eq!(share(0, 1, 1), 0..1);
        assert_eq!(share_len(0, 8), 8);
    }

    #[test]
    fn every_rank_of_a_node_gets_cpus_of_the_node_none_shared() {
        for cpus in 1..40 {
            for ranks in 1..=cpus {
                let blocks: Vec<_> = (0..ranks).map(|r| share(r, ranks, cpus)).collect();
                for (r, b) in blocks.iter().enumerate() {
                    assert!(b.end <= cpus && !b.is_empty(), "{cpus} {ranks} {r}");
                    if r > 0 {
                        assert!(blocks[r - 1].end <= b.start, "{cpus} {ranks} {r}");
                    }
                }
            }
        }
    }
}
