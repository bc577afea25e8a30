//! A rank's share of its node's CPUs under `mpirun`: the CPUs the job may
//! use on the node (its launcher's, the rank's parent process: OpenMPI's
//! daemon, Slurm's step) split into equal contiguous blocks, one per rank on
//! the node, the rank's thread pool sized to its block, and its affinity
//! widened to the block when the launcher bound it to fewer CPUs (OpenMPI
//! binds each of up to two ranks to one core by default, which would run
//! every host step of a GPU rank's setup, and a CPU rank's whole solve, on
//! that core).

use std::ops::Range;

/// How many CPUs each of `ranks` ranks on a node of `cpus` CPUs takes: an
/// equal share, at least one. O(1).
pub(crate) fn share_len(ranks: usize, cpus: usize) -> usize {
    (cpus / ranks.max(1)).max(1)
}

/// The positions (in the node's CPU list of `cpus` entries) of rank `index`
/// of `ranks`: the `index`-th block of [`share_len`] CPUs, wrapping round
/// when there are more ranks than CPUs. O(1).
pub(crate) fn share(index: usize, ranks: usize, cpus: usize) -> Range<usize> {
    let len = share_len(ranks, cpus);
    let blocks = (cpus.max(1) / len).max(1);
    let start = (index % blocks) * len;
    start..start + len
}

/// The CPUs the job may use on this node: the launcher's (the parent
/// process's affinity, which binds only the ranks), else this process's;
/// never empty. O(CPUs).
pub(crate) fn node_cpu_list() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        for pid in [parent, 0] {
            let cpus = affinity_of(pid);
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..allowed_cpus()).collect()
}

/// The number of CPUs of [`node_cpu_list`]. O(CPUs).
pub(crate) fn node_cpus() -> usize {
    node_cpu_list().len()
}

/// The CPUs in process `pid`'s affinity mask (0: this thread), empty when
/// it cannot be read.
#[cfg(target_os = "linux")]
fn affinity_of(pid: libc::pid_t) -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes
    // at most its size; CPU_ISSET reads bits below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPUs this thread may run on now (its affinity mask, and a cgroup's
/// quota), at least 1.
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
    let list = node_cpu_list();
    let mine = &list[share(node.0, node.1, list.len())];
    let (threads, allowed) = (mine.len(), allowed_cpus());
    let keep = std::env::var_os("GPUQ_KEEP_AFFINITY").is_some_and(|v| v != "0");
    let note = (allowed < threads && !keep && widen(mine)).then(|| {
        format!(
            "the MPI launcher bound each rank to {allowed} CPU(s); the ranks now run on their \
             shares of the {} CPUs the job has on their node ({threads} each; \
             GPUQ_KEEP_AFFINITY=1 keeps the launcher's binding)",
            list.len()
        )
    });
    Taken { threads, note }
}

/// Moves the calling thread onto the CPUs `cpus`; whether the system
/// accepted it. O(CPUs).
#[cfg(target_os = "linux")]
fn widen(cpus: &[usize]) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes bits below
    // CPU_SETSIZE only (checked); sched_setaffinity reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Elsewhere the binding is kept.
#[cfg(not(target_os = "linux"))]
fn widen(_cpus: &[usize]) -> bool {
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

    #[test]
    fn the_node_list_holds_this_threads_cpus() {
        let list = node_cpu_list();
        assert!(!list.is_empty() && list.windows(2).all(|w| w[0] < w[1]));
        #[cfg(target_os = "linux")]
        for c in affinity_of(0) {
            // the parent's mask, read here, holds the child's CPUs unless the
            // parent narrowed itself after starting this process
            assert!(list.contains(&c) || affinity_of(unsafe { libc::getppid() }).is_empty());
        }
    }
}
