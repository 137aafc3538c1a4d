//! macOS crash reports (`.ips`), read for post-mortems (pure: compiled and
//! tested on every OS).
//!
//! When a process crashes, ReportCrash writes a report to
//! `/Library/Logs/DiagnosticReports` (system processes, and everyone's when
//! run as root) or the user's `~/Library/Logs/DiagnosticReports`. Since
//! macOS 12 it is an `.ips` file: one line of JSON (the header: `bug_type`
//! `"309"` for a crash, the app's name, the OS), then a JSON body (the
//! fields Apple documents in "Interpreting the JSON format of a crash
//! report"): `pid`, `procName`, `procPath`, `cpuType`, `translated` (true
//! when Rosetta ran an x86_64 program on Apple silicon), `exception`
//! (`type` `EXC_BAD_ACCESS`, `signal` `SIGSEGV`, `subtype`), `termination`,
//! `asi` (application-specific information: `abort() called`, an uncaught
//! exception's message), `faultingThread`, each thread's `frames` (an
//! `imageIndex` into `usedImages`) and `usedImages` (`name`, `path`).
//!
//! [`parse_ips`] turns the text into a [`CrashReport`]: who crashed, how,
//! the library of the crashing frame, the first library on the crashing
//! stack that is not macOS's own (the crashing frame of an `abort()` is in
//! `libsystem_kernel.dylib`; the culprit is further down), and whether the
//! process was translated. A report of another kind (a JetsamEvent, a hang)
//! or a truncated one is an error that names what is wrong, never a
//! guessed crash; one whose JSON ends early is [`IpsError::Truncated`] (a
//! report still being written reads so), which the scanner reads again.

use std::collections::HashMap;

use serde::Deserialize;

/// The largest report read (a crash report with hundreds of threads runs to
/// a few hundred KiB).
pub const MAX_REPORT_BYTES: u64 = 4 << 20;

/// What a crash report says about the crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashReport {
    pub pid: u32,
    /// `procName`.
    pub name: String,
    /// `procPath`.
    pub path: Option<String>,
    /// `userID`: whose process it was.
    pub uid: Option<u32>,
    /// `EXC_BAD_ACCESS`, `EXC_BAD_INSTRUCTION`, `EXC_CRASH`.
    pub exception: Option<String>,
    /// `SIGSEGV`, `SIGILL`, `SIGABRT`.
    pub signal: Option<String>,
    /// `KERN_INVALID_ADDRESS at 0x0000000000000000`.
    pub subtype: Option<String>,
    /// The image of the crashing frame (`libtensorflow_framework.2.dylib`).
    pub library: Option<String>,
    /// The first image on the crashing stack outside macOS's own libraries
    /// (`/usr/lib`, `/System`), where it differs from `library`.
    pub first_own_library: Option<String>,
    /// `translated`: Rosetta ran it (absent on Intel Macs and older reports).
    pub translated: Option<bool>,
    /// `cpuType`: `ARM-64`, `X86-64`.
    pub cpu_type: Option<String>,
    /// `captureTime`.
    pub captured: Option<String>,
    /// The application-specific messages (`asi`).
    pub messages: Vec<String>,
}

impl CrashReport {
    /// Where the report's messages show the GPU ran out of memory (a Metal
    /// command buffer failed with `kIOGPUCommandBufferCallbackErrorOutOfMemory`),
    /// the message.
    pub fn gpu_out_of_memory(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.contains("kIOGPUCommandBufferCallbackErrorOutOfMemory"))
            .map(String::as_str)
    }
}

/// Why a file is not a crash report headroom can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpsError {
    #[error("empty")]
    Empty,
    #[error("its first line is not a JSON header: {0}")]
    Header(String),
    #[error("a report of another kind (bug_type {0}), not a crash")]
    NotACrash(String),
    #[error("its body ends before its JSON does (still being written, or cut short): {0}")]
    Truncated(String),
    #[error("its body is not the JSON of a crash report: {0}")]
    Body(String),
    #[error("its body names no process id")]
    NoPid,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    bug_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    proc_name: Option<String>,
    #[serde(default)]
    proc_path: Option<String>,
    #[serde(default, rename = "userID")]
    user_id: Option<i64>,
    #[serde(default)]
    translated: Option<bool>,
    #[serde(default)]
    cpu_type: Option<String>,
    #[serde(default)]
    capture_time: Option<String>,
    #[serde(default)]
    exception: Option<Exception>,
    #[serde(default)]
    asi: HashMap<String, Vec<String>>,
    #[serde(default)]
    faulting_thread: Option<usize>,
    #[serde(default)]
    threads: Vec<Thread>,
    #[serde(default)]
    used_images: Vec<Image>,
}

#[derive(Deserialize)]
struct Exception {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    subtype: Option<String>,
}

#[derive(Deserialize)]
struct Thread {
    #[serde(default)]
    triggered: bool,
    #[serde(default)]
    frames: Vec<Frame>,
}

#[derive(Deserialize)]
struct Frame {
    #[serde(default, rename = "imageIndex")]
    image_index: Option<usize>,
}

#[derive(Deserialize)]
struct Image {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

impl Image {
    fn label(&self) -> Option<String> {
        self.name.clone().or_else(|| {
            self.path
                .as_deref()
                .and_then(|p| p.rsplit('/').next())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
        })
    }

    /// Part of macOS: under `/usr/lib` or `/System`.
    fn is_os(&self) -> bool {
        self.path
            .as_deref()
            .is_some_and(|p| p.starts_with("/usr/lib/") || p.starts_with("/System/"))
    }
}

/// Read a `.ips` crash report (see the module documentation).
pub fn parse_ips(text: &str) -> Result<CrashReport, IpsError> {
    let text = text.trim_start_matches('\u{feff}');
    if text.trim().is_empty() {
        return Err(IpsError::Empty);
    }
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    let header: Header =
        serde_json::from_str(header).map_err(|e| IpsError::Header(e.to_string()))?;
    match header.bug_type.as_deref() {
        Some("309") => {}
        other => return Err(IpsError::NotACrash(other.unwrap_or("none").to_string())),
    }
    let body: Body = serde_json::from_str(body).map_err(|e| {
        if e.classify() == serde_json::error::Category::Eof {
            IpsError::Truncated(e.to_string())
        } else {
            IpsError::Body(e.to_string())
        }
    })?;
    let pid = body
        .pid
        .and_then(|p| u32::try_from(p).ok())
        .ok_or(IpsError::NoPid)?;
    let thread = body
        .faulting_thread
        .and_then(|i| body.threads.get(i))
        .or_else(|| body.threads.iter().find(|t| t.triggered));
    let image = |frame: &Frame| frame.image_index.and_then(|i| body.used_images.get(i));
    let library = thread
        .and_then(|t| t.frames.first())
        .and_then(image)
        .and_then(Image::label);
    let first_own_library = thread
        .and_then(|t| {
            t.frames
                .iter()
                .filter_map(image)
                .find(|i| !i.is_os() && i.label().is_some())
        })
        .and_then(Image::label)
        .filter(|own| Some(own) != library.as_ref());
    let mut messages: Vec<(String, Vec<String>)> = body.asi.into_iter().collect();
    messages.sort();
    let (exception, signal, subtype) = match body.exception {
        Some(e) => (e.kind, e.signal, e.subtype),
        None => (None, None, None),
    };
    Ok(CrashReport {
        pid,
        name: body.proc_name.unwrap_or_default(),
        path: body.proc_path,
        uid: body.user_id.and_then(|u| u32::try_from(u).ok()),
        exception,
        signal,
        subtype,
        library,
        first_own_library,
        translated: body.translated,
        cpu_type: body.cpu_type,
        captured: body.capture_time,
        messages: messages.into_iter().flat_map(|(_, m)| m).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An x86_64 app under Rosetta dying of SIGILL (monero-project/monero-gui#3806).
    const ROSETTA_SIGILL: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/monero-gui-3806-translated-sigill.ips"
    ));
    /// Python 3.9 aborting in Tk (Suzukichan/Suzuki_analyze2, README).
    const PYTHON_SIGABRT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/suzuki-analyze2-python-sigabrt.ips"
    ));

    #[test]
    fn a_translated_process_s_sigill_names_its_own_binary() {
        let r = parse_ips(ROSETTA_SIGILL).unwrap();
        assert_eq!((r.pid, r.name.as_str()), (5657, "monero-wallet-gui"));
        assert_eq!(r.exception.as_deref(), Some("EXC_BAD_INSTRUCTION"));
        assert_eq!(r.signal.as_deref(), Some("SIGILL"));
        assert_eq!(r.library.as_deref(), Some("monero-wallet-gui"));
        assert_eq!(r.first_own_library, None, "the crashing frame is its own");
        assert_eq!(r.translated, Some(true));
        assert_eq!(r.cpu_type.as_deref(), Some("X86-64"));
        assert_eq!(r.uid, Some(501));
        assert_eq!(r.gpu_out_of_memory(), None);
    }

    #[test]
    fn an_abort_points_past_the_os_to_the_first_own_library() {
        let r = parse_ips(PYTHON_SIGABRT).unwrap();
        assert_eq!((r.pid, r.name.as_str()), (20761, "Python"));
        assert_eq!(r.signal.as_deref(), Some("SIGABRT"));
        assert_eq!(r.library.as_deref(), Some("libsystem_kernel.dylib"));
        assert_eq!(
            r.first_own_library.as_deref(),
            Some("_tkinter.cpython-39-darwin.so")
        );
        assert_eq!(
            r.translated, None,
            "an Intel Mac's report has no translated field"
        );
        assert_eq!(r.messages, vec!["abort() called".to_string()]);
    }

    #[test]
    fn a_metal_out_of_memory_abort_is_recognised() {
        // The message of youssofal/MTPLX#194 in a report's asi.
        let body = PYTHON_SIGABRT.replace(
            "\"abort() called\"",
            "\"terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\"",
        );
        let r = parse_ips(&body).unwrap();
        assert!(
            r.gpu_out_of_memory()
                .unwrap()
                .contains("Insufficient Memory")
        );
    }

    #[test]
    fn a_truncated_report_is_an_error_not_a_crash() {
        let cut = &ROSETTA_SIGILL[..ROSETTA_SIGILL.len() / 2];
        assert!(
            matches!(parse_ips(cut), Err(IpsError::Truncated(_))),
            "{:?}",
            parse_ips(cut)
        );
        let header_only = ROSETTA_SIGILL.lines().next().unwrap();
        assert!(matches!(
            parse_ips(header_only),
            Err(IpsError::Truncated(_))
        ));
        let broken = ROSETTA_SIGILL.replacen("\"pid\" : 5657", "\"pid\" : [", 1);
        assert!(matches!(parse_ips(&broken), Err(IpsError::Body(_))));
        assert_eq!(parse_ips(""), Err(IpsError::Empty));
        assert!(matches!(
            parse_ips("Process: x [1]\n"),
            Err(IpsError::Header(_))
        ));
    }

    #[test]
    fn another_kind_of_report_is_refused() {
        let jetsam = ROSETTA_SIGILL.replacen("\"bug_type\":\"309\"", "\"bug_type\":\"298\"", 1);
        assert_eq!(parse_ips(&jetsam), Err(IpsError::NotACrash("298".into())));
    }

    #[test]
    fn a_report_without_a_pid_is_refused() {
        let no_pid = ROSETTA_SIGILL.replace("\"pid\" : 5657,", "");
        assert_eq!(parse_ips(&no_pid), Err(IpsError::NoPid));
    }
}
