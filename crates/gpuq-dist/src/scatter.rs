//! Moving rows between one rank and the others: a matrix read by one rank,
//! scattered by rows; a solution gathered to one rank.

use crate::comm::{comm_error, Communicator};
use crate::partition::RowPartition;
use gpuq_core::{scalars_as_bytes, scalars_as_bytes_mut, Result, Scalar};
use gpuq_sparse::Csr;
use std::borrow::Cow;

/// The tag of scattered rows.
const SCATTER_TAG: u16 = 4;
/// The tag of gathered rows.
const GATHER_TAG: u16 = 5;
/// The tag of rows moved between two partitions.
const MOVE_TAG: u16 = 8;

/// Rank `root` holds A and b whole (`whole`, ignored elsewhere); every rank
/// gets its rows of A (global columns) and of b as `partition` gives them.
/// Collective; one message from the root to each other rank (its rows'
/// pointers, columns, values and b). Errors when the root's A or b does not
/// match the partition.
pub fn scatter_rows<T: Scalar>(
    comm: &dyn Communicator,
    partition: &RowPartition,
    root: usize,
    whole: Option<(&Csr<T>, &[T])>,
) -> Result<(Csr<T>, Vec<T>)> {
    let rank = comm.rank();
    if rank != root {
        return decode(&comm.recv(root, SCATTER_TAG)?, partition.rows());
    }
    let (a, b) = whole.ok_or_else(|| comm_error("scatter_rows: the root holds no matrix"))?;
    partition.check(a.nrows(), comm.size())?;
    gpuq_core::check_same_len("scatter_rows (b)", a.nrows(), b.len())?;
    let mut mine = None;
    for r in 0..comm.size() {
        let (rows, br) = slice(a, b, partition, r)?;
        if r == root {
            mine = Some((rows, br));
        } else {
            comm.send(r, SCATTER_TAG, &encode(&rows, &br))?;
        }
    }
    mine.ok_or_else(|| comm_error("scatter_rows: the root is outside the communicator"))
}

/// Rank `r`'s rows of A and b.
fn slice<T: Scalar>(
    a: &Csr<T>,
    b: &[T],
    partition: &RowPartition,
    r: usize,
) -> Result<(Csr<T>, Vec<T>)> {
    let range = partition.range(r);
    Ok((crate::rows_of(a, partition, r)?, b[range].to_vec()))
}

/// Rows and b as bytes: rows, columns of A, nnz (u64 each), the row
/// pointers (u64), the column indices (u32), the values, then b (one value
/// per row, or empty for rows alone).
pub(crate) fn encode<T: Scalar>(rows: &Csr<T>, b: &[T]) -> Vec<u8> {
    let size = std::mem::size_of::<T>();
    let mut out = Vec::with_capacity(
        8 * (rows.nrows() + 4) + (4 + size) * rows.nnz() + std::mem::size_of_val(b),
    );
    for v in [rows.nrows(), rows.ncols(), rows.nnz()] {
        out.extend_from_slice(&(v as u64).to_le_bytes());
    }
    for &p in rows.row_ptr() {
        out.extend_from_slice(&(p as u64).to_le_bytes());
    }
    for &c in rows.col_idx() {
        out.extend_from_slice(&c.to_le_bytes());
    }
    out.extend_from_slice(scalars_as_bytes(rows.values()));
    out.extend_from_slice(scalars_as_bytes(b));
    out
}

/// The inverse of [`encode`], checked against the global size `n` (b is
/// empty when the rows came alone).
pub(crate) fn decode<T: Scalar>(bytes: &[u8], n: usize) -> Result<(Csr<T>, Vec<T>)> {
    let bad = || comm_error("scatter_rows: a malformed message");
    let mut at = 0usize;
    let mut take = |len: usize| -> Result<&[u8]> {
        let s = bytes.get(at..at + len).ok_or_else(bad)?;
        at += len;
        Ok(s)
    };
    let mut word = || -> Result<usize> {
        Ok(u64::from_le_bytes(take(8)?.try_into().map_err(|_| bad())?) as usize)
    };
    let (nrows, ncols, nnz) = (word()?, word()?, word()?);
    if ncols != n {
        return Err(bad());
    }
    let ptr = (0..=nrows)
        .map(|_| word())
        .collect::<Result<Vec<usize>>>()?;
    let cols: Vec<u32> = take(4 * nnz)?
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let mut vals = vec![T::zero(); nnz];
    scalars_as_bytes_mut(&mut vals).copy_from_slice(take(nnz * std::mem::size_of::<T>())?);
    // b: one value per row, or none (rows sent without a right-hand side).
    let size = std::mem::size_of::<T>();
    let used = 8 * (nrows + 4) + (4 + size) * nnz;
    let b_len = if bytes.len() == used { 0 } else { nrows };
    if bytes.len() != used + b_len * size {
        return Err(bad());
    }
    let mut b = vec![T::zero(); b_len];
    scalars_as_bytes_mut(&mut b).copy_from_slice(take(b_len * size)?);
    Ok((
        Csr::try_new_allow_nonfinite(nrows, ncols, ptr, cols, vals)?,
        b,
    ))
}

/// Rank `root`'s vector `whole` (ignored elsewhere) split by `partition`:
/// every rank gets its part (a right-hand side read by one rank for rows
/// built in place). Collective; one message from the root to each other
/// rank. Errors when the root's vector does not match the partition.
pub fn scatter_vector<T: Scalar>(
    comm: &dyn Communicator,
    partition: &RowPartition,
    root: usize,
    whole: Option<&[T]>,
) -> Result<Vec<T>> {
    let rank = comm.rank();
    if rank != root {
        let mut mine = vec![T::zero(); partition.range(rank).len()];
        let bytes = comm.recv(root, SCATTER_TAG)?;
        fill_from(&bytes, &mut mine, "scatter_vector", root)?;
        return Ok(mine);
    }
    let v = whole.ok_or_else(|| comm_error("scatter_vector: the root holds no vector"))?;
    gpuq_core::check_same_len("scatter_vector", partition.rows(), v.len())?;
    let mut mine = Vec::new();
    for r in 0..comm.size() {
        let part = &v[partition.range(r)];
        if r == root {
            mine = part.to_vec();
        } else {
            comm.send(r, SCATTER_TAG, scalars_as_bytes(part))?;
        }
    }
    Ok(mine)
}

/// Every rank's part of a vector split by `partition`, concatenated on rank
/// `root` (`Some` there, `None` elsewhere). Collective; one message from each
/// other rank to the root.
pub fn gather_rows<T: Scalar>(
    comm: &dyn Communicator,
    partition: &RowPartition,
    root: usize,
    local: &[T],
) -> Result<Option<Vec<T>>> {
    let rank = comm.rank();
    gpuq_core::check_same_len(
        "gather_rows (the rank's part)",
        partition.range(rank).len(),
        local.len(),
    )?;
    if rank != root {
        comm.send(root, GATHER_TAG, scalars_as_bytes(local))?;
        return Ok(None);
    }
    let mut whole = vec![T::zero(); partition.rows()];
    for r in 0..comm.size() {
        let dst = &mut whole[partition.range(r)];
        if r == root {
            dst.copy_from_slice(local);
            continue;
        }
        fill_from(&comm.recv(r, GATHER_TAG)?, dst, "gather_rows", r)?;
    }
    Ok(Some(whole))
}

/// This rank's part, under the partition `to`, of a vector of which it holds
/// its part under `from` (`local`; the same rows in the same order): each
/// row sent to its owner under `to`, the arrived parts placed in rank order.
/// Collective; one message to and from each rank whose blocks overlap this
/// rank's. Errors on every rank when `local` does not match `from` on some
/// rank or the partitions cover different rows.
pub fn move_rows<T: Scalar>(
    comm: &dyn Communicator,
    (from, to): (&RowPartition, &RowPartition),
    local: &[T],
) -> Result<Vec<T>> {
    let (rank, size) = (comm.rank(), comm.size());
    let (mine, target) = (from.range(rank), to.range(rank));
    let checked = gpuq_core::check_same_len("move_rows (the rank's part)", mine.len(), local.len())
        .and_then(|()| {
            gpuq_core::check_same_len("move_rows (the partitions' rows)", from.rows(), to.rows())
        });
    crate::comm::agree(comm, checked)?;
    let overlap = |a: std::ops::Range<usize>, b: std::ops::Range<usize>| {
        a.start.max(b.start)..a.end.min(b.end).max(a.start.max(b.start))
    };
    let base = mine.start;
    let sends: Vec<(usize, &[u8])> = (0..size)
        .filter(|&q| q != rank)
        .map(|q| (q, overlap(mine.clone(), to.range(q))))
        .filter(|(_, o)| !o.is_empty())
        .map(|(q, o)| (q, scalars_as_bytes(&local[o.start - base..o.end - base])))
        .collect();
    let senders: Vec<usize> = (0..size)
        .filter(|&q| q != rank && !overlap(from.range(q), target.clone()).is_empty())
        .collect();
    let arrived = comm.exchange(MOVE_TAG, &sends, &senders, &mut || Ok(()))?;
    let mut out = vec![T::zero(); target.len()];
    for q in 0..size {
        let o = overlap(from.range(q), target.clone());
        if o.is_empty() {
            continue;
        }
        let dst = &mut out[o.start - target.start..o.end - target.start];
        if q == rank {
            dst.copy_from_slice(&local[o.start - base..o.end - base]);
        } else {
            let k = senders.iter().position(|&s| s == q).unwrap_or(0);
            fill_from(&arrived[k], dst, "move_rows", q)?;
        }
    }
    Ok(out)
}

/// Overwrites `dst` with the values in `bytes` (a message from rank `from`
/// for `op`); errors when the lengths differ.
fn fill_from<T: Scalar>(bytes: &[u8], dst: &mut [T], op: &str, from: usize) -> Result<()> {
    let dst = scalars_as_bytes_mut(dst);
    if dst.len() != bytes.len() {
        return Err(comm_error(format!(
            "{op}: rank {from} sent {} bytes for {}",
            bytes.len(),
            dst.len()
        )));
    }
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Every rank's rows of a matrix split by `partition` (global columns),
/// stacked: the whole matrix on every rank (a coarse AMG level gathered
/// onto every rank, the walk data of a Monte Carlo solve). Collective; one
/// broadcast per rank, O(nnz) received per rank, encoded once and decoded
/// once (the rank's own rows are stacked as they are). Errors when a rank's
/// rows do not match the partition.
pub fn allgather_matrix<T: Scalar>(
    comm: &dyn Communicator,
    partition: &RowPartition,
    rows: &Csr<T>,
) -> Result<Csr<T>> {
    let mut mine = encode(rows, &[]);
    let mut parts = Vec::with_capacity(comm.size());
    for r in 0..comm.size() {
        // The rank's own rows are stacked as they are (not decoded again).
        let part = match r == comm.rank() {
            true => {
                comm.broadcast(r, &mut mine)?;
                Cow::Borrowed(rows)
            }
            false => {
                let mut data = Vec::new();
                comm.broadcast(r, &mut data)?;
                Cow::Owned(decode::<T>(&data, partition.rows())?.0)
            }
        };
        if part.nrows() != partition.range(r).len() {
            return Err(comm_error(format!(
                "allgather_matrix: rank {r} sent {} rows, not {}",
                part.nrows(),
                partition.range(r).len()
            )));
        }
        parts.push(part);
    }
    crate::halo::stack_rows(&parts, partition.rows())
}

/// Rank `root` holds A and b whole (`whole`, ignored elsewhere); every rank
/// gets a copy of both (a Monte Carlo solve's walks jump to any row, so each
/// rank holds the matrix whole). Collective; one broadcast of O(nnz) bytes.
pub fn broadcast_rows<T: Scalar>(
    comm: &dyn Communicator,
    root: usize,
    whole: Option<(&Csr<T>, &[T])>,
) -> Result<(Csr<T>, Vec<T>)> {
    let mut data = match (comm.rank() == root, whole) {
        (true, Some((a, b))) => {
            gpuq_core::check_same_len("broadcast_rows (b)", a.nrows(), b.len())?;
            encode(a, b)
        }
        (true, None) => return Err(comm_error("broadcast_rows: the root holds no matrix")),
        (false, _) => Vec::new(),
    };
    comm.broadcast(root, &mut data)?;
    let ncols = data
        .get(8..16)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize)
        .ok_or_else(|| comm_error("broadcast_rows: a malformed message"))?;
    decode(&data, ncols)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{rows_of, ThreadComm};
    use gpuq_core::Complex64;
    use gpuq_sparse::generators;

    #[test]
    fn rows_scattered_from_one_rank_and_gathered_back() {
        let a = generators::helmholtz3d::<Complex64>(3, 0.5, 0.2).unwrap();
        let b: Vec<Complex64> = (0..27).map(|i| Complex64::new(i as f64, -1.0)).collect();
        let p = RowPartition::from_counts(&[10, 0, 17]).unwrap();
        let out = ThreadComm::run(3, |c| {
            let whole = (c.rank() == 2).then_some((&a, &b[..]));
            let (rows, br) = scatter_rows(&c, &p, 2, whole).unwrap();
            assert_eq!(rows, rows_of(&a, &p, c.rank()).unwrap());
            assert_eq!(br, b[p.range(c.rank())].to_vec());
            gather_rows(&c, &p, 1, &br).unwrap()
        })
        .unwrap();
        assert_eq!(out[1].as_deref(), Some(&b[..]));
        assert!(out[0].is_none() && out[2].is_none());
    }

    #[test]
    fn a_vector_scattered_from_one_rank_is_each_ranks_part() {
        let b: Vec<Complex64> = (0..27).map(|i| Complex64::new(i as f64, 0.5)).collect();
        let p = RowPartition::from_counts(&[10, 0, 17]).unwrap();
        let out = ThreadComm::run(3, |c| {
            let whole = (c.rank() == 1).then_some(&b[..]);
            scatter_vector(&c, &p, 1, whole).unwrap()
        })
        .unwrap();
        for (r, part) in out.iter().enumerate() {
            assert_eq!(part, &b[p.range(r)].to_vec());
        }
        // The root's vector must match the partition.
        let c = crate::SingleRank;
        let one = RowPartition::contiguous(5, 1).unwrap();
        assert!(scatter_vector(&c, &one, 0, Some(&b[..4])).is_err());
        assert!(scatter_vector::<f64>(&c, &one, 0, None).is_err());
    }

    #[test]
    fn rows_move_between_any_two_partitions_in_order() {
        let v: Vec<f64> = (0..40).map(|i| i as f64 * 0.5).collect();
        let from = RowPartition::from_counts(&[10, 0, 13, 17]).unwrap();
        for to in [
            from.agglomerated(15),
            RowPartition::from_counts(&[0, 40, 0, 0]).unwrap(),
            RowPartition::from_counts(&[5, 20, 5, 10]).unwrap(),
            from.clone(),
        ] {
            let out = ThreadComm::run(4, |c| {
                move_rows(&c, (&from, &to), &v[from.range(c.rank())]).unwrap()
            })
            .unwrap();
            for (r, part) in out.iter().enumerate() {
                assert_eq!(part, &v[to.range(r)].to_vec(), "{:?}", to.starts());
            }
        }
        let c = crate::SingleRank;
        let one = RowPartition::contiguous(5, 1).unwrap();
        assert!(move_rows(&c, (&one, &one), &v[..4]).is_err());
        let other = RowPartition::contiguous(6, 1).unwrap();
        assert!(move_rows(&c, (&one, &other), &v[..5]).is_err());
    }

    #[test]
    fn a_root_without_a_matching_matrix_is_an_error() {
        let a = generators::laplace1d::<f64>(4, 0.0);
        let b = [1.0; 4];
        let p = RowPartition::contiguous(5, 1).unwrap();
        let c = crate::SingleRank;
        assert!(scatter_rows(&c, &p, 0, Some((&a, &b[..]))).is_err());
        assert!(scatter_rows::<f64>(&c, &p, 0, None).is_err());
        assert!(decode::<f64>(&[1, 2, 3], 4).is_err());
    }
}
