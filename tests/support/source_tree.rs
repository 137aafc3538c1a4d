//! The project's own source files, for the tests that read the code
//! (`tests/hermetic/layers.rs`, `tests/hermetic/unsafe_code.rs`).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, appended to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
