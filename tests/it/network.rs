//! `network = { allow = [...] }`: the run's one way out is agent-rsh's
//! proxy. Real clients (curl, Python's urllib, pip) in the run, a real
//! HTTP server on the host (python3's http.server), names pinned to it
//! with `resolve` as the policy documents.

use crate::common::{self, bin};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// python3's http.server on 127.0.0.1 of the host, serving `root`;
/// killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(root: &Path) -> Server {
        let mut child = Command::new("python3")
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
            .current_dir(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split("port ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("http.server said {line:?}"));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ready(test: &str) -> bool {
    if !common::system_python3() {
        return common::unavailable(test, "needs python3 in /usr/bin");
    }
    common::ready(test, false, &["curl"])
}

/// A policy that lets `programs` reach pkg.test, pinned to the host's
/// 127.0.0.1:`port`, through the proxy.
fn pinned_policy(port: u16, programs: &[&str]) -> common::TestPolicy {
    let allow: Vec<String> = programs.iter().map(|p| format!("{p:?}")).collect();
    common::policy(&format!(
        "network = {{ allow = [\"pkg.test\"], resolve = {{ \"pkg.test\" = \"127.0.0.1:{port}\" }} }}\n\
         [commands]\nallow = [{}]\n",
        allow.join(", ")
    ))
}

fn run(policy: &common::TestPolicy, ws: &Path, cmd: &str) -> Value {
    let out = Command::new(bin())
        .args(["run", "--json", "--policy"])
        .arg(&policy.path)
        .arg("--workspace")
        .arg(ws)
        .args(["--", cmd])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a RunResult ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// Admitted (host, port, connections) and refused (host, port).
type Report = (Vec<(String, u64, u64)>, Vec<(String, u64)>);

/// The RunResult's `network` report.
fn network(r: &Value) -> Report {
    let list = |k: &str| r["network"][k].as_array().cloned().unwrap_or_default();
    let allowed = list("allowed")
        .iter()
        .map(|c| {
            (
                s(c, "host").to_string(),
                c["port"].as_u64().unwrap_or(0),
                c["connections"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let refused = list("refused")
        .iter()
        .map(|c| (s(c, "host").to_string(), c["port"].as_u64().unwrap_or(0)))
        .collect();
    (allowed, refused)
}

/// Connects straight to an address, ignoring every proxy variable.
const DIRECT_PY: &str = r#"
import socket, sys
for addr in sys.argv[1:]:
    h, p = addr.rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), timeout=5)
        print(addr, "reached")
    except OSError as e:
        print(addr, "failed")
"#;

#[test]
fn a_domain_list_reaches_the_listed_hosts_through_the_proxy_and_nothing_else() {
    let test = "a_domain_list_reaches_the_listed_hosts_through_the_proxy_and_nothing_else";
    if !ready(test) {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("hello.txt"), "hello from pkg.test\n").unwrap();
    let server = Server::start(site.path());
    let p = pinned_policy(server.port, &["curl", "python3"]);
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("direct.py"), DIRECT_PY).unwrap();
    let cmd = format!(
        "curl -sS http://pkg.test/hello.txt; \
         curl -sS -o /dev/null -w 'other %{{http_code}}\\n' http://other.test/x; \
         curl -sS --noproxy '*' http://pkg.test/hello.txt || echo direct name failed; \
         python3 direct.py 127.0.0.1:{} 192.0.2.1:80",
        server.port
    );
    let r = run(&p, ws.path(), &cmd);
    assert_eq!(
        s(&r, "stdout"),
        format!(
            "hello from pkg.test\nother 403\ndirect name failed\n127.0.0.1:{} failed\n192.0.2.1:80 failed\n",
            server.port
        ),
        "{r}"
    );
    // What the run reached, and what it was refused, with the key that
    // would admit it.
    assert_eq!(
        network(&r),
        (
            vec![("pkg.test".into(), 80, 1)],
            vec![("other.test".into(), 80)]
        ),
        "{r}"
    );
    assert!(
        s(&r["network"]["refused"][0], "hint").contains("add \"other.test\" to network.allow"),
        "{r}"
    );
    assert!(
        r["network"]["allowed"][0]["bytes"].as_u64().unwrap() > 0,
        "{r}"
    );
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("network: other.test:80 refused"), "{r}");
    assert_eq!(r["confinement"]["network"], "domains", "{r}");
    assert_eq!(r["confinement"]["networkNamespace"], true, "{r}");

    // HTTPS goes through CONNECT: admitted for the listed name (the
    // server speaks no TLS, so the handshake then fails), refused for
    // any other.
    let r = run(
        &p,
        ws.path(),
        "curl -sS https://pkg.test/ || echo tls failed; curl -sS https://other.test/ || echo refused",
    );
    assert_eq!(s(&r, "stdout"), "tls failed\nrefused\n", "{r}");
    assert_eq!(
        network(&r),
        (
            vec![("pkg.test".into(), 443, 1)],
            vec![("other.test".into(), 443)]
        ),
        "{r}"
    );

    // An IP literal not on the list, the cloud metadata address among
    // them, is refused; a listed name that resolves to loopback is refused
    // for its address (a pin is the way to a private address).
    let p = common::policy(&format!(
        "network = {{ allow = [\"localhost:{port}\"] }}\n[commands]\nallow = [\"curl\"]\n",
        port = server.port
    ));
    let r = run(
        &p,
        ws.path(),
        &format!(
            "curl -sS -o /dev/null -w '%{{http_code}}\\n' http://169.254.169.254/latest/meta-data/; \
             curl -sS -o /dev/null -w '%{{http_code}}\\n' --noproxy '' http://localhost:{}/hello.txt",
            server.port
        ),
    );
    assert_eq!(s(&r, "stdout"), "403\n403\n", "{r}");
    let refused = &r["network"]["refused"];
    assert_eq!(s(&refused[0], "host"), "169.254.169.254", "{r}");
    assert!(s(&refused[1], "reason").contains("private or local"), "{r}");
    assert!(s(&refused[1], "hint").contains("network.resolve"), "{r}");
}

/// Fetches a URL through the proxy variables, as most clients do.
const FETCH_PY: &str = r#"
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end="")
except OSError as e:
    print("python3 failed:", getattr(e, "reason", e))
"#;

/// Runs curl as a child of python3, not through a shell.
const SPAWN_PY: &str = r#"
import subprocess, sys
r = subprocess.run(["curl", "-sS", sys.argv[1]], capture_output=True, text=True)
print("curl under python3:", "ok" if r.returncode == 0 else "failed")
"#;

#[test]
fn network_commands_give_the_proxy_to_the_listed_programs_only_by_the_kernel() {
    let test = "network_commands_give_the_proxy_to_the_listed_programs_only_by_the_kernel";
    if !ready(test) {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("hello.txt"), "hello\n").unwrap();
    let server = Server::start(site.path());
    let p = common::policy(&format!(
        "network = {{ allow = [\"pkg.test\"], commands = [\"curl\"], resolve = {{ \"pkg.test\" = \"127.0.0.1:{}\" }} }}\n\
         [commands]\nallow = [\"curl\", \"python3\"]\n",
        server.port
    ));
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("fetch.py"), FETCH_PY).unwrap();
    std::fs::write(ws.path().join("spawn.py"), SPAWN_PY).unwrap();
    let url = "http://pkg.test/hello.txt";
    // curl, alone and from a nested shell, reaches the proxy; python3,
    // with the same variables, cannot connect to it (Landlock), and a
    // curl that python3 starts itself inherits python3's layer.
    let r = run(
        &p,
        ws.path(),
        &format!(
            "curl -sS {url}; sh -c 'curl -sS {url}'; python3 fetch.py {url}; python3 spawn.py {url}"
        ),
    );
    assert_eq!(
        s(&r, "stdout"),
        "hello\nhello\npython3 failed: [Errno 13] Permission denied\ncurl under python3: failed\n",
        "{r}"
    );
    // Only curl's own two requests reached the proxy at all.
    assert_eq!(
        network(&r),
        (vec![("pkg.test".into(), 80, 2)], vec![]),
        "{r}"
    );
    // A program run directly, not through the interpreter, gets its layer
    // too.
    let r = run(&p, ws.path(), &format!("python3 fetch.py {url}"));
    assert_eq!(
        s(&r, "stdout"),
        "python3 failed: [Errno 13] Permission denied\n",
        "{r}"
    );
    let r = run(&p, ws.path(), &format!("curl -sS {url}"));
    assert_eq!(s(&r, "stdout"), "hello\n", "{r}");
}

/// A wheel of one module, `tinypkg`, made with zipfile as the format
/// describes it (no build tool needed).
const MAKE_WHEEL_PY: &str = r#"
import base64, hashlib, os, sys, zipfile
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
name = "tinypkg-1.0-py3-none-any.whl"
files = {
    "tinypkg/__init__.py": "ANSWER = 42\n",
    "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
    "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(os.path.join(out, name), "w") as z:
    for path, text in files.items():
        data = text.encode()
        z.writestr(path, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
os.makedirs(os.path.join(out, "simple", "tinypkg"), exist_ok=True)
with open(os.path.join(out, "simple", "tinypkg", "index.html"), "w") as f:
    f.write(f'<html><body><a href="../../{name}">{name}</a></body></html>\n')
"#;

/// A package index serving `tinypkg` (MAKE_WHEEL_PY) from a local server.
fn wheel_index() -> (tempfile::TempDir, Server) {
    let site = tempfile::tempdir().unwrap();
    let made = Command::new("python3")
        .args(["-c", MAKE_WHEEL_PY])
        .arg(site.path())
        .status()
        .unwrap();
    assert!(made.success());
    let server = Server::start(site.path());
    (site, server)
}

#[test]
fn pip_installs_from_a_listed_index_into_a_venv_and_nothing_else_is_reached() {
    let test = "pip_installs_from_a_listed_index_into_a_venv_and_nothing_else_is_reached";
    if !ready(test) {
        return;
    }
    let (_site, server) = wheel_index();
    let p = common::policy(&format!(
        "network = {{ allow = [\"pkg.test\"], resolve = {{ \"pkg.test\" = \"127.0.0.1:{}\" }} }}\n\
         limits.timeout_ms = 300000\n\
         [commands]\nallow = [\"python3\"]\nworkspace = true\n",
        server.port
    ));
    let ws = tempfile::tempdir().unwrap();
    let r = run(
        &p,
        ws.path(),
        "python3 -m venv .venv && . .venv/bin/activate && pip install -q --disable-pip-version-check \
         --index-url http://pkg.test/simple/ --trusted-host pkg.test tinypkg && python -c 'import tinypkg; print(tinypkg.ANSWER)'",
    );
    assert_eq!(s(&r, "stdout"), "42\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    let (allowed, refused) = network(&r);
    assert!(!allowed.is_empty(), "{r}");
    assert!(allowed.iter().all(|(h, _, _)| h == "pkg.test"), "{r}");
    assert!(refused.is_empty(), "{r}");
}

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

#[test]
fn git_clones_and_npm_installs_through_the_proxy() {
    let test = "git_clones_and_npm_installs_through_the_proxy";
    if !ready(test) || !common::ready(test, false, &["git", "npm", "node"]) {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    // A repository served over git's dumb HTTP protocol.
    sh(
        site.path(),
        "git init -q src && cd src && echo cloned > a.txt && git add a.txt \
         && git -c user.name=t -c user.email=t@t commit -qm one \
         && git clone -q --bare . ../repo.git && cd ../repo.git && git update-server-info",
    );
    // An npm registry: a package document and its tarball.
    sh(
        site.path(),
        "mkdir pkg && cd pkg && printf '{\"name\":\"tinynpm\",\"version\":\"1.0.0\",\"main\":\"index.js\"}' > package.json \
         && echo 'module.exports = 42;' > index.js && npm pack -q --silent >/dev/null && mv tinynpm-1.0.0.tgz ..",
    );
    let server = Server::start(site.path());
    let tgz = std::fs::read(site.path().join("tinynpm-1.0.0.tgz")).unwrap();
    let sha1 = Command::new("sha1sum")
        .arg(site.path().join("tinynpm-1.0.0.tgz"))
        .output()
        .unwrap();
    let sha1 = String::from_utf8_lossy(&sha1.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(!tgz.is_empty());
    std::fs::write(
        site.path().join("tinynpm"),
        format!(
            "{{\"name\":\"tinynpm\",\"dist-tags\":{{\"latest\":\"1.0.0\"}},\"versions\":{{\"1.0.0\":\
             {{\"name\":\"tinynpm\",\"version\":\"1.0.0\",\"main\":\"index.js\",\
             \"dist\":{{\"tarball\":\"http://pkg.test/tinynpm-1.0.0.tgz\",\"shasum\":\"{sha1}\"}}}}}}}}"
        ),
    )
    .unwrap();
    let exec_path = Command::new("git").arg("--exec-path").output().unwrap();
    let exec_path = String::from_utf8_lossy(&exec_path.stdout)
        .trim()
        .to_string();
    let p = common::policy(&format!(
        "network = {{ allow = [\"pkg.test\"], resolve = {{ \"pkg.test\" = \"127.0.0.1:{}\" }} }}\n\
         limits.timeout_ms = 300000\n\
         [commands]\nallow = [\"git\", \"npm\", \"node\", \"cat\"]\n\
         [scopes]\nexec = [\"{exec_path}\", \"/usr/bin/env\"]\n",
        server.port
    ));
    let ws = tempfile::tempdir().unwrap();
    let r = run(
        &p,
        ws.path(),
        "git clone -q http://pkg.test/repo.git c && cat c/a.txt \
         && npm install --registry http://pkg.test/ --no-audit --no-fund -s tinynpm \
         && node -e 'console.log(require(\"tinynpm\"))'",
    );
    assert_eq!(s(&r, "stdout"), "cloned\n42\n", "{r}");
    let (allowed, refused) = network(&r);
    assert!(allowed.iter().all(|(h, _, _)| h == "pkg.test"), "{r}");
    assert!(refused.is_empty(), "{r}");
}

#[test]
fn two_hundred_runs_with_a_proxy_each_leave_nothing_behind() {
    let test = "two_hundred_runs_with_a_proxy_each_leave_nothing_behind";
    if !ready(test) {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("hello.txt"), "hello\n").unwrap();
    let server = Server::start(site.path());
    let p = pinned_policy(server.port, &["curl"]);
    let ws = tempfile::tempdir().unwrap();
    // Twenty at a time, each its own namespace and proxy.
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..20)
            .map(|_| {
                s.spawn(|| {
                    let mut bad = Vec::new();
                    for _ in 0..10 {
                        let r = run(&p, ws.path(), "curl -sS http://pkg.test/hello.txt");
                        if s_of(&r) != "hello\n" {
                            bad.push(r.to_string());
                        }
                    }
                    bad
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} failed: {}",
        failures.len(),
        failures[0]
    );
    // Every run's agent-rsh (its proxy threads with it) and guardian ended.
    let left = common::processes_with(p.path.to_str().unwrap());
    assert!(left.is_empty(), "{left:?}");
}

fn s_of(r: &Value) -> &str {
    s(r, "stdout")
}

/// Without a network namespace the proxy cannot be the run's only way
/// out: "required" refuses before anything runs, "best-effort" runs with
/// no network and says so.
#[test]
fn a_domain_list_without_a_network_namespace_fails_closed() {
    let ws = tempfile::tempdir().unwrap();
    for (mode, refused) in [("required", true), ("best-effort", false)] {
        let p = common::policy(&format!(
            "confinement = \"{mode}\"\nnetwork = {{ allow = [\"pypi.org\"] }}\n[commands]\nallow = [\"touch\"]\n"
        ));
        let out = Command::new(bin())
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "touch ran"])
            .env(agent_rsh::confine::probe::SIMULATE_ENV, "netns")
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        if refused {
            assert_eq!(out.status.code(), Some(125), "{r}");
            assert!(
                s(&r, "error").contains("a network namespace (network = { allow = [...] })"),
                "{r}"
            );
            assert!(!ws.path().join("ran").exists(), "the command ran: {r}");
        } else {
            assert_eq!(r["exitCode"], 0, "{r}");
            assert_eq!(r["confinement"]["network"], "none", "{r}");
            assert!(
                r["warnings"]
                    .to_string()
                    .contains("network = { allow = [...] } is not enforced"),
                "{r}"
            );
        }
    }
}

/// An HTTPS server on the host with a certificate for pkg.test from a
/// certificate authority the test makes; prints its port.
const HTTPS_PY: &str = r#"
import http.server, ssl, sys
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
print("Serving HTTPS on 127.0.0.1 port", httpd.server_address[1], flush=True)
httpd.serve_forever()
"#;

/// Through the proxy's CONNECT by hand, then TLS that names `sni`:
/// prints the page, or why TLS failed.
const SNI_PY: &str = r#"
import socket, ssl, sys
sni = sys.argv[1]
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT pkg.test:443 HTTP/1.1\r\nHost: pkg.test:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile="ca.pem")
ctx.check_hostname = False
try:
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: pkg.test\r\n\r\n")
    print(sni, "served" if b"hello" in t.recv(4096) + t.recv(4096) else "no page")
except (ssl.SSLError, OSError) as e:
    print(sni, "refused")
"#;

#[test]
fn https_through_the_proxy_is_verified_end_to_end_and_the_server_name_is_checked() {
    let test = "https_through_the_proxy_is_verified_end_to_end_and_the_server_name_is_checked";
    if !ready(test) || !common::ready(test, false, &["openssl"]) {
        return;
    }
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("hello.txt"), "hello over tls\n").unwrap();
    sh(
        site.path(),
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=agent-rsh-test-ca 2>/dev/null \
         && openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=pkg.test 2>/dev/null \
         && printf 'subjectAltName=DNS:pkg.test\\n' > ext \
         && openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext 2>/dev/null",
    );
    let mut child = Command::new("python3")
        .args(["-u", "-c", HTTPS_PY])
        .arg(site.path().join("srv.pem"))
        .arg(site.path().join("srv.key"))
        .current_dir(site.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server {
        port: line
            .split("port ")
            .nth(1)
            .and_then(|r| r.trim().parse().ok())
            .unwrap_or_else(|| panic!("the HTTPS server said {line:?}")),
        child,
    };
    let p = pinned_policy(server.port, &["curl", "python3"]);
    let ws = tempfile::tempdir().unwrap();
    std::fs::copy(site.path().join("ca.pem"), ws.path().join("ca.pem")).unwrap();
    std::fs::write(ws.path().join("sni.py"), SNI_PY).unwrap();
    // curl verifies the server's certificate through the tunnel: the proxy
    // relays TLS, it does not end it.
    let r = run(
        &p,
        ws.path(),
        "curl -sS --cacert ca.pem https://pkg.test/hello.txt; python3 sni.py pkg.test; python3 sni.py evil.test",
    );
    assert_eq!(
        s(&r, "stdout"),
        "hello over tls\npkg.test served\nevil.test refused\n",
        "{r}"
    );
    let refused = &r["network"]["refused"];
    assert!(s(&refused[0], "reason").contains("evil.test"), "{r}");
    assert_eq!(r["network"]["allowed"][0]["connections"], 2, "{r}");
}

/// A client for the shared-loopback tests: GET http://127.0.0.1:8000/ for
/// up to `argv[1]` seconds (the server a job started may still be binding),
/// then print the body or `refused`.
const GET_PY: &str = r#"
import sys, time, urllib.request
end = time.time() + float(sys.argv[1])
while True:
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/index.html", timeout=5).read().decode().strip())
        break
    except OSError:
        if time.time() >= end:
            print("refused")
            break
        time.sleep(0.1)
"#;

/// `spawn` a server in workspace A under network = "loopback", then `run`
/// its client in A (it answers: one loopback per workspace), in B (refused:
/// another workspace's), and in A again after the job ended (refused: the
/// namespace died with the last run that held it). `agent` is agent-rsh as
/// root or as an account; `owner` owns what the account writes.
fn one_loopback_per_workspace(agent: impl Fn() -> Command, owner: Option<(u32, u32)>) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "network = \"loopback\"\n[commands]\nallow = [\"python3\"]\n[limits]\nmemory_bytes = 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&policy, PermissionsExt::from_mode(0o644)).unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for ws in [&a, &b] {
        std::fs::create_dir(ws).unwrap();
        std::fs::write(ws.join("get.py"), GET_PY).unwrap();
    }
    std::fs::write(a.join("index.html"), "hello from a\n").unwrap();
    if let Some((uid, gid)) = owner {
        for p in [&state, &a, &b] {
            std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
        }
    }
    let call = |args: &[&str], ws: &Path| -> Value {
        let out = agent()
            .env("XDG_STATE_HOME", &state)
            .arg(args[0])
            .arg("--policy")
            .arg(&policy)
            .arg("--workspace")
            .arg(ws)
            .args(&args[1..])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let get = |ws: &Path, wait: &str| -> String {
        let r = call(
            &["run", "--json", "--", &format!("python3 get.py {wait}")],
            ws,
        );
        assert_eq!(r["exitCode"], 0, "{r}");
        assert_eq!(r["confinement"]["networkNamespace"], true, "{r}");
        r["stdout"].as_str().unwrap().trim().to_string()
    };
    let job = call(
        &[
            "spawn",
            "--",
            "python3 -m http.server 8000 --bind 127.0.0.1",
        ],
        &a,
    );
    let id = job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{job}"))
        .to_string();
    // Generous: the server is up long before, on any machine.
    assert_eq!(
        get(&a, "60"),
        "hello from a",
        "a run of the job's workspace"
    );
    assert_eq!(get(&b, "0"), "refused", "another workspace's run");
    let out = agent()
        .env("XDG_STATE_HOME", &state)
        .args(["kill", &id, "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        get(&a, "0"),
        "refused",
        "the namespace ends with the last run or job that held it"
    );
}

#[test]
fn runs_and_jobs_of_one_workspace_share_one_loopback() {
    if !common::system_python3() {
        common::unavailable(
            "network::runs_and_jobs_of_one_workspace_share_one_loopback",
            "needs python3 in /usr/bin",
        );
        return;
    }
    one_loopback_per_workspace(|| Command::new(bin()), None);
}

#[test]
fn an_unprivileged_accounts_runs_share_their_workspaces_loopback_too() {
    let test = "network::an_unprivileged_accounts_runs_share_their_workspaces_loopback_too";
    if !common::root() {
        common::unavailable(test, "needs root to create a throwaway account");
        return;
    }
    if !common::system_python3() {
        common::unavailable(test, "needs python3 in /usr/bin");
        return;
    }
    let user = common::accounts::User::without_home();
    one_loopback_per_workspace(|| user.agent(), Some((user.uid, user.gid)));
}

/// A `sitecustomize` that fetches a URL when any Python starts, as code a
/// run plants for a granted program to import.
const SITECUSTOMIZE_PY: &str = r#"
import os, urllib.request
url = os.environ.get("PLANTED_URL")
if url:
    try:
        urllib.request.urlopen(url, timeout=10).read()
        print("planted code reached the proxy")
    except OSError as e:
        print("planted code failed:", getattr(e, "reason", e))
"#;

#[test]
fn network_commands_follow_what_a_program_is_not_its_name_nor_its_variables() {
    let test = "network_commands_follow_what_a_program_is_not_its_name_nor_its_variables";
    if !ready(test) {
        return;
    }
    let (_site, server) = wheel_index();
    let p = common::policy(&format!(
        "network = {{ allow = [\"pkg.test\"], commands = [\"pip\"], resolve = {{ \"pkg.test\" = \"127.0.0.1:{}\" }} }}\n\
         limits.timeout_ms = 300000\n\
         [commands]\nallow = [\"python3\", \"ln\", \"mkdir\", \"pip\"]\nworkspace = true\n",
        server.port
    ));
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("fetch.py"), FETCH_PY).unwrap();
    std::fs::write(ws.path().join("sitecustomize.py"), SITECUSTOMIZE_PY).unwrap();
    let url = "http://pkg.test/simple/tinypkg/";
    // python3 behind a link named pip is python3: no proxy.
    let r = run(
        &p,
        ws.path(),
        &format!("mkdir b && ln -s \"$(command -v python3)\" b/pip && b/pip fetch.py {url}"),
    );
    assert_eq!(
        s(&r, "stdout"),
        "python3 failed: [Errno 13] Permission denied\n",
        "{r}"
    );
    assert_eq!(network(&r), (vec![], vec![]), "{r}");
    // pip itself is granted, but code the run plants for it to load is
    // not loaded: PYTHONPATH and kin never reach a granted program.
    if common::ready(test, false, &["pip"]) {
        let r = run(
            &p,
            ws.path(),
            &format!("export PYTHONPATH=. PLANTED_URL={url}; pip --version >/dev/null; echo done"),
        );
        assert_eq!(s(&r, "stdout"), "done\n", "{r}");
        assert_eq!(network(&r), (vec![], vec![]), "{r}");
    }
    // An activated venv's pip is pip: it installs through the proxy, while
    // the venv's python stays without a connection.
    let r = run(
        &p,
        ws.path(),
        &format!(
            "python3 -m venv .venv && . .venv/bin/activate && pip install -q --disable-pip-version-check \
             --index-url http://pkg.test/simple/ --trusted-host pkg.test tinypkg \
             && python -c 'import tinypkg; print(tinypkg.ANSWER)' && python fetch.py {url}"
        ),
    );
    assert_eq!(
        s(&r, "stdout"),
        "42\npython3 failed: [Errno 13] Permission denied\n",
        "{r}"
    );
    let (allowed, refused) = network(&r);
    assert!(!allowed.is_empty(), "{r}");
    assert!(refused.is_empty(), "{r}");
}
