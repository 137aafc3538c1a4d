//! The platform layer: facts about the OS that more than one part of headroom
//! needs, behind functions that name no OS. `target_os` is allowed here (and
//! in `sample/` and `act/`), nowhere above.
//!
//! - [`fd_limit`]: the open-file limit, raised at start, and the share of it
//!   the HTTP server may use.
//! - [`sockets`]: which user owns a TCP socket (a listener a Jupyter token is
//!   about to be sent to, the client end of a loopback HTTP connection).

pub mod fd_limit;
pub mod sockets;
