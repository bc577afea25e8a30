//! The PETSc binary reader and writers: hand-built files read as PETSc
//! writes them, random matrices and vectors round-tripped, row blocks read
//! and written, and every malformed file an error naming the file.

use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Path, PathBuf};

use gpuq_core::{Complex32, Complex64, Error, RealScalar, Result, Scalar, ScalarKind};
use gpuq_sparse::petsc::{
    self, PetscMatHeader, PetscVecHeader, MAT_FILE_CLASSID, VEC_FILE_CLASSID,
};
use gpuq_sparse::{matrix_market, Coo, Csr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A directory of its own for each test, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuq-petsc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The parts of a file, written byte by byte as PETSc lays them out.
#[derive(Clone)]
struct Spec {
    ib: usize,
    kind: ScalarKind,
    head: Vec<i64>,
    lens: Vec<i64>,
    cols: Vec<i64>,
    vals: Vec<(f64, f64)>,
}

impl Spec {
    /// The 3 x 3 matrix [[1+0.5i, 0, 2-i], [0, 0, 0], [3, -4.5+2i, 5+0.25i]]
    /// (real files keep the real parts).
    fn matrix(ib: usize, kind: ScalarKind) -> Spec {
        Spec {
            ib,
            kind,
            head: vec![MAT_FILE_CLASSID, 3, 3, 5],
            lens: vec![2, 0, 3],
            cols: vec![0, 2, 0, 1, 2],
            vals: vec![
                (1.0, 0.5),
                (2.0, -1.0),
                (3.0, 0.0),
                (-4.5, 2.0),
                (5.0, 0.25),
            ],
        }
    }

    /// The vector [1.5-i, -2, 3i, 3.25+0.125i] (real files keep the real parts).
    fn vector(ib: usize, kind: ScalarKind) -> Spec {
        Spec {
            ib,
            kind,
            head: vec![VEC_FILE_CLASSID, 4],
            lens: vec![],
            cols: vec![],
            vals: vec![(1.5, -1.0), (-2.0, 0.0), (0.0, 3.0), (3.25, 0.125)],
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for &x in self.head.iter().chain(&self.lens).chain(&self.cols) {
            if self.ib == 4 {
                out.extend((x as i32).to_be_bytes());
            } else {
                out.extend(x.to_be_bytes());
            }
        }
        for &(re, im) in &self.vals {
            match self.kind {
                ScalarKind::F32 => out.extend((re as f32).to_be_bytes()),
                ScalarKind::F64 => out.extend(re.to_be_bytes()),
                ScalarKind::C64 => out.extend(re.to_be_bytes().into_iter().chain(im.to_be_bytes())),
                ScalarKind::C32 => unreachable!("PETSc files of complex f32 are not built here"),
            }
        }
        out
    }

    /// The values as `T` (real parts only for a real file).
    fn values<T: Scalar>(&self) -> Vec<T> {
        let complex = self.kind == ScalarKind::C64;
        let part = <T::Real as RealScalar>::of_f64;
        let im = |im: f64| if complex { im } else { 0.0 };
        self.vals
            .iter()
            .map(|&(re, i)| T::from_parts(part(re), part(im(i))))
            .collect()
    }
}

/// The fixture matrix as Matrix Market text, real or complex.
fn fixture_mm(complex: bool) -> String {
    let spec = Spec::matrix(4, ScalarKind::C64);
    let field = if complex { "complex" } else { "real" };
    let mut text = format!("%%MatrixMarket matrix coordinate {field} general\n3 3 5\n");
    let rows = [0, 0, 2, 2, 2];
    for ((i, j), (re, im)) in rows.iter().zip(&spec.cols).zip(&spec.vals) {
        let value = if complex {
            format!("{re} {im}")
        } else {
            format!("{re}")
        };
        text += &format!("{} {} {value}\n", i + 1, j + 1);
    }
    text
}

fn io_kind(e: &Error) -> Option<ErrorKind> {
    match e {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

/// The error of `result`, checked to be a malformed-file error naming `path`.
fn bad_file<V: std::fmt::Debug>(result: Result<V>, path: &Path) -> String {
    let e = match result {
        Err(e) => e,
        Ok(v) => panic!("expected an error for {}, got {v:?}", path.display()),
    };
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        matches!(
            io_kind(&e),
            Some(ErrorKind::InvalidData | ErrorKind::UnexpectedEof)
        ),
        "{e:?}"
    );
    text
}

/// Rows `r` of `a`.
fn rows_of<T: Scalar>(a: &Csr<T>, r: Range<usize>) -> Csr<T> {
    let p = a.row_ptr();
    let (s, e) = (p[r.start], p[r.end]);
    let ptr = p[r.start..=r.end].iter().map(|&x| x - s).collect();
    let (cols, vals) = (a.col_idx()[s..e].to_vec(), a.values()[s..e].to_vec());
    Csr::try_new(r.len(), a.ncols(), ptr, cols, vals).unwrap()
}

fn random_scalar<T: Scalar>(rng: &mut ChaCha8Rng) -> T {
    let mut part = || {
        let x = match rng.random_range(0..8) {
            0 => 0.0,
            1 => rng.random_range(-1.0..1.0) * 1e-30,
            _ => rng.random_range(-1e3..1e3),
        };
        <T::Real as RealScalar>::of_f64(x)
    };
    T::from_parts(part(), part())
}

/// A random `m x n` matrix with about `density` of its entries stored
/// (explicit zeros among them), rows 3, 8, 13, ... empty.
fn random_csr<T: Scalar>(rng: &mut ChaCha8Rng, m: usize, n: usize, density: f64) -> Csr<T> {
    let mut coo = Coo::new(m, n);
    for i in (0..m).filter(|i| i % 5 != 3) {
        for j in 0..n {
            if rng.random::<f64>() < density {
                let v = random_scalar(rng);
                coo.push(i, j, v).unwrap();
            }
        }
    }
    Csr::from_coo(&coo).unwrap()
}

#[test]
fn hand_built_files_read_as_petsc_writes_them() {
    let dir = scratch("fixtures");
    let real: Csr<f64> = matrix_market::parse_csr(&fixture_mm(false)).unwrap();
    let complex: Csr<Complex64> = matrix_market::parse_csr(&fixture_mm(true)).unwrap();
    let real_as_complex: Csr<Complex64> = matrix_market::parse_csr(&fixture_mm(false)).unwrap();
    for ib in [4, 8] {
        for kind in [ScalarKind::F32, ScalarKind::F64, ScalarKind::C64] {
            let spec = Spec::matrix(ib, kind);
            let path = put(
                &dir,
                &format!("a-{ib}-{}.petsc", kind.name()),
                &spec.bytes(),
            );
            let h = petsc::read_mat_header(&path).unwrap();
            let want = PetscMatHeader {
                rows: 3,
                cols: 3,
                nnz: 5,
                index_bytes: ib,
                scalar: kind,
            };
            assert_eq!(h, want);
            if kind == ScalarKind::C64 {
                assert_eq!(petsc::read_csr::<Complex64>(&path).unwrap(), complex);
                let e = petsc::read_csr::<f64>(&path);
                assert!(bad_file(e, &path).contains("complex"));
            } else {
                assert_eq!(petsc::read_csr::<f64>(&path).unwrap(), real);
                assert_eq!(
                    petsc::read_csr::<Complex64>(&path).unwrap(),
                    real_as_complex
                );
                let single = petsc::read_csr::<f32>(&path).unwrap();
                assert_eq!(single.map_values(|v| v as f64).unwrap(), real);
            }
        }
    }
    // nz = PETSC_INT_MAX: the count did not fit a PetscInt, the lengths' sum is it.
    for (ib, max) in [(4, i32::MAX as i64), (8, i64::MAX)] {
        let mut spec = Spec::matrix(ib, ScalarKind::F64);
        spec.head[3] = max;
        let path = put(&dir, &format!("max-{ib}.petsc"), &spec.bytes());
        assert_eq!(petsc::read_mat_header(&path).unwrap().nnz, 5);
        assert_eq!(petsc::read_csr::<f64>(&path).unwrap(), real);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hand_built_vectors_read_whole_and_by_ranges() {
    let dir = scratch("vectors");
    for ib in [4, 8] {
        for kind in [ScalarKind::F32, ScalarKind::F64, ScalarKind::C64] {
            let spec = Spec::vector(ib, kind);
            let path = put(
                &dir,
                &format!("v-{ib}-{}.petsc", kind.name()),
                &spec.bytes(),
            );
            let h = petsc::read_vec_header(&path).unwrap();
            assert_eq!(
                h,
                PetscVecHeader {
                    len: 4,
                    index_bytes: ib,
                    scalar: kind
                }
            );
            let want: Vec<Complex64> = spec.values();
            assert_eq!(petsc::read_vector::<Complex64>(&path).unwrap(), want);
            for a in 0..=4 {
                for b in a..=4 {
                    let got = petsc::read_vector_range::<Complex64>(&path, a..b).unwrap();
                    assert_eq!(got, want[a..b]);
                }
            }
            if kind == ScalarKind::C64 {
                assert!(bad_file(petsc::read_vector::<f32>(&path), &path).contains("complex"));
            } else {
                assert_eq!(
                    petsc::read_vector::<f64>(&path).unwrap(),
                    spec.values::<f64>()
                );
                assert_eq!(
                    petsc::read_vector::<f32>(&path).unwrap(),
                    spec.values::<f32>()
                );
            }
            let e = petsc::read_vector_range::<f64>(&path, 2..5).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file cut anywhere is an error, except where the values left happen to
/// fill a narrower value type exactly (the format does not say which type
/// it holds): then it reads as that type.
#[test]
fn files_cut_at_every_byte_are_errors() {
    let dir = scratch("cut");
    for ib in [4, 8] {
        for kind in [ScalarKind::F64, ScalarKind::C64] {
            for spec in [Spec::matrix(ib, kind), Spec::vector(ib, kind)] {
                let full = spec.bytes();
                let count = spec.vals.len();
                let values_at = full.len() - count * if kind == ScalarKind::C64 { 16 } else { 8 };
                let narrower = |cut: usize| {
                    let rest = cut.checked_sub(values_at);
                    rest == Some(4 * count) || (kind == ScalarKind::C64 && rest == Some(8 * count))
                };
                for cut in 0..full.len() {
                    let path = put(&dir, "cut.petsc", &full[..cut]);
                    let read = if spec.head[0] == MAT_FILE_CLASSID {
                        petsc::read_csr::<Complex64>(&path).map(drop)
                    } else {
                        petsc::read_vector::<Complex64>(&path).map(drop)
                    };
                    let what = format!("cut at {cut} of {}: {read:?}", full.len());
                    assert_eq!(read.is_ok(), narrower(cut), "{what}");
                    if read.is_err() {
                        bad_file(read, &path);
                    }
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_matrices_are_errors_naming_what_is_wrong() {
    let dir = scratch("malformed");
    let good = Spec::matrix(4, ScalarKind::F64);
    let check = |name: &str, spec: &Spec, expect: &str| {
        let path = put(&dir, &format!("{name}.petsc"), &spec.bytes());
        let text = bad_file(petsc::read_csr::<f64>(&path), &path);
        assert!(text.contains(expect), "{name}: {text}");
    };
    let with = |f: &dyn Fn(&mut Spec)| {
        let mut s = good.clone();
        f(&mut s);
        s
    };
    check(
        "vector-class",
        &with(&|s| s.head[0] = VEC_FILE_CLASSID),
        "holds a PETSc vector",
    );
    check(
        "other-class",
        &with(&|s| s.head[0] = 1211211),
        "class id 1211211",
    );
    check("dense", &with(&|s| s.head[3] = -1), "dense");
    check(
        "negative-nz",
        &with(&|s| s.head[3] = -3),
        "negative entry count",
    );
    check(
        "negative-rows",
        &with(&|s| s.head[1] = -2),
        "negative row count",
    );
    check(
        "negative-cols",
        &with(&|s| s.head[2] = -1),
        "negative column count",
    );
    check(
        "column-too-big",
        &with(&|s| s.cols[4] = 3),
        "row 2: column index 3",
    );
    check(
        "column-negative",
        &with(&|s| s.cols[1] = -1),
        "row 0: column index -1",
    );
    check(
        "unsorted",
        &with(&|s| s.cols.swap(2, 3)),
        "row 2: column indices not strictly",
    );
    check(
        "duplicate",
        &with(&|s| s.cols[3] = 0),
        "row 2: column indices not strictly",
    );
    check(
        "lengths-short",
        &with(&|s| s.lens[2] = 2),
        "sum to 4, but nz = 5",
    );
    check(
        "lengths-long",
        &with(&|s| s.lens[1] = 1),
        "sum to 6, but nz = 5",
    );
    check(
        "length-negative",
        &with(&|s| s.lens[1] = -1),
        "row 1 has length -1",
    );
    check(
        "length-beyond-n",
        &with(&|s| s.lens[0] = 4),
        "row 0 has length 4",
    );
    check(
        "nan",
        &with(&|s| s.vals[3].0 = f64::NAN),
        "(2, 1) = NaN is not finite",
    );
    check(
        "infinite",
        &with(&|s| s.vals[0].0 = f64::INFINITY),
        "is not finite",
    );
    // a little-endian file, bytes after the values, a lying nz
    let mut le = good.bytes();
    le[..4].copy_from_slice(&(MAT_FILE_CLASSID as i32).to_le_bytes());
    let path = put(&dir, "le.petsc", &le);
    assert!(bad_file(petsc::read_csr::<f64>(&path), &path).contains("little-endian"));
    let path = put(&dir, "trailing.petsc", &[good.bytes(), vec![0; 3]].concat());
    assert!(bad_file(petsc::read_csr::<f64>(&path), &path).contains("more than one object"));
    let path = put(&dir, "nz.petsc", &with(&|s| s.head[3] = 6).bytes());
    assert!(bad_file(petsc::read_mat_header(&path), &path).contains("6 values"));
    // f64 values beyond f32's range are errors only when read as f32
    let path = put(&dir, "huge.petsc", &with(&|s| s.vals[4].0 = 1e300).bytes());
    assert!(bad_file(petsc::read_csr::<f32>(&path), &path).contains("(2, 2) = 1e300 overflows f32"));
    assert_eq!(petsc::read_csr::<f64>(&path).unwrap().values()[4], 1e300);
    // counts that overflow offsets, columns beyond gpuq's u32 indices
    let path = put(
        &dir,
        "overflow.petsc",
        &Spec {
            head: vec![MAT_FILE_CLASSID, i64::MAX / 2, 3, 5],
            ..Spec::matrix(8, ScalarKind::F64)
        }
        .bytes(),
    );
    assert!(bad_file(petsc::read_csr::<f64>(&path), &path).contains("overflow"));
    let wide = Spec {
        head: vec![MAT_FILE_CLASSID, 3, 1 << 33, 5],
        ..Spec::matrix(8, ScalarKind::F64)
    };
    let path = put(&dir, "wide.petsc", &wide.bytes());
    assert_eq!(petsc::read_mat_header(&path).unwrap().cols, 1 << 33);
    assert!(bad_file(petsc::read_csr::<f64>(&path), &path).contains("32-bit"));
    // rows beyond the matrix, a missing file
    let path = put(&dir, "good.petsc", &good.bytes());
    for r in [2..4, Range { start: 3, end: 2 }] {
        let e = petsc::read_csr_rows::<f64>(&path, r).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let missing = dir.join("missing.petsc");
    assert_eq!(
        io_kind(&petsc::read_csr::<f64>(&missing).unwrap_err()),
        Some(ErrorKind::NotFound)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_vectors_are_errors() {
    let dir = scratch("malformed-vectors");
    let good = Spec::vector(8, ScalarKind::F64);
    let matrix = put(
        &dir,
        "matrix.petsc",
        &Spec::matrix(4, ScalarKind::F64).bytes(),
    );
    assert!(bad_file(petsc::read_vector::<f64>(&matrix), &matrix).contains("holds a PETSc matrix"));
    let mut nan = good.clone();
    nan.vals[2].0 = f64::NAN;
    let path = put(&dir, "nan.petsc", &nan.bytes());
    assert!(bad_file(petsc::read_vector::<f64>(&path), &path).contains("entry 2 = NaN"));
    assert!(petsc::read_vector_range::<f64>(&path, 0..2).is_ok());
    let negative = Spec {
        head: vec![VEC_FILE_CLASSID, -4],
        ..good.clone()
    };
    let path = put(&dir, "negative.petsc", &negative.bytes());
    assert!(bad_file(petsc::read_vector::<f64>(&path), &path).contains("negative vector length"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn round_trip<T: Scalar>(dir: &Path, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (m, n) = (rng.random_range(0..30), rng.random_range(0..30));
    let density = rng.random_range(0.0..0.5);
    let a: Csr<T> = random_csr(&mut rng, m, n, density);
    let mut bytes = Vec::new();
    petsc::write_csr(&a, &mut bytes).unwrap();
    let path = dir.join(format!("a-{}-{seed}.petsc", T::KIND.name()));
    petsc::save_csr(&a, &path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let h = petsc::read_mat_header(&path).unwrap();
    // a file of no values reads as f64, whatever it was written from
    let kind = if T::IS_COMPLEX && a.nnz() > 0 {
        ScalarKind::C64
    } else {
        ScalarKind::F64
    };
    assert_eq!(
        h,
        PetscMatHeader {
            rows: m,
            cols: n,
            nnz: a.nnz(),
            index_bytes: 4,
            scalar: kind
        }
    );
    assert_eq!(petsc::read_csr::<T>(&path).unwrap(), a);
    let x: Vec<T> = (0..rng.random_range(0..50))
        .map(|_| random_scalar(&mut rng))
        .collect();
    let path = dir.join(format!("x-{}-{seed}.petsc", T::KIND.name()));
    petsc::save_vector(&x, &path).unwrap();
    let mut bytes = Vec::new();
    petsc::write_vector(&x, &mut bytes).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(petsc::read_vector::<T>(&path).unwrap(), x);
}

#[test]
fn random_matrices_and_vectors_round_trip() {
    let dir = scratch("round-trip");
    for seed in 0..25 {
        round_trip::<f64>(&dir, seed);
        round_trip::<f32>(&dir, seed);
        round_trip::<Complex64>(&dir, seed);
        round_trip::<Complex32>(&dir, seed);
    }
    // f32 is written as f64, exactly: read back as f64 it is the widened matrix
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let a: Csr<f32> = random_csr(&mut rng, 20, 10, 0.3);
    let path = dir.join("f32.petsc");
    petsc::save_csr(&a, &path).unwrap();
    let wide = petsc::read_csr::<f64>(&path).unwrap();
    assert_eq!(wide, a.map_values(|v| v as f64).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_row_block_is_those_rows_of_the_whole() {
    let dir = scratch("blocks");
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let a: Csr<Complex64> = random_csr(&mut rng, 13, 9, 0.3);
    let path = dir.join("a.petsc");
    petsc::save_csr(&a, &path).unwrap();
    let whole = petsc::read_csr::<Complex64>(&path).unwrap();
    for s in 0..=13 {
        for e in s..=13 {
            assert_eq!(
                petsc::read_csr_rows::<Complex64>(&path, s..e).unwrap(),
                rows_of(&whole, s..e)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Blocks written at their places by concurrent writers, in any order and
/// over a longer stale file, make the file the whole-matrix writer makes;
/// with an int64 header, a file the reader reads back.
#[test]
fn row_blocks_written_at_their_places_make_the_file() {
    let dir = scratch("write-blocks");
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let a: Csr<Complex64> = random_csr(&mut rng, 40, 25, 0.2);
    let mut whole = Vec::new();
    petsc::write_csr(&a, &mut whole).unwrap();
    let h32 = PetscMatHeader::for_writing::<Complex64>(40, 25, a.nnz()).unwrap();
    let h64 = PetscMatHeader {
        index_bytes: 8,
        ..h32
    };
    for h in [h32, h64] {
        let path = put(&dir, "a.petsc", &vec![0xAB; whole.len() + 100]);
        let cuts = [0, 7, 7, 19, 33, 40];
        std::thread::scope(|s| {
            for w in cuts.windows(2).rev() {
                let (a, path) = (&a, &path);
                s.spawn(move || {
                    let block = rows_of(a, w[0]..w[1]);
                    petsc::write_csr_rows_at(path, &h, w[0], a.row_ptr()[w[0]], &block).unwrap();
                });
            }
        });
        if h.index_bytes == 4 {
            assert_eq!(std::fs::read(&path).unwrap(), whole);
        }
        assert_eq!(petsc::read_mat_header(&path).unwrap(), h);
        assert_eq!(petsc::read_csr::<Complex64>(&path).unwrap(), a);
        assert_eq!(
            petsc::read_csr_rows::<Complex64>(&path, 7..33).unwrap(),
            rows_of(&a, 7..33)
        );
    }
    // blocks that do not fit, headers that do not fit the type
    let path = dir.join("b.petsc");
    let block = rows_of(&a, 30..40);
    let nnz_before = a.row_ptr()[30];
    for (first, before, h) in [
        (31, nnz_before, h32),
        (30, nnz_before + 1, h32),
        (30, nnz_before, PetscMatHeader { cols: 24, ..h32 }),
        (
            30,
            nnz_before,
            PetscMatHeader {
                scalar: ScalarKind::F64,
                ..h32
            },
        ),
        (
            30,
            nnz_before,
            PetscMatHeader {
                index_bytes: 3,
                ..h32
            },
        ),
        (
            30,
            nnz_before,
            PetscMatHeader {
                nnz: 1 << 31,
                ..h32
            },
        ),
    ] {
        let e = petsc::write_csr_rows_at(&path, &h, first, before, &block).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    assert!(PetscMatHeader::for_writing::<f64>(1 << 31, 1, 0).is_err());
    assert!(PetscVecHeader::for_writing::<f64>(1 << 31).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A matrix of more entries than a writer's block (2^20) and a reader's
/// task (2^16): the blocks join up, and an error deep in the file names its
/// row.
#[test]
fn a_large_matrix_crosses_read_and_write_blocks() {
    let dir = scratch("large");
    let n: usize = 400_000;
    let mut row_ptr = vec![0];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in 0..n {
        for j in i.saturating_sub(1)..(i + 2).min(n) {
            cols.push(j as u32);
            vals.push(i as f64 - 0.5 * j as f64);
        }
        row_ptr.push(cols.len());
    }
    let a = Csr::try_new(n, n, row_ptr, cols, vals).unwrap();
    let path = dir.join("band.petsc");
    petsc::save_csr(&a, &path).unwrap();
    assert_eq!(petsc::read_csr::<f64>(&path).unwrap(), a);
    let rows = 70_001..350_000;
    assert_eq!(
        petsc::read_csr_rows::<f64>(&path, rows.clone()).unwrap(),
        rows_of(&a, rows)
    );
    let k = 1_000_000;
    let row = a.row_ptr().partition_point(|&p| p <= k) - 1;
    let mut bytes = std::fs::read(&path).unwrap();
    let at = 4 * (4 + n + k);
    bytes[at..at + 4].copy_from_slice(&(n as i32).to_be_bytes());
    let path = put(&dir, "bad.petsc", &bytes);
    let text = bad_file(petsc::read_csr::<f64>(&path), &path);
    assert!(
        text.contains(&format!("row {row}: column index {n}")),
        "{text}"
    );
    assert!(petsc::read_csr_rows::<f64>(&path, 0..row).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Seconds to write and read a matrix of about 100 MB (run with
/// `cargo test --release -p gpuq-sparse --test petsc -- --ignored --nocapture`).
#[test]
#[ignore]
fn time_a_100_mb_matrix() {
    let dir = scratch("time");
    let (n, per_row) = (1_000_000, 8);
    let mut row_ptr = vec![0];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in 0..n {
        for k in 0..per_row {
            cols.push(((i + k * 997) % n) as u32);
            vals.push(1.0 + k as f64);
        }
        cols[row_ptr[i]..].sort_unstable();
        row_ptr.push(cols.len());
    }
    let a = Csr::try_new(n, n, row_ptr, cols, vals).unwrap();
    let path = dir.join("a.petsc");
    let t = std::time::Instant::now();
    petsc::save_csr(&a, &path).unwrap();
    let write = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let b = petsc::read_csr::<f64>(&path).unwrap();
    let read = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let half = petsc::read_csr_rows::<f64>(&path, n / 2..n).unwrap();
    let read_half = t.elapsed().as_secs_f64();
    let mb = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
    println!("{mb:.0} MB on {} threads: write {write:.3} s, read {read:.3} s, read the second half {read_half:.3} s", rayon::current_num_threads());
    assert_eq!(b, a);
    assert_eq!(half.nrows(), n / 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
