//! One of several readers' part of a Matrix Market file: what each rank of a
//! distributed run reads of a file that no rank reads whole.
//!
//! The data section (the bytes after the size line) is cut into `parts`
//! equal byte ranges; a line belongs to the part whose range holds its first
//! byte, so the parts are found by every reader alike from the file's length
//! alone, without reading the other parts. A part is read by positioned
//! reads on all of Rayon's threads and parsed by the threads as the whole
//! file would be ([`super::parallel`]), its entries in file order. The checks
//! that need the whole file (the number of entries against the size line)
//! are left to the caller, and like the parallel parser a part gives up at
//! the first problem (`Ok(None)`): the serial parser then reads the file to
//! report the error with its line.

use super::parallel::{file_head, piece_bytes, readable, Sections, Source};
use super::{MmFormat, MmHeader, MAX_IMPLIED};
use crate::Triplets32;
use gpuq_core::{Error, Result, Scalar};
use std::fs::File;
use std::path::Path;

/// What a part of a Matrix Market file holds.
#[derive(Clone, Debug)]
pub enum MmPartData<T> {
    /// A `coordinate` file: the part's triplets in file order (symmetric
    /// storage mirrored, each mirror right after its entry), 0-based, in
    /// pieces of the part (as the threads parsed them), and the number of
    /// entries (lines) read before mirroring.
    Coordinate {
        /// The triplets, in the whole matrix's shape, piece by piece.
        triplets: Vec<Triplets32<T>>,
        /// The part's entry lines.
        entries: usize,
    },
    /// An `array` file: the part's stored values in file order (their
    /// positions follow from the values in the parts before it).
    Array(Vec<T>),
}

/// One part of a Matrix Market file ([`read_part`]).
#[derive(Clone, Debug)]
pub struct MmPart<T> {
    /// The banner's format, field and symmetry.
    pub header: MmHeader,
    /// The size line: rows, columns and (for `coordinate`) entries.
    pub size: [usize; 3],
    /// The part's entries.
    pub data: MmPartData<T>,
}

/// Part `part` of `parts` of the Matrix Market file at `path`, for values of
/// `T`: the entries of the lines whose first byte lies in the part's share of
/// the data section. `Ok(None)` at any problem in the banner, the size line
/// or the part's lines (a bad token, an entry above the diagonal of a
/// symmetric file, a size that implies more dense storage than
/// [`MAX_IMPLIED`] or the file's length allows, text that is not ASCII white
/// space separated): the serial reader ([`super::read_csr`]) then gives the
/// error with its line. Errors only when the file cannot be opened or read.
/// Reads the head of the file and the part, O(file / parts) on all threads.
pub fn read_part<T: Scalar>(
    path: impl AsRef<Path>,
    part: usize,
    parts: usize,
) -> Result<Option<MmPart<T>>> {
    let path = path.as_ref();
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    if part >= parts {
        return Err(Error::InvalidArgument(format!(
            "Matrix Market part {part} of {parts}"
        )));
    }
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let Some((header, size, data_start)) = file_head(&file, len).map_err(io)? else {
        return Ok(None);
    };
    let text_len = usize::try_from(len).unwrap_or(usize::MAX);
    if !readable::<T>(header, size) || size[0].max(size[1]) >= MAX_IMPLIED.max(text_len) {
        return Ok(None);
    }
    let data = len - data_start;
    let cut = |k: usize| data_start + (u128::from(data) * k as u128 / parts as u128) as u64;
    let range = cut(part)..cut(part + 1);
    let sections = Sections {
        header,
        size,
        text_len,
        piece: piece_bytes(range.end - range.start),
        source: Source::File {
            file: &file,
            data_start,
            range,
            len,
        },
    };
    let data = match header.format {
        MmFormat::Coordinate => sections
            .triplet_parts::<T>()
            .map_err(io)?
            .map(|(triplets, entries)| MmPartData::Coordinate { triplets, entries }),
        MmFormat::Array => sections.values::<T>().map_err(io)?.map(MmPartData::Array),
    };
    Ok(data.map(|data| MmPart { header, size, data }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix_market::parse_coo;

    fn file_with(text: &str) -> tempfile_path::TempPath {
        tempfile_path::TempPath::with(text)
    }

    /// A temporary file removed when dropped (std only).
    mod tempfile_path {
        pub struct TempPath(pub std::path::PathBuf);
        impl TempPath {
            pub fn with(text: &str) -> Self {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let p = std::env::temp_dir().join(format!(
                    "gpuq-mm-part-{}-{}.mtx",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::write(&p, text).unwrap();
                TempPath(p)
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    fn coordinate_text(n: usize, symmetric: bool) -> String {
        let mut s = format!(
            "%%MatrixMarket matrix coordinate real {}\n% a comment\n\n",
            if symmetric { "symmetric" } else { "general" }
        );
        let mut lines = Vec::new();
        for i in 0..n {
            lines.push(format!("{} {} {}", i + 1, i + 1, 2.0 + i as f64 / 7.0));
            if i > 0 {
                lines.push(format!("{} {} -1.25e-1", i + 1, i));
            }
            if !symmetric && i + 1 < n {
                lines.push(format!("{} {} 0.5", i + 1, i + 2));
            }
            if i % 5 == 0 {
                lines.push("% between entries".into());
                // A duplicate of the diagonal, summed in file order.
                lines.push(format!("{} {} 1e-3", i + 1, i + 1));
            }
        }
        s += &format!(
            "{n} {n} {}\n",
            lines.iter().filter(|l| !l.starts_with('%')).count()
        );
        for l in lines {
            s += &l;
            s += if l.len() % 3 == 0 { "\r\n" } else { "\n" };
        }
        s
    }

    fn joined(path: &Path, parts: usize) -> (Vec<(usize, usize, f64)>, usize) {
        let mut all = Vec::new();
        let mut entries = 0;
        for k in 0..parts {
            let p = read_part::<f64>(path, k, parts).unwrap().unwrap();
            match p.data {
                MmPartData::Coordinate {
                    triplets,
                    entries: e,
                } => {
                    all.extend(triplets.iter().flat_map(|p| p.iter()));
                    entries += e;
                }
                MmPartData::Array(_) => panic!("a coordinate file"),
            }
        }
        (all, entries)
    }

    #[test]
    fn parts_joined_are_the_whole_files_triplets_for_any_count() {
        for symmetric in [false, true] {
            let text = coordinate_text(300, symmetric);
            let f = file_with(&text);
            let whole: Vec<_> = parse_coo::<f64>(&text).unwrap().triplets().collect();
            let declared = text.lines().find(|l| l.starts_with("300 ")).unwrap();
            for parts in [1, 2, 3, 7, 64, 5000] {
                let (got, entries) = joined(&f.0, parts);
                assert_eq!(got, whole, "{parts} parts, symmetric {symmetric}");
                assert_eq!(declared, format!("300 300 {entries}"));
            }
        }
    }

    #[test]
    fn array_parts_hold_the_values_in_order() {
        let values: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5 - 3.0).collect();
        let mut text = String::from("%%MatrixMarket matrix array real general\n1000 1\n");
        for v in &values {
            text += &format!("{v:e}\n");
        }
        let f = file_with(&text);
        for parts in [1, 2, 9, 2000] {
            let mut got = Vec::new();
            for k in 0..parts {
                match read_part::<f64>(&f.0, k, parts).unwrap().unwrap().data {
                    MmPartData::Array(v) => got.extend(v),
                    MmPartData::Coordinate { .. } => panic!("an array file"),
                }
            }
            assert_eq!(got, values, "{parts} parts");
        }
    }

    #[test]
    fn a_long_comment_block_before_the_size_line_is_read_through() {
        let mut text = String::from("%%MatrixMarket matrix coordinate real general\n");
        for _ in 0..3000 {
            text += "% a long comment line to push the size line past the first read......\n";
        }
        text += "2 2 2\n1 1 1.5\n2 2 2.5";
        let f = file_with(&text);
        let (got, entries) = joined(&f.0, 3);
        assert_eq!(got, vec![(0, 0, 1.5), (1, 1, 2.5)]);
        assert_eq!(entries, 2);
    }

    #[test]
    fn problems_give_up_for_the_serial_reader() {
        let bad_token = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 x\n2 2 1\n";
        let above = "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n";
        let banner = "%%MatrixMarket matrix coordinate real sideways\n2 2 1\n1 1 1\n";
        let complex = "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 2\n";
        for text in [bad_token, above, banner, complex] {
            let f = file_with(text);
            let gave_up = (0..2).any(|k| read_part::<f64>(&f.0, k, 2).unwrap().is_none());
            assert!(gave_up, "{text}");
        }
        assert!(read_part::<f64>("/nonexistent/gpuq.mtx", 0, 1).is_err());
        let f = file_with(bad_token);
        assert!(read_part::<f64>(&f.0, 2, 2).is_err());
    }
}
