//! A plan as text, for `--print`: shell-like lines, file contents in full,
//! comments after `#`.

use std::fmt::Write as _;

use super::Manager;
use super::launchctl::{BACKOFF, GONE_WAIT};
use super::launchd::MACOS_ADMIN_GID;
use super::plan::{Contents, Plan, Settle};

pub use crate::os::this_process::shell_word;

/// `root:wheel`, `root:admin`, `501:20`: an owner as `chown` takes it.
fn owner_name(owner: (u32, u32), manager: Manager) -> String {
    let user = if owner.0 == 0 {
        "root".to_owned()
    } else {
        owner.0.to_string()
    };
    let group = match (owner.1, manager) {
        (0, Manager::Launchd) => "wheel".to_owned(),
        (0, Manager::Systemd) => "root".to_owned(),
        (MACOS_ADMIN_GID, Manager::Launchd) => "admin".to_owned(),
        (g, _) => g.to_string(),
    };
    format!("{user}:{group}")
}

impl Plan {
    /// The plan as text, for `--print`: shell-like lines, file contents in
    /// full, comments after `#`.
    pub fn render(&self, manager: Manager) -> String {
        let mut out = format!(
            "# {}: what it would do (--print: nothing is written or run)\n",
            self.title
        );
        for n in &self.notes {
            let _ = writeln!(out, "# {n}");
        }
        // `root:wheel` or `root:root`, as `install` takes them.
        let root = owner_name((0, 0), manager);
        let (user, group) = root.split_once(':').unwrap_or(("root", "0"));
        for c in &self.copies {
            if let Some(dir) = c.to.parent() {
                let _ = writeln!(
                    out,
                    "\ninstall -d -o {user} -g {group} -m 0755 {}  # if missing",
                    shell_word(&dir.display().to_string())
                );
            }
            let _ = writeln!(
                out,
                "install -o {user} -g {group} -m 0755 {} {}  # the service's own copy, root's alone",
                shell_word(&c.from.display().to_string()),
                shell_word(&c.to.display().to_string())
            );
        }
        if !self.dirs.is_empty() {
            out.push('\n');
        }
        for d in &self.dirs {
            let _ = write!(
                out,
                "mkdir -p -m {:04o} {}",
                d.mode,
                shell_word(&d.path.display().to_string())
            );
            if let Some(owner) = d.owner {
                let _ = write!(
                    out,
                    " && chown {} {}",
                    owner_name(owner, manager),
                    shell_word(&d.path.display().to_string())
                );
            }
            let _ = writeln!(out, "  # {}", d.what);
        }
        for f in &self.files {
            let path = shell_word(&f.path.display().to_string());
            match &f.contents {
                Contents::DefaultConfig => {
                    let _ = writeln!(
                        out,
                        "\n# if {path} does not exist: write the embedded default config (headroom print-config), mode {:04o}",
                        f.mode
                    );
                }
                Contents::Log { owner } => {
                    let _ = write!(out, "\ntouch {path} && chmod {:04o} {path}", f.mode);
                    if let Some(owner) = owner {
                        let _ = write!(out, " && chown {} {path}", owner_name(*owner, manager));
                    }
                    let _ = writeln!(out, "  # the log, kept if there");
                }
                Contents::Text(text) => {
                    let _ = write!(out, "\n# write {path}, mode {:04o}:\n{text}", f.mode);
                }
            }
        }
        for r in &self.remove {
            let _ = writeln!(out, "\nrm -f {}", shell_word(&r.display().to_string()));
        }
        out.push('\n');
        for c in &self.commands {
            let line: Vec<String> = c.argv.iter().map(|w| shell_word(w)).collect();
            let _ = write!(out, "{}", line.join(" "));
            if c.may_fail {
                out.push_str("  # may fail: not loaded");
            }
            out.push('\n');
            match &c.settle {
                Settle::Nothing => {}
                Settle::Gone { target, .. } => {
                    let _ = writeln!(
                        out,
                        "# then wait, up to {} s, until `launchctl print {target}` no longer finds the job",
                        GONE_WAIT.as_secs()
                    );
                }
                Settle::Loaded { target } => {
                    let _ = writeln!(
                        out,
                        "# retried up to {} times while launchd is still busy with the label (exit 5 or 37); then `launchctl print {target}` must find the job",
                        BACKOFF.len()
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::params;
    use crate::service::{Scope, plan_install};

    #[test]
    fn the_printed_plan_quotes_paths_with_spaces() {
        let text = plan_install(&params(Manager::Launchd, Scope::System))
            .unwrap()
            .render(Manager::Launchd);
        assert!(text.contains(
            "\nmkdir -p -m 0750 /Library/Logs/headroom && chown root:admin /Library/Logs/headroom  # logs"
        ), "{text}");
        assert!(
            text.contains("mkdir -p -m 0700 '/Library/Application Support/headroom/state'"),
            "{text}"
        );
        assert!(
            text.contains(
                "\nlaunchctl bootstrap system /Library/LaunchDaemons/io.headroom.daemon.plist\n"
            ),
            "{text}"
        );
        assert!(text.contains("<key>ProgramArguments</key>"), "{text}");
        assert!(
            text.contains(
                "launchctl bootout system/io.headroom.daemon  # may fail: not loaded\n\
                 # then wait, up to 15 s, until `launchctl print system/io.headroom.daemon` no longer finds the job\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_printed_plan_installs_the_services_copy_of_headroom() {
        let mut p = params(Manager::Launchd, Scope::System);
        p.binary = crate::service::root_binary(Manager::Launchd);
        p.source = crate::service::BinarySource::Copy {
            from: "/usr/local/bin/headroom".into(),
            why: "/usr/local/bin is owned by uid 501, not by root".into(),
        };
        let text = plan_install(&p).unwrap().render(Manager::Launchd);
        assert!(
            text.contains(
                "\ninstall -d -o root -g wheel -m 0755 /usr/local/libexec/headroom  # if missing\n\
                 install -o root -g wheel -m 0755 /usr/local/bin/headroom \
                 /usr/local/libexec/headroom/headroom  # the service's own copy, root's alone\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("<string>/usr/local/libexec/headroom/headroom</string>"),
            "{text}"
        );
    }
}
