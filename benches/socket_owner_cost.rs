//! What telling a socket's owner costs: the kernel's socket diagnostics
//! against reading `/proc/net/tcp{,6}`, measured in the same run.
//!
//! The HTTP server asks who owns each loopback client's socket (to decide
//! what that viewer may see), and a Jupyter lookup asks who listens on a
//! server's port before it sends the token. A listener on 127.0.0.1 and one
//! connection to it are made, plus `HEADROOM_BENCH_CONNECTIONS` idle
//! loopback connections (default 500, so 1000 sockets) so that the tables
//! hold what a busy machine's do. Each row is timed over a batch, in CPU
//! time of this process (user + system: the kernel does the work on our
//! time), batches interleaved; the table gives the median per call:
//!
//! - **client (diag)**: `sockets::client_uid`: one exact socket-diagnostics
//!   request (what the HTTP server does per connection).
//! - **client (tables)**: `sockets::scan` of both tables for that connection,
//!   stopping at the first match (what it did before).
//! - **listeners (diag)**: `sockets::listener_uids`: two listener dumps
//!   (IPv4, IPv6) filtered to one port in the kernel.
//! - **listeners (tables)**: `sockets::scan` of both tables for the
//!   listeners on that port.
//!
//! Run: `cargo bench --bench socket_owner_cost`. `HEADROOM_BENCH_ITERS` sets
//! the number of batches (default 20) and `HEADROOM_BENCH_BATCH` the calls
//! per batch (default 50).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("socket_owner_cost measures Linux socket tables; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Row, env_usize, quantile, time_interleaved};
    use std::hint::black_box;
    use std::net::{TcpListener, TcpStream};
    use std::path::Path;

    use headroom::os::sockets::{self, TCP_LISTEN};

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("socket_owner_cost: run with `cargo bench --bench socket_owner_cost`");
            return;
        }
        let iters = env_usize("HEADROOM_BENCH_ITERS", 20).max(1);
        let batch = env_usize("HEADROOM_BENCH_BATCH", 50).max(1);
        let idle = env_usize("HEADROOM_BENCH_CONNECTIONS", 500);

        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let server = listener.local_addr().expect("address");
        let _client = TcpStream::connect(server).expect("connect");
        let (_accepted, client) = listener.accept().expect("accept");
        let other = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut held = Vec::with_capacity(idle * 2);
        for _ in 0..idle {
            held.push(TcpStream::connect(other.local_addr().expect("address")).expect("connect"));
            held.push(other.accept().expect("accept").0);
        }
        let expected = sockets::client_uid(client, server).expect("client_uid");
        assert!(expected.is_some(), "the connection's owner is found");

        let mut rows = vec![
            Row::new(
                "client (diag)",
                "one exact socket-diagnostics request",
                move || {
                    let uid = sockets::client_uid(client, server).expect("client_uid");
                    assert_eq!(uid, expected);
                },
            ),
            Row::new(
                "client (tables)",
                "scan of /proc/net/tcp{,6} to the match",
                move || {
                    let found = sockets::scan(Path::new("/proc"), 1, |e| {
                        e.local == client && e.remote == server
                    })
                    .expect("scan");
                    assert_eq!(found.first().map(|e| e.uid), expected);
                },
            ),
            Row::new(
                "listeners (diag)",
                "two listener dumps filtered to the port",
                move || {
                    let uids = sockets::listener_uids(server.ip(), server.port())
                        .expect("listener_uids")
                        .expect("Linux lists listeners");
                    assert_eq!(uids.len(), 1);
                },
            ),
            Row::new(
                "listeners (tables)",
                "scan of /proc/net/tcp{,6} for LISTEN",
                move || {
                    let found = sockets::scan(Path::new("/proc"), 64, |e| {
                        e.state == TCP_LISTEN && e.local == server
                    })
                    .expect("scan");
                    black_box(found);
                },
            ),
        ];

        time_interleaved(&mut rows, iters, batch);

        let tcp = std::fs::read_to_string("/proc/net/tcp").map_or(0, |t| t.lines().count());
        println!(
            "socket_owner_cost: {} idle loopback sockets, {tcp} lines in /proc/net/tcp; \
             {iters} batches of {batch}; CPU time per call (user + system)",
            held.len()
        );
        println!();
        println!("| row | what | median µs | p90 µs |");
        println!("|---|---|---:|---:|");
        for row in &rows {
            println!(
                "| {} | {} | {:.1} | {:.1} |",
                row.name,
                row.what,
                row.median(),
                quantile(&row.micros, 0.9)
            );
        }
        let ratio = |diag: usize, tables: usize| rows[tables].median() / rows[diag].median();
        println!();
        println!(
            "tables / diag: client {:.0}×, listeners {:.0}×",
            ratio(0, 1),
            ratio(2, 3)
        );
    }
}
