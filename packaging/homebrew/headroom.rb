# Homebrew formula for headroom, for a tap. `url` and `sha256` here are
# placeholders: `scripts/package-brew.sh [URL-PREFIX]` writes dist/headroom.rb
# with both naming the source tarball it makes of HEAD (dist/), which is the
# formula to put in a tap (the script's header says how).
#
# Bottle-able: `cargo install` with std_cargo_args (--locked, --root at the
# keg) builds the release profile (no debug info, symbols kept) into the
# keg's bin/headroom, and nothing built names the Cellar or the prefix
# (the config path is passed by the service block, not compiled in), so a
# bottle pours under any prefix. Cargo fetches the crates of Cargo.lock at
# build time, as every Rust formula's build does; nothing else is fetched.
# The default config is written only where there is none (a bottle's goes
# through Homebrew's etc handling), so an edited headroom.toml is kept.
#
# The `service do` block behaves like the LaunchAgent that
# `headroom service install --user` writes (launchd/io.headroom.agent.plist):
# `headroom run --config FILE --log-file LOG` started at login, restarted after a failure
# but not after a clean exit, at most once per 10 s, without launchd's CPU
# and I/O throttling (ProcessType Interactive), one log file for stdout and
# stderr that the daemon rotates itself (--log-file), and Homebrew's prefix on
# PATH for hooks. It runs opt_bin's headroom, which follows upgrades, as
# `service install` does when run from a keg. The differences are
# Homebrew's: the label (homebrew.mxcl.headroom), paths under the Homebrew
# prefix, launchd's default ExitTimeOut (20 s), and no Umask key: the service
# DSL sets neither. The daemon creates its journal 0600 in a 0700 directory
# whatever the umask. The block is for the agent only: Homebrew's prefix
# belongs to the user who installed Homebrew, so `sudo brew services start`
# would run as root a binary that user can replace. The caveats give the
# command that installs the LaunchDaemon on a root-owned copy instead.
class Headroom < Formula
  desc "Memory-pressure daemon for machine-learning workloads"
  homepage "https://github.com/OWNER/headroom"
  url "https://github.com/OWNER/headroom/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]

  depends_on "rust" => :build

  def install
    system "cargo", "install", *std_cargo_args
    # The config the service runs with; kept across upgrades once edited.
    (etc/"headroom").mkpath
    config = etc/"headroom/headroom.toml"
    config.write Utils.safe_popen_read(bin/"headroom", "print-config") unless config.exist?
  end

  def post_install
    (var/"log/headroom").mkpath
  end

  service do
    run [opt_bin/"headroom", "run", "--config", etc/"headroom/headroom.toml",
         "--log-file", var/"log/headroom/headroom.log"]
    keep_alive successful_exit: false
    throttle_interval 10
    process_type :interactive
    log_path var/"log/headroom/headroom.log"
    error_log_path var/"log/headroom/headroom.log"
    environment_variables PATH: std_service_path_env
  end

  def caveats
    <<~EOS
      `brew services start headroom` runs headroom as you: it watches your processes.
      To watch every user's processes, install the LaunchDaemon, which runs as root
      a copy of headroom that only root can change (/usr/local/libexec/headroom):
        sudo #{opt_bin}/headroom service install --system
      Not `sudo brew services start headroom`: it would run as root a file in
      #{HOMEBREW_PREFIX}, which belongs to you. After `brew upgrade headroom`,
      run the install again to update the copy.
      Check what works on this Mac (and what needs root):
        headroom doctor
    EOS
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/headroom --version")
    (testpath/"headroom.toml").write shell_output("#{bin}/headroom print-config")
    system bin/"headroom", "check-config", testpath/"headroom.toml"
    assert_match "<key>ProgramArguments</key>",
                 shell_output("#{bin}/headroom service install --user --print --manager launchd")
  end
end
