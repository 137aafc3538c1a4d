//! The journal: append-only JSON Lines of events.
