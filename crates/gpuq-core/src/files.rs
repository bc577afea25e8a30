//! Output files written safely: into a temporary file beside the target,
//! renamed over it only when complete, so that an interrupted or failed write
//! never leaves a truncated file under the name the user gave; and output
//! paths checked before a long computation rather than after it.

use crate::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The temporary file beside `path` that a write goes to first
/// (`.NAME.gpuq-tmp-PID` in the same directory, so the rename is atomic).
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.gpuq-tmp-{}", std::process::id()))
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes the file at `path` through `write` (given a buffered writer): into
/// a temporary file in the same directory, flushed and renamed over `path`
/// when `write` succeeds, removed when it fails. I/O errors name `path`.
/// O(the bytes written).
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let tmp = temporary_beside(path);
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| io_error(path, e))?;
        let mut w = BufWriter::new(file);
        write(&mut w).map_err(|e| match e {
            Error::Io { source, .. } => io_error(path, source),
            other => other,
        })?;
        w.flush().map_err(|e| io_error(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomically`] of the bytes `bytes`.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |w| w.write_all(bytes).map_err(|e| io_error(path, e)))
}

/// Errors unless a file can be written at `path`: its directory exists and
/// takes a new file (tried with the temporary file a write would use,
/// removed at once), and `path` is not a directory. Call it before a long
/// computation whose result goes to `path`. O(1).
pub fn check_output_path(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(io_error(
            path,
            std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
        ));
    }
    let tmp = temporary_beside(path);
    File::create(&tmp).map_err(|e| io_error(path, e))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuq-files-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = scratch("fail");
        let path = dir.join("out.txt");
        write_bytes_atomically(&path, b"first").unwrap();
        let failed = write_atomically(&path, |w| {
            w.write_all(b"partial").unwrap();
            Err(Error::InvalidArgument("stopped".into()))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_output_paths_are_found_before_writing() {
        let dir = scratch("check");
        assert!(check_output_path(&dir.join("fine.mtx")).is_ok());
        assert!(!dir.join("fine.mtx").exists());
        let e = check_output_path(&dir.join("missing/x.mtx")).unwrap_err();
        assert!(e.to_string().contains("missing/x.mtx"), "{e}");
        assert!(check_output_path(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
