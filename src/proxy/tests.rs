//! The proxy end to end on 127.0.0.1, with upstreams on threads of the
//! test; and the list's tables.
//!
//! Nothing here waits for time to pass: every step waits for a byte or an
//! end of stream. `PATIENCE` only turns a hang into a failure.

use super::sni::tests::{client_hello, sni};
use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);

fn grant(allow: &[&str], pins: &[(&str, SocketAddr)]) -> Grant {
    Grant {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        resolve: pins.iter().map(|(n, a)| (n.to_string(), *a)).collect(),
    }
}

#[test]
fn admits_table() {
    let g = grant(
        &[
            "pypi.org",
            "*.crates.io",
            "mirror.internal:8080",
            "Files.Example.",
            "203.0.113.7",
            "[2001:db8::1]:8443",
        ],
        &[],
    );
    let cases: &[(&str, u16, bool)] = &[
        ("pypi.org", 443, true),
        ("pypi.org", 80, true),
        ("PyPI.org.", 443, true),
        ("pypi.org", 8080, false),
        ("files.pypi.org", 443, false),
        ("evilpypi.org", 443, false),
        ("static.crates.io", 443, true),
        ("a.b.crates.io", 80, true),
        ("crates.io", 443, false),
        ("xcrates.io", 443, false),
        ("mirror.internal", 8080, true),
        ("mirror.internal", 443, false),
        ("files.example", 443, true),
        ("203.0.113.7", 443, true),
        ("203.0.113.8", 443, false),
        ("[2001:db8::1]", 8443, true),
        ("2001:db8::1", 8443, true),
        ("2001:db8::1", 443, false),
        ("", 443, false),
        ("pypi.org/x", 443, false),
    ];
    for &(host, port, want) in cases {
        assert_eq!(g.admits(host, port), want, "{host}:{port}");
    }
    // A pinned name is still judged by the list.
    let pinned = grant(&[], &[("pkg.test", "127.0.0.1:1".parse().unwrap())]);
    assert!(!pinned.admits("pkg.test", 443));
    // An entry the loader would refuse admits nothing.
    assert!(!grant(&["*"], &[]).admits("x.test", 443));
}

#[test]
fn check_entry_table() {
    for good in [
        "pypi.org",
        "*.crates.io",
        "mirror.internal:8080",
        "*.x.test:8443",
        "localhost",
        "203.0.113.7",
        "203.0.113.7:8080",
        "::1",
        "[::1]:443",
        "[2001:db8::1]",
        "under_score.test",
        "trailing.dot.",
    ] {
        assert_eq!(Grant::check_entry(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "*",
        "*.",
        "a..b",
        "https://x",
        "x/y",
        "x:0",
        "x:99999",
        "x:",
        "*.x:abc",
        "a b",
        " pypi.org",
        "a.*.b",
        "*x.test",
        "*.*.x",
        "*.10.0.0.1",
        "-x.test",
        "127.1",
        "[::1",
        "[::1]x",
    ] {
        assert!(Grant::check_entry(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn connections_serialise_in_camel_case() {
    let refused = Connection {
        host: "x.test".into(),
        port: 443,
        kind: "connect".into(),
        allowed: false,
        reason: Some("why".into()),
        bytes: 0,
    };
    let json = serde_json::to_value(&refused).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"host": "x.test", "port": 443, "kind": "connect", "allowed": false, "reason": "why", "bytes": 0})
    );
    let allowed = Connection {
        allowed: true,
        reason: None,
        bytes: 1234,
        ..refused
    };
    let text = serde_json::to_string(&allowed).unwrap();
    assert!(!text.contains("reason"), "{text}");
    assert!(text.contains(r#""bytes":1234"#), "{text}");
    assert_eq!(serde_json::from_str::<Connection>(&text).unwrap(), allowed);
    // A log written before `bytes` existed still reads.
    let old: Connection = serde_json::from_str(
        r#"{"host": "x.test", "port": 443, "kind": "connect", "allowed": true}"#,
    )
    .unwrap();
    assert_eq!(old.bytes, 0);
}

/// An upstream that echoes each of `n` connections until it ends.
fn echo_server(n: usize) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        thread::scope(|s| {
            for _ in 0..n {
                let Ok((c, _)) = l.accept() else { return };
                s.spawn(move || {
                    let _ = std::io::copy(&mut &c, &mut &c);
                    let _ = c.shutdown(std::net::Shutdown::Write);
                });
            }
        })
    });
    addr
}

/// An upstream that answers each of `n` requests, one connection each,
/// with `hello`, and hands the test the head it received.
fn http_server(n: usize) -> (SocketAddr, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut c, _)) = l.accept() else { return };
            let head = read_head(&mut c);
            let _ = tx.send(head);
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    (addr, rx)
}

/// Reads up to and including a blank line (or to the end).
fn read_head(c: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match c.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn read_to_end(c: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn start(g: Grant) -> (Proxy, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (Proxy::start(l, g).unwrap(), addr)
}

fn start_with(g: Grant, limits: Limits) -> (Proxy, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (Proxy::start_with(l, g, limits).unwrap(), addr)
}

/// A limit short enough for a test to reach, never waited for as such.
const SHORT: Duration = Duration::from_millis(200);

fn client(proxy: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(proxy).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    c
}

/// A client with a CONNECT answered; the response head.
fn connect(proxy: SocketAddr, target: &str) -> (TcpStream, String) {
    let mut c = client(proxy);
    write!(c, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").unwrap();
    let head = read_head(&mut c);
    (c, head)
}

/// True when the peer ended the connection (rather than the read timing
/// out, which would mean a hang).
fn ended(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => ended(c),
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// True when the peer closed the connection without a byte of answer
/// (rather than answering, or the read timing out).
fn dropped(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

fn allowed(host: &str, port: u16, kind: &str, bytes: u64) -> Connection {
    Connection {
        host: host.into(),
        port,
        kind: kind.into(),
        allowed: true,
        reason: None,
        bytes,
    }
}

#[test]
fn connect_tunnel_echoes_both_ways() {
    let echo = echo_server(1);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let (mut c, head) = connect(addr, "pkg.test:443");
    assert_eq!(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    c.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    c.write_all(b" and more").unwrap();
    // A half-close reaches the server, whose end comes back.
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), " and more");
    let log = proxy.finish();
    // "ping" and " and more", each up and back down.
    assert_eq!(
        log.connections,
        vec![allowed("pkg.test", 443, "connect", 2 * (4 + 9))]
    );
    assert_eq!(log.dropped, 0);
}

#[test]
fn connect_not_listed_is_refused() {
    let echo = echo_server(0);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let (mut c, head) = connect(addr, "other.test:443");
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    assert!(
        head.contains("\r\nX-Agent-Rsh-Refused: not on the policy's network.allow list\r\n"),
        "{head}"
    );
    let body = read_to_end(&mut c);
    assert_eq!(
        body,
        "agent-rsh: other.test:443 is not on the policy's network.allow list\n"
    );
    drop(c);
    let log = proxy.finish();
    assert_eq!(
        log.connections,
        vec![Connection {
            allowed: false,
            reason: Some("not on the policy's network.allow list".into()),
            ..allowed("other.test", 443, "connect", 0)
        }]
    );
    assert_eq!(log.connections[0].bytes, 0);
}

#[test]
fn plain_http_goes_in_origin_form() {
    let (upstream, heads) = http_server(1);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", upstream)]));
    let mut c = client(addr);
    c.write_all(
        b"GET http://pkg.test/x?y=1 HTTP/1.1\r\nHost: pkg.test\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nAccept: */*\r\n\r\n",
    )
    .unwrap();
    let answer = read_to_end(&mut c);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nhello"), "{answer}");
    let head = heads.recv().unwrap();
    assert_eq!(
        head,
        "GET /x?y=1 HTTP/1.1\r\nHost: pkg.test\r\nAccept: */*\r\n\r\n"
    );
    drop(c);
    let log = proxy.finish();
    // The head as sent upstream, and the whole answer.
    let bytes = (head.len() + answer.len()) as u64;
    assert_eq!(
        log.connections,
        vec![allowed("pkg.test", 80, "http", bytes)]
    );
}

#[test]
fn loopback_is_refused_unless_pinned() {
    let echo = echo_server(0);
    let port = echo.port();
    let listed = format!("127.0.0.1:{port}");
    let (proxy, addr) = start(grant(&[&listed, "localhost"], &[]));
    let (mut c, head) = connect(addr, &listed);
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    assert!(read_to_end(&mut c).contains("private or local address"));
    let (mut c, head) = connect(addr, &format!("127.0.0.2:{port}"));
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    assert!(read_to_end(&mut c).contains("is not on the policy's network.allow list"));
    // A listed name that resolves to loopback (or not at all, on a host
    // without one) is not reached either.
    let (_c, head) = connect(addr, "localhost:443");
    assert!(
        head.starts_with("HTTP/1.1 403 ") || head.starts_with("HTTP/1.1 502 "),
        "{head}"
    );
    let log = proxy.finish();
    let reasons: Vec<_> = log
        .connections
        .iter()
        .map(|c| (c.allowed, c.reason.clone().unwrap_or_default()))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons.iter().all(|(allowed, _)| !allowed));
    assert_eq!(reasons[0].1, "127.0.0.1 is a private or local address");
    assert_eq!(reasons[1].1, "not on the policy's network.allow list");
}

#[test]
fn tls_server_name_is_judged() {
    let echo = echo_server(2);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));

    let (mut c, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    c.write_all(&client_hello(&[
        (0x0010, b"\x00\x03\x02h2".to_vec()),
        sni("evil.test"),
    ]))
    .unwrap();
    assert!(ended(&mut c), "the tunnel stayed open");

    // The same through a listed name passes untouched.
    let hello = client_hello(&[sni("PKG.test")]);
    let (mut c2, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    c2.write_all(&hello).unwrap();
    let mut echoed = vec![0u8; hello.len()];
    c2.read_exact(&mut echoed).unwrap();
    assert_eq!(echoed, hello);
    drop(c2);

    let log = proxy.finish();
    assert_eq!(log.connections.len(), 2);
    assert!(!log.connections[0].allowed);
    let reason = log.connections[0].reason.as_deref().unwrap();
    assert!(reason.contains("evil.test"), "{reason}");
    assert_eq!(log.connections[0].bytes, 0);
    assert_eq!(
        log.connections[1],
        allowed("pkg.test", 443, "connect", 2 * hello.len() as u64)
    );
}

#[test]
fn a_hello_sent_with_the_connect_is_judged_too() {
    let echo = echo_server(1);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let mut c = client(addr);
    let mut asked = b"CONNECT pkg.test:443 HTTP/1.1\r\n\r\n".to_vec();
    asked.extend(client_hello(&[sni("evil.test")]));
    c.write_all(&asked).unwrap();
    assert!(read_head(&mut c).starts_with("HTTP/1.1 200 "));
    assert!(ended(&mut c));
    let log = proxy.finish();
    assert!(
        log.connections[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("evil.test")
    );
}

#[test]
fn finish_ends_open_tunnels_and_half_requests() {
    let echo = echo_server(1);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let (mut tunnel, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    tunnel.write_all(b"x").unwrap();
    let mut b = [0u8];
    tunnel.read_exact(&mut b).unwrap();
    let mut refused = client(addr);
    refused
        .write_all(b"CONNECT other.test:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(read_head(&mut refused).starts_with("HTTP/1.1 403 "));
    // Neither is closed by the client: `finish` must end both.
    let mut half = client(addr);
    half.write_all(b"GET http://pkg.te").unwrap();
    let log = proxy.finish();
    assert!(ended(&mut tunnel));
    assert!(ended(&mut half));
    assert_eq!(log.connections.len(), 2);
    // The tunnel's count up to `finish`: one byte each way.
    assert_eq!(log.connections[0], allowed("pkg.test", 443, "connect", 2));
    assert_eq!(log.connections[1].host, "other.test");
    assert_eq!(log.connections[1].bytes, 0);
}

#[test]
fn bad_requests() {
    let (upstream, _heads) = http_server(0);
    let (proxy, addr) = start(grant(&["pkg.test", "[::1]:9"], &[("pkg.test", upstream)]));
    let ask = |request: &[u8]| {
        let mut c = client(addr);
        c.write_all(request).unwrap();
        let answer = read_to_end(&mut c);
        answer.lines().next().unwrap_or_default().to_string()
    };
    // Not logged: no host was asked for.
    assert_eq!(ask(b"hello\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    assert_eq!(
        ask(b"GET /x HTTP/1.1\r\nHost: pkg.test\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        ask(b"CONNECT pkg.test HTTP/1.1\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        ask(b"CONNECT ::1:9 HTTP/1.1\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        ask(b"GET http://u:p@pkg.test/ HTTP/1.1\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    drop(client(addr));
    // Logged.
    assert_eq!(
        ask(b"GET https://pkg.test/ HTTP/1.1\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        ask(b"GET http://pkg.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
        "HTTP/1.1 403 Forbidden"
    );
    assert_eq!(
        ask(b"GET http://pkg.test/ HTTP/1.1\r\nHost: pkg.test\r\n folded\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    let mut huge = b"GET http://pkg.test/ HTTP/1.1\r\n".to_vec();
    while huge.len() <= MAX_HEAD {
        huge.extend(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    huge.extend(b"\r\n");
    assert_eq!(ask(&huge), "HTTP/1.1 431 Request Header Fields Too Large");
    let log = proxy.finish();
    let got: Vec<_> = log
        .connections
        .iter()
        .map(|c| {
            (
                c.host.as_str(),
                c.port,
                c.allowed,
                c.reason.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "pkg.test",
                443,
                false,
                "an https:// URL is asked for with CONNECT, not as a plain request"
            ),
            (
                "pkg.test",
                80,
                false,
                "the Host header `evil.test` is not the request's host"
            ),
            (
                "pkg.test",
                80,
                false,
                "folded header lines are not accepted"
            ),
            (
                "pkg.test",
                80,
                false,
                "the request head is larger than 64 KiB"
            ),
        ]
    );
}

#[test]
fn the_log_is_bounded() {
    let (proxy, addr) = start(Grant::default());
    for _ in 0..MAX_LOGGED + 5 {
        let (mut c, head) = connect(addr, "x.test:443");
        assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
        read_to_end(&mut c);
    }
    let log = proxy.finish();
    assert_eq!(log.connections.len(), MAX_LOGGED);
    assert_eq!(log.dropped, 5);
}

#[test]
fn connections_beyond_the_limit_get_503() {
    let echo = echo_server(MAX_SERVED);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let tunnels: Vec<TcpStream> = (0..MAX_SERVED)
        .map(|_| {
            let (mut c, head) = connect(addr, "pkg.test:443");
            assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
            // A round trip: the connection is being served.
            c.write_all(b"x").unwrap();
            let mut b = [0u8];
            c.read_exact(&mut b).unwrap();
            c
        })
        .collect();
    let mut one_more = client(addr);
    let answer = read_to_end(&mut one_more);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    let log = proxy.finish();
    assert_eq!(log.connections.len(), MAX_SERVED);
    drop(tunnels);
}

#[test]
fn real_curl() {
    let curl = std::path::Path::new("/usr/bin/curl");
    if !curl.exists() {
        println!("skipped: no /usr/bin/curl");
        return;
    }
    let (upstream, heads) = http_server(2);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", upstream)]));
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(curl)
            .args(["-sS", "--max-time", "60", "-x", &format!("http://{addr}")])
            .args(extra)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(run(&["http://pkg.test/x"]), "hello");
    assert!(heads.recv().unwrap().starts_with("GET /x HTTP/1.1\r\n"));
    // Through a CONNECT tunnel.
    assert_eq!(run(&["--proxytunnel", "http://pkg.test:443/y"]), "hello");
    assert!(heads.recv().unwrap().starts_with("GET /y HTTP/1.1\r\n"));
    let mut log = proxy.finish();
    // What curl sends is curl's; something went both ways.
    for c in &mut log.connections {
        assert!(c.bytes > 0, "{c:?}");
        c.bytes = 0;
    }
    assert_eq!(
        log.connections,
        vec![
            allowed("pkg.test", 80, "http", 0),
            allowed("pkg.test", 443, "connect", 0)
        ]
    );
}

#[test]
fn the_default_limits() {
    assert_eq!(
        Limits::default(),
        Limits {
            idle: IDLE_TIMEOUT,
            head: HEAD_TIMEOUT
        }
    );
    assert_eq!(IDLE_TIMEOUT, Duration::from_secs(300));
    assert_eq!(HEAD_TIMEOUT, Duration::from_secs(30));
}

#[test]
fn a_tunnel_counts_its_bytes_both_ways() {
    const N: usize = 300_000;
    let echo = echo_server(1);
    let (proxy, addr) = start(grant(&["pkg.test"], &[("pkg.test", echo)]));
    let (mut c, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let sent: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let got = thread::scope(|s| {
        let mut up = c.try_clone().unwrap();
        let sent = &sent;
        s.spawn(move || {
            up.write_all(sent).unwrap();
            up.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        got
    });
    assert!(got == sent, "{} bytes came back", got.len());
    let log = proxy.finish();
    assert_eq!(
        log.connections,
        vec![allowed("pkg.test", 443, "connect", 2 * N as u64)]
    );
}

#[test]
fn idle_connections_are_closed() {
    let echo = echo_server(3);
    let limits = Limits {
        idle: SHORT,
        head: PATIENCE,
    };
    let (proxy, addr) = start_with(grant(&["pkg.test"], &[("pkg.test", echo)]), limits);
    // A tunnel that carried a byte each way, then nothing.
    let (mut used, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    used.write_all(b"x").unwrap();
    let mut b = [0u8];
    used.read_exact(&mut b).unwrap();
    assert!(ended(&mut used), "the idle tunnel stayed open");
    // A tunnel whose client never sends its first bytes.
    let (mut silent, head) = connect(addr, "pkg.test:443");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(ended(&mut silent), "the silent tunnel stayed open");
    // A plain request whose upstream never answers (it only echoes).
    let mut plain = client(addr);
    plain
        .write_all(b"GET http://pkg.test:443/ HTTP/1.1\r\nHost: pkg.test:443\r\n\r\n")
        .unwrap();
    assert!(ended(&mut plain), "the idle request stayed open");
    let log = proxy.finish();
    assert_eq!(log.connections.len(), 3);
    assert!(log.connections.iter().all(|c| c.allowed), "{log:?}");
    assert_eq!(log.connections[0].bytes, 2);
    assert_eq!(log.connections[1].bytes, 0);
}

#[test]
fn idle_connections_free_their_slots() {
    let echo = echo_server(MAX_SERVED + 1);
    let limits = Limits {
        idle: SHORT,
        head: PATIENCE,
    };
    let (proxy, addr) = start_with(grant(&["pkg.test"], &[("pkg.test", echo)]), limits);
    let idle: Vec<TcpStream> = (0..MAX_SERVED)
        .map(|_| {
            let (c, head) = connect(addr, "pkg.test:443");
            assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
            c
        })
        .collect();
    for mut c in idle {
        assert!(ended(&mut c), "an idle tunnel stayed open");
    }
    // A slot is freed just after its client sees the end; until then the
    // proxy may still answer 503 (and close before reading the request,
    // which can reset it). `PATIENCE` only turns a hang into a failure.
    let give_up = std::time::Instant::now() + PATIENCE;
    loop {
        assert!(std::time::Instant::now() < give_up, "no slot was freed");
        let mut c = client(addr);
        if c.write_all(b"CONNECT pkg.test:443 HTTP/1.1\r\n\r\n")
            .is_err()
        {
            continue;
        }
        let head = read_head(&mut c);
        if head.is_empty() || head.starts_with("HTTP/1.1 503 ") {
            continue;
        }
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        c.write_all(b"x").unwrap();
        let mut b = [0u8];
        c.read_exact(&mut b).unwrap();
        break;
    }
    drop(proxy);
}

#[test]
fn a_slow_request_head_is_dropped() {
    let limits = Limits {
        idle: PATIENCE,
        head: SHORT,
    };
    let (proxy, addr) = start_with(grant(&["pkg.test"], &[]), limits);
    let mut half = client(addr);
    half.write_all(b"GET http://pkg.test/ HTTP/1.1\r\nHost: pk")
        .unwrap();
    let mut silent = client(addr);
    assert!(dropped(&mut half), "the slow head was not dropped");
    assert!(dropped(&mut silent), "the silent client was not dropped");
    let log = proxy.finish();
    assert_eq!(log, Log::default());
}
