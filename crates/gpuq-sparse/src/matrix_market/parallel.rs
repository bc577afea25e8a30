//! Matrix Market data sections parsed by several threads.
//!
//! The text after the size line is cut into pieces at line ends (each piece
//! about an equal share of the bytes, [`PIECES_PER_THREAD`] per Rayon
//! thread), every piece is parsed on its own, and the pieces' entries are
//! joined in file order, so the result is exactly the serial parser's
//! (duplicates keep their order, so their sums do too). The fast path knows
//! no line numbers: at the first problem in any piece (a bad token, an entry
//! above the diagonal of a symmetric file, a count that differs from the
//! size line) it gives up, and the serial parser reads the text again to
//! report the error with its line. Tokens are split at ASCII white space
//! only; other white space sends the text to the serial parser too.

use super::{check_field, index, store, stored_array_len, value, ArrayCursor, Lines, MmHeader};
use super::{MmFormat, MmSymmetry};
use crate::Coo;
use gpuq_core::Scalar;
use rayon::prelude::*;

/// Texts shorter than this (4 MiB) are parsed serially: the threads would
/// cost more than they save.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 22;

/// Bytes per thread of a file read in parallel (64 MiB): smaller files are
/// read by one thread.
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
/// [`READ_BYTES_PER_THREAD`] bytes), each a part through positioned reads.
/// Errors when the file ends before the range does. O(range).
#[cfg(unix)]
pub(super) fn read_range(
    file: &std::fs::File,
    range: std::ops::Range<u64>,
) -> std::io::Result<Vec<u8>> {
    read_range_by(file, range, READ_BYTES_PER_THREAD)
}

/// [`read_range`] with `per_thread` bytes per thread.
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

/// Pieces of the data section per Rayon thread (uneven lines even out).
const PIECES_PER_THREAD: usize = 4;

/// The banner, size line and data section of a text long enough for the
/// parallel path, or `None` (short text, one thread, or a problem the serial
/// parser will report).
pub(super) struct Sections<'a> {
    pub header: MmHeader,
    pub size: [usize; 3],
    pub data: &'a str,
}

impl<'a> Sections<'a> {
    /// Splits `text` for values of `T`. O(bytes up to the size line).
    pub(super) fn of<T: Scalar>(text: &'a str) -> Option<Self> {
        Self::of_at_least::<T>(text, PARALLEL_MIN_BYTES)
    }

    /// [`Sections::of`] for texts of at least `min_bytes`.
    fn of_at_least<T: Scalar>(text: &'a str, min_bytes: usize) -> Option<Self> {
        if text.len() < min_bytes || rayon::current_num_threads() < 2 {
            return None;
        }
        let mut lines = Lines::new(text);
        let header = lines.header().ok()?;
        check_field::<T>(header.field).ok()?;
        let (line_no, size) = lines.size_line(header.format).ok()?;
        if header.symmetry != MmSymmetry::General && size[0] != size[1] {
            return None;
        }
        Some(Sections {
            header,
            size,
            data: &text[after_line(text, line_no)..],
        })
    }

    /// Entries the size line declares (`None` when that overflows).
    fn declared(&self) -> Option<usize> {
        match self.header.format {
            MmFormat::Coordinate => Some(self.size[2]),
            MmFormat::Array => stored_array_len(self.size[0], self.size[1], self.header.symmetry),
        }
    }

    /// The data section's pieces, each ending at a line end.
    fn pieces(&self) -> Vec<&'a str> {
        let parts = PIECES_PER_THREAD * rayon::current_num_threads();
        let (text, bytes) = (self.data, self.data.as_bytes());
        let mut out = Vec::with_capacity(parts);
        let mut start = 0;
        for k in 1..parts {
            let mut end = (text.len() / parts * k).max(start);
            while end < bytes.len() && bytes[end] != b'\n' {
                end += 1;
            }
            end = (end + 1).min(bytes.len());
            if end > start {
                out.push(&text[start..end]);
                start = end;
            }
        }
        if start < text.len() {
            out.push(&text[start..]);
        }
        out
    }

    /// The stored values of an `array` file in file order, or `None`. The
    /// caller places them (column-major, below the diagonal for symmetric
    /// storage). O(text) on all threads.
    pub(super) fn array_values<T: Scalar>(&self) -> Option<Vec<T>> {
        if self.header.format != MmFormat::Array {
            return None;
        }
        let values = self.array_piece_values::<T>()?;
        (Some(values.len()) == self.declared()).then_some(values)
    }

    /// The values of the data section's lines in order, without the check
    /// against the size line (a part of the file read by one of several
    /// readers), or `None` at any problem. O(text) on all threads.
    pub(super) fn array_piece_values<T: Scalar>(&self) -> Option<Vec<T>> {
        let field = self.header.field;
        let pieces: Vec<Vec<T>> = self
            .pieces()
            .par_iter()
            .map(|piece| {
                let mut out = Vec::with_capacity(piece.len() / 8);
                for t in data_lines(piece) {
                    let mut tokens = t.split_ascii_whitespace();
                    out.push(value(0, &mut tokens, field).ok()?);
                    if tokens.next().is_some() {
                        return None;
                    }
                }
                Some(out)
            })
            .collect::<Option<_>>()?;
        let total: usize = pieces.iter().map(Vec::len).sum();
        let mut values = Vec::with_capacity(total);
        for p in pieces {
            values.extend_from_slice(&p);
        }
        Some(values)
    }

    /// The whole file as triplets (symmetric storage mirrored), exactly as
    /// the serial parser gives them, or `None`. O(text) on all threads, then
    /// one copy of the triplets.
    pub(super) fn coo<T: Scalar>(&self) -> Option<Coo<T>> {
        let (nrows, ncols) = (self.size[0], self.size[1]);
        let symmetry = self.header.symmetry;
        let (coo, read) = match self.header.format {
            MmFormat::Array => {
                let values = self.array_values::<T>()?;
                let mut coo = Coo::with_capacity(nrows, ncols, values.len());
                let mut cursor = ArrayCursor::new(nrows, symmetry);
                for v in values {
                    let (i, j) = cursor.next_position();
                    store(&mut coo, symmetry, 0, i, j, v).ok()?;
                }
                return Some(coo);
            }
            MmFormat::Coordinate => self.coordinate_entries::<T>()?,
        };
        (Some(read) == self.declared()).then_some(coo)
    }

    /// The triplets of a `coordinate` data section (symmetric storage
    /// mirrored) in file order and the number of entries read, without the
    /// check against the size line (a part of the file read by one of
    /// several readers), or `None` at any problem. O(text) on all threads,
    /// then one copy of the triplets.
    pub(super) fn coordinate_entries<T: Scalar>(&self) -> Option<(Coo<T>, usize)> {
        let (nrows, ncols) = (self.size[0], self.size[1]);
        let parts = self
            .pieces()
            .par_iter()
            .map(|piece| self.coordinate_piece::<T>(piece))
            .collect::<Option<Vec<_>>>()?;
        let read: usize = parts.iter().map(|p| p.1).sum();
        let coo = Coo::concat(nrows, ncols, parts.into_iter().map(|p| p.0).collect());
        Some((coo, read))
    }

    /// One piece of a `coordinate` file: its triplets and the number of
    /// entries it holds (before mirroring), or `None` at any problem.
    fn coordinate_piece<T: Scalar>(&self, piece: &str) -> Option<(Coo<T>, usize)> {
        let (nrows, ncols) = (self.size[0], self.size[1]);
        let mut coo = Coo::with_capacity(nrows, ncols, piece.len() / 12);
        let mut read = 0;
        for t in data_lines(piece) {
            let mut tokens = t.split_ascii_whitespace();
            let i = index(0, tokens.next(), nrows, "row").ok()?;
            let j = index(0, tokens.next(), ncols, "column").ok()?;
            let v: T = value(0, &mut tokens, self.header.field).ok()?;
            if tokens.next().is_some() {
                return None;
            }
            store(&mut coo, self.header.symmetry, 0, i, j, v).ok()?;
            read += 1;
        }
        Some((coo, read))
    }
}

/// The non-blank, non-comment lines of a piece, trimmed of ASCII white space
/// (the serial parser's Unicode white space costs a decoded character per
/// byte; a file that needs it fails here and goes to the serial parser).
fn data_lines(piece: &str) -> impl Iterator<Item = &str> {
    piece
        .split('\n')
        .map(str::trim_ascii)
        .filter(|t| !t.is_empty() && !t.starts_with('%'))
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
    use super::super::parse_coo_serial;
    use super::*;

    /// Runs `f` on a pool of 3 threads (the parallel path needs two or more).
    fn on_threads<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap()
            .install(f)
    }

    fn both<T: Scalar + std::fmt::Debug>(
        text: &str,
    ) -> (Option<Coo<T>>, gpuq_core::Result<Coo<T>>) {
        on_threads(|| {
            (
                Sections::of_at_least::<T>(text, 0).and_then(|s| s.coo()),
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
    }

    #[test]
    fn a_file_read_by_ranges_is_the_file() {
        let path = std::env::temp_dir().join(format!("gpuq-read-{}.bin", std::process::id()));
        let bytes: Vec<u8> = (0..1_000_003u32).map(|k| (k * 7 + k / 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let got = on_threads(|| read_bytes_by(&path, 4096).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(got, bytes);
    }

    #[test]
    fn after_line_finds_the_data_section() {
        let t = "a\nb\r\nc\n";
        assert_eq!(&t[after_line(t, 1)..], "b\r\nc\n");
        assert_eq!(&t[after_line(t, 2)..], "c\n");
        assert_eq!(after_line(t, 5), t.len());
    }
}
