//! Prolongators: seed 002's 1/n_i interpolation (section 10.1), the tentative
//! prolongator of smoothed aggregation from near-null-space vectors, and its
//! smoothing by one weighted-Jacobi step.

use crate::aggregate::{Selection, NOT_AGGREGATED};
use crate::blockdiag::BlockDiagonal;
use crate::galerkin::{for_group, par_build, Accumulator, GroupScratch, MAX_GROUP};
use gpuq_core::Result;
use gpuq_sparse::Csr;
use rayon::prelude::*;
use std::borrow::Cow;

/// Seed 002's prolongator: block (i, J) is (1/n_i) I_bs for each of the n_i
/// coarse nodes J node i interpolates from. Rows sum to 1 per component, so
/// constants (per component) are interpolated exactly. O(n bs).
pub fn seed_prolongator(sel: &Selection, bs: usize) -> Result<Csr<f64>> {
    let nc = sel.coarse.len();
    par_build(
        sel.parents.len() * bs,
        nc * bs,
        || (),
        |i, _, out| {
            let (k, comp) = (i / bs, i % bs);
            let p = &sel.parents[k];
            let w = 1.0 / p.len() as f64;
            for &c in p {
                out.push(c * bs as u32 + comp as u32, w);
            }
        },
    )
}

/// The tentative prolongator of smoothed aggregation and the coarse
/// near-null-space vectors.
pub struct Tentative {
    /// P_T: (n bs) x (aggregates k), orthonormal columns within each aggregate.
    pub p: Csr<f64>,
    /// The coarse near-null-space vectors B_c (k of them, each of length
    /// aggregates k): B = P_T B_c.
    pub coarse_null: Vec<Vec<f64>>,
    /// Columns left zero because their aggregate had fewer independent rows
    /// than near-null-space vectors.
    pub zero_columns: usize,
}

/// P_T from aggregates and the k near-null-space vectors `b` (each of length n
/// bs, the node of row r being r / bs): for each aggregate, the rows of its
/// nodes' unknowns of [b_1 .. b_k] are factored Q R (modified Gram-Schmidt,
/// twice); Q becomes the aggregate's k columns of P_T and R its block of B_c. A
/// column that is dependent on the earlier ones (norm below 1e-10 of the
/// original) is left zero. The rows of a node in no aggregate
/// ([`NOT_AGGREGATED`]) are zero. Errors on an aggregate index that is
/// neither below `naggs` nor [`NOT_AGGREGATED`]. O(n bs k^2).
pub fn tentative(agg: &[u32], naggs: usize, bs: usize, b: &[Vec<f64>]) -> Result<Tentative> {
    if agg
        .par_iter()
        .any(|&a| a as usize >= naggs && a != NOT_AGGREGATED)
    {
        return Err(gpuq_core::Error::InvalidArgument(format!(
            "tentative prolongator: an aggregate index is not below the {naggs} aggregates"
        )));
    }
    match b {
        [single] => tentative_single(agg, naggs, bs, single),
        _ => tentative_qr(agg, naggs, bs, b),
    }
}

/// [`tentative`] by a thin QR per aggregate, any number of vectors.
fn tentative_qr(agg: &[u32], naggs: usize, bs: usize, b: &[Vec<f64>]) -> Result<Tentative> {
    let k = b.len();
    let nrows = agg.len() * bs;
    // Rows of each aggregate, in increasing order: a counting sort into one
    // array (aggregate a's rows at start[a]..start[a + 1]), and each row's
    // position within its aggregate.
    let mut start = vec![0usize; naggs + 1];
    for &a in agg.iter().filter(|&&a| a != NOT_AGGREGATED) {
        start[a as usize + 1] += bs;
    }
    for a in 0..naggs {
        start[a + 1] += start[a];
    }
    let mut order = vec![0usize; nrows];
    let mut pos = vec![0usize; nrows];
    let mut next = start.clone();
    for r in 0..nrows {
        if agg[r / bs] == NOT_AGGREGATED {
            continue;
        }
        let a = agg[r / bs] as usize;
        order[next[a]] = r;
        pos[r] = next[a] - start[a];
        next[a] += 1;
    }
    let members = |a: usize| &order[start[a]..start[a + 1]];
    // Per aggregate: Q (rows x k, column-major) and R (k x k, row-major).
    let factors: Vec<(Vec<f64>, Vec<f64>, usize)> = (0..naggs)
        .into_par_iter()
        .map(|a| {
            let rows = members(a);
            let m = rows.len();
            let mut q: Vec<f64> = (0..k)
                .flat_map(|c| rows.iter().map(move |&r| b[c][r]))
                .collect();
            let mut rr = vec![0.0; k * k];
            let mut zeros = 0;
            for c in 0..k {
                let orig: f64 = q[c * m..(c + 1) * m]
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt();
                for _ in 0..2 {
                    for p in 0..c {
                        let d: f64 = (0..m).map(|i| q[p * m + i] * q[c * m + i]).sum();
                        rr[p * k + c] += d;
                        for i in 0..m {
                            q[c * m + i] -= d * q[p * m + i];
                        }
                    }
                }
                let nrm: f64 = q[c * m..(c + 1) * m]
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt();
                if nrm <= 1e-10 * orig || nrm == 0.0 {
                    q[c * m..(c + 1) * m].iter_mut().for_each(|x| *x = 0.0);
                    zeros += 1;
                } else {
                    rr[c * k + c] = nrm;
                    q[c * m..(c + 1) * m].iter_mut().for_each(|x| *x /= nrm);
                }
            }
            (q, rr, zeros)
        })
        .collect();
    let p = par_build(
        nrows,
        naggs * k,
        || (),
        |r, _, out| {
            if agg[r / bs] == NOT_AGGREGATED {
                return;
            }
            let a = agg[r / bs] as usize;
            let (q, m) = (&factors[a].0, start[a + 1] - start[a]);
            for c in 0..k {
                out.push((a * k + c) as u32, q[c * m + pos[r]]);
            }
        },
    )?;
    let coarse_null = (0..k)
        .map(|c| {
            (0..naggs * k)
                .map(|i| factors[i / k].1[(i % k) * k + c])
                .collect()
        })
        .collect();
    let zero_columns = factors.iter().map(|f| f.2).sum();
    Ok(Tentative {
        p,
        coarse_null,
        zero_columns,
    })
}

/// [`tentative`] for one near-null-space vector `b`, the same matrix bit for
/// bit without the per-aggregate factorisations: each aggregate's column is
/// b over its rows divided by their norm (summed in increasing row order, as
/// the general path's Gram-Schmidt does), the norm its coarse vector's entry;
/// an aggregate where b vanishes keeps a zero column. O(n bs): one serial
/// pass for the norms, the rows in parallel.
fn tentative_single(agg: &[u32], naggs: usize, bs: usize, b: &[f64]) -> Result<Tentative> {
    let nrows = agg.len() * bs;
    let mut norm = vec![0.0f64; naggs];
    for (r, &x) in b.iter().enumerate().take(nrows) {
        if let Some(s) = norm.get_mut(agg[r / bs] as usize) {
            *s += x * x;
        }
    }
    norm.par_iter_mut().for_each(|s| *s = s.sqrt());
    // Rows of nodes in no aggregate stay empty; where every node is in one,
    // row r holds entry r (no list of rows).
    let value = |r: usize| match norm[agg[r / bs] as usize] {
        0.0 => 0.0,
        nrm => b[r] / nrm,
    };
    let (row_ptr, cols, vals) = if agg.par_iter().all(|&a| a != NOT_AGGREGATED) {
        (
            (0..=nrows).into_par_iter().collect(),
            (0..nrows).into_par_iter().map(|r| agg[r / bs]).collect(),
            (0..nrows).into_par_iter().map(value).collect(),
        )
    } else {
        let rows: Vec<usize> = (0..nrows)
            .into_par_iter()
            .filter(|r| agg[r / bs] != NOT_AGGREGATED)
            .collect();
        let mut ptr = vec![0; nrows + 1];
        for (k, &r) in rows.iter().enumerate() {
            ptr[r + 1] = k + 1;
        }
        for r in 0..nrows {
            ptr[r + 1] = ptr[r + 1].max(ptr[r]);
        }
        (
            ptr,
            rows.par_iter().map(|&r| agg[r / bs]).collect(),
            rows.par_iter().map(|&r| value(r)).collect(),
        )
    };
    let p = Csr::try_new(nrows, naggs, row_ptr, cols, vals)?;
    let zero_columns = norm.iter().filter(|&&x| x == 0.0).count();
    Ok(Tentative {
        p,
        coarse_null: vec![norm],
        zero_columns,
    })
}

/// The smoothed prolongator P = (I - omega D^-1 A) P_T with omega = 4 / (3
/// rho), rho an estimate of rho(D^-1 A), in one row-parallel pass: row i of P
/// is row i of P_T minus omega times the rows of A P_T of i's node combined by
/// the inverse block of that node (Gustavson accumulation; the rows of a node
/// with the same pattern together, reading A and P_T once). Where each row of
/// P_T holds at most one entry (one near-null-space candidate) it is read as
/// a column and a value per row.
/// O(flops(A P_T) bs).
pub fn smooth(a: &Csr<f64>, dinv: &BlockDiagonal, rho: f64, pt: &Csr<f64>) -> Result<Csr<f64>> {
    let smoothing = Smoothing {
        a,
        pt,
        single: single_entries(pt),
        bs: dinv.block(),
        blocks: dinv.blocks()?,
        omega: 4.0 / (3.0 * rho),
    };
    par_build(
        a.nrows(),
        pt.ncols(),
        || GroupScratch::new(pt.ncols()),
        |i, s, out| {
            s.row(i, out, |i, acc| {
                let g = smoothing.group_len(i);
                for_group!(g, smooth_group, &smoothing, i, acc);
                g
            })
        },
    )
}

/// Each row's column ([`EMPTY_ROW`] for an empty row) and value, for a
/// matrix whose rows hold at most one entry each; `None` otherwise. The
/// matrix's own arrays where every row holds one, else copied. O(rows).
fn single_entries(m: &Csr<f64>) -> Option<SingleEntries<'_>> {
    let n = m.nrows();
    if m.nnz() == n && m.row_ptr().par_windows(2).all(|w| w[1] == w[0] + 1) {
        return Some((Cow::Borrowed(m.col_idx()), Cow::Borrowed(m.values())));
    }
    if !m.row_ptr().par_windows(2).all(|w| w[1] <= w[0] + 1) {
        return None;
    }
    let entry = |i: usize| m.row(i).0.first().map(|&c| (c, m.row(i).1[0]));
    Some((
        Cow::Owned(
            (0..n)
                .into_par_iter()
                .map(|i| entry(i).map_or(EMPTY_ROW, |e| e.0))
                .collect(),
        ),
        Cow::Owned(
            (0..n)
                .into_par_iter()
                .map(|i| entry(i).map_or(0.0, |e| e.1))
                .collect(),
        ),
    ))
}

/// A column and a value per row ([`single_entries`]).
type SingleEntries<'a> = (Cow<'a, [u32]>, Cow<'a, [f64]>);

/// The column [`single_entries`] gives an empty row.
const EMPTY_ROW: u32 = u32::MAX;

/// The operands of [`smooth`].
struct Smoothing<'a> {
    a: &'a Csr<f64>,
    pt: &'a Csr<f64>,
    /// P_T's rows as one column and value each, where they hold at most one.
    single: Option<SingleEntries<'a>>,
    bs: usize,
    blocks: &'a [f64],
    omega: f64,
}

impl Smoothing<'_> {
    /// The weight of A's row k bs + c in row i = k bs + r of P: -omega times
    /// entry (r, c) of node k's inverse block.
    fn weight(&self, i: usize, c: usize) -> f64 {
        -self.omega * self.blocks[i * self.bs + c]
    }

    /// How many rows from i on (at most [`MAX_GROUP`]) have row i's pattern:
    /// rows of i's node with the same columns of P_T and the same zero
    /// weights.
    fn group_len(&self, i: usize) -> usize {
        let end = (i / self.bs + 1) * self.bs;
        let same = |l: usize| {
            self.pt.row(i).0 == self.pt.row(l).0
                && (0..self.bs).all(|c| (self.weight(i, c) == 0.0) == (self.weight(l, c) == 0.0))
        };
        (i + 1..end.min(i + MAX_GROUP))
            .find(|&l| !same(l))
            .map_or(end.min(i + MAX_GROUP) - i, |l| l - i)
    }
}

/// Rows i..i + G of the smoothed prolongator (one node's rows of the same
/// pattern) into `acc`: row i + r is P_T's row plus, for each c of a nonzero
/// weight w_rc, the rows of P_T of A's row k bs + c scaled by w_rc a_km.
fn smooth_group<const G: usize>(s: &Smoothing<'_>, i: usize, acc: &mut Accumulator) {
    acc.start(G);
    let (k, bs) = (i / s.bs, s.bs);
    let own: [&[f64]; G] = std::array::from_fn(|r| s.pt.row(i + r).1);
    for (p, &j) in s.pt.row(i).0.iter().enumerate() {
        acc.add::<G>(j, std::array::from_fn(|r| own[r][p]));
    }
    for c in 0..bs {
        let w: [f64; G] = std::array::from_fn(|r| s.weight(i + r, c));
        if w[0] == 0.0 {
            continue;
        }
        let (ac, av) = s.a.row(k * bs + c);
        match &s.single {
            // the same terms, each row's entry read without its row pointers
            Some((cols, vals)) => {
                acc.add_scaled_rows::<G>(ac.iter().zip(av).filter_map(|(&m, &amv)| {
                    let m = m as usize;
                    (cols[m] != EMPTY_ROW).then(|| {
                        (
                            w.map(|w| w * amv),
                            std::slice::from_ref(&cols[m]),
                            std::slice::from_ref(&vals[m]),
                        )
                    })
                }))
            }
            None => acc.add_scaled_rows::<G>(ac.iter().zip(av).map(|(&m, &amv)| {
                let (tc, tv) = s.pt.row(m as usize);
                (w.map(|w| w * amv), tc, tv)
            })),
        }
    }
    acc.drain();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P = P_T - omega D^-1 A P_T summed entry by entry as [`smooth`] sums
    /// it (P_T's row, then A's row in order, each term (w a_im) t_mc), in a
    /// sorted map per row; scalar unknowns.
    fn smooth_by_definition(
        a: &Csr<f64>,
        dinv: &BlockDiagonal,
        rho: f64,
        pt: &Csr<f64>,
    ) -> Csr<f64> {
        let omega = 4.0 / (3.0 * rho);
        let mut coo = gpuq_sparse::Coo::new(a.nrows(), pt.ncols());
        for i in 0..a.nrows() {
            let mut row = std::collections::BTreeMap::new();
            let (tc, tv) = pt.row(i);
            for (&c, &t) in tc.iter().zip(tv) {
                *row.entry(c).or_insert(0.0) += t;
            }
            let w = -omega * dinv.blocks().unwrap()[i];
            let (ac, av) = a.row(i);
            for (&m, &x) in ac.iter().zip(av) {
                let (tc, tv) = pt.row(m as usize);
                for (&c, &t) in tc.iter().zip(tv) {
                    *row.entry(c).or_insert(0.0) += (w * x) * t;
                }
            }
            for (c, v) in row {
                coo.push(i, c as usize, v).unwrap();
            }
        }
        Csr::from_coo(&coo).unwrap()
    }

    /// The rows of P_T read as one entry each (all rows holding one, or some
    /// empty: nodes in no aggregate) or by their row pointers (two
    /// candidates) give the definition's sums bit for bit.
    #[test]
    fn smoothing_reads_single_entry_rows_as_the_row_pointers_do() {
        let a = gpuq_sparse::generators::convdiff2d::<f64>(12, 0.4);
        let sym = crate::galerkin::add(0.5, &a, 0.5, &a.transpose(false)).unwrap();
        let fixed = gpuq_sparse::generators::with_identity_rows(&sym, |i| i % 7 == 3);
        for m in [&sym, &fixed] {
            let s = crate::strength::strength_graph(m, 1, 0.01).unwrap();
            let (agg, naggs) = crate::aggregate::aggregates(&s);
            let dinv = BlockDiagonal::of(m, 1, false).inverse().unwrap();
            let n = m.nrows();
            let ramp: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64 / 7.0).collect();
            for b in [vec![vec![1.0; n]], vec![vec![1.0; n], ramp]] {
                let pt = tentative(&agg, naggs, 1, &b).unwrap().p;
                let single = single_entries(&pt).is_some();
                assert_eq!(single, b.len() == 1);
                // the fixed rows join no aggregate: their rows of P_T are empty
                assert_eq!(pt.nnz() < n * b.len(), std::ptr::eq(m, &fixed));
                let p = smooth(m, &dinv, 1.7, &pt).unwrap();
                let want = smooth_by_definition(m, &dinv, 1.7, &pt);
                assert_eq!(p.col_idx(), want.col_idx());
                assert_eq!(p.values(), want.values());
            }
        }
    }

    #[test]
    fn one_vector_gives_the_qr_path_bit_for_bit() {
        // aggregates of varied sizes, one empty and one where b vanishes
        let agg: Vec<u32> = (0..50u32).map(|i| (i * 7 % 11).min(9)).collect();
        for bs in [1usize, 2] {
            let n = agg.len() * bs;
            let mut b: Vec<f64> = (0..n).map(|i| 0.3 + ((i * 13 % 17) as f64) / 7.0).collect();
            for (r, x) in b.iter_mut().enumerate() {
                if agg[r / bs] == 3 {
                    *x = 0.0;
                }
            }
            let fast = tentative_single(&agg, 12, bs, &b).unwrap();
            let qr = tentative_qr(&agg, 12, bs, &[b]).unwrap();
            assert_eq!(fast.p, qr.p);
            assert_eq!(fast.coarse_null, qr.coarse_null);
            assert_eq!(fast.zero_columns, qr.zero_columns);
            assert_eq!(
                fast.zero_columns, 3,
                "aggregate 3 (b = 0) and the empty 10, 11"
            );
        }
    }

    #[test]
    fn tentative_reproduces_near_null_space() {
        // 6 nodes, block 2, aggregates {0,1,2} {3,4,5}; vectors: the two
        // component constants and a "rotation" -y, x.
        let agg = [0, 0, 0, 1, 1, 1];
        let xs = [0.0, 1.0, 2.0, 0.0, 1.0, 2.0];
        let ys = [0.0, 0.0, 0.0, 1.0, 1.0, 1.5];
        let b: Vec<Vec<f64>> = vec![
            (0..12).map(|r| f64::from(r % 2 == 0)).collect(),
            (0..12).map(|r| f64::from(r % 2 == 1)).collect(),
            (0..12)
                .map(|r| if r % 2 == 0 { -ys[r / 2] } else { xs[r / 2] })
                .collect(),
        ];
        let t = tentative(&agg, 2, 2, &b).unwrap();
        assert_eq!(t.zero_columns, 0);
        // Columns orthonormal.
        let pd = t.p.to_dense();
        for c in 0..6 {
            for d in 0..6 {
                let s: f64 = (0..12).map(|r| pd[r * 6 + c] * pd[r * 6 + d]).sum();
                assert!((s - f64::from(c == d)).abs() < 1e-12);
            }
        }
        // P_T B_c = B.
        for (bv, bc) in b.iter().zip(&t.coarse_null) {
            let got = t.p.mul_vec(bc).unwrap();
            for (x, y) in got.iter().zip(bv) {
                assert!((x - y).abs() < 1e-12);
            }
        }
    }
}
