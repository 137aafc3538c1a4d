//! Jupyter servers from their runtime files.
//!
//! A running Jupyter server writes `jpserver-<pid>.json` (jupyter_server, the
//! server behind JupyterLab and Notebook 7) or `nbserver-<pid>.json` (the
//! classic Notebook ≤ 6) into its user's runtime directory: its url, token,
//! pid and root directory. [`parse_server_file`] reads one such file's text;
//! [`read`] lists a directory and parses every server file in it;
//! [`candidate_dirs`] says which directories to look in, from the
//! environment, the config and, for a root daemon that is allowed to, every
//! user's home.
//!
//! **The files are untrusted.** Whoever can write a runtime directory
//! chooses what headroom finds there: a symbolic link to `/dev/zero`, a FIFO
//! that no one writes, a file of gigabytes, a hundred thousand entries.
//! [`read_untrusted`] opens without following a link and without blocking
//! (`O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`), asks the open file what it is
//! (`fstat`), refuses anything but a regular file, reads at most
//! [`MAX_FILE`] bytes, and takes the owner from that same `fstat`: a file is
//! attributed to whoever owns the file actually read, wherever the path to
//! it led (a user's runtime directory may be a link into another's, which
//! makes the other's files that other user's, nothing more). [`read`] reads
//! at most [`MAX_FILES_PER_DIR`] server files of a directory and looks at
//! no more than [`MAX_ENTRIES`] entries.
//!
//! Where Jupyter itself looks (`jupyter_core.paths.jupyter_runtime_dir`):
//! `$JUPYTER_RUNTIME_DIR`, else `$JUPYTER_DATA_DIR/runtime`, else the data
//! directory of the platform: `~/Library/Jupyter` on macOS,
//! `$XDG_DATA_HOME/jupyter` or `~/.local/share/jupyter` elsewhere. headroom
//! reads each of those that exists rather than picking one by OS: a
//! directory that is not there is skipped without a word, and the user's own
//! runtime files are all it can find there.

use std::collections::HashSet;

use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The largest runtime file read: jupyter_server writes about 400 bytes.
pub const MAX_FILE: u64 = 64 << 10;

/// Server files read from one directory, at most: far more servers than one
/// user runs, a bound on what a directory full of them costs a lookup.
pub const MAX_FILES_PER_DIR: usize = 64;

/// Entries of one directory looked at, at most (kernels' connection files
/// and the servers' `-open.html` pages share the directory).
pub const MAX_ENTRIES: usize = 1 << 16;

/// One running (or once running: files of a crashed server stay behind)
/// Jupyter server, as its runtime file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The file it was read from.
    pub file: PathBuf,
    /// The server's url, base url included (`http://127.0.0.1:8888/lab-base/`).
    pub url: String,
    /// The token to send as `Authorization: token …`; empty where the server
    /// uses a password or no authentication.
    pub token: String,
    pub pid: Option<u32>,
    /// The directory notebook paths are relative to (`root_dir` of
    /// jupyter_server, `notebook_dir` of the classic Notebook).
    pub root_dir: Option<String>,
    /// Who owns the runtime file: its answers are trusted only for that
    /// user's kernels. `None` where the OS has no owners.
    pub owner_uid: Option<u32>,
}

/// The fields of a runtime file headroom reads; every other field is ignored.
#[derive(Debug, Deserialize)]
struct RawServerFile {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    root_dir: Option<String>,
    #[serde(default)]
    notebook_dir: Option<String>,
    #[serde(default)]
    sock: Option<String>,
}

/// True for the names of server runtime files (`jpserver-1234.json`,
/// `nbserver-1234.json`); not for `jpserver-1234-open.html` or kernels'
/// connection files (`kernel-<id>.json`).
pub fn is_server_file(name: &str) -> bool {
    ["jpserver-", "nbserver-"].iter().any(|prefix| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".json"))
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Parse the text of one server runtime file read from `file`.
pub fn parse_server_file(
    file: &Path,
    text: &str,
    owner_uid: Option<u32>,
) -> Result<ServerInfo, String> {
    let raw: RawServerFile =
        serde_json::from_str(text).map_err(|e| format!("not a Jupyter server file: {e}"))?;
    let token = raw.token.unwrap_or_default();
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token holds characters an HTTP header cannot carry".to_string());
    }
    let url = raw.url.unwrap_or_default();
    if url.is_empty() {
        return Err(match raw.sock.filter(|s| !s.is_empty()) {
            Some(sock) => format!(
                "the server listens on the Unix socket {sock}, which headroom does not query"
            ),
            None => "the file has no \"url\"".to_string(),
        });
    }
    Ok(ServerInfo {
        file: file.to_path_buf(),
        url,
        token,
        pid: raw.pid,
        root_dir: raw.root_dir.or(raw.notebook_dir),
        owner_uid,
    })
}

/// A problem with one runtime file or directory, naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The file or directory.
    pub path: PathBuf,
    pub message: String,
}

impl FileProblem {
    fn new(path: &Path, message: String) -> Self {
        Self {
            path: path.to_path_buf(),
            message,
        }
    }
}

/// Every server file in `dir`, parsed, and the problems met on the way (one
/// each, naming the file). A directory that does not exist gives neither:
/// most of the candidate directories do not.
pub fn read(dir: &Path) -> (Vec<ServerInfo>, Vec<FileProblem>) {
    let mut servers = Vec::new();
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (servers, problems),
        Err(e) => {
            problems.push(FileProblem::new(
                dir,
                format!("cannot list {}: {e}", dir.display()),
            ));
            return (servers, problems);
        }
    };
    let mut names: Vec<PathBuf> = Vec::new();
    let mut looked_at = 0usize;
    for entry in entries {
        looked_at += 1;
        if looked_at > MAX_ENTRIES {
            problems.push(FileProblem::new(
                dir,
                format!(
                    "{} holds more than {MAX_ENTRIES} entries; only the first were looked at \
                     (remove stale kernel-*.json and jpserver-*.json files)",
                    dir.display()
                ),
            ));
            break;
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_name().to_str().is_some_and(is_server_file) {
            continue;
        }
        if names.len() >= MAX_FILES_PER_DIR {
            problems.push(FileProblem::new(
                dir,
                format!(
                    "{} holds more than {MAX_FILES_PER_DIR} Jupyter server files; the others \
                     were not read (stale ones stay behind when a server crashes: remove them)",
                    dir.display()
                ),
            ));
            break;
        }
        names.push(entry.path());
    }
    names.sort();
    for path in names {
        match read_untrusted(&path) {
            Ok((text, owner)) => match parse_server_file(&path, &text, Some(owner)) {
                Ok(info) => servers.push(info),
                Err(why) => problems.push(FileProblem::new(
                    &path,
                    format!("{}: {why}", path.display()),
                )),
            },
            // Removed by a server shutting down between listing and reading.
            Err(Unreadable::Gone) => {}
            Err(Unreadable::Refused(why)) => problems.push(FileProblem::new(
                &path,
                format!("{}: {why}", path.display()),
            )),
        }
    }
    (servers, problems)
}

/// Why [`read_untrusted`] gave no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// The file is no longer there.
    Gone,
    /// It is not a file headroom reads, or reading it failed: why.
    Refused(String),
}

/// The text of the runtime file at `path` and its owner's uid, if it is a
/// regular file of at most [`MAX_FILE`] bytes reached without following a
/// symbolic link at its last component. Never blocks on a FIFO or device,
/// never reads more than `MAX_FILE + 1` bytes.
pub fn read_untrusted(path: &Path) -> Result<(String, u32), Unreadable> {
    let (bytes, meta) =
        crate::regular_file::read_untrusted(path, MAX_FILE).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Unreadable::Gone,
            io::ErrorKind::FileTooLarge => Unreadable::Refused(format!(
                "larger than {MAX_FILE} bytes, which no Jupyter runtime file is; refused"
            )),
            io::ErrorKind::InvalidInput | io::ErrorKind::IsADirectory => {
                Unreadable::Refused(format!("{e}; refused"))
            }
            _ => Unreadable::Refused(format!("cannot read: {e}")),
        })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Unreadable::Refused("not UTF-8 text; refused".to_string()))?;
    // The owner of the file read (fstat), not of whatever the path names now.
    Ok((text, meta.uid()))
}

/// What [`candidate_dirs`] needs from the environment, read once by the
/// caller so that the choice is a pure function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    pub jupyter_runtime_dir: Option<PathBuf>,
    pub jupyter_data_dir: Option<PathBuf>,
    pub xdg_data_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Env {
    /// This process's environment.
    pub fn current() -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            jupyter_runtime_dir: var("JUPYTER_RUNTIME_DIR"),
            jupyter_data_dir: var("JUPYTER_DATA_DIR"),
            xdg_data_home: var("XDG_DATA_HOME"),
            home: var("HOME"),
        }
    }
}

/// The runtime directories of one user's home, where Jupyter puts them by
/// default (macOS first, then the XDG location).
pub fn home_runtime_dirs(home: &Path) -> [PathBuf; 2] {
    [
        home.join("Library/Jupyter/runtime"),
        home.join(".local/share/jupyter/runtime"),
    ]
}

/// The directories to read, in order, without repeats: the environment's
/// (`$JUPYTER_RUNTIME_DIR`, `$JUPYTER_DATA_DIR/runtime`, the home's), then
/// `extra` (the config's `runtime_dirs`), then, when `other_homes` is given
/// (a root daemon with `other_users = true`), those of every home in it.
pub fn candidate_dirs(env: &Env, extra: &[PathBuf], other_homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    dirs.extend(env.jupyter_runtime_dir.clone());
    dirs.extend(env.jupyter_data_dir.as_ref().map(|d| d.join("runtime")));
    if let Some(home) = &env.home {
        let [mac, xdg_default] = home_runtime_dirs(home);
        dirs.push(mac);
        match &env.xdg_data_home {
            Some(xdg) => dirs.push(xdg.join("jupyter/runtime")),
            None => dirs.push(xdg_default),
        }
    }
    dirs.extend(extra.iter().cloned());
    for home in other_homes {
        dirs.extend(home_runtime_dirs(home));
    }
    let mut seen = HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The home directories under `roots` (`/home`, `/Users`): each
/// subdirectory, sorted. Unreadable roots are skipped: a Linux machine has no
/// `/Users`.
pub fn homes_under(roots: &[&Path]) -> Vec<PathBuf> {
    let mut homes = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        found.sort();
        homes.extend(found);
    }
    homes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by jupyter_server 2.21.1 (`jupyter server --port=0
    /// --ServerApp.token=… --ServerApp.root_dir=…`), token replaced.
    const JPSERVER: &str = r#"{
  "base_url": "/",
  "hostname": "127.0.0.1",
  "password": false,
  "pid": 13350,
  "port": 42425,
  "root_dir": "/tmp/jt/root",
  "secure": false,
  "sock": "",
  "token": "sekrit",
  "url": "http://127.0.0.1:42425/",
  "version": "2.21.1"
}"#;

    /// The fields the classic Notebook (≤ 6) writes, from `server_info()` in
    /// its `notebook/notebookapp.py`: `notebook_dir` instead of `root_dir`.
    const NBSERVER: &str = r#"{"base_url": "/jupyter/", "hostname": "localhost",
        "notebook_dir": "/home/ada", "password": false, "pid": 4242, "port": 8888,
        "secure": false, "sock": "", "token": "abc123",
        "url": "http://localhost:8888/jupyter/"}"#;

    #[test]
    fn server_file_names_are_recognised() {
        assert!(is_server_file("jpserver-13350.json"));
        assert!(is_server_file("nbserver-7.json"));
        assert!(!is_server_file("jpserver-13350-open.html"));
        assert!(!is_server_file("jpserver-.json"));
        assert!(!is_server_file(
            "kernel-e0ba03a1-6bb7-409e-a3a5-0ed5604315ad.json"
        ));
        assert!(!is_server_file("jupyter_cookie_secret"));
    }

    #[test]
    fn a_jupyter_server_file_gives_url_token_pid_and_root() {
        let s = parse_server_file(Path::new("/r/jpserver-13350.json"), JPSERVER, Some(0)).unwrap();
        assert_eq!(s.url, "http://127.0.0.1:42425/");
        assert_eq!(s.token, "sekrit");
        assert_eq!(s.pid, Some(13350));
        assert_eq!(s.root_dir.as_deref(), Some("/tmp/jt/root"));
        assert_eq!(s.owner_uid, Some(0));
    }

    #[test]
    fn a_classic_notebook_file_uses_notebook_dir() {
        let s = parse_server_file(Path::new("nbserver-4242.json"), NBSERVER, None).unwrap();
        assert_eq!(s.url, "http://localhost:8888/jupyter/");
        assert_eq!(s.root_dir.as_deref(), Some("/home/ada"));
    }

    #[test]
    fn garbage_and_socket_servers_are_explained() {
        let e = parse_server_file(Path::new("x"), "{\"url\": ", None).unwrap_err();
        assert!(e.starts_with("not a Jupyter server file"), "{e}");
        let e = parse_server_file(
            Path::new("x"),
            r#"{"url": "", "sock": "/run/j.sock"}"#,
            None,
        )
        .unwrap_err();
        assert!(e.contains("Unix socket /run/j.sock"), "{e}");
        let e = parse_server_file(Path::new("x"), "{}", None).unwrap_err();
        assert!(e.contains("no \"url\""), "{e}");
    }

    #[test]
    fn read_lists_only_server_files_and_names_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jpserver-1.json"), JPSERVER).unwrap();
        std::fs::write(dir.path().join("jpserver-1-open.html"), "<html>").unwrap();
        std::fs::write(dir.path().join("kernel-abc.json"), "{}").unwrap();
        std::fs::write(dir.path().join("nbserver-2.json"), "garbage").unwrap();
        let (servers, problems) = read(dir.path());
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0].file, dir.path().join("jpserver-1.json"));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, dir.path().join("nbserver-2.json"));
        assert!(
            problems[0].message.contains("nbserver-2.json"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_symlink_is_refused_without_reading_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("jpserver-2.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_untrusted(&link).unwrap_err();
        assert!(
            matches!(&e, Unreadable::Refused(why) if why.contains("symbolic link")),
            "{e:?}"
        );
        // Even one to a good file: the owner would be the target's.
        let good = dir.path().join("good.json");
        std::fs::write(&good, JPSERVER).unwrap();
        let link = dir.path().join("jpserver-3.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(matches!(read_untrusted(&link), Err(Unreadable::Refused(_))));
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("jpserver-4.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever opens it: a blocking open would never return.
        let e = read_untrusted(&fifo).unwrap_err();
        assert_eq!(
            e,
            Unreadable::Refused("a FIFO (named pipe), not a regular file; refused".into())
        );
    }

    #[test]
    fn a_directory_and_an_oversized_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("jpserver-5.json");
        std::fs::create_dir(&sub).unwrap();
        let e = read_untrusted(&sub).unwrap_err();
        assert!(
            matches!(&e, Unreadable::Refused(w) if w.starts_with("a directory")),
            "{e:?}"
        );
        let big = dir.path().join("jpserver-6.json");
        std::fs::write(&big, vec![b' '; MAX_FILE as usize + 1]).unwrap();
        let e = read_untrusted(&big).unwrap_err();
        assert!(
            matches!(&e, Unreadable::Refused(w) if w.contains("larger than")),
            "{e:?}"
        );
        let at_cap = dir.path().join("jpserver-7.json");
        std::fs::write(&at_cap, vec![b' '; MAX_FILE as usize]).unwrap();
        assert!(read_untrusted(&at_cap).is_ok());
        assert_eq!(
            read_untrusted(&dir.path().join("jpserver-8.json")),
            Err(Unreadable::Gone)
        );
    }

    #[test]
    fn the_owner_is_the_read_files_owner() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jpserver-9.json");
        std::fs::write(&path, JPSERVER).unwrap();
        let (text, owner) = read_untrusted(&path).unwrap();
        assert_eq!(text, JPSERVER);
        assert_eq!(owner, std::fs::metadata(&path).unwrap().uid());
    }

    #[test]
    fn a_token_that_would_break_a_header_is_refused() {
        let text = r#"{"url": "http://127.0.0.1:1/", "token": "a\r\nX-Evil: 1", "pid": 1}"#;
        let e = parse_server_file(Path::new("x"), text, None).unwrap_err();
        assert!(e.contains("HTTP header"), "{e}");
    }

    #[test]
    fn a_directory_full_of_server_files_is_read_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let n = MAX_FILES_PER_DIR * 4;
        for pid in 0..n {
            std::fs::write(dir.path().join(format!("jpserver-{pid}.json")), JPSERVER).unwrap();
        }
        let (servers, problems) = read(dir.path());
        assert_eq!(servers.len(), MAX_FILES_PER_DIR);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, dir.path());
        assert!(
            problems[0].message.contains(&format!(
                "more than {MAX_FILES_PER_DIR} Jupyter server files"
            )),
            "{problems:?}"
        );
    }

    #[test]
    fn a_missing_directory_is_silently_empty() {
        let (servers, problems) = read(Path::new("/nonexistent/jupyter/runtime"));
        assert!(servers.is_empty() && problems.is_empty());
    }

    #[test]
    fn candidates_follow_jupyters_order_without_repeats() {
        let env = Env {
            jupyter_runtime_dir: Some("/rt".into()),
            jupyter_data_dir: Some("/data".into()),
            xdg_data_home: None,
            home: Some("/home/ada".into()),
        };
        let dirs = candidate_dirs(
            &env,
            &["/srv/rt".into(), "/rt".into()],
            &["/home/bob".into()],
        );
        let want: Vec<PathBuf> = [
            "/rt",
            "/data/runtime",
            "/home/ada/Library/Jupyter/runtime",
            "/home/ada/.local/share/jupyter/runtime",
            "/srv/rt",
            "/home/bob/Library/Jupyter/runtime",
            "/home/bob/.local/share/jupyter/runtime",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(dirs, want);
    }

    #[test]
    fn xdg_data_home_moves_the_linux_default() {
        let env = Env {
            xdg_data_home: Some("/xdg".into()),
            home: Some("/home/ada".into()),
            ..Env::default()
        };
        let dirs = candidate_dirs(&env, &[], &[]);
        assert!(dirs.contains(&PathBuf::from("/xdg/jupyter/runtime")));
        assert!(!dirs.contains(&PathBuf::from("/home/ada/.local/share/jupyter/runtime")));
    }

    #[test]
    fn homes_are_the_directories_under_each_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("bob")).unwrap();
        std::fs::create_dir(root.path().join("ada")).unwrap();
        std::fs::write(root.path().join("not-a-home"), "").unwrap();
        let homes = homes_under(&[root.path(), Path::new("/nonexistent-users")]);
        assert_eq!(
            homes,
            vec![root.path().join("ada"), root.path().join("bob")]
        );
    }
}
