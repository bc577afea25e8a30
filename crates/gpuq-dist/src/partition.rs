//! Row-block partitions: rank r owns the contiguous rows `starts[r]..starts[r + 1]`.

use gpuq_core::{Error, Result};
use std::ops::Range;

/// A partition of `n` rows into contiguous blocks, one per rank (a block may
/// be empty). Rank r owns rows `starts[r]..starts[r + 1]`; the vectors of a
/// distributed solve are split the same way (PETSc's MPIAIJ row layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowPartition {
    starts: Vec<usize>,
}

impl RowPartition {
    /// `n` rows over `ranks` ranks as evenly as possible (the first `n %
    /// ranks` ranks get one row more). Errors when there are no ranks or more
    /// ranks than rows (a rank without rows would have nothing to do; use
    /// [`RowPartition::from_counts`] to ask for empty ranks on purpose). O(ranks).
    pub fn contiguous(n: usize, ranks: usize) -> Result<Self> {
        Self::blocks(n, ranks, 1)
    }

    /// As [`RowPartition::contiguous`], but every block boundary falls on a
    /// multiple of `block` rows (so that 2x2-block Jacobi's blocks, `block` =
    /// 2, never straddle two ranks): the `n / block` blocks are spread evenly,
    /// the last rank also takes the `n % block` rows left over. Errors when
    /// `block` is zero, there are no ranks, or more ranks than blocks. O(ranks).
    pub fn blocks(n: usize, ranks: usize, block: usize) -> Result<Self> {
        if ranks == 0 || block == 0 {
            return Err(Error::InvalidArgument(format!(
                "partition of {n} rows over {ranks} ranks in blocks of {block}: need at least one rank and a block of at least one row"
            )));
        }
        let nb = n / block;
        if ranks > nb {
            return Err(Error::InvalidArgument(format!(
                "{ranks} ranks for {n} rows ({nb} blocks of {block}): more ranks than rows to give them"
            )));
        }
        let (q, extra) = (nb / ranks, nb % ranks);
        let mut starts = Vec::with_capacity(ranks + 1);
        starts.push(0);
        for r in 0..ranks {
            let blocks = q + usize::from(r < extra);
            starts.push(starts[r] + blocks * block);
        }
        starts[ranks] = n;
        Ok(RowPartition { starts })
    }

    /// The partition whose rank r owns `counts[r]` rows (zero allowed). Errors
    /// when `counts` is empty. O(ranks).
    pub fn from_counts(counts: &[usize]) -> Result<Self> {
        if counts.is_empty() {
            return Err(Error::InvalidArgument(
                "a partition needs at least one rank".into(),
            ));
        }
        let mut starts = Vec::with_capacity(counts.len() + 1);
        starts.push(0usize);
        for &c in counts {
            let next = starts[starts.len() - 1]
                .checked_add(c)
                .ok_or_else(|| Error::InvalidArgument("partition row counts overflow".into()))?;
            starts.push(next);
        }
        Ok(RowPartition { starts })
    }

    /// Parses a partition file: the row count of each rank, in rank order, one
    /// per line (blank lines and lines starting with `#` ignored). Errors on a
    /// line that is not a count (naming it) and on a file with no rank. O(text).
    pub fn parse(text: &str) -> Result<Self> {
        let mut counts = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            counts.push(
                line.parse::<usize>()
                    .map_err(|_| Error::parse(k + 1, format!("'{line}' is not a row count")))?,
            );
        }
        Self::from_counts(&counts)
    }

    /// Errors unless the partition has `ranks` ranks and covers exactly `n`
    /// rows: the check that a partition (from a file, say) matches the matrix
    /// and the communicator. O(1).
    pub fn check(&self, n: usize, ranks: usize) -> Result<()> {
        if self.ranks() != ranks {
            return Err(Error::InvalidArgument(format!(
                "the partition has {} ranks, the communicator {ranks}",
                self.ranks()
            )));
        }
        if self.rows() != n {
            return Err(Error::InvalidArgument(format!(
                "the partition covers {} rows, the matrix has {n}",
                self.rows()
            )));
        }
        Ok(())
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.starts.len() - 1
    }

    /// The number of rows over all ranks.
    pub fn rows(&self) -> usize {
        self.starts[self.ranks()]
    }

    /// The rows rank `rank` owns (empty for a rank outside the partition).
    pub fn range(&self, rank: usize) -> Range<usize> {
        match (self.starts.get(rank), self.starts.get(rank + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    /// The rank owning row `row`, or `None` past the last row. O(log ranks).
    pub fn owner(&self, row: usize) -> Option<usize> {
        if row >= self.rows() {
            return None;
        }
        // The last rank whose start is <= row (empty ranks share a start with
        // the next one and own nothing).
        Some(self.starts.partition_point(|&s| s <= row) - 1)
    }

    /// The block starts, one per rank, then the number of rows.
    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// How many ranks own at least one row. O(ranks).
    pub fn active_ranks(&self) -> usize {
        self.starts.windows(2).filter(|w| w[1] > w[0]).count()
    }

    /// The same rows agglomerated onto fewer ranks, about `per_rank` or more
    /// on each rank holding rows: the ranks in consecutive groups of s (s the
    /// least power of two for which rows >= ceil(ranks / s) per_rank, at most
    /// the first power of two >= ranks), each group's rows (consecutive, so
    /// no row is renumbered) owned by its first rank, the others left empty;
    /// the groups hold per_rank rows on average, the last (of fewer ranks)
    /// possibly fewer. A partition already agglomerated by a smaller s (its
    /// empty ranks those of its groups) stays consistent: its groups merge.
    /// `per_rank` 0 changes nothing. O(ranks).
    pub fn agglomerated(&self, per_rank: usize) -> RowPartition {
        let (ranks, rows) = (self.ranks(), self.rows());
        let mut s = 1;
        while s < ranks && rows < ranks.div_ceil(s).saturating_mul(per_rank) {
            s *= 2;
        }
        let counts: Vec<usize> = (0..ranks)
            .map(|r| {
                if r % s == 0 {
                    self.starts[(r + s).min(ranks)] - self.starts[r]
                } else {
                    0
                }
            })
            .collect();
        RowPartition::from_counts(&counts).expect("at least one rank")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uneven_rows_spread_evenly_and_owners_match_ranges() {
        let p = RowPartition::contiguous(10, 4).unwrap();
        assert_eq!(p.starts(), &[0, 3, 6, 8, 10]);
        for row in 0..10 {
            let r = p.owner(row).unwrap();
            assert!(p.range(r).contains(&row));
        }
        assert_eq!(p.owner(10), None);
        assert_eq!(p.range(7), 0..0);
    }

    #[test]
    fn more_ranks_than_rows_is_an_error_but_empty_ranks_can_be_asked_for() {
        assert!(RowPartition::contiguous(3, 4).is_err());
        assert!(RowPartition::contiguous(3, 0).is_err());
        let p = RowPartition::from_counts(&[2, 0, 0, 1]).unwrap();
        assert_eq!(p.owner(1), Some(0));
        assert_eq!(p.owner(2), Some(3));
        assert_eq!(p.range(1), 2..2);
        assert!(RowPartition::from_counts(&[]).is_err());
    }

    #[test]
    fn agglomeration_keeps_the_rows_and_their_order_on_fewer_ranks() {
        let p = RowPartition::from_counts(&[30, 25, 20, 25, 10]).unwrap();
        // 110 rows keep 22 a rank on five ranks: nothing moves.
        assert_eq!(p.agglomerated(22), p);
        assert_eq!(p.agglomerated(0), p);
        assert_eq!(p.active_ranks(), 5);
        // 35 a rank: three groups of two (the last of one rank).
        let q = p.agglomerated(35);
        assert_eq!(q.starts(), &[0, 55, 55, 100, 100, 110]);
        assert_eq!(q.active_ranks(), 3);
        // 50 a rank: groups of four; 1000: everything on rank 0; agglomerating
        // again merges groups.
        let g = p.agglomerated(50);
        assert_eq!(g.starts(), &[0, 100, 100, 100, 100, 110]);
        assert_eq!(q.agglomerated(50), g);
        let one = p.agglomerated(1000);
        assert_eq!(one.starts(), &[0, 110, 110, 110, 110, 110]);
        assert_eq!(one.active_ranks(), 1);
        assert_eq!(g.agglomerated(1000), one);
        for part in [&q, &g, &one] {
            assert_eq!(part.rows(), p.rows());
            assert_eq!(part.ranks(), p.ranks());
        }
    }

    #[test]
    fn block_boundaries_fall_on_block_multiples() {
        let p = RowPartition::blocks(11, 3, 2).unwrap();
        assert_eq!(p.starts(), &[0, 4, 8, 11]);
        assert!(RowPartition::blocks(4, 3, 2).is_err());
        assert!(RowPartition::blocks(4, 1, 0).is_err());
    }

    #[test]
    fn a_partition_file_that_does_not_match_is_an_error() {
        let p = RowPartition::parse("# rows per rank\n3\n\n4\n").unwrap();
        assert_eq!(p.starts(), &[0, 3, 7]);
        p.check(7, 2).unwrap();
        assert!(p.check(8, 2).is_err());
        assert!(p.check(7, 3).is_err());
        assert!(RowPartition::parse("3\nfour\n").is_err());
        assert!(RowPartition::parse("# nothing\n").is_err());
    }
}
