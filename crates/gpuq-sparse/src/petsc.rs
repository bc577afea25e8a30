//! The PETSc binary format: matrices (what `MatView` of an AIJ matrix writes
//! to a binary viewer) and vectors (`VecView`), read and written whole or by
//! blocks of rows, so that each rank of a distributed solve reads or writes
//! its own rows of one file.
//!
//! Layout, every number big-endian:
//!
//! * matrix: the class id [`MAT_FILE_CLASSID`], rows `M`, columns `N` and
//!   entries `nz` (four PetscInts); the `M` row lengths (PetscInts); the `nz`
//!   column indices (PetscInts, 0-based, strictly increasing within each
//!   row); the `nz` values (PetscScalars);
//! * vector: the class id [`VEC_FILE_CLASSID`] and the length `n` (two
//!   PetscInts); the `n` values.
//!
//! A PetscInt is an `int32`, or an `int64`, header included, in a PETSc built
//! with 64-bit indices: such a file is recognised by its first four bytes
//! (the high half of the class id) being zero. A PetscScalar is `f64`, `f32`
//! (single-precision builds) or a complex pair of either. The file does not
//! say which: the reader infers it from the bytes left for the values, 4 per
//! value being `f32`, 8 `f64` and 16 complex `f64`. Eight bytes could also be
//! a complex `f32` pair (a single-precision complex build): they are read as
//! `f64`, PETSc's default, so [`ScalarKind::C32`] is never inferred. A file of
//! no values is taken as `f64`. The `.info` file PETSc may write beside the
//! file is not read.
//!
//! An `nz` of `PETSC_INT_MAX` (`i32::MAX`, or `i64::MAX` in an int64 file) is
//! what PETSc writes when the count does not fit a PetscInt: the row lengths'
//! sum is then the count. Not supported, each with an error saying so: `nz` =
//! -1 (`MATRIX_BINARY_FORMAT_DENSE`, a dense matrix in PETSc's native format:
//! no row lengths, `M N` values), and files of more than one object (PETSc's
//! viewer can append a vector to a matrix), whose length fits no value type.
//!
//! The reader is strict and never panics. Every error names the file: one
//! that does not hold what is asked for is an [`Error::Io`] of kind
//! `InvalidData` (`UnexpectedEof` when the file is shorter than its header
//! implies) whose message says what is wrong and where (row, column, entry):
//! a wrong class id (with a word for a vector read as a matrix, or a
//! little-endian file), negative or overflowing counts, a length that does
//! not match the header, row lengths outside `0..=N` or not summing to `nz`,
//! column indices outside `0..N` or not strictly increasing within a row,
//! complex values read into a real type, and, as for Matrix Market files, NaN
//! or infinite values (or values beyond `f32`'s range, read as `f32`). Real
//! values read into a complex type get a zero imaginary part. Rows or entries
//! beyond the file are an [`Error::InvalidArgument`].
//!
//! Writers emit what a default PETSc build reads: int32 PetscInts and `f64`
//! values (complex `f64` for complex types; `f32` widened exactly). A count
//! beyond `i32::MAX` is an error; the row-block writer takes a header, which
//! may say int64 for a PETSc built with 64-bit indices.
//!
//! Cost: O(the bytes read or written). Reads are positioned reads of 2^16
//! elements, each decoded by one task on Rayon's threads; writes encode 2^20
//! elements at a time on all threads. Unix only (positioned I/O).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use gpuq_core::{Error, RealScalar, Result, Scalar, ScalarKind};
use rayon::prelude::*;

use crate::Csr;

/// The class id a PETSc binary matrix starts with (`MAT_FILE_CLASSID`).
pub const MAT_FILE_CLASSID: i64 = 1_211_216;

/// The class id a PETSc binary vector starts with (`VEC_FILE_CLASSID`).
pub const VEC_FILE_CLASSID: i64 = 1_211_214;

/// Elements per positioned read, each decoded by one task.
const READ_TASK: usize = 1 << 16;

/// Elements a writer encodes (on all threads) before handing them on.
const WRITE_BLOCK: usize = 1 << 20;

/// Elements per encoding task within a [`WRITE_BLOCK`].
const WRITE_TASK: usize = 1 << 14;

/// Where the writers to a `Write` say an I/O error happened (the save
/// functions put the file's path in its place).
const WRITER: &str = "<PETSc binary writer>";

/// The header of a PETSc binary matrix, with the value type inferred from
/// the file's length (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PetscMatHeader {
    /// Rows `M`.
    pub rows: usize,
    /// Columns `N`.
    pub cols: usize,
    /// Stored entries `nz`.
    pub nnz: usize,
    /// Bytes per PetscInt: 4, or 8 for a PETSc built with 64-bit indices.
    pub index_bytes: usize,
    /// The value type: `F32`, `F64` or `C64` when read (never `C32`).
    pub scalar: ScalarKind,
}

/// The header of a PETSc binary vector, with the value type inferred from
/// the file's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PetscVecHeader {
    /// Entries `n`.
    pub len: usize,
    /// Bytes per PetscInt: 4 or 8.
    pub index_bytes: usize,
    /// The value type: `F32`, `F64` or `C64` when read (never `C32`).
    pub scalar: ScalarKind,
}

impl PetscMatHeader {
    /// The header gpuq's writers give a `rows x cols` matrix of `nnz` entries
    /// of type `T`: int32 PetscInts and `f64` values (complex `f64` for a
    /// complex `T`). Errors when a count exceeds `i32::MAX`. O(1).
    pub fn for_writing<T: Scalar>(rows: usize, cols: usize, nnz: usize) -> Result<Self> {
        let scalar = written_kind::<T>();
        let h = PetscMatHeader {
            rows,
            cols,
            nnz,
            index_bytes: 4,
            scalar,
        };
        h.check_writable::<T>().map(|()| h)
    }

    /// Errors unless `T` can be written under this header.
    fn check_writable<T: Scalar>(&self) -> Result<()> {
        let counts = [
            ("rows", self.rows),
            ("columns", self.cols),
            ("entries", self.nnz),
        ];
        check_writable::<T>(self.index_bytes, self.scalar, &counts)
    }

    /// Byte offsets of the row lengths, column indices, values and end.
    fn offsets(&self) -> Option<[u64; 4]> {
        offsets(
            self.index_bytes,
            self.rows,
            self.nnz,
            scalar_bytes(self.scalar),
        )
    }
}

impl PetscVecHeader {
    /// The header gpuq's writers give a vector of `len` entries of type `T`
    /// (see [`PetscMatHeader::for_writing`]). O(1).
    pub fn for_writing<T: Scalar>(len: usize) -> Result<Self> {
        let scalar = written_kind::<T>();
        check_writable::<T>(4, scalar, &[("entries", len)])?;
        Ok(PetscVecHeader {
            len,
            index_bytes: 4,
            scalar,
        })
    }
}

/// Reads the header of the PETSc binary matrix at `path`, checks the file's
/// length against it and infers the value type. O(1) reads, or O(M) when
/// `nz` is `PETSC_INT_MAX` (the row lengths are read and summed).
pub fn read_mat_header(path: impl AsRef<Path>) -> Result<PetscMatHeader> {
    open_mat(path.as_ref()).map(|(_, h)| h)
}

/// Reads the header of the PETSc binary vector at `path`, checks the file's
/// length against it and infers the value type. O(1).
pub fn read_vec_header(path: impl AsRef<Path>) -> Result<PetscVecHeader> {
    open_vec(path.as_ref()).map(|(_, h)| h)
}

/// Reads the whole PETSc binary matrix at `path` (see [`read_csr_rows`]).
/// O(file length).
pub fn read_csr<T: Scalar>(path: impl AsRef<Path>) -> Result<Csr<T>> {
    let (file, h) = open_mat(path.as_ref())?;
    read_rows(&file, path.as_ref(), &h, 0..h.rows)
}

/// Reads the rows `rows` of the PETSc binary matrix at `path` as a CSR of
/// `rows.len()` rows and all `N` columns. Only the header, the lengths of
/// rows `0..rows.end` (their sum places the block) and the block's column
/// indices and values are read, so each rank of a distributed solve can read
/// its own rows. The row lengths must sum to `nz` when the block ends at the
/// last row (and must not exceed it otherwise). O(rows.end + the block's
/// entries).
pub fn read_csr_rows<T: Scalar>(path: impl AsRef<Path>, rows: Range<usize>) -> Result<Csr<T>> {
    let (file, h) = open_mat(path.as_ref())?;
    read_rows(&file, path.as_ref(), &h, rows)
}

/// Reads the whole PETSc binary vector at `path`. O(n).
pub fn read_vector<T: Scalar>(path: impl AsRef<Path>) -> Result<Vec<T>> {
    let (file, h) = open_vec(path.as_ref())?;
    read_entries(&file, path.as_ref(), &h, 0..h.len)
}

/// Reads the entries `range` of the PETSc binary vector at `path` (only the
/// header and those entries are read). O(range.len()).
pub fn read_vector_range<T: Scalar>(path: impl AsRef<Path>, range: Range<usize>) -> Result<Vec<T>> {
    let (file, h) = open_vec(path.as_ref())?;
    read_entries(&file, path.as_ref(), &h, range)
}

/// Writes `a` as a PETSc binary matrix with the header
/// [`PetscMatHeader::for_writing`] gives it. O(nnz).
pub fn write_csr<T: Scalar, W: Write>(a: &Csr<T>, mut out: W) -> Result<()> {
    let h = PetscMatHeader::for_writing::<T>(a.nrows(), a.ncols(), a.nnz())?;
    let at = h.offsets().ok_or_else(|| overflow(Path::new(WRITER)))?;
    put_rows(&h, at, 0, 0, a, &mut |_, bytes| out.write_all(bytes))
        .and_then(|()| out.flush())
        .map_err(|e| io_error(Path::new(WRITER), e))
}

/// Writes `a` to the file at `path` (see [`write_csr`]) atomically: no
/// truncated file is ever left under `path`. O(nnz).
pub fn save_csr<T: Scalar>(a: &Csr<T>, path: impl AsRef<Path>) -> Result<()> {
    gpuq_core::files::write_atomically(path.as_ref(), |w| write_csr(a, w))
}

/// Writes `x` as a PETSc binary vector with the header
/// [`PetscVecHeader::for_writing`] gives it. O(len).
pub fn write_vector<T: Scalar, W: Write>(x: &[T], mut out: W) -> Result<()> {
    let h = PetscVecHeader::for_writing::<T>(x.len())?;
    put_entries(&h, 2 * h.index_bytes as u64, x, &mut |_, bytes| {
        out.write_all(bytes)
    })
    .and_then(|()| out.flush())
    .map_err(|e| io_error(Path::new(WRITER), e))
}

/// Writes `x` to the file at `path` (see [`write_vector`]) atomically. O(len).
pub fn save_vector<T: Scalar>(x: &[T], path: impl AsRef<Path>) -> Result<()> {
    gpuq_core::files::write_atomically(path.as_ref(), |w| write_vector(x, w))
}

/// Writes the rows `first_row..first_row + rows.nrows()` of the matrix that
/// `header` describes into the file at `path`, `nnz_before` being the
/// entries of the rows above: the header, then the block's row lengths,
/// column indices and values, each by a positioned write at its place. The
/// file is created if need be and given the matrix's full length. Writers of
/// disjoint blocks (ranks, threads) may run at once; when the blocks
/// covering rows `0..M` have all been written (the caller synchronises), the
/// file holds the matrix. `header` is [`PetscMatHeader::for_writing`]'s, or
/// one with `index_bytes` 8 for a PETSc with 64-bit indices. Errors when the
/// block does not fit the header. O(the block's entries).
pub fn write_csr_rows_at<T: Scalar>(
    path: impl AsRef<Path>,
    header: &PetscMatHeader,
    first_row: usize,
    nnz_before: usize,
    rows: &Csr<T>,
) -> Result<()> {
    let (path, h) = (path.as_ref(), header);
    h.check_writable::<T>()?;
    let at = h.offsets().ok_or_else(|| overflow(path))?;
    if rows.ncols() != h.cols
        || !fits(first_row, rows.nrows(), h.rows)
        || !fits(nnz_before, rows.nnz(), h.nnz)
    {
        return Err(Error::InvalidArgument(format!(
            "{}: {} rows of {} columns and {} entries, from row {first_row} and entry \
             {nnz_before}, do not fit a {} x {} matrix of {} entries",
            path.display(),
            rows.nrows(),
            rows.ncols(),
            rows.nnz(),
            h.rows,
            h.cols,
            h.nnz
        )));
    }
    let file = open_for_writing(path, at[3])?;
    put_rows(h, at, first_row, nnz_before, rows, &mut |off, b| {
        file.write_all_at(b, off)
    })
    .map_err(|e| io_error(path, e))
}

fn open_mat(path: &Path) -> Result<(File, PetscMatHeader)> {
    let (file, len) = open(path)?;
    let (ib, [_, m, n, nz]) = read_header::<4>(&file, path, len, MAT_FILE_CLASSID)?;
    let (rows, cols) = (
        count(path, "row count M", m)?,
        count(path, "column count N", n)?,
    );
    let int_max = if ib == 4 { i32::MAX as i64 } else { i64::MAX };
    let nnz = if nz == int_max {
        let [_, lens_end, _, _] = offsets(ib, rows, 0, 0).ok_or_else(|| overflow(path))?;
        need(path, len, lens_end, "the row lengths")?;
        let lens = read_lengths(&file, path, ib, cols, 0..rows)?;
        lens.par_iter().copied().reduce(|| 0, usize::saturating_add)
    } else if nz == -1 {
        return Err(invalid(
            path,
            "nz = -1 marks a dense matrix in PETSc's native format (MATRIX_BINARY_FORMAT_DENSE), \
             which gpuq does not read: save it as AIJ"
                .into(),
        ));
    } else {
        count(path, "entry count nz", nz)?
    };
    let [_, _, values_at, _] = offsets(ib, rows, nnz, 0).ok_or_else(|| overflow(path))?;
    need(path, len, values_at, "the row lengths and column indices")?;
    let scalar = infer_scalar(path, len - values_at, nnz)?;
    Ok((
        file,
        PetscMatHeader {
            rows,
            cols,
            nnz,
            index_bytes: ib,
            scalar,
        },
    ))
}

fn open_vec(path: &Path) -> Result<(File, PetscVecHeader)> {
    let (file, len) = open(path)?;
    let (ib, [_, n]) = read_header::<2>(&file, path, len, VEC_FILE_CLASSID)?;
    let n = count(path, "vector length", n)?;
    let scalar = infer_scalar(path, len - 2 * ib as u64, n)?;
    Ok((
        file,
        PetscVecHeader {
            len: n,
            index_bytes: ib,
            scalar,
        },
    ))
}

fn read_rows<T: Scalar>(
    file: &File,
    path: &Path,
    h: &PetscMatHeader,
    rows: Range<usize>,
) -> Result<Csr<T>> {
    check_range(path, &rows, h.rows, "rows")?;
    check_into::<T>(path, h.scalar)?;
    if h.cols > u32::MAX as usize {
        let m = format!("{} columns exceed gpuq's 32-bit column indices", h.cols);
        return Err(invalid(path, m));
    }
    let (ib, sb) = (h.index_bytes, scalar_bytes(h.scalar));
    let [_, cols_at, values_at, _] = h.offsets().ok_or_else(|| overflow(path))?;
    let lens = read_lengths(file, path, ib, h.cols, 0..rows.end)?;
    let before = lens[..rows.start]
        .iter()
        .fold(0, |s: usize, &l| s.saturating_add(l));
    let mut row_ptr = filled(rows.len() + 1, 0usize, path)?;
    for (k, &l) in lens[rows.start..].iter().enumerate() {
        row_ptr[k + 1] = row_ptr[k].saturating_add(l);
    }
    let nnz = row_ptr[rows.len()];
    let total = before.saturating_add(nnz);
    if total > h.nnz || (rows.end == h.rows && total != h.nnz) {
        let m = format!(
            "the lengths of rows 0..{} sum to {total}, but nz = {}",
            rows.end, h.nnz
        );
        return Err(invalid(path, m));
    }
    let row_of = |k: usize| rows.start + row_ptr.partition_point(|&p| p <= k) - 1;
    let mut col_idx = filled(nnz, 0u32, path)?;
    let at = cols_at + (before * ib) as u64;
    read_ints(file, path, at, ib, h.cols as i64, &mut col_idx, |k, j| {
        format!(
            "row {}: column index {j} is outside 0..{}",
            row_of(k),
            h.cols
        )
    })?;
    let unsorted = (0..rows.len())
        .into_par_iter()
        .with_min_len(4096)
        .find_first(|&i| {
            col_idx[row_ptr[i]..row_ptr[i + 1]]
                .windows(2)
                .any(|w| w[0] >= w[1])
        });
    if let Some(i) = unsorted {
        let m = format!(
            "row {}: column indices not strictly increasing",
            rows.start + i
        );
        return Err(invalid(path, m));
    }
    let mut vals = filled(nnz, T::zero(), path)?;
    read_values(
        file,
        path,
        values_at + (before * sb) as u64,
        h.scalar,
        &mut vals,
        |k| format!("the value at ({}, {})", row_of(k), col_idx[k]),
    )?;
    Csr::try_new_allow_nonfinite(rows.len(), h.cols, row_ptr, col_idx, vals)
        .map_err(|e| invalid(path, e.to_string()))
}

fn read_entries<T: Scalar>(
    file: &File,
    path: &Path,
    h: &PetscVecHeader,
    range: Range<usize>,
) -> Result<Vec<T>> {
    check_range(path, &range, h.len, "entries")?;
    check_into::<T>(path, h.scalar)?;
    let mut x = filled(range.len(), T::zero(), path)?;
    let at = (2 * h.index_bytes + range.start * scalar_bytes(h.scalar)) as u64;
    read_values(file, path, at, h.scalar, &mut x, |k| {
        format!("entry {}", range.start + k)
    })?;
    Ok(x)
}

/// The lengths of rows `range` of a file of `ib`-byte PetscInts.
fn read_lengths(
    file: &File,
    path: &Path,
    ib: usize,
    cols: usize,
    range: Range<usize>,
) -> Result<Vec<usize>> {
    let mut lens = filled(range.len(), 0, path)?;
    let at = ((4 + range.start) * ib) as u64;
    read_ints(file, path, at, ib, cols as i64 + 1, &mut lens, |k, l| {
        format!("row {} has length {l}, outside 0..={cols}", range.start + k)
    })?;
    Ok(lens)
}

/// Fills `out` with the PetscInts of `ib` bytes from byte `at`, each in
/// `0..bound`; `bad(k, x)` says what is wrong with entry `k` of `out`.
fn read_ints<E: Send + TryFrom<i64>>(
    file: &File,
    path: &Path,
    at: u64,
    ib: usize,
    bound: i64,
    out: &mut [E],
    bad: impl Fn(usize, i64) -> String + Sync,
) -> Result<()> {
    read_decoded(file, path, at, ib, out, |first, bytes, out| {
        for (k, (b, o)) in bytes.chunks_exact(ib).zip(out).enumerate() {
            let x = int_at(b);
            match E::try_from(x) {
                Ok(e) if x < bound => *o = e,
                _ => return Err(bad(first + k, x)),
            }
        }
        Ok(())
    })
}

/// Fills `out` with the values of `kind` from byte `at`, each required
/// finite in `T`; `what(k)` names entry `k` of `out` in errors.
fn read_values<T: Scalar>(
    file: &File,
    path: &Path,
    at: u64,
    kind: ScalarKind,
    out: &mut [T],
    what: impl Fn(usize) -> String + Sync,
) -> Result<()> {
    let (width, complex) = (
        scalar_bytes(kind),
        matches!(kind, ScalarKind::C32 | ScalarKind::C64),
    );
    let real = <T::Real as RealScalar>::of_f64;
    read_decoded(file, path, at, width, out, |first, bytes, out| {
        for (k, (b, o)) in bytes.chunks_exact(width).zip(out).enumerate() {
            let (re, im) = if complex {
                let (re, im) = b.split_at(width / 2);
                (real_at(re), real_at(im))
            } else {
                (real_at(b), 0.0)
            };
            *o = T::from_parts(real(re), real(im));
            if !o.is_finite_value() {
                let shown = if complex {
                    format!("{re:e}{im:+e}i")
                } else {
                    format!("{re:e}")
                };
                let why = if re.is_finite() && im.is_finite() {
                    format!("overflows {}", T::KIND.name())
                } else {
                    "is not finite".into()
                };
                return Err(format!("{} = {shown} {why}", what(first + k)));
            }
        }
        Ok(())
    })
}

/// Fills `out` with the elements of `width` bytes from byte `at`, by
/// positioned reads of [`READ_TASK`] elements, each decoded by
/// `decode(index of its first element, its bytes, its part of out)` on
/// Rayon's threads. The error is that of the first failing part.
fn read_decoded<E: Send>(
    file: &File,
    path: &Path,
    at: u64,
    width: usize,
    out: &mut [E],
    decode: impl Fn(usize, &[u8], &mut [E]) -> std::result::Result<(), String> + Sync,
) -> Result<()> {
    out.par_chunks_mut(READ_TASK)
        .enumerate()
        .map_init(Vec::new, |buf: &mut Vec<u8>, (c, part)| {
            let first = c * READ_TASK;
            buf.resize(part.len() * width, 0);
            file.read_exact_at(buf, at + (first * width) as u64)
                .map_err(|e| io_error(path, e))?;
            decode(first, buf, part).map_err(|m| invalid(path, m))
        })
        .find_map_first(Result::err)
        .map_or(Ok(()), Err)
}

/// The big-endian integer of 4 or 8 bytes `b`.
fn int_at(b: &[u8]) -> i64 {
    match b.len() {
        4 => i32::from_be_bytes(array(b)) as i64,
        _ => i64::from_be_bytes(array(b)),
    }
}

/// The big-endian `f32` (4 bytes) or `f64` (8 bytes) `b`.
fn real_at(b: &[u8]) -> f64 {
    match b.len() {
        4 => f32::from_be_bytes(array(b)) as f64,
        _ => f64::from_be_bytes(array(b)),
    }
}

/// The `N` bytes of `b` as an array (callers pass exactly `N`).
fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Hands `sink(byte offset, bytes)` the header of `h` at offset 0, then the
/// row lengths, column indices and values of `a`, the rows from `first_row`
/// (`nnz_before` entries above them) of the matrix whose sections start at
/// the offsets `at`.
fn put_rows<T: Scalar>(
    h: &PetscMatHeader,
    at: [u64; 4],
    first_row: usize,
    nnz_before: usize,
    a: &Csr<T>,
    sink: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let (ib, sb) = (h.index_bytes, scalar_bytes(h.scalar));
    let head = [MAT_FILE_CLASSID, h.rows as i64, h.cols as i64, h.nnz as i64];
    let (ptr, cols, vals) = (a.row_ptr(), a.col_idx(), a.values());
    encode(4, ib, 0, |k, o| put_int(head[k], o), sink)?;
    let lens_at = at[0] + (first_row * ib) as u64;
    encode(
        a.nrows(),
        ib,
        lens_at,
        |k, o| put_int((ptr[k + 1] - ptr[k]) as i64, o),
        sink,
    )?;
    let cols_at = at[1] + (nnz_before * ib) as u64;
    encode(
        a.nnz(),
        ib,
        cols_at,
        |k, o| put_int(cols[k] as i64, o),
        sink,
    )?;
    let vals_at = at[2] + (nnz_before * sb) as u64;
    encode(a.nnz(), sb, vals_at, |k, o| put_scalar(vals[k], o), sink)
}

/// Hands `sink` the header of `h` at offset 0, then the values `x` at `at`.
fn put_entries<T: Scalar>(
    h: &PetscVecHeader,
    at: u64,
    x: &[T],
    sink: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let head = [VEC_FILE_CLASSID, h.len as i64];
    encode(2, h.index_bytes, 0, |k, o| put_int(head[k], o), sink)?;
    encode(
        x.len(),
        scalar_bytes(h.scalar),
        at,
        |k, o| put_scalar(x[k], o),
        sink,
    )
}

/// Encodes elements `0..count` of `width` bytes by `put(k, bytes)` on all
/// threads, [`WRITE_BLOCK`] at a time, each block handed to `sink` at its
/// offset from `at`.
fn encode(
    count: usize,
    width: usize,
    at: u64,
    put: impl Fn(usize, &mut [u8]) + Sync,
    sink: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut buf = Vec::new();
    for start in (0..count).step_by(WRITE_BLOCK) {
        buf.resize(WRITE_BLOCK.min(count - start) * width, 0);
        buf.par_chunks_mut(WRITE_TASK * width)
            .enumerate()
            .for_each(|(t, part)| {
                for (k, o) in part.chunks_exact_mut(width).enumerate() {
                    put(start + t * WRITE_TASK + k, o);
                }
            });
        sink(at + (start * width) as u64, &buf)?;
    }
    Ok(())
}

/// `x` as a big-endian integer of `o.len()` (4 or 8) bytes (the counts are
/// checked to fit beforehand).
fn put_int(x: i64, o: &mut [u8]) {
    match o.len() {
        4 => o.copy_from_slice(&(x as i32).to_be_bytes()),
        _ => o.copy_from_slice(&x.to_be_bytes()),
    }
}

/// `v` as a big-endian `f64`, or two of them for a complex `T`.
fn put_scalar<T: Scalar>(v: T, o: &mut [u8]) {
    o[..8].copy_from_slice(&v.re().to_f64_lossless().to_be_bytes());
    if T::IS_COMPLEX {
        o[8..].copy_from_slice(&v.im().to_f64_lossless().to_be_bytes());
    }
}

/// The value type gpuq writes for `T`.
fn written_kind<T: Scalar>() -> ScalarKind {
    if T::IS_COMPLEX {
        ScalarKind::C64
    } else {
        ScalarKind::F64
    }
}

/// Errors unless values of `T` are written as `scalar` and the `counts` fit
/// PetscInts of `index_bytes`.
fn check_writable<T: Scalar>(
    index_bytes: usize,
    scalar: ScalarKind,
    counts: &[(&str, usize)],
) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidArgument(format!("PETSc binary writer: {m}")));
    if scalar != written_kind::<T>() {
        let (t, w) = (T::KIND.name(), written_kind::<T>().name());
        return bad(format!(
            "{t} values are written as {w}, not {}",
            scalar.name()
        ));
    }
    let max = match index_bytes {
        4 => i32::MAX as usize,
        8 => i64::MAX as usize,
        _ => return bad(format!("a PetscInt has 4 or 8 bytes, not {index_bytes}")),
    };
    match counts.iter().find(|&&(_, n)| n > max) {
        None => Ok(()),
        Some((what, n)) => bad(format!(
            "{n} {what} exceed the {}-bit PetscInts{}",
            8 * index_bytes,
            match index_bytes {
                4 =>
                    " of a default PETSc build (write_csr_rows_at with an index_bytes 8 header \
                      writes it for a PETSc built with 64-bit indices)",
                _ => "",
            }
        )),
    }
}

/// Whether `len` elements from `start` fit in `total`.
fn fits(start: usize, len: usize, total: usize) -> bool {
    start.checked_add(len).is_some_and(|end| end <= total)
}

/// Opens `path` for positioned writes (created if need be, not truncated:
/// other writers may be filling it) and sets its length to `len`.
fn open_for_writing(path: &Path, len: u64) -> Result<File> {
    let mut options = OpenOptions::new();
    let file = options.write(true).create(true).truncate(false).open(path);
    let file = file.map_err(|e| io_error(path, e))?;
    file.set_len(len).map_err(|e| io_error(path, e))?;
    Ok(file)
}

fn open(path: &Path) -> Result<(File, u64)> {
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    let len = file.metadata().map_err(|e| io_error(path, e))?.len();
    Ok((file, len))
}

/// The bytes per PetscInt (8 when the first four bytes are zero) and the `K`
/// header integers, the first of which must be `class`.
fn read_header<const K: usize>(
    file: &File,
    path: &Path,
    len: u64,
    class: i64,
) -> Result<(usize, [i64; K])> {
    let mut bytes = vec![0; 8 * K];
    need(path, len, 4, "a PETSc header")?;
    file.read_exact_at(&mut bytes[..4], 0)
        .map_err(|e| io_error(path, e))?;
    let ib = if bytes[..4] == [0; 4] { 8 } else { 4 };
    let what = format!("a header of {K} {}-bit integers", 8 * ib);
    need(path, len, (K * ib) as u64, &what)?;
    file.read_exact_at(&mut bytes[..K * ib], 0)
        .map_err(|e| io_error(path, e))?;
    let ints: [i64; K] = std::array::from_fn(|k| int_at(&bytes[k * ib..(k + 1) * ib]));
    let name = |c| {
        if c == MAT_FILE_CLASSID {
            "matrix"
        } else {
            "vector"
        }
    };
    let other = MAT_FILE_CLASSID + VEC_FILE_CLASSID - class;
    let message = if ints[0] == class {
        return Ok((ib, ints));
    } else if ints[0] == other {
        format!("holds a PETSc {}, not a {}", name(other), name(class))
    } else if u32::from_le_bytes(array(&bytes)) as i64 == class {
        "is little-endian; PETSc binary files are big-endian".into()
    } else {
        format!(
            "is not a PETSc {}: class id {}, not {class}",
            name(class),
            ints[0]
        )
    };
    Err(invalid(path, message))
}

/// The value type of `count` values filling the `rest` bytes after the
/// indices.
fn infer_scalar(path: &Path, rest: u64, count: usize) -> Result<ScalarKind> {
    let count = count as u64;
    match (rest.checked_div(count), rest.checked_rem(count)) {
        (None, _) if rest == 0 => Ok(ScalarKind::F64),
        (Some(4), Some(0)) => Ok(ScalarKind::F32),
        (Some(8), Some(0)) => Ok(ScalarKind::F64),
        (Some(16), Some(0)) => Ok(ScalarKind::C64),
        _ if rest < count.saturating_mul(4) => Err(eof(
            path,
            format!("{rest} bytes are left for {count} values, fewer than 4 each (truncated?)"),
        )),
        _ => Err(invalid(
            path,
            format!(
                "{rest} bytes are left for {count} values, not 4, 8 or 16 each \
             (truncated, or more than one object in the file?)"
            ),
        )),
    }
}

/// Byte offsets, in a matrix file of `ib`-byte PetscInts and `sb`-byte
/// values, of the row lengths, column indices, values and end.
fn offsets(ib: usize, rows: usize, nnz: usize, sb: usize) -> Option<[u64; 4]> {
    let (ib, rows, nnz, sb) = (ib as u64, rows as u64, nnz as u64, sb as u64);
    let cols = (4 * ib).checked_add(rows.checked_mul(ib)?)?;
    let vals = cols.checked_add(nnz.checked_mul(ib)?)?;
    Some([4 * ib, cols, vals, vals.checked_add(nnz.checked_mul(sb)?)?])
}

fn scalar_bytes(kind: ScalarKind) -> usize {
    match kind {
        ScalarKind::F32 => 4,
        ScalarKind::F64 | ScalarKind::C32 => 8,
        ScalarKind::C64 => 16,
    }
}

fn count(path: &Path, what: &str, x: i64) -> Result<usize> {
    usize::try_from(x).map_err(|_| invalid(path, format!("negative {what} {x}")))
}

fn check_range(path: &Path, r: &Range<usize>, len: usize, what: &str) -> Result<()> {
    if r.start <= r.end && r.end <= len {
        return Ok(());
    }
    let (p, s, e) = (path.display(), r.start, r.end);
    Err(Error::InvalidArgument(format!(
        "{p}: {what} {s}..{e} are not within 0..{len}"
    )))
}

fn check_into<T: Scalar>(path: &Path, kind: ScalarKind) -> Result<()> {
    if T::IS_COMPLEX || matches!(kind, ScalarKind::F32 | ScalarKind::F64) {
        return Ok(());
    }
    let t = T::KIND.name();
    Err(invalid(
        path,
        format!("the file holds complex values, which cannot be read as {t}"),
    ))
}

/// Errors unless the file's `len` bytes hold the `needed` that `what` take.
fn need(path: &Path, len: u64, needed: u64, what: &str) -> Result<()> {
    if len >= needed {
        return Ok(());
    }
    Err(eof(
        path,
        format!("the file's {len} bytes end inside {what} ({needed} bytes)"),
    ))
}

/// A vector of `len` copies of `value`, checked against the host's memory
/// and filled on all threads (so that the first touch of its pages is
/// shared).
fn filled<E: Copy + Send + Sync>(len: usize, value: E, path: &Path) -> Result<Vec<E>> {
    let what = format!("reading {}", path.display());
    let bytes = len as u128 * std::mem::size_of::<E>() as u128;
    gpuq_core::memory::check_host_memory(&what, bytes)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::HostMemory {
        what,
        needed: u64::try_from(bytes).unwrap_or(u64::MAX),
        available: gpuq_core::memory::host_available_bytes().unwrap_or(0),
    })?;
    v.par_extend((0..len).into_par_iter().map(|_| value));
    Ok(v)
}

fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn invalid(path: &Path, message: String) -> Error {
    io_error(path, io::Error::new(io::ErrorKind::InvalidData, message))
}

fn eof(path: &Path, message: String) -> Error {
    io_error(path, io::Error::new(io::ErrorKind::UnexpectedEof, message))
}

fn overflow(path: &Path) -> Error {
    invalid(
        path,
        "the header's counts overflow a 64-bit file offset".into(),
    )
}
