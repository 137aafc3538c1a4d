//! `headroom top` in a real terminal: tmux runs it in a detached session of
//! a fixed size, next to a real daemon and a real hog; `tmux capture-pane`
//! reads what it drew and `tmux send-keys` types. Needs tmux (Debian
//! package tmux; `scripts/test.sh` installs it).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::hog::{HEADROOM, Running, Sandbox};
use crate::support::need_tools;

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server named after `tag` running `command` through `sh -c` in a
    /// detached session of `width`×`height`.
    fn start(tag: &str, width: u16, height: u16, command: &str) -> Self {
        need_tools(&[("tmux", "tmux")]);
        let tmux = Self {
            socket: format!("headroom-test-{tag}-{}", std::process::id()),
        };
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            command,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// The pane's text, line by line.
    fn capture(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "top"]);
        assert!(out.status.success(), "tmux capture-pane: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `keys` (tmux key names: `s`, `Enter`, `q`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }

    /// The first capture within `within` for which `done` holds; fails
    /// with `what` and the last capture.
    #[track_caller]
    fn wait_for(&self, what: &str, within: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.capture();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not shown within {within:?}; the pane shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The pids of the process table's rows, top to bottom.
fn table_pids(screen: &str) -> Vec<u32> {
    screen
        .lines()
        .skip_while(|l| !l.contains("FOOTPRINT"))
        .skip(1)
        .map_while(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// `headroom top` on the daemon at `addr`, then (once it exits) its exit
/// status and whether the terminal is back in canonical mode with echo.
fn top_command(addr: std::net::SocketAddr) -> String {
    format!(
        "{HEADROOM} top --address {addr} --interval 300ms; echo \"top exited $?\"; \
         stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo \
         | tr '\\n' ' '; echo; exec sleep 600"
    )
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn top_shows_the_daemons_figures_sorts_on_a_key_and_restores_the_terminal() {
    let sb = Sandbox::new("top");
    let daemon = sb.start(
        &sb.rule("footprint = \"64GiB\"\ndry_run = true\nactions = [{ signal = \"SIGINT\" }]"),
        &[],
    );
    let mut hog = Running::hog(&sb.hog, &["--max", "160MiB"]);
    hog.expect_line("holding");
    let hog_pid = hog.pid();
    let (code, body) = daemon.get("/api/v1/snapshot");
    assert_eq!(code, 200, "{body}");
    let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
    let total = headroom::report::format_bytes(snap["system"]["total"].as_u64().unwrap());

    let tmux = Tmux::start("top", 200, 120, &top_command(daemon.addr));
    let hog_row = |screen: &str| {
        screen.lines().any(|l| {
            l.split_whitespace().next() == Some(&hog_pid.to_string()) && l.ends_with("hog-top")
        })
    };
    let screen = tmux.wait_for("the daemon's memory total and the hog's row", WAIT, |s| {
        s.contains(&format!("available of {total}")) && hog_row(s)
    });
    let title = screen.lines().next().unwrap_or_default();
    assert!(
        title.starts_with(&format!("headroom top · daemon {}", daemon.addr)),
        "{screen}"
    );
    assert!(title.ends_with("sort: footprint ↓"), "{screen}");
    // The hog's rule watches it.
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("hog  watching 1  near 0")),
        "{screen}"
    );

    // A second hog, which the filter below must hide: the table's other
    // rows are whatever else runs on the machine, and may come and go.
    let mut other = Running::hog(&sb.hog, &["--max", "96MiB"]);
    other.expect_line("holding");
    let other_pid = other.pid();

    // s twice: footprint → growth → pid.
    tmux.keys(&["s"]);
    tmux.wait_for("the growth sort", WAIT, |s| s.contains("sort: growth ↓"));
    tmux.keys(&["s"]);
    let screen = tmux.wait_for("the pid sort", WAIT, |s| {
        s.lines().next().is_some_and(|t| t.ends_with("sort: pid ↑"))
            && hog_row(s)
            && table_pids(s).contains(&other_pid)
    });
    let pids = table_pids(&screen);
    assert!(pids.len() > 3, "{screen}");
    assert!(
        pids.windows(2).all(|w| w[0] < w[1]),
        "rows not in pid order after the sort key: {pids:?}\n{screen}"
    );

    // A filter by a word of the first hog's command line leaves its row
    // alone, and says how many it hides (the second hog at least).
    tmux.keys(&["/"]);
    tmux.keys(&["1", "6", "0", "M", "i", "B", "Enter"]);
    // The filter applies as it is typed; Enter ends the editing, and the
    // keys' line comes back with how many rows it hides.
    tmux.wait_for("the filtered table, Enter taken", WAIT, |s| {
        s.contains("filter: 160MiB")
            && table_pids(s) == [hog_pid]
            && !s.contains("Enter keeps it")
            && s.contains("processes not shown")
    });

    // A smaller terminal: drawn again to its size, the keys' line at its
    // bottom.
    let out = tmux.run(&["resize-window", "-t", "top", "-x", "120", "-y", "40"]);
    assert!(out.status.success(), "tmux resize-window: {out:?}");
    let screen = tmux.wait_for("the view redrawn at 120x40", WAIT, |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines.len() >= 40 && lines[39].starts_with("q quit  s sort")
    });
    assert!(screen.contains("NAME / NOTEBOOK"), "{screen}");

    tmux.keys(&["q"]);
    let screen = tmux.wait_for("top's exit", WAIT, |s| s.contains("top exited"));
    assert!(screen.contains("top exited 0"), "{screen}");
    // Out of the alternate screen, in canonical mode with echo again.
    assert!(!screen.contains("headroom top ·"), "{screen}");
    tmux.wait_for("the terminal's modes", WAIT, |s| s.contains("icanon echo"));
    daemon.stop_with("TERM");
}

#[test]
fn top_keeps_the_last_figures_of_a_daemon_that_stops_answering() {
    let sb = Sandbox::new("top-gone");
    let daemon = sb.start("", &[]);
    let mut hog = Running::hog(&sb.hog, &["--max", "96MiB"]);
    hog.expect_line("holding");
    let hog_pid = hog.pid().to_string();
    let addr = daemon.addr;

    let tmux = Tmux::start("top-gone", 200, 120, &top_command(addr));
    tmux.wait_for("the hog's row", WAIT, |s| {
        s.lines()
            .any(|l| l.split_whitespace().next() == Some(hog_pid.as_str()))
    });
    daemon.stop_with("TERM");
    let screen = tmux.wait_for("the silent daemon", WAIT, |s| {
        s.contains(&format!("daemon at {addr} not answering since "))
    });
    assert!(
        screen.contains("showing its last figures; retrying"),
        "{screen}"
    );
    assert!(
        screen
            .lines()
            .any(|l| l.split_whitespace().next() == Some(hog_pid.as_str())),
        "the last figures are gone:\n{screen}"
    );
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("top's exit", WAIT, |s| s.contains("top exited"));
    assert!(screen.contains("top exited 0"), "{screen}");
}

/// Whether `pid` has ended: gone, or a zombie waiting for a parent.
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn top_ends_when_its_terminal_goes_away() {
    // An SSH connection that drops leaves `top` on a hung-up terminal,
    // whose every read returns end-of-file at once: it must end, not spin.
    let sb = Sandbox::new("top-hangup");
    let daemon = sb.start("", &[]);
    let pid_file = sb.dir.path().join("top.pid");
    let command = format!(
        "echo $$ > {}; exec {HEADROOM} top --address {} --interval 300ms",
        pid_file.display(),
        daemon.addr
    );
    let tmux = Tmux::start("top-hangup", 160, 50, &command);
    tmux.wait_for("the first figures", WAIT, |s| s.contains("sort: footprint"));
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("top's pid file")
        .trim()
        .parse()
        .expect("top's pid");
    assert!(!ended(pid), "top ended before its terminal went away");

    drop(tmux);
    let deadline = Instant::now() + WAIT;
    while !ended(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let ended_now = ended(pid);
    if !ended_now {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        ended_now,
        "top (pid {pid}) still runs {WAIT:?} after its terminal went away"
    );
    daemon.stop_with("TERM");
}
