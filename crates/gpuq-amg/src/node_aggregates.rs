//! Each node's aggregate where the setup made it: on the host, or held by a
//! backend (for the CUDA backend, in device memory) and brought to the host
//! only when something there asks for it.

use gpuq_core::{Error, Result};
use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// Each node's aggregate as a backend holds it ([`NodeAggregates`]).
pub trait HeldAggregates: Send + Sync {
    /// The aggregates on the host. Cost: 4 bytes per node across.
    fn download(&self) -> Result<Vec<u32>>;

    /// The backend's own type, for the backend that made it to find its data.
    fn as_any(&self) -> &dyn Any;
}

/// Each node's aggregate ([`crate::aggregate::NOT_AGGREGATED`] for a node
/// in none) and the number of aggregates: a host copy, a backend's copy
/// ([`HeldAggregates`]), or both, the host copy made on first need and then
/// kept. Clones share both copies: O(1).
#[derive(Clone)]
pub struct NodeAggregates {
    count: usize,
    host: Arc<OnceLock<Vec<u32>>>,
    held: Option<Arc<dyn HeldAggregates>>,
}

impl NodeAggregates {
    /// `agg` (each node's aggregate, below `count` or
    /// [`crate::aggregate::NOT_AGGREGATED`]) on the host.
    pub fn from_host(agg: Vec<u32>, count: usize) -> Self {
        NodeAggregates {
            count,
            host: Arc::new(OnceLock::from(agg)),
            held: None,
        }
    }

    /// `count` aggregates held by a backend only, brought to the host on the
    /// first [`NodeAggregates::host`].
    pub fn from_held(held: Arc<dyn HeldAggregates>, count: usize) -> Self {
        NodeAggregates {
            count,
            host: Arc::default(),
            held: Some(held),
        }
    }

    /// The number of aggregates.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The backend's copy, if a backend made the aggregates.
    pub fn held(&self) -> Option<&dyn HeldAggregates> {
        self.held.as_deref()
    }

    /// Each node's aggregate on the host: free when there is a host copy,
    /// else one download ([`HeldAggregates::download`]), kept.
    pub fn host(&self) -> Result<&[u32]> {
        if let Some(a) = self.host.get() {
            return Ok(a);
        }
        let held = self.held.as_ref().ok_or_else(|| {
            Error::InvalidArgument("aggregates with neither a host nor a backend copy".into())
        })?;
        let got = held.download()?;
        Ok(self.host.get_or_init(|| got))
    }
}

impl PartialEq for NodeAggregates {
    /// The same count and the same aggregate for every node (a backend's
    /// copy is downloaded; one that cannot be equals nothing).
    fn eq(&self, other: &Self) -> bool {
        if self.count != other.count {
            return false;
        }
        matches!((self.host(), other.host()), (Ok(a), Ok(b)) if a == b)
    }
}

impl fmt::Debug for NodeAggregates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("NodeAggregates");
        d.field("count", &self.count);
        match self.host.get() {
            Some(a) => d.field("aggregate_of", a),
            None => d.field("aggregate_of", &"on the backend"),
        };
        d.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Vec<u32>, AtomicUsize);

    impl HeldAggregates for Counted {
        fn download(&self) -> Result<Vec<u32>> {
            self.1.fetch_add(1, Ordering::Relaxed);
            Ok(self.0.clone())
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn held_aggregates_come_to_the_host_once_and_compare_by_value() {
        let held = Arc::new(Counted(vec![0, 1, 1, 0], AtomicUsize::new(0)));
        let a = NodeAggregates::from_held(held.clone(), 2);
        let b = a.clone();
        assert!(format!("{a:?}").contains("on the backend"));
        assert_eq!(a.host().unwrap(), &[0, 1, 1, 0]);
        assert_eq!(b.host().unwrap(), &[0, 1, 1, 0]);
        assert_eq!(held.1.load(Ordering::Relaxed), 1, "one download, shared");
        assert!(a.held().is_some());
        let h = NodeAggregates::from_host(vec![0, 1, 1, 0], 2);
        assert!(h.held().is_none());
        assert_eq!(a, h);
        assert_ne!(NodeAggregates::from_host(vec![0, 1, 1, 0], 3), h);
        assert_ne!(NodeAggregates::from_host(vec![0, 1, 0, 0], 2), h);
    }
}
