//! Records read with bounds. A runs.csv, a provenance.json or a
//! runs.parquet is opened only when it is a regular file no larger than
//! its limit: a FIFO would block, a device never end, a sparse file of
//! gigabytes take all memory. The checks are made on the open file, so a
//! file swapped after them is not the one read.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The largest runs.csv, attempts.csv or curves.csv read (the largest
/// committed runs.csv is under 1 MiB).
pub(crate) const MAX_CSV: u64 = 256 << 20;
/// The largest provenance.json or job.json read.
pub(crate) const MAX_JSON: u64 = 4 << 20;
/// The largest runs.parquet or curves.parquet read.
pub(crate) const MAX_PARQUET: u64 = 1 << 30;

/// What a path is, in words, when it is not a regular file (a link where
/// `meta` is a link's own, `symlink_metadata`).
pub(crate) fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file of at most `cap`
/// bytes. The error keeps the kind of the open's failure (NotFound stays
/// NotFound); a FIFO, device or directory is InvalidInput, a larger file
/// FileTooLarge, each with a message naming the limit.
pub(crate) fn open(path: &Path, cap: u64) -> std::io::Result<std::fs::File> {
    // O_NONBLOCK: opening a FIFO without a writer returns at once
    let file = crate::util::sudo::as_invoker(|| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is {}: a record is a regular file",
                path.display(),
                kind(&meta)
            ),
        ));
    }
    if meta.len() > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "{} is {} bytes, over the limit of {cap} bytes for such a record",
                path.display(),
                meta.len()
            ),
        ));
    }
    Ok(file)
}

/// The bytes of `path`, read as [`open`] allows (at most `cap`, even when
/// the file grows while read).
pub(crate) fn bytes(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    open(path, cap)?.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "{} grew past the limit of {cap} bytes while it was read",
                path.display()
            ),
        ));
    }
    Ok(out)
}

/// The text of `path`, read as [`bytes`] allows; text that is not UTF-8
/// is InvalidData.
pub(crate) fn text(path: &Path, cap: u64) -> std::io::Result<String> {
    String::from_utf8(bytes(path, cap)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("repro-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("runs.csv");
        std::fs::write(&file, "run_id\n").unwrap();
        assert_eq!(text(&file, 100).unwrap(), "run_id\n");
        let e = text(&file, 3).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("limit of 3 bytes"), "{e}");
        // a FIFO with no writer: refused at once, never waited on
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = text(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        // a device and a directory
        let e = text(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        assert!(
            text(&dir, 100)
                .unwrap_err()
                .to_string()
                .contains("a directory")
        );
        // a sparse file far over the limit is refused by its size, unread
        let sparse = dir.join("sparse");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        let e = bytes(&sparse, MAX_CSV).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert_eq!(
            text(&dir.join("absent"), 100).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
