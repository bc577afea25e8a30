//! Matrix Market reading and writing.
//!
//! Covers the whole exchange format as NIST specifies it for matrices:
//!
//! * formats `coordinate` (sparse triplets) and `array` (dense, column-major);
//! * fields `real`, `double`, `complex`, `integer` and `pattern` (pattern entries read as 1);
//! * symmetries `general`, `symmetric`, `skew-symmetric` and `hermitian`, where only
//!   the lower triangle is stored and the reader mirrors it (`a_ji = a_ij`, `-a_ij`
//!   or `conj(a_ij)`).
//!
//! `nalgebra-sparse`'s reader was not used because it reports errors without line
//! numbers and has no array (dense vector) support; this parser is our own. It is
//! strict: every error is an [`Error::Parse`] naming the 1-based line, and nothing
//! here panics on any input (a property test feeds it arbitrary bytes). Rules that
//! it enforces beyond syntax:
//!
//! * entries of `symmetric`/`hermitian` files lie on or below the diagonal, those of
//!   `skew-symmetric` files strictly below, and `hermitian` diagonals are real;
//! * a `complex` file cannot be read into a real scalar type;
//! * NaN and infinite values are rejected (the hub format [`Csr`] holds finite values);
//! * the number of entries matches the size line exactly;
//! * memory reserved up front is capped by the input's length, so a lying size line
//!   cannot exhaust memory;
//! * dense storage sized by the size line rather than by the entries read (the CSR
//!   row pointers, a vector or the columns of a dense matrix, zero-filled where a
//!   `coordinate` file leaves entries out) holds at most [`MAX_IMPLIED`] elements
//!   or one per byte of the text, whichever is more; a larger size line is an
//!   error, not an out-of-memory abort.
//!
//! Writers emit `general` files with values in Rust's shortest round-trip
//! exponent notation, so write-then-read reproduces every bit.
//!
//! Reading is parallel and exact: the data section is cut into pieces at line
//! ends, parsed by all of Rayon's threads (a file's pieces read by the
//! threads that parse them), and joined in file order, giving what one
//! thread parsing line by line gives; at any problem that line-by-line
//! parser reads the text again and reports the error with its line.
//!
//! Cost: reading is O(file length + nnz log nnz) (the CSR conversion sorts),
//! O(file length + rows) for entries already in CSR order; writing is O(nnz).

use std::io::Write;
use std::path::Path;

use gpuq_core::{Error, RealScalar, Result, Scalar};

use crate::{Coo, Csr};

mod parallel;
#[cfg(unix)]
mod part;
mod scan;
pub(crate) use parallel::csr_of_ordered;
#[cfg(unix)]
pub use part::{read_part, MmPart, MmPartData};

/// Most elements of dense storage (CSR row pointers, a dense vector or matrix)
/// that any text may imply through its size line: 2^24, 128 MiB of `f64`. A
/// text of more bytes may imply one element per byte. Files of real data stay
/// within the bound (more rows than bytes means mostly empty rows; a longer,
/// mostly zero vector can be written as an `array` file); it rejects size lines
/// far beyond the data, such as `2000000000 2000000000 0`, whose row pointers
/// alone would take 16 GB.
pub const MAX_IMPLIED: usize = 1 << 24;

/// How the entries are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmFormat {
    /// Sparse `i j value` triplets with 1-based indices.
    Coordinate,
    /// All entries of a dense matrix, column by column.
    Array,
}

/// The type of the stored values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmField {
    /// One real number per entry (`real` or `double` in the header).
    Real,
    /// Two real numbers (real and imaginary part) per entry.
    Complex,
    /// One integer per entry.
    Integer,
    /// No value: the entry's presence means 1 (coordinate format only).
    Pattern,
}

/// Which part of the matrix the file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmSymmetry {
    /// Every entry is stored.
    General,
    /// `a_ji = a_ij`; the lower triangle with the diagonal is stored.
    Symmetric,
    /// `a_ji = -a_ij`; the strict lower triangle is stored (the diagonal is zero).
    SkewSymmetric,
    /// `a_ji = conj(a_ij)`; the lower triangle with a real diagonal is stored.
    Hermitian,
}

/// The banner line of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmHeader {
    /// Coordinate or array.
    pub format: MmFormat,
    /// Value type.
    pub field: MmField,
    /// Stored part of the matrix.
    pub symmetry: MmSymmetry,
}

/// Parses the banner `%%MatrixMarket matrix <format> <field> <symmetry>` (keywords
/// are case-insensitive). Combinations the format forbids (`array pattern`,
/// `hermitian` on a non-complex field) are errors. O(line length).
pub fn read_header(line: &str) -> Result<MmHeader> {
    let err = |m: String| Error::parse(1, m);
    let mut words = line.split_whitespace();
    let banner = words.next().unwrap_or("");
    if !banner.eq_ignore_ascii_case("%%MatrixMarket") {
        return Err(err(format!(
            "expected the banner `%%MatrixMarket matrix <format> <field> <symmetry>`, found `{}`",
            truncate(line.trim_end())
        )));
    }
    let mut next = |what: &str| {
        words
            .next()
            .map(str::to_ascii_lowercase)
            .ok_or_else(|| err(format!("banner is missing the {what}")))
    };
    let object = next("object (`matrix`)")?;
    if object != "matrix" {
        return Err(err(format!(
            "unsupported object `{object}` (only `matrix` is supported)"
        )));
    }
    let format = match next("format")?.as_str() {
        "coordinate" => MmFormat::Coordinate,
        "array" => MmFormat::Array,
        other => {
            return Err(err(format!(
                "unknown format `{other}` (expected coordinate or array)"
            )))
        }
    };
    let field = match next("field")?.as_str() {
        "real" | "double" => MmField::Real,
        "complex" => MmField::Complex,
        "integer" => MmField::Integer,
        "pattern" => MmField::Pattern,
        other => {
            return Err(err(format!(
                "unknown field `{other}` (expected real, complex, integer or pattern)"
            )))
        }
    };
    let symmetry = match next("symmetry")?.as_str() {
        "general" => MmSymmetry::General,
        "symmetric" => MmSymmetry::Symmetric,
        "skew-symmetric" => MmSymmetry::SkewSymmetric,
        "hermitian" => MmSymmetry::Hermitian,
        other => {
            return Err(err(format!(
            "unknown symmetry `{other}` (expected general, symmetric, skew-symmetric or hermitian)"
        )))
        }
    };
    if let Some(extra) = words.next() {
        return Err(err(format!("unexpected word `{extra}` after the banner")));
    }
    if format == MmFormat::Array && field == MmField::Pattern {
        return Err(err(
            "the `array` format cannot have a `pattern` field".into()
        ));
    }
    if symmetry == MmSymmetry::Hermitian && field != MmField::Complex {
        return Err(err(
            "`hermitian` symmetry requires the `complex` field".into()
        ));
    }
    Ok(MmHeader {
        format,
        field,
        symmetry,
    })
}

/// Parses a Matrix Market text into triplets, expanding symmetric storage into
/// both triangles. Explicit zeros are kept. O(text length) on all of Rayon's
/// threads: the data section is cut into pieces at line ends and each piece
/// parsed on its own, with the same result as one thread line by line (or,
/// at any error, parsed again serially for the error's line).
pub fn parse_coo<T: Scalar>(text: &str) -> Result<Coo<T>> {
    if let Some(coo) = parallel::Sections::of_text::<T>(text).and_then(|s| s.coo()) {
        return Ok(coo);
    }
    parse_coo_serial(text)
}

/// [`parse_coo`] on one thread, line by line: the reference the parallel
/// path reproduces, and the one that reports errors with their line.
fn parse_coo_serial<T: Scalar>(text: &str) -> Result<Coo<T>> {
    let mut lines = Lines::new(text);
    let header = lines.header()?;
    check_field::<T>(header.field)?;
    let (line_no, size) = lines.size_line(header.format)?;
    let (nrows, ncols) = (size[0], size[1]);
    if header.symmetry != MmSymmetry::General && nrows != ncols {
        return Err(Error::parse(
            line_no,
            format!("a {nrows} x {ncols} matrix cannot be stored as symmetric"),
        ));
    }
    let declared = match header.format {
        MmFormat::Coordinate => size[2],
        MmFormat::Array => stored_array_len(nrows, ncols, header.symmetry)
            .ok_or_else(|| Error::parse(line_no, "matrix dimensions overflow"))?,
    };
    // A lying size line must not allocate more than the text can hold.
    let mirrored = if header.symmetry == MmSymmetry::General {
        1
    } else {
        2
    };
    let cap = declared.min(text.len() / 2 + 1).saturating_mul(mirrored);
    let mut coo = Coo::with_capacity(nrows, ncols, cap);
    let mut array_pos = ArrayCursor::new(nrows, header.symmetry);
    let mut read = 0usize;
    while let Some((no, line)) = lines.next_data()? {
        if read == declared {
            return Err(Error::parse(
                no,
                format!("more entries than the {declared} the size line declares"),
            ));
        }
        let mut tokens = line.split_whitespace();
        let (i, j) = match header.format {
            MmFormat::Coordinate => {
                let i = index(no, tokens.next(), nrows, "row")?;
                let j = index(no, tokens.next(), ncols, "column")?;
                (i, j)
            }
            MmFormat::Array => array_pos.next_position(),
        };
        let v: T = value(no, &mut tokens, header.field)?;
        if let Some(extra) = tokens.next() {
            return Err(Error::parse(
                no,
                format!("unexpected token `{}` after the entry", truncate(extra)),
            ));
        }
        store(&mut coo, header.symmetry, no, i, j, v)?;
        read += 1;
    }
    if read < declared {
        return Err(Error::parse(
            lines.last_line + 1,
            format!("file ends after {read} of the {declared} entries the size line declares"),
        ));
    }
    Ok(coo)
}

/// Parses a Matrix Market text into a validated [`Csr`] (duplicates summed,
/// sorted). O(text length + nnz log nnz) on all threads; O(text length + m)
/// when the entries already strictly increase by row, then column (as
/// most files store a general matrix): they go straight into the CSR arrays.
/// Errors as [`parse_coo`], and when the `m + 1` row pointers exceed the
/// bound on dense storage (see [`MAX_IMPLIED`]).
pub fn parse_csr<T: Scalar>(text: &str) -> Result<Csr<T>> {
    if let Some(a) = parallel::Sections::of_text::<T>(text).and_then(|s| s.csr()) {
        return Ok(a);
    }
    parse_csr_serial(text)
}

/// [`parse_csr`] through [`parse_coo_serial`]: the reference, and the one
/// that reports errors with their line. O(text length + nnz log nnz).
fn parse_csr_serial<T: Scalar>(text: &str) -> Result<Csr<T>> {
    let coo = parse_coo_serial(text)?;
    let (m, n) = (coo.nrows(), coo.ncols());
    check_implied(text, m.checked_add(1), || {
        format!("the row pointers of a {m} x {n} matrix")
    })?;
    Csr::from_coo(&coo)
}

/// Parses a vector: an `array` file of shape `n x 1` or `1 x n`, or a `coordinate`
/// file of one of those shapes (missing entries are zero). Errors as
/// [`parse_coo`], and when the length exceeds the bound on dense storage (see
/// [`MAX_IMPLIED`]). O(text length + n) on all threads; an `array` file of a
/// general `n x 1` or `1 x n` matrix goes from the threads' values to the
/// vector without triplets.
pub fn parse_dense_vector<T: Scalar>(text: &str) -> Result<Vec<T>> {
    if let Some(v) = parallel::Sections::of_text::<T>(text).and_then(|s| s.vector()) {
        return Ok(v);
    }
    let coo: Coo<T> = parse_coo(text)?;
    let (m, n) = (coo.nrows(), coo.ncols());
    if m != 1 && n != 1 {
        return Err(Error::parse(
            size_line_number(text),
            format!("expected a vector (n x 1 or 1 x n), found a {m} x {n} matrix"),
        ));
    }
    let len = if m == 0 || n == 0 { 0 } else { m.max(n) };
    check_implied(text, Some(len), || format!("a vector of length {len}"))?;
    // An `array` file stores each position once: its values are kept as
    // they are (a negative zero included), as the fast path keeps them; a
    // `coordinate` file's duplicates are summed.
    let array = read_header(text.lines().next().unwrap_or_default())
        .is_ok_and(|h| h.format == MmFormat::Array);
    let mut v = vec![T::zero(); len];
    for (i, j, x) in coo.triplets() {
        let at = &mut v[i.max(j)];
        *at = if array { x } else { *at + x };
    }
    Ok(v)
}

/// Parses a dense `n x k` matrix into its `k` columns, each of length `n`: an
/// `array` file, or a `coordinate` file whose missing entries are zero (a
/// near-null-space basis, node coordinates). Errors as [`parse_coo`], and
/// when the `n k` values exceed the bound on dense storage (see
/// [`MAX_IMPLIED`]) or cannot be allocated. O(text length + n k).
pub fn parse_dense_columns<T: Scalar>(text: &str) -> Result<Vec<Vec<T>>> {
    let coo: Coo<T> = parse_coo(text)?;
    let (n, k) = (coo.nrows(), coo.ncols());
    check_implied(text, n.checked_mul(k), || {
        format!("a dense {n} x {k} matrix")
    })?;
    let mut cols = Vec::new();
    cols.try_reserve_exact(k)
        .map_err(|_| too_large(text, n, k))?;
    for _ in 0..k {
        let mut col = Vec::new();
        col.try_reserve_exact(n)
            .map_err(|_| too_large(text, n, k))?;
        col.resize(n, T::zero());
        cols.push(col);
    }
    for (i, j, x) in coo.triplets() {
        cols[j][i] += x;
    }
    Ok(cols)
}

/// Checks that `elements` (None when the count overflows) of dense storage,
/// described by `what`, are within the bound that [`MAX_IMPLIED`] sets for
/// `text`; the error names the size line.
fn check_implied(text: &str, elements: Option<usize>, what: impl FnOnce() -> String) -> Result<()> {
    let limit = MAX_IMPLIED.max(text.len());
    match elements {
        Some(count) if count <= limit => Ok(()),
        _ => Err(Error::parse(
            size_line_number(text),
            format!(
                "{} exceeds the {limit} elements that a {}-byte text may imply: \
                 the size line is far beyond the data",
                what(),
                text.len()
            ),
        )),
    }
}

fn too_large(text: &str, n: usize, k: usize) -> Error {
    Error::parse(
        size_line_number(text),
        format!("a dense {n} x {k} matrix does not fit in memory"),
    )
}

/// Reads a dense Matrix Market matrix into its columns (see
/// [`parse_dense_columns`]). Errors name the file and line.
pub fn read_dense_columns<T: Scalar>(path: impl AsRef<Path>) -> Result<Vec<Vec<T>>> {
    let path = path.as_ref();
    read_text(path)
        .and_then(|text| parse_dense_columns(&text))
        .map_err(|e| e.in_file(path))
}

/// Writes the columns `cols` (each of the same length n) as an `array <real|complex>
/// general` file of shape `n x cols.len()`, column by column. Errors when the
/// columns differ in length. O(n k).
pub fn write_dense_columns<T: Scalar, W: Write>(cols: &[Vec<T>], out: W) -> Result<()> {
    let n = cols.first().map_or(0, Vec::len);
    if let Some(c) = cols.iter().find(|c| c.len() != n) {
        return Err(Error::shape("dense matrix column", n, c.len()));
    }
    write_array((n, cols.len()), cols.iter().flatten().copied(), out)
}

/// Writes an `array <real|complex> general` file of shape `rows x cols`
/// holding `values` (column by column). O(values).
fn write_array<T: Scalar, W: Write>(
    (rows, cols): (usize, usize),
    values: impl Iterator<Item = T>,
    mut out: W,
) -> Result<()> {
    let io = |source| Error::Io {
        path: "<Matrix Market writer>".into(),
        source,
    };
    writeln!(
        out,
        "%%MatrixMarket matrix array {} general",
        field_word::<T>()
    )
    .map_err(io)?;
    writeln!(out, "% written by gpuq {}", env!("CARGO_PKG_VERSION")).map_err(io)?;
    writeln!(out, "{rows} {cols}").map_err(io)?;
    for v in values {
        write_value(&mut out, v).map_err(io)?;
    }
    out.flush().map_err(io)
}

/// Writes `cols` to the file at `path` (see [`write_dense_columns`]).
pub fn save_dense_columns<T: Scalar>(cols: &[Vec<T>], path: impl AsRef<Path>) -> Result<()> {
    save_with(path.as_ref(), |w| write_dense_columns(cols, w))
}

/// The banner of the Matrix Market file at `path` (its first line alone is
/// read). Errors when the file cannot be read or the banner does not parse.
pub fn read_header_of(path: impl AsRef<Path>) -> Result<MmHeader> {
    use std::io::BufRead;
    let path = path.as_ref();
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut first = Vec::new();
    std::io::BufReader::new(file)
        .read_until(b'\n', &mut first)
        .map_err(io)?;
    let first = String::from_utf8(first)
        .map_err(|_| Error::parse(1, "header line is not valid UTF-8 text").in_file(path))?;
    read_header(&first).map_err(|e| e.in_file(path))
}

/// Reads a Matrix Market file into a [`Csr`] (see [`parse_csr`]). On Unix the
/// data section of a regular file is read piece by piece, each piece by the
/// thread that parses it, never whole; at any problem the file is read
/// whole and parsed again for the error. Errors name the file and line.
pub fn read_csr<T: Scalar>(path: impl AsRef<Path>) -> Result<Csr<T>> {
    let path = path.as_ref();
    if let Some(a) = from_file::<T, _>(path, |s| s.csr()) {
        return Ok(a);
    }
    read_text(path)
        .and_then(|text| parse_csr(&text))
        .map_err(|e| e.in_file(path))
}

/// Reads a Matrix Market vector file (see [`parse_dense_vector`]), an
/// `array` file piece by piece as [`read_csr`] reads.
pub fn read_dense_vector<T: Scalar>(path: impl AsRef<Path>) -> Result<Vec<T>> {
    let path = path.as_ref();
    if let Some(v) = from_file::<T, _>(path, |s| s.vector()) {
        return Ok(v);
    }
    read_text(path)
        .and_then(|text| parse_dense_vector(&text))
        .map_err(|e| e.in_file(path))
}

/// `fast` on the sections of the regular file at `path` for values of `T`
/// (Unix: the data section read by pieces), or `None` when it gives up or
/// the file cannot be read so. O(file) on all threads.
fn from_file<T: Scalar, R>(
    path: &Path,
    fast: impl FnOnce(&parallel::Sections<'_>) -> Option<R>,
) -> Option<R> {
    #[cfg(unix)]
    {
        let file = std::fs::File::open(path).ok()?;
        fast(&parallel::Sections::of_file::<T>(&file)?)
    }
    #[cfg(not(unix))]
    {
        let _ = (path, fast);
        None
    }
}

/// Writes `a` as a `coordinate <real|complex> general` file. O(nnz).
pub fn write_csr<T: Scalar, W: Write>(a: &Csr<T>, mut out: W) -> Result<()> {
    let io = |source| Error::Io {
        path: "<Matrix Market writer>".into(),
        source,
    };
    writeln!(
        out,
        "%%MatrixMarket matrix coordinate {} general",
        field_word::<T>()
    )
    .map_err(io)?;
    writeln!(out, "% written by gpuq {}", env!("CARGO_PKG_VERSION")).map_err(io)?;
    writeln!(out, "{} {} {}", a.nrows(), a.ncols(), a.nnz()).map_err(io)?;
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            write!(out, "{} {} ", i + 1, j + 1).map_err(io)?;
            write_value(&mut out, v).map_err(io)?;
        }
    }
    out.flush().map_err(io)
}

/// Writes `x` as an `array <real|complex> general` file of shape `len x 1`. O(len).
pub fn write_dense_vector<T: Scalar, W: Write>(x: &[T], out: W) -> Result<()> {
    write_array((x.len(), 1), x.iter().copied(), out)
}

/// Writes `a` to the file at `path` (see [`write_csr`]), creating or truncating it.
pub fn save_csr<T: Scalar>(a: &Csr<T>, path: impl AsRef<Path>) -> Result<()> {
    save_with(path.as_ref(), |w| write_csr(a, w))
}

/// Writes `x` to the file at `path` (see [`write_dense_vector`]).
pub fn save_dense_vector<T: Scalar>(x: &[T], path: impl AsRef<Path>) -> Result<()> {
    save_with(path.as_ref(), |w| write_dense_vector(x, w))
}

/// Writes the file at `path` through `write`, atomically
/// ([`gpuq_core::files::write_atomically`]: no truncated file is left behind).
fn save_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> Result<()>,
) -> Result<()> {
    gpuq_core::files::write_atomically(path, write)
}

fn read_text(path: &Path) -> Result<String> {
    let bytes = parallel::read_bytes(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..bad].iter().filter(|&&b| b == b'\n').count();
        Error::parse(
            line,
            format!(
                "{}: not a text file (invalid UTF-8 at byte {bad})",
                path.display()
            ),
        )
    })
}

fn field_word<T: Scalar>() -> &'static str {
    if T::IS_COMPLEX {
        "complex"
    } else {
        "real"
    }
}

fn write_value<T: Scalar, W: Write>(out: &mut W, v: T) -> std::io::Result<()> {
    if T::IS_COMPLEX {
        writeln!(out, "{:e} {:e}", v.re(), v.im())
    } else {
        writeln!(out, "{:e}", v.re())
    }
}

fn check_field<T: Scalar>(field: MmField) -> Result<()> {
    if field == MmField::Complex && !T::IS_COMPLEX {
        return Err(Error::parse(
            1,
            format!(
                "the file holds complex values, which cannot be read as the real type {}",
                T::KIND.name()
            ),
        ));
    }
    Ok(())
}

/// Number of values an array file stores for the given shape and symmetry.
fn stored_array_len(nrows: usize, ncols: usize, symmetry: MmSymmetry) -> Option<usize> {
    match symmetry {
        MmSymmetry::General => nrows.checked_mul(ncols),
        MmSymmetry::Symmetric | MmSymmetry::Hermitian => {
            nrows.checked_mul(nrows.checked_add(1)?).map(|p| p / 2)
        }
        MmSymmetry::SkewSymmetric => nrows.checked_mul(nrows.saturating_sub(1)).map(|p| p / 2),
    }
}

/// Walks the positions of an array file: column-major, restricted to the stored
/// triangle for symmetric storage.
struct ArrayCursor {
    nrows: usize,
    first_row: fn(usize) -> usize,
    i: usize,
    j: usize,
}

impl ArrayCursor {
    fn new(nrows: usize, symmetry: MmSymmetry) -> Self {
        let first_row: fn(usize) -> usize = match symmetry {
            MmSymmetry::General => |_| 0,
            MmSymmetry::Symmetric | MmSymmetry::Hermitian => |j| j,
            MmSymmetry::SkewSymmetric => |j| j + 1,
        };
        ArrayCursor {
            nrows,
            first_row,
            i: first_row(0),
            j: 0,
        }
    }

    /// The next stored position; only called while entries remain, so it never
    /// runs past the last column.
    fn next_position(&mut self) -> (usize, usize) {
        while self.i >= self.nrows {
            self.j += 1;
            self.i = (self.first_row)(self.j);
        }
        let pos = (self.i, self.j);
        self.i += 1;
        pos
    }
}

fn store<T: Scalar>(
    coo: &mut Coo<T>,
    symmetry: MmSymmetry,
    line: usize,
    i: usize,
    j: usize,
    v: T,
) -> Result<()> {
    let below = |strict: bool| {
        if i > j || (!strict && i == j) {
            Ok(())
        } else {
            Err(Error::parse(
                line,
                format!(
                    "entry ({}, {}) lies above the diagonal, but a {} file stores only the {}lower triangle",
                    i + 1,
                    j + 1,
                    symmetry_word(symmetry),
                    if strict { "strict " } else { "" }
                ),
            ))
        }
    };
    let push = |coo: &mut Coo<T>, i, j, v| {
        coo.push(i, j, v)
            .map_err(|e| Error::parse(line, e.to_string()))
    };
    match symmetry {
        MmSymmetry::General => push(coo, i, j, v),
        MmSymmetry::Symmetric => {
            below(false)?;
            push(coo, i, j, v)?;
            if i != j {
                push(coo, j, i, v)?;
            }
            Ok(())
        }
        MmSymmetry::SkewSymmetric => {
            below(true)?;
            push(coo, i, j, v)?;
            push(coo, j, i, -v)
        }
        MmSymmetry::Hermitian => {
            below(false)?;
            if i == j && !v.im().is_zero_value() {
                return Err(Error::parse(
                    line,
                    format!(
                        "diagonal entry ({}, {}) of a hermitian matrix has a nonzero imaginary part",
                        i + 1,
                        j + 1
                    ),
                ));
            }
            push(coo, i, j, v)?;
            if i != j {
                push(coo, j, i, v.conj())?;
            }
            Ok(())
        }
    }
}

fn symmetry_word(s: MmSymmetry) -> &'static str {
    match s {
        MmSymmetry::General => "general",
        MmSymmetry::Symmetric => "symmetric",
        MmSymmetry::SkewSymmetric => "skew-symmetric",
        MmSymmetry::Hermitian => "hermitian",
    }
}

/// Parses a 1-based index token and checks it against `bound`.
fn index(line: usize, token: Option<&str>, bound: usize, what: &str) -> Result<usize> {
    let token = token.ok_or_else(|| Error::parse(line, format!("missing {what} index")))?;
    let k: usize = token.parse().map_err(|_| {
        Error::parse(
            line,
            format!(
                "{what} index `{}` is not a positive integer",
                truncate(token)
            ),
        )
    })?;
    if k == 0 {
        return Err(Error::parse(
            line,
            format!("{what} index 0 (Matrix Market indices start at 1)"),
        ));
    }
    if k > bound {
        return Err(Error::parse(
            line,
            format!("{what} index {k} is out of range (the matrix has {bound})"),
        ));
    }
    Ok(k - 1)
}

/// Parses the value part of an entry according to the field.
fn value<'a, T: Scalar>(
    line: usize,
    tokens: &mut impl Iterator<Item = &'a str>,
    field: MmField,
) -> Result<T> {
    let mut number = |part: &str| -> Result<T::Real> {
        let token = tokens
            .next()
            .ok_or_else(|| Error::parse(line, format!("missing {part}")))?;
        let x = match field {
            MmField::Integer => token.parse::<i64>().map(|k| k as f64).map_err(|_| {
                Error::parse(
                    line,
                    format!("{part} `{}` is not an integer", truncate(token)),
                )
            })?,
            _ => token.parse::<f64>().map_err(|_| {
                Error::parse(
                    line,
                    format!("{part} `{}` is not a number", truncate(token)),
                )
            })?,
        };
        let r = <T::Real as RealScalar>::of_f64(x);
        if !x.is_finite() {
            return Err(Error::parse(
                line,
                format!("{part} `{}` is not finite", truncate(token)),
            ));
        }
        if !r.is_finite_value() {
            return Err(Error::parse(
                line,
                format!(
                    "{part} `{}` overflows the type {}",
                    truncate(token),
                    T::KIND.name()
                ),
            ));
        }
        Ok(r)
    };
    match field {
        MmField::Pattern => Ok(T::one()),
        MmField::Real | MmField::Integer => Ok(T::from_real(number("value")?)),
        MmField::Complex => {
            let re = number("real part")?;
            let im = number("imaginary part")?;
            Ok(T::from_parts(re, im))
        }
    }
}

/// Shortens a token quoted in an error message.
fn truncate(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_string(),
    }
}

/// The 1-based line number of the size line (the first non-comment line after
/// the banner), for errors found after parsing.
fn size_line_number(text: &str) -> usize {
    let mut lines = Lines::new(text);
    match lines.header().and_then(|_| lines.next_data()) {
        Ok(Some((no, _))) => no,
        _ => 1,
    }
}

/// Line iterator that numbers lines and skips comments and blank lines.
struct Lines<'a> {
    inner: std::iter::Enumerate<std::str::Lines<'a>>,
    last_line: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            inner: text.lines().enumerate(),
            last_line: 0,
        }
    }

    fn header(&mut self) -> Result<MmHeader> {
        match self.inner.next() {
            None => Err(Error::parse(0, "empty input: no Matrix Market banner")),
            Some((_, line)) => {
                self.last_line = 1;
                read_header(line)
            }
        }
    }

    /// The next non-blank, non-comment line with its 1-based number.
    fn next_data(&mut self) -> Result<Option<(usize, &'a str)>> {
        for (k, line) in self.inner.by_ref() {
            self.last_line = k + 1;
            let t = line.trim();
            if t.is_empty() || t.starts_with('%') {
                continue;
            }
            return Ok(Some((k + 1, t)));
        }
        Ok(None)
    }

    /// Parses the size line: `m n nnz` for coordinate, `m n` for array.
    fn size_line(&mut self, format: MmFormat) -> Result<(usize, [usize; 3])> {
        let Some((no, line)) = self.next_data()? else {
            return Err(Error::parse(
                self.last_line + 1,
                "file ends before the size line",
            ));
        };
        let want = match format {
            MmFormat::Coordinate => 3,
            MmFormat::Array => 2,
        };
        let mut size = [0usize; 3];
        let mut count = 0;
        for token in line.split_whitespace() {
            if count == want {
                return Err(Error::parse(
                    no,
                    format!(
                        "size line has more than {want} numbers (expected `{}`)",
                        size_words(format)
                    ),
                ));
            }
            size[count] = token.parse().map_err(|_| {
                Error::parse(
                    no,
                    format!(
                        "size `{}` is not a non-negative integer (expected `{}`)",
                        truncate(token),
                        size_words(format)
                    ),
                )
            })?;
            count += 1;
        }
        if count < want {
            return Err(Error::parse(
                no,
                format!(
                    "size line has {count} numbers, expected `{}`",
                    size_words(format)
                ),
            ));
        }
        if size[0] > u32::MAX as usize || size[1] > u32::MAX as usize {
            return Err(Error::parse(
                no,
                format!(
                    "dimensions {} x {} exceed gpuq's 32-bit index limit",
                    size[0], size[1]
                ),
            ));
        }
        Ok((no, size))
    }
}

fn size_words(format: MmFormat) -> &'static str {
    match format {
        MmFormat::Coordinate => "rows columns entries",
        MmFormat::Array => "rows columns",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex64;

    #[test]
    fn banner_keywords_are_case_insensitive() {
        let h = read_header("%%MatrixMarket MATRIX Coordinate Complex Hermitian").unwrap();
        assert_eq!(h.format, MmFormat::Coordinate);
        assert_eq!(h.field, MmField::Complex);
        assert_eq!(h.symmetry, MmSymmetry::Hermitian);
    }

    #[test]
    fn symmetric_array_is_expanded() {
        let text = "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n";
        let a: Csr<f64> = parse_csr(text).unwrap();
        assert_eq!(a.to_dense(), vec![1.0, 2.0, 2.0, 3.0]);
    }

    #[test]
    fn hermitian_mirror_is_conjugated() {
        let text = "%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 2 0\n2 1 1 3\n";
        let a: Csr<Complex64> = parse_csr(text).unwrap();
        assert_eq!(a.to_dense()[1], Complex64::new(1.0, -3.0));
        assert_eq!(a.to_dense()[2], Complex64::new(1.0, 3.0));
    }

    #[test]
    fn skew_array_has_zero_diagonal() {
        let text = "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n2\n3\n";
        let a: Csr<f64> = parse_csr(text).unwrap();
        assert_eq!(
            a.to_dense(),
            vec![0.0, -1.0, -2.0, 1.0, 0.0, -3.0, 2.0, 3.0, 0.0]
        );
    }

    /// The parse error's line and message, or a failure naming what came back.
    fn parse_error<V: std::fmt::Debug>(result: Result<V>) -> (usize, String) {
        match result {
            Err(Error::Parse { line, message, .. }) => (line, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    /// Regression (fuzzing, benches/fuzz.sh): size lines far beyond the data
    /// made the CSR conversion and the dense readers allocate tens of GB, an
    /// out-of-memory abort instead of an error.
    #[test]
    fn size_lines_far_beyond_the_data_are_errors() {
        let square = "%%MatrixMarket matrix coordinate real general\n2000000000 2000000000 0\n";
        let column = "%%MatrixMarket matrix coordinate real general\n% x\n4000000000 1 0\n";
        let row = "%%MatrixMarket matrix coordinate complex general\n1 4294967295 1\n1 7 0 1\n";
        let cases = [
            (parse_error(parse_csr::<f64>(square)), 2),
            (parse_error(parse_dense_columns::<f64>(square)), 2),
            (parse_error(parse_csr::<f64>(column)), 3),
            (parse_error(parse_dense_vector::<f64>(column)), 3),
            (parse_error(parse_dense_columns::<f64>(column)), 3),
            (parse_error(parse_dense_vector::<Complex64>(row)), 2),
            (parse_error(parse_dense_columns::<Complex64>(row)), 2),
        ];
        for ((line, message), want) in cases {
            assert_eq!(line, want, "{message}");
            assert!(message.contains("far beyond the data"), "{message}");
        }
        // The bound itself, and a long vector given by one entry below it.
        let at =
            |n: usize| format!("%%MatrixMarket matrix coordinate real general\n{n} 1 1\n1 1 2\n");
        let (_, message) = parse_error(parse_dense_vector::<f64>(&at(MAX_IMPLIED + 1)));
        assert!(message.contains("far beyond the data"), "{message}");
        let v: Vec<f64> = parse_dense_vector(&at(1_000_000)).unwrap();
        assert_eq!((v.len(), v[0], v[999_999]), (1_000_000, 2.0, 0.0));
        assert_eq!(parse_csr::<f64>(&at(1_000_000)).unwrap().nrows(), 1_000_000);
    }

    #[test]
    fn f32_overflow_is_reported() {
        let text = "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1e300\n";
        let e = parse_csr::<f32>(text).unwrap_err();
        assert!(matches!(e, Error::Parse { line: 3, .. }), "{e}");
    }
}
