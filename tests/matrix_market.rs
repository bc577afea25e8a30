//! Matrix Market: bit-exact round trips, symmetric expansion, and malformed input
//! that must give a line-numbered `Error`, never a panic.

mod common;

use common::*;
use gpuq::core::{Complex32, Complex64, Error};
use gpuq::sparse::matrix_market::{self as mm, MmField, MmFormat, MmSymmetry};
use gpuq::sparse::Csr;
use proptest::prelude::*;

fn round_trip_csr<T: RandomScalar>(a: &Csr<T>) -> Csr<T> {
    let mut buf = Vec::new();
    mm::write_csr(a, &mut buf).unwrap();
    mm::parse_csr(std::str::from_utf8(&buf).unwrap()).unwrap()
}

fn round_trip_vec<T: RandomScalar>(x: &[T]) -> Vec<T> {
    let mut buf = Vec::new();
    mm::write_dense_vector(x, &mut buf).unwrap();
    mm::parse_dense_vector(std::str::from_utf8(&buf).unwrap()).unwrap()
}

/// The line number of a parse error, or a failure naming the unexpected result.
fn error_line<T: gpuq::core::Scalar>(text: &str) -> usize {
    match mm::parse_csr::<T>(text) {
        Err(Error::Parse { line, .. }) => line,
        Err(e) => panic!("expected a parse error, got {e}"),
        Ok(_) => panic!("expected a parse error for {text:?}, got a matrix"),
    }
}

/// A temporary file path unique to this process and call.
fn temp_path(tag: &str) -> std::path::PathBuf {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("gpuq-mm-{}-{k}-{tag}.mtx", std::process::id()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn csr_round_trips_bit_exactly((m, n, d, seed) in shapes()) {
        let a: Csr<f64> = random_csr(m, n, d, seed);
        prop_assert_eq!(round_trip_csr(&a), a.clone());
        let c: Csr<Complex64> = random_csr(m, n, d, seed);
        prop_assert_eq!(round_trip_csr(&c), c);
        let s: Csr<f32> = random_csr(m, n, d, seed);
        prop_assert_eq!(round_trip_csr(&s), s);
        let z: Csr<Complex32> = random_csr(m, n, d, seed);
        prop_assert_eq!(round_trip_csr(&z), z);
    }

    #[test]
    fn vectors_round_trip_bit_exactly(n in 0usize..200, seed in any::<u64>()) {
        let x: Vec<f64> = random_vec(n, seed);
        prop_assert_eq!(round_trip_vec(&x), x);
        let z: Vec<Complex64> = random_vec(n, seed);
        prop_assert_eq!(round_trip_vec(&z), z);
    }

    #[test]
    fn extreme_values_round_trip(x in prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO) {
        prop_assert_eq!(round_trip_vec(&[x]), vec![x]);
    }

    #[test]
    fn symmetric_storage_expands_to_the_full_matrix(n in 1usize..25, seed in any::<u64>()) {
        let a: Csr<f64> = random_csr(n, n, 0.3, seed);
        let full = a.clone().to_coo();
        let mut lower = String::new();
        let mut stored = 0;
        for (i, j, v) in full.triplets() {
            if i >= j {
                lower.push_str(&format!("{} {} {:e}\n", i + 1, j + 1, v));
                stored += 1;
            }
        }
        let text = format!("%%MatrixMarket matrix coordinate real symmetric\n{n} {n} {stored}\n{lower}");
        let b: Csr<f64> = mm::parse_csr(&text).unwrap();
        let sym_expected = Csr::from_coo(&{
            let mut c = gpuq::sparse::Coo::new(n, n);
            for (i, j, v) in full.triplets().filter(|t| t.0 >= t.1) {
                c.push(i, j, v).unwrap();
                if i != j { c.push(j, i, v).unwrap(); }
            }
            c
        }).unwrap();
        prop_assert_eq!(&b, &sym_expected);
        prop_assert_eq!(b.transpose(false), b);
    }

    #[test]
    fn hermitian_storage_expands_to_a_hermitian_matrix(n in 1usize..20, seed in any::<u64>()) {
        let a: Csr<Complex64> = random_csr(n, n, 0.3, seed);
        let mut body = String::new();
        let mut stored = 0;
        for (i, j, v) in a.to_coo().triplets().filter(|t| t.0 >= t.1) {
            let im = if i == j { 0.0 } else { v.im };
            body.push_str(&format!("{} {} {:e} {:e}\n", i + 1, j + 1, v.re, im));
            stored += 1;
        }
        let text = format!("%%MatrixMarket matrix coordinate complex hermitian\n{n} {n} {stored}\n{body}");
        let h: Csr<Complex64> = mm::parse_csr(&text).unwrap();
        prop_assert_eq!(h.transpose(true), h);
    }

    #[test]
    fn skew_symmetric_storage_expands_to_a_skew_matrix(n in 1usize..20, seed in any::<u64>()) {
        let a: Csr<f64> = random_csr(n, n, 0.3, seed);
        let mut body = String::new();
        let mut stored = 0;
        for (i, j, v) in a.to_coo().triplets().filter(|t| t.0 > t.1) {
            body.push_str(&format!("{} {} {:e}\n", i + 1, j + 1, v));
            stored += 1;
        }
        let text = format!("%%MatrixMarket matrix coordinate real skew-symmetric\n{n} {n} {stored}\n{body}");
        let s: Csr<f64> = mm::parse_csr(&text).unwrap();
        let neg = s.transpose(false);
        let dense_s = s.to_dense();
        let dense_t = neg.to_dense();
        for (x, y) in dense_s.iter().zip(&dense_t) {
            prop_assert_eq!(*x, -*y);
        }
    }

    /// Arbitrary text after a valid banner never panics the parser.
    #[test]
    fn parser_never_panics_on_arbitrary_text(body in "[0-9eE+\\-. %\\n\\tnaifNAIF]{0,200}") {
        for banner in [
            "%%MatrixMarket matrix coordinate real general",
            "%%MatrixMarket matrix coordinate complex hermitian",
            "%%MatrixMarket matrix array real symmetric",
            "%%MatrixMarket matrix coordinate pattern skew-symmetric",
        ] {
            let text = format!("{banner}\n{body}");
            let _ = mm::parse_csr::<Complex64>(&text);
            let _ = mm::parse_dense_vector::<f64>(&text);
        }
    }

    /// Arbitrary bytes written to a file give an error or a matrix, never a panic.
    #[test]
    fn reader_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let path = temp_path("fuzz");
        std::fs::write(&path, &bytes).unwrap();
        let _ = mm::read_csr::<f64>(&path);
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn header_fields_are_recognised() {
    let h = mm::read_header("%%MatrixMarket matrix array double general").unwrap();
    assert_eq!(
        (h.format, h.field, h.symmetry),
        (MmFormat::Array, MmField::Real, MmSymmetry::General)
    );
    let h = mm::read_header("%%MatrixMarket matrix coordinate pattern skew-symmetric").unwrap();
    assert_eq!(
        (h.format, h.field, h.symmetry),
        (
            MmFormat::Coordinate,
            MmField::Pattern,
            MmSymmetry::SkewSymmetric
        )
    );
}

#[test]
fn pattern_and_integer_fields_read_as_numbers() {
    let a: Csr<f64> = mm::parse_csr(
        "%%MatrixMarket matrix coordinate pattern general\n% comment\n2 3 2\n1 3\n2 1\n",
    )
    .unwrap();
    assert_eq!(a.to_dense(), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    let b: Csr<Complex64> =
        mm::parse_csr("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 -7\n").unwrap();
    assert_eq!(b.values(), &[Complex64::new(-7.0, 0.0)]);
}

#[test]
fn duplicates_are_summed() {
    let a: Csr<f64> =
        mm::parse_csr("%%MatrixMarket matrix coordinate real general\n1 1 2\n1 1 1.5\n1 1 2.5\n")
            .unwrap();
    assert_eq!(a.values(), &[4.0]);
}

#[test]
fn vectors_in_both_formats_and_orientations() {
    let col: Vec<f64> =
        mm::parse_dense_vector("%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n").unwrap();
    assert_eq!(col, vec![1.0, 2.0, 3.0]);
    let row: Vec<f64> =
        mm::parse_dense_vector("%%MatrixMarket matrix array real general\n1 3\n1\n2\n3\n").unwrap();
    assert_eq!(row, vec![1.0, 2.0, 3.0]);
    let sparse: Vec<f64> =
        mm::parse_dense_vector("%%MatrixMarket matrix coordinate real general\n4 1 1\n3 1 5\n")
            .unwrap();
    assert_eq!(sparse, vec![0.0, 0.0, 5.0, 0.0]);
    let e = mm::parse_dense_vector::<f64>(
        "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
    )
    .unwrap_err();
    assert!(matches!(e, Error::Parse { line: 2, .. }), "{e}");
}

#[test]
fn files_round_trip_through_disk() {
    let a: Csr<Complex64> = random_csr(17, 9, 0.3, 7);
    let path = temp_path("csr");
    mm::save_csr(&a, &path).unwrap();
    let b: Csr<Complex64> = mm::read_csr(&path).unwrap();
    assert_eq!(a, b);
    let x: Vec<f64> = random_vec(33, 3);
    mm::save_dense_vector(&x, &path).unwrap();
    assert_eq!(mm::read_dense_vector::<f64>(&path).unwrap(), x);
    std::fs::remove_file(&path).unwrap();
}

const REAL: &str = "%%MatrixMarket matrix coordinate real general";

#[test]
fn malformed_inputs_name_their_line() {
    let cases: &[(&str, String, usize)] = &[
        ("empty input", String::new(), 0),
        (
            "bad banner",
            "%%MatrixMarket vector coordinate real general\n1 1 0\n".into(),
            1,
        ),
        ("not a banner", "1 1 1\n1 1 1\n".into(), 1),
        (
            "unknown field",
            "%%MatrixMarket matrix coordinate quaternion general\n".into(),
            1,
        ),
        (
            "missing size line",
            format!("{REAL}\n% only a comment\n"),
            3,
        ),
        ("short size line", format!("{REAL}\n3 3\n"), 2),
        ("bad size", format!("{REAL}\n3 x 3\n"), 2),
        ("truncated", format!("{REAL}\n3 3 3\n1 1 1\n2 2 1\n"), 5),
        ("truncated entry", format!("{REAL}\n3 3 1\n1 1\n"), 3),
        ("bad number", format!("{REAL}\n2 2 1\n1 1 1.0.0\n"), 3),
        (
            "row index out of range",
            format!("{REAL}\n2 2 1\n3 1 1\n"),
            3,
        ),
        (
            "column index out of range",
            format!("{REAL}\n2 2 1\n1 9 1\n"),
            3,
        ),
        ("zero index", format!("{REAL}\n2 2 1\n0 1 1\n"), 3),
        ("negative index", format!("{REAL}\n2 2 1\n-1 1 1\n"), 3),
        ("NaN", format!("{REAL}\n2 2 2\n1 1 1\n2 2 NaN\n"), 4),
        ("infinity", format!("{REAL}\n2 2 1\n%\n1 1 -inf\n"), 4),
        (
            "too many entries",
            format!("{REAL}\n2 2 1\n1 1 1\n2 2 1\n"),
            4,
        ),
        ("extra token", format!("{REAL}\n2 2 1\n1 1 1 1\n"), 3),
        (
            "complex into real",
            "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n".into(),
            1,
        ),
        (
            "upper entry in symmetric",
            "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n".into(),
            3,
        ),
        (
            "diagonal in skew",
            "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n".into(),
            3,
        ),
        (
            "rectangular symmetric",
            "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n".into(),
            2,
        ),
        (
            "array pattern",
            "%%MatrixMarket matrix array pattern general\n1 1\n".into(),
            1,
        ),
        (
            "short array",
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n".into(),
            6,
        ),
        (
            "huge declared count",
            format!("{REAL}\n5000000000 1 18446744073709551615\n"),
            2,
        ),
        (
            "overflowing array",
            "%%MatrixMarket matrix array real general\n4294967295 4294967295\n".into(),
            3,
        ),
    ];
    for (what, text, line) in cases {
        let got = error_line::<f64>(text);
        assert_eq!(got, *line, "{what}: wrong line in the error");
    }
    let e = error_line::<Complex64>(
        "%%MatrixMarket matrix coordinate complex hermitian\n1 1 1\n1 1 1 2\n",
    );
    assert_eq!(e, 3, "hermitian diagonal with an imaginary part");
}

#[test]
fn binary_garbage_is_a_parse_error() {
    let path = temp_path("garbage");
    let mut bytes = b"%%MatrixMarket matrix coordinate real general\n1 1 1\n".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0x9c, 0x80]);
    std::fs::write(&path, &bytes).unwrap();
    let e = mm::read_csr::<f64>(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(e, Error::Parse { line: 3, .. }), "{e}");
}

#[test]
fn missing_file_is_an_io_error() {
    let e = mm::read_csr::<f64>(temp_path("absent")).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}
