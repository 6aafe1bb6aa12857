//! One output stream of a job on disk: a head file and rotating tail
//! segments, so disk use stays under the cap whatever the child prints.
//!
//! Logical byte `k` of the stream lives in `NAME.head` when `k < head`,
//! else in segment `i = (k - head) / seg` at `(k - head) % seg`. A segment
//! file is named `NAME.seg.I.L` where `L` is the number of newlines before
//! its first byte, so line numbers stay right after old segments are gone.
//! Bytes are only ever appended, never rewritten, and a segment is full
//! before the next one is created: a reader opens every file it lists and
//! reads through those descriptors, so a segment the writer removes in
//! the meantime is still read whole, and what it returns is one
//! consistent snapshot (the head, then a contiguous run of segments
//! ending at the newest). The stream's total is derived from the newest
//! segment's size, so readers need no counter shared with the writer.
//!
//! The writer keeps the tail's newest bytes in memory (at most
//! [`PENDING_MAX`]) and writes them out when the supervisor's flusher
//! calls [`StreamWriter::flush`]: bytes that would be rotated away before
//! the next flush are counted and never written, so a writer as fast as
//! `yes` costs a few file operations per flush, not per segment, and
//! under a flood (more than the tail arrived since the last flush) the
//! flushes come at most every [`FLOOD_FLUSH`], each writing only the
//! tail that is kept. Newlines are counted once per byte, by the caller
//! ([`StreamWriter::push_counted`]), so bytes dropped whole cost nothing
//! more.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tail bytes gathered in memory at most; more are written at once.
pub const PENDING_MAX: usize = 4 << 20;

/// Under a flood, the least time between two flushes: a reader sees the
/// tail at most this late while the job writes faster than it is kept.
pub const FLOOD_FLUSH: Duration = Duration::from_millis(200);

/// How a stream's cap is split between the head and the tail segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    pub cap: u64,
    pub head: u64,
    pub seg: u64,
}

impl Layout {
    /// Half the cap for the head; the tail in four segments, so the tail
    /// keeps between three quarters and all of its half.
    pub fn new(cap: u64) -> Layout {
        let cap = cap.max(8);
        let head = cap / 2;
        let seg = ((cap - head) / 4).max(1);
        Layout { cap, head, seg }
    }

    /// How many segments may exist at once (the current one included).
    fn keep(&self) -> u64 {
        ((self.cap - self.head) / self.seg).max(1)
    }
}

/// Appends a stream's bytes under the cap; never blocks on readers.
pub struct StreamWriter {
    dir: PathBuf,
    name: &'static str,
    layout: Layout,
    total: u64,
    head: Option<File>,
    /// Tail bytes not written yet: logical offset `pending_start` on.
    pending: VecDeque<u8>,
    pending_start: u64,
    /// Newlines in the stream before `pending_start`.
    pending_lines: u64,
    /// Where each piece of `pending` starts (logical offset) and how many
    /// newlines it holds, oldest first: dropping whole pieces costs no
    /// second count.
    marks: VecDeque<(u64, u64)>,
    /// The segments on disk, oldest first: (index, path); the last one is
    /// open in `current`.
    live: VecDeque<(u64, PathBuf)>,
    current: Option<(u64, File)>,
    /// The first write error (disk full...); output after it is dropped.
    pub error: Option<io::Error>,
    /// Bytes pushed since the last flush, and when that was.
    arrived: u64,
    flushed_at: Instant,
}

impl StreamWriter {
    pub fn new(dir: &Path, name: &'static str, layout: Layout) -> StreamWriter {
        StreamWriter {
            dir: dir.to_path_buf(),
            name,
            layout,
            total: 0,
            head: None,
            pending: VecDeque::new(),
            pending_start: layout.head,
            pending_lines: 0,
            marks: VecDeque::new(),
            live: VecDeque::new(),
            current: None,
            error: None,
            arrived: 0,
            flushed_at: Instant::now(),
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn push(&mut self, data: &[u8]) {
        self.push_counted(data, newlines(data));
    }

    /// Appends `data`, which holds `lines` newlines.
    pub fn push_counted(&mut self, data: &[u8], lines: u64) {
        if self.error.is_some() {
            return;
        }
        self.arrived += data.len() as u64;
        if let Err(e) = self.try_push(data, lines) {
            self.error = Some(e);
        }
    }

    /// Writes what is pending; a no-op when nothing is. Under a flood
    /// (more than the tail arrived since the last flush) it waits until
    /// [`FLOOD_FLUSH`] has passed, so what is rotated away in the meantime
    /// is never written.
    pub fn flush(&mut self) {
        let flood = self.arrived > self.layout.cap - self.layout.head;
        if flood && self.flushed_at.elapsed() < FLOOD_FLUSH {
            return;
        }
        self.flush_now();
    }

    /// Writes what is pending, now.
    pub fn flush_now(&mut self) {
        self.arrived = 0;
        self.flushed_at = Instant::now();
        if self.error.is_some() || self.pending.is_empty() {
            return;
        }
        if let Err(e) = self.try_flush() {
            self.error = Some(e);
        }
    }

    fn try_push(&mut self, mut data: &[u8], mut lines: u64) -> io::Result<()> {
        let l = self.layout;
        if self.total < l.head && !data.is_empty() {
            let n = data.len().min((l.head - self.total) as usize);
            if self.head.is_none() {
                self.head = Some(create(&self.dir.join(format!("{}.head", self.name)))?);
            }
            let f = self.head.as_mut().expect("head file is open");
            f.write_all(&data[..n])?;
            self.total += n as u64;
            let head_lines = if n == data.len() {
                lines
            } else {
                newlines(&data[..n])
            };
            self.pending_lines += head_lines;
            lines -= head_lines;
            data = &data[n..];
            if self.total == l.head {
                self.head = None;
            }
        }
        if data.is_empty() {
            return Ok(());
        }
        self.total += data.len() as u64;
        // Whole segments that the next flush would remove anyway are
        // never written (nor copied): only their newlines are counted.
        let last = (self.total - 1 - l.head) / l.seg;
        let first_kept = (last + 1).saturating_sub(l.keep());
        let drop_to = l.head + first_kept * l.seg;
        if self.pending_start < drop_to {
            let n = ((drop_to - self.pending_start) as usize).min(self.pending.len());
            self.drop_pending(n);
            if self.pending.is_empty() && self.pending_start < drop_to {
                let skip = (drop_to - self.pending_start) as usize;
                // The caller counted the whole chunk: count the smaller
                // side of the cut.
                let (dropped, kept) = data.split_at(skip);
                let dropped_lines = if dropped.len() <= kept.len() {
                    newlines(dropped)
                } else {
                    lines - newlines(kept)
                };
                self.pending_lines += dropped_lines;
                lines -= dropped_lines;
                self.pending_start += skip as u64;
                data = kept;
            }
        }
        if !data.is_empty() {
            let start = self.pending_start + self.pending.len() as u64;
            self.marks.push_back((start, lines));
        }
        self.pending.extend(data);
        if self.pending.len() > PENDING_MAX {
            self.try_flush()?;
        }
        Ok(())
    }

    /// Drops the first `n` pending bytes, adding their newlines to
    /// `pending_lines` from the marks (counting only a piece cut in two).
    fn drop_pending(&mut self, n: usize) {
        let to = self.pending_start + n as u64;
        while let Some(&(start, lines)) = self.marks.front() {
            let end = self
                .marks
                .get(1)
                .map_or(self.pending_start + self.pending.len() as u64, |m| m.0);
            if end <= to {
                self.pending_lines += lines;
                self.marks.pop_front();
                continue;
            }
            if start < to {
                let (a, b) = self.pending.as_slices();
                let (from, cut) = ((start - self.pending_start) as usize, n);
                let counted = if cut <= a.len() {
                    newlines(&a[from..cut])
                } else if from >= a.len() {
                    newlines(&b[from - a.len()..cut - a.len()])
                } else {
                    newlines(&a[from..]) + newlines(&b[..cut - a.len()])
                };
                self.pending_lines += counted;
                self.marks[0] = (to, lines - counted);
            }
            break;
        }
        self.pending.drain(..n);
        self.pending_start = to;
    }

    fn try_flush(&mut self) -> io::Result<()> {
        self.marks.clear();
        let pending = std::mem::take(&mut self.pending);
        let (a, b) = pending.as_slices();
        let r = self.write_tail(a).and_then(|()| self.write_tail(b));
        self.pending = pending;
        self.pending.clear();
        if self.pending.capacity() > PENDING_MAX * 2 {
            self.pending.shrink_to(PENDING_MAX);
        }
        r
    }

    /// Writes `bytes`, the tail from `pending_start` on, into its segments.
    fn write_tail(&mut self, bytes: &[u8]) -> io::Result<()> {
        let l = self.layout;
        let mut at = 0usize;
        while at < bytes.len() {
            let pos = self.pending_start - l.head;
            let index = pos / l.seg;
            if self.current.as_ref().is_none_or(|(i, _)| *i != index) {
                let path = self
                    .dir
                    .join(format!("{}.seg.{index}.{}", self.name, self.pending_lines));
                self.current = Some((index, create(&path)?));
                self.live.push_back((index, path));
                // The new segment exists before the old ones go, so the
                // newest stored byte never moves backwards.
                while self
                    .live
                    .front()
                    .is_some_and(|(i, _)| i + l.keep() <= index)
                {
                    let (_, old) = self.live.pop_front().expect("checked");
                    let _ = std::fs::remove_file(old);
                }
            }
            let n = (bytes.len() - at).min((l.seg - pos % l.seg) as usize);
            let chunk = &bytes[at..at + n];
            let (_, f) = self.current.as_mut().expect("segment file is open");
            f.write_all(chunk)?;
            self.pending_lines += newlines(chunk);
            self.pending_start += n as u64;
            at += n;
        }
        Ok(())
    }
}

fn create(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Counts newlines in byte-wide lanes (vectorized), 255 bytes at a time.
pub fn newlines(b: &[u8]) -> u64 {
    b.chunks(255)
        .map(|c| c.iter().fold(0u8, |n, &x| n + u8::from(x == b'\n')) as u64)
        .sum()
}

/// A contiguous stored piece of the stream, read through the descriptor
/// opened when the view was taken.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Logical offset of its first byte.
    pub start: u64,
    pub len: u64,
    /// Newlines in the stream before `start`.
    pub lines_before: u64,
    file: Arc<File>,
}

/// A snapshot of what is stored of one stream.
#[derive(Debug, Clone)]
pub struct StreamView {
    pub pieces: Vec<Piece>,
    /// Every byte the child wrote to the stream, stored or not.
    pub total: u64,
}

/// How often a view is taken again when the writer rotated under it.
const VIEW_TRIES: usize = 100;

impl StreamView {
    /// A consistent snapshot: every listed file is opened and its size
    /// taken from the descriptor; a listing the writer changed under us
    /// (a segment gone before it was opened, a gap) is taken again.
    pub fn open(dir: &Path, name: &str, layout: Layout) -> io::Result<StreamView> {
        let mut last = None;
        for _ in 0..VIEW_TRIES {
            match Self::try_open(dir, name, layout)? {
                (view, true) => return Ok(view),
                (view, false) => last = Some(view),
            }
            std::thread::yield_now();
        }
        // The writer rotates faster than we list: what we have is still
        // contiguous and readable, only shorter.
        Ok(last.expect("at least one try"))
    }

    /// The view and whether it is complete (nothing vanished or was torn).
    fn try_open(dir: &Path, name: &str, layout: Layout) -> io::Result<(StreamView, bool)> {
        let mut listed: Vec<(u64, u64, PathBuf)> = Vec::new();
        let mut head: Option<PathBuf> = None;
        let seg_prefix = format!("{name}.seg.");
        let head_name = format!("{name}.head");
        for e in std::fs::read_dir(dir)?.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if file == head_name {
                head = Some(e.path());
            } else if let Some(rest) = file.strip_prefix(&seg_prefix)
                && let Some((i, l)) = rest.split_once('.')
                && let (Ok(i), Ok(l)) = (i.parse(), l.parse())
            {
                listed.push((i, l, e.path()));
            }
        }
        let mut complete = true;
        let mut pieces = Vec::new();
        if let Some(h) = head
            && let Some((file, len)) = open_sized(&h, &mut complete)?
        {
            if len < layout.head && !listed.is_empty() {
                complete = false;
            }
            pieces.push(Piece {
                start: 0,
                len: len.min(layout.head),
                lines_before: 0,
                file,
            });
        }
        // Newest first: keep the contiguous run of full segments that
        // ends at the newest one that could still be opened.
        listed.sort_by_key(|s| std::cmp::Reverse(s.0));
        let mut tail: Vec<Piece> = Vec::new();
        for (i, lines, path) in listed {
            let Some((file, len)) = open_sized(&path, &mut complete)? else {
                if tail.is_empty() {
                    continue;
                }
                break;
            };
            if let Some(newer) = tail.last() {
                let start = layout.head + i * layout.seg;
                if start + len != newer.start || len != layout.seg {
                    complete = false;
                    break;
                }
            }
            tail.push(Piece {
                start: layout.head + i * layout.seg,
                len,
                lines_before: lines,
                file,
            });
        }
        tail.reverse();
        pieces.extend(tail);
        let total = pieces.last().map_or(0, |p| p.start + p.len);
        Ok((StreamView { pieces, total }, complete))
    }

    /// Stored bytes are fewer than the total: something was elided.
    pub fn truncated(&self) -> bool {
        self.pieces.iter().map(|p| p.len).sum::<u64>() < self.total
    }

    /// Up to `max` contiguous stored bytes from `from` on (or from the
    /// first stored byte after it when `from` was elided). Returns the
    /// logical offset of the first byte and the bytes.
    pub fn read(&self, from: u64, max: usize) -> io::Result<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut start = None;
        for p in &self.pieces {
            let end = p.start + p.len;
            if end <= from || p.len == 0 {
                continue;
            }
            let at = from.max(p.start);
            match start {
                None => start = Some(at),
                Some(s) if s + out.len() as u64 != p.start => break,
                Some(_) => {}
            }
            let want = ((end - at) as usize).min(max - out.len());
            read_at(&p.file, at - p.start, want, &mut out)?;
            if out.len() >= max {
                break;
            }
        }
        Ok((start.unwrap_or(from.min(self.total)), out))
    }

    /// The stored pieces merged into contiguous regions, each read whole:
    /// (logical start, newlines before it, bytes).
    pub fn regions(&self) -> io::Result<Vec<(u64, u64, Vec<u8>)>> {
        let mut regions: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        for p in &self.pieces {
            if p.len == 0 {
                continue;
            }
            let contiguous = regions
                .last()
                .is_some_and(|(s, _, b)| s + b.len() as u64 == p.start);
            if !contiguous {
                regions.push((p.start, p.lines_before, Vec::new()));
            }
            let (_, _, buf) = regions.last_mut().expect("a region was pushed");
            read_at(&p.file, 0, p.len as usize, buf)?;
        }
        Ok(regions)
    }
}

/// Opens a listed file and takes its size; `None` (and an incomplete
/// snapshot) when the writer removed it since the listing.
fn open_sized(path: &Path, complete: &mut bool) -> io::Result<Option<(Arc<File>, u64)>> {
    match File::open(path) {
        Ok(f) => {
            let len = f.metadata()?.len();
            Ok(Some((Arc::new(f), len)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            *complete = false;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Appends exactly `len` bytes of `file` from `offset` to `out` (the size
/// was taken from this descriptor and the bytes never change).
fn read_at(file: &File, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let from = out.len();
    out.resize(from + len, 0);
    let got = read_full_at(file, &mut out[from..], offset)?;
    out.truncate(from + got);
    Ok(())
}

fn read_full_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                offset += n as u64;
                buf = &mut buf[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.metadata().unwrap().len())
            .sum()
    }

    #[test]
    fn small_stream_is_kept_whole() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::new(1024);
        let mut w = StreamWriter::new(d.path(), "out", l);
        w.push(b"hello\n");
        w.push(b"world\n");
        w.flush_now();
        let v = StreamView::open(d.path(), "out", l).unwrap();
        assert_eq!(v.total, 12);
        assert!(!v.truncated());
        assert_eq!(v.read(0, 100).unwrap(), (0, b"hello\nworld\n".to_vec()));
        assert_eq!(v.read(6, 3).unwrap(), (6, b"wor".to_vec()));
        assert_eq!(v.read(12, 3).unwrap(), (12, Vec::new()));
    }

    #[test]
    fn head_and_tail_are_kept_and_disk_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::new(1000);
        let mut w = StreamWriter::new(d.path(), "out", l);
        let mut all = Vec::new();
        for i in 0..5000u32 {
            let line = format!("line {i}\n");
            all.extend_from_slice(line.as_bytes());
            w.push(line.as_bytes());
            if i % 7 == 0 {
                w.flush_now();
            }
            assert!(stored(d.path()) <= 1000, "disk use over the cap");
        }
        w.flush_now();
        let v = StreamView::open(d.path(), "out", l).unwrap();
        assert_eq!(v.total, all.len() as u64);
        assert!(v.truncated());
        // The head is the first 500 bytes.
        let (s, head) = v.read(0, 10_000).unwrap();
        assert_eq!((s, head.as_slice()), (0, &all[..500]));
        // An elided offset skips to the first stored byte after it.
        let (s, tail) = v.read(600, 100_000).unwrap();
        assert!(s >= all.len() as u64 - 500 && s > 600);
        assert_eq!(tail.as_slice(), &all[s as usize..]);
        // Line numbers of the tail survive rotation.
        let regions = v.regions().unwrap();
        let (start, lines, _) = regions.last().unwrap();
        let expected = all[..*start as usize]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        assert_eq!(*lines, expected);
    }

    #[test]
    fn one_huge_chunk() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::new(4096);
        let mut w = StreamWriter::new(d.path(), "both", l);
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        w.push(&data);
        w.flush_now();
        assert!(stored(d.path()) <= 4096);
        let v = StreamView::open(d.path(), "both", l).unwrap();
        assert_eq!(v.total, 1_000_000);
        let (s, tail) = v.read(3000, 1 << 20).unwrap();
        assert_eq!(tail.as_slice(), &data[s as usize..]);
    }

    /// Pieces of every size, dropped whole, cut in two, or kept, with and
    /// without flushes between them: each stored byte is where the layout
    /// says and the line numbers of every region are exact.
    #[test]
    fn line_numbers_stay_exact_whatever_is_dropped_in_memory() {
        for cap in [1024u64, 10_000, 64 << 10] {
            let d = tempfile::tempdir().unwrap();
            let l = Layout::new(cap);
            let mut w = StreamWriter::new(d.path(), "out", l);
            let mut all = Vec::new();
            let mut x = 12345u64;
            for i in 0..3000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (x >> 33) as usize % (if i % 50 == 0 { 200_000 } else { 3000 });
                let piece: Vec<u8> = (0..len)
                    .map(|k| {
                        if (k as u64 + x).is_multiple_of(7) {
                            b'\n'
                        } else {
                            b'a' + (k % 26) as u8
                        }
                    })
                    .collect();
                all.extend_from_slice(&piece);
                w.push(&piece);
                if i % 97 == 0 {
                    w.flush_now();
                } else if i % 13 == 0 {
                    w.flush();
                }
                assert!(w.pending.len() <= PENDING_MAX + 200_000);
            }
            w.flush_now();
            assert!(stored(d.path()) <= cap, "disk use over the cap {cap}");
            let v = StreamView::open(d.path(), "out", l).unwrap();
            assert_eq!(v.total, all.len() as u64);
            for (start, lines, _) in v.regions().unwrap() {
                let expected = all[..start as usize]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                assert_eq!(lines, expected as u64, "cap {cap}, region at {start}");
            }
            let (s, tail) = v.read(l.head, 1 << 30).unwrap();
            assert_eq!(tail.as_slice(), &all[s as usize..], "cap {cap}");
        }
    }
}
