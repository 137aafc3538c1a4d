//! The lookup thread (`headroom-jupyter`): it keeps the [`NotebookMap`],
//! takes the daemon's requests (the kernels present now), starts one lookup
//! per user whose kernels are due, each on a thread of its own (at most
//! [`MAX_LOOKUPS_AT_ONCE`], one per user), and takes in and publishes each
//! answer as it comes, so that one user's slow servers hold up the lookups
//! of that user's kernels only. See the module doc of [`super`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::model::printable;
use crate::model::text_caps::capped;

use super::{
    ANSWER_POLL, Kernel, LookupFn, MAX_LOOKUPS_AT_ONCE, Mapped, NotebookMap, Pending, Problem,
    ProblemLog, Published, Request, Settings, for_owner, short,
};

/// One user's lookup, finished.
struct Answer {
    owner: Option<u32>,
    asked: Vec<Kernel>,
    found: HashMap<String, Mapped>,
    problems: Vec<Problem>,
    /// None of the kernels asked about was asked about before.
    first_time: bool,
    took: Duration,
}

/// The lookup thread: the map, the kernels present, and the lookups under
/// way (one per user at most).
pub(super) struct LookupThread {
    map: NotebookMap,
    log: ProblemLog,
    present: HashSet<Kernel>,
    under_way: HashSet<Option<u32>>,
    answers: Receiver<Answer>,
    answer_tx: Sender<Answer>,
    published: Published,
    pending: Pending,
    settings: Settings,
    lookup: LookupFn,
}

impl LookupThread {
    pub(super) fn new(
        published: Published,
        pending: Pending,
        settings: Settings,
        lookup: LookupFn,
    ) -> Self {
        let (answer_tx, answers) = mpsc::channel();
        Self {
            map: NotebookMap::default(),
            log: ProblemLog::default(),
            present: HashSet::new(),
            under_way: HashSet::new(),
            answers,
            answer_tx,
            published,
            pending,
            settings,
            lookup,
        }
    }

    /// Serve requests until the daemon's end is dropped.
    pub(super) fn run(mut self, rx: &Receiver<Request>) {
        loop {
            // While lookups are under way, wake up for their answers too.
            let first = if self.under_way.is_empty() {
                match rx.recv() {
                    Ok(request) => Some(request),
                    Err(_) => return,
                }
            } else {
                match rx.recv_timeout(ANSWER_POLL) {
                    Ok(request) => Some(request),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            // Requests that queued up: only the latest kernel set matters.
            let mut asked = false;
            for request in first.into_iter().chain(rx.try_iter()) {
                if let Request::Lookup(kernels) = request {
                    self.present = kernels;
                    asked = true;
                }
            }
            let mut changed = false;
            while let Ok(answer) = self.answers.try_recv() {
                self.take(answer);
                changed = true;
            }
            let new = match self.pending.lock() {
                Ok(mut slot) => slot.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            if let Some(new) = new {
                self.settings = new;
                // Other directories may know the misses: ask again.
                self.map.misses.clear();
            }
            if changed {
                let snapshot = Arc::new(self.map.entries.clone());
                match self.published.lock() {
                    Ok(mut guard) => *guard = snapshot,
                    Err(poisoned) => *poisoned.into_inner() = snapshot,
                }
            }
            if asked && self.settings.enabled {
                self.start_due();
            }
        }
    }

    /// Start a lookup for each user whose kernels are due and who has none
    /// under way, up to [`MAX_LOOKUPS_AT_ONCE`] under way in all.
    fn start_due(&mut self) {
        let mut by_owner: BTreeMap<Option<u32>, Vec<Kernel>> = BTreeMap::new();
        for kernel in self.map.due(&self.present, Instant::now()) {
            if !self.under_way.contains(&kernel.uid) {
                by_owner.entry(kernel.uid).or_default().push(kernel);
            }
        }
        for (owner, kernels) in by_owner {
            if self.under_way.len() >= MAX_LOOKUPS_AT_ONCE {
                return;
            }
            // A kernel asked about before and still unknown is logged quietly.
            let first_time = kernels.iter().any(|k| !self.map.misses.contains_key(k));
            let settings = self.settings.clone();
            let lookup = Arc::clone(&self.lookup);
            let tx = self.answer_tx.clone();
            let started = Instant::now();
            let spawned = std::thread::Builder::new()
                .name("headroom-jupyter-ask".into())
                .spawn(move || {
                    // An answer always comes back, so that this user's
                    // lookups are never left marked as under way.
                    let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        lookup(&settings.dirs(), owner)
                    }));
                    let (found, problems) = asked.unwrap_or_else(|_| {
                        let problem = Problem::new(
                            "lookup".to_string(),
                            "a Jupyter lookup failed unexpectedly; its kernels stay unmapped",
                        );
                        (HashMap::new(), vec![problem])
                    });
                    let _ = tx.send(Answer {
                        owner,
                        asked: kernels,
                        found,
                        problems,
                        first_time,
                        took: started.elapsed(),
                    });
                });
            match spawned {
                Ok(_) => {
                    self.under_way.insert(owner);
                }
                Err(e) => {
                    warn!("cannot start a Jupyter lookup, kernels stay unmapped for now: {e}");
                    return;
                }
            }
        }
    }

    /// Take in one user's lookup: its answers into the map, its problems
    /// into the log.
    fn take(&mut self, answer: Answer) {
        self.under_way.remove(&answer.owner);
        for line in self.log.news(answer.problems) {
            warn!("{line}");
        }
        self.map.refreshed(
            for_owner(answer.found, answer.owner),
            &answer.asked,
            &self.present,
            Instant::now(),
        );
        let named: Vec<String> = answer
            .asked
            .iter()
            .filter_map(|k| self.map.get(k).map(|m| (k, m)))
            .map(|(k, m)| {
                let notebook = capped(&m.notebook, LOGGED_NOTEBOOK_MAX);
                format!("{} → {}", short(&k.id), printable(&notebook))
            })
            .collect();
        let outcome = logged_list(&named);
        let whose = answer.owner.map_or_else(
            || "of an unknown user".to_string(),
            |uid| format!("of uid {uid}"),
        );
        let took = answer.took.as_millis();
        let n = answer.asked.len();
        if answer.first_time || !named.is_empty() {
            info!("Jupyter lookup for {n} new kernel(s) {whose} in {took} ms: {outcome}");
        } else {
            debug!("Jupyter lookup again for {n} kernel(s) {whose} in {took} ms: {outcome}");
        }
    }
}

/// The most kernels one lookup's log line names, and the most bytes of
/// each notebook path it shows: a line stays short whatever the servers
/// say.
const LOGGED_KERNELS: usize = 8;
const LOGGED_NOTEBOOK_MAX: usize = 256;

/// A lookup's outcome for the log: at most [`LOGGED_KERNELS`] kernels
/// named, then how many more.
fn logged_list(named: &[String]) -> String {
    if named.is_empty() {
        return "no server knows them (asking again later)".to_string();
    }
    let mut out = named
        .iter()
        .take(LOGGED_KERNELS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if named.len() > LOGGED_KERNELS {
        out.push_str(&format!(" and {} more", named.len() - LOGGED_KERNELS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::logged_list;

    #[test]
    fn a_lookups_log_line_names_a_few_kernels_and_counts_the_rest() {
        let named: Vec<String> = (0..20).map(|i| format!("k{i} → n{i}.ipynb")).collect();
        let line = logged_list(&named);
        assert!(line.starts_with("k0 → n0.ipynb, k1"), "{line}");
        assert!(line.ends_with(" and 12 more"), "{line}");
        assert!(!line.contains("k8 "), "{line}");
        assert_eq!(logged_list(&named[..1]), "k0 → n0.ipynb");
        assert!(logged_list(&[]).contains("no server knows them"));
    }
}
