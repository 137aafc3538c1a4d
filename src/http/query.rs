//! Query-string and path-parameter parsing for the JSON API, as pure functions.
//!
//! Each endpoint's parser takes the raw query string (`None` when there is no
//! `?`) and returns either the parsed parameters or a [`QueryError`] that names
//! the offending parameter, says what it accepts, and quotes what was given.
//! Unknown and repeated parameters are errors too, so a typo (`?limt=5`) is
//! reported instead of silently ignored. Nothing here touches the state: the
//! functions can be called (and fuzzed) on any input.

use std::borrow::Cow;
use std::fmt;
use std::time::SystemTime;

use crate::model::{Timestamp, WorkloadKind};

/// A bad query or path parameter, answered with 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The parameter's name, as in the URL.
    pub parameter: String,
    /// What is wrong and what is accepted.
    pub message: String,
    /// The value given, if the parameter had one.
    pub value: Option<String>,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter {:?}: {}", self.parameter, self.message)?;
        if let Some(v) = &self.value {
            write!(f, " (got {v:?})")?;
        }
        Ok(())
    }
}

impl std::error::Error for QueryError {}

/// Longest value quoted back in an error.
const MAX_QUOTED: usize = 64;

fn error(parameter: &str, message: impl Into<String>, value: Option<&str>) -> QueryError {
    QueryError {
        parameter: parameter.chars().take(MAX_QUOTED).collect(),
        message: message.into(),
        value: value.map(|v| {
            let mut q: String = v.chars().take(MAX_QUOTED).collect();
            if v.chars().count() > MAX_QUOTED {
                q.push('…');
            }
            q
        }),
    }
}

/// A decoded `name=value` pair.
type Pair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// The decoded `name=value` pairs of a query, checked against the names an
/// endpoint accepts: each at most once.
fn pairs<'a>(query: Option<&'a str>, accepted: &[&str]) -> Result<Vec<Pair<'a>>, QueryError> {
    let mut out: Vec<Pair<'a>> = Vec::new();
    for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if !accepted.contains(&name.as_ref()) {
            let takes = if accepted.is_empty() {
                "this endpoint takes no parameters".to_string()
            } else {
                format!("this endpoint takes: {}", accepted.join(", "))
            };
            return Err(error(&name, format!("unknown parameter; {takes}"), None));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(error(&name, "given more than once; give it once", None));
        }
        out.push((name, value));
    }
    Ok(out)
}

/// A whole number in `min..=max`.
fn number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, QueryError> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(error(
            name,
            format!("must be a whole number from {min} to {max}"),
            Some(value),
        )),
    }
}

/// For endpoints that take no parameters: any parameter is an error.
pub fn none(query: Option<&str>) -> Result<(), QueryError> {
    pairs(query, &[]).map(drop)
}

/// How `/api/v1/processes` orders its rows (largest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    Footprint,
    /// Growth rate; processes without a known rate come last.
    Growth,
    /// GPU memory; processes without GPU memory come last.
    Gpu,
}

/// Which processes `/api/v1/processes` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadFilter {
    /// Every ML workload (`Workload::is_ml`) and every member of a job.
    Ml,
    /// Processes of this kind, directly or through a framework seen in them.
    Kind(WorkloadKind),
}

/// The parameters of `/api/v1/processes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessesQuery {
    pub sort: SortKey,
    pub limit: usize,
    pub workload: Option<WorkloadFilter>,
}

impl ProcessesQuery {
    pub const DEFAULT_LIMIT: usize = 50;
    pub const MAX_LIMIT: usize = 100_000;
}

/// `?sort=footprint|growth|gpu&limit=N&workload=KIND|ml`.
pub fn processes(query: Option<&str>) -> Result<ProcessesQuery, QueryError> {
    let mut q = ProcessesQuery {
        sort: SortKey::default(),
        limit: ProcessesQuery::DEFAULT_LIMIT,
        workload: None,
    };
    for (name, value) in pairs(query, &["sort", "limit", "workload"])? {
        match name.as_ref() {
            "sort" => {
                q.sort = match value.as_ref() {
                    "footprint" => SortKey::Footprint,
                    "growth" => SortKey::Growth,
                    "gpu" => SortKey::Gpu,
                    _ => {
                        return Err(error(
                            "sort",
                            "must be one of: footprint, growth, gpu",
                            Some(&value),
                        ));
                    }
                }
            }
            "limit" => {
                let n = number("limit", &value, 1, ProcessesQuery::MAX_LIMIT as u64)?;
                q.limit = usize::try_from(n).unwrap_or(ProcessesQuery::MAX_LIMIT);
            }
            _ => q.workload = Some(workload(&value)?),
        }
    }
    Ok(q)
}

fn workload(value: &str) -> Result<WorkloadFilter, QueryError> {
    if value == "ml" {
        return Ok(WorkloadFilter::Ml);
    }
    WorkloadKind::ALL
        .iter()
        .find(|k| k.as_str() == value)
        .map(|k| WorkloadFilter::Kind(*k))
        .ok_or_else(|| {
            let kinds: Vec<&str> = WorkloadKind::ALL.iter().map(|k| k.as_str()).collect();
            error(
                "workload",
                format!("must be ml or one of: {}", kinds.join(", ")),
                Some(value),
            )
        })
}

/// The parameters of `/api/v1/history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryQuery {
    pub minutes: u32,
}

impl HistoryQuery {
    pub const DEFAULT_MINUTES: u32 = 10;
    /// The longest history the daemon can keep (`daemon.history` is at most 24h).
    pub const MAX_MINUTES: u32 = 24 * 60;
}

/// `?minutes=N`, 1 to 1440.
pub fn history(query: Option<&str>) -> Result<HistoryQuery, QueryError> {
    let mut q = HistoryQuery {
        minutes: HistoryQuery::DEFAULT_MINUTES,
    };
    for (_, value) in pairs(query, &["minutes"])? {
        let n = number("minutes", &value, 1, u64::from(HistoryQuery::MAX_MINUTES))?;
        q.minutes = u32::try_from(n).unwrap_or(HistoryQuery::MAX_MINUTES);
    }
    Ok(q)
}

/// The parameters of `/api/v1/events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsQuery {
    /// Only events at or after this instant.
    pub since: Option<Timestamp>,
    /// At most this many, the most recent.
    pub limit: usize,
}

impl EventsQuery {
    pub const DEFAULT_LIMIT: usize = 1000;
    pub const MAX_LIMIT: usize = 100_000;
}

impl Default for EventsQuery {
    fn default() -> Self {
        Self {
            since: None,
            limit: Self::DEFAULT_LIMIT,
        }
    }
}

/// `?since=T&limit=N`: `T` an RFC 3339 time (`2025-01-31T12:00:00Z`) or
/// Unix milliseconds, `N` from 1 to 100000 (default 1000).
pub fn events(query: Option<&str>) -> Result<EventsQuery, QueryError> {
    let mut q = EventsQuery::default();
    for (name, value) in pairs(query, &["since", "limit"])? {
        if name == "limit" {
            let n = number("limit", &value, 1, EventsQuery::MAX_LIMIT as u64)?;
            q.limit = usize::try_from(n).unwrap_or(EventsQuery::MAX_LIMIT);
        } else {
            q.since = Some(instant("since", &value)?);
        }
    }
    Ok(q)
}

fn instant(name: &str, value: &str) -> Result<Timestamp, QueryError> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().map(Timestamp).map_err(|_| {
            error(
                name,
                "is too large for milliseconds since the Unix epoch",
                Some(value),
            )
        });
    }
    humantime::parse_rfc3339_weak(value)
        .ok()
        .filter(|t| *t >= SystemTime::UNIX_EPOCH)
        .map(Timestamp::from_system_time)
        .ok_or_else(|| {
            error(
                name,
                "must be an RFC 3339 time such as 2025-01-31T12:00:00Z, or milliseconds since the Unix epoch",
                Some(value),
            )
        })
}

/// The `{pid}` path segment of `/api/v1/processes/{pid}`.
pub fn pid(segment: &str) -> Result<u32, QueryError> {
    match segment.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(error(
            "pid",
            "must be a process id, a whole number from 1 to 4294967295",
            Some(segment),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_defaults() {
        let q = processes(None).unwrap();
        assert_eq!(
            (q.sort, q.limit, q.workload),
            (SortKey::Footprint, 50, None)
        );
        assert_eq!(processes(Some("")).unwrap(), q);
    }

    #[test]
    fn processes_takes_every_parameter() {
        let q = processes(Some("sort=growth&limit=5&workload=llm-server")).unwrap();
        assert_eq!(q.sort, SortKey::Growth);
        assert_eq!(q.limit, 5);
        assert_eq!(
            q.workload,
            Some(WorkloadFilter::Kind(WorkloadKind::LlmServer))
        );
        assert_eq!(
            processes(Some("workload=ml")).unwrap().workload,
            Some(WorkloadFilter::Ml)
        );
    }

    #[test]
    fn a_bad_limit_is_named_with_its_value() {
        let e = processes(Some("limit=abc")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "parameter \"limit\": must be a whole number from 1 to 100000 (got \"abc\")"
        );
        assert_eq!(processes(Some("limit=0")).unwrap_err().parameter, "limit");
        assert_eq!(processes(Some("limit=-1")).unwrap_err().parameter, "limit");
        assert_eq!(
            processes(Some("limit=100001")).unwrap_err().parameter,
            "limit"
        );
    }

    #[test]
    fn a_bad_sort_lists_the_choices() {
        let e = processes(Some("sort=cpu")).unwrap_err();
        assert_eq!(e.parameter, "sort");
        assert!(e.message.contains("footprint, growth, gpu"), "{e}");
    }

    #[test]
    fn a_bad_workload_lists_the_kinds() {
        let e = processes(Some("workload=PyTorch")).unwrap_err();
        assert_eq!(e.parameter, "workload");
        assert!(e.message.contains("jupyter, pytorch"), "{e}");
    }

    #[test]
    fn unknown_and_repeated_parameters_are_errors() {
        let e = processes(Some("limt=5")).unwrap_err();
        assert_eq!(e.parameter, "limt");
        assert!(e.message.contains("takes: sort, limit, workload"), "{e}");
        let e = processes(Some("limit=5&limit=6")).unwrap_err();
        assert_eq!(e.parameter, "limit");
        assert!(e.message.contains("more than once"), "{e}");
        let e = none(Some("x=1")).unwrap_err();
        assert!(e.message.contains("takes no parameters"), "{e}");
    }

    #[test]
    fn percent_encoding_is_decoded() {
        let q = processes(Some("sort=gp%75&limit=%31")).unwrap();
        assert_eq!((q.sort, q.limit), (SortKey::Gpu, 1));
    }

    #[test]
    fn history_minutes_bounds() {
        assert_eq!(history(None).unwrap().minutes, 10);
        assert_eq!(history(Some("minutes=1440")).unwrap().minutes, 1440);
        assert_eq!(history(Some("minutes=0")).unwrap_err().parameter, "minutes");
        assert_eq!(
            history(Some("minutes=1441")).unwrap_err().parameter,
            "minutes"
        );
        assert_eq!(
            history(Some("minutes=1.5")).unwrap_err().parameter,
            "minutes"
        );
    }

    #[test]
    fn since_takes_rfc3339_or_milliseconds() {
        assert_eq!(
            events(Some("since=1700000000123")).unwrap().since,
            Some(Timestamp(1_700_000_000_123))
        );
        assert_eq!(
            events(Some("since=2023-11-14T22:13:20.123Z"))
                .unwrap()
                .since,
            Some(Timestamp(1_700_000_000_123))
        );
        let e = events(Some("since=yesterday")).unwrap_err();
        assert_eq!(e.parameter, "since");
        assert!(e.message.contains("RFC 3339"), "{e}");
        assert_eq!(
            events(Some("since=99999999999999999999999"))
                .unwrap_err()
                .parameter,
            "since"
        );
        assert_eq!(events(None).unwrap().since, None);
    }

    #[test]
    fn events_take_a_limit_within_bounds() {
        assert_eq!(events(None).unwrap().limit, EventsQuery::DEFAULT_LIMIT);
        let q = events(Some("since=5&limit=50")).unwrap();
        assert_eq!((q.since, q.limit), (Some(Timestamp(5)), 50));
        for bad in ["limit=0", "limit=100001", "limit=x", "limit=-1"] {
            let e = events(Some(bad)).unwrap_err();
            assert_eq!(e.parameter, "limit", "{bad}");
            assert!(e.message.contains("1 to 100000"), "{e}");
        }
        let e = events(Some("limt=5")).unwrap_err();
        assert!(e.message.contains("takes: since, limit"), "{e}");
    }

    #[test]
    fn pid_must_be_a_positive_number() {
        assert_eq!(pid("42"), Ok(42));
        assert_eq!(pid("0").unwrap_err().parameter, "pid");
        assert_eq!(pid("self").unwrap_err().value.as_deref(), Some("self"));
        assert_eq!(pid("4294967296").unwrap_err().parameter, "pid");
    }

    #[test]
    fn long_values_are_cut_in_errors() {
        let long = "x".repeat(500);
        let e = processes(Some(&format!("sort={long}"))).unwrap_err();
        assert!(e.value.unwrap().chars().count() <= MAX_QUOTED + 1);
    }
}
