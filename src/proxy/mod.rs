//! The egress proxy of a run whose network is `network = { allow = [...] }`.
//!
//! The run lives in a network namespace whose only way out is a TCP
//! listener on its loopback; the supervising process, outside on the host's
//! network, serves that listener with this proxy, and the run's programs
//! find it through `HTTP_PROXY`/`HTTPS_PROXY`. It speaks just enough HTTP
//! for that: CONNECT tunnels (their TLS server name checked too) and
//! plain-HTTP requests in absolute form. Every request is judged against
//! the `Grant` and recorded, admitted or not, in the `Log`.
//!
//! Everything is bounded: `MAX_SERVED` connections at once (two relay
//! threads each at most), request heads of `MAX_HEAD` bytes, fixed relay
//! buffers, `MAX_LOGGED` log entries. Time is bounded too: a request head
//! must arrive within `HEAD_TIMEOUT`, and a connection on which nothing
//! moves either way for `IDLE_TIMEOUT` is closed, so idle sockets cannot
//! hold the `MAX_SERVED` slots. `Proxy::finish` ends it all at once: every
//! socket is shut down, so no thread stays blocked on one.

mod addr;
mod serve;
mod sni;
#[cfg(test)]
mod tests;

pub use addr::AddrError;
use addr::{Entry, Host};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, PipeWriter, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Connections logged at most; the rest are counted in `Log::dropped`.
pub const MAX_LOGGED: usize = 200;
/// Connections served at once; one more is answered 503.
pub const MAX_SERVED: usize = 64;
/// The largest request head read.
pub const MAX_HEAD: usize = 64 * 1024;
/// A connection on which no byte moves either way for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// A client that has not sent its whole request head this long after it
/// was accepted is dropped, unanswered and unlogged.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The proxy's time limits; `Limits::default()` is `IDLE_TIMEOUT` and
/// `HEAD_TIMEOUT`, which `Proxy::start` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a connection may go without a byte relayed either way.
    pub idle: Duration,
    /// How long a client has, from its accept, to send its request head.
    pub head: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            idle: IDLE_TIMEOUT,
            head: HEAD_TIMEOUT,
        }
    }
}

/// What the run may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Exact host names ("pypi.org") and `*.` suffixes ("*.crates.io": any
    /// name under crates.io, not crates.io itself), each optionally `:PORT`
    /// ("mirror.internal:8080"); without a port, 443 and 80.
    pub allow: Vec<String>,
    /// Names pinned to an address, as `curl --resolve` does: a connection
    /// to the name goes to this socket address (port included), and a
    /// pinned address is allowed even when private or loopback.
    pub resolve: Vec<(String, SocketAddr)>,
}

impl Grant {
    /// Whether host:port is admitted by the list (no resolution).
    /// Case-insensitive, a trailing dot ignored; an IP address only when
    /// the list names that address. Entries that `check_entry` refuses
    /// admit nothing.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        Host::parse(host).is_ok_and(|h| self.admits_host(&h, port))
    }

    /// Checks an entry's syntax for the policy loader: `Err(why)`.
    pub fn check_entry(entry: &str) -> Result<(), AddrError> {
        Entry::parse(entry).map(|_| ())
    }

    fn admits_host(&self, host: &Host, port: u16) -> bool {
        self.allow
            .iter()
            .filter_map(|e| Entry::parse(e).ok())
            .any(|e| e.admits(host, port))
    }

    /// The address `host` is pinned to, if it is.
    fn pinned(&self, host: &Host) -> Option<SocketAddr> {
        self.resolve
            .iter()
            .find(|(name, _)| Host::parse(name).is_ok_and(|n| n == *host))
            .map(|(_, addr)| *addr)
    }
}

/// One connection the run asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub host: String,
    pub port: u16,
    /// "connect" (HTTP CONNECT tunnel) or "http" (a plain-HTTP request).
    pub kind: String,
    pub allowed: bool,
    /// Why it was refused, None when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The bytes relayed for it, both directions summed: what the proxy
    /// wrote upstream on the client's behalf (for a plain request, its
    /// head as rewritten to origin form, then the rest) plus what it wrote
    /// to the client from upstream. The proxy's own answers (`200
    /// Connection established`, refusals) are not counted, so a request
    /// refused before any relaying has 0; a tunnel refused for its TLS
    /// server name has only what the server sent before that (nothing of
    /// the client's goes up). A tunnel still open at `Proxy::finish`
    /// counts up to the moment `finish` shut it.
    #[serde(default)]
    pub bytes: u64,
}

/// What `Proxy::finish` returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log {
    /// In the order they were asked for; at most `MAX_LOGGED`.
    pub connections: Vec<Connection>,
    /// Connections asked for beyond `MAX_LOGGED`.
    pub dropped: u64,
}

/// The proxy serving one listener.
pub struct Proxy {
    shared: Arc<Shared>,
    /// Written to once, to end the accept loop's `poll`.
    wake: PipeWriter,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Serves `listener` (already bound and listening; it may belong to
    /// another network namespace, which is the point) on threads of this
    /// process until `finish`, with the default `Limits`.
    pub fn start(listener: TcpListener, grant: Grant) -> io::Result<Proxy> {
        Proxy::start_with(listener, grant, Limits::default())
    }

    /// `start` with other time limits.
    pub fn start_with(listener: TcpListener, grant: Grant, limits: Limits) -> io::Result<Proxy> {
        // Non-blocking, so a connection that vanished between poll and
        // accept cannot leave the loop blocked where `finish` cannot reach.
        listener.set_nonblocking(true)?;
        let (wake_read, wake) = io::pipe()?;
        let shared = Arc::new(Shared {
            grant,
            limits,
            open: Mutex::new(Open::default()),
            log: Mutex::new(Log::default()),
        });
        let accept = thread::Builder::new().name("proxy-accept".into()).spawn({
            let shared = shared.clone();
            move || accept_loop(&listener, &wake_read, &shared)
        })?;
        Ok(Proxy {
            shared,
            wake,
            accept: Some(accept),
        })
    }

    /// Stops accepting, ends open tunnels, joins every thread, and returns
    /// the connections in the order they were asked for, their byte
    /// counts final (every relaying thread has ended). A dial still
    /// resolving or connecting is abandoned instead (see `serve::dial`):
    /// its thread ends on its own within the connect timeout, and closes
    /// what it connected.
    pub fn finish(mut self) -> Log {
        self.stop();
        std::mem::take(&mut *lock(&self.shared.log))
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        {
            let mut open = lock(&self.shared.open);
            open.stopping = true;
            for conn in open.conns.values() {
                for s in &conn.sockets {
                    let _ = s.shutdown(Shutdown::Both);
                }
                if let Some(dial) = &conn.dial {
                    let _ = dial.send(Dialed::Stopped);
                }
            }
        }
        let _ = self.wake.write_all(&[1]);
        let _ = accept.join();
    }
}

impl Drop for Proxy {
    /// A proxy dropped without `finish` still stops its threads.
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the accept loop and every connection's threads share.
struct Shared {
    grant: Grant,
    limits: Limits,
    open: Mutex<Open>,
    log: Mutex<Log>,
}

/// The connections being served, so that `finish` can end them.
#[derive(Default)]
struct Open {
    stopping: bool,
    next_id: u64,
    conns: HashMap<u64, Registered>,
}

/// One connection's sockets (duplicates: shutting one down shuts the
/// socket down for every holder, and the registry keeps the descriptor
/// alive, so it cannot be reused by another socket meanwhile) and, while
/// it dials, the way to wake it.
#[derive(Default)]
struct Registered {
    sockets: Vec<TcpStream>,
    dial: Option<mpsc::Sender<Dialed>>,
}

/// The end of a dial: the upstream socket, a refusal, or `finish`.
enum Dialed {
    Done(Result<TcpStream, serve::Refusal>),
    Stopped,
}

/// A poisoned lock only means a thread panicked while holding it; the
/// data (a registry, a log) stays usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Enters a new connection in the registry; None once stopping.
    fn register(&self, client: &TcpStream) -> Option<u64> {
        let dup = client.try_clone().ok()?;
        let mut open = lock(&self.open);
        if open.stopping {
            return None;
        }
        let id = open.next_id;
        open.next_id += 1;
        open.conns.insert(
            id,
            Registered {
                sockets: vec![dup],
                dial: None,
            },
        );
        Some(id)
    }

    /// Adds a socket to connection `id`; once stopping it is shut down
    /// right away (and false returned).
    fn add_socket(&self, id: u64, s: &TcpStream) -> bool {
        let mut open = lock(&self.open);
        if open.stopping {
            let _ = s.shutdown(Shutdown::Both);
            return false;
        }
        match (open.conns.get_mut(&id), s.try_clone()) {
            (Some(conn), Ok(dup)) => {
                conn.sockets.push(dup);
                true
            }
            _ => {
                let _ = s.shutdown(Shutdown::Both);
                false
            }
        }
    }

    /// Lets `finish` wake connection `id` while it waits for a dial.
    fn set_dial(&self, id: u64, tx: Option<mpsc::Sender<Dialed>>) -> bool {
        let mut open = lock(&self.open);
        if open.stopping {
            return false;
        }
        if let Some(conn) = open.conns.get_mut(&id) {
            conn.dial = tx;
        }
        true
    }

    fn deregister(&self, id: u64) {
        lock(&self.open).conns.remove(&id);
    }

    /// Records a connection asked for; its index, to settle it later, or
    /// None when the log is full.
    fn ask(&self, host: &Host, port: u16, kind: &str) -> Option<usize> {
        let mut log = lock(&self.log);
        if log.connections.len() >= MAX_LOGGED {
            log.dropped += 1;
            return None;
        }
        log.connections.push(Connection {
            host: host.to_string(),
            port,
            kind: kind.into(),
            allowed: false,
            reason: None,
            bytes: 0,
        });
        Some(log.connections.len() - 1)
    }

    fn settle(&self, entry: Option<usize>, refused: Option<String>) {
        let mut log = lock(&self.log);
        if let Some(c) = entry.and_then(|i| log.connections.get_mut(i)) {
            c.allowed = refused.is_none();
            c.reason = refused;
        }
    }

    /// Records the bytes relayed for a connection, once its relay ended.
    fn count(&self, entry: Option<usize>, bytes: u64) {
        let mut log = lock(&self.log);
        if let Some(c) = entry.and_then(|i| log.connections.get_mut(i)) {
            c.bytes = bytes;
        }
    }
}

/// Accepts until `wake` is readable, serving each connection on a thread
/// of its own; then joins them all.
fn accept_loop(listener: &TcpListener, wake: &io::PipeReader, shared: &Arc<Shared>) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 {
            break;
        }
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if is_transient(&e) => continue,
            Err(_) => {
                // Out of descriptors or memory: poll would report the
                // pending connection again at once; give the connections
                // being served a moment to end and free some.
                thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        workers.retain(|w| !w.is_finished());
        if client.set_nonblocking(false).is_err() {
            continue;
        }
        if active.load(Ordering::SeqCst) >= MAX_SERVED {
            serve::too_busy(client);
            continue;
        }
        let Some(id) = shared.register(&client) else {
            break;
        };
        active.fetch_add(1, Ordering::SeqCst);
        let spawned = thread::Builder::new().name("proxy-conn".into()).spawn({
            let shared = shared.clone();
            let active = active.clone();
            move || {
                serve::serve(&shared, id, client);
                shared.deregister(id);
                active.fetch_sub(1, Ordering::SeqCst);
            }
        });
        match spawned {
            Ok(w) => workers.push(w),
            Err(_) => {
                // The client went with the closure; only its registry
                // duplicate is left to close.
                shared.deregister(id);
                active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    for w in workers {
        let _ = w.join();
    }
}

/// Accept errors that concern only the connection being accepted.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) || matches!(
        e.raw_os_error(),
        Some(
            libc::EPROTO
                | libc::ENETDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
                | libc::EHOSTDOWN
        )
    )
}
