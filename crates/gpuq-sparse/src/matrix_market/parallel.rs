//! Matrix Market data sections parsed piece by piece on all threads: the
//! reader's fast path.
//!
//! The data section (the bytes after the size line) is cut into pieces at
//! line ends, a line belonging to the piece that holds its first byte. Every
//! piece is parsed on its own by [`scan`], one Rayon task each; a file's
//! piece is read by the task that parses it (positioned reads, Unix), so its
//! bytes are parsed while in cache and the file is never held whole in
//! memory. The pieces' entries are joined in file order, each piece copied
//! into its place by its own task, so the result is exactly the serial
//! parser's (duplicates keep their order, so their sums do too). The fast
//! path knows no line numbers: at the first problem in any piece it gives
//! up, and the serial parser reads the text again to report the error with
//! its line.

use super::scan::{self, Entries};
use super::{check_field, store, stored_array_len, ArrayCursor, Lines, MAX_IMPLIED};
use super::{MmFormat, MmHeader, MmSymmetry};
use crate::triplets::csr_of_parts;
use crate::{Coo, Csr, Triplets32};
use gpuq_core::Scalar;
use rayon::prelude::*;

/// Bytes per thread of a file read whole in parallel (64 MiB): smaller
/// files are read by one thread.
const READ_BYTES_PER_THREAD: u64 = 1 << 26;

/// The bytes of the file at `path`. A file of more than
/// [`READ_BYTES_PER_THREAD`] bytes is read by up to all of Rayon's threads,
/// each a range of it through positioned reads (Unix), so that the copies
/// out of the page cache and the faults of the new buffer's pages are
/// shared; one `std::fs::read` otherwise. O(file).
pub(super) fn read_bytes(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    read_bytes_by(path, READ_BYTES_PER_THREAD)
}

/// [`read_bytes`] with `per_thread` bytes per thread.
fn read_bytes_by(path: &std::path::Path, per_thread: u64) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        if len / per_thread >= 2 && rayon::current_num_threads() >= 2 {
            return read_range_by(&file, 0..len, per_thread);
        }
    }
    std::fs::read(path)
}

/// The bytes `range` of `file`, by up to all of Rayon's threads (one per
/// `per_thread` bytes), each a part through positioned reads. Errors when
/// the file ends before the range does. O(range).
#[cfg(unix)]
fn read_range_by(
    file: &std::fs::File,
    range: std::ops::Range<u64>,
    per_thread: u64,
) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len =
        usize::try_from(range.end.saturating_sub(range.start)).map_err(std::io::Error::other)?;
    let threads = (len as u64 / per_thread).clamp(1, rayon::current_num_threads() as u64);
    let mut bytes = vec![0u8; len];
    if len == 0 {
        return Ok(bytes);
    }
    let step = len.div_ceil(threads as usize);
    bytes
        .par_chunks_mut(step)
        .enumerate()
        .try_for_each(|(k, part)| file.read_exact_at(part, range.start + (k * step) as u64))?;
    Ok(bytes)
}

/// Most bytes per piece (1 MiB: a file's piece and what is parsed from it
/// stay in cache).
const PIECE_MAX: usize = 1 << 20;

/// Fewest bytes per piece (64 KiB: a task's overhead stays small).
const PIECE_MIN: usize = 1 << 16;

/// Bytes per piece of a data section of `len` bytes: about four pieces per
/// Rayon thread, within [`PIECE_MIN`] and [`PIECE_MAX`].
pub(super) fn piece_bytes(len: u64) -> usize {
    let per = len / (4 * rayon::current_num_threads() as u64);
    usize::try_from(per).map_or(PIECE_MAX, |p| p.clamp(PIECE_MIN, PIECE_MAX))
}

/// Where a data section's bytes are.
pub(super) enum Source<'a> {
    /// In memory: the text after the size line.
    Text(&'a str),
    /// In a file of `len` bytes whose data section starts at byte
    /// `data_start`: the lines whose first byte lies in `range` (the whole
    /// section, or one reader's part of it).
    #[cfg(unix)]
    File {
        /// The open file.
        file: &'a std::fs::File,
        /// Where the data section starts.
        data_start: u64,
        /// The bytes whose lines are read.
        range: std::ops::Range<u64>,
        /// The file's length.
        len: u64,
    },
}

/// The banner, the size line and the data section of a Matrix Market text,
/// for the fast path.
pub(super) struct Sections<'a> {
    /// The banner.
    pub header: MmHeader,
    /// Rows, columns and (`coordinate`) entries of the size line.
    pub size: [usize; 3],
    /// Bytes of the whole text or file (the bound on dense storage,
    /// [`MAX_IMPLIED`]).
    pub text_len: usize,
    /// The data section.
    pub source: Source<'a>,
    /// Bytes per piece.
    pub piece: usize,
}

/// The banner, the size line and the offset of the data section of `text`,
/// or `None` when they do not parse. O(bytes up to the size line).
fn text_head(text: &str) -> Option<(MmHeader, [usize; 3], usize)> {
    let mut lines = Lines::new(text);
    let header = lines.header().ok()?;
    let (line_no, size) = lines.size_line(header.format).ok()?;
    Some((header, size, after_line(text, line_no)))
}

/// Whether values of `T` can be read from a file of `header` and `size`
/// (the serial parser reports why not). O(1).
pub(super) fn readable<T: Scalar>(header: MmHeader, size: [usize; 3]) -> bool {
    check_field::<T>(header.field).is_ok()
        && (header.symmetry == MmSymmetry::General || size[0] == size[1])
}

/// Bytes of the file first read for the banner and size line (doubled until
/// the size line ends within them).
#[cfg(unix)]
const HEAD_BYTES: usize = 1 << 16;

/// The banner, the size line and the offset where the data section starts
/// of the file `file` of `len` bytes, or `None` when they do not parse (or
/// the file is not UTF-8 there). Errors when the file cannot be read.
/// O(bytes up to the size line).
#[cfg(unix)]
pub(super) fn file_head(
    file: &std::fs::File,
    len: u64,
) -> std::io::Result<Option<(MmHeader, [usize; 3], u64)>> {
    use std::os::unix::fs::FileExt;
    let mut want = HEAD_BYTES;
    loop {
        let take = (want as u64).min(len) as usize;
        let mut bytes = vec![0u8; take];
        file.read_exact_at(&mut bytes, 0)?;
        let whole = take as u64 == len;
        // Up to the last complete line (all of it at the end of the file).
        let upto = if whole {
            take
        } else {
            bytes.iter().rposition(|&b| b == b'\n').map_or(0, |k| k + 1)
        };
        // Up to the first byte that is not UTF-8, if any (reading more
        // cannot help then: the pieces will give up on it).
        let (text, complete) = match std::str::from_utf8(&bytes[..upto]) {
            Ok(text) => (text, whole),
            Err(e) => (
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
                false,
            ),
        };
        if let Some((header, size, start)) = text_head(text) {
            // The size line must end inside what was read (a last line
            // without its newline only at the end of the file).
            if start < text.len() || complete || text.ends_with('\n') {
                return Ok(Some((header, size, start as u64)));
            }
        }
        if whole || text.len() < upto {
            return Ok(None);
        }
        want *= 2;
    }
}

/// Why parsing the pieces stopped.
enum Stop {
    /// A piece gave up (the serial parser will tell why).
    GaveUp,
    /// A piece of the file could not be read.
    #[cfg(unix)]
    Io(std::io::Error),
}

impl<'a> Sections<'a> {
    /// The sections of `text` for values of `T`, or `None` when the banner
    /// or size line does not parse or does not suit `T`. O(bytes up to the
    /// size line).
    pub(super) fn of_text<T: Scalar>(text: &'a str) -> Option<Self> {
        let (header, size, start) = text_head(text)?;
        let data = text.get(start..)?;
        readable::<T>(header, size).then(|| Sections {
            header,
            size,
            text_len: text.len(),
            source: Source::Text(data),
            piece: piece_bytes(data.len() as u64),
        })
    }

    /// The sections of the regular file `file` for values of `T` (its data
    /// section read piece by piece when parsed), or `None` when it is not a
    /// regular file, cannot be read or its banner or size line does not
    /// parse or suit `T`. O(bytes up to the size line).
    #[cfg(unix)]
    pub(super) fn of_file<T: Scalar>(file: &'a std::fs::File) -> Option<Self> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let len = meta.len();
        let (header, size, data_start) = file_head(file, len).ok()??;
        readable::<T>(header, size).then_some(())?;
        Some(Sections {
            header,
            size,
            text_len: usize::try_from(len).ok()?,
            source: Source::File {
                file,
                data_start,
                range: data_start..len,
                len,
            },
            piece: piece_bytes(len - data_start),
        })
    }

    /// Entries the size line declares (`None` when that overflows).
    fn declared(&self) -> Option<usize> {
        match self.header.format {
            MmFormat::Coordinate => Some(self.size[2]),
            MmFormat::Array => stored_array_len(self.size[0], self.size[1], self.header.symmetry),
        }
    }

    /// Every piece parsed by `parse`, in file order, one Rayon task each;
    /// `Ok(None)` when a piece gives up (or a file's piece is not UTF-8),
    /// an error when a file's piece cannot be read. O(section) on all
    /// threads.
    fn map_pieces<R: Send>(
        &self,
        parse: impl Fn(&str) -> Option<R> + Sync + Send,
    ) -> std::io::Result<Option<Vec<R>>> {
        let parsed: Result<Vec<R>, Stop> = match &self.source {
            Source::Text(data) => {
                let pieces = cut(data, self.piece);
                let one = |p: &str| parse(p).ok_or(Stop::GaveUp);
                if pieces.len() == 1 {
                    one(pieces[0]).map(|r| vec![r])
                } else {
                    pieces.into_par_iter().map(one).collect()
                }
            }
            #[cfg(unix)]
            Source::File {
                file,
                data_start,
                range,
                len,
            } => {
                let step = self.piece as u64;
                let count = usize::try_from((range.end - range.start).div_ceil(step))
                    .map_err(std::io::Error::other)?;
                let one = |buf: &mut Vec<u8>, k: usize| {
                    let lo = range.start + k as u64 * step;
                    let lines = (lo..(lo + step).min(range.end), *data_start, *len);
                    let at = read_lines(file, lines, buf).map_err(Stop::Io)?;
                    let text = std::str::from_utf8(&buf[at]).map_err(|_| Stop::GaveUp)?;
                    parse(text).ok_or(Stop::GaveUp)
                };
                if count == 1 {
                    one(&mut Vec::new(), 0).map(|r| vec![r])
                } else {
                    (0..count).into_par_iter().map_init(Vec::new, one).collect()
                }
            }
        };
        match parsed {
            Ok(v) => Ok(Some(v)),
            Err(Stop::GaveUp) => Ok(None),
            #[cfg(unix)]
            Err(Stop::Io(e)) => Err(e),
        }
    }

    /// The triplets of each piece of a `coordinate` data section, in file
    /// order, without the check against the size line (a part of the file
    /// read by one of several readers), or `None` at any problem (or when
    /// the format is `array`). O(section) on all threads.
    fn entries<T: Scalar>(&self) -> std::io::Result<Option<Vec<Entries<T>>>> {
        let (header, [nrows, ncols, _]) = (self.header, self.size);
        if header.format != MmFormat::Coordinate {
            return Ok(None);
        }
        self.map_pieces(|p| scan::coordinate_entries::<T>(p, header, nrows, ncols))
    }

    /// The stored values of an `array` data section in file order, without
    /// the check against the size line (a part of the file read by one of
    /// several readers), or `None` at any problem (or when the format is
    /// `coordinate`). O(section) on all threads.
    pub(super) fn values<T: Scalar>(&self) -> std::io::Result<Option<Vec<T>>> {
        let field = self.header.field;
        if self.header.format != MmFormat::Array {
            return Ok(None);
        }
        let parts = self.map_pieces(|p| scan::array_values::<T>(p, field))?;
        Ok(parts.map(|parts| concat(parts, T::zero())))
    }

    /// The triplets of a `coordinate` data section in file order, one part
    /// per piece, and the number of entry lines read, without the check
    /// against the size line (a part of the file read by one of several
    /// readers), or `None` at any problem (or for an `array` file).
    /// O(section) on all threads.
    #[cfg(unix)]
    pub(super) fn triplet_parts<T: Scalar>(
        &self,
    ) -> std::io::Result<Option<(Vec<Triplets32<T>>, usize)>> {
        Ok(self.entries::<T>()?.map(|parts| {
            let lines = parts.iter().map(|p| p.lines).sum();
            (into_parts(parts).0, lines)
        }))
    }

    /// The pieces' triplets when their entry lines are the number the size
    /// line declares, else `None`. O(section) on all threads.
    fn declared_entries<T: Scalar>(&self) -> Option<Vec<Entries<T>>> {
        let parts = self.entries::<T>().ok()??;
        let read: usize = parts.iter().map(|p| p.lines).sum();
        (Some(read) == self.declared()).then_some(parts)
    }

    /// The values of an `array` file when they are the number the size
    /// line declares, else `None`. O(section) on all threads.
    fn declared_values<T: Scalar>(&self) -> Option<Vec<T>> {
        let values = self.values::<T>().ok()??;
        (Some(values.len()) == self.declared()).then_some(values)
    }

    /// The whole file as triplets (symmetric storage mirrored), exactly as
    /// the serial parser gives them, or `None`. O(text) on all threads,
    /// then one copy of the triplets (an `array` file's positions are
    /// placed by one thread).
    pub(super) fn coo<T: Scalar>(&self) -> Option<Coo<T>> {
        let (nrows, ncols, symmetry) = (self.size[0], self.size[1], self.header.symmetry);
        match self.header.format {
            MmFormat::Coordinate => Some(coo_of(nrows, ncols, self.declared_entries()?)),
            MmFormat::Array => {
                let values = self.declared_values::<T>()?;
                let mut coo = Coo::with_capacity(nrows, ncols, values.len());
                let mut cursor = ArrayCursor::new(nrows, symmetry);
                for v in values {
                    let (i, j) = cursor.next_position();
                    store(&mut coo, symmetry, 0, i, j, v).ok()?;
                }
                Some(coo)
            }
        }
    }

    /// The whole file as a [`Csr`], exactly as the serial parser's triplets
    /// give it through [`Csr::from_coo`], or `None` (a problem, or an error
    /// that the serial path reports: row pointers beyond the bound of
    /// [`MAX_IMPLIED`], a sum of duplicates that overflows). Triplets that
    /// already strictly increase in (row, column), as most files store a
    /// general matrix, go straight into the CSR arrays: O(text + rows) on
    /// all threads; others (symmetric storage, other orders, duplicates) by
    /// blocks of rows ([`Csr::from_triplet_parts`]): O(text + nnz log(row
    /// length) + rows) on all threads.
    pub(super) fn csr<T: Scalar>(&self) -> Option<Csr<T>> {
        let (nrows, ncols) = (self.size[0], self.size[1]);
        let limit = MAX_IMPLIED.max(self.text_len);
        if nrows.checked_add(1).is_none_or(|pointers| pointers > limit) {
            return None;
        }
        let a = match self.header.format {
            MmFormat::Coordinate => {
                let (parts, ordered) = into_parts(self.declared_entries()?);
                csr_of_parts(nrows, ncols, parts, &ordered)
            }
            MmFormat::Array => Csr::from_coo_allow_nonfinite(&self.coo()?).ok()?,
        };
        a.check_finite().ok()?;
        Some(a)
    }

    /// The vector of an `array` file of a general `n x 1` or `1 x n`
    /// matrix: its values in file order; `None` for another file or at any
    /// problem. O(text) on all threads, then one copy of the values.
    pub(super) fn vector<T: Scalar>(&self) -> Option<Vec<T>> {
        let [m, n, _] = self.size;
        let general_vector = self.header.symmetry == MmSymmetry::General && (m == 1 || n == 1);
        if !general_vector || self.header.format != MmFormat::Array {
            return None;
        }
        self.declared_values()
    }
}

/// `data` cut into pieces of about `piece` bytes (at least 1), each ending
/// at a line end (the last at the end of `data`). O(pieces + the lines cut).
fn cut(data: &str, piece: usize) -> Vec<&str> {
    let b = data.as_bytes();
    let mut out = Vec::with_capacity(b.len() / piece.max(1) + 1);
    let mut start = 0;
    while start < b.len() {
        let at = (start + piece.max(1)).min(b.len()) - 1;
        let end = b[at..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |k| at + k + 1);
        // Both ends follow a `\n` (or are the ends of `data`).
        out.push(&data[start..end]);
        start = end;
    }
    out
}

/// Bytes read at a time to complete a piece's last line.
#[cfg(unix)]
const LINE_READ: usize = 4096;

/// Reads into `buf` the lines of a file's data section whose first byte
/// lies in `range`, for `(range, data_start, len)`: the section starts at
/// byte `data_start` of the file of `len` bytes. Returns where the lines
/// lie in `buf` (empty when no line starts in `range`). Errors when the
/// file cannot be read or is shorter than `len`. O(range + the last line).
#[cfg(unix)]
fn read_lines(
    file: &std::fs::File,
    (range, data_start, len): (std::ops::Range<u64>, u64, u64),
    buf: &mut Vec<u8>,
) -> std::io::Result<std::ops::Range<usize>> {
    use std::os::unix::fs::FileExt;
    let size = |n: u64| usize::try_from(n).map_err(std::io::Error::other);
    // From the byte before the range: whether a line starts at its first.
    let from = if range.start > data_start {
        range.start - 1
    } else {
        range.start
    };
    let mut filled = size(range.end - from)?;
    if buf.len() < filled {
        buf.resize(filled, 0);
    }
    file.read_exact_at(&mut buf[..filled], from)?;
    let start = if from < range.start {
        match buf[..filled].iter().position(|&b| b == b'\n') {
            Some(k) => k + 1,
            None => return Ok(0..0),
        }
    } else {
        0
    };
    if start == filled {
        return Ok(0..0);
    }
    // Complete the last line, which may run past the range.
    let mut pos = range.end;
    while pos < len && buf[filled - 1] != b'\n' {
        let take = size((len - pos).min(LINE_READ as u64))?;
        if buf.len() < filled + take {
            buf.resize(filled + take, 0);
        }
        file.read_exact_at(&mut buf[filled..filled + take], pos)?;
        filled = match buf[filled..filled + take].iter().position(|&b| b == b'\n') {
            Some(k) => filled + k + 1,
            None => filled + take,
        };
        pos += take as u64;
    }
    Ok(start..filled)
}

/// `out` cut into consecutive slices of `lens` (which sum to its length),
/// and `fill(k, slice k)` run for each, one Rayon task each. O(max fill)
/// on all threads.
fn fill_slots<U: Send>(out: &mut [U], lens: &[usize], fill: impl Fn(usize, &mut [U]) + Sync) {
    let mut slots = Vec::with_capacity(lens.len());
    let mut rest = out;
    for &len in lens {
        let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
        slots.push(slot);
        rest = tail;
    }
    slots
        .into_par_iter()
        .enumerate()
        .for_each(|(k, slot)| fill(k, slot));
}

/// [`concat`] of the field `field` of every piece, taken out of the pieces.
fn concat_taken<P, U: Copy + Send + Sync>(
    parts: &mut [P],
    field: impl Fn(&mut P) -> &mut Vec<U>,
    zero: U,
) -> Vec<U> {
    concat(
        parts.iter_mut().map(|p| std::mem::take(field(p))).collect(),
        zero,
    )
}

/// The concatenation of `parts`, each copied into its place by its own
/// Rayon task (a single part is returned as it is). `zero` fills the new
/// vector first (for numbers, zeroed pages from the allocator). O(total)
/// on all threads.
fn concat<U: Copy + Send + Sync>(mut parts: Vec<Vec<U>>, zero: U) -> Vec<U> {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let lens: Vec<usize> = parts.iter().map(Vec::len).collect();
    let mut out = vec![zero; lens.iter().sum()];
    fill_slots(&mut out, &lens, |k, slot| slot.copy_from_slice(&parts[k]));
    out
}

/// The triplets of `parts` in order as an `nrows x ncols` [`Coo`], each
/// part copied into its place by its own Rayon task. O(nnz) on all threads.
fn coo_of<T: Scalar>(nrows: usize, ncols: usize, mut parts: Vec<Entries<T>>) -> Coo<T> {
    let lens: Vec<usize> = parts.iter().map(Entries::len).collect();
    let nnz = lens.iter().sum();
    let widen = |index: fn(&Entries<T>) -> &[u32]| {
        let mut out = vec![0usize; nnz];
        fill_slots(&mut out, &lens, |k, slot| {
            for (to, &from) in slot.iter_mut().zip(index(&parts[k])) {
                *to = from as usize;
            }
        });
        out
    };
    let rows = widen(|p| &p.rows);
    let cols = widen(|p| &p.cols);
    let vals = concat_taken(&mut parts, |p| &mut p.vals, T::zero());
    Coo::from_checked(nrows, ncols, rows, cols, vals)
}

/// The `nrows x ncols` [`Csr`] of `parts` when their triplets, taken in
/// order, strictly increase in (row, column) (`ordered[k]`: whether they do
/// within part k; the indices within the shape): already the CSR order, with
/// no duplicates to sum, so the column indices and values are the parts'
/// concatenated and each part writes the row pointers of its rows.
/// `Err(parts)` when they do not. O(nnz + nrows) on all threads.
pub(crate) fn csr_of_ordered<T: Scalar>(
    nrows: usize,
    ncols: usize,
    mut parts: Vec<Triplets32<T>>,
    ordered: &[bool],
) -> std::result::Result<Csr<T>, Vec<Triplets32<T>>> {
    debug_assert_eq!(parts.len(), ordered.len());
    // Ordered within every part and across each part's ends; `ends[k]`:
    // one past the last row of parts 0..=k.
    let mut last: Option<(u32, u32)> = None;
    let mut ends = Vec::with_capacity(parts.len());
    for (p, &in_order) in parts.iter().zip(ordered) {
        if !in_order {
            return Err(parts);
        }
        if let Some(first) = p.len().checked_sub(1) {
            if last.is_some_and(|l| l >= (p.rows[0], p.cols[0])) {
                return Err(parts);
            }
            last = Some((p.rows[first], p.cols[first]));
        }
        ends.push(last.map_or(0, |(i, _)| i as usize + 1));
    }
    let mut offsets = Vec::with_capacity(parts.len());
    let mut nnz = 0;
    for p in &parts {
        offsets.push(nnz);
        nnz += p.len();
    }
    // Part k writes the pointers of rows ends[k - 1]..ends[k]: the number
    // of triplets before each (every earlier part's, and its own of lower
    // rows); the rows after the last triplet's point at the end.
    let mut row_ptr = vec![0usize; nrows + 1];
    let covered = ends.last().copied().unwrap_or(0);
    let (body, tail) = row_ptr.split_at_mut(covered);
    tail.par_iter_mut()
        .with_min_len(1 << 16)
        .for_each(|p| *p = nnz);
    let row_lens: Vec<usize> = (0..ends.len())
        .map(|k| ends[k] - if k == 0 { 0 } else { ends[k - 1] })
        .collect();
    fill_slots(body, &row_lens, |k, slot| {
        let first = ends[k] - slot.len();
        let mut r = first;
        for (at, &i) in parts[k].rows.iter().enumerate() {
            while r <= i as usize {
                slot[r - first] = offsets[k] + at;
                r += 1;
            }
        }
    });
    let col_idx = concat_taken(&mut parts, |p| &mut p.cols, 0);
    let vals = concat_taken(&mut parts, |p| &mut p.vals, T::zero());
    Ok(Csr::from_canonical(nrows, ncols, row_ptr, col_idx, vals))
}

/// The pieces' triplets as [`Triplets32`] parts (moved, not copied) and
/// whether each piece's triplets strictly increase.
fn into_parts<T: Scalar>(pieces: Vec<Entries<T>>) -> (Vec<Triplets32<T>>, Vec<bool>) {
    pieces
        .into_iter()
        .map(|e| {
            let ordered = e.ordered;
            (
                Triplets32 {
                    rows: e.rows,
                    cols: e.cols,
                    vals: e.vals,
                },
                ordered,
            )
        })
        .unzip()
}

/// The byte offset where the line after 1-based line `line_no` starts (the
/// text's length when there is none).
pub(super) fn after_line(text: &str, line_no: usize) -> usize {
    text.bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'\n')
        .nth(line_no.saturating_sub(1))
        .map_or(text.len(), |(k, _)| k + 1)
}

#[cfg(test)]
mod tests {
    use super::super::{parse_coo_serial, parse_csr_serial};
    use super::*;

    /// Runs `f` on a pool of 3 threads.
    fn on_threads<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap()
            .install(f)
    }

    /// `text`'s sections with pieces of about `piece` bytes.
    fn sections<T: Scalar>(text: &str, piece: usize) -> Sections<'_> {
        let mut s = Sections::of_text::<T>(text).expect("a banner and size line");
        s.piece = piece;
        s
    }

    fn both<T: Scalar + std::fmt::Debug>(
        text: &str,
    ) -> (Option<Coo<T>>, gpuq_core::Result<Coo<T>>) {
        on_threads(|| {
            (
                Sections::of_text::<T>(text).and_then(|mut s| {
                    s.piece = 97;
                    s.coo()
                }),
                parse_coo_serial(text),
            )
        })
    }

    fn triplets<T: Scalar>(c: &Coo<T>) -> Vec<(usize, usize, T)> {
        c.triplets().collect()
    }

    /// A text of `n` entries in `format` and `symmetry`, with comments and
    /// blank lines among the data and CRLF line ends on every third line.
    fn text(n: usize, head: &str, array: bool) -> String {
        let mut t = format!("%%MatrixMarket matrix {head}\n% a comment\n");
        if array {
            t += &format!("{n} 1\n");
        } else {
            t += &format!("{n} {n} {n}\n");
        }
        for k in 0..n {
            if k % 17 == 5 {
                t += "% inside the data\n\n";
            }
            let v = (k as f64 * 0.37).sin();
            let end = if k % 3 == 0 { "\r\n" } else { "\n" };
            if array {
                t += &format!("{v:e}{end}");
            } else {
                let (i, j) = (1 + (k * 7) % n, 1 + (k * 3) % n);
                let (i, j) = (i.max(j), i.min(j));
                t += &format!("{i} {j} {v:e}{end}");
            }
        }
        t
    }

    #[test]
    fn pieces_give_the_serial_triplets_in_order() {
        for (head, array) in [
            ("coordinate real general", false),
            ("coordinate real symmetric", false),
            ("array real general", true),
        ] {
            let t = text(5000, head, array);
            let (par, ser) = both::<f64>(&t);
            let (par, ser) = (par.expect(head), ser.unwrap());
            assert_eq!(triplets(&par), triplets(&ser), "{head}");
        }
        // duplicates, pattern and complex hermitian storage
        let mut t = String::from("%%MatrixMarket matrix coordinate complex hermitian\n3 3 3000\n");
        for k in 0..3000 {
            let (i, j) = (1 + k % 3, 1 + (k % 3).min(k / 3 % 3));
            let (i, j) = (i.max(j), i.min(j));
            let im = if i == j { 0.0 } else { 0.5 };
            t += &format!("{i} {j} {}.25 {im}\n", k % 11);
        }
        let (par, ser) = both::<num_complex::Complex64>(&t);
        assert_eq!(triplets(&par.unwrap()), triplets(&ser.unwrap()));
    }

    /// A general matrix of `n` rows in row order, some rows empty, some
    /// split across pieces, with a blank line and a comment.
    fn ordered_text(n: usize) -> String {
        let mut lines = Vec::new();
        for i in (0..n).filter(|i| i % 7 != 3) {
            for j in (0..n).filter(|j| (i + j) % 5 == 0 || i == *j) {
                lines.push(format!("{} {} {}", i + 1, j + 1, (i * n + j) as f64 / 8.0));
            }
        }
        let mut t = format!(
            "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
            lines.len()
        );
        for (k, l) in lines.iter().enumerate() {
            t += l;
            t += if k == 40 { "\n\n% a comment\n" } else { "\n" };
        }
        t
    }

    #[test]
    fn ordered_triplets_go_straight_to_the_serial_csr() {
        for n in [1, 2, 9, 60] {
            let t = ordered_text(n);
            let want = parse_csr_serial::<f64>(&t).unwrap();
            for piece in [1, 7, 64, 1 << 20] {
                let parts = on_threads(|| sections::<f64>(&t, piece).declared_entries::<f64>());
                let (parts, ordered) = into_parts(parts.unwrap());
                let got = csr_of_ordered(n, n, parts, &ordered);
                assert_eq!(got.ok().as_ref(), Some(&want), "n {n}, pieces of {piece}");
            }
        }
        // Trailing empty rows, and no entries at all.
        let t = "%%MatrixMarket matrix coordinate real general\n5 3 2\n1 2 1\n2 1 2\n";
        let want = parse_csr_serial::<f64>(t).unwrap();
        assert_eq!(sections::<f64>(t, 4).csr::<f64>(), Some(want));
        let t = "%%MatrixMarket matrix coordinate real general\n4 4 0\n";
        assert_eq!(
            sections::<f64>(t, 4).csr::<f64>().unwrap().row_ptr(),
            &[0; 5]
        );
    }

    #[test]
    fn unordered_triplets_take_the_conversion_by_blocks() {
        // Rows out of order across pieces, a duplicate within a row.
        let t =
            "%%MatrixMarket matrix coordinate real general\n3 3 4\n2 1 1\n1 1 2\n3 3 3\n3 3 4\n";
        let want = parse_csr_serial::<f64>(t).unwrap();
        for piece in [1, 8, 100] {
            let parts = sections::<f64>(t, piece).declared_entries::<f64>().unwrap();
            let (parts, ordered) = into_parts(parts);
            assert!(csr_of_ordered(3, 3, parts, &ordered).is_err());
            let got = on_threads(|| sections::<f64>(t, piece).csr::<f64>());
            assert_eq!(got.as_ref(), Some(&want));
        }
    }

    #[test]
    fn a_problem_anywhere_leaves_the_error_to_the_serial_parser() {
        let good = text(4000, "coordinate real general", false);
        // a bad token far into the data, one entry too many, one too few
        let bad = good.replacen("\n4000 ", "\n4000x ", 1);
        let extra = format!("{good}1 1 1.0\n");
        let cut = good
            .rsplit_once("\n")
            .unwrap()
            .0
            .rsplit_once('\n')
            .unwrap()
            .0
            .to_string()
            + "\n";
        for t in [bad, extra, cut] {
            let (par, ser) = both::<f64>(&t);
            assert!(par.is_none());
            assert!(
                matches!(ser, Err(gpuq_core::Error::Parse { .. })),
                "{ser:?}"
            );
        }
        // above the diagonal of a symmetric file
        let sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 1.0\n1 2 1.0\n";
        assert!(both::<f64>(sym).0.is_none());
        // a sum of duplicates that overflows: the conversion's error
        let big = "%%MatrixMarket matrix coordinate real general\n1 1 2\n1 1 1e308\n1 1 1e308\n";
        assert!(sections::<f64>(big, 1 << 20).csr::<f64>().is_none());
    }

    /// A temporary file holding `bytes`, removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn with(bytes: &[u8]) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "gpuq-mm-par-{}-{}.mtx",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&p, bytes).unwrap();
            TempFile(p)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn a_file_read_by_pieces_is_the_text_read_whole() {
        let t = text(3000, "coordinate real general", false) + "1 2 3"; // no last newline
        let t = t.replacen("3000 3000 3000", "3000 3000 3001", 1);
        let f = TempFile::with(t.as_bytes());
        let file = std::fs::File::open(&f.0).unwrap();
        let want = triplets(&parse_coo_serial::<f64>(&t).unwrap());
        for piece in [1, 5, 333, 1 << 20] {
            let got = on_threads(|| {
                let mut s = Sections::of_file::<f64>(&file).unwrap();
                s.piece = piece;
                s.coo::<f64>()
            });
            assert_eq!(triplets(&got.unwrap()), want, "pieces of {piece}");
        }
        // Bytes that are not UTF-8 in a comment give up.
        let mut bad = t.clone().into_bytes();
        let at = t.find("% inside").unwrap() + 3;
        bad[at] = 0xff;
        let f = TempFile::with(&bad);
        let file = std::fs::File::open(&f.0).unwrap();
        assert!(Sections::of_file::<f64>(&file)
            .unwrap()
            .coo::<f64>()
            .is_none());
        // So do bytes that are not UTF-8 on the size line.
        let f = TempFile::with(b"%%MatrixMarket matrix array real general\n2 1\xff\n1\n2\n");
        let file = std::fs::File::open(&f.0).unwrap();
        assert!(Sections::of_file::<f64>(&file).is_none());
    }

    #[test]
    fn lines_belong_to_the_piece_holding_their_first_byte() {
        let data = "ab\ncd\n\nefgh\ni";
        let f = TempFile::with(format!("head\n{data}").as_bytes());
        let file = std::fs::File::open(&f.0).unwrap();
        let (start, len) = (5, 5 + data.len() as u64);
        let mut buf = Vec::new();
        let mut read = |lo: u64, hi: u64| {
            let at = read_lines(&file, (start + lo..start + hi, start, len), &mut buf).unwrap();
            String::from_utf8(buf[at].to_vec()).unwrap()
        };
        assert_eq!(read(0, 1), "ab\n");
        assert_eq!(read(1, 3), "");
        assert_eq!(read(3, 4), "cd\n");
        assert_eq!(read(4, 7), "\n");
        assert_eq!(read(7, 8), "efgh\n");
        assert_eq!(read(8, 13), "i");
        assert_eq!(read(0, 13), data);
        assert_eq!(cut(data, 1), vec!["ab\n", "cd\n", "\n", "efgh\n", "i"]);
        assert_eq!(cut(data, 4), vec!["ab\ncd\n", "\nefgh\n", "i"]);
        assert_eq!(cut("", 4), Vec::<&str>::new());
    }

    #[test]
    fn a_file_read_by_ranges_is_the_file() {
        let bytes: Vec<u8> = (0..1_000_003u32).map(|k| (k * 7 + k / 251) as u8).collect();
        let f = TempFile::with(&bytes);
        let got = on_threads(|| read_bytes_by(&f.0, 4096).unwrap());
        assert_eq!(got, bytes);
    }

    /// A random Matrix Market text: any banner, a small size, entries in
    /// random order (half the time sorted by row, then column) and forms
    /// (separators, CRLF, comments, blank lines, signs, exponents, negative
    /// zeros), and with probability 1/3 one flaw that the serial parser
    /// reports, or parses where the fast path gives up. Returns the text and
    /// whether it is flawless.
    fn random_text(seed: u64) -> (String, bool) {
        use rand::{Rng, SeedableRng};
        let r = &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let pick =
            |r: &mut rand_chacha::ChaCha8Rng, of: &[&'static str]| of[r.random_range(0..of.len())];
        let array = r.random_bool(0.3);
        let field = if array {
            pick(r, &["real", "integer", "complex"])
        } else {
            pick(r, &["real", "integer", "complex", "pattern"])
        };
        let symmetry = if field == "complex" {
            pick(r, &["general", "symmetric", "skew-symmetric", "hermitian"])
        } else {
            pick(r, &["general", "symmetric", "skew-symmetric"])
        };
        let n = r.random_range(1..7usize);
        let m = if symmetry == "general" {
            r.random_range(1..7usize)
        } else {
            n
        };
        let number = |r: &mut rand_chacha::ChaCha8Rng| -> String {
            if field == "integer" {
                return r.random_range(-99i64..100).to_string();
            }
            let x = r.random_range(-4.0f64..4.0) * 10f64.powi(r.random_range(-30..30));
            match r.random_range(0..7) {
                0 => format!("{x:e}"),
                1 => format!("{x:?}"),
                2 => format!("{x:.3}"),
                3 => format!("{x:.17e}"),
                4 => "-0".into(),
                5 => r.random_range(-50..50).to_string(),
                _ => format!("{x:E}"),
            }
        };
        let value = |r: &mut rand_chacha::ChaCha8Rng, diagonal: bool| -> Vec<String> {
            match field {
                "pattern" => vec![],
                "complex" if diagonal && symmetry == "hermitian" => vec![number(r), "0".into()],
                "complex" => vec![number(r), number(r)],
                _ => vec![number(r)],
            }
        };
        let mut entries: Vec<Vec<String>> = Vec::new();
        if array {
            let len = stored_array_len(
                m,
                n,
                match symmetry {
                    "general" => MmSymmetry::General,
                    "skew-symmetric" => MmSymmetry::SkewSymmetric,
                    _ => MmSymmetry::Symmetric,
                },
            );
            // A hermitian array's diagonal must be real: every imaginary
            // part is zero here.
            entries.extend((0..len.unwrap()).map(|_| value(r, true)));
        } else {
            let mut at: Vec<(usize, usize)> = (0..r.random_range(0..25))
                .map(|_| (r.random_range(1..=m), r.random_range(1..=n)))
                .filter(|&(i, j)| symmetry != "skew-symmetric" || i != j)
                .map(|(i, j)| match symmetry {
                    "general" => (i, j),
                    _ => (i.max(j), i.min(j)),
                })
                .collect();
            if r.random_bool(0.5) {
                at.sort_unstable();
                at.dedup();
            }
            for (i, j) in at {
                let mut tokens = vec![i.to_string(), j.to_string()];
                tokens.extend(value(r, i == j));
                entries.push(tokens);
            }
        }
        let flaw = if r.random_bool(1.0 / 3.0) {
            r.random_range(0..9)
        } else {
            usize::MAX
        };
        let mut declared = entries.len();
        if !entries.is_empty() {
            let k = r.random_range(0..entries.len());
            let t = r.random_range(0..entries[k].len().max(1));
            let bad = pick(
                r,
                &["x", "1e400", "nan", "+1", "1\x0b", "\u{a0}1", "0", "1.0.0"],
            );
            match flaw {
                0 if !entries[k].is_empty() => entries[k][t] = bad.into(),
                1 => entries[k].push("7".into()),
                2 => declared += 1,
                3 => declared -= 1,
                4 if !array => entries[k].swap(0, 1),
                5 if !array => entries[k][0] = format!("+{}", entries[k][0]),
                _ => {}
            }
        }
        let mut text = format!(
            "%%MatrixMarket matrix {} {field} {symmetry}\n",
            if array { "array" } else { "coordinate" }
        );
        text += pick(r, &["", "% a comment\n", "%\n\n"]);
        text += &if array {
            format!("{m} {n}\n")
        } else {
            format!("{m} {n} {declared}\n")
        };
        for tokens in &entries {
            match r.random_range(0..12) {
                0 => text += "% between entries: é\n",
                1 => text += pick(r, &["\n", "  \n", "\r\n", " \t%\n"]),
                _ => {}
            }
            text += pick(r, &["", " ", "\t"]);
            for (k, t) in tokens.iter().enumerate() {
                if k > 0 {
                    text += pick(r, &[" ", "  ", "\t", " \t", " \x0c"]);
                }
                text += t;
            }
            text += pick(r, &["", " ", "\r"]);
            text += pick(r, &["\n", "\n", "\r\n"]);
        }
        if flaw == 6 {
            text += "%\u{3000}\u{85}\n\u{3000}\n";
        }
        if flaw == 7 && text.ends_with('\n') {
            text.pop();
        }
        (text, flaw >= 7)
    }

    /// The fast path on `text` (in memory, and from a file, in pieces of
    /// about `piece` bytes) gives what the serial parser gives whenever it
    /// does not give up, and never gives up on a flawless text.
    fn fast_matches_serial<T: Scalar + std::fmt::Debug>(text: &str, clean: bool, piece: usize) {
        let serial_coo = parse_coo_serial::<T>(text);
        let serial_csr = parse_csr_serial::<T>(text);
        let f = TempFile::with(text.as_bytes());
        let file = std::fs::File::open(&f.0).unwrap();
        for mut s in [Sections::of_text::<T>(text), Sections::of_file::<T>(&file)] {
            if let Some(s) = s.as_mut() {
                s.piece = piece;
            }
            let show = |x: &dyn std::fmt::Debug| format!("{x:?}");
            let coo = s.as_ref().and_then(|s| s.coo::<T>());
            let csr = s.as_ref().and_then(|s| s.csr::<T>());
            if clean {
                assert!(coo.is_some() && csr.is_some(), "gave up on {text:?}");
            }
            if let Some(coo) = coo {
                assert_eq!(show(&coo), show(serial_coo.as_ref().unwrap()), "{text}");
            }
            if let Some(csr) = csr {
                assert_eq!(show(&csr), show(serial_csr.as_ref().unwrap()), "{text}");
            }
            if let Some(v) = s.as_ref().and_then(|s| s.vector::<T>()) {
                let values: Vec<T> = serial_coo.as_ref().unwrap().values().to_vec();
                assert_eq!(show(&v), show(&values), "{text}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// Random texts, flawless or with one flaw, give the serial
        /// parser's triplets, CSR and vector bit for bit, or give up.
        #[test]
        fn the_fast_path_is_the_serial_parser_or_gives_up(seed in 0u64.., piece in 1usize..48) {
            let (text, clean) = random_text(seed);
            fast_matches_serial::<f64>(&text, clean && !text.contains("complex"), piece);
            fast_matches_serial::<num_complex::Complex64>(&text, clean, piece);
            on_threads(|| fast_matches_serial::<f32>(&text, false, piece));
        }
    }

    #[test]
    fn after_line_finds_the_data_section() {
        let t = "a\nb\r\nc\n";
        assert_eq!(&t[after_line(t, 1)..], "b\r\nc\n");
        assert_eq!(&t[after_line(t, 2)..], "c\n");
        assert_eq!(after_line(t, 5), t.len());
    }
}
