//! The tool registry: one table entry per tool, one file per tool. A
//! tool's schemas are derived from its argument and result types
//! (schemars), so what `tools/list` promises is what the code reads and
//! writes. A tool checks its arguments on the reader thread (a mismatch is
//! an `isError` result the model can act on) and returns the work, which
//! the server runs on a thread of its own with a progress reporter and a
//! cancellation fd.

mod grep;
mod jobs;
mod kill;
mod output;
mod run;
mod send;
mod spawn;
mod status;

use super::progress::Progress;
use crate::policy::Policy;
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The behaviour hints of MCP's `ToolAnnotations`.
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

pub struct Tool {
    /// The name without the server's `--tool-prefix`.
    pub name: &'static str,
    pub title: &'static str,
    /// The description may depend on the policy (e.g. the allowed
    /// programs) and names other tools as the client sees them.
    pub description: fn(&Context) -> String,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    pub annotations: Annotations,
    /// Tools that may block a thread for long (run, spawn, status with
    /// `waitMs`, send) start only below `mcp.max_concurrent_calls`. Every
    /// call counts toward it; the quick ones (a job's output, grep, kill)
    /// may go `QUICK_RESERVE` calls past it, so a model can still read and
    /// stop its jobs while the bound is reached.
    pub long_running: bool,
    /// Whether `tools/list` shows the tool under this policy.
    pub available: fn(&Policy) -> bool,
    /// Checks the arguments; the error text becomes an `isError` result.
    pub prepare: fn(&Context, &Map<String, Value>) -> Result<Work, ArgError>,
    /// The `structuredContent` of a call refused before it ran (bad
    /// arguments, too many calls), conforming to `output_schema`.
    pub refused: fn(&str) -> Value,
}

/// Every tool the server offers, in the order `tools/list` shows them.
pub const TOOLS: &[Tool] = &[
    run::TOOL,
    spawn::TOOL,
    status::TOOL,
    output::TOOL,
    grep::TOOL,
    send::TOOL,
    kill::TOOL,
];

/// The tool a client calls `name` (with the server's prefix).
pub fn find(ctx: &Context, name: &str) -> Option<&'static Tool> {
    let bare = name.strip_prefix(ctx.prefix.as_str())?;
    TOOLS.iter().find(|t| t.name == bare)
}

/// What every call can use: the policy and the server's options.
pub struct Context {
    pub policy: Arc<Policy>,
    pub workspace: Option<PathBuf>,
    /// Put before every tool name (`--tool-prefix`), so the names do not
    /// collide with other servers' tools.
    pub prefix: String,
}

impl Context {
    /// A tool's name as the client sees it.
    pub fn name(&self, tool: &str) -> String {
        format!("{}{tool}", self.prefix)
    }

    /// The names the client sees, of the tools this policy offers.
    pub fn names(&self) -> Vec<String> {
        TOOLS
            .iter()
            .filter(|t| (t.available)(&self.policy))
            .map(|t| self.name(t.name))
            .collect()
    }
}

/// The work of one call, run on its own thread.
pub type Work = Box<dyn FnOnce(&CallEnv) -> ToolResult + Send>;

/// What a running call gets from the server.
pub struct CallEnv {
    /// Present when the request carried a progress token.
    pub progress: Option<Arc<Progress>>,
    /// Readable once the client cancelled the request.
    pub cancel: RawFd,
    /// Set (before `cancel` becomes readable) when the request is cancelled.
    pub cancelled: Arc<AtomicBool>,
}

/// A tool's answer: `structuredContent`, `content[0].text`, `isError`.
pub struct ToolResult {
    pub structured: Value,
    pub text: String,
    pub is_error: bool,
}

impl ToolResult {
    /// The `CallToolResult`; the parts are moved in, not copied.
    pub fn into_json(self) -> Value {
        let mut text = Map::new();
        text.insert("type".into(), Value::String("text".into()));
        text.insert("text".into(), Value::String(self.text));
        let mut r = Map::new();
        r.insert("content".into(), Value::Array(vec![Value::Object(text)]));
        r.insert("structuredContent".into(), self.structured);
        r.insert("isError".into(), Value::Bool(self.is_error));
        Value::Object(r)
    }

    /// A call refused before it ran: `text` for the model, the tool's
    /// refusal shape for `structuredContent`.
    pub fn refused(tool: &Tool, text: String) -> ToolResult {
        ToolResult {
            structured: (tool.refused)(&text),
            text,
            is_error: true,
        }
    }
}

/// The `tools/list` entries.
pub fn listing(ctx: &Context) -> Vec<Value> {
    TOOLS
        .iter()
        .filter(|t| (t.available)(&ctx.policy))
        .map(|t| {
            json!({
                "name": ctx.name(t.name),
                "title": t.title,
                "description": (t.description)(ctx),
                "inputSchema": (t.input_schema)(),
                "outputSchema": (t.output_schema)(),
                "annotations": {
                    "title": t.title,
                    "readOnlyHint": t.annotations.read_only,
                    "destructiveHint": t.annotations.destructive,
                    "idempotentHint": t.annotations.idempotent,
                    "openWorldHint": t.annotations.open_world,
                },
            })
        })
        .collect()
}

/// The JSON Schema of what a tool reads (`inputSchema`): the arguments
/// as serde deserializes them.
pub fn input_schema<T: JsonSchema>() -> Value {
    let mut v = schema::<T>(Contract::Deserialize);
    // Arguments not described are refused (serde's deny_unknown_fields).
    v["additionalProperties"] = Value::Bool(false);
    v
}

/// The JSON Schema of what a tool writes (`outputSchema`): the result as
/// serde serializes it.
pub fn output_schema<T: JsonSchema>() -> Value {
    schema::<T>(Contract::Serialize)
}

/// A self-contained schema any client validator reads: no `$ref` (every
/// subschema inline), no `$schema` (validators built for draft-07, as the
/// TypeScript SDK's Ajv is, refuse an unknown meta-schema), and no
/// non-standard `format` such as `uint64` (Ajv warns about each).
fn schema<T: JsonSchema>(contract: Contract) -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.contract = contract;
        })
        .into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    if let Some(o) = v.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
        o.remove("description");
    }
    tidy(&mut v);
    v
}

fn tidy(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "uint"
                        | "int"
                        | "float"
                        | "double"
                )
            }) {
                o.remove("format");
            }
            // Doc comments wrap lines; a description is one paragraph.
            if let Some(Value::String(d)) = o.get_mut("description") {
                *d = d
                    .replace("\n\n", "\u{0}")
                    .replace('\n', " ")
                    .replace('\u{0}', "\n\n");
            }
            o.values_mut().for_each(tidy);
        }
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// Arguments a tool cannot take: the text says what is wrong (the server
/// adds what the tool takes), and the model reads it as an `isError`
/// result.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// Not the tool's argument shape (a missing, unknown or mistyped one).
    #[error("invalid arguments: {0}")]
    Shape(serde_json::Error),
    /// A number below its minimum: `name` as the schema spells it.
    #[error("invalid arguments: {name} must be at least {min} (or omit it)")]
    TooSmall { name: &'static str, min: u64 },
    #[error("invalid arguments: env name {0:?} must be a non-empty name without '='")]
    EnvName(String),
    #[error("invalid arguments: nothing to send: give text, eof: true, or both")]
    NothingToSend,
}

/// Reads a tool's arguments; a mismatch says what is wrong.
pub fn parse_args<T: DeserializeOwned>(args: &Map<String, Value>) -> Result<T, ArgError> {
    serde_json::from_value(Value::Object(args.clone())).map_err(ArgError::Shape)
}

/// "Arguments: command (string, required), cwd (string), ...", from a schema.
pub fn takes(schema: &Value) -> String {
    let mut t = String::from("Arguments:");
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else {
        return "The tool takes no arguments.".into();
    };
    for (i, (name, p)) in props.iter().enumerate() {
        let _ = write!(
            t,
            "{} {name} ({}{})",
            if i == 0 { "" } else { "," },
            type_name(p),
            if required.contains(&name.as_str()) {
                ", required"
            } else {
                ""
            }
        );
    }
    t.push('.');
    t
}

fn type_name(p: &Value) -> String {
    if let Some(e) = p["enum"].as_array() {
        let names: Vec<String> = e.iter().map(Value::to_string).collect();
        return format!("one of {}", names.join(", "));
    }
    let types: Vec<&str> = match &p["type"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => p["anyOf"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s["type"].as_str()).collect())
            .unwrap_or_default(),
    };
    if types.is_empty() {
        "any".into()
    } else {
        types.join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(policy: Policy, prefix: &str) -> Context {
        Context {
            policy: Arc::new(policy),
            workspace: None,
            prefix: prefix.into(),
        }
    }

    #[test]
    fn schemas_are_self_contained_objects() {
        let c = ctx(Policy::default(), "");
        for t in listing(&c) {
            let name = t["name"].as_str().unwrap();
            for key in ["inputSchema", "outputSchema"] {
                let s = &t[key];
                assert_eq!(s["type"], "object", "{name} {key}: {s}");
                let text = s.to_string();
                assert!(!text.contains("$ref"), "{name} {key}: {text}");
                assert!(!text.contains("$schema"), "{name} {key}: {text}");
                assert!(!text.contains("\"uint"), "{name} {key}: {text}");
            }
            assert_eq!(t["inputSchema"]["additionalProperties"], false, "{name}");
        }
    }

    #[test]
    fn the_prefix_names_every_tool_and_unprefixed_names_are_unknown() {
        let c = ctx(Policy::default(), "rsh_");
        let names: Vec<String> = listing(&c)
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "rsh_run",
                "rsh_spawn",
                "rsh_status",
                "rsh_output",
                "rsh_grep",
                "rsh_send",
                "rsh_kill"
            ]
        );
        assert!(find(&c, "rsh_run").is_some());
        assert!(find(&c, "run").is_none());
    }

    #[test]
    fn takes_lists_the_arguments() {
        let s = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "n": {"type": ["integer", "null"]},
                "signal": {"enum": ["TERM", "KILL"]}
            },
            "required": ["id"]
        });
        assert_eq!(
            takes(&s),
            "Arguments: id (string, required), n (integer), signal (one of \"TERM\", \"KILL\")."
        );
    }
}
