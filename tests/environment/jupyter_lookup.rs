//! The notebook lookup against servers and listeners of other users, as
//! root (listeners run as uids 65533 and 65534 through `setpriv`, written in
//! Python): a stale runtime file whose port another user took, or whose pid
//! another user's process now has, sends that listener nothing at all; a
//! server owned by the file's owner is still asked, and one user's file
//! cannot hide another's server at the same url.
//!
//! Needs root, `setpriv` and `python3`, and fails without them.

use std::io::BufRead as _;
use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use headroom::jupyter::look_up;

use crate::support::jupyter::{SESSIONS, lines_of, server_file_of};
use crate::support::{need_root, need_tools};

/// Fails the test unless it can run processes as other users: root, with
/// util-linux's `setpriv`, and `python3` for the listeners.
fn can_switch_users() {
    need_root();
    need_tools(&[("setpriv", "util-linux"), ("python3", "python3")]);
}

/// A Python listener on 127.0.0.1 that counts connections and bytes and,
/// given a body, answers each request with it as JSON. It prints its port,
/// and on end of input its tally.
const LISTENER: &str = r#"
import select, socket, sys
body = sys.argv[1] if len(sys.argv) > 1 else None
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
conns = nbytes = 0
while True:
    ready, _, _ = select.select([s, sys.stdin], [], [])
    if sys.stdin in ready and not sys.stdin.readline():
        break
    if s in ready:
        c, _ = s.accept()
        conns += 1
        c.settimeout(2)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        nbytes += len(data)
        if body is not None:
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            c.sendall(head.encode() + body.encode())
        c.close()
print("connections=%d bytes=%d" % (conns, nbytes), flush=True)
"#;

/// A child run as `uid` (and its group of the same number) through
/// `setpriv`, killed when dropped.
struct AsUser {
    child: Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl AsUser {
    fn spawn(uid: u32, program: &[&str]) -> Self {
        let mut child = Command::new("setpriv")
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".to_string(),
            ])
            .args(program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        // setpriv runs as root until it switches: wait for the switch.
        let status = format!("/proc/{}/status", child.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&status).unwrap_or_default();
            let euid = text
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
            if euid == Some(uid.to_string()) {
                break;
            }
            assert!(Instant::now() < deadline, "setpriv never became uid {uid}");
            std::thread::sleep(Duration::from_millis(5));
        }
        Self { child, stdout }
    }

    /// A [`LISTENER`] as `uid`, answering with `body` if given; its port.
    fn listener(uid: u32, body: Option<&str>) -> (Self, u16) {
        let mut program = vec!["/usr/bin/python3", "-c", LISTENER];
        program.extend(body);
        let mut me = Self::spawn(uid, &program);
        let mut line = String::new();
        me.stdout.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no port from the listener: {line:?}"));
        (me, port)
    }

    /// Close the listener's input and read its tally: (connections, bytes).
    fn tally(mut self) -> (usize, usize) {
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let numbers: Vec<usize> = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('=')?.1.parse().ok())
            .collect();
        assert_eq!(numbers.len(), 2, "no tally from the listener: {line:?}");
        (numbers[0], numbers[1])
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for AsUser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

#[test]
fn a_port_taken_by_another_user_gets_no_request_at_all() {
    can_switch_users();
    let dir = tempfile::tempdir().unwrap();
    // uid 65533's server is alive (its pid runs as 65533), but its port is
    // now held by uid 65534: a stale file whose port someone took.
    let server = AsUser::spawn(65533, &["sleep", "120"]);
    let (thief, port) = AsUser::listener(65534, None);
    let file = server_file_of(
        dir.path(),
        7,
        server.pid(),
        &format!("http://127.0.0.1:{port}/"),
        "victims-token",
    );
    chown(&file, 65533);
    let (found, problems) = look_up(
        &[dir.path().to_path_buf()],
        Some(65533),
        Duration::from_millis(500),
    );
    assert!(found.is_empty());
    let lines = lines_of(problems);
    assert_eq!(
        lines,
        vec![format!(
            "not sending the token of {} to http://127.0.0.1:{port}/: port {port} is held by \
             uid 65534, not the file's owner uid 65533; its kernels stay unmapped",
            file.display()
        )]
    );
    assert_eq!(
        thief.tally(),
        (0, 0),
        "the other user's listener was connected to"
    );
}

#[test]
fn a_pid_reused_by_another_user_is_a_stale_file() {
    can_switch_users();
    let dir = tempfile::tempdir().unwrap();
    // The file is 65533's; the pid it names and the listener are 65534's.
    let (thief, port) = AsUser::listener(65534, None);
    let file = server_file_of(
        dir.path(),
        8,
        thief.pid(),
        &format!("http://127.0.0.1:{port}/"),
        "victims-token",
    );
    chown(&file, 65533);
    let (_, problems) = look_up(
        &[dir.path().to_path_buf()],
        Some(65533),
        Duration::from_millis(500),
    );
    let lines = lines_of(problems);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains(&format!(
            "the server's pid {} runs as uid 65534, not as the file's owner uid 65533",
            thief.pid()
        )),
        "{lines:#?}"
    );
    assert_eq!(thief.tally(), (0, 0));
}

#[test]
fn another_users_own_server_is_asked_and_not_hidden_by_a_lookalike() {
    can_switch_users();
    let dir = tempfile::tempdir().unwrap();
    // uid 65534 runs a server (the listener is its process, so its pid is
    // the server's) with its own runtime file.
    let (server, port) = AsUser::listener(65534, Some(SESSIONS));
    let url = format!("http://127.0.0.1:{port}/");
    // uid 65533 wrote a file naming the same url, sorted first: before
    // servers were told apart by owner, it was asked in the real one's place.
    let decoy_server = AsUser::spawn(65533, &["sleep", "120"]);
    let decoy = server_file_of(dir.path(), 1, decoy_server.pid(), &url, "decoy");
    chown(&decoy, 65533);
    let real = server_file_of(dir.path(), 2, server.pid(), &url, "t");
    chown(&real, 65534);
    // A lookup for kernels whose owner is unknown asks every server: both
    // files are considered, the lookalike first.
    let (found, problems) = look_up(
        &[dir.path().to_path_buf()],
        None,
        Duration::from_millis(2000),
    );
    let lines = lines_of(problems);
    assert_eq!(found.len(), 2, "{found:#?} {lines:#?}");
    assert_eq!(found["k-good"].notebook, "work/train.ipynb");
    assert_eq!(found["k-good"].owner_uid, Some(65534));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("jpserver-1.json")
            && lines[0].contains("held by uid 65534, not the file's owner uid 65533"),
        "{lines:#?}"
    );
    let (connections, bytes) = server.tally();
    assert_eq!(connections, 1, "asked once, by its own file");
    assert!(bytes > 0);
}
