//! Opening the files users name (a config, a journal, a trace) so that a
//! path that is not a plain file cannot hang or exhaust headroom.
//!
//! `--config /dev/zero` would otherwise be read until memory runs out, a
//! FIFO would block the open until some writer came along, and a directory
//! gives a confusing error from the read. [`open`] opens without blocking
//! (`O_NONBLOCK`, which regular files ignore), then asks the open file what
//! it is (`fstat`, so a swap of the path in between changes nothing) and
//! refuses anything but a regular file. [`read_capped`] also refuses a file
//! larger than the caller expects any such file to be; [`read_untrusted`]
//! and [`read_untrusted_prefix`] also refuse a link, for files another
//! user controls.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Open `path` for reading if it is a regular file. Not one: an error of
/// kind `IsADirectory` for a directory, `InvalidInput` naming what it is
/// otherwise.
pub fn open(path: &Path) -> io::Result<File> {
    open_checked(path, false).map(|(file, _)| file)
}

/// Read the whole of `path`, a regular file of at most `max` bytes; a
/// larger one is an error of kind `FileTooLarge`.
pub fn read_capped(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (file, _) = open_checked(path, false)?;
    read_at_most(file, max)
}

/// [`read_capped`] for a file another user controls (a Jupyter runtime
/// file): a symbolic link as the last component is refused too (kind
/// `InvalidInput`) rather than followed, and the metadata of the file
/// actually read (`fstat`: its owner, its size) comes back with the bytes.
pub fn read_untrusted(path: &Path, max: u64) -> io::Result<(Vec<u8>, Metadata)> {
    let (file, meta) = open_checked(path, true)?;
    if meta.len() > max {
        return Err(too_large(max));
    }
    Ok((read_at_most(file, max)?, meta))
}

/// The first `max` bytes of a file another user controls, opened as
/// [`read_untrusted`] opens it (no link followed, no blocking, a regular
/// file only), with the metadata of the file read and whether the file
/// goes on past what was read: for files whose head is all that is needed
/// (the headers of a Python package's `METADATA`, the first line that says
/// what kind of report an `.ips` file is).
pub fn read_untrusted_prefix(path: &Path, max: u64) -> io::Result<(Vec<u8>, Metadata, bool)> {
    let (file, meta) = open_checked(path, true)?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    let cut = meta.len() > bytes.len() as u64;
    Ok((bytes, meta, cut))
}

fn open_checked(path: &Path, refuse_links: bool) -> io::Result<(File, Metadata)> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if refuse_links {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW on a link: ELOOP (Linux, macOS).
            if refuse_links && e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a symbolic link, not a regular file (links are not followed here)",
                )
            } else {
                e
            }
        })?;
    // fstat of the file opened, not of the path: what is read is what was
    // checked, whatever happens to the path meanwhile.
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok((file, meta));
    }
    if kind.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "a directory, not a file",
        ));
    }
    let what = if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file"),
    ))
}

fn read_at_most(file: File, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

fn too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(read_capped(&path, 3).unwrap(), b"abc");
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abcd").unwrap();
        let e = read_capped(&path, 3).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "larger than 3 bytes");
    }

    #[test]
    fn a_prefix_is_read_and_a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abcdef").unwrap();
        let (head, meta, cut) = read_untrusted_prefix(&path, 4).unwrap();
        assert_eq!((head.as_slice(), meta.len(), cut), (&b"abcd"[..], 6, true));
        let (whole, _, cut) = read_untrusted_prefix(&path, 6).unwrap();
        assert_eq!((whole.as_slice(), cut), (&b"abcdef"[..], false));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = read_untrusted_prefix(&link, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = read_untrusted_prefix(Path::new("/dev/zero"), 4).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
    }

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            open(dir.path()).unwrap_err().kind(),
            io::ErrorKind::IsADirectory
        );
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer: a blocking open would never return.
        let e = open(&fifo).unwrap_err();
        assert_eq!(e.to_string(), "a FIFO (named pipe), not a regular file");
    }
}
