//! Arbitrary bytes into every Matrix Market parser, for `f64` and
//! `Complex<f64>`: each call must return `Ok` or `Err`, never panic, abort or
//! allocate beyond the fuzzer's limits.

#![no_main]

use gpuq_core::{Complex, Scalar};
use gpuq_sparse::matrix_market::{parse_coo, parse_csr, parse_dense_columns, parse_dense_vector};
use libfuzzer_sys::fuzz_target;

/// Every parser on `text` for the scalar type `T`; the results are dropped.
fn parse_all<T: Scalar>(text: &str) {
    let _ = parse_coo::<T>(text);
    let _ = parse_csr::<T>(text);
    let _ = parse_dense_vector::<T>(text);
    let _ = parse_dense_columns::<T>(text);
}

fuzz_target!(|data: &[u8]| {
    // Valid UTF-8 as it is; anything else as a caller reading with
    // `String::from_utf8_lossy` would pass it.
    let text = String::from_utf8_lossy(data);
    parse_all::<f64>(&text);
    parse_all::<Complex<f64>>(&text);
});
