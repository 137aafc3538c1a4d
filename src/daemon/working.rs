//! What the daemon loop works on: its config and its history, owned by the
//! loop and handed forward to the policy and the post-mortems. The published
//! [`State`] gets copies of the `Arc`s, for readers; the loop never reads
//! them back from there.
//!
//! A sample is recorded into the loop's history and published in one step
//! ([`Working::record`], inside the `watch` channel's `send_modify`): the
//! state lets go of its reference first, so the history is copied only when
//! a reader (an HTTP handler) still holds the previous one, as a reader's
//! copy must not change under it. On a calm machine with no reader, a
//! sample copies nothing.

use std::sync::Arc;

use crate::config::Config;
use crate::history::History;
use crate::model::Snapshot;
use crate::state::State;

/// The loop's own config and history.
#[derive(Debug)]
pub struct Working {
    config: Arc<Config>,
    history: Arc<History>,
}

impl Working {
    /// The loop's data at start: `config` and an empty history that keeps
    /// what the config asks for.
    pub fn new(config: Config) -> Self {
        let history = Arc::new(History::new(config.daemon.history));
        Self {
            config: Arc::new(config),
            history,
        }
    }

    /// The config the loop runs on.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The loop's history of the samples recorded so far.
    pub fn history(&self) -> &Arc<History> {
        &self.history
    }

    /// The state to publish before the first sample: the loop's config and
    /// history, shared.
    pub fn initial_state(
        &self,
        config_path: Option<std::path::PathBuf>,
        started_at: crate::model::Timestamp,
    ) -> State {
        State::starting(
            Arc::clone(&self.config),
            Arc::clone(&self.history),
            config_path,
            started_at,
        )
    }

    /// Record `snap` in the loop's history and publish both into `state`.
    /// Call it inside `send_modify`, so that readers never see the state
    /// between the two. Returns the snapshot `snap` replaced in the state,
    /// for the caller to let go of where it suits.
    pub fn record(&mut self, snap: Arc<Snapshot>, state: &mut State) -> Option<Arc<Snapshot>> {
        // The published reference goes first: then the history is copied
        // only if a reader still holds it.
        state.release_history();
        Arc::make_mut(&mut self.history).record(&snap);
        state.publish(snap, Arc::clone(&self.history))
    }

    /// Run on a reloaded `config` from now on, the history keeping what it
    /// asks for, and publish both into `state` (inside `send_modify`, as
    /// [`Working::record`]).
    pub fn replace_config(&mut self, config: Config, state: &mut State) {
        state.release_history();
        Arc::make_mut(&mut self.history).set_retention(config.daemon.history);
        self.config = Arc::new(config);
        state.replace_config(Arc::clone(&self.config), Arc::clone(&self.history));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::Timestamp;

    fn at(ms: u64) -> Arc<Snapshot> {
        Arc::new(Snapshot {
            taken_at: Timestamp(ms),
            ..Snapshot::default()
        })
    }

    fn started() -> (Working, State) {
        let working = Working::new(Config::default());
        let state = working.initial_state(None, Timestamp(0));
        (working, state)
    }

    #[test]
    fn the_initial_state_publishes_the_loops_config_and_history() {
        let (working, state) = started();
        assert!(Arc::ptr_eq(&state.config, working.config()));
        assert!(Arc::ptr_eq(&state.history, working.history()));
    }

    #[test]
    fn a_sample_no_reader_holds_the_history_for_is_recorded_in_place() {
        let (mut working, mut state) = started();
        working.record(at(1), &mut state);
        let before = Arc::as_ptr(working.history());
        working.record(at(2), &mut state);
        assert_eq!(Arc::as_ptr(working.history()), before, "copied");
        assert_eq!(working.history().system().len(), 2);
        assert!(Arc::ptr_eq(&state.history, working.history()));
    }

    #[test]
    fn a_sample_copies_the_history_a_reader_holds_and_leaves_the_readers_copy_alone() {
        let (mut working, mut state) = started();
        working.record(at(1), &mut state);
        let reader = Arc::clone(&state.history);
        working.record(at(2), &mut state);
        assert!(!Arc::ptr_eq(working.history(), &reader), "not copied");
        assert_eq!(reader.system().len(), 1, "the reader's copy changed");
        assert_eq!(working.history().system().len(), 2);
        assert!(Arc::ptr_eq(&state.history, working.history()));
    }

    #[test]
    fn recording_publishes_the_snapshot_and_hands_back_the_one_it_replaced() {
        let (mut working, mut state) = started();
        let (first, second) = (at(1), at(2));
        assert!(working.record(Arc::clone(&first), &mut state).is_none());
        let replaced = working.record(Arc::clone(&second), &mut state);
        assert!(replaced.is_some_and(|r| Arc::ptr_eq(&r, &first)));
        let published = state.snapshot.as_ref().expect("published");
        assert!(Arc::ptr_eq(published, &second));
        assert_eq!(state.counters.samples, 2);
    }

    #[test]
    fn a_reload_publishes_the_new_config_and_the_retention_without_copying_the_history() {
        let (mut working, mut state) = started();
        working.record(at(1), &mut state);
        let before = Arc::as_ptr(working.history());
        let mut config = Config::default();
        config.daemon.history = Duration::from_secs(120);
        working.replace_config(config, &mut state);
        assert_eq!(Arc::as_ptr(working.history()), before, "copied");
        assert_eq!(working.history().retention(), Duration::from_secs(120));
        assert_eq!(working.config().daemon.history, Duration::from_secs(120));
        assert!(Arc::ptr_eq(&state.config, working.config()));
        assert!(Arc::ptr_eq(&state.history, working.history()));
        assert_eq!(state.counters.reloads, 1);
    }
}
