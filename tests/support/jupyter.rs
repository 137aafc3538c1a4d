//! Jupyter runtime files and the lookup's problem lines, shared by both
//! tiers' notebook-lookup tests: the sessions a good server answers with, a
//! `jpserver-N.json` naming a server's pid, url and token, and the lines a
//! lookup reports.

use std::path::{Path, PathBuf};

use headroom::jupyter::{Problem, ProblemLog};

/// What a good server answers `GET /api/sessions` with: a Python kernel
/// `k-good` for `work/train.ipynb` and a Julia kernel `k-eval`.
pub const SESSIONS: &str = r#"[{"id": "s1", "path": "work/train.ipynb", "name": "train.ipynb", "type": "notebook", "kernel": {"id": "k-good", "name": "python3"}}, {"id": "s2", "path": "eval.ipynb", "type": "notebook", "kernel": {"id": "k-eval", "name": "julia-1.10"}}]"#;

/// `jpserver-<n>.json` in `dir` naming `pid` as the server.
pub fn server_file_of(dir: &Path, n: u32, pid: u32, url: &str, token: &str) -> PathBuf {
    let text = format!(
        r#"{{"base_url": "/", "hostname": "127.0.0.1", "password": false, "pid": {pid}, "port": 1, "root_dir": "/tmp", "secure": false, "sock": "", "token": "{token}", "url": "{url}", "version": "2.21.1"}}"#
    );
    let path = dir.join(format!("jpserver-{n}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The log lines a lookup's problems make, each reported once.
pub fn lines_of(problems: Vec<Problem>) -> Vec<String> {
    ProblemLog::default().news(problems)
}
