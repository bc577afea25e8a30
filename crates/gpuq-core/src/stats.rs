//! Transfer and launch accounting shared by all backends.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A snapshot of what a backend did: host/device transfers and kernel launches
/// (for the CPU backend a "launch" is one parallel operation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Host-to-device copies.
    pub uploads: u64,
    /// Device-to-host copies.
    pub downloads: u64,
    /// Bytes copied host to device.
    pub bytes_up: u64,
    /// Bytes copied device to host.
    pub bytes_down: u64,
    /// Kernel launches (parallel operations on the CPU backend).
    pub launches: u64,
    /// Launches per operation name (`"axpy"`, `"spmv_csr"`, ...), and units of
    /// work recorded with [`StatsRecorder::work`] under their own names.
    pub ops: BTreeMap<String, u64>,
}

impl Stats {
    /// The difference `self - earlier`, counter by counter (saturating at zero).
    pub fn since(&self, earlier: &Stats) -> Stats {
        let ops = self
            .ops
            .iter()
            .filter_map(|(k, v)| {
                let d = v.saturating_sub(*earlier.ops.get(k).unwrap_or(&0));
                (d > 0).then(|| (k.clone(), d))
            })
            .collect();
        Stats {
            uploads: self.uploads.saturating_sub(earlier.uploads),
            downloads: self.downloads.saturating_sub(earlier.downloads),
            bytes_up: self.bytes_up.saturating_sub(earlier.bytes_up),
            bytes_down: self.bytes_down.saturating_sub(earlier.bytes_down),
            launches: self.launches.saturating_sub(earlier.launches),
            ops,
        }
    }
}

/// Thread-safe counters a backend updates as it works; [`StatsRecorder::snapshot`]
/// turns them into a [`Stats`]. Recording costs a few atomic adds and, per
/// operation, one short mutex-protected map update.
#[derive(Debug, Default)]
pub struct StatsRecorder {
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    launches: AtomicU64,
    ops: Mutex<BTreeMap<Cow<'static, str>, u64>>,
}

impl StatsRecorder {
    /// Records one host-to-device copy of `bytes` bytes.
    pub fn upload(&self, bytes: usize) {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.bytes_up.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records one device-to-host copy of `bytes` bytes.
    pub fn download(&self, bytes: usize) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.bytes_down.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records `units` units of work under the name `op` without counting a
    /// launch (for operations whose cost is not fixed per launch, such as the
    /// vectors one Gram-Schmidt pass reads).
    pub fn work(&self, op: &'static str, units: u64) {
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        *ops.entry(Cow::Borrowed(op)).or_insert(0) += units;
    }

    /// Records one launch of operation `op`.
    pub fn launch(&self, op: &'static str) {
        self.launches.fetch_add(1, Ordering::Relaxed);
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        *ops.entry(Cow::Borrowed(op)).or_insert(0) += 1;
    }

    /// Adds every counter of `stats` (for work a backend repeats without
    /// recording it again, such as the replay of a recorded CUDA graph).
    pub fn add(&self, stats: &Stats) {
        self.uploads.fetch_add(stats.uploads, Ordering::Relaxed);
        self.downloads.fetch_add(stats.downloads, Ordering::Relaxed);
        self.bytes_up.fetch_add(stats.bytes_up, Ordering::Relaxed);
        self.bytes_down
            .fetch_add(stats.bytes_down, Ordering::Relaxed);
        self.launches.fetch_add(stats.launches, Ordering::Relaxed);
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        for (op, &n) in &stats.ops {
            match ops.get_mut(op.as_str()) {
                Some(c) => *c += n,
                None => {
                    ops.insert(Cow::Owned(op.clone()), n);
                }
            }
        }
    }

    /// The counters as they are now.
    pub fn snapshot(&self) -> Stats {
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        Stats {
            uploads: self.uploads.load(Ordering::Relaxed),
            downloads: self.downloads.load(Ordering::Relaxed),
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
            launches: self.launches.load(Ordering::Relaxed),
            ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        for c in [
            &self.uploads,
            &self.downloads,
            &self.bytes_up,
            &self.bytes_down,
            &self.launches,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_diffs() {
        let r = StatsRecorder::default();
        r.upload(16);
        let a = r.snapshot();
        r.launch("axpy");
        r.launch("axpy");
        r.download(8);
        let d = r.snapshot().since(&a);
        assert_eq!(d.uploads, 0);
        assert_eq!(d.downloads, 1);
        assert_eq!(d.bytes_down, 8);
        assert_eq!(d.launches, 2);
        assert_eq!(d.ops.get("axpy"), Some(&2));
        // Adding a difference back counts it again, also after a reset.
        r.add(&d);
        let twice = r.snapshot().since(&a);
        assert_eq!((twice.launches, twice.downloads), (4, 2));
        assert_eq!(twice.ops.get("axpy"), Some(&4));
        r.reset();
        assert_eq!(r.snapshot(), Stats::default());
        r.add(&d);
        assert_eq!(r.snapshot(), d);
    }
}
