//! `headroom doctor` on this machine, run as the real binary: a header of
//! facts, one line per check in the documented shape, a summary that adds
//! up, and exit status 0 when nothing needed fails.

use std::process::Command;

#[test]
fn doctor_reports_every_check_on_one_line_and_exits_0_here() {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "exit {:?}\n{text}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let (header, rest) = text.split_once("\n\n").expect("a header, then the checks");
    let mut header = header.lines();
    assert_eq!(header.next(), Some("headroom doctor"));
    let facts: Vec<&str> = header
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    for want in ["version", "os", "arch", "uid"] {
        assert!(facts.contains(&want), "no {want} in {facts:?}");
    }
    assert!(
        facts.contains(&"kernel"),
        "the OS release is part of the header: {facts:?}"
    );

    let (checks, summary) = rest.trim_end().rsplit_once("\n\n").unwrap();
    let mut counts = [0usize; 4];
    for line in checks.lines() {
        let status = line.split_whitespace().next().unwrap();
        let slot = ["ok", "warn", "fail", "n/a"]
            .iter()
            .position(|s| *s == status)
            .unwrap_or_else(|| panic!("bad status in {line:?}"));
        counts[slot] += 1;
        let name = line.split_whitespace().nth(1).unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
            "{line:?}"
        );
        if status == "warn" {
            assert!(line.contains(" — "), "a warning says what to do: {line:?}");
        }
    }
    assert_eq!(counts[2], 0, "{text}");
    assert!(checks.lines().next().unwrap().contains("sample"), "{text}");
    assert_eq!(
        summary,
        format!(
            "{} ok, {} warn, {} fail, {} n/a",
            counts[0], counts[1], counts[2], counts[3]
        )
    );
}
