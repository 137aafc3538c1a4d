//! A plan as text, for `--print`: shell-like lines, file contents in full,
//! comments after `#`.

use std::fmt::Write as _;

use super::Manager;
use super::launchd::MACOS_ADMIN_GID;
use super::plan::{Contents, Plan};

/// A word for a shell command line, single-quoted where needed.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

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
    }
}
