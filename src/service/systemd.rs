//! systemd: the system and user unit, and `systemctl` commands for the
//! scope.

use std::path::Path;

use super::paths::{absolute, config_path, layout, program_arguments, text_of};
use super::plan::{CommandStep, command};
use super::{Manager, Params, Scope, ServiceError};

/// One `ExecStart=` word, quoted for systemd where needed: `%` is a
/// specifier and `$` a variable, both doubled; whitespace, quotes and
/// backslashes need double quotes (systemd.service(5), "Command lines").
fn systemd_word(s: &str) -> String {
    let escaped = s.replace('%', "%%").replace('$', "$$");
    if escaped.is_empty()
        || escaped
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'))
    {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        escaped
    }
}

/// The systemd unit. The system unit runs as root but keeps only the
/// capabilities headroom uses, and is sandboxed otherwise; see the comments
/// in the unit itself.
pub fn systemd_unit(params: &Params) -> Result<String, ServiceError> {
    let layout = layout(params)?;
    let config = config_path(params, &layout)?;
    absolute("the headroom binary", &params.binary)?;
    let binary = text_of("the headroom binary", &params.binary, Manager::Systemd)?;
    let config = text_of("the config file", &config, Manager::Systemd)?;
    let exec = program_arguments(Path::new(&binary), Path::new(&config))
        .iter()
        .map(|w| systemd_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    let unit = match params.scope {
        Scope::System => format!(
            "\
# headroom: memory-pressure daemon for ML workloads, for the whole machine.
# Written by `headroom service install --system`; `headroom service
# uninstall --system` removes it. Reload the config: systemctl reload headroom.

[Unit]
Description=headroom memory-pressure daemon for ML workloads
After=local-fs.target

[Service]
Type=exec
ExecStart={exec}
ExecReload=kill -HUP $MAINPID
Restart=on-failure
RestartSec=5s
TimeoutStopSec=10s

# The sampler keeps /proc/[pid]/statm open between ticks, up to half the
# soft limit of open files.
LimitNOFILE=65536
# The daemon locks its memory (mlockall) so that it stays awake while the
# machine swaps; its memory is bounded.
LimitMEMLOCK=infinity
# Killed last by the OOM killer: headroom is what acts before it has to.
OOMScoreAdjust=-900

# /var/lib/headroom, /var/log/headroom and /etc/headroom. What the daemon
# creates (the journal names other users' processes) is root's alone.
UMask=0077
StateDirectory=headroom
StateDirectoryMode=0700
LogsDirectory=headroom
LogsDirectoryMode=0750
ConfigurationDirectory=headroom

# Root, with only the capabilities it uses: CAP_KILL to signal other
# users' processes, CAP_SYS_PTRACE to read their /proc/[pid]/maps and exe,
# CAP_DAC_READ_SEARCH to read their owner-only /proc entries,
# CAP_SYS_RESOURCE for PSI triggers with a 1 s window (psi.rst: without it,
# windows must be multiples of 2 s), and CAP_SYSLOG to read /dev/kmsg where
# kernel.dmesg_restrict = 1 (Debian's and Ubuntu's default): the kernel log
# is where OOM kills, crashes and GPU faults are learned.
CapabilityBoundingSet=CAP_KILL CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYS_RESOURCE CAP_SYSLOG
NoNewPrivileges=yes

# Sandbox. /proc stays writable (PSI triggers are written to
# /proc/pressure/memory); no PrivateDevices=, which would hide GPUs; no
# ProtectKernelLogs=, which would hide /dev/kmsg.
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native
# AF_NETLINK: the kernel's socket diagnostics tell whose socket an HTTP
# client or a Jupyter port is.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK

[Install]
WantedBy=multi-user.target
"
        ),
        Scope::User => format!(
            "\
# headroom: memory-pressure daemon for ML workloads, for this user's
# processes. Written by `headroom service install --user`; `headroom
# service uninstall --user` removes it.

[Unit]
Description=headroom memory-pressure daemon for ML workloads (this user)

[Service]
Type=exec
ExecStart={exec}
ExecReload=kill -HUP $MAINPID
Restart=on-failure
RestartSec=5s
TimeoutStopSec=10s
# The sampler keeps /proc/[pid]/statm open between ticks.
LimitNOFILE=65536
# ~/.local/state/headroom, this user's alone.
UMask=0077
StateDirectory=headroom
StateDirectoryMode=0700
NoNewPrivileges=yes

[Install]
WantedBy=default.target
"
        ),
    };
    Ok(unit)
}

/// `systemctl ARGS`, with `--user` for a user unit.
pub(super) fn systemctl(params: &Params, args: &[&str]) -> CommandStep {
    let mut argv = vec!["systemctl"];
    if params.scope == Scope::User {
        argv.push("--user");
    }
    argv.extend_from_slice(args);
    command(&argv, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::params;

    #[test]
    fn systemd_words_are_quoted_only_when_needed() {
        assert_eq!(systemd_word("/usr/bin/headroom"), "/usr/bin/headroom");
        assert_eq!(systemd_word("/opt/my dir/x"), "\"/opt/my dir/x\"");
        assert_eq!(systemd_word("50%"), "50%%");
        assert_eq!(systemd_word("a\"b"), "\"a\\\"b\"");
        assert_eq!(systemd_word("$HOME"), "$$HOME");
        assert_eq!(systemd_word(""), "\"\"");
    }

    #[test]
    fn the_system_unit_keeps_five_capabilities_and_the_limits() {
        let unit = systemd_unit(&params(Manager::Systemd, Scope::System)).unwrap();
        assert!(unit.contains(
            "\nExecStart=/usr/local/bin/headroom run --config /etc/headroom/headroom.toml\n"
        ));
        assert!(unit.contains(
            "\nCapabilityBoundingSet=CAP_KILL CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYS_RESOURCE CAP_SYSLOG\n"
        ));
        for line in [
            "LimitNOFILE=65536",
            "LimitMEMLOCK=infinity",
            "UMask=0077",
            "StateDirectory=headroom",
            "StateDirectoryMode=0700",
            "LogsDirectory=headroom",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "WantedBy=multi-user.target",
        ] {
            assert!(unit.contains(&format!("\n{line}\n")), "{line}");
        }
        assert!(
            !unit.lines().any(|l| l.starts_with("PrivateDevices=")),
            "GPUs must stay visible"
        );
        assert!(
            !unit.lines().any(|l| l.starts_with("ProtectKernelLogs=")),
            "/dev/kmsg must stay readable: post-mortems read OOM kills and crashes there"
        );
        // Every address family the daemon opens a socket of.
        let families = unit
            .lines()
            .find_map(|l| l.strip_prefix("RestrictAddressFamilies="))
            .expect("address families restricted");
        for family in ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"] {
            assert!(
                families.split_whitespace().any(|f| f == family),
                "{family} (the socket diagnostics need AF_NETLINK)"
            );
        }
    }
}
