//! `notifications/progress`: the reporter of one request, and the sink
//! that turns a run's output into progress without ever stalling the run.

use super::jsonrpc::Output;
use crate::exec::Sink;
use crate::result::{Chunk, Stream, Utf8Chunker};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Sends `notifications/progress` for one request: `progress` is the
/// elapsed time in milliseconds (strictly increasing, as MCP requires),
/// `message` an output chunk when there is one. Nothing is sent once the
/// request is cancelled.
pub struct Progress {
    out: Arc<Output>,
    token: Value,
    cancelled: Arc<AtomicBool>,
    started: Instant,
    last: Mutex<f64>,
}

impl Progress {
    pub fn new(out: Arc<Output>, token: Value, cancelled: Arc<AtomicBool>) -> Progress {
        Progress {
            out,
            token,
            cancelled,
            started: Instant::now(),
            last: Mutex::new(-1.0),
        }
    }

    pub fn notify(&self, message: Option<&str>, meta: Option<Value>) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        // Millisecond precision, and strictly above the previous value.
        let progress = ((ms * 1000.0).round() / 1000.0).max(*last + 0.001);
        *last = progress;
        let mut params = json!({ "progressToken": self.token, "progress": progress });
        if let Some(m) = message {
            params["message"] = Value::String(m.to_string());
        }
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let msg = json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params });
        self.out
            .send_unless(&msg, || self.cancelled.load(Ordering::SeqCst));
    }
}

/// Output forwarded as progress per call; after it, elapsed time only.
const FORWARD_CAP: usize = 1 << 20;
/// Pending text that wakes the sender at once.
const FLUSH_BYTES: usize = 16 * 1024;
/// Pending text kept while the client is slow to read; more is dropped
/// (and counted) so the run's poll loop never waits for the client.
const PENDING_MAX: usize = 256 * 1024;
/// How often pending text is sent.
const TICK: Duration = Duration::from_millis(100);
/// Elapsed-time notifications while the command is silent.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Turns output into `notifications/progress`. The run's poll loop only
/// appends to a bounded buffer; a sender thread writes it out every
/// `TICK` (sooner when `FLUSH_BYTES` are pending) and reports the elapsed
/// time every `HEARTBEAT` while the command is silent. So a client that
/// does not read its stdout cannot stall the run or its deadline.
pub struct ProgressSink {
    shared: Option<Arc<Shared>>,
    /// Remove ANSI escapes, as the RunResult does (`output.strip_ansi`),
    /// so a command cannot drive the client's terminal through progress.
    strip_ansi: bool,
    sender: Option<std::thread::JoinHandle<()>>,
    chunkers: [Utf8Chunker; 2],
    scratch: Vec<u8>,
}

struct Shared {
    progress: Arc<Progress>,
    state: Mutex<Pending>,
    wake: Condvar,
}

#[derive(Default)]
struct Pending {
    /// Text per stream, in order of arrival.
    segments: Vec<(Stream, String)>,
    bytes: usize,
    forwarded: usize,
    /// Bytes dropped because the client was slow to read.
    dropped: usize,
    capped: bool,
    done: bool,
}

impl Shared {
    fn push(&self, stream: Stream, text: &str) {
        let mut p = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if p.capped || text.is_empty() {
            return;
        }
        let mut take = text.len().min(FORWARD_CAP - p.forwarded);
        while !text.is_char_boundary(take) {
            take -= 1;
        }
        p.forwarded += take;
        let mut text = text[..take].to_string();
        if p.forwarded >= FORWARD_CAP {
            p.capped = true;
            text.push_str(
                "\n[agent-rsh: further output is not sent as progress; the result keeps its head and tail]\n",
            );
        }
        if p.bytes + text.len() > PENDING_MAX {
            p.dropped += take;
            return;
        }
        p.bytes += text.len();
        match p.segments.last_mut() {
            Some((s, t)) if *s == stream => t.push_str(&text),
            _ => p.segments.push((stream, text)),
        }
        if p.bytes >= FLUSH_BYTES {
            self.wake.notify_one();
        }
    }

    /// The sender thread: the only writer of this call's progress.
    fn send_loop(self: Arc<Self>) {
        let mut last_sent = Instant::now();
        loop {
            let (segments, dropped, done) = {
                let mut p = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if !p.done && p.bytes < FLUSH_BYTES {
                    p = self
                        .wake
                        .wait_timeout(p, TICK)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                p.bytes = 0;
                (
                    std::mem::take(&mut p.segments),
                    std::mem::take(&mut p.dropped),
                    p.done,
                )
            };
            let mut dropped = dropped;
            if dropped > 0 && segments.is_empty() {
                self.progress.notify(Some(&slow_note(dropped)), None);
                last_sent = Instant::now();
            }
            for (stream, mut text) in segments {
                let name = match stream {
                    Stream::Stdout => "stdout",
                    Stream::Stderr => "stderr",
                };
                if dropped > 0 {
                    text.insert_str(0, &slow_note(dropped));
                    dropped = 0;
                }
                self.progress
                    .notify(Some(&text), Some(json!({ "dev.agent-rsh/stream": name })));
                last_sent = Instant::now();
            }
            if done {
                return;
            }
            if last_sent.elapsed() >= HEARTBEAT {
                self.progress.notify(None, None);
                last_sent = Instant::now();
            }
        }
    }
}

fn slow_note(dropped: usize) -> String {
    format!("[agent-rsh: {dropped} bytes were not sent as progress: the client read slowly]\n")
}

impl ProgressSink {
    /// When the system refuses the sender thread, the call runs without
    /// progress (its result is complete all the same).
    pub fn start(progress: Option<Arc<Progress>>, strip_ansi: bool) -> ProgressSink {
        let mut shared = progress.map(|progress| {
            Arc::new(Shared {
                progress,
                state: Mutex::new(Pending::default()),
                wake: Condvar::new(),
            })
        });
        let sender = shared.clone().and_then(|s| {
            std::thread::Builder::new()
                .spawn(move || s.send_loop())
                .ok()
        });
        if sender.is_none() {
            shared = None;
        }
        ProgressSink {
            shared,
            strip_ansi,
            sender,
            chunkers: Default::default(),
            scratch: Vec::new(),
        }
    }

    /// Sends what is pending and stops the sender, before the response.
    pub fn finish(mut self) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            if let Some(rest) = self.chunkers[i].finish() {
                shared.push(stream, &String::from_utf8_lossy(&rest));
            }
        }
        shared.state.lock().unwrap_or_else(|e| e.into_inner()).done = true;
        shared.wake.notify_all();
        if let Some(t) = self.sender.take() {
            let _ = t.join();
        }
    }
}

impl Sink for ProgressSink {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        let Some(shared) = &self.shared else {
            return;
        };
        let i = usize::from(stream == Stream::Stderr);
        let text = match self.chunkers[i].feed(data, &mut self.scratch) {
            Some(Chunk::Text(t)) => t.as_bytes(),
            Some(Chunk::Binary(b)) => b,
            None => return,
        };
        if self.strip_ansi {
            let clean = crate::result::strip_ansi(text);
            shared.push(stream, &String::from_utf8_lossy(&clean));
        } else {
            shared.push(stream, &String::from_utf8_lossy(text));
        }
    }
}
