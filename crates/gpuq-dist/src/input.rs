//! Files read by every rank: each rank reads its own share of a matrix or
//! vector file, and no rank holds the whole.
//!
//! A Matrix Market file is cut into one byte range per rank
//! ([`gpuq_sparse::matrix_market::read_part`]: lines re-synchronised at the
//! ranges' ends, each range parsed by the rank's threads); the entries then
//! travel to the ranks that own their rows, arriving in file order, so each
//! rank's rows are exactly what the serial reader gives for them (duplicates
//! summed in the same order). They stay in the parsed pieces' 32-bit arrays
//! throughout: split by owner piece by piece in parallel, sent as one message
//! per rank, and turned into the rank's CSR rows by
//! [`Csr::from_triplet_list`] (a file written by rows goes straight into the
//! CSR arrays, as in the one-process reader). At any problem in any part every rank reads
//! the file serially, which reports the error with its line (or, for a file
//! only the serial reader takes, gives the rows). A PETSc binary file is
//! read by row blocks: each rank reads the header, the row lengths and its
//! own rows' entries ([`gpuq_sparse::petsc`]).

use crate::comm::{agree, comm_error, Communicator};
use crate::partition::RowPartition;
use crate::solve::rows_of;
use gpuq_core::{scalars_as_bytes, scalars_as_bytes_mut, Error, Result, Scalar};
use gpuq_sparse::file::{self, FileFormat};
use gpuq_sparse::matrix_market::{self as mm, read_part, MmPart, MmPartData};
use gpuq_sparse::{petsc, Csr, Triplets32};
use rayon::prelude::*;
use std::path::Path;

/// The tag of the entries sent to their rows' owners.
const ENTRIES_TAG: u16 = 7;

/// Most bytes of one message of [`all_to_all`] (1 GiB): MPI counts are 32-bit.
const MESSAGE_BYTES: usize = 1 << 30;

/// This rank's rows of the matrix in the file at `path` (Matrix Market, or
/// PETSc binary by its class id) with global column indices, and the
/// partition `partition_of(rows)` the ranks agree on. Collective. Reads
/// O(file / ranks) per rank (a PETSc file: also the row lengths); errors, the
/// same on every rank, as the serial reader's.
pub fn read_matrix_rows<T: Scalar>(
    comm: &dyn Communicator,
    path: &Path,
    partition_of: impl FnOnce(usize) -> Result<RowPartition>,
) -> Result<(RowPartition, Csr<T>)> {
    if agree(comm, file::format_of(path))? == FileFormat::PetscMatrix {
        let header = agree(comm, petsc::read_mat_header(path))?;
        let p = agreed_partition(comm, header.rows, partition_of)?;
        let rows = agree(comm, petsc::read_csr_rows::<T>(path, p.range(comm.rank())))?;
        return Ok((p, rows));
    }
    let part = agree(comm, read_part::<T>(path, comm.rank(), comm.size()))?;
    let usable = part.as_ref().and_then(|part| match &part.data {
        MmPartData::Coordinate { entries, .. } => Some(*entries),
        MmPartData::Array(_) => None,
    });
    let declared = part.as_ref().map(|p| p.size[2]);
    if !whole_file_read(comm, usable, declared)? {
        let a = file::read_csr::<T>(path)?;
        let p = agreed_partition(comm, a.nrows(), partition_of)?;
        let rows = rows_of(&a, &p, comm.rank())?;
        return Ok((p, rows));
    }
    let Some(MmPart {
        size,
        data: MmPartData::Coordinate {
            triplets: pieces, ..
        },
        ..
    }) = part
    else {
        unreachable!("every rank read a coordinate part")
    };
    let p = agreed_partition(comm, size[0], partition_of)?;
    let (rank, own) = (comm.rank(), p.range(comm.rank()));
    // Each piece's triplets split by the ranks owning their rows, pieces in
    // parallel, file order kept (most files list rows in order, so most of
    // a part is the rank's own rows, kept where they are).
    let split = pieces
        .into_par_iter()
        .map(|piece| split_by_owner(piece, &p, rank))
        .collect::<Result<Vec<_>>>();
    let split = agree(comm, split)?;
    let mut sends: Vec<Vec<Triplets32<T>>> = (0..comm.size()).map(|_| Vec::new()).collect();
    for per_owner in split {
        for (r, t) in per_owner.into_iter().enumerate() {
            if !t.is_empty() {
                sends[r].push(t);
            }
        }
    }
    // Rank order is file order: the ranks before this one sent the rows of
    // theirs that precede its part, the ones after it the rest.
    let mut parts: Vec<Triplets32<T>> = exchange_entries(comm, sends)?
        .into_iter()
        .flatten()
        .collect();
    // Local rows (a row outside the range wraps around to one past every
    // row, which the conversion rejects).
    let first = own.start as u32;
    parts.par_iter_mut().for_each(|t| {
        t.rows
            .par_iter_mut()
            .for_each(|i| *i = i.wrapping_sub(first))
    });
    // A sum of duplicates may overflow on one rank: every rank errs then.
    let rows = agree(
        comm,
        Csr::from_triplet_list(own.len(), size[1], parts).map_err(|e| e.in_file(path)),
    )?;
    Ok((p, rows))
}

/// `partition_of(n)` when it covers `n` rows on the communicator's ranks,
/// on every rank, else the same error on every rank. Collective.
fn agreed_partition(
    comm: &dyn Communicator,
    n: usize,
    partition_of: impl FnOnce(usize) -> Result<RowPartition>,
) -> Result<RowPartition> {
    let p = partition_of(n).and_then(|p| p.check(n, comm.size()).map(|_| p));
    agree(comm, p)
}

/// `piece`'s triplets by the rank owning their rows under `p` (one list
/// per rank, each in the piece's order); a piece of `rank`'s rows alone is
/// moved, not copied. Errors at a row past the partition. O(piece).
fn split_by_owner<T: Scalar>(
    piece: Triplets32<T>,
    p: &RowPartition,
    rank: usize,
) -> Result<Vec<Triplets32<T>>> {
    let mut out: Vec<Triplets32<T>> = (0..p.ranks()).map(|_| Triplets32::default()).collect();
    let own = p.range(rank);
    if piece.rows.iter().all(|&i| own.contains(&(i as usize))) {
        out[rank] = piece;
        return Ok(out);
    }
    for (i, j, v) in piece.iter() {
        let owner = p
            .owner(i)
            .ok_or_else(|| comm_error("a row past the partition"))?;
        let t = &mut out[owner];
        t.rows.push(i as u32);
        t.cols.push(j as u32);
        t.vals.push(v);
    }
    Ok(out)
}

/// This rank's entries of the vector in the file at `path` (a Matrix Market
/// vector, `n x 1` or `1 x n`, or a PETSc binary vector) as `p` splits it.
/// Collective. Errors, the same on every rank, as the serial reader's, and
/// when the length is not `p.rows()` or `p` is not of the communicator's
/// ranks. Reads O(file / ranks) per rank.
pub fn read_vector_rows<T: Scalar>(
    comm: &dyn Communicator,
    path: &Path,
    p: &RowPartition,
) -> Result<Vec<T>> {
    agree(comm, p.check(p.rows(), comm.size()))?;
    let own = p.range(comm.rank());
    if agree(comm, file::format_of(path))? == FileFormat::PetscVector {
        let n = agree(comm, petsc::read_vec_header(path))?.len;
        check_length(path, n, p.rows())?;
        return agree(comm, petsc::read_vector_range::<T>(path, own));
    }
    let part = agree(comm, read_part::<T>(path, comm.rank(), comm.size()))?;
    // Usable: a general vector, and its entries' count (the values, or the
    // coordinate lines).
    let usable = part.as_ref().and_then(|part| {
        let [m, n, _] = part.size;
        if part.header.symmetry != mm::MmSymmetry::General || (m != 1 && n != 1) {
            return None;
        }
        Some(match &part.data {
            MmPartData::Array(v) => v.len(),
            MmPartData::Coordinate { entries, .. } => *entries,
        })
    });
    let declared = part.as_ref().map(|part| match part.data {
        MmPartData::Array(_) => part.size[0] * part.size[1],
        MmPartData::Coordinate { .. } => part.size[2],
    });
    if !whole_file_read(comm, usable, declared)? {
        let v = file::read_vector::<T>(path)?;
        check_length(path, v.len(), p.rows())?;
        return Ok(v[own].to_vec());
    }
    let part = part.expect("every rank read a part");
    let [m, n, _] = part.size;
    check_length(path, if m == 0 || n == 0 { 0 } else { m.max(n) }, p.rows())?;
    let mut sends: Vec<Vec<Triplets32<T>>> = (0..comm.size()).map(|_| Vec::new()).collect();
    let mut mine = vec![T::zero(); own.len()];
    // The part split by owner; an error on any rank is every rank's.
    let counts = match &part.data {
        MmPartData::Array(values) => Some(comm.allgather(&[values.len() as f64])?),
        MmPartData::Coordinate { .. } => None,
    };
    let split = (|| -> Result<()> {
        match part.data {
            MmPartData::Array(values) => {
                let counts = counts.unwrap_or_default();
                let first: usize = counts[..comm.rank()].iter().map(|&c| c as usize).sum();
                let end = first + values.len();
                if end > p.rows() {
                    return Err(comm_error("an entry past the vector"));
                }
                // The part's entries are consecutive: each owner's share is one
                // run, this rank's copied into place (each entry of an array
                // file is stored once).
                for (r, to) in sends.iter_mut().enumerate() {
                    let rows = p.range(r);
                    let (lo, hi) = (rows.start.max(first), rows.end.min(end));
                    if lo < hi && r == comm.rank() {
                        mine[lo - own.start..hi - own.start]
                            .copy_from_slice(&values[lo - first..hi - first]);
                    } else if lo < hi {
                        to.push(Triplets32 {
                            rows: (lo..hi).into_par_iter().map(|i| i as u32).collect(),
                            cols: vec![0; hi - lo],
                            vals: values[lo - first..hi - first].to_vec(),
                        });
                    }
                }
            }
            MmPartData::Coordinate { triplets, .. } => {
                // Each entry at its row (or column, for a 1 x n vector),
                // then the pieces split by owner as a matrix's are.
                let split = triplets
                    .into_par_iter()
                    .map(|t| {
                        let rows = t
                            .rows
                            .iter()
                            .zip(&t.cols)
                            .map(|(&i, &j)| i.max(j))
                            .collect();
                        let cols = vec![0; t.len()];
                        let at_rows = Triplets32 {
                            rows,
                            cols,
                            vals: t.vals,
                        };
                        split_by_owner(at_rows, p, comm.rank())
                    })
                    .collect::<Result<Vec<_>>>()?;
                for per_owner in split {
                    for (to, t) in sends.iter_mut().zip(per_owner) {
                        if !t.is_empty() {
                            to.push(t);
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    agree(comm, split)?;
    for t in exchange_entries(comm, sends)?.iter().flatten() {
        for (i, _, v) in t.iter() {
            mine[i - own.start] += v;
        }
    }
    Ok(mine)
}

/// Whether every rank read its part (`usable`: its entry count) and the
/// counts add up to the size line's (`declared`); otherwise every rank reads
/// the file serially. Collective (one all-gather).
fn whole_file_read(
    comm: &dyn Communicator,
    usable: Option<usize>,
    declared: Option<usize>,
) -> Result<bool> {
    let mine = [
        usable.map_or(-1.0, |c| c as f64),
        declared.map_or(-1.0, |c| c as f64),
    ];
    let all = comm.allgather(&mine)?;
    if all.chunks(2).any(|c| c[0] < 0.0 || c[1] != all[1]) {
        return Ok(false);
    }
    let read: f64 = all.chunks(2).map(|c| c[0]).sum();
    Ok(read == all[1])
}

/// An error unless a vector of `found` entries fits a matrix of `n` rows.
fn check_length(path: &Path, found: usize, n: usize) -> Result<()> {
    if found == n {
        return Ok(());
    }
    Err(Error::shape(
        "solve (right-hand side)",
        format!("{n} entries (the matrix has {n} rows)"),
        format!("{found} entries in {}", path.display()),
    ))
}

/// Triplets on their way to the rank owning their rows, as one message: the
/// count (u64), the rows, the columns (u32, global), then the values.
/// O(triplets).
fn encode<T: Scalar>(parts: &[Triplets32<T>]) -> Vec<u8> {
    let k: usize = parts.iter().map(Triplets32::len).sum();
    let mut out = Vec::with_capacity(8 + 8 * k + k * std::mem::size_of::<T>());
    out.extend_from_slice(&(k as u64).to_le_bytes());
    for t in parts {
        out.extend(t.rows.iter().flat_map(|x| x.to_le_bytes()));
    }
    for t in parts {
        out.extend(t.cols.iter().flat_map(|x| x.to_le_bytes()));
    }
    for t in parts {
        out.extend_from_slice(scalars_as_bytes(&t.vals));
    }
    out
}

/// The triplets of a message [`encode`] wrote. Errors when it is malformed.
/// O(triplets).
fn decode<T: Scalar>(bytes: &[u8]) -> Result<Triplets32<T>> {
    let bad = || comm_error("read_matrix_rows: a malformed message of entries");
    let k = u64::from_le_bytes(
        bytes
            .get(..8)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    ) as usize;
    let size = std::mem::size_of::<T>();
    let expected = k
        .checked_mul(8 + size)
        .and_then(|b| b.checked_add(8))
        .ok_or_else(bad)?;
    if bytes.len() != expected {
        return Err(bad());
    }
    let words = |at: usize| -> Vec<u32> {
        bytes[at..at + 4 * k]
            .par_chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    };
    let mut vals = vec![T::zero(); k];
    scalars_as_bytes_mut(&mut vals).copy_from_slice(&bytes[8 + 8 * k..]);
    Ok(Triplets32 {
        rows: words(8),
        cols: words(8 + 4 * k),
        vals,
    })
}

/// `sends[r]` delivered to rank r for every r; returns what each rank sent
/// here, in rank order (this rank's own kept as it is, the others' one list
/// each). Collective.
fn exchange_entries<T: Scalar>(
    comm: &dyn Communicator,
    mut sends: Vec<Vec<Triplets32<T>>>,
) -> Result<Vec<Vec<Triplets32<T>>>> {
    let rank = comm.rank();
    let own = std::mem::take(&mut sends[rank]);
    let bytes: Vec<Vec<u8>> = sends.par_iter().map(|s| encode(s)).collect();
    drop(sends);
    let mut received = all_to_all(comm, ENTRIES_TAG, bytes)?;
    let mut out = Vec::with_capacity(received.len());
    for (r, msg) in received.iter_mut().enumerate() {
        if r == rank {
            out.push(Vec::new());
        } else {
            out.push(vec![decode(&std::mem::take(msg))?]);
        }
    }
    out[rank] = own;
    Ok(out)
}

/// `sends[r]` to rank r for every other rank r, in messages of at most
/// [`MESSAGE_BYTES`] (as many rounds as the longest needs, agreed by one
/// all-gather); returns what each rank sent here, in rank order (empty for
/// this rank). Collective.
fn all_to_all(comm: &dyn Communicator, tag: u16, sends: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
    let (rank, size) = (comm.rank(), comm.size());
    let pieces = |len: usize| len.div_ceil(MESSAGE_BYTES).max(1);
    let most = sends
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != rank)
        .map(|(_, s)| pieces(s.len()))
        .max()
        .unwrap_or(0);
    let rounds = comm
        .allgather(&[most as f64])?
        .iter()
        .fold(0.0f64, |a, &b| a.max(b)) as usize;
    let others: Vec<usize> = (0..size).filter(|&r| r != rank).collect();
    let mut received = vec![Vec::new(); size];
    for round in 0..rounds {
        let piece = |s: &[u8]| -> std::ops::Range<usize> {
            let start = (round * MESSAGE_BYTES).min(s.len());
            start..(start + MESSAGE_BYTES).min(s.len())
        };
        let out: Vec<(usize, &[u8])> = others
            .iter()
            .map(|&r| (r, &sends[r][piece(&sends[r])]))
            .collect();
        let got = comm.exchange(tag, &out, &others, &mut || Ok(()))?;
        for (&r, bytes) in others.iter().zip(got) {
            received[r].extend_from_slice(&bytes);
        }
    }
    Ok(received)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ThreadComm;

    fn temp(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("gpuq-input-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    fn on_ranks<R: Send>(ranks: usize, f: impl Fn(&dyn Communicator) -> R + Sync) -> Vec<R> {
        ThreadComm::run(ranks, |c| f(&c)).unwrap()
    }

    fn matrix_text(n: usize) -> String {
        // Rows out of order, duplicates, a symmetric mirror's worth of
        // entries in the lower triangle.
        let mut lines = Vec::new();
        for i in (0..n).rev() {
            lines.push(format!("{} {} {}", i + 1, i + 1, 4.0 + i as f64 * 0.01));
            if i > 0 {
                lines.push(format!("{} {} -1.5", i + 1, i));
            }
            if i % 3 == 0 {
                lines.push(format!("{} {} 0.125", i + 1, i + 1));
            }
        }
        format!(
            "%%MatrixMarket matrix coordinate real symmetric\n% c\n{n} {n} {}\n{}\n",
            lines.len(),
            lines.join("\n")
        )
    }

    #[test]
    fn every_rank_reads_the_serial_readers_rows() {
        // An unordered symmetric file, and a general one written by rows
        // (its parts' triplets go straight into the rows' CSR arrays), large
        // enough for several pieces per part.
        let mut ordered = Vec::new();
        mm::write_csr(
            &gpuq_sparse::generators::laplace2d::<f64>(120),
            &mut ordered,
        )
        .unwrap();
        for (name, text) in [
            ("a.mtx", matrix_text(200)),
            ("ordered.mtx", String::from_utf8(ordered).unwrap()),
            ("spread.mtx", spread_duplicates(300)),
        ] {
            every_rank_reads_rows_of(name, &text, &|n, ranks| RowPartition::blocks(n, ranks, 2));
        }
        // A rank without rows, first or last.
        let text = spread_duplicates(50);
        every_rank_reads_rows_of("empty-first.mtx", &text, &|n, ranks| {
            let mut counts = vec![0; ranks];
            let others = (ranks - 1).max(1);
            for (r, c) in counts.iter_mut().enumerate().skip(ranks - others) {
                *c = n / others + usize::from(r == ranks - 1) * (n % others);
            }
            RowPartition::from_counts(&counts)
        });
        every_rank_reads_rows_of("empty-last.mtx", &text, &|n, ranks| {
            let mut counts = vec![0; ranks];
            counts[0] = n;
            RowPartition::from_counts(&counts)
        });
    }

    /// Each row's diagonal stored three times, far apart in the file (so on
    /// different ranks' parts): 1e16 in the first third, 0.1 in the second,
    /// -1e16 in the last. Summed in file order it is 0, in any other order
    /// possibly 0.1 or 2: the rows tell whether the order was kept.
    fn spread_duplicates(n: usize) -> String {
        let mut lines = Vec::new();
        for v in ["1e16", "0.1", "-1e16"] {
            for i in 1..=n {
                lines.push(format!("{i} {i} {v}"));
                if i > 1 && v == "0.1" {
                    lines.push(format!("{i} {} -0.5", i - 1));
                }
            }
        }
        format!(
            "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n{}\n",
            lines.len(),
            lines.join("\n")
        )
    }

    fn every_rank_reads_rows_of(
        name: &str,
        text: &str,
        partition: &(dyn Fn(usize, usize) -> Result<RowPartition> + Sync),
    ) {
        let path = temp(name, text);
        let whole = mm::read_csr::<f64>(&path).unwrap();
        for ranks in 1..=4 {
            let got = on_ranks(ranks, |c| {
                read_matrix_rows::<f64>(c, &path, |n| partition(n, c.size())).unwrap()
            });
            for (r, (p, rows)) in got.iter().enumerate() {
                let want = rows_of(&whole, p, r).unwrap();
                assert_eq!(rows.row_ptr(), want.row_ptr(), "{ranks} ranks, rank {r}");
                assert_eq!(rows.col_idx(), want.col_idx());
                assert_eq!(rows.values(), want.values());
            }
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn vectors_array_and_coordinate_are_split_as_the_partition_says() {
        let n = 37;
        let values: Vec<f64> = (0..n).map(|i| i as f64 * 1.5 - 7.0).collect();
        let array = values.iter().fold(
            format!("%%MatrixMarket matrix array real general\n{n} 1\n"),
            |s, v| s + &format!("{v:e}\n"),
        );
        // Coordinate, reversed, entry 3 given twice (summed), entry 5 left out.
        let mut coo = Vec::new();
        for i in (0..n).rev().filter(|&i| i != 5) {
            coo.push(format!("{} 1 {:e}", i + 1, values[i]));
        }
        coo.push("4 1 1e-1".into());
        let coordinate = format!(
            "%%MatrixMarket matrix coordinate real general\n{n} 1 {}\n{}\n",
            coo.len(),
            coo.join("\n")
        );
        for (name, text) in [("v.mtx", array), ("c.mtx", coordinate)] {
            let path = temp(name, &text);
            let whole = mm::read_dense_vector::<f64>(&path).unwrap();
            for ranks in 1..=4 {
                let p = RowPartition::contiguous(n, ranks).unwrap();
                let got = on_ranks(ranks, |c| read_vector_rows::<f64>(c, &path, &p).unwrap());
                assert_eq!(got.concat(), whole, "{name}, {ranks} ranks");
            }
            let wrong = RowPartition::contiguous(n + 1, 2).unwrap();
            let errs = on_ranks(2, |c| read_vector_rows::<f64>(c, &path, &wrong).is_err());
            assert_eq!(errs, vec![true, true]);
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn a_bad_line_anywhere_is_the_serial_readers_error_on_every_rank() {
        let mut text = matrix_text(100);
        text = text.replacen("-1.5", "-1.5x", 1);
        let path = temp("bad.mtx", &text);
        let serial = mm::read_csr::<f64>(&path).unwrap_err().to_string();
        for ranks in 1..=3 {
            let errs = on_ranks(ranks, |c| {
                read_matrix_rows::<f64>(c, &path, |n| RowPartition::contiguous(n, c.size()))
                    .unwrap_err()
                    .to_string()
            });
            assert!(errs.iter().all(|e| *e == serial), "{errs:?} vs {serial}");
        }
        // A count that differs from the size line: every part parses.
        let short = matrix_text(50).replacen("50 50 ", "50 50 1", 1);
        let path2 = temp("short.mtx", &short);
        let serial = mm::read_csr::<f64>(&path2).unwrap_err().to_string();
        let errs = on_ranks(3, |c| {
            read_matrix_rows::<f64>(c, &path2, |n| RowPartition::contiguous(n, c.size()))
                .unwrap_err()
                .to_string()
        });
        assert!(errs.iter().all(|e| *e == serial), "{errs:?} vs {serial}");
        std::fs::remove_file(path).unwrap();
        std::fs::remove_file(path2).unwrap();
    }

    #[test]
    fn petsc_files_are_read_by_row_blocks_as_the_matrix_market_file() {
        let text = matrix_text(120);
        let mtx = temp("p.mtx", &text);
        let whole = mm::read_csr::<f64>(&mtx).unwrap();
        let (a_path, b_path) = (mtx.with_extension("petsc"), mtx.with_extension("vec"));
        petsc::save_csr(&whole, &a_path).unwrap();
        let b: Vec<f64> = (0..120).map(|i| i as f64 / 3.0).collect();
        petsc::save_vector(&b, &b_path).unwrap();
        for ranks in 1..=4 {
            let got = on_ranks(ranks, |c| {
                let (p, rows) =
                    read_matrix_rows::<f64>(c, &a_path, |n| RowPartition::blocks(n, c.size(), 3))
                        .unwrap();
                let v = read_vector_rows::<f64>(c, &b_path, &p).unwrap();
                (p, rows, v)
            });
            let mut joined = Vec::new();
            for (r, (p, rows, v)) in got.iter().enumerate() {
                let want = rows_of(&whole, p, r).unwrap();
                assert_eq!(rows.row_ptr(), want.row_ptr(), "{ranks} ranks, rank {r}");
                assert_eq!(rows.col_idx(), want.col_idx());
                assert_eq!(rows.values(), want.values());
                joined.extend_from_slice(v);
            }
            assert_eq!(joined, b);
        }
        // A matrix file where a vector is wanted (and the reverse): an error
        // on every rank.
        let p = RowPartition::contiguous(120, 2).unwrap();
        let errs = on_ranks(2, |c| {
            let v = read_vector_rows::<f64>(c, &a_path, &p)
                .unwrap_err()
                .to_string();
            let m = read_matrix_rows::<f64>(c, &b_path, |n| RowPartition::contiguous(n, 2));
            (v, m.is_err())
        });
        assert!(
            errs.iter()
                .all(|(v, m)| v.contains("expected a vector") && *m),
            "{errs:?}"
        );
        for f in [mtx, a_path, b_path] {
            std::fs::remove_file(f).unwrap();
        }
    }

    #[test]
    fn all_to_all_delivers_in_rank_order() {
        let got = on_ranks(3, |c| {
            let sends = (0..3)
                .map(|r| vec![c.rank() as u8 * 10 + r as u8; c.rank() + r])
                .collect();
            all_to_all(c, 99, sends).unwrap()
        });
        for (me, recv) in got.iter().enumerate() {
            for (from, bytes) in recv.iter().enumerate() {
                if from == me {
                    assert!(bytes.is_empty());
                } else {
                    assert_eq!(*bytes, vec![from as u8 * 10 + me as u8; from + me]);
                }
            }
        }
    }
}
