//! Reading jobs: status, list, output (a page, or followed), grep.

use super::error::{JobError, JobResult};
use super::grep::{self, GrepQuery, GrepResult};
use super::state::{JobDir, JobStatus, StateDir, StreamSel};
use super::store;
use crate::policy::Policy;
use serde::Serialize;
use std::io;
use std::time::Duration;

pub fn status(policy: &Policy, id: &str) -> JobResult<JobStatus> {
    StateDir::must_open(policy)?.job(id)?.status()
}

/// Every job, oldest first.
pub fn list(policy: &Policy) -> JobResult<Vec<JobStatus>> {
    let Some(state) = StateDir::open(policy, false)? else {
        return Ok(Vec::new());
    };
    Ok(state
        .jobs()
        .iter()
        .filter_map(|j| j.status().ok())
        .collect())
}

/// What `output` asks for.
#[derive(Debug, Clone)]
pub struct OutputQuery {
    pub stream: StreamSel,
    pub offset: u64,
    pub limit: usize,
    pub base64: bool,
    /// Keep ANSI escapes (otherwise stripped when the policy strips them).
    pub color: bool,
}

pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;
pub const MAX_OUTPUT_LIMIT: usize = 16 << 20;

/// `output`'s answer: a contiguous piece of a stream.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputChunk {
    pub id: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["base64", "utf-8-lossy"]))]
    pub encoding: Option<&'static str>,
    pub stream: StreamSel,
    /// Stream offset of `content`'s first byte: the requested offset, or
    /// the first stored byte after it when that part was elided.
    pub offset: u64,
    /// Bytes between the requested offset and `offset` that were elided
    /// (over the cap) before this call could read them.
    pub elided: u64,
    /// Where the next call should continue.
    pub next_offset: u64,
    /// Bytes the job has written to the stream so far.
    pub total_size: u64,
    /// More bytes are stored after `nextOffset`.
    pub has_more: bool,
    /// Part of the stream was elided on disk (over the cap).
    pub truncated: bool,
    /// The job is still running (more output may come).
    pub running: bool,
    #[serde(skip)]
    pub raw: Vec<u8>,
}

pub fn output(policy: &Policy, id: &str, q: &OutputQuery) -> JobResult<OutputChunk> {
    let job = StateDir::must_open(policy)?.job(id)?;
    read_output(&job, q)
}

fn read_output(job: &JobDir, q: &OutputQuery) -> JobResult<OutputChunk> {
    let meta = job.meta()?;
    // Alive is sampled before reading: output read after the job ended
    // is complete.
    let running = job.alive();
    let limit = q.limit.clamp(1, MAX_OUTPUT_LIMIT);
    let (view, start, mut bytes) = store::StreamView::open(&job.dir, q.stream.file(), meta.layout)
        .and_then(|v| {
            let (s, b) = v.read(q.offset, limit)?;
            Ok((v, s, b))
        })
        .map_err(|e| JobError::io(&format!("cannot read job {}'s output", job.id), e))?;
    // Do not split a UTF-8 sequence at the end of a page: the next call
    // starts at its first byte.
    let end = start + bytes.len() as u64;
    if !q.base64 && (end < view.total || running) {
        let keep = utf8_complete_prefix(&bytes);
        if keep > 0 {
            bytes.truncate(keep);
        }
    }
    let next = start + bytes.len() as u64;
    let shown = if meta.strip_ansi && !q.color {
        crate::result::strip_ansi(&bytes)
    } else {
        bytes.clone()
    };
    let (content, encoding) = if q.base64 {
        use base64::Engine as _;
        (
            base64::engine::general_purpose::STANDARD.encode(&shown),
            Some("base64"),
        )
    } else {
        match String::from_utf8(shown) {
            Ok(s) => (s, None),
            Err(e) => (
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
                Some("utf-8-lossy"),
            ),
        }
    };
    let has_more = view.pieces.iter().any(|p| p.start + p.len > next);
    Ok(OutputChunk {
        id: job.id.clone(),
        content,
        encoding,
        stream: q.stream,
        offset: start,
        elided: start.saturating_sub(q.offset),
        next_offset: next,
        total_size: view.total,
        has_more,
        truncated: view.truncated(),
        running,
        raw: bytes,
    })
}

/// Length of the longest prefix that does not end inside a UTF-8 sequence.
fn utf8_complete_prefix(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=n.min(3) {
        let c = b[n - back];
        if c & 0xC0 == 0x80 {
            continue;
        }
        let need = match c {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return n,
        };
        return if back < need { n - back } else { n };
    }
    n
}

/// Calls `each` with every new piece of output until the job ends.
pub fn follow(
    policy: &Policy,
    id: &str,
    q: &OutputQuery,
    mut each: impl FnMut(&OutputChunk) -> io::Result<()>,
) -> JobResult<JobStatus> {
    let job = StateDir::must_open(policy)?.job(id)?;
    let mut q = q.clone();
    let mut pause = Duration::from_millis(10);
    loop {
        let chunk = read_output(&job, &q)?;
        if !chunk.raw.is_empty() {
            each(&chunk).map_err(|e| JobError::io("cannot write the output", e))?;
            pause = Duration::from_millis(10);
        }
        q.offset = chunk.next_offset;
        if chunk.has_more {
            continue;
        }
        if !chunk.running {
            return job.status();
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

pub fn grep(policy: &Policy, id: &str, q: &GrepQuery) -> JobResult<GrepResult> {
    let job = StateDir::must_open(policy)?.job(id)?;
    let meta = job.meta()?;
    let running = job.alive();
    grep::grep(&job.dir, &job.id, &meta, running, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_prefix_never_splits_a_sequence() {
        assert_eq!(utf8_complete_prefix(b"abc"), 3);
        assert_eq!(utf8_complete_prefix("aé".as_bytes()), 3);
        assert_eq!(utf8_complete_prefix(&"aé".as_bytes()[..2]), 1);
        assert_eq!(utf8_complete_prefix(&"a€".as_bytes()[..3]), 1);
        assert_eq!(utf8_complete_prefix(&"a😀".as_bytes()[..4]), 1);
        assert_eq!(utf8_complete_prefix("a😀".as_bytes()), 5);
        assert_eq!(utf8_complete_prefix(b"\xff\xfe"), 2);
    }
}
