//! The [`Communicator`] trait: the few collective and point-to-point
//! operations the distributed backend needs, with reductions whose bits do not
//! depend on timing, and [`SingleRank`], the communicator of one rank.

use gpuq_core::{Error, Result};

/// The communication a distributed solve needs, over ranks `0..size`.
///
/// Every rank must call the collective operations ([`Communicator::allgather`],
/// [`Communicator::broadcast`], [`Communicator::barrier`],
/// [`Communicator::allreduce_sum`]) in the same order. Reductions are
/// deterministic: the partials are gathered in rank order and summed in a fixed
/// order on every rank ([`ordered_sum`]), so the same rank count and input give
/// the same bits on every rank and every run, whatever the timing.
///
/// Implementations: [`SingleRank`] (no communication), [`crate::ThreadComm`]
/// (ranks as threads of one process, over channels) and, with the `mpi`
/// feature, `MpiComm` (over MPI).
pub trait Communicator: Send + Sync {
    /// This rank's number, `0..size`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// Every rank's `local` (all of the same length), concatenated in rank
    /// order, on every rank. Cost: `size * local.len()` values received.
    fn allgather(&self, local: &[f64]) -> Result<Vec<f64>>;

    /// Copies `data` of rank `root` into `data` on every rank (the other
    /// ranks' lengths may differ; theirs is replaced).
    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()>;

    /// Sends `data` to rank `dest` with `tag`. May block until the receiver
    /// takes it (as MPI's standard send), so pair it with
    /// [`Communicator::recv`] in an order that cannot deadlock, or use
    /// [`Communicator::exchange`].
    fn send(&self, dest: usize, tag: u16, data: &[u8]) -> Result<()>;

    /// Receives the next message from rank `src`, which must carry `tag`.
    fn recv(&self, src: usize, tag: u16) -> Result<Vec<u8>>;

    /// A neighbourhood exchange: sends `sends[k].1` to rank `sends[k].0`,
    /// receives one message from each rank of `from` (returned in that order),
    /// all with `tag`, and runs `overlap` while the messages travel (where the
    /// transport allows, the receives are posted and the sends started before
    /// `overlap` runs). Never deadlocks when every rank's sends match the
    /// receives posted for it. `overlap` must not use the communicator.
    fn exchange(
        &self,
        tag: u16,
        sends: &[(usize, &[u8])],
        from: &[usize],
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<Vec<u8>>>;

    /// Waits until every rank reached it.
    fn barrier(&self) -> Result<()> {
        self.allgather(&[]).map(|_| ())
    }

    /// The elementwise sum over ranks of `local` (the same length on every
    /// rank), the same bits on every rank: gathered in rank order, then each
    /// element summed by [`ordered_sum`]. One [`Communicator::allgather`].
    fn allreduce_sum(&self, local: &[f64]) -> Result<Vec<f64>> {
        let m = local.len();
        let all = self.allgather(local)?;
        check_gathered(all.len(), m, self.size())?;
        let mut column = vec![0.0; self.size()];
        Ok((0..m)
            .map(|j| {
                for (r, c) in column.iter_mut().enumerate() {
                    *c = all[r * m + j];
                }
                ordered_sum(&column)
            })
            .collect())
    }
}

/// `Ok(value)` on every rank when every rank's `local` is `Ok`; otherwise an
/// error on every rank (the rank's own, or one naming the first rank that
/// failed). One allgather: call it where ranks may fail on their own (input
/// checks, set-up) before the next collective, so that no rank waits for one
/// that gave up.
pub fn agree<X>(comm: &dyn Communicator, local: Result<X>) -> Result<X> {
    let flags = comm.allgather(&[f64::from(u8::from(local.is_err()))])?;
    match (local, flags.iter().position(|&f| f != 0.0)) {
        (Err(e), _) => Err(e),
        (Ok(v), None) => Ok(v),
        (Ok(_), Some(r)) => Err(Error::InvalidArgument(format!(
            "rank {r} failed (see its error)"
        ))),
    }
}

/// Errors unless a gather returned `size` contributions of `m` values.
pub(crate) fn check_gathered(len: usize, m: usize, size: usize) -> Result<()> {
    if len == m * size {
        Ok(())
    } else {
        Err(comm_error(format!(
            "allgather returned {len} values for {size} ranks of {m}"
        )))
    }
}

/// A communication failure as a [`gpuq_core::Error`].
pub(crate) fn comm_error(what: impl std::fmt::Display) -> Error {
    Error::Device(format!("communication: {what}"))
}

/// The sum of `v` in a fixed order: pairwise (halves summed recursively, the
/// left half first), so its rounding grows as log2(len) and depends only on
/// `v`. O(len).
pub fn ordered_sum(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        1 => v[0],
        n => {
            let (a, b) = v.split_at(n / 2);
            ordered_sum(a) + ordered_sum(b)
        }
    }
}

/// The communicator of a single rank: collectives return their input, and
/// there is no one to talk to (point-to-point operations with another rank
/// are errors).
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleRank;

impl Communicator for SingleRank {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn allgather(&self, local: &[f64]) -> Result<Vec<f64>> {
        Ok(local.to_vec())
    }

    fn broadcast(&self, root: usize, _data: &mut Vec<u8>) -> Result<()> {
        check_rank("broadcast", root, 1)
    }

    fn send(&self, dest: usize, _tag: u16, _data: &[u8]) -> Result<()> {
        Err(comm_error(format!("send to rank {dest} of a single rank")))
    }

    fn recv(&self, src: usize, _tag: u16) -> Result<Vec<u8>> {
        Err(comm_error(format!(
            "receive from rank {src} of a single rank"
        )))
    }

    fn exchange(
        &self,
        tag: u16,
        sends: &[(usize, &[u8])],
        from: &[usize],
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<Vec<u8>>> {
        if !sends.is_empty() || !from.is_empty() {
            return Err(comm_error(format!(
                "exchange (tag {tag}) with other ranks on a single rank"
            )));
        }
        overlap()?;
        Ok(Vec::new())
    }
}

/// Errors unless `rank < size`.
pub(crate) fn check_rank(op: &str, rank: usize, size: usize) -> Result<()> {
    if rank < size {
        Ok(())
    } else {
        Err(comm_error(format!("{op}: rank {rank} of {size}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_sum_is_pairwise() {
        assert_eq!(ordered_sum(&[]), 0.0);
        assert_eq!(ordered_sum(&[1.0, 2.0, 3.0]), 1.0 + (2.0 + 3.0));
        let v = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(ordered_sum(&v), (1e16 + 1.0) + (-1e16 + 1.0));
    }

    #[test]
    fn a_single_rank_reduces_to_its_input_and_has_no_peers() {
        let c = SingleRank;
        assert_eq!(c.allreduce_sum(&[1.5, -2.0]).unwrap(), vec![1.5, -2.0]);
        c.barrier().unwrap();
        let mut d = vec![1u8, 2];
        c.broadcast(0, &mut d).unwrap();
        assert_eq!(d, vec![1, 2]);
        assert!(c.broadcast(1, &mut d).is_err());
        assert!(c.send(1, 0, &[]).is_err());
        assert!(c.recv(0, 0).is_err());
        let mut ran = false;
        let got = c
            .exchange(3, &[], &[], &mut || {
                ran = true;
                Ok(())
            })
            .unwrap();
        assert!(ran && got.is_empty());
        assert!(c
            .exchange(3, &[(0, &[1u8][..])], &[], &mut || Ok(()))
            .is_err());
    }
}
