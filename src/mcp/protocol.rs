//! MCP over the JSON-RPC loop: version negotiation for both eras, method
//! dispatch, tool calls run by the thread that read them while another
//! reads on (threads kept for the next call), cancellation and shutdown.
//!
//! Dual-era, as MCP 2026-07-28 describes it: a request whose `_meta`
//! carries `io.modelcontextprotocol/protocolVersion` is served statelessly
//! under that (modern) revision; `initialize` negotiates a handshake-era
//! revision for the process. Requests without the per-request version are
//! served under the handshake era (before `initialize` too: this server
//! keeps no state a handshake would set up).

use super::jsonrpc::{self, Line, Message, Output, RpcError};
use super::progress::Progress;
use super::tools::{self, CallEnv, Context, ToolResult};
use crate::policy::Policy;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Revisions served per request with `_meta` (stateless).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Revisions reachable with `initialize`, newest first. The older ones get
/// the same answers: their clients ignore the fields added since
/// (`structuredContent`, `outputSchema`, `title`).
pub const HANDSHAKE_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The revision whose sessions may send JSON-RPC batches (it says
/// implementations MUST support receiving them; later revisions removed
/// them).
const BATCH_VERSION: &str = "2025-03-26";

/// Longest message accepted (a `run` with a large `stdin` fits).
const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The server's instructions: the first sentence follows `policy.syntax`,
/// as the `run` tool's description does.
fn instructions(syntax: crate::policy::Syntax) -> &'static str {
    match syntax {
        crate::policy::Syntax::Compound => INSTRUCTIONS_COMPOUND,
        _ => INSTRUCTIONS_SIMPLE,
    }
}

const INSTRUCTIONS_SIMPLE: &str = "agent-rsh runs one command per call, without a shell: \
no pipes, redirection, globbing, variables or command substitution. The policy decides \
which programs may run; a refusal names the rule and says what to do instead. \
Commands run confined by the kernel, in a fresh workspace unless the server was \
started with --workspace. When the spawn tool is listed, a command that outlasts one call \
(a server, a watcher, a long build or test suite) goes to spawn, which answers with a job id \
for status, output, grep, send and kill.";

const INSTRUCTIONS_COMPOUND: &str = "agent-rsh runs a command line per call as bash \
reads it: pipes, `&&`, `;`, redirections inside the workspace, here-documents, variables \
and `cd` work (the run tool's description says what does not). Every command of the line \
is checked; the policy decides which programs may run, and a refusal names the rule and \
says what to do instead. Commands run confined by the kernel, in a fresh workspace unless \
the server was started with --workspace. When the spawn tool is listed, a command that \
outlasts one call (a server, a watcher, a long build or test suite) goes to spawn, which \
answers with a job id for status, output, grep, send and kill.";

/// Which era a request is served under.
#[derive(Debug, Clone, PartialEq)]
enum Era {
    Handshake,
    Modern,
}

/// Supported versions, newest first, for discovery and version errors.
fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(HANDSHAKE_VERSIONS)
        .copied()
        .collect()
}

/// The era of a request, from its `_meta`.
fn era_of(params: &Map<String, Value>) -> Result<Era, RpcError> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let Some(version) = meta.and_then(|m| m.get(META_VERSION)) else {
        return Ok(Era::Handshake);
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "_meta {META_VERSION} must be a string such as \"{}\"",
            MODERN_VERSIONS[0]
        )));
    };
    if !MODERN_VERSIONS.contains(&version) {
        return Err(RpcError::new(
            jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({ "supported": supported_versions(), "requested": version })));
    }
    if !meta.is_some_and(|m| m.get(META_CAPABILITIES).is_some_and(Value::is_object)) {
        return Err(RpcError::invalid_params(format!(
            "_meta {META_CAPABILITIES} (an object) is required on every {version} request"
        )));
    }
    Ok(Era::Modern)
}

/// The handshake negotiation: the client's version if supported, else our
/// newest handshake version (the client disconnects if it cannot use it).
pub fn negotiate(requested: &str) -> &'static str {
    HANDSHAKE_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(HANDSHAKE_VERSIONS[0])
}

fn server_info() -> Value {
    json!({
        "name": "agent-rsh",
        "title": "agent-rsh restricted shell",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

fn capabilities() -> Value {
    json!({ "tools": { "listChanged": false } })
}

/// A call in progress: how to stop it and whether it was cancelled.
struct InFlight {
    cancelled: Arc<AtomicBool>,
    cancel_w: OwnedFd,
}

/// Counts calls in progress so shutdown can wait for them, and keeps the
/// server's threads. One thread at a time reads stdin (the `Read` task);
/// the thread that reads a `tools/call` hands reading to another thread
/// (one waiting, else a new one) and runs the call itself, so a call starts
/// without waiting for another thread to be scheduled, while stdin is still
/// read (a `notifications/cancelled` reaches the run) the whole time. A
/// thread whose call ended waits for the next task. A new thread per call
/// was one more task to create per call (besides the guardian and the
/// command), and a busy machine starts new tasks late.
#[derive(Default)]
struct Workers {
    calls: Mutex<Calls>,
    /// Notified when the last call ends while shutdown waits.
    idle: Condvar,
    pool: Mutex<Pool>,
    ready: Condvar,
}

#[derive(Default)]
struct Calls {
    /// Calls accepted and not answered yet (each has a thread until it is
    /// answered): at most `max_concurrent_calls + QUICK_RESERVE`.
    running: usize,
    /// Shutdown waits for `running` to reach 0.
    awaited: bool,
}

/// Tasks handed to waiting threads and not yet taken.
#[derive(Default)]
struct Pool {
    /// Threads waiting for a task.
    waiting: usize,
    /// Threads whose call is answering, about to wait for a task: a task
    /// handed over meanwhile waits for one of them rather than for a new
    /// thread.
    finishing: usize,
    tasks: VecDeque<Task>,
    /// Stdin is closed (or unreadable): no more messages are read.
    closed: bool,
}

enum Task {
    /// Read stdin and serve what it brings, until a call is handed to this
    /// thread or stdin ends.
    Read,
    /// A call of a batch.
    Call(Job),
}

type Job = Box<dyn FnOnce() + Send>;

/// Threads kept waiting for tasks; more (after a burst) end.
const MAX_WAITING_THREADS: usize = 4;

/// Calls of the quick job tools (output, grep, kill) taken past
/// `mcp.max_concurrent_calls`, so that a model can still read and stop its
/// jobs while runs fill the bound.
const QUICK_RESERVE: usize = 4;

thread_local! {
    /// The call the message just read hands to the reading thread.
    static HANDED: std::cell::Cell<Option<Job>> = const { std::cell::Cell::new(None) };
}

impl Workers {
    /// Runs `task` on a waiting thread, or on a new one when none waits.
    /// When no thread can be started (the system refused one), the task
    /// comes back with the reason.
    fn hand(&self, server: &Arc<Server>, task: Task) -> Result<(), (Task, std::io::Error)> {
        let mut pool = lock(&self.pool);
        if pool.waiting + pool.finishing > pool.tasks.len() {
            pool.tasks.push_back(task);
            // Woken after the unlock, the thread does not block on it.
            drop(pool);
            self.ready.notify_one();
            return Ok(());
        }
        drop(pool);
        // The task goes through a slot, so that it is still here if the
        // thread is refused (the closure is dropped then).
        let slot = Arc::new(Mutex::new(Some(task)));
        let mine = slot.clone();
        let server = server.clone();
        let started = std::thread::Builder::new().spawn(move || {
            let task = lock(&mine).take();
            server.work(task, false);
        });
        match started {
            Ok(_) => Ok(()),
            Err(e) => match lock(&slot).take() {
                Some(task) => Err((task, e)),
                // Unreachable: the refused closure never ran.
                None => Ok(()),
            },
        }
    }

    /// The next task of a thread; `None`: the thread ends (the main thread
    /// ends once stdin is closed and no task is left, to shut down).
    fn next(&self, answered: bool, main: bool) -> Option<Task> {
        let mut pool = lock(&self.pool);
        if answered {
            pool.finishing -= 1;
        }
        if !main && pool.tasks.is_empty() && pool.waiting >= MAX_WAITING_THREADS {
            return None;
        }
        pool.waiting += 1;
        loop {
            if let Some(t) = pool.tasks.pop_front() {
                pool.waiting -= 1;
                return Some(t);
            }
            if pool.closed {
                pool.waiting -= 1;
                return None;
            }
            pool = self.ready.wait(pool).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A call is about to be answered; its thread waits for a task next.
    fn finishing(&self) {
        lock(&self.pool).finishing += 1;
    }

    fn close(&self) {
        lock(&self.pool).closed = true;
        self.ready.notify_all();
    }
}

struct Server {
    ctx: Arc<Context>,
    out: Arc<Output>,
    inflight: Arc<Mutex<HashMap<String, InFlight>>>,
    workers: Arc<Workers>,
    /// The revision `initialize` negotiated, if any.
    session: Mutex<Option<&'static str>>,
    /// Cancellation pipes of calls that ended uncancelled (read end,
    /// write end), for the next calls.
    pipes: Mutex<Vec<(OwnedFd, OwnedFd)>>,
}

/// Cancellation pipes kept for reuse.
const MAX_SPARE_PIPES: usize = 4;

/// Where the response to a request goes: straight out, or into the batch
/// it came in (sent as one array once every request in it is answered).
#[derive(Clone)]
enum Reply {
    Direct,
    Batch(Arc<Batch>),
}

#[derive(Default)]
struct Batch {
    state: Mutex<BatchState>,
}

#[derive(Default)]
struct BatchState {
    responses: Vec<Value>,
    /// Requests of the batch not answered yet.
    outstanding: usize,
    /// Every message of the batch has been read.
    sealed: bool,
    sent: bool,
}

impl Batch {
    fn expect(&self) {
        lock(&self.state).outstanding += 1;
    }

    /// One request answered (`None`: cancelled, nothing to send for it).
    fn deliver(&self, out: &Output, msg: Option<Value>) {
        let mut st = lock(&self.state);
        st.outstanding -= 1;
        st.responses.extend(msg);
        Batch::flush(&mut st, out);
    }

    fn seal(&self, out: &Output) {
        let mut st = lock(&self.state);
        st.sealed = true;
        Batch::flush(&mut st, out);
    }

    /// A batch of notifications only is answered with nothing at all.
    fn flush(st: &mut BatchState, out: &Output) {
        if st.sealed && st.outstanding == 0 && !st.sent {
            st.sent = true;
            if !st.responses.is_empty() {
                out.send(&Value::Array(std::mem::take(&mut st.responses)));
            }
        }
    }
}

/// Serves stdin/stdout until stdin closes.
pub fn serve(policy: Policy, workspace: Option<PathBuf>, prefix: String) -> i32 {
    if let Err(e) = crate::exec::install_signal_forwarding() {
        eprintln!("agent-rsh mcp: cannot install signal handlers: {e}");
        return crate::result::code::FAILED;
    }
    let server = Arc::new(Server {
        ctx: Arc::new(Context {
            policy: Arc::new(policy),
            workspace,
            prefix,
        }),
        out: Arc::new(Output::new(Box::new(std::io::stdout()))),
        inflight: Arc::default(),
        workers: Arc::default(),
        session: Mutex::new(None),
        pipes: Mutex::default(),
    });
    if let Err(e) = watch_signals(server.clone()) {
        eprintln!("agent-rsh mcp: cannot install signal handlers: {e}");
        return crate::result::code::FAILED;
    }
    server.work(Some(Task::Read), true);
    server.shutdown();
    0
}

/// INT, TERM, HUP: stop every run in progress, wait for it, and exit.
fn watch_signals(server: Arc<Server>) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(crate::exec::FORWARDED)?;
    std::thread::Builder::new().spawn(move || {
        if let Some(sig) = signals.forever().next() {
            server.shutdown();
            std::process::exit(128 + sig);
        }
    })?;
    Ok(())
}

impl Server {
    /// A thread's life: its first task, then whatever it is handed.
    fn work(self: &Arc<Self>, first: Option<Task>, main: bool) {
        let mut task = first;
        let mut answered = false;
        loop {
            let Some(t) = task.take().or_else(|| self.workers.next(answered, main)) else {
                return;
            };
            answered = match t {
                Task::Read => self.read(),
                Task::Call(job) => {
                    job();
                    true
                }
            };
        }
    }

    /// Reads stdin until a call is handed to this thread (it then runs the
    /// call, and returns true once it is answered) or stdin ends.
    fn read(self: &Arc<Self>) -> bool {
        loop {
            let line = jsonrpc::read_line(&mut std::io::stdin().lock(), MAX_MESSAGE_BYTES);
            match line {
                Ok(Line::Message(line)) => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    self.handle_line(&line);
                    drop(line);
                    // Reading was handed to another thread already.
                    if let Some(job) = HANDED.take() {
                        job();
                        return true;
                    }
                }
                Ok(Line::TooLong(n)) => self.out.error(
                    &Value::Null,
                    &RpcError::new(
                        jsonrpc::INVALID_REQUEST,
                        format!(
                            "message of {n} bytes is longer than the limit of {MAX_MESSAGE_BYTES}; it was ignored"
                        ),
                    ),
                ),
                Ok(Line::Eof) => break,
                Err(e) => {
                    eprintln!("agent-rsh mcp: cannot read stdin: {e}");
                    break;
                }
            }
        }
        // Stop the calls in progress now, whichever thread runs them.
        self.cancel_all();
        self.workers.close();
        false
    }

    /// Cancels every call in progress (nothing more is sent for them) and
    /// waits until their process trees are gone.
    fn shutdown(&self) {
        self.cancel_all();
        let mut calls = lock(&self.workers.calls);
        calls.awaited = true;
        while calls.running > 0 {
            calls = self
                .workers
                .idle
                .wait(calls)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A cancellation pipe: an empty one kept from an earlier call (no
    /// system calls), else a new one.
    fn cancel_pipe(&self) -> std::io::Result<(OwnedFd, OwnedFd)> {
        match lock(&self.pipes).pop() {
            Some(p) => Ok(p),
            None => crate::sys::pipe(),
        }
    }

    fn cancel_all(&self) {
        let ids: Vec<String> = lock(&self.inflight).keys().cloned().collect();
        for id in ids {
            self.cancel(&id);
        }
    }

    fn cancel(&self, key: &str) {
        let map = lock(&self.inflight);
        if let Some(f) = map.get(key) {
            self.out
                .locked(|| f.cancelled.store(true, Ordering::SeqCst));
            let _ = crate::sys::write_all(&f.cancel_w, b"x");
        }
    }

    fn handle_line(self: &Arc<Self>, line: &[u8]) {
        match jsonrpc::parse_json(line) {
            Err(e) => self.out.error(&Value::Null, &e),
            Ok(Value::Array(items)) => self.batch(items),
            Ok(v) => self.message(v, &Reply::Direct),
        }
    }

    /// A JSON-RPC batch: served in a 2025-03-26 session, refused otherwise
    /// (the later revisions removed batching).
    fn batch(self: &Arc<Self>, items: Vec<Value>) {
        let session = *lock(&self.session);
        if session != Some(BATCH_VERSION) {
            let now = match session {
                Some(v) => format!("this session negotiated {v}"),
                None => "no session was initialized".into(),
            };
            return self.out.error(
                &Value::Null,
                &RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    format!(
                        "batches are served only in a {BATCH_VERSION} session ({now}); \
                         send one JSON-RPC object per line"
                    ),
                ),
            );
        }
        if items.is_empty() {
            return self.out.error(
                &Value::Null,
                &RpcError::new(jsonrpc::INVALID_REQUEST, "an empty batch"),
            );
        }
        let batch = Arc::new(Batch::default());
        let reply = Reply::Batch(batch.clone());
        for item in items {
            self.message(item, &reply);
        }
        batch.seal(&self.out);
    }

    fn message(self: &Arc<Self>, v: Value, reply: &Reply) {
        let in_batch = matches!(reply, Reply::Batch(_));
        match jsonrpc::classify(v) {
            Err((id, e)) => {
                self.expect(reply);
                self.respond(reply, jsonrpc::error_message(&id, &e), || false);
            }
            Ok(Message::Response) => {}
            Ok(Message::Notification { method, params }) => self.notification(&method, &params),
            Ok(Message::Request { id, method, params }) => {
                self.expect(reply);
                let r = if in_batch && method == "initialize" {
                    Err(RpcError::new(
                        jsonrpc::INVALID_REQUEST,
                        "initialize cannot be part of a batch",
                    ))
                } else {
                    self.request(&id, &method, params, reply)
                };
                if let Err(e) = r {
                    self.respond(reply, jsonrpc::error_message(&id, &e), || false);
                }
            }
        }
    }

    fn expect(&self, reply: &Reply) {
        if let Reply::Batch(b) = reply {
            b.expect();
        }
    }

    /// Sends the response to one request, unless `suppress()` (evaluated
    /// under the output lock) says the request was cancelled.
    fn respond(&self, reply: &Reply, msg: Value, suppress: impl FnOnce() -> bool) {
        match reply {
            Reply::Direct => self.out.send_unless(&msg, suppress),
            Reply::Batch(b) => {
                let keep = !self.out.locked(suppress);
                b.deliver(&self.out, keep.then_some(msg));
            }
        }
    }

    /// `notifications/cancelled` stops that call; `notifications/initialized`
    /// and unknown notifications need nothing (a notification is never
    /// answered).
    fn notification(&self, method: &str, params: &Map<String, Value>) {
        if method == "notifications/cancelled"
            && let Some(id) = params.get("requestId")
        {
            self.cancel(&id.to_string());
        }
    }

    fn request(
        self: &Arc<Self>,
        id: &Value,
        method: &str,
        params: Map<String, Value>,
        reply: &Reply,
    ) -> Result<(), RpcError> {
        if method == "initialize" {
            return self.initialize(id, &params);
        }
        let era = era_of(&params)?;
        let result = match (method, &era) {
            ("ping", Era::Handshake) => json!({}),
            ("server/discover", Era::Modern) => json!({
                "supportedVersions": supported_versions(),
                "capabilities": capabilities(),
                // The schema carries it in `_meta`; the prose example at top level.
                "serverInfo": server_info(),
                "instructions": instructions(self.ctx.policy.syntax),
                "ttlMs": 0,
                "cacheScope": "private",
            }),
            ("server/discover", Era::Handshake) => {
                return Err(RpcError::invalid_params(format!(
                    "server/discover needs _meta {META_VERSION} (one of {:?}) and {META_CAPABILITIES}",
                    MODERN_VERSIONS
                )));
            }
            ("tools/list", _) => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return Err(RpcError::invalid_params(
                        "invalid cursor: the tool list has a single page and no cursor; \
                         call tools/list without one",
                    ));
                }
                let mut r = json!({ "tools": tools::listing(&self.ctx) });
                if era == Era::Modern {
                    r["ttlMs"] = json!(0);
                    r["cacheScope"] = json!("private");
                }
                r
            }
            ("tools/call", _) => return self.call(id, params, era, reply),
            _ => {
                return Err(RpcError::new(
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("method not found: {method}"),
                ));
            }
        };
        self.respond(
            reply,
            jsonrpc::result_message(id, finish(result, &era)),
            || false,
        );
        Ok(())
    }

    fn initialize(&self, id: &Value, params: &Map<String, Value>) -> Result<(), RpcError> {
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return Err(RpcError::invalid_params(
                "initialize needs params.protocolVersion (a string such as \"2025-11-25\")",
            ));
        };
        let version = negotiate(requested);
        *lock(&self.session) = Some(version);
        self.out.result(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": instructions(self.ctx.policy.syntax),
            }),
        );
        Ok(())
    }

    fn call(
        self: &Arc<Self>,
        id: &Value,
        params: Map<String, Value>,
        era: Era,
        reply: &Reply,
    ) -> Result<(), RpcError> {
        let name = match params.get("name") {
            Some(Value::String(n)) => n.as_str(),
            _ => {
                return Err(RpcError::invalid_params(
                    "tools/call needs params.name (a string)",
                ));
            }
        };
        let tool = tools::find(&self.ctx, name).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "unknown tool {name:?}; the tools are {:?}",
                self.ctx.names()
            ))
        })?;
        let token = match params.get("_meta").and_then(|m| m.get("progressToken")) {
            None | Some(Value::Null) => None,
            Some(t @ Value::String(_)) => Some(t.clone()),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n.clone())),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "_meta.progressToken must be a string or an integer",
                ));
            }
        };
        // An argument the tool cannot take is an `isError` result, not a
        // protocol error, so the model reads what to correct.
        let answer = |r: ToolResult| {
            self.respond(
                reply,
                jsonrpc::result_message(id, finish(r.into_json(), &era)),
                || false,
            );
            Ok(())
        };
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(a)) => a,
            Some(other) => {
                let text = format!(
                    "{name}: invalid arguments: expected an object of named arguments, got {}. {}",
                    kind(other),
                    tools::takes(&(tool.input_schema)())
                );
                return answer(ToolResult::refused(tool, text));
            }
        };
        let work = match (tool.prepare)(&self.ctx, args) {
            Ok(w) => w,
            Err(e) => {
                let text = format!("{name}: {e}. {}", tools::takes(&(tool.input_schema)()));
                return answer(ToolResult::refused(tool, text));
            }
        };

        let key = id.to_string();
        let max = self.ctx.policy.mcp.max_concurrent_calls;
        let mut map = lock(&self.inflight);
        if map.contains_key(&key) {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("request id {key} is already in use by a call in progress"),
            ));
        }
        // Every call counts until it is answered (its thread is busy until
        // then, also after its work while the client is slow to read).
        // Only the thread reading stdin admits calls, so the count cannot
        // grow between this check and the increment below.
        let bound = match tool.long_running {
            true => max,
            false => max + QUICK_RESERVE,
        };
        if lock(&self.workers.calls).running >= bound {
            drop(map);
            return answer(ToolResult::refused(
                tool,
                busy(name, max, tool.long_running),
            ));
        }
        let (cancel_r, cancel_w) = self.cancel_pipe().map_err(|e| {
            RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("cannot start the call: {e}"),
            )
        })?;
        let cancelled = Arc::new(AtomicBool::new(false));
        map.insert(
            key.clone(),
            InFlight {
                cancelled: cancelled.clone(),
                cancel_w,
            },
        );
        drop(map);
        lock(&self.workers.calls).running += 1;
        let progress =
            token.map(|t| Arc::new(Progress::new(self.out.clone(), t, cancelled.clone())));
        let server = self.clone();
        let id = id.clone();
        let direct = matches!(reply, Reply::Direct);
        let reply = reply.clone();
        let call = key.clone();
        let call_era = era.clone();
        let job: Job = Box::new(move || {
            let env = CallEnv {
                progress,
                cancel: cancel_r.as_raw_fd(),
                cancelled: cancelled.clone(),
            };
            let result = work(&env);
            drop(env);
            // Free the id first: the client may reuse it once answered.
            let done = lock(&server.inflight).remove(&call);
            // Out of the map nothing can cancel the call any more: its
            // pipe is empty unless it was cancelled, and then it is closed.
            if let Some(f) = done
                && !f.cancelled.load(Ordering::SeqCst)
            {
                let mut spare = lock(&server.pipes);
                if spare.len() < MAX_SPARE_PIPES {
                    spare.push((cancel_r, f.cancel_w));
                }
            }
            let msg = jsonrpc::result_message(&id, finish(result.into_json(), &call_era));
            server.workers.finishing();
            server.respond(&reply, msg, || cancelled.load(Ordering::SeqCst));
            let mut calls = lock(&server.workers.calls);
            calls.running -= 1;
            // Only shutdown waits, for none left (a notification is a
            // system call, waiter or not).
            if calls.running == 0 && calls.awaited {
                server.workers.idle.notify_all();
            }
        });
        let handed = if direct {
            // Run by the thread that read the request, once it has handed
            // reading on.
            self.workers
                .hand(self, Task::Read)
                .map(|()| HANDED.set(Some(job)))
        } else {
            // The calls of a batch run side by side.
            self.workers.hand(self, Task::Call(job))
        };
        if let Err((task, e)) = handed {
            // Nothing ran: the call is forgotten and answered, and this
            // thread reads on.
            drop(task);
            self.abandon(&key);
            return answer(ToolResult::refused(tool, no_thread(name, &e)));
        }
        Ok(())
    }

    /// Forgets an accepted call that could not start.
    fn abandon(&self, key: &str) {
        drop(lock(&self.inflight).remove(key));
        let mut calls = lock(&self.workers.calls);
        calls.running -= 1;
        if calls.running == 0 && calls.awaited {
            self.workers.idle.notify_all();
        }
    }
}

/// What a JSON value is, for a message.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Adds what every result of a modern request carries.
fn finish(mut result: Value, era: &Era) -> Value {
    if *era == Era::Modern {
        result["resultType"] = json!("complete");
        result["_meta"] = json!({ META_SERVER_INFO: server_info() });
    }
    result
}

fn busy(tool: &str, max: usize, long_running: bool) -> String {
    let allows = if long_running {
        format!("the policy allows {max} at once, mcp.max_concurrent_calls")
    } else {
        format!(
            "the policy allows {max} at once, mcp.max_concurrent_calls, \
             and {QUICK_RESERVE} more of output, grep and kill"
        )
    };
    format!(
        "too many calls in progress ({allows}); nothing was run: wait for a call to finish \
         or cancel one, then call {tool} again"
    )
}

fn no_thread(tool: &str, e: &std::io::Error) -> String {
    format!(
        "the server cannot start a thread for this call now ({e}); nothing was run: \
         wait for a call to finish, then call {tool} again"
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn handshake_negotiation_follows_the_spec() {
        assert_eq!(negotiate("2025-11-25"), "2025-11-25");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2024-11-05"), "2024-11-05");
        // Unknown or modern: our newest handshake revision.
        assert_eq!(negotiate("2024-10-07"), "2025-11-25");
        assert_eq!(negotiate("2026-07-28"), "2025-11-25");
        assert_eq!(negotiate("banana"), "2025-11-25");
    }

    #[test]
    fn era_comes_from_per_request_meta() {
        assert_eq!(era_of(&Map::new()), Ok(Era::Handshake));
        let modern = params(json!({"_meta": {
            META_VERSION: "2026-07-28", META_CAPABILITIES: {}
        }}));
        assert_eq!(era_of(&modern), Ok(Era::Modern));
        let e = era_of(&params(json!({"_meta": {
            META_VERSION: "1900-01-01", META_CAPABILITIES: {}
        }})))
        .unwrap_err();
        assert_eq!(e.code, jsonrpc::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.as_ref().unwrap()["requested"], "1900-01-01");
        assert_eq!(
            e.data.as_ref().unwrap()["supported"],
            json!([
                "2026-07-28",
                "2025-11-25",
                "2025-06-18",
                "2025-03-26",
                "2024-11-05"
            ])
        );
        let e = era_of(&params(json!({"_meta": { META_VERSION: "2026-07-28" }}))).unwrap_err();
        assert_eq!(e.code, jsonrpc::INVALID_PARAMS);
        assert!(e.message.contains(META_CAPABILITIES));
    }
}
