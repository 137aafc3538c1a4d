//! One finding of `headroom doctor`: what a collector or a privilege check
//! found on this machine and what to do about it. Each sampler writes its
//! own checks and the doctor renders them, so the type lives below both.

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// Works.
    Ok,
    /// Works partly, or needs something (root, a kernel option) to work
    /// fully. The daemon runs.
    Warn,
    /// Something the daemon needs does not work. The exit status is 1.
    Fail,
    /// Not available on this machine (no GPU, not this kind of Mac), and
    /// not needed.
    NotApplicable,
}

impl CheckStatus {
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
            CheckStatus::NotApplicable => "n/a",
        }
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub status: CheckStatus,
    /// Short, stable name (`psi-trigger`, `gpu`), for searching reports.
    pub name: &'static str,
    /// What was found, with the numbers.
    pub detail: String,
    /// What to do about it, where something can be done.
    pub next: Option<String>,
}

impl Check {
    pub fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self::new(CheckStatus::Ok, name, detail, None::<String>)
    }

    pub fn new(
        status: CheckStatus,
        name: &'static str,
        detail: impl Into<String>,
        next: Option<impl Into<String>>,
    ) -> Self {
        Self {
            status,
            name,
            detail: detail.into(),
            next: next.map(Into::into),
        }
    }

    pub fn warn(name: &'static str, detail: impl Into<String>, next: impl Into<String>) -> Self {
        Self::new(CheckStatus::Warn, name, detail, Some(next))
    }

    pub fn fail(name: &'static str, detail: impl Into<String>, next: impl Into<String>) -> Self {
        Self::new(CheckStatus::Fail, name, detail, Some(next))
    }

    pub fn not_applicable(name: &'static str, detail: impl Into<String>) -> Self {
        Self::new(CheckStatus::NotApplicable, name, detail, None::<String>)
    }
}
