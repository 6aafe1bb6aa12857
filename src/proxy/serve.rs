//! One connection from the run: its request head, the judgement, the dial,
//! and the relay.

use super::addr::{AddrError, Host, is_public, parse_authority};
use super::sni::{self, Hello};
use super::{Dialed, MAX_HEAD, Shared};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each relay direction's buffer.
const RELAY_BUFFER: usize = 16 * 1024;
/// How long a refused client is given to finish sending before the socket
/// closes: closing with unread input resets the connection, and a reset
/// can destroy the refusal before the client reads it.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
const NOT_LISTED: &str = "not on the policy's network.allow list";

/// Why a request head is malformed (answered 400).
#[derive(Debug, thiserror::Error)]
enum Malformed {
    #[error("the request line is not printable ASCII")]
    NotAscii,
    #[error("not an HTTP request line")]
    NotRequestLine,
    #[error("not an HTTP/1 request line")]
    NotHttp1,
    #[error(transparent)]
    Addr(#[from] AddrError),
    /// The target, cut to be printable.
    #[error("`{0}` is not an absolute http:// URL; this is a proxy")]
    NotAbsoluteUrl(String),
    #[error("a URL with credentials before the host is not passed on")]
    Credentials,
    #[error("folded header lines are not accepted")]
    FoldedHeader,
    #[error("a header line has no `:`")]
    NoColon,
    #[error("a header name is not a token")]
    HeaderName,
    #[error("two Host headers")]
    TwoHosts,
}

/// Why a request is not served, and the status that says so.
#[derive(Debug)]
pub(crate) struct Refusal {
    status: u16,
    reason: String,
}

impl Refusal {
    fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
        }
    }
}

/// The answer to a connection beyond `MAX_SERVED`. The accept loop writes
/// it and must not wait for anything, so there is no draining.
pub(super) fn too_busy(mut client: TcpStream) {
    let body = format!(
        "agent-rsh: more than {} connections through the proxy at once\n",
        super::MAX_SERVED
    );
    let _ = client.write_all(&response(503, &body, None));
}

/// A request line, judged by its shape only.
struct Target {
    method: String,
    host: Host,
    port: u16,
    connect: bool,
    /// `https://` in a plain request: it must be a CONNECT instead.
    https: bool,
    /// The origin-form target of a plain request (`/path?query`).
    path: String,
    version: String,
}

impl Target {
    fn kind(&self) -> &'static str {
        if self.connect { "connect" } else { "http" }
    }
}

/// Serves connection `id` (registered with `client`) to its end.
pub(super) fn serve(shared: &Shared, id: u64, mut client: TcpStream) {
    let _ = client.set_nodelay(true);
    let deadline = Instant::now() + shared.limits.head;
    let (head, rest) = match read_head(&mut client, deadline) {
        Head::Whole { head, rest } => (head, rest),
        Head::TooLarge(buf) => {
            let why = format!("the request head is larger than {} KiB", MAX_HEAD / 1024);
            let first_line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
            let first_line = first_line.strip_suffix(b"\r").unwrap_or(first_line);
            match parse_request_line(first_line) {
                Ok(t) => {
                    let entry = shared.ask(&t.host, t.port, t.kind());
                    refuse(
                        shared,
                        entry,
                        &mut client,
                        &t.host.with_port(t.port),
                        Refusal::new(431, why),
                    );
                }
                Err(_) => respond(&mut client, 431, &format!("agent-rsh: {why}\n"), Some(&why)),
            }
            return;
        }
        Head::Closed => return,
    };
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let target = match parse_request_line(lines.next().unwrap_or_default()) {
        Ok(t) => t,
        Err(why) => {
            let why = why.to_string();
            respond(&mut client, 400, &format!("agent-rsh: {why}\n"), Some(&why));
            return;
        }
    };
    let (host, port) = (&target.host, target.port);
    let host_port = host.with_port(port);
    let entry = shared.ask(host, port, target.kind());
    let upstream_head = match judge(shared, &target, lines) {
        Ok(h) => h,
        Err(r) => return refuse(shared, entry, &mut client, &host_port, r),
    };
    let upstream = match dial(shared, id, host, port) {
        Ok(u) => u,
        Err(Some(r)) => return refuse(shared, entry, &mut client, &host_port, r),
        Err(None) => {
            shared.settle(
                entry,
                Some("the proxy stopped before the connection was made".into()),
            );
            return;
        }
    };
    if !shared.add_socket(id, &upstream) {
        return;
    }
    let _ = upstream.set_nodelay(true);
    shared.settle(entry, None);
    let flow = Flow::new(shared.limits.idle);
    if target.connect {
        if client.write_all(ESTABLISHED).is_ok() {
            tunnel(shared, entry, &flow, &client, &upstream, rest, port);
        }
    } else {
        let mut sent = upstream_head;
        sent.extend_from_slice(&rest);
        if flow.write_all(&upstream, &sent).is_ok() {
            relay_both(&flow, &client, &upstream);
        } else {
            end(&client, &upstream);
        }
    }
    // Every relaying thread has ended: the count is final.
    shared.count(entry, flow.bytes.load(Ordering::SeqCst));
}

/// The list's verdict on a parsed request and, for a plain request, the
/// head to send upstream.
fn judge<'a>(
    shared: &Shared,
    target: &Target,
    headers: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, Refusal> {
    if target.https {
        return Err(Refusal::new(
            400,
            "an https:// URL is asked for with CONNECT, not as a plain request",
        ));
    }
    let (upstream_head, host_header) = if target.connect {
        (Vec::new(), None)
    } else {
        rewrite_head(target, headers).map_err(|why| Refusal::new(400, why.to_string()))?
    };
    if !shared.grant.admits_host(&target.host, target.port) {
        return Err(Refusal::new(403, NOT_LISTED));
    }
    // The Host header picks the site at the address the URL reaches (a
    // CDN serves thousands): one naming another host asks for that host.
    if let Some(value) = host_header {
        let same = parse_authority(&value, Some(80))
            .is_ok_and(|(h, p)| h == target.host && p == target.port);
        if !same {
            return Err(Refusal::new(
                403,
                format!(
                    "the Host header `{}` is not the request's host",
                    printable(&value, 100)
                ),
            ));
        }
    }
    Ok(upstream_head)
}

/// Answers a refused request and records why.
fn refuse(
    shared: &Shared,
    entry: Option<usize>,
    client: &mut TcpStream,
    host_port: &str,
    r: Refusal,
) {
    let body = if r.reason == NOT_LISTED {
        format!("agent-rsh: {host_port} is {NOT_LISTED}\n")
    } else {
        format!("agent-rsh: {host_port}: {}\n", r.reason)
    };
    let status = r.status;
    shared.settle(entry, Some(r.reason.clone()));
    respond(client, status, &body, Some(&r.reason));
}

fn response(status: u16, body: &str, refused: Option<&str>) -> Vec<u8> {
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut r = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(reason) = refused {
        r.push_str(&format!(
            "X-Agent-Rsh-Refused: {}\r\n",
            printable(reason, 500)
        ));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

/// Writes a final response, then reads (and drops) what the client still
/// sends, briefly, so that closing does not reset the connection under
/// the response.
fn respond(client: &mut TcpStream, status: u16, body: &str, refused: Option<&str>) {
    if client.write_all(&response(status, body, refused)).is_err() {
        return;
    }
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(DRAIN_TIMEOUT));
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < MAX_HEAD {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// `s` fit for a header value or a log line: ASCII, no control
/// characters, at most `max` characters.
fn printable(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

enum Head {
    /// The head (through its blank line) and what followed it.
    Whole {
        head: Vec<u8>,
        rest: Vec<u8>,
    },
    TooLarge(Vec<u8>),
    /// Closed (or failed) before a whole head.
    Closed,
}

/// Reads the request head; a client that has not sent it whole by
/// `deadline` counts as closed.
fn read_head(client: &mut TcpStream, deadline: Instant) -> Head {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            return Head::Closed;
        }
        let n = match client.read(&mut chunk) {
            Ok(0) => return Head::Closed,
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(_) => return Head::Closed,
        };
        let from = buf.len().saturating_sub(2);
        buf.extend_from_slice(&chunk[..n]);
        match head_end(&buf, from) {
            Some(end) if end <= MAX_HEAD => {
                let rest = buf.split_off(end);
                return Head::Whole { head: buf, rest };
            }
            Some(_) => return Head::TooLarge(buf),
            None if buf.len() >= MAX_HEAD => return Head::TooLarge(buf),
            None => {}
        }
    }
}

/// Where the head ends (after its blank line, CRLF or bare LF), searching
/// from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| {
        if buf[i] != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// `METHOD TARGET HTTP/1.x`: CONNECT with `host:port`, anything else with
/// an absolute `http://` URL (a proxy is asked for URLs, not paths).
fn parse_request_line(line: &[u8]) -> Result<Target, Malformed> {
    let line = std::str::from_utf8(line)
        .ok()
        .filter(|l| l.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
        .ok_or(Malformed::NotAscii)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Malformed::NotRequestLine);
    };
    let is_token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let is_http1 = version.len() == 8 && version.starts_with("HTTP/1.");
    if !(is_token(method) && is_http1) {
        return Err(Malformed::NotHttp1);
    }
    if method == "CONNECT" {
        let (host, port) = parse_authority(target, None)?;
        return Ok(Target {
            method: method.into(),
            host,
            port,
            connect: true,
            https: false,
            path: String::new(),
            version: version.into(),
        });
    }
    let scheme_end = target.find("://").unwrap_or(0);
    let (https, default_port) = match target[..scheme_end].to_ascii_lowercase().as_str() {
        "http" => (false, 80),
        "https" => (true, 443),
        _ => {
            return Err(Malformed::NotAbsoluteUrl(printable(target, 100)));
        }
    };
    let rest = &target[scheme_end + 3..];
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if authority.contains('@') {
        return Err(Malformed::Credentials);
    }
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let (host, port) = parse_authority(authority, Some(default_port))?;
    Ok(Target {
        method: method.into(),
        host,
        port,
        connect: false,
        https,
        path,
        version: version.into(),
    })
}

/// A plain request's head in origin form, its headers as received but for
/// the ones addressed to the proxy; and its Host header.
fn rewrite_head<'a>(
    target: &Target,
    headers: impl Iterator<Item = &'a [u8]>,
) -> Result<(Vec<u8>, Option<String>), Malformed> {
    let mut out = format!("{} {} {}\r\n", target.method, target.path, target.version).into_bytes();
    let mut host = None;
    for line in headers.take_while(|l| !l.is_empty()) {
        // A folded line continues the header above; proxy and server could
        // read it differently, so it is not passed on.
        if line.starts_with(b" ") || line.starts_with(b"\t") {
            return Err(Malformed::FoldedHeader);
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(Malformed::NoColon);
        };
        let name = &line[..colon];
        if name.is_empty() || name.iter().any(|b| !b.is_ascii_graphic()) {
            return Err(Malformed::HeaderName);
        }
        if name.eq_ignore_ascii_case(b"proxy-connection")
            || name.eq_ignore_ascii_case(b"proxy-authorization")
        {
            continue;
        }
        if name.eq_ignore_ascii_case(b"host") {
            if host.is_some() {
                return Err(Malformed::TwoHosts);
            }
            host = Some(String::from_utf8_lossy(line[colon + 1..].trim_ascii()).into_owned());
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok((out, host))
}

/// Resolves and connects on a thread of its own, which `finish` need not
/// wait for: neither the resolver nor a connect can be interrupted, and
/// the run's end must not wait out a DNS or connect timeout. Err(None):
/// the proxy is stopping.
fn dial(shared: &Shared, id: u64, host: &Host, port: u16) -> Result<TcpStream, Option<Refusal>> {
    let (tx, rx) = mpsc::channel();
    if !shared.set_dial(id, Some(tx.clone())) {
        return Err(None);
    }
    let pinned = shared.grant.pinned(host);
    let dialer = thread::Builder::new().name("proxy-dial".into()).spawn({
        let host = host.clone();
        move || {
            let _ = tx.send(Dialed::Done(connect(&host, port, pinned)));
        }
    });
    let dialer = match dialer {
        Ok(d) => d,
        Err(e) => {
            shared.set_dial(id, None);
            return Err(Some(Refusal::new(
                502,
                format!("upstream connect failed: {e}"),
            )));
        }
    };
    let got = rx.recv();
    shared.set_dial(id, None);
    match got {
        Ok(Dialed::Done(r)) => {
            // It has sent its one message: it is returning.
            let _ = dialer.join();
            r.map_err(Some)
        }
        Ok(Dialed::Stopped) | Err(_) => Err(None),
    }
}

/// The address to reach: the pinned one, or the first public one the
/// name resolves to; then the connection.
fn connect(host: &Host, port: u16, pinned: Option<SocketAddr>) -> Result<TcpStream, Refusal> {
    let addr = match pinned {
        Some(a) => a,
        None => {
            let found: Vec<SocketAddr> = match host {
                Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
                Host::Name(n) => (n.as_str(), port)
                    .to_socket_addrs()
                    .map_err(|e| Refusal::new(502, format!("could not resolve {n}: {e}")))?
                    .collect(),
            };
            match (found.iter().find(|a| is_public(a.ip())), found.first()) {
                (Some(a), _) => *a,
                (None, None) => {
                    return Err(Refusal::new(
                        502,
                        format!("could not resolve {host}: no address"),
                    ));
                }
                (None, Some(first)) => {
                    let why = match host {
                        Host::Ip(_) => format!("{host} is a private or local address"),
                        Host::Name(_) => format!(
                            "{host} resolves only to private or local addresses ({})",
                            first.ip()
                        ),
                    };
                    return Err(Refusal::new(403, why));
                }
            }
        }
    };
    TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| Refusal::new(502, format!("upstream connect failed: {addr}: {e}")))
}

/// A CONNECT tunnel. The server's bytes flow at once (it is an admitted
/// host, and some protocols speak first); the client's first bytes are
/// read whole before any goes up, so that a TLS ClientHello's server name
/// is judged before the server sees it.
fn tunnel(
    shared: &Shared,
    entry: Option<usize>,
    flow: &Flow,
    client: &TcpStream,
    upstream: &TcpStream,
    early: Vec<u8>,
    port: u16,
) {
    thread::scope(|scope| {
        let down = thread::Builder::new()
            .name("proxy-relay".into())
            .spawn_scoped(scope, || relay(flow, upstream, client));
        if down.is_err() {
            end(client, upstream);
            return;
        }
        let Some((first, hello)) = first_bytes(flow, client, early) else {
            // The client closed before sending anything.
            let _ = upstream.shutdown(Shutdown::Write);
            return;
        };
        let refused = match hello {
            Hello::NotTls | Hello::ServerName(None) => None,
            Hello::ServerName(Some(name)) => {
                let admitted = Host::parse(&name).is_ok_and(|h| shared.grant.admits_host(&h, port));
                (!admitted).then(|| format!("the TLS server name {name} is {NOT_LISTED}"))
            }
            Hello::Malformed => Some("the TLS ClientHello could not be read".to_string()),
            // The client stopped sending mid-handshake.
            Hello::Incomplete => {
                end(client, upstream);
                return;
            }
        };
        if let Some(why) = refused {
            shared.settle(entry, Some(why));
            end(client, upstream);
            return;
        }
        if flow.write_all(upstream, &first).is_err() {
            end(client, upstream);
            return;
        }
        relay(flow, client, upstream);
    });
}

/// The client's first bytes in a tunnel: enough to know whether they are a
/// TLS ClientHello, and all of it when they are. None when the client
/// closed (or the connection went idle) before sending any.
fn first_bytes(flow: &Flow, client: &TcpStream, early: Vec<u8>) -> Option<(Vec<u8>, Hello)> {
    let mut buf = early;
    let mut chunk = [0u8; 4096];
    loop {
        match sni::inspect(&buf) {
            Hello::Incomplete if buf.len() >= MAX_HEAD => return Some((buf, Hello::Malformed)),
            Hello::Incomplete => {}
            hello => return Some((buf, hello)),
        }
        match flow.read(client, &mut chunk) {
            Ok(0) | Err(_) if buf.is_empty() => return None,
            Ok(0) | Err(_) => return Some((buf, Hello::Incomplete)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Both directions between the client and upstream, until both end.
fn relay_both(flow: &Flow, client: &TcpStream, upstream: &TcpStream) {
    thread::scope(|scope| {
        match thread::Builder::new()
            .name("proxy-relay".into())
            .spawn_scoped(scope, || relay(flow, upstream, client))
        {
            Ok(_) => relay(flow, client, upstream),
            Err(_) => end(client, upstream),
        }
    });
}

/// Copies `from` to `to` until `from` ends, then half-closes `to` so its
/// peer sees the end too while the other direction goes on. An error
/// either way, or the connection going idle, ends the whole connection.
fn relay(flow: &Flow, from: &TcpStream, to: &TcpStream) {
    let mut buf = [0u8; RELAY_BUFFER];
    loop {
        match flow.read(from, &mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if flow.write_all(to, &buf[..n]).is_err() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    end(from, to);
}

/// One admitted connection's traffic, shared by its relaying threads: the
/// bytes relayed, and when bytes last moved, for the idle limit.
struct Flow {
    idle: Duration,
    since: Instant,
    /// Nanoseconds from `since` to the last bytes read or written, either
    /// way.
    last: AtomicU64,
    /// Bytes written to either side (see `Connection::bytes`).
    bytes: AtomicU64,
}

impl Flow {
    fn new(idle: Duration) -> Flow {
        Flow {
            idle,
            since: Instant::now(),
            last: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    fn moved(&self) {
        let now = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::SeqCst);
    }

    /// How long the connection may still stay quiet; None once it has
    /// been quiet for the idle limit.
    fn left(&self) -> Option<Duration> {
        let last = Duration::from_nanos(self.last.load(Ordering::SeqCst));
        let quiet = self.since.elapsed().saturating_sub(last);
        self.idle.checked_sub(quiet).filter(|d| !d.is_zero())
    }

    /// `Read::read`, but failing with `TimedOut` once nothing has moved
    /// either way for the idle limit. A read timing out while the other
    /// direction moves is taken up again for the time left.
    fn read(&self, mut from: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let left = self.left().ok_or(io::ErrorKind::TimedOut)?;
            from.set_read_timeout(Some(left))?;
            match from.read(buf) {
                Ok(n) => {
                    if n > 0 {
                        self.moved();
                    }
                    return Ok(n);
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// `Write::write_all`, counting what is written, and failing with
    /// `TimedOut` when the peer takes nothing while the connection is
    /// otherwise idle too.
    fn write_all(&self, mut to: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let left = self.left().ok_or(io::ErrorKind::TimedOut)?;
            to.set_write_timeout(Some(left))?;
            match to.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.bytes.fetch_add(n as u64, Ordering::SeqCst);
                    self.moved();
                    buf = &buf[n..];
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A socket timeout (or an interruption): the call may be made again.
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn end(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}
