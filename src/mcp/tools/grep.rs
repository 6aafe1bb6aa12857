//! The `grep` tool: lines of a job's output that match a pattern.

use super::jobs::{JobId, READER, answer, enabled, push_output, stream_name};
use super::{Context, Tool, Work, parse_args};
use crate::jobs::{self, GrepQuery, GrepResult, StreamSel};
use crate::policy::Policy;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const TOOL: Tool = Tool {
    name: "grep",
    title: "Search a background job's output",
    description: |_| {
        "Search a background job's output for lines matching a regular expression (Rust regex \
         syntax, linear time): line numbers, stream offsets and optional context. Give a \
         previous call's nextOffset as offset to search only lines written since."
            .into()
    },
    input_schema: super::input_schema::<GrepArgs>,
    output_schema: super::jobs::schema::<GrepResult>,
    annotations: READER,
    long_running: false,
    available: enabled,
    prepare,
    refused: super::jobs::refused,
};

/// The arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrepArgs {
    id: JobId,
    /// A regular expression (Rust regex syntax), or a plain string with
    /// fixedStrings.
    pattern: String,
    /// stdout, stderr, or both interleaved in arrival order.
    #[serde(default)]
    stream: StreamSel,
    /// Lines of context before and after each match.
    #[serde(default)]
    #[schemars(range(max = 50))]
    context: usize,
    /// Most matches returned (all are counted in total); default 100.
    max_matches: Option<usize>,
    /// Search from this stream offset on (a previous call's nextOffset).
    #[serde(default)]
    offset: u64,
    /// Match without regard to case.
    #[serde(default)]
    ignore_case: bool,
    /// The pattern is a plain string.
    #[serde(default)]
    fixed_strings: bool,
}

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, super::ArgError> {
    let a: GrepArgs = parse_args(args)?;
    let id = a.id.into_string();
    let q = GrepQuery {
        pattern: a.pattern,
        ignore_case: a.ignore_case,
        fixed: a.fixed_strings,
        stream: a.stream,
        context: a.context,
        max_matches: a.max_matches.unwrap_or(100),
        offset: a.offset,
        // No colour over MCP, as for run: escapes are stripped as the
        // policy says, so output cannot drive the client's terminal.
        color: false,
    };
    let policy = ctx.policy.clone();
    let me = ctx.name("grep");
    Ok(Box::new(move |_| {
        let r = jobs::grep(&policy, &id, &q);
        answer(&me, &policy, r, |g| grep_text(g, &policy))
    }))
}

/// grep -n style: `LINE:text` for a match, `LINE-text` for context, `--`
/// between context groups that are not adjacent.
fn grep_text(g: &GrepResult, policy: &Policy) -> String {
    let name = stream_name(g.stream);
    let mut t = format!(
        "job {} {name}: {} matching line{} for {:?}",
        g.id,
        g.total,
        if g.total == 1 { "" } else { "s" },
        g.pattern
    );
    if (g.matches.len() as u64) < g.total {
        let _ = write!(t, " ({} shown)", g.matches.len());
    }
    if g.truncated {
        t.push_str(
            "; some lines may be missing (more matches than maxMatches, or output elided on disk)",
        );
    }
    let _ = write!(
        t,
        "; the job {}; search new lines from offset {}",
        if g.running { "is running" } else { "has ended" },
        g.next_offset
    );
    if g.matches.is_empty() {
        return t;
    }
    // Context of neighbouring matches overlaps: each line is shown once,
    // a match line as a match.
    let mut lines: BTreeMap<u64, (bool, &str)> = BTreeMap::new();
    for m in &g.matches {
        let first = m.line - m.before.len() as u64;
        for (i, b) in m.before.iter().enumerate() {
            lines.entry(first + i as u64).or_insert((false, b));
        }
        lines.insert(m.line, (true, &m.text));
        for (i, a) in m.after.iter().enumerate() {
            lines.entry(m.line + 1 + i as u64).or_insert((false, a));
        }
    }
    // As grep: `--` between groups only when context is shown.
    let context = g
        .matches
        .iter()
        .any(|m| !m.before.is_empty() || !m.after.is_empty());
    let mut body = String::new();
    let mut last: Option<u64> = None;
    for (n, (is_match, text)) in lines {
        if context && last.is_some_and(|l| n > l + 1) {
            body.push_str("--\n");
        }
        let _ = writeln!(body, "{n}{}{text}", if is_match { ':' } else { '-' });
        last = Some(n);
    }
    t.push('\n');
    push_output(&mut t, &policy.mcp, name, &body);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::GrepMatch;

    #[test]
    fn grep_text_numbers_lines_like_grep_n() {
        let m = |line, text: &str, before: &[&str], after: &[&str]| GrepMatch {
            line,
            offset: 0,
            text: text.into(),
            before: before.iter().map(|s| s.to_string()).collect(),
            after: after.iter().map(|s| s.to_string()).collect(),
        };
        let g = GrepResult {
            id: "3".into(),
            stream: StreamSel::Stdout,
            pattern: "x".into(),
            // 2..4 and 4..6 overlap at line 4, 6 and 7 are adjacent
            // matches, 10 stands apart.
            matches: vec![
                m(3, "x1", &["b"], &["d"]),
                m(5, "x2", &["d"], &["x3"]),
                m(6, "x3", &["x2"], &["x4"]),
                m(7, "x4", &["x3"], &["h"]),
                m(10, "x5", &[], &[]),
            ],
            total: 5,
            truncated: false,
            next_offset: 99,
            running: false,
        };
        let t = grep_text(&g, &Policy::default());
        let body = t.split_once('\n').unwrap().1;
        assert_eq!(body, "2-b\n3:x1\n4-d\n5:x2\n6:x3\n7:x4\n8-h\n--\n10:x5\n");
        assert!(
            t.starts_with("job 3 stdout: 5 matching lines for \"x\""),
            "{t}"
        );
    }
}
