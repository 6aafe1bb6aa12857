//! `grep`: search a job's stored output with a linear-time regex.
//!
//! The `regex` crate has no backtracking, so no pattern can make a search
//! take more than time linear in the output; its compiled size is bounded
//! too. Memory is bounded by the stream's cap (the stored bytes).

use super::error::{JobError, JobResult};
use super::state::{Meta, StreamSel};
use super::store::StreamView;
use crate::result::code;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone)]
pub struct GrepQuery {
    pub pattern: String,
    pub ignore_case: bool,
    /// The pattern is a plain string, not a regex.
    pub fixed: bool,
    pub stream: StreamSel,
    /// Lines of context before and after each match.
    pub context: usize,
    pub max_matches: usize,
    /// Search from this stream offset on (a previous call's `nextOffset`).
    pub offset: u64,
    /// Keep ANSI escapes (otherwise stripped when the policy strips them).
    pub color: bool,
}

pub const MAX_CONTEXT: usize = 50;
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Longest line text returned; longer lines are cut and marked.
pub const MAX_LINE_BYTES: usize = 2048;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepMatch {
    /// 1-based line number in the stream.
    pub line: u64,
    /// Stream offset of the line's first byte (for `output --offset`).
    pub offset: u64,
    pub text: String,
    pub before: Vec<String>,
    pub after: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepResult {
    pub id: String,
    pub stream: StreamSel,
    pub pattern: String,
    pub matches: Vec<GrepMatch>,
    /// Matching lines in the searched part, returned or not.
    pub total: u64,
    /// More matches than `maxMatches` (or output elided on disk, so
    /// lines may be missing between the head and the tail).
    pub truncated: bool,
    /// Where the next search should start to see only new lines.
    pub next_offset: u64,
    pub running: bool,
}

pub(super) fn grep(
    dir: &Path,
    id: &str,
    meta: &Meta,
    running: bool,
    q: &GrepQuery,
) -> JobResult<GrepResult> {
    if q.pattern.len() > MAX_PATTERN_BYTES {
        return Err(JobError::new(
            code::USAGE,
            format!("the pattern is longer than {MAX_PATTERN_BYTES} bytes"),
        ));
    }
    let pattern = if q.fixed {
        regex::escape(&q.pattern)
    } else {
        q.pattern.clone()
    };
    let re = regex::bytes::RegexBuilder::new(&pattern)
        .case_insensitive(q.ignore_case)
        .size_limit(8 << 20)
        .dfa_size_limit(8 << 20)
        .build()
        .map_err(|e| {
            JobError::new(
                code::USAGE,
                format!(
                    "bad pattern: {}; use --fixed-strings to search for it literally",
                    e.to_string().lines().last().unwrap_or("invalid regex")
                ),
            )
        })?;
    let context = q.context.min(MAX_CONTEXT);
    let (view, regions) = StreamView::open(dir, q.stream.file(), meta.layout)
        .and_then(|v| {
            let r = v.regions()?;
            Ok((v, r))
        })
        .map_err(|e| JobError::io(&format!("cannot read job {id}'s output"), e))?;
    let strip = meta.strip_ansi && !q.color;
    let mut res = GrepResult {
        id: id.to_string(),
        stream: q.stream,
        pattern: q.pattern.clone(),
        matches: Vec::new(),
        total: 0,
        truncated: view.truncated() && q.offset < view.total,
        next_offset: q.offset.max(view.total.min(q.offset)),
        running,
    };
    let mut next = q.offset;
    for (start, lines_before, bytes) in &regions {
        let end = start + bytes.len() as u64;
        if end <= q.offset {
            continue;
        }
        // Lines of this region: (offset, line number, bytes without \n).
        let mut lines: Vec<(u64, u64, &[u8])> = Vec::new();
        let mut line_no = lines_before + 1;
        let mut at = 0usize;
        while at < bytes.len() {
            let nl = bytes[at..].iter().position(|&b| b == b'\n');
            let stop = nl.map_or(bytes.len(), |n| at + n);
            // An unfinished last line of a running job is searched next time.
            if nl.is_none() && running && end == view.total {
                break;
            }
            lines.push((start + at as u64, line_no, &bytes[at..stop]));
            line_no += 1;
            at = stop + 1;
        }
        next = next.max(start + at.min(bytes.len()) as u64);
        for (i, &(off, no, text)) in lines.iter().enumerate() {
            if off + (text.len() as u64) < q.offset {
                continue;
            }
            let shown = |t: &[u8]| render(t, strip);
            let hay = if strip {
                crate::result::strip_ansi(text)
            } else {
                text.to_vec()
            };
            if !re.is_match(&hay) {
                continue;
            }
            res.total += 1;
            if res.matches.len() >= q.max_matches {
                continue;
            }
            let lo = i.saturating_sub(context);
            let hi = (i + 1 + context).min(lines.len());
            res.matches.push(GrepMatch {
                line: no,
                offset: off,
                text: shown(text),
                before: lines[lo..i].iter().map(|l| shown(l.2)).collect(),
                after: lines[i + 1..hi].iter().map(|l| shown(l.2)).collect(),
            });
        }
    }
    res.next_offset = next;
    if res.total > res.matches.len() as u64 {
        res.truncated = true;
    }
    Ok(res)
}

fn render(line: &[u8], strip: bool) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let owned;
    let line = if strip {
        owned = crate::result::strip_ansi(line);
        &owned[..]
    } else {
        line
    };
    if line.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut cut = MAX_LINE_BYTES;
    while cut > 0 && line[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    format!(
        "{} [agent-rsh: {} more bytes]",
        String::from_utf8_lossy(&line[..cut]),
        line.len() - cut
    )
}
