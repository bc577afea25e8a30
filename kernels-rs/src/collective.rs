//! The fixed order in which distributed reductions add the ranks' partials,
//! shared by the host (an MPI allreduce of gathered partials) and the device
//! (NCCL's all-gather of partials, summed by a kernel), so both give the same
//! bits for the same rank count and input.

/// The sum of `f(lo)`, ..., `f(hi - 1)` in a fixed pairwise order: the range
/// is split at `lo + (hi - lo) / 2`, each half summed the same way, the left
/// half's sum added first. Rounding grows as log2 of the count and depends on
/// the values only. 0 for an empty range. O(hi - lo).
pub fn ordered_sum_by<F: Fn(usize) -> f64>(lo: usize, hi: usize, f: &F) -> f64 {
    match hi.saturating_sub(lo) {
        0 => 0.0,
        1 => f(lo),
        n => {
            let mid = lo + n / 2;
            ordered_sum_by(lo, mid, f) + ordered_sum_by(mid, hi, f)
        }
    }
}

/// [`ordered_sum_by`] over a slice: the pairwise sum of `v` in its fixed
/// order. O(len).
pub fn ordered_sum(v: &[f64]) -> f64 {
    ordered_sum_by(0, v.len(), &|i| v.get(i).copied().unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_left_half_first() {
        assert_eq!(ordered_sum(&[]), 0.0);
        assert_eq!(ordered_sum(&[2.5]), 2.5);
        // (1e16 + 1) + (-1e16 + 1): the halves round on their own.
        assert_eq!(ordered_sum(&[1e16, 1.0, -1e16, 1.0]), 0.0);
        // Three values: [a] + [b, c].
        assert_eq!(ordered_sum(&[1.0, 1e16, -1e16]), 1.0);
        let strided = ordered_sum_by(0, 3, &|i| [1.0, 1e16, -1e16][i]);
        assert_eq!(strided, 1.0);
    }
}
