//! Slots of the small scalar arrays that iterative methods keep on the device, so
//! that kernels read their coefficients without a host round trip. Shared by the
//! kernels, the CUDA host code and the CPU implementation of the same steps.

/// BiCGSTAB's scalars (see `gpuq_krylov::bicgstab`).
pub mod bicgstab {
    //
    // Pairs one fused reduction writes are adjacent: (TS, TT) and (RHO, RNORM2).

    /// r0^H v with v = A M p.
    pub const R0V: usize = 0;
    /// ||s||^2 (real, zero imaginary part).
    pub const SNORM2: usize = 1;
    /// t^H s with t = A M s.
    pub const TS: usize = 2;
    /// t^H t (real, stored with a zero imaginary part).
    pub const TT: usize = 3;
    /// rho = r0^H r.
    pub const RHO: usize = 4;
    /// ||r||^2 at the end of the iteration (real, zero imaginary part).
    pub const RNORM2: usize = 5;
    /// Length of the array.
    pub const LEN: usize = 6;

    const _: () = assert!(TT == TS + 1 && RNORM2 == RHO + 1);
}

/// CG's scalars when they stay on the device (see `gpuq_krylov::cg`).
pub mod cg {
    /// p^H A p of the current iteration.
    pub const PQ: usize = 0;
    /// ||r||^2 after the current iteration's residual update (real, zero
    /// imaginary part).
    pub const RNORM2: usize = 1;
    /// rho = r^H M r by parity: iteration k (from 1) reads its rho from
    /// `RHO[k % 2]` and writes the next one into `RHO[(k + 1) % 2]`, so no
    /// kernel reads a slot that the same kernel writes.
    pub const RHO: [usize; 2] = [2, 3];
    /// Length of the array.
    pub const LEN: usize = 4;
}

/// TFQMR's scalars (see `gpuq_krylov::tfqmr`). The QMR recurrence is kept in
/// squares (theta^2, tau^2), so the device needs no square root.
pub mod tfqmr {
    /// sigma = r*^H v of the current iteration.
    pub const SIGMA: usize = 0;
    /// rho = r*^H w the current iteration's alpha = rho / sigma uses.
    pub const RHO: usize = 1;
    /// rho of the next iteration (r*^H w at the end of this one); beta =
    /// RHO_NEXT / RHO. Moved into RHO when the next iteration's sigma is summed.
    pub const RHO_NEXT: usize = 2;
    /// theta^2 = ||w||^2 / tau^2 of the latest half-step (real, zero imaginary part).
    pub const THETA2: usize = 3;
    /// eta = c^2 alpha of the latest half-step.
    pub const ETA: usize = 4;
    /// tau^2 after the latest half-step (real, zero imaginary part).
    pub const TAU2: usize = 5;
    /// Length of the array.
    pub const LEN: usize = 6;
}

/// QMR's scalars (see `gpuq_krylov::qmr`). Norms are stored as real values with
/// a zero imaginary part.
pub mod qmr {
    /// rho = ||v~|| that scales this iteration's v.
    pub const RHO: usize = 0;
    /// xi = ||M^T w~|| that scales this iteration's w and z.
    pub const XI: usize = 1;
    /// delta = z^T v.
    pub const DELTA: usize = 2;
    /// epsilon = q^T A p (zero before the first iteration, which makes the
    /// first p and q plain copies).
    pub const EPS: usize = 3;
    /// ||v~|| of the next iteration, until the recurrence moves it into RHO.
    pub const RHO_NEXT: usize = 4;
    /// theta of the latest rotation (theta_{i-1} for the next).
    pub const THETA: usize = 5;
    /// gamma of the latest rotation.
    pub const GAMMA: usize = 6;
    /// eta, the update's coefficient of p.
    pub const ETA: usize = 7;
    /// (theta_{i-1} gamma_i)^2, the update's carry of d and s.
    pub const CARRY: usize = 8;
    /// ||r||^2 after the update.
    pub const RNORM2: usize = 9;
    /// Length of the array.
    pub const LEN: usize = 10;
}

/// BiCGSTAB(l)'s scalars (see `gpuq_krylov::bicgstab_l`): fixed slots, then
/// per-index arrays whose places depend on l. Negated copies let every vector
/// step be `y = sc[a] x + sc[b] y`.
pub mod bicgstabl {
    /// The constant 1.
    pub const ONE: usize = 0;
    /// rho0 of the BiCG part.
    pub const RHO0: usize = 1;
    /// alpha of the BiCG part.
    pub const ALPHA: usize = 2;
    /// -alpha.
    pub const NEG_ALPHA: usize = 3;
    /// omega, the last minimal-residual coefficient.
    pub const OMEGA: usize = 4;
    /// -omega.
    pub const NEG_OMEGA: usize = 5;
    /// rho1 = r~^H r_j.
    pub const RHO1: usize = 6;
    /// beta = alpha rho1 / rho0.
    pub const BETA: usize = 7;
    /// -beta.
    pub const NEG_BETA: usize = 8;
    /// r~^H u_(j+1).
    pub const GAMMA_DOT: usize = 9;
    /// A dot product on its way to a quotient.
    pub const DOT: usize = 10;
    /// -tau of the current Gram-Schmidt step.
    pub const NEG_TAU: usize = 11;
    /// Where a result nobody reads goes.
    pub const DISCARD: usize = 12;
    /// The first breakdown of a cycle, as a code (real; 0: none).
    pub const FLAG: usize = 13;
    /// ||r_0||^2 at the end of a cycle (real).
    pub const RNORM2: usize = 14;
    /// Slots before the arrays.
    pub const FIXED: usize = 15;
    /// Breakdown code: rho = r~^H r_j vanished.
    pub const RHO_VANISHED: u32 = 1;
    /// Breakdown code: r~^H u_(j+1) vanished.
    pub const GAMMA_VANISHED: u32 = 2;
    /// Breakdown code: ||r_j||^2 of the minimal-residual part vanished.
    pub const SIGMA_VANISHED: u32 = 3;
    /// Breakdown code: omega vanished.
    pub const OMEGA_VANISHED: u32 = 4;

    /// ||r_j||^2 after Gram-Schmidt, j <= l.
    pub const fn sigma(j: usize) -> usize {
        FIXED + j
    }
    /// tau_ij, i, j <= l.
    pub const fn tau(l: usize, i: usize, j: usize) -> usize {
        FIXED + (l + 1) + i * (l + 1) + j
    }
    /// The minimal-residual coefficients: `which` 0 gamma, 1 -gamma, 2 gamma',
    /// 3 -gamma', 4 gamma'' (Sleijpen and Fokkema's gamma, gamma', gamma'').
    pub const fn coef(l: usize, which: usize, j: usize) -> usize {
        FIXED + (l + 1) + (l + 1) * (l + 1) + which * (l + 1) + j
    }
    /// Slots for a given l.
    pub const fn len(l: usize) -> usize {
        coef(l, 5, 0)
    }

    /// `check` of a [`Ratio`] that checks nothing.
    pub const NO_CHECK: u32 = u32::MAX;

    /// A guarded quotient over the slot array: v = sc\[a\] sc\[b\] / sc\[c\] (zero
    /// when sc\[c\] vanished or v is not finite), sc\[out\] = v and sc\[neg_out\] =
    /// -v; when `check` names a slot whose value vanished and no breakdown is
    /// recorded yet, sc[FLAG] = `code`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Ratio {
        /// First factor's slot.
        pub a: u32,
        /// Second factor's slot.
        pub b: u32,
        /// Denominator's slot.
        pub c: u32,
        /// Where v goes.
        pub out: u32,
        /// Where -v goes.
        pub neg_out: u32,
        /// The slot whose vanishing is a breakdown, or [`NO_CHECK`].
        pub check: u32,
        /// The breakdown's code.
        pub code: u32,
    }

    impl Ratio {
        /// A quotient that does nothing a kernel reads (fills unused places).
        pub const UNUSED: Ratio = Ratio {
            a: 0,
            b: 0,
            c: 0,
            out: 0,
            neg_out: 0,
            check: NO_CHECK,
            code: 0,
        };

        /// Every slot it reads or writes (`a` in place of an absent check),
        /// for a bounds check before a launch.
        #[inline]
        pub const fn slots(&self) -> [usize; 6] {
            let check = if self.check == NO_CHECK {
                self.a
            } else {
                self.check
            };
            [
                self.a as usize,
                self.b as usize,
                self.c as usize,
                self.out as usize,
                self.neg_out as usize,
                check as usize,
            ]
        }
    }

    /// The most quotients that follow one dot product.
    pub const MAX_RATIOS: usize = 4;

    /// The quotients a dot product's last block computes after writing its
    /// slot, in order: the first `count` of `ops`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Ratios {
        /// How many of `ops` apply.
        pub count: u32,
        /// The quotients.
        pub ops: [Ratio; MAX_RATIOS],
    }

    impl Ratios {
        /// `then` as a kernel argument, or `None` when it holds more than
        /// [`MAX_RATIOS`] quotients.
        #[inline]
        pub fn new(then: &[Ratio]) -> Option<Ratios> {
            if then.len() > MAX_RATIOS {
                return None;
            }
            let mut ops = [Ratio::UNUSED; MAX_RATIOS];
            ops[..then.len()].copy_from_slice(then);
            Some(Ratios {
                count: then.len() as u32,
                ops,
            })
        }
    }

    /// The most vector pairs one batched update takes.
    pub const MAX_PAIRS: usize = 16;
}
