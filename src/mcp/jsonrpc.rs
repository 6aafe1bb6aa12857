//! JSON-RPC 2.0 over newline-delimited stdio: reading bounded lines,
//! classifying messages, and writing one message per line.

use serde_json::{Map, Value, json};
use std::io::{self, BufRead, Write};
use std::sync::Mutex;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// MCP 2026-07-28 `UnsupportedProtocolVersionError`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// An error response's `error` member.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    fn to_json(&self) -> Value {
        let mut e = json!({ "code": self.code, "message": self.message });
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

/// One incoming message, classified.
#[derive(Debug, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response from the client. This server sends no requests, so it is
    /// ignored.
    Response,
}

/// Reads one line as JSON; the error answers with id `null`.
pub fn parse_json(line: &[u8]) -> Result<Value, RpcError> {
    serde_json::from_slice(line)
        .map_err(|e| RpcError::new(PARSE_ERROR, format!("parse error: {e}")))
}

/// Classifies one line holding a single message (not a batch).
#[cfg(test)]
pub fn parse(line: &[u8]) -> Result<Message, (Value, RpcError)> {
    classify(parse_json(line).map_err(|e| (Value::Null, e))?)
}

/// Classifies one message. An error carries the id to answer with
/// (`null` when the id could not be read).
pub fn classify(value: Value) -> Result<Message, (Value, RpcError)> {
    let Value::Object(mut obj) = value else {
        let what = if value.is_array() {
            "a batch cannot hold a batch; send JSON-RPC objects"
        } else {
            "a JSON-RPC message must be a JSON object"
        };
        return Err((Value::Null, RpcError::new(INVALID_REQUEST, what)));
    };
    let id = match obj.remove("id") {
        None => None,
        Some(v @ Value::String(_)) => Some(v),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::new(
                    INVALID_REQUEST,
                    "id must be a string or an integer (not null, a fraction or an object)",
                ),
            ));
        }
    };
    let bad = |msg: &str| {
        Err((
            id.clone().unwrap_or(Value::Null),
            RpcError::new(INVALID_REQUEST, msg),
        ))
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return bad("\"jsonrpc\" must be \"2.0\"");
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return bad("method must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Ok(Message::Response);
        }
        None => return bad("a request needs a method"),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return bad("params must be an object"),
    };
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

/// What reading one line produced.
pub enum Line {
    Message(Vec<u8>),
    /// A line longer than the limit was read and discarded; its length.
    TooLong(usize),
    Eof,
}

/// Reads one newline-terminated line of at most `max` bytes. Longer lines
/// are consumed and dropped, so memory stays bounded whatever the client
/// sends.
pub fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut buf = Vec::new();
    let mut len = 0usize;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(match (len, len > max) {
                (0, _) => Line::Eof,
                (n, true) => Line::TooLong(n),
                _ => Line::Message(buf),
            });
        }
        let (chunk, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], Some(i + 1)),
            None => (avail, None),
        };
        len += chunk.len();
        if len <= max {
            buf.extend_from_slice(chunk);
        } else {
            buf = Vec::new();
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if len > max {
                Line::TooLong(len)
            } else {
                Line::Message(buf)
            });
        }
    }
}

/// The server's stdout: one message per line, writes serialized across
/// threads. A failed write (the client went away) stops further output.
pub struct Output {
    state: Mutex<OutState>,
}

struct OutState {
    sink: Box<dyn Write + Send>,
    broken: bool,
}

impl Output {
    pub fn new(sink: Box<dyn Write + Send>) -> Output {
        Output {
            state: Mutex::new(OutState {
                sink,
                broken: false,
            }),
        }
    }

    /// Writes `msg` unless `suppress()` (evaluated under the output lock)
    /// says the request it belongs to was cancelled.
    pub fn send_unless(&self, msg: &Value, suppress: impl FnOnce() -> bool) {
        let mut line = serde_json::to_vec(msg).expect("JSON values serialize");
        line.push(b'\n');
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.broken || suppress() {
            return;
        }
        if let Err(e) = st.sink.write_all(&line).and_then(|()| st.sink.flush()) {
            eprintln!("agent-rsh mcp: cannot write to stdout ({e}); no further messages are sent");
            st.broken = true;
        }
    }

    pub fn send(&self, msg: &Value) {
        self.send_unless(msg, || false);
    }

    /// Runs `f` while holding the output lock, so no message can be
    /// half-decided around it (cancellation marks a request under it).
    pub fn locked<T>(&self, f: impl FnOnce() -> T) -> T {
        let _st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f()
    }

    pub fn result(&self, id: &Value, result: Value) {
        self.send(&result_message(id, result));
    }

    pub fn error(&self, id: &Value, err: &RpcError) {
        self.send(&error_message(id, err));
    }
}

/// A response; `result` is moved in, not copied.
pub fn result_message(id: &Value, result: Value) -> Value {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), Value::String("2.0".into()));
    m.insert("id".into(), id.clone());
    m.insert("result".into(), result);
    Value::Object(m)
}

pub fn error_message(id: &Value, err: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": err.to_json() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> (Value, i64) {
        let (id, e) = parse(line.as_bytes()).unwrap_err();
        (id, e.code)
    }

    #[test]
    fn classifies_messages_and_errors() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Message::Request { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { .. })
        ));
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Message::Response)
        );
        assert_eq!(code("{not json"), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[1]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":-3,"method":"x"}"#),
            Ok(Message::Request { .. })
        ));
        assert_eq!(code("7"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}"#),
            (json!(2), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":3}"#),
            (json!(3), INVALID_REQUEST)
        );
    }

    #[test]
    fn long_lines_are_dropped_and_reading_goes_on() {
        let input = format!("{}\nshort\nlast", "x".repeat(100));
        let mut r = io::BufReader::with_capacity(8, input.as_bytes());
        assert!(matches!(read_line(&mut r, 10).unwrap(), Line::TooLong(100)));
        assert!(matches!(read_line(&mut r, 10).unwrap(), Line::Message(m) if m == b"short"));
        assert!(matches!(read_line(&mut r, 10).unwrap(), Line::Message(m) if m == b"last"));
        assert!(matches!(read_line(&mut r, 10).unwrap(), Line::Eof));
    }
}
