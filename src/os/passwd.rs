//! The account database `/etc/passwd` (passwd(5)): one account a line,
//! `name:password:uid:gid:gecos:home:shell`.
//!
//! One parser for every reader: the Linux sampler's user names and the
//! notifier's gid and home of the user it runs as. Only root can change
//! `/etc/passwd`, but the parser still takes any text: a line that is not a
//! whole entry (fewer than seven fields, an empty or commented-out name, a
//! uid or gid that is not a plain decimal number that fits 32 bits) is
//! skipped, as glibc's `files` backend skips it, and where two entries share
//! a uid the first one counts, as `getpwuid` answers.

/// Where the system's account database lives.
pub const SYSTEM_PASSWD: &str = "/etc/passwd";

/// One well-formed entry, borrowing from the text it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub name: &'a str,
    pub uid: u32,
    /// The primary group.
    pub gid: u32,
    pub home: &'a str,
}

/// The entry on one line, or `None` if the line is not a whole entry.
pub fn parse_line(line: &str) -> Option<Entry<'_>> {
    // The shell is the rest of the line: seven fields, the last may hold ':'.
    let mut f = line.splitn(7, ':');
    let name = f.next()?;
    let _password = f.next()?;
    let uid = id(f.next()?)?;
    let gid = id(f.next()?)?;
    let _gecos = f.next()?;
    let home = f.next()?;
    let _shell = f.next()?;
    if name.is_empty() || name.starts_with('#') {
        return None;
    }
    Some(Entry {
        name,
        uid,
        gid,
        home,
    })
}

/// The well-formed entries of `text`, in file order (duplicates included).
pub fn entries(text: &str) -> impl Iterator<Item = Entry<'_>> {
    text.lines().filter_map(parse_line)
}

/// The first well-formed entry for `uid`, as `getpwuid` finds it.
pub fn by_uid(text: &str, uid: u32) -> Option<Entry<'_>> {
    entries(text).find(|e| e.uid == uid)
}

/// A uid or gid field: ASCII digits only (no sign, no blanks), within `u32`.
fn id(field: &str) -> Option<u32> {
    crate::os::linux::parse::procfs::parse_u64(field.as_bytes()).and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "root:x:0:0:root:/root:/bin/bash\n\
                        # comment:x:5:5::/:/bin/sh\n\
                        ada:x:1000:1001:Ada,,,:/home/ada:/bin/zsh\n";

    #[test]
    fn a_whole_entry_gives_name_uid_gid_and_home() {
        assert_eq!(
            by_uid(TEXT, 1000),
            Some(Entry {
                name: "ada",
                uid: 1000,
                gid: 1001,
                home: "/home/ada",
            })
        );
        assert_eq!(by_uid(TEXT, 0).map(|e| e.name), Some("root"));
    }

    #[test]
    fn an_unknown_uid_and_a_commented_line_give_nothing() {
        assert_eq!(by_uid(TEXT, 1002), None);
        assert_eq!(by_uid(TEXT, 5), None);
        assert_eq!(entries(TEXT).count(), 2);
    }

    #[test]
    fn lines_with_missing_fields_are_skipped() {
        for line in [
            "short:x:5",
            "short:x:5:5",
            "short:x:5:5::/home/s",
            ":x:5:5::/:/bin/sh",
            "",
        ] {
            assert_eq!(parse_line(line), None, "{line:?}");
        }
        // The entry after a broken one is still found.
        assert_eq!(
            by_uid("short:x:5\nok:x:5:5::/:/bin/sh\n", 5).map(|e| e.name),
            Some("ok")
        );
    }

    #[test]
    fn non_numeric_and_out_of_range_ids_are_skipped() {
        for line in [
            "a:x:abc:0::/:/bin/sh",
            "a:x:+5:0::/:/bin/sh",
            "a:x:-1:0::/:/bin/sh",
            "a:x: 5:0::/:/bin/sh",
            "a:x:4294967296:0::/:/bin/sh",
            "a:x::0::/:/bin/sh",
            "a:x:5:gid::/:/bin/sh",
        ] {
            assert_eq!(parse_line(line), None, "{line:?}");
        }
        assert_eq!(
            parse_line("a:x:4294967295:0::/:/bin/sh").map(|e| e.uid),
            Some(u32::MAX)
        );
    }

    #[test]
    fn the_first_entry_of_a_duplicated_uid_wins() {
        let text = "first:x:1000:1:::/bin/sh\nsecond:x:1000:2::/home/s:/bin/sh\n";
        assert_eq!(
            by_uid(text, 1000).map(|e| (e.name, e.gid)),
            Some(("first", 1))
        );
        // A broken first entry does not hide a later whole one.
        let text = "broken:x:1000:nogid::/:/bin/sh\nsecond:x:1000:2::/home/s:/bin/sh\n";
        assert_eq!(by_uid(text, 1000).map(|e| e.name), Some("second"));
    }

    #[test]
    fn a_shell_with_colons_and_crlf_endings_still_parse() {
        let e = parse_line("a:x:7:8:g:/h:/bin/sh:extra").unwrap();
        assert_eq!((e.uid, e.gid, e.home), (7, 8, "/h"));
        assert_eq!(
            by_uid("a:x:7:8:g:/h:/bin/sh\r\nb:x:9:9:g:/b:/bin/sh\r\n", 9).map(|e| e.home),
            Some("/b")
        );
    }

    #[test]
    fn a_very_long_line_is_read_and_does_not_spill_into_the_next() {
        let long = "n".repeat(1 << 20);
        let text = format!("{long}:x:1:1::/:/bin/sh\n{long}:x:2\nb:x:2:2::/b:/bin/sh\n");
        assert_eq!(by_uid(&text, 1).map(|e| e.name.len()), Some(1 << 20));
        assert_eq!(by_uid(&text, 2).map(|e| e.name), Some("b"));
    }
}
