//! The `headroom` binary: parses the command line and maps the outcome to an
//! exit code (0 ok, 1 runtime failure, 2 bad usage or bad config).

#![deny(unsafe_code)]

fn main() -> std::process::ExitCode {
    headroom::cli::main()
}
