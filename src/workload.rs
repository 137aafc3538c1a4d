//! Workload classification: which processes are ML work, and the evidence.
//!
//! [`classify`] is a pure function of what a sampler knows about a process
//! ([`ProcessFacts`]): its short name, executable path, argv and, where the
//! platform lists them cheaply, the basenames of its mapped libraries. Every
//! rule that matches leaves a short sentence in [`Workload::evidence`]
//! (`argv[2] is ipykernel_launcher`, `maps libtorch_cpu.so`) so that people
//! and logs can see why a process was treated as ML work.
//!
//! The rules, in the order their evidence is listed:
//!
//! 1. **Jupyter kernel**: Python running `ipykernel_launcher`, or any program
//!    given a connection file (`-f …/kernel-<id>.json` and its spellings);
//!    the kernel id is what follows `kernel-`. A file after `--existing`
//!    belongs to a client, not a kernel.
//! 2. **LLM server**: llama.cpp, Ollama, vLLM, `llama_cpp.server`,
//!    `mlx_lm.server`.
//! 3. **Frameworks**, from argv (`torchrun`, `accelerate launch`, …) and from
//!    mapped libraries (`libtorch_cpu`, `libmlx`, `libcudart` →
//!    [`Framework::Cuda`], …). A script's name is never evidence by itself.
//! 4. **Python**: the executable, `argv[0]` or name is an interpreter.
//!
//! The kind is the first that applies. Among several frameworks it follows
//! the first of MLX, JAX, PyTorch, TensorFlow named on the command line,
//! else among the libraries (JAX and MLX programs often load torch or
//! tensorflow for data loading only); CUDA alone gives no kind. Every
//! framework seen is in [`Workload::frameworks`].
//!
//! Names are compared without case, a trailing `.exe` removed, paths split
//! on `/` and `\`; a 15-byte name (Linux's `comm`) also matches the longer
//! names it is a prefix of.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::text_caps::{NAME_MAX, capped};
use crate::model::{COMM_LEN, Framework, Timestamp, Workload, WorkloadKind};

/// What a sampler knows of a process when classifying it.
#[derive(Debug, Clone, Copy)]
pub struct ProcessFacts<'a> {
    pub name: &'a str,
    pub exe: Option<&'a str>,
    pub argv: &'a [String],
    /// File names (basenames) of shared libraries mapped into the process,
    /// where the platform can list them cheaply; empty otherwise.
    pub libraries: &'a [String],
}

/// Classify a process from its facts.
pub fn classify(facts: &ProcessFacts<'_>) -> Workload {
    Findings::of(facts).into_workload()
}

/// True if the process's mapped libraries could reveal a framework that its
/// argv does not (a Python interpreter or a Jupyter kernel with no framework
/// known yet), so a sampler should list them and classify again.
///
/// False once `libraries` is non-empty: the scan has been done.
pub fn wants_library_scan(facts: &ProcessFacts<'_>) -> bool {
    if !facts.libraries.is_empty() {
        return false;
    }
    let f = Findings::of(facts);
    (f.python.is_some() || f.jupyter) && f.argv_frameworks.is_empty()
}

/// Whether a mapped library's name shows a framework: the only libraries
/// [`classify`] looks at, so the only ones a sampler need keep.
pub fn library_shows_framework(lib: &str) -> bool {
    library_framework(lib).is_some()
}

/// The `site-packages` (or Debian's `dist-packages`) directory a file's
/// path lies in, up to and including that component:
/// `/home/ada/venv/lib/python3.11/site-packages` for
/// `/home/ada/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so`;
/// `None` for a path outside one. The first such component counts: a
/// package that vendors a `site-packages` of its own lies inside the
/// interpreter's.
pub fn site_packages_dir(path: &str) -> Option<&str> {
    let mut end = None;
    let mut at = 0;
    for part in path.split('/') {
        let next = at + part.len();
        if part == "site-packages" || part == "dist-packages" {
            end = Some(next);
            break;
        }
        at = next + 1;
    }
    // The directory, not a file named so.
    end.filter(|&e| e < path.len()).map(|e| &path[..e])
}

/// The evidence a sampler adds for a process that runs translated: an
/// x86_64 program on Apple Silicon, run by Rosetta 2 (macOS's
/// `P_TRANSLATED`).
pub const TRANSLATED_EVIDENCE: &str = "x86_64 under Rosetta 2";

/// Record in `workload`'s evidence that the process runs translated (once).
pub fn mark_translated(workload: &mut Workload) {
    if !workload.evidence.iter().any(|e| e == TRANSLATED_EVIDENCE) {
        workload.evidence.push(TRANSLATED_EVIDENCE.to_owned());
    }
}

/// True if `workload`'s evidence says the process runs translated.
pub fn is_translated(workload: &Workload) -> bool {
    workload.evidence.iter().any(|e| e == TRANSLATED_EVIDENCE)
}

/// For ML work that runs translated, what is wrong and what to install
/// instead, in one sentence for the log and `headroom doctor`; `None` for
/// anything else. Translated code runs slower than native and cannot use
/// what only arm64 processes get: PyTorch's MPS backend needs an arm64
/// Python, MLX exists for Apple Silicon only.
pub fn translated_advice(workload: &Workload) -> Option<String> {
    if !workload.is_ml() {
        return None;
    }
    let mut what = vec![
        "install an arm64 Python (Miniforge's arm64 installer, or python.org's universal2 installer) and reinstall the packages into it"
            .to_owned(),
    ];
    if workload.frameworks.contains(&Framework::Tensorflow) {
        what.push(
            "TensorFlow publishes arm64 macOS wheels as tensorflow from 2.13 on (tensorflow-macos before)"
                .to_owned(),
        );
    }
    if workload.kind == WorkloadKind::LlmServer {
        what.insert(
            0,
            "install the Apple Silicon (arm64) build of the server".to_owned(),
        );
    }
    Some(format!(
        "runs as x86_64 code translated by Rosetta 2, slower than native and without the GPU paths only arm64 processes get (PyTorch's MPS backend, MLX): {}",
        what.join("; ")
    ))
}

/// What a sampler saw change in a process it knew, under the same identity
/// (pid and start time): the program it ran before. The start time survives
/// `exec` on both OSes (Linux keeps `start_time`; XNU copies `p_start` and
/// `ps_start` into the process `exec` makes, `bsd/kern/kern_fork.c`), so a
/// wrapper that execs `python …` is the same identity running another
/// program: it is classified again from what it runs now, and this note
/// says what it ran before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierProgram {
    /// Its name before.
    pub name: String,
    /// True where the change is known to be an `exec` (a new executable, or
    /// on Linux `PF_FORKNOEXEC` cleared); false where only the name changed
    /// (Linux lets a process rename itself: `prctl(PR_SET_NAME)`).
    pub exec: bool,
    /// The sample that noticed it (the change happened since the one before).
    pub noticed: Timestamp,
}

/// How an [`EarlierProgram`]'s evidence line begins: after an `exec`, and
/// after a change of name alone. Each quotes only the earlier name, which
/// every user may see.
pub const EXEC_EVIDENCE: &str = "exec'd from ";
pub const RENAMED_EVIDENCE: &str = "name changed from ";

impl EarlierProgram {
    /// The evidence line: `exec'd from sh (noticed 2026-…Z)`.
    pub fn evidence(&self) -> String {
        let how = if self.exec {
            EXEC_EVIDENCE
        } else {
            RENAMED_EVIDENCE
        };
        format!(
            "{how}{} (noticed {})",
            capped(&self.name, NAME_MAX),
            self.noticed
        )
    }

    /// Add the evidence line to `workload`, classified from the program the
    /// process runs now, replacing an earlier change's line.
    pub fn note(&self, workload: &mut Workload) {
        workload.evidence.retain(|e| !is_program_change(e));
        workload.evidence.push(self.evidence());
    }
}

/// True for an evidence line that says the process runs another program
/// than before ([`EarlierProgram::evidence`]).
pub fn is_program_change(evidence: &str) -> bool {
    evidence.starts_with(EXEC_EVIDENCE) || evidence.starts_with(RENAMED_EVIDENCE)
}

/// The evidence line that says what the process ran before, if it changed
/// program while it was watched.
pub fn program_change(workload: &Workload) -> Option<&str> {
    workload
        .evidence
        .iter()
        .rev()
        .find(|e| is_program_change(e))
        .map(String::as_str)
}

/// Framework priority for the kind when several are seen (see module doc).
const KIND_PRIORITY: [(Framework, WorkloadKind); 4] = [
    (Framework::Mlx, WorkloadKind::Mlx),
    (Framework::Jax, WorkloadKind::Jax),
    (Framework::Pytorch, WorkloadKind::Pytorch),
    (Framework::Tensorflow, WorkloadKind::Tensorflow),
];

/// Library stems (see [`library_stem`]) that identify a framework.
const LIBRARY_STEMS: &[(&str, Framework)] = &[
    // PyTorch wheels: torch/lib/libtorch_cpu.so, libtorch_cuda.so, libc10.so, …
    ("libtorch_cpu", Framework::Pytorch),
    ("libtorch_cuda", Framework::Pytorch),
    ("libtorch_python", Framework::Pytorch),
    ("libtorch_global_deps", Framework::Pytorch),
    ("libtorch", Framework::Pytorch),
    ("libc10", Framework::Pytorch),
    ("libc10_cuda", Framework::Pytorch),
    // Windows builds of the same.
    ("torch_cpu", Framework::Pytorch),
    ("c10", Framework::Pytorch),
    // TensorFlow wheels: libtensorflow_framework.so.2, libtensorflow_cc.so.2,
    // python/_pywrap_tensorflow_internal.so; the C API libtensorflow.so.2.
    ("libtensorflow_framework", Framework::Tensorflow),
    ("libtensorflow_cc", Framework::Tensorflow),
    ("libtensorflow", Framework::Tensorflow),
    ("_pywrap_tensorflow_internal", Framework::Tensorflow),
    // jaxlib: xla_extension.so (up to 0.5), _jax.so and libjax_common.so
    // (later), the CUDA plugin's xla_cuda_plugin.so.
    ("xla_extension", Framework::Jax),
    ("libjax_common", Framework::Jax),
    ("_jax", Framework::Jax),
    ("xla_cuda_plugin", Framework::Jax),
    // MLX: mlx/lib/libmlx.so (Linux), libmlx.dylib (macOS).
    ("libmlx", Framework::Mlx),
    // CUDA runtime: libcudart.so.12, or vendored as libcudart-<hash>.so.11.0.
    ("libcudart", Framework::Cuda),
];

/// Python packages whose files, seen under `site-packages/`, identify a framework.
const PACKAGE_DIRS: &[(&str, Framework)] = &[
    ("torch", Framework::Pytorch),
    ("tensorflow", Framework::Tensorflow),
    ("jaxlib", Framework::Jax),
    ("jax_plugins", Framework::Jax),
    ("mlx", Framework::Mlx),
];

/// A Python interpreter's file name, already lower-cased and without `.exe`:
/// `python`, `python3`, `python3.11`, `pythonw`, `python3.13t`, `python3.11d`.
static PYTHON_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^python(?:\d+(?:\.\d+)*)?[dmtw]?$").expect("a valid regex"));

/// Everything the rules found, before it is turned into a [`Workload`].
#[derive(Debug, Default)]
struct Findings {
    /// Evidence that the process is a Python interpreter.
    python: Option<String>,
    jupyter: bool,
    kernel_id: Option<String>,
    llm_server: bool,
    /// Frameworks named on the command line.
    argv_frameworks: Vec<Framework>,
    /// Frameworks seen in mapped libraries.
    library_frameworks: Vec<Framework>,
    /// Evidence for Jupyter and LLM-server rules.
    kind_evidence: Vec<String>,
    /// Evidence for frameworks.
    framework_evidence: Vec<String>,
}

impl Findings {
    fn of(facts: &ProcessFacts<'_>) -> Self {
        let names = Names::of(facts);
        let mut f = Findings {
            python: names.find_python(),
            ..Findings::default()
        };
        let launch = f.python.is_some().then(|| PyLaunch::parse(facts.argv));
        f.jupyter_rules(facts.argv, launch.as_ref());
        f.llm_rules(facts.argv, &names, launch.as_ref());
        f.framework_argv_rules(facts.argv, &names, launch.as_ref());
        f.library_rules(facts.libraries);
        f
    }

    fn into_workload(self) -> Workload {
        let pick = |fws: &[Framework]| {
            KIND_PRIORITY
                .iter()
                .find(|(fw, _)| fws.contains(fw))
                .map(|&(_, kind)| kind)
        };
        let kind = if self.jupyter {
            WorkloadKind::Jupyter
        } else if self.llm_server {
            WorkloadKind::LlmServer
        } else if let Some(kind) =
            pick(&self.argv_frameworks).or_else(|| pick(&self.library_frameworks))
        {
            kind
        } else if self.python.is_some() {
            WorkloadKind::Python
        } else {
            WorkloadKind::Other
        };
        let mut frameworks = self.argv_frameworks;
        frameworks.extend(self.library_frameworks);
        frameworks.sort();
        frameworks.dedup();
        let mut evidence = self.kind_evidence;
        evidence.extend(self.framework_evidence);
        evidence.extend(self.python);
        let mut seen = Vec::with_capacity(evidence.len());
        for e in evidence {
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
        Workload {
            kind,
            frameworks,
            kernel_id: self.kernel_id,
            evidence: seen,
            ..Workload::default()
        }
    }

    fn add_framework_from_argv(&mut self, fw: Framework, evidence: String) {
        if !self.argv_frameworks.contains(&fw) {
            self.argv_frameworks.push(fw);
        }
        self.framework_evidence.push(evidence);
    }

    fn jupyter_rules(&mut self, argv: &[String], launch: Option<&PyLaunch<'_>>) {
        if let Some(launch) = launch {
            if let Some(m) = &launch.module {
                if m.name == "ipykernel_launcher"
                    || m.name == "ipykernel"
                    || m.name.starts_with("ipykernel.")
                {
                    self.jupyter = true;
                    self.kind_evidence.push(m.evidence());
                }
            } else if let Some(s) = &launch.script
                && s.stem().eq_ignore_ascii_case("ipykernel_launcher")
            {
                self.jupyter = true;
                self.kind_evidence.push(s.evidence());
            }
        }
        if let Some((index, file, id)) = connection_file(argv) {
            self.jupyter = true;
            self.kernel_id = Some(id.to_owned());
            self.kind_evidence
                .push(format!("argv[{index}] is connection file {file}"));
        }
    }

    fn llm_rules(&mut self, argv: &[String], names: &Names<'_>, launch: Option<&PyLaunch<'_>>) {
        // vLLM names its engine and worker processes `VLLM::EngineCore`,
        // `VLLM::Worker_TP0`, …; those hold the model and the KV cache.
        let title = argv.first().map(String::as_str).unwrap_or(names.name);
        for t in [title, names.name] {
            if t.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("vllm::")) {
                self.llm_server = true;
                self.kind_evidence.push(format!("process title is {t}"));
                break;
            }
        }

        if let Some(launch) = launch {
            if let Some(m) = &launch.module {
                let server = m.name.starts_with("vllm.entrypoints")
                    || m.name == "llama_cpp.server"
                    || m.name == "mlx_lm.server"
                    || (m.name == "mlx_lm" && arg_is(argv, launch.rest, "server"));
                if server {
                    self.llm_server = true;
                    self.kind_evidence.push(m.evidence());
                }
            }
            if let Some(s) = &launch.script {
                let stem = s.stem();
                if (stem.eq_ignore_ascii_case("vllm") && arg_is(argv, launch.rest, "serve"))
                    || stem.eq_ignore_ascii_case("mlx_lm.server")
                {
                    self.llm_server = true;
                    self.kind_evidence
                        .push(s.evidence_with_arg(argv, launch.rest));
                }
            }
        }

        // Ollama: the server, and the runner it starts per loaded model
        // (`ollama runner --model …/blobs/sha256-…`), or the older
        // `ollama_llama_server` runner binary. `ollama run` is a client.
        if let Some(e) = names.find_named(&["ollama_llama_server"]) {
            self.llm_server = true;
            self.kind_evidence.push(e);
        } else if let Some(e) = names.find_named(&["ollama"]) {
            for sub in ["serve", "runner"] {
                if arg_is(argv, 1, sub) {
                    self.llm_server = true;
                    self.kind_evidence.push(format!("{e}, argv[1] is {sub}"));
                }
            }
        }

        // llama.cpp and its relatives.
        if let Some(e) = names.find_named(&["llama-server", "llama-cli", "llama-run", "llamafile"])
        {
            self.llm_server = true;
            self.kind_evidence.push(e);
        } else if launch.is_none()
            && let Some((index, model)) = gguf_model(argv)
            && let Some(e) = names.find(|n| n.starts_with("llama-") || n == "server" || n == "main")
        {
            self.llm_server = true;
            self.kind_evidence.push(e);
            self.kind_evidence
                .push(format!("argv[{index}] is a GGUF model ({model})"));
        }
    }

    fn framework_argv_rules(
        &mut self,
        argv: &[String],
        names: &Names<'_>,
        launch: Option<&PyLaunch<'_>>,
    ) {
        if let Some(launch) = launch {
            if let Some(m) = &launch.module {
                let top = m.name.split('.').next().unwrap_or(m.name);
                let fw = match top {
                    "torch" | "deepspeed" => Some(Framework::Pytorch),
                    "accelerate"
                        if m.name == "accelerate.commands.launch"
                            || arg_is(argv, launch.rest, "launch") =>
                    {
                        Some(Framework::Pytorch)
                    }
                    "tensorflow" => Some(Framework::Tensorflow),
                    "jax" | "jaxlib" => Some(Framework::Jax),
                    "mlx" | "mlx_lm" | "mlx_vlm" | "mlx_whisper" => Some(Framework::Mlx),
                    _ => None,
                };
                if let Some(fw) = fw {
                    self.add_framework_from_argv(fw, m.evidence());
                }
            }
            if let Some(s) = &launch.script
                && let Some(fw) = launcher_framework(s.stem(), argv, launch.rest)
            {
                self.add_framework_from_argv(fw, s.evidence_with_arg(argv, launch.rest));
            }
            if let Some((index, code)) = launch.command {
                for (module, fw) in [
                    ("torch", Framework::Pytorch),
                    ("tensorflow", Framework::Tensorflow),
                    ("jax", Framework::Jax),
                    ("mlx", Framework::Mlx),
                ] {
                    if imports(code, module) {
                        self.add_framework_from_argv(fw, format!("argv[{index}] imports {module}"));
                    }
                }
            }
        } else {
            // A launcher run directly (the Python interpreter not recognised,
            // e.g. its path unreadable and argv rewritten).
            if let Some(e) = names.find_named(&["torchrun", "deepspeed"]) {
                self.add_framework_from_argv(Framework::Pytorch, e);
            }
            if let Some(e) = names.find_named(&["tensorflow_model_server"]) {
                self.add_framework_from_argv(Framework::Tensorflow, e);
            }
        }
    }

    fn library_rules(&mut self, libraries: &[String]) {
        for lib in libraries {
            let Some(fw) = library_framework(lib) else {
                continue;
            };
            if !self.library_frameworks.contains(&fw) {
                self.library_frameworks.push(fw);
                self.framework_evidence
                    .push(format!("maps {}", basename(lib)));
            }
        }
    }
}

/// The framework a Python launcher script stands for: `torchrun`,
/// `deepspeed`, `accelerate launch`, `mlx_lm.generate`, `mlx.launch`.
fn launcher_framework(stem: &str, argv: &[String], rest: usize) -> Option<Framework> {
    let stem = stem.to_ascii_lowercase();
    match stem.as_str() {
        "torchrun" | "deepspeed" => Some(Framework::Pytorch),
        "accelerate" if arg_is(argv, rest, "launch") => Some(Framework::Pytorch),
        s if s.starts_with("mlx_lm")
            || s.starts_with("mlx_vlm")
            || s.starts_with("mlx_whisper")
            || s == "mlx.launch" =>
        {
            Some(Framework::Mlx)
        }
        _ => None,
    }
}

/// The three names a process goes by: executable, `argv[0]`, process name.
#[derive(Debug)]
struct Names<'a> {
    exe: Option<&'a str>,
    argv0: Option<&'a str>,
    name: &'a str,
}

impl<'a> Names<'a> {
    fn of(facts: &ProcessFacts<'a>) -> Self {
        let exe = facts
            .exe
            .map(|e| e.strip_suffix(" (deleted)").unwrap_or(e))
            .map(basename)
            .filter(|b| !b.is_empty());
        let argv0 = facts
            .argv
            .first()
            .map(|a| basename(a))
            .filter(|b| !b.is_empty());
        Names {
            exe,
            argv0,
            name: facts.name,
        }
    }

    /// The first of the three names that satisfies `pred` (given the name
    /// lower-cased and without `.exe`), as evidence.
    fn find(&self, pred: impl Fn(&str) -> bool) -> Option<String> {
        let test = |n: &str| pred(&program_name(n));
        if let Some(e) = self.exe.filter(|e| test(e)) {
            return Some(format!("executable is {e}"));
        }
        if let Some(a) = self.argv0.filter(|a| test(a)) {
            return Some(format!("argv[0] is {a}"));
        }
        if !self.name.is_empty() && test(self.name) {
            return Some(format!("process name is {}", self.name));
        }
        None
    }

    /// Like [`Names::find`] for exact program names, also matching a process
    /// name cut to [`COMM_LEN`] bytes.
    fn find_named(&self, targets: &[&str]) -> Option<String> {
        if let Some(e) = self.find(|n| targets.contains(&n)) {
            return Some(e);
        }
        let name = program_name(self.name);
        if name.len() == COMM_LEN
            && targets
                .iter()
                .any(|t| t.len() > COMM_LEN && t.get(..COMM_LEN) == Some(name.as_str()))
        {
            return Some(format!("process name is {}", self.name));
        }
        None
    }

    fn find_python(&self) -> Option<String> {
        self.find(|n| PYTHON_NAME.is_match(n))
    }
}

/// A file name lower-cased and without a trailing `.exe`.
fn program_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.strip_suffix(".exe") {
        Some(s) => s.to_owned(),
        None => lower,
    }
}

/// The last component of a path written with `/` or `\` separators.
fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed)
}

/// True if `argv[index]` is `word`.
fn arg_is(argv: &[String], index: usize, word: &str) -> bool {
    argv.get(index).is_some_and(|a| a == word)
}

/// One argv element that names what Python runs: a module or a script.
#[derive(Debug)]
struct Target<'a> {
    /// Index in argv of the element holding the name.
    index: usize,
    /// The element as written (`ipykernel_launcher`, `-mipykernel`, `/venv/bin/torchrun`).
    raw: &'a str,
    /// The module name or script path.
    name: &'a str,
}

impl Target<'_> {
    fn evidence(&self) -> String {
        format!("argv[{}] is {}", self.index, basename(self.raw))
    }

    /// Evidence that also names the subcommand that follows (`accelerate launch`).
    fn evidence_with_arg(&self, argv: &[String], rest: usize) -> String {
        match argv.get(rest) {
            Some(sub) if !sub.starts_with('-') && !sub.is_empty() => {
                format!("{}, argv[{rest}] is {sub}", self.evidence())
            }
            _ => self.evidence(),
        }
    }

    /// A script's file name without `.py`.
    fn stem(&self) -> &str {
        let b = basename(self.name);
        b.strip_suffix(".py").unwrap_or(b)
    }
}

/// How a Python interpreter was told what to run, from its argv.
#[derive(Debug, Default)]
struct PyLaunch<'a> {
    /// `-m module`.
    module: Option<Target<'a>>,
    /// The script path, the first argument that is not an option.
    script: Option<Target<'a>>,
    /// `-c code`: index and code.
    command: Option<(usize, &'a str)>,
    /// Index of the first argument passed on to the module or script.
    rest: usize,
}

impl<'a> PyLaunch<'a> {
    /// Walk the interpreter's options (`-u`, `-X dev`, `-Wignore`, `-um mod`)
    /// up to the module, code or script they lead to.
    fn parse(argv: &'a [String]) -> Self {
        let mut launch = PyLaunch::default();
        let mut i = 1;
        while let Some(arg) = argv.get(i) {
            let arg = arg.as_str();
            if arg == "--" {
                if let Some(script) = argv.get(i + 1) {
                    launch.script = Some(Target {
                        index: i + 1,
                        raw: script,
                        name: script,
                    });
                }
                launch.rest = i + 2;
                return launch;
            }
            if arg == "-" || arg.is_empty() {
                return launch;
            }
            if let Some(long) = arg.strip_prefix("--") {
                i += if long == "check-hash-based-pycs" {
                    2
                } else {
                    1
                };
                continue;
            }
            let Some(flags) = arg.strip_prefix('-') else {
                launch.script = Some(Target {
                    index: i,
                    raw: arg,
                    name: arg,
                });
                launch.rest = i + 1;
                return launch;
            };
            let mut next = i + 1;
            for (pos, ch) in flags.char_indices() {
                if !matches!(ch, 'm' | 'c' | 'X' | 'W') {
                    continue;
                }
                let inline = &flags[pos + ch.len_utf8()..];
                let (index, raw, value) = if inline.is_empty() {
                    next = i + 2;
                    match argv.get(i + 1) {
                        Some(v) => (i + 1, v.as_str(), v.as_str()),
                        None => return launch,
                    }
                } else {
                    (i, arg, inline)
                };
                match ch {
                    'm' => {
                        launch.module = Some(Target {
                            index,
                            raw,
                            name: value,
                        });
                        launch.rest = index + 1;
                        return launch;
                    }
                    'c' => {
                        launch.command = Some((index, value));
                        launch.rest = index + 1;
                        return launch;
                    }
                    _ => break,
                }
            }
            i = next;
        }
        launch
    }
}

/// True if Python source `code` imports top-level package `module`
/// (`import torch`, `import numpy, torch as t`, `from torch import nn`).
fn imports(code: &str, module: &str) -> bool {
    let top = |name: &str| {
        let name = name.split_whitespace().next().unwrap_or("");
        name.split('.').next() == Some(module)
    };
    code.split([';', '\n']).any(|stmt| {
        let stmt = stmt.trim();
        if let Some(names) = stmt.strip_prefix("import ") {
            names.split(',').any(top)
        } else if let Some(rest) = stmt.strip_prefix("from ") {
            top(rest)
        } else {
            false
        }
    })
}

/// A Jupyter connection file in argv: index, file name and kernel id. A
/// name longer than a file name can be ([`NAME_MAX`]) names no file, so it
/// is no connection file: its "kernel id" is only text a user put on a
/// command line, and would be copied into every event about the process.
fn connection_file(argv: &[String]) -> Option<(usize, &str, &str)> {
    let mut i = 1;
    while let Some(arg) = argv.get(i) {
        let arg = arg.as_str();
        if arg == "--existing" {
            // A client attaching to a running kernel.
            i += 2;
            continue;
        }
        let (index, value) = match arg {
            "-f" | "--f" | "--connection-file" | "--connection_file" => match argv.get(i + 1) {
                Some(v) => (i + 1, v.as_str()),
                None => break,
            },
            _ => {
                let value = ["-f=", "--f=", "--connection-file=", "--connection_file="]
                    .iter()
                    .find_map(|p| arg.strip_prefix(p));
                match value {
                    Some(v) => (i, v),
                    None if arg.starts_with('-') => {
                        i += 1;
                        continue;
                    }
                    // A bare path, as IRkernel (`--args FILE`) and IJulia take it.
                    None => (i, arg),
                }
            }
        };
        let file = basename(value.trim_matches(['"', '\'']));
        if let Some(id) = Some(file)
            .filter(|f| f.len() <= NAME_MAX)
            .and_then(|f| f.strip_prefix("kernel-"))
            .and_then(|r| r.strip_suffix(".json"))
            .filter(|id| !id.is_empty())
        {
            return Some((index, file, id));
        }
        i = index + 1;
    }
    None
}

/// A `.gguf` model in argv (`-m model.gguf`, `--model=model.gguf`): index and file name.
fn gguf_model(argv: &[String]) -> Option<(usize, &str)> {
    argv.iter().enumerate().skip(1).find_map(|(i, arg)| {
        let value = arg.rsplit_once('=').map_or(arg.as_str(), |(_, v)| v);
        let file = basename(value);
        file.to_ascii_lowercase()
            .ends_with(".gguf")
            .then_some((i, file))
    })
}

/// The framework a mapped library belongs to, if any.
fn library_framework(lib: &str) -> Option<Framework> {
    let stem = library_stem(basename(lib));
    if let Some(&(_, fw)) = LIBRARY_STEMS.iter().find(|(s, _)| *s == stem) {
        return Some(fw);
    }
    // With a full path: a file inside a framework's package directory.
    let parts: Vec<&str> = lib.split(['/', '\\']).collect();
    parts.windows(2).find_map(|w| {
        if w[0] != "site-packages" && w[0] != "dist-packages" {
            return None;
        }
        PACKAGE_DIRS
            .iter()
            .find(|(dir, _)| *dir == w[1])
            .map(|&(_, fw)| fw)
    })
}

/// A library's name without version and platform suffixes, lower-cased:
/// `libtensorflow_framework.so.2` → `libtensorflow_framework`,
/// `xla_extension.cpython-311-x86_64-linux-gnu.so` → `xla_extension`,
/// `libcudart-d0da41ae.so.11.0` → `libcudart` (auditwheel appends one or
/// more `-<8 hex digits>` hashes to the libraries it vendors).
fn library_stem(file: &str) -> String {
    let lower = file.to_ascii_lowercase();
    let mut stem = lower.split('.').next().unwrap_or("");
    while let Some((head, tail)) = stem.rsplit_once('-') {
        if tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_hexdigit()) {
            stem = head;
        } else {
            break;
        }
    }
    stem.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classified(name: &str, exe: &str, argv: &[&str]) -> Workload {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        classify(&ProcessFacts {
            name,
            exe: Some(exe),
            argv: &argv,
            libraries: &[],
        })
    }

    /// The note of an exec goes after the classification's own evidence,
    /// and a later change replaces it: one line says what it ran before.
    #[test]
    fn a_program_change_is_one_line_after_the_evidence() {
        let mut w = classified(
            "python3",
            "/usr/bin/python3",
            &["python3", "-c", "import torch"],
        );
        let at = Timestamp(1_700_000_000_000);
        EarlierProgram {
            name: "sh".into(),
            exec: true,
            noticed: at,
        }
        .note(&mut w);
        assert_eq!(w.evidence[0], "argv[2] imports torch");
        assert_eq!(
            program_change(&w),
            Some("exec'd from sh (noticed 2023-11-14T22:13:20.000Z)")
        );
        EarlierProgram {
            name: "env".into(),
            exec: false,
            noticed: at,
        }
        .note(&mut w);
        assert_eq!(
            w.evidence.iter().filter(|e| is_program_change(e)).count(),
            1
        );
        assert_eq!(
            program_change(&w),
            Some("name changed from env (noticed 2023-11-14T22:13:20.000Z)")
        );
        assert_eq!(program_change(&Workload::default()), None);
    }

    /// A name as long as the OS allows a file name, and longer, is cut to
    /// [`NAME_MAX`] in the note.
    #[test]
    fn a_program_change_note_is_bounded() {
        let note = EarlierProgram {
            name: "x".repeat(10 * NAME_MAX),
            exec: true,
            noticed: Timestamp(0),
        }
        .evidence();
        assert!(note.len() < NAME_MAX + 64, "{}", note.len());
    }

    #[test]
    fn a_library_path_gives_its_site_packages() {
        assert_eq!(
            site_packages_dir(
                "/home/ada/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
            ),
            Some("/home/ada/venv/lib/python3.11/site-packages")
        );
        assert_eq!(
            site_packages_dir(
                "/usr/lib/python3/dist-packages/tensorflow/libtensorflow_framework.so.2"
            ),
            Some("/usr/lib/python3/dist-packages")
        );
        assert_eq!(
            site_packages_dir("/e/lib/python3.9/site-packages/a/site-packages/b.so"),
            Some("/e/lib/python3.9/site-packages")
        );
        assert_eq!(
            site_packages_dir("/usr/lib/x86_64-linux-gnu/libcudart.so.12"),
            None
        );
        assert_eq!(site_packages_dir("/x/site-packages"), None);
    }

    #[test]
    fn translation_is_evidence_recorded_once() {
        let mut w = classified(
            "python3.11",
            "/usr/local/bin/python3.11",
            &[
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/tmp/kernel-1.json",
            ],
        );
        assert!(!is_translated(&w));
        mark_translated(&mut w);
        mark_translated(&mut w);
        assert!(is_translated(&w));
        let marks = w
            .evidence
            .iter()
            .filter(|e| *e == TRANSLATED_EVIDENCE)
            .count();
        assert_eq!(marks, 1);
        assert_eq!(w.kind, WorkloadKind::Jupyter, "the kind does not change");
    }

    #[test]
    fn translated_ml_work_is_told_what_to_install() {
        let mut tf = classified(
            "python3.9",
            "/usr/local/bin/python3.9",
            &["python3.9", "-m", "tensorflow.tools.train"],
        );
        mark_translated(&mut tf);
        let advice = translated_advice(&tf).expect("TensorFlow is ML work");
        assert!(advice.contains("Rosetta 2"), "{advice}");
        assert!(
            advice.contains("Miniforge") && advice.contains("universal2"),
            "{advice}"
        );
        assert!(
            advice.contains("tensorflow-macos") && advice.contains("2.13"),
            "{advice}"
        );

        let ollama = classified("ollama", "/usr/local/bin/ollama", &["ollama", "serve"]);
        let advice = translated_advice(&ollama).expect("a model server is ML work");
        assert!(advice.contains("arm64) build of the server"), "{advice}");
        assert!(!advice.contains("tensorflow"), "{advice}");
    }

    #[test]
    fn translated_programs_that_are_not_ml_get_no_advice() {
        let zsh = classified("zsh", "/bin/zsh", &["-zsh"]);
        assert_eq!(translated_advice(&zsh), None);
    }

    /// One case of `tests/fixtures/workload/cases.json`.
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Case {
        /// Where the command line comes from (captured, or which docs).
        source: String,
        name: String,
        exe: Option<String>,
        argv: Vec<String>,
        #[serde(default)]
        libraries: Vec<String>,
        expect: Expect,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Expect {
        kind: WorkloadKind,
        frameworks: Vec<Framework>,
        kernel_id: Option<String>,
        /// `wants_library_scan` before libraries are known, where stated.
        library_scan: Option<bool>,
    }

    #[test]
    fn fixture_cases_classify_as_expected() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/workload/cases.json"
        ));
        let cases: Vec<Case> = serde_json::from_str(text).expect("cases.json parses");
        assert!(cases.len() >= 30);
        for case in &cases {
            assert!(!case.source.is_empty());
            let facts = ProcessFacts {
                name: &case.name,
                exe: case.exe.as_deref(),
                argv: &case.argv,
                libraries: &case.libraries,
            };
            let w = classify(&facts);
            let ctx = format!("{case:#?}\n=> {w:#?}");
            assert_eq!(w.kind, case.expect.kind, "{ctx}");
            assert_eq!(w.frameworks, case.expect.frameworks, "{ctx}");
            assert_eq!(w.kernel_id, case.expect.kernel_id, "{ctx}");
            assert_eq!(
                w.kind == WorkloadKind::Other,
                w.evidence.is_empty(),
                "{ctx}"
            );
            if let Some(scan) = case.expect.library_scan {
                let before_scan = ProcessFacts {
                    libraries: &[],
                    ..facts
                };
                assert_eq!(wants_library_scan(&before_scan), scan, "{ctx}");
            }
        }
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    fn classify_argv(name: &str, exe: Option<&str>, args: &[&str]) -> Workload {
        let argv = argv(args);
        classify(&ProcessFacts {
            name,
            exe,
            argv: &argv,
            libraries: &[],
        })
    }

    fn classify_libs(args: &[&str], libs: &[&str]) -> Workload {
        let argv = argv(args);
        let libraries: Vec<String> = libs.iter().map(|s| (*s).to_owned()).collect();
        classify(&ProcessFacts {
            name: "python3",
            exe: Some("/usr/bin/python3.11"),
            argv: &argv,
            libraries: &libraries,
        })
    }

    #[test]
    fn ipykernel_launcher_is_jupyter_with_kernel_id() {
        let w = classify_argv(
            "python",
            Some("/usr/bin/python3.11"),
            &[
                "python",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/run/kernel-abc-123.json",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.kernel_id.as_deref(), Some("abc-123"));
        assert_eq!(w.evidence[0], "argv[2] is ipykernel_launcher");
    }

    #[test]
    fn equals_form_connection_file_gives_v2_kernel_id() {
        let w = classify_argv(
            "python",
            None,
            &[
                "python",
                "-m",
                "ipykernel_launcher",
                "--f=/x/kernel-v2-28141kSC9n.json",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.kernel_id.as_deref(), Some("v2-28141kSC9n"));
    }

    #[test]
    fn a_connection_file_name_longer_than_a_file_name_gives_no_kernel_id() {
        let longest = format!("/run/kernel-{}.json", "a".repeat(NAME_MAX - 12));
        let w = classify_argv("sh", None, &["sh", &longest]);
        assert_eq!(w.kernel_id.map(|id| id.len()), Some(NAME_MAX - 12));
        let too_long = format!("/run/kernel-{}.json", "a".repeat(3950));
        let w = classify_argv("sh", None, &["sh", "-c", "sleep 9", &too_long]);
        assert_eq!(w.kernel_id, None);
        assert_eq!(w.kind, WorkloadKind::Other, "{:?}", w.evidence);
        assert!(w.evidence.iter().all(|e| e.len() < 100), "{:?}", w.evidence);
    }

    #[test]
    fn combined_python_flags_still_find_the_module() {
        let w = classify_argv(
            "python3",
            None,
            &["python3", "-um", "ipykernel", "-f=/k/kernel-1.json"],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        let w = classify_argv("python3", None, &["python3", "-mipykernel_launcher"]);
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.kernel_id, None);
    }

    #[test]
    fn python_option_values_are_not_mistaken_for_the_script() {
        let w = classify_argv(
            "python3",
            None,
            &[
                "python3",
                "-X",
                "dev",
                "-W",
                "ignore",
                "/opt/torchrun",
                "train.py",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Pytorch);
        let w = classify_argv("python3", None, &["python3", "-X", "torchrun", "app.py"]);
        assert_eq!(w.kind, WorkloadKind::Python);
    }

    #[test]
    fn windows_quoted_connection_file_is_recognised() {
        let w = classify_argv(
            "python.exe",
            Some(r"C:\Python311\python.exe"),
            &[
                r"C:\Python311\python.exe",
                "-m",
                "ipykernel_launcher",
                r#"--f="c:\Users\me\AppData\Roaming\jupyter\runtime\kernel-v2-16192C4P.json""#,
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.kernel_id.as_deref(), Some("v2-16192C4P"));
    }

    #[test]
    fn non_python_kernel_with_connection_file_is_jupyter() {
        let w = classify_argv(
            "xcpp",
            Some("/opt/conda/bin/xcpp"),
            &[
                "/opt/conda/bin/xcpp",
                "-f",
                "/run/jupyter/kernel-42.json",
                "-std=c++17",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.evidence, ["argv[2] is connection file kernel-42.json"]);
    }

    #[test]
    fn existing_connection_file_is_a_client_not_a_kernel() {
        let w = classify_argv(
            "jupyter-console",
            None,
            &[
                "/usr/bin/python3",
                "/usr/bin/jupyter-console",
                "--existing",
                "kernel-42.json",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Python);
        assert_eq!(w.kernel_id, None);
    }

    #[test]
    fn torchrun_script_is_pytorch() {
        let w = classify_argv(
            "torchrun",
            Some("/usr/bin/python3.11"),
            &[
                "/venv/bin/python",
                "/venv/bin/torchrun",
                "--nproc-per-node=8",
                "train.py",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Pytorch);
        assert_eq!(w.frameworks, [Framework::Pytorch]);
        assert_eq!(w.evidence[0], "argv[1] is torchrun");
    }

    #[test]
    fn accelerate_needs_launch() {
        let launch = classify_argv(
            "accelerate",
            None,
            &["python", "/v/bin/accelerate", "launch", "t.py"],
        );
        assert_eq!(launch.kind, WorkloadKind::Pytorch);
        assert_eq!(
            launch.evidence[0],
            "argv[1] is accelerate, argv[2] is launch"
        );
        let config = classify_argv(
            "accelerate",
            None,
            &["python", "/v/bin/accelerate", "config"],
        );
        assert_eq!(config.kind, WorkloadKind::Python);
    }

    #[test]
    fn script_name_alone_is_not_evidence() {
        let w = classify_argv("python3", None, &["python3", "train_pytorch_model.py"]);
        assert_eq!(w.kind, WorkloadKind::Python);
        assert!(w.frameworks.is_empty());
    }

    #[test]
    fn dash_c_import_is_evidence() {
        let w = classify_argv(
            "python3",
            None,
            &["python3", "-c", "import numpy, torch as t; t.ones(1)"],
        );
        assert_eq!(w.kind, WorkloadKind::Pytorch);
        assert_eq!(w.evidence[0], "argv[2] imports torch");
        let w = classify_argv("python3", None, &["python3", "-c", "import torchvision"]);
        assert_eq!(w.kind, WorkloadKind::Python);
    }

    #[test]
    fn libraries_with_version_suffixes_match() {
        let w = classify_libs(
            &["python3", "job.py"],
            &["libtensorflow_framework.so.2", "libcudart.so.12"],
        );
        assert_eq!(w.kind, WorkloadKind::Tensorflow);
        assert_eq!(w.frameworks, [Framework::Tensorflow, Framework::Cuda]);
        assert!(
            w.evidence
                .contains(&"maps libtensorflow_framework.so.2".to_owned())
        );
    }

    #[test]
    fn auditwheel_hashed_and_cpython_suffixed_libraries_match() {
        assert_eq!(library_stem("libcudart-d0da41ae.so.11.0"), "libcudart");
        assert_eq!(
            library_stem("libgfortran-040039e1-0352e75f.so.5.0.0"),
            "libgfortran"
        );
        assert_eq!(
            library_stem("xla_extension.cpython-311-x86_64-linux-gnu.so"),
            "xla_extension"
        );
        assert_eq!(library_framework("libc10.so"), Some(Framework::Pytorch));
        assert_eq!(library_framework("libcrypto.so.3"), None);
    }

    #[test]
    fn site_packages_path_names_the_framework() {
        assert_eq!(
            library_framework("/v/lib/python3.12/site-packages/mlx/core.cpython-312-darwin.so"),
            Some(Framework::Mlx)
        );
        assert_eq!(library_framework("/opt/torch/lib/libfoo.so"), None);
    }

    #[test]
    fn argv_framework_decides_over_libraries() {
        let w = classify_libs(
            &["python3", "-m", "jax.collect_profile"],
            &["libtorch_cpu.so"],
        );
        assert_eq!(w.kind, WorkloadKind::Jax);
        assert_eq!(w.frameworks, [Framework::Pytorch, Framework::Jax]);
    }

    #[test]
    fn jax_outranks_torch_and_tensorflow_in_libraries() {
        let w = classify_libs(
            &["python3", "train.py"],
            &[
                "libtorch_cpu.so",
                "_pywrap_tensorflow_internal.so",
                "libjax_common.so",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::Jax);
        assert_eq!(
            w.frameworks,
            [Framework::Pytorch, Framework::Tensorflow, Framework::Jax]
        );
    }

    #[test]
    fn cuda_alone_gives_no_kind() {
        let w = classify_libs(&["python3", "app.py"], &["libcudart.so.12"]);
        assert_eq!(w.kind, WorkloadKind::Python);
        assert_eq!(w.frameworks, [Framework::Cuda]);
    }

    #[test]
    fn jupyter_kernel_keeps_its_kind_with_frameworks() {
        let w = classify_libs(
            &[
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/r/kernel-9.json",
            ],
            &["libtorch_cuda.so", "libc10.so"],
        );
        assert_eq!(w.kind, WorkloadKind::Jupyter);
        assert_eq!(w.frameworks, [Framework::Pytorch]);
        assert_eq!(
            w.evidence.iter().filter(|e| e.starts_with("maps")).count(),
            1
        );
    }

    #[test]
    fn llama_server_is_llm_server() {
        let w = classify_argv(
            "llama-server",
            Some("/usr/local/bin/llama-server"),
            &["llama-server", "-hf", "ggml-org/gemma-3-1b-it-GGUF"],
        );
        assert_eq!(w.kind, WorkloadKind::LlmServer);
        assert_eq!(w.evidence, ["executable is llama-server"]);
    }

    #[test]
    fn old_llama_cpp_main_needs_a_gguf_model() {
        let w = classify_argv(
            "main",
            None,
            &["./main", "-m", "models/7B/ggml-model-q4_0.gguf"],
        );
        assert_eq!(w.kind, WorkloadKind::LlmServer);
        let w = classify_argv("main", None, &["./main", "-m", "model.bin"]);
        assert_eq!(w.kind, WorkloadKind::Other);
    }

    #[test]
    fn ollama_serve_and_runner_are_servers_but_run_is_a_client() {
        let serve = classify_argv(
            "ollama",
            Some("/usr/local/bin/ollama"),
            &["/usr/local/bin/ollama", "serve"],
        );
        assert_eq!(serve.kind, WorkloadKind::LlmServer);
        assert_eq!(serve.evidence, ["executable is ollama, argv[1] is serve"]);
        let run = classify_argv("ollama", None, &["ollama", "run", "llama3"]);
        assert_eq!(run.kind, WorkloadKind::Other);
    }

    #[test]
    fn truncated_comm_matches_long_program_name() {
        let w = classify_argv("ollama_llama_se", None, &[]);
        assert_eq!(w.kind, WorkloadKind::LlmServer);
        assert_eq!(w.evidence, ["process name is ollama_llama_se"]);
        // Shorter than 15 bytes: not a truncation.
        let w = classify_argv("ollama_llama", None, &[]);
        assert_eq!(w.kind, WorkloadKind::Other);
    }

    #[test]
    fn vllm_serve_and_entrypoints_are_servers() {
        let w = classify_argv(
            "vllm",
            None,
            &["/v/bin/python3", "/v/bin/vllm", "serve", "Qwen/Qwen3-8B"],
        );
        assert_eq!(w.kind, WorkloadKind::LlmServer);
        let w = classify_argv(
            "python3",
            None,
            &[
                "python3",
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "m",
            ],
        );
        assert_eq!(w.kind, WorkloadKind::LlmServer);
    }

    #[test]
    fn vllm_engine_core_title_is_a_server() {
        let w = classify_argv(
            "VLLM::EngineCor",
            Some("/usr/bin/python3.12"),
            &["VLLM::EngineCore"],
        );
        assert_eq!(w.kind, WorkloadKind::LlmServer);
        assert_eq!(w.evidence[0], "process title is VLLM::EngineCore");
    }

    #[test]
    fn python_interpreter_forms() {
        for exe in [
            "/usr/bin/python3.11",
            "/home/u/proj/.venv/bin/python",
            "C:\\Python312\\pythonw.exe",
            "/usr/bin/python3.13t",
            "/Library/Frameworks/Python.framework/Versions/3.12/Resources/Python.app/Contents/MacOS/Python",
        ] {
            let w = classify_argv("x", Some(exe), &["x"]);
            assert_eq!(w.kind, WorkloadKind::Python, "{exe}");
        }
        for not_python in [
            "/usr/bin/python-config",
            "/usr/bin/ipython",
            "/usr/bin/pythonista",
        ] {
            let w = classify_argv("x", Some(not_python), &["x"]);
            assert_eq!(w.kind, WorkloadKind::Other, "{not_python}");
        }
    }

    #[test]
    fn deleted_executable_suffix_is_ignored() {
        let w = classify_argv("x", Some("/usr/bin/python3.11 (deleted)"), &[]);
        assert_eq!(w.kind, WorkloadKind::Python);
        assert_eq!(w.evidence, ["executable is python3.11"]);
    }

    #[test]
    fn python_found_from_argv0_when_exe_unreadable() {
        let w = classify_argv("python3", None, &["/usr/bin/python3", "server.py"]);
        assert_eq!(w.evidence, ["argv[0] is python3"]);
    }

    #[test]
    fn other_has_no_evidence() {
        let w = classify_argv("bash", Some("/usr/bin/bash"), &["-bash"]);
        assert_eq!(w, Workload::default());
    }

    #[test]
    fn mlx_lm_is_mlx_and_its_server_is_an_llm_server() {
        let generate = classify_argv(
            "Python",
            None,
            &[
                "/opt/homebrew/bin/python3",
                "/v/bin/mlx_lm.generate",
                "--model",
                "m",
            ],
        );
        assert_eq!(generate.kind, WorkloadKind::Mlx);
        let server = classify_argv("python3", None, &["python3", "-m", "mlx_lm.server"]);
        assert_eq!(server.kind, WorkloadKind::LlmServer);
        assert_eq!(server.frameworks, [Framework::Mlx]);
    }

    #[test]
    fn library_scan_wanted_for_python_without_known_framework() {
        let args = argv(&["python3", "train.py"]);
        let facts = ProcessFacts {
            name: "python3",
            exe: None,
            argv: &args,
            libraries: &[],
        };
        assert!(wants_library_scan(&facts));
        let libs = vec!["libc.so.6".to_owned()];
        assert!(!wants_library_scan(&ProcessFacts {
            libraries: &libs,
            ..facts
        }));
    }

    #[test]
    fn library_scan_not_wanted_when_argv_names_the_framework_or_not_python() {
        let torchrun = argv(&["python3", "/v/bin/torchrun", "t.py"]);
        assert!(!wants_library_scan(&ProcessFacts {
            name: "torchrun",
            exe: None,
            argv: &torchrun,
            libraries: &[],
        }));
        let bash = argv(&["bash"]);
        assert!(!wants_library_scan(&ProcessFacts {
            name: "bash",
            exe: None,
            argv: &bash,
            libraries: &[],
        }));
    }

    #[test]
    fn library_scan_wanted_for_non_python_kernel() {
        let r = argv(&[
            "/usr/lib/R/bin/exec/R",
            "--slave",
            "-e",
            "IRkernel::main()",
            "--args",
            "/r/kernel-7.json",
        ]);
        assert!(wants_library_scan(&ProcessFacts {
            name: "R",
            exe: None,
            argv: &r,
            libraries: &[],
        }));
    }
}
