//! A rank's rows of a level as the distributed setup hands them to a
//! backend ([`RankRows`]): with their global columns (on the host, or where
//! the backend left a coarse operator, [`GlobalRows`]), and as its extended
//! rows (the rank's columns first, then its ghost columns), the latter made
//! on the host only when a step asks for them.

use gpuq_amg::LevelMatrix;
use gpuq_core::{Error, Result};
use gpuq_kernels::amg::extend_row;
use gpuq_sparse::{par_fill_rows, par_row_pointers, Csr};
use std::ops::Range;
use std::sync::OnceLock;

/// A rank's rows of a level with the level's (global) columns, where the
/// setup holds them: the caller's rows on the host (the finest level, also
/// held by the backend where it took a copy,
/// [`crate::amg::DistSetupKernels::hold_rows`]), or a coarse operator as
/// the rank's backend left it ([`LevelMatrix`]: on the host, on the device,
/// or both; a GPU rank keeps its rows of R (A P) on its device, and they
/// come down only where a host step asks for them).
#[derive(Clone, Copy)]
pub enum GlobalRows<'a> {
    /// Rows on the host.
    Host(&'a Csr<f64>),
    /// Rows wherever the backend left them.
    Level(&'a LevelMatrix),
    /// Rows on the host and their copy held by the backend (the same
    /// entries): the backend's steps take the copy, the host's the rows.
    Held(&'a Csr<f64>, &'a LevelMatrix),
}

impl<'a> GlobalRows<'a> {
    /// (rows, columns). O(1).
    pub fn shape(&self) -> (usize, usize) {
        match self {
            GlobalRows::Host(a) | GlobalRows::Held(a, _) => a.shape(),
            GlobalRows::Level(a) => a.shape(),
        }
    }

    /// Rows. O(1).
    pub fn nrows(&self) -> usize {
        self.shape().0
    }

    /// Stored entries. O(1).
    pub fn nnz(&self) -> usize {
        match self {
            GlobalRows::Host(a) | GlobalRows::Held(a, _) => a.nnz(),
            GlobalRows::Level(a) => a.nnz(),
        }
    }

    /// The rows on the host: as given, or the level matrix's host copy
    /// (downloaded on the first call where only a backend holds it, then
    /// kept; [`LevelMatrix::host`]).
    pub fn host(&self) -> Result<&'a Csr<f64>> {
        match *self {
            GlobalRows::Host(a) | GlobalRows::Held(a, _) => Ok(a),
            GlobalRows::Level(a) => a.host(),
        }
    }

    /// The level matrix, where the rows are one or the backend holds a copy
    /// (`None` for host rows alone). O(1).
    pub fn level(&self) -> Option<&'a LevelMatrix> {
        match *self {
            GlobalRows::Host(_) => None,
            GlobalRows::Level(a) | GlobalRows::Held(_, a) => Some(a),
        }
    }

    /// The level matrix where only it holds the rows (no host copy yet):
    /// what a host step fetches rows from. O(1).
    fn only_held(&self) -> Option<&'a LevelMatrix> {
        match *self {
            GlobalRows::Level(a) => Some(a).filter(|l| !l.on_host()),
            _ => None,
        }
    }

    /// The rows `idx` (in that order) on the host, from wherever they are
    /// held ([`LevelMatrix::rows`]: a device brings only them). Errors name
    /// an index not below the rows. O(idx + their entries).
    pub fn rows(&self, idx: &[usize]) -> Result<Csr<f64>> {
        match self {
            GlobalRows::Host(a) | GlobalRows::Held(a, _) => a.select_rows(idx),
            GlobalRows::Level(a) => a.rows(idx),
        }
    }
}

/// The rank's rows of a level: `global()` with the level's columns, and
/// `extended()` over the rank's own columns (numbered from 0) followed by
/// its ghost columns (numbered after them, in increasing global order), each
/// row's owned entries first (`gpuq_kernels::amg::extend_row`). The
/// extended rows are either given (the host's split writes them in its
/// pass) or made on the first call of [`RankRows::extended`], so a backend
/// that builds them itself (the CUDA backend, on the device) leaves the host
/// without them.
pub struct RankRows<'a> {
    global: GlobalRows<'a>,
    own: Range<usize>,
    ghost_cols: Vec<usize>,
    ext: OnceLock<Csr<f64>>,
}

impl<'a> RankRows<'a> {
    /// The rows `global` of the rank owning the columns `own`, with the
    /// ghost columns `ghost_cols` (increasing: every column of `global`
    /// outside `own`) and, when the caller made them, the extended rows
    /// `ext`. O(1).
    pub(crate) fn new(
        global: GlobalRows<'a>,
        own: Range<usize>,
        ghost_cols: Vec<usize>,
        ext: Option<Csr<f64>>,
    ) -> Self {
        let made = OnceLock::new();
        if let Some(ext) = ext {
            let _ = made.set(ext);
        }
        RankRows {
            global,
            own,
            ghost_cols,
            ext: made,
        }
    }

    /// The rank's rows with the level's (global) columns, where they are
    /// held. O(1).
    pub fn global(&self) -> GlobalRows<'a> {
        self.global
    }

    /// The rank's own columns (its rows' global indices). O(1).
    pub fn own(&self) -> Range<usize> {
        self.own.clone()
    }

    /// The rank's ghost columns, increasing. O(1).
    pub fn ghost_cols(&self) -> &[usize] {
        &self.ghost_cols
    }

    /// The extended rows' column count: own then ghost columns. O(1).
    pub fn extended_cols(&self) -> usize {
        self.own.len() + self.ghost_cols.len()
    }

    /// The extended rows: given, or made now on the host (once; rows in
    /// parallel). O(nnz log ghosts) the first time.
    pub fn extended(&self) -> Result<&Csr<f64>> {
        if let Some(ext) = self.ext.get() {
            return Ok(ext);
        }
        let global = self.global.host()?;
        let ext = self.extend(global, global.row_ptr(), |i| i)?;
        Ok(self.ext.get_or_init(|| ext))
    }

    /// The extended rows `idx` (in that order): selected from them where
    /// they are made, else made for these rows alone. Errors name an index
    /// not below the rank's rows. O(their entries log ghosts).
    pub fn extended_rows(&self, idx: &[usize]) -> Result<Csr<f64>> {
        if let Some(ext) = self.ext.get() {
            return ext.select_rows(idx);
        }
        gpuq_core::check_indices("extended rows", self.global.nrows(), idx)?;
        if let Some(level) = self.global.only_held() {
            // Only these rows come from where the backend holds them.
            let picked = level.rows(idx)?;
            return self.extend(&picked, picked.row_ptr(), |k| k);
        }
        let global = self.global.host()?;
        let ptr = par_row_pointers(idx.len(), |k| global.row(idx[k]).0.len());
        self.extend(global, &ptr, |k| idx[k])
    }

    /// The extended form of the rows `row(k)` of `global` (rows with the
    /// level's columns) for k below the rows of `ptr` (their row pointers).
    /// O(their entries log ghosts).
    fn extend(
        &self,
        global: &Csr<f64>,
        ptr: &[usize],
        row: impl Fn(usize) -> usize + Sync,
    ) -> Result<Csr<f64>> {
        let bounds = (self.own.start as u32, self.own.end as u32);
        let ghosts = &self.ghost_cols;
        let missing = std::sync::atomic::AtomicBool::new(false);
        let ghost = |c: u32| match ghosts.binary_search(&(c as usize)) {
            Ok(k) => k as u32,
            Err(_) => {
                missing.store(true, std::sync::atomic::Ordering::Relaxed);
                0
            }
        };
        let (cols, vals) = par_fill_rows(
            ptr,
            || (),
            |k, _, c, v| extend_row(global.row(row(k)), bounds, ghost, (c, v)),
        );
        if missing.into_inner() {
            return Err(Error::InvalidArgument(
                "extended rows: a column outside the rank's is not among its ghost columns".into(),
            ));
        }
        Csr::try_new_allow_nonfinite(
            ptr.len() - 1,
            self.extended_cols(),
            ptr.to_vec(),
            cols,
            vals,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::halo::split_rows_extended;
    use crate::partition::RowPartition;

    /// Made on the host, whole or by rows, the extended rows are those the
    /// split writes in its pass, on every rank of a few partitions.
    #[test]
    fn extended_rows_made_later_are_the_splits() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(9);
        for ranks in 1..=4 {
            let part = RowPartition::contiguous(a.nrows(), ranks).unwrap();
            for r in 0..ranks {
                let rows = a.select_rows(&part.range(r).collect::<Vec<_>>()).unwrap();
                let split = split_rows_extended(&part, r, &rows, true).unwrap();
                let want = split.ext.clone().unwrap();
                let later = RankRows::new(
                    GlobalRows::Host(&rows),
                    part.range(r),
                    split.ghost_cols.clone(),
                    None,
                );
                let idx: Vec<usize> = (0..rows.nrows()).rev().step_by(3).collect();
                assert_eq!(
                    later.extended_rows(&idx).unwrap(),
                    want.select_rows(&idx).unwrap()
                );
                assert_eq!(later.extended().unwrap(), &want);
                let given = RankRows::new(
                    GlobalRows::Host(&rows),
                    part.range(r),
                    split.ghost_cols.clone(),
                    Some(want),
                );
                assert_eq!(
                    given.extended_rows(&idx).unwrap(),
                    later.extended_rows(&idx).unwrap()
                );
            }
        }
    }

    /// Rows held only by a backend (a resident matrix without a host copy)
    /// give the same extended rows, by rows (only those fetched) or whole.
    #[test]
    fn rows_held_by_a_backend_extend_as_host_rows() {
        struct Held(Csr<f64>);
        impl gpuq_amg::ResidentMatrix for Held {
            fn download(&self) -> Result<Csr<f64>> {
                Ok(self.0.clone())
            }
            fn row_lengths(&self) -> Result<Vec<u32>> {
                Ok((0..self.0.nrows())
                    .map(|i| self.0.row(i).0.len() as u32)
                    .collect())
            }
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
        }
        let a = gpuq_sparse::generators::laplace2d::<f64>(8);
        let part = RowPartition::contiguous(a.nrows(), 3).unwrap();
        for r in 0..3 {
            let rows = a.select_rows(&part.range(r).collect::<Vec<_>>()).unwrap();
            let split = split_rows_extended(&part, r, &rows, true).unwrap();
            let want = split.ext.clone().unwrap();
            let level = LevelMatrix::from_resident(
                rows.shape(),
                rows.nnz(),
                std::sync::Arc::new(Held(rows.clone())),
            );
            let held = RankRows::new(
                GlobalRows::Level(&level),
                part.range(r),
                split.ghost_cols.clone(),
                None,
            );
            let idx: Vec<usize> = (0..rows.nrows()).step_by(2).rev().collect();
            assert_eq!(
                held.extended_rows(&idx).unwrap(),
                want.select_rows(&idx).unwrap()
            );
            assert!(!level.on_host(), "rows by rows came down whole");
            assert_eq!(
                held.global().rows(&idx).unwrap(),
                rows.select_rows(&idx).unwrap()
            );
            assert_eq!(held.extended().unwrap(), &want);
        }
    }

    /// A column outside the rank's that is not listed as a ghost is an
    /// error, not a wrong index.
    #[test]
    fn an_unlisted_ghost_column_is_an_error() {
        let a = gpuq_sparse::generators::laplace2d::<f64>(4);
        let part = RowPartition::contiguous(a.nrows(), 2).unwrap();
        let rows = a.select_rows(&part.range(0).collect::<Vec<_>>()).unwrap();
        let rank = RankRows::new(GlobalRows::Host(&rows), part.range(0), Vec::new(), None);
        assert!(rank.extended().is_err());
    }
}
