//! The latest snapshot's JSON, encoded once per sample and form, and the
//! answers cut from it.
//!
//! A snapshot of a machine whose processes have megabytes of command line
//! each is tens of megabytes of JSON. Encoded per request, ten clients that
//! never read their answer held ten copies. Here it is encoded at most twice
//! per sample, in full and with every process redacted
//! ([`super::viewer::redact_process`]), on first use and off the server's
//! thread, and cached in the published state ([`SnapshotJson`]). Each answer
//! is a list of slices of those two buffers, picked per process by what the
//! viewer may see: root gets one slice of the full document, a stranger one
//! slice of the redacted one, a user their own processes in full and the
//! rest redacted. `/api/v1/processes` rows reuse the same process objects
//! and add their per-request figures after them.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use serde::Serialize;

use super::ApiError;
use super::gates::Permit;
use super::viewer::{Sight, listed_jobs, redact_process, redact_unowned};
use crate::model::{Job, ProcessSample, Snapshot};
use crate::state::{EncodedSnapshot, JsonForm, SnapshotJson};

/// A process object as the redacted form writes it.
#[derive(Serialize)]
struct Redacted<'a> {
    #[serde(flatten)]
    process: &'a ProcessSample,
    redacted: bool,
}

/// Everything of a snapshot but its processes, in the snapshot's field order.
#[derive(Serialize)]
struct Head<'a> {
    taken_at: &'a crate::model::Timestamp,
    source: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replayed: bool,
    sample_micros: u64,
    system: &'a crate::model::SystemMemory,
    swap: &'a crate::model::Swap,
    pressure: &'a crate::model::Pressure,
    gpus: &'a [crate::model::GpuDevice],
    jobs: &'a [crate::model::Job],
    unowned: std::borrow::Cow<'a, crate::model::Unowned>,
    /// Shown to every viewer: anyone may read a cgroup's limit and usage
    /// under /sys/fs/cgroup, and `/proc/[pid]/cgroup`.
    ceilings: &'a [crate::model::Ceiling],
    errors: &'a crate::model::CollectorErrors,
    collectors: &'a [crate::model::CollectorStatus],
    notes: &'a [String],
}

/// Encode `snap` in `form`: its other fields first, then `processes`.
pub fn encode(snap: &Arc<Snapshot>, form: JsonForm) -> EncodedSnapshot {
    let mut out = encode_head(snap, form, &snap.jobs);
    let list_start = out.len();
    let processes = &snap.processes;
    let mut spans = Vec::with_capacity(processes.len());
    for (i, p) in processes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        let written = match form {
            JsonForm::Full => serde_json::to_writer(&mut out, p),
            JsonForm::Redacted => serde_json::to_writer(
                &mut out,
                &Redacted {
                    process: &redact_process(p),
                    redacted: true,
                },
            ),
        };
        if let Err(e) = written {
            tracing::warn!("cannot encode process {}: {e}", p.id.pid);
            out.truncate(start);
            out.extend_from_slice(format!("{{\"pid\":{}}}", p.id.pid).as_bytes());
        }
        spans.push(start..out.len());
    }
    let list_end = out.len();
    out.extend_from_slice(b"]}");
    EncodedSnapshot {
        of: Arc::downgrade(snap),
        json: Bytes::from(out),
        list: list_start..list_end,
        processes: spans,
    }
}

/// Everything of `snap` before its processes, with `jobs` for its jobs, up
/// to and with `"processes":[`.
fn encode_head(snap: &Snapshot, form: JsonForm, jobs: &[Job]) -> Vec<u8> {
    // No `..`: a field added to Snapshot must be added to Head.
    let Snapshot {
        taken_at,
        source,
        replayed,
        sample_micros,
        system,
        swap,
        pressure,
        gpus,
        processes: _,
        jobs: _,
        unowned,
        ceilings,
        errors,
        collectors,
        notes,
    } = snap;
    let head = Head {
        taken_at,
        source,
        replayed: *replayed,
        sample_micros: *sample_micros,
        system,
        swap,
        pressure,
        gpus,
        jobs,
        // Shared by every viewer who is not shown everything.
        unowned: match form {
            JsonForm::Full => std::borrow::Cow::Borrowed(unowned),
            JsonForm::Redacted => std::borrow::Cow::Owned(redact_unowned(unowned)),
        },
        ceilings,
        errors,
        collectors,
        notes,
    };
    let mut out = serde_json::to_vec(&head).unwrap_or_else(|e| {
        tracing::warn!("cannot encode the snapshot's system figures: {e}");
        b"{}".to_vec()
    });
    out.pop();
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(b"\"processes\":[");
    out
}

/// How one process appears in a viewer's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Full,
    Redacted,
    /// Left out: the OS hides it from the viewer.
    Omitted,
}

/// The encodings one viewer's answer is cut from: the full form where the
/// viewer sees some process in full, the redacted one for the rest and for
/// the system figures of a viewer who is not shown everything.
pub struct Forms {
    full: Option<Arc<EncodedSnapshot>>,
    redacted: Option<Arc<EncodedSnapshot>>,
    /// Per process of the snapshot.
    shown: Vec<Shown>,
    /// For a viewer from whom the OS hides other users' processes: the
    /// system figures with only the jobs it may see, encoded for it.
    head: Option<Bytes>,
}

impl Forms {
    /// The encodings of `snap` that `sight` needs, from `cache` (made there
    /// on first use, on a blocking thread).
    pub async fn of(
        cache: &Arc<SnapshotJson>,
        snap: &Arc<Snapshot>,
        sight: Sight,
    ) -> Result<Forms, ApiError> {
        let shown: Vec<Shown> = snap
            .processes
            .iter()
            .map(|p| {
                if !sight.lists(p.uid) {
                    Shown::Omitted
                } else if sight.sees(p.uid) {
                    Shown::Full
                } else {
                    Shown::Redacted
                }
            })
            .collect();
        let everything = sight == Sight::Everything;
        let full = if everything || shown.contains(&Shown::Full) {
            Some(get(cache, snap, JsonForm::Full).await?)
        } else {
            None
        };
        let redacted = if !everything {
            Some(get(cache, snap, JsonForm::Redacted).await?)
        } else {
            None
        };
        let head = sight.omits_any().then(|| {
            Bytes::from(encode_head(
                snap,
                JsonForm::Redacted,
                &listed_jobs(snap, sight),
            ))
        });
        Ok(Forms {
            full,
            redacted,
            shown,
            head,
        })
    }

    /// The encoding process `i` comes from, and its object's place there;
    /// `None` for a process left out.
    fn object(&self, i: usize) -> Option<(&EncodedSnapshot, Range<usize>)> {
        let encoding = match self.shown.get(i)? {
            Shown::Full => self.full.as_deref()?,
            Shown::Redacted => self.redacted.as_deref()?,
            Shown::Omitted => return None,
        };
        Some((encoding, encoding.processes.get(i)?.clone()))
    }

    /// The encoding whose system figures the viewer gets: the redacted
    /// one unless the viewer sees everything.
    fn base(&self) -> Option<&EncodedSnapshot> {
        self.redacted.as_deref().or(self.full.as_deref())
    }

    /// Whether process `i` is shown to the viewer at all.
    pub fn listed(&self, i: usize) -> bool {
        self.shown.get(i).is_some_and(|s| *s != Shown::Omitted)
    }

    /// The whole snapshot document, as slices of the shared buffers.
    pub fn document(&self) -> Vec<Bytes> {
        let Some(base) = self.base() else {
            return Vec::new();
        };
        if self.head.is_none() {
            if self.redacted.is_none()
                && let Some(full) = &self.full
            {
                return vec![full.json.clone()];
            }
            if self.shown.iter().all(|s| *s == Shown::Redacted) {
                return vec![base.json.clone()];
            }
        }
        let head = self
            .head
            .clone()
            .unwrap_or_else(|| base.json.slice(..base.list.start));
        let mut chunks = vec![head];
        // Consecutive processes from the same buffer are one slice.
        let mut run: Option<(*const EncodedSnapshot, Bytes, Range<usize>)> = None;
        for i in 0..self.shown.len() {
            let Some((encoding, span)) = self.object(i) else {
                continue;
            };
            let start = if chunks.len() == 1 && run.is_none() {
                span.start
            } else {
                span.start.saturating_sub(1)
            };
            let key: *const EncodedSnapshot = encoding;
            match &mut run {
                Some((k, _, range)) if *k == key && range.end + 1 == span.start => {
                    range.end = span.end;
                }
                _ => {
                    if let Some((_, json, range)) = run.take() {
                        chunks.push(json.slice(range));
                    }
                    run = Some((key, encoding.json.clone(), start..span.end));
                }
            }
        }
        if let Some((_, json, range)) = run.take() {
            chunks.push(json.slice(range));
        }
        chunks.push(base.json.slice(base.list.end..));
        chunks
    }

    /// Process `i`'s object without its closing `}`, for a row that adds
    /// fields after it; `None` for a process left out.
    pub fn open_object(&self, i: usize) -> Option<Bytes> {
        let (encoding, span) = self.object(i)?;
        Some(encoding.json.slice(span.start..span.end.saturating_sub(1)))
    }

    /// Whether process `i` is shown redacted (or not at all).
    pub fn hidden(&self, i: usize) -> bool {
        self.shown.get(i).is_none_or(|s| *s != Shown::Full)
    }
}

async fn get(
    cache: &Arc<SnapshotJson>,
    snap: &Arc<Snapshot>,
    form: JsonForm,
) -> Result<Arc<EncodedSnapshot>, ApiError> {
    let (cache, snap) = (Arc::clone(cache), Arc::clone(snap));
    tokio::task::spawn_blocking(move || cache.get(&snap, form, |s| encode(s, form)))
        .await
        .map_err(|e| ApiError::internal(format!("cannot encode the snapshot: {e}")))
}

/// `object` (an encoded JSON object) with the fields of `extra` (another
/// object) appended: `{"a":1` + `{"b":2}` → `{"a":1,"b":2}`.
pub fn extend_object(open: Bytes, extra: &impl Serialize) -> Vec<Bytes> {
    let mut tail = serde_json::to_vec(extra).unwrap_or_else(|_| b"{}".to_vec());
    if tail.len() > 2 && open.len() > 1 {
        tail[0] = b',';
    } else {
        tail.remove(0);
    }
    vec![open, Bytes::from(tail)]
}

/// The largest frame [`Chunks`] hands to the server at once.
const FRAME: usize = 64 * 1024;

/// A JSON answer made of shared slices, sent as they are. Holds a permit of
/// the large-answer gate, if given, until it is sent or dropped.
///
/// The slices go out in frames of at most `FRAME` bytes: the server takes
/// the next frame only when it has written the last, so the body (and its
/// permit) lives until its last bytes are on their way. Handed over whole, a
/// slice would leave the body at once and let the permit go while the
/// server still held the bytes for a client that does not read.
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
    _permit: Option<Permit>,
}

impl Chunks {
    pub fn new(chunks: Vec<Bytes>, permit: Option<Permit>) -> Self {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Self {
            chunks,
            remaining,
            _permit: permit,
        }
    }

    /// All of it in one buffer (for tests and small answers).
    pub fn concat(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.chunks.pop_front() {
            Some(mut chunk) => {
                if chunk.len() > FRAME {
                    let rest = chunk.split_off(FRAME);
                    this.chunks.push_front(rest);
                }
                this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

impl IntoResponse for Chunks {
    fn into_response(self) -> Response {
        let mut response = Response::new(Body::new(self));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};

    /// A snapshot of one process per uid in `owners`, pids from 10 on, each
    /// with a command line and an executable to hide from others.
    fn owned_by(owners: &[u32]) -> Arc<Snapshot> {
        let processes = owners.iter().zip(10u32..).map(|(&uid, pid)| {
            process(pid)
                .uid(uid)
                .argv(vec![format!("/secret/{pid}")])
                .exe(format!("/bin/p{pid}"))
                .footprint(u64::from(pid) << 20)
        });
        Arc::new(snapshot(0).processes(processes).build())
    }

    fn text(chunks: &[Bytes]) -> String {
        String::from_utf8(chunks.iter().flat_map(|c| c.iter().copied()).collect()).unwrap()
    }

    async fn document(snap: &Arc<Snapshot>, sight: Sight) -> (serde_json::Value, usize) {
        let cache = Arc::new(SnapshotJson::default());
        let forms = Forms::of(&cache, snap, sight).await.unwrap();
        let chunks = forms.document();
        (serde_json::from_str(&text(&chunks)).unwrap(), chunks.len())
    }

    #[test]
    fn the_full_form_reads_back_as_the_snapshot() {
        let snap = owned_by(&[0, 1000, 1001]);
        let e = encode(&snap, JsonForm::Full);
        let back: Snapshot = serde_json::from_slice(&e.json).unwrap();
        assert_eq!(&back, snap.as_ref());
        let second = &e.json[e.processes[1].clone()];
        let p: ProcessSample = serde_json::from_slice(second).unwrap();
        assert_eq!(p, snap.processes[1]);
        assert_eq!(&e.json[e.list.start - 1..e.list.start], b"[");
    }

    #[test]
    fn an_empty_process_list_is_valid_json() {
        let snap = owned_by(&[]);
        let e = encode(&snap, JsonForm::Redacted);
        let back: Snapshot = serde_json::from_slice(&e.json).unwrap();
        assert!(back.processes.is_empty());
    }

    #[tokio::test]
    async fn root_gets_the_full_document_in_one_slice() {
        let snap = owned_by(&[0, 1000, 1001]);
        let (v, chunks) = document(&snap, Sight::Everything).await;
        assert_eq!(chunks, 1);
        assert_eq!(v["processes"][2]["argv"][0], "/secret/12");
        assert_eq!(v["processes"][2].get("redacted"), None);
    }

    #[tokio::test]
    async fn a_stranger_gets_every_process_redacted() {
        let snap = owned_by(&[0, 1000, 1001]);
        let (v, chunks) = document(&snap, Sight::Nothing).await;
        assert_eq!(chunks, 1);
        for p in v["processes"].as_array().unwrap() {
            assert_eq!(p["argv"], serde_json::json!([]));
            assert_eq!(p["exe"], serde_json::Value::Null);
            assert_eq!(p["redacted"], true);
        }
        assert_eq!(v["source"], "test");
    }

    #[tokio::test]
    async fn memory_no_process_owns_is_redacted_for_viewers_who_do_not_see_everything() {
        let file = |path: &str| crate::model::TmpfsFile {
            path: path.into(),
            bytes: 1 << 30,
            uid: Some(1001),
            user: None,
            mapped_by: Vec::new(),
            open_by: vec![11],
            redacted: false,
        };
        let mut snap = (*owned_by(&[0, 1001])).clone();
        snap.unowned = crate::model::Unowned {
            known: true,
            tmpfs_bytes: 1 << 30,
            tmpfs_files: vec![file("/dev/shm/blob"), file("memfd:secret-name")],
            ..Default::default()
        };
        let snap = Arc::new(snap);
        let (v, _) = document(&snap, Sight::Everything).await;
        assert_eq!(v["unowned"]["tmpfs_files"][1]["path"], "memfd:secret-name");
        assert_eq!(v["unowned"]["tmpfs_files"][1]["open_by"][0], 11);
        for sight in [Sight::Own(1001), Sight::Nothing] {
            let (v, _) = document(&snap, sight).await;
            let files = &v["unowned"]["tmpfs_files"];
            assert_eq!(files[0]["path"], "/dev/shm/blob");
            assert_eq!(files[1]["path"], crate::model::HIDDEN_PATH);
            assert_eq!(files[1]["open_by"], serde_json::json!([]));
            assert_eq!(files[1]["redacted"], true);
            assert_eq!(v["unowned"]["tmpfs_bytes"], 1u64 << 30);
        }
    }

    #[tokio::test]
    async fn a_user_sees_their_own_processes_in_full() {
        let snap = owned_by(&[1000, 1000, 0, 1001, 1000]);
        let (v, chunks) = document(&snap, Sight::Own(1000)).await;
        let rows = v["processes"].as_array().unwrap();
        let shown: Vec<bool> = rows.iter().map(|p| p.get("redacted").is_none()).collect();
        assert_eq!(shown, [true, true, false, false, true]);
        assert_eq!(rows[0]["argv"][0], "/secret/10");
        assert_eq!(rows[4]["exe"], "/bin/p14");
        assert_eq!(rows[3]["argv"], serde_json::json!([]));
        // prefix, three runs, suffix
        assert_eq!(chunks, 5);
    }

    #[tokio::test]
    async fn where_the_os_hides_them_other_users_processes_and_jobs_are_left_out() {
        let mut snap = (*owned_by(&[1001, 1000, 0, 1000, 1001])).clone();
        let job = |i: usize, members: &[u32]| crate::model::Job {
            root: snap.processes[i].id,
            members: members.to_vec(),
            footprint: 1 << 30,
            gpu_memory: None,
            basis: crate::model::Basis::Rss,
            ended_root: None,
        };
        snap.jobs = vec![job(0, &[10, 14]), job(1, &[11, 12, 13])];
        let snap = Arc::new(snap);
        let (v, _) = document(&snap, Sight::OwnOnly(1000)).await;
        let pids: Vec<u64> = v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(pids, [11, 13]);
        assert_eq!(
            v["processes"][0]["argv"][0], "/secret/11",
            "their own in full"
        );
        assert_eq!(v["jobs"].as_array().unwrap().len(), 1, "{}", v["jobs"]);
        assert_eq!(v["jobs"][0]["members"], serde_json::json!([11, 13]));
        assert_eq!(v["source"], "test");
        let (v, _) = document(&snap, Sight::NoneListed).await;
        assert_eq!(v["processes"], serde_json::json!([]));
        assert_eq!(v["jobs"], serde_json::json!([]));
        // Where the OS shows them, they are listed (redacted).
        let (v, _) = document(&snap, Sight::Own(1000)).await;
        assert_eq!(v["processes"].as_array().unwrap().len(), 5);
        assert_eq!(v["jobs"].as_array().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn rows_extend_the_shared_objects() {
        let snap = owned_by(&[1000, 1001]);
        let cache = Arc::new(SnapshotJson::default());
        let forms = Forms::of(&cache, &snap, Sight::Own(1000)).await.unwrap();
        #[derive(Serialize)]
        struct Extra {
            growth: f64,
        }
        let row = extend_object(forms.open_object(1).unwrap(), &Extra { growth: 2.5 });
        let v: serde_json::Value = serde_json::from_str(&text(&row)).unwrap();
        assert_eq!(
            (v["pid"].as_u64(), v["growth"].as_f64()),
            (Some(11), Some(2.5))
        );
        assert_eq!(v["redacted"], true);
        assert!(forms.hidden(1) && !forms.hidden(0));
        assert_eq!(cache.encodings(), 2, "one per form");
    }

    #[tokio::test]
    async fn large_slices_go_out_in_frames_and_the_permit_stays_to_the_end() {
        use http_body_util::BodyExt as _;
        let gates = super::super::Gates::new(&super::super::ServerLimits::default());
        let viewer = super::super::viewer::ViewerKey::Uid(1000);
        let permit = gates.large(viewer).await.unwrap();
        let big = Bytes::from(vec![7u8; 3 * FRAME + 5]);
        let mut body = Chunks::new(vec![big, Bytes::from_static(b"!")], Some(permit));
        let mut sizes = Vec::new();
        while let Some(frame) = body.frame().await {
            assert_eq!(gates.large_under_way(), 1, "held while frames remain");
            sizes.push(frame.unwrap().into_data().unwrap().len());
        }
        assert_eq!(sizes, [FRAME, FRAME, FRAME, 5, 1]);
        drop(body);
        assert_eq!(gates.large_under_way(), 0);
    }

    #[test]
    fn chunks_know_their_length() {
        let body = Chunks::new(
            vec![
                Bytes::from_static(b"ab"),
                Bytes::new(),
                Bytes::from_static(b"c"),
            ],
            None,
        );
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(3));
        assert_eq!(body.concat(), b"abc");
    }
}
