//! The device side of a distributed solve's communication between GPUs: the
//! halo's send buffer packed from the owned entries the neighbours need (NCCL
//! sends slices of it), and the all-reduce of a method's scalar slots from the
//! partials NCCL all-gathered, added over ranks in the host's fixed order
//! ([`crate::collective::ordered_sum_by`]), so the NCCL and MPI paths give the
//! same bits.
//!
//! Safety contract of every entry point: `idx` holds `n` indices valid in
//! `x`, `out` holds `n` elements, `sc` holds `len` elements and `gathered`
//! `size * len`, and outputs do not alias inputs.

use super::prelude::{global_id, grid_threads, DeviceScalar};
use crate::collective::ordered_sum_by;
use crate::scalar::{KScalar, C32, C64};

macro_rules! halo {
    ($t:ty, $r:ty, $pack:ident, $sum:ident, $im:expr) => {
        /// out_k = x_{idx_k} for k < n: the entries a halo exchange sends, in
        /// the order the neighbours want them.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $pack(
            n: usize,
            x: *const $t,
            idx: *const u32,
            out: *mut $t,
        ) {
            let mut k = global_id();
            while k < n {
                *out.add(k) = <$t>::ldg(x.add(*idx.add(k) as usize));
                k += grid_threads();
            }
        }

        /// sc_k = the sum over ranks r < size of gathered_{r len + k}, for
        /// every slot k < min(len, 64) whose bit is set in `mask`
        /// (`gathered` holds every rank's whole scalar array of `len`
        /// values; the slots travel by value, so a recorded launch needs no
        /// device list of them), each component added in f64 in the fixed
        /// pairwise order of the host's allreduce, then rounded to the scalar.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $sum(
            mask: u64,
            size: usize,
            len: usize,
            gathered: *const $t,
            sc: *mut $t,
        ) {
            let mut slot = global_id();
            while slot < len.min(64) {
                if (mask >> slot) & 1 == 1 {
                    let at = |r: usize| *gathered.add(r * len + slot);
                    let re = ordered_sum_by(0, size, &|r| at(r).re() as f64);
                    let im_of: fn($t) -> $r = $im;
                    let im = ordered_sum_by(0, size, &|r| im_of(at(r)) as f64);
                    *sc.add(slot) = <$t>::from_parts(re as $r, im as $r);
                }
                slot += grid_threads();
            }
        }
    };
}

halo!(f32, f32, halo_pack_f32, rank_sum_f32, |_| 0.0);
halo!(f64, f64, halo_pack_f64, rank_sum_f64, |_| 0.0);
halo!(C32, f32, halo_pack_c32, rank_sum_c32, |v| v.im);
halo!(C64, f64, halo_pack_c64, rank_sum_c64, |v| v.im);
