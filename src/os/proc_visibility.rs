//! Whether the OS shows a user other users' processes: on Linux, the
//! `hidepid` and `gid` options of the `/proc` mount (proc(5)). Under
//! `hidepid=1` (`noaccess`) a user can read nothing of another user's
//! `/proc/[pid]`, under `hidepid=2` (`invisible`) not even see it, and under
//! `hidepid=4` (`ptraceable`) only what they may trace; members of the
//! `gid=` group are exempt. `ps` then lists a user their own processes only,
//! and so must the HTTP surface of a daemon that reads everything as root.
//!
//! [`parse_mountinfo`] reads the options from `/proc/self/mountinfo` (the
//! last mount on `/proc` hides earlier ones); [`member_of`] says whether a
//! user is in a group from `/etc/passwd` and `/etc/group`. On macOS every
//! user sees every process (`ps aux`).

use std::path::Path;

/// How `/proc` shows other users' processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcVisibility {
    /// Other users' processes are hidden from a user (`hidepid` 1, 2 or 4).
    pub hides_others: bool,
    /// The group exempt from hiding (`gid=`).
    pub exempt_gid: Option<u32>,
}

/// The options of the last `proc` mount on `/proc` in a `mountinfo`
/// (proc(5)); all visible where there is none or it has no `hidepid`.
pub fn parse_mountinfo(text: &str) -> ProcVisibility {
    let mut found = ProcVisibility::default();
    for line in text.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let mut fields = line.split(' ');
        let Some(point) = fields.nth(4) else {
            continue;
        };
        if point != "/proc" {
            continue;
        }
        let mut after = fields.skip_while(|f| *f != "-").skip(1);
        let (Some(fstype), Some(_source), Some(options)) =
            (after.next(), after.next(), after.next())
        else {
            // A later mount on /proc hides the earlier one, whatever it is.
            found = ProcVisibility::default();
            continue;
        };
        found = if fstype == "proc" {
            parse_options(options)
        } else {
            ProcVisibility::default()
        };
    }
    found
}

/// The super options of a proc mount: `rw,nosuid,hidepid=invisible,gid=27`.
fn parse_options(options: &str) -> ProcVisibility {
    let mut v = ProcVisibility::default();
    for option in options.split(',') {
        if let Some(mode) = option.strip_prefix("hidepid=") {
            // 0 and `off` show everything; anything else this parser does
            // not know is taken as hiding: showing too little is the safe
            // mistake.
            v.hides_others = !matches!(mode, "0" | "off");
        } else if let Some(gid) = option.strip_prefix("gid=") {
            v.exempt_gid = crate::os::linux::parse::procfs::parse_u64(gid.as_bytes())
                .and_then(|g| u32::try_from(g).ok());
        }
    }
    v
}

/// Whether the account `uid` is in group `gid`: as its primary group in
/// `passwd`, or as a member listed in `group` (group(5):
/// `name:password:gid:user1,user2`).
pub fn member_of(passwd: &str, group: &str, uid: u32, gid: u32) -> bool {
    let Some(entry) = super::passwd::by_uid(passwd, uid) else {
        return false;
    };
    if entry.gid == gid {
        return true;
    }
    group.lines().any(|line| {
        let mut f = line.splitn(4, ':');
        let (Some(_name), Some(_password), Some(id), Some(members)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return false;
        };
        crate::os::linux::parse::procfs::parse_u64(id.as_bytes()) == Some(u64::from(gid))
            && members.split(',').any(|m| m.trim() == entry.name)
    })
}

/// How this machine's `/proc` shows other users' processes, as this
/// process sees it mounted; all visible where it cannot be read.
pub fn read() -> ProcVisibility {
    read_at(Path::new("/proc/self/mountinfo"))
}

#[cfg(target_os = "linux")]
fn read_at(mountinfo: &Path) -> ProcVisibility {
    match std::fs::read_to_string(mountinfo) {
        Ok(text) => parse_mountinfo(&text),
        Err(e) => {
            tracing::debug!("cannot read {}: {e}", mountinfo.display());
            ProcVisibility::default()
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn read_at(_: &Path) -> ProcVisibility {
    ProcVisibility::default()
}

/// Whether the OS hides other users' processes from `uid`: never from
/// root, never without `hidepid`, never from a member of the exempt group
/// (read from the system's account files).
pub fn hidden_from(v: ProcVisibility, uid: u32) -> bool {
    if uid == 0 || !v.hides_others {
        return false;
    }
    let Some(gid) = v.exempt_gid else {
        return true;
    };
    let passwd = std::fs::read_to_string(super::passwd::SYSTEM_PASSWD).unwrap_or_default();
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    !member_of(&passwd, &group, uid, gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                         27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n";

    #[test]
    fn a_plain_proc_hides_nothing() {
        assert_eq!(parse_mountinfo(PLAIN), ProcVisibility::default());
        assert_eq!(parse_mountinfo(""), ProcVisibility::default());
    }

    #[test]
    fn hidepid_in_either_spelling_hides_others() {
        for mode in ["1", "2", "4", "noaccess", "invisible", "ptraceable"] {
            let text = format!(
                "{PLAIN}63 45 0:39 / /proc rw,relatime - proc proc rw,hidepid={mode},gid=27\n"
            );
            assert_eq!(
                parse_mountinfo(&text),
                ProcVisibility {
                    hides_others: true,
                    exempt_gid: Some(27)
                },
                "{mode}"
            );
        }
        let off = format!("{PLAIN}63 45 0:39 / /proc rw - proc proc rw,hidepid=0\n");
        assert!(!parse_mountinfo(&off).hides_others);
    }

    #[test]
    fn the_last_mount_on_proc_counts() {
        let hidden = "22 27 0:21 / /proc rw - proc proc rw,hidepid=2\n";
        let remounted = format!("{hidden}63 22 0:39 / /proc rw - proc proc rw\n");
        assert!(parse_mountinfo(hidden).hides_others);
        assert!(!parse_mountinfo(&remounted).hides_others);
        // A proc mounted elsewhere says nothing of /proc.
        let elsewhere = "70 27 0:50 / /mnt/proc rw - proc proc rw,hidepid=2\n";
        assert!(!parse_mountinfo(&format!("{PLAIN}{elsewhere}")).hides_others);
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let text = "garbage\n1 2 3 4 /proc\n22 27 0:21 / /proc rw - proc proc rw,hidepid=2,gid=x\n";
        assert_eq!(
            parse_mountinfo(text),
            ProcVisibility {
                hides_others: true,
                exempt_gid: None
            }
        );
    }

    #[test]
    fn group_membership_counts_the_primary_group_and_listed_members() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nana:x:1000:1000::/home/ana:/bin/sh\n\
                      bo:x:1001:1001::/home/bo:/bin/sh\n";
        let group = "proc:x:27:bo,cy\nana:x:1000:\n";
        assert!(member_of(passwd, group, 1001, 27), "listed");
        assert!(member_of(passwd, group, 1000, 1000), "primary");
        assert!(!member_of(passwd, group, 1000, 27));
        assert!(!member_of(passwd, group, 4242, 27), "no such account");
    }

    #[test]
    fn root_and_machines_without_hidepid_hide_nothing() {
        let hiding = ProcVisibility {
            hides_others: true,
            exempt_gid: None,
        };
        assert!(!hidden_from(hiding, 0));
        assert!(hidden_from(hiding, 1000));
        assert!(!hidden_from(ProcVisibility::default(), 1000));
    }
}
