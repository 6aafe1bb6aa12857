//! One output stream of a job on disk: a head file and rotating tail
//! segments, so disk use stays under the cap whatever the child prints.
//!
//! Logical byte `k` of the stream lives in `NAME.head` when `k < head`,
//! else in segment `i = (k - head) / seg` at `(k - head) % seg`. A segment
//! file is named `NAME.seg.I.L` where `L` is the number of newlines before
//! its first byte, so line numbers stay right after old segments are gone.
//! Bytes are only ever appended, never rewritten: a reader that opened a
//! file sees final bytes, and a segment removed under it is just a gap.
//! The stream's total is derived from the newest segment's size, so readers
//! need no counter shared with the writer.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

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
    lines: u64,
    head: Option<File>,
    seg: Option<(u64, File)>,
    oldest: u64,
    /// The first write error (disk full...); output after it is dropped.
    pub error: Option<io::Error>,
}

impl StreamWriter {
    pub fn new(dir: &Path, name: &'static str, layout: Layout) -> StreamWriter {
        StreamWriter {
            dir: dir.to_path_buf(),
            name,
            layout,
            total: 0,
            lines: 0,
            head: None,
            seg: None,
            oldest: 0,
            error: None,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn push(&mut self, data: &[u8]) {
        if self.error.is_none()
            && let Err(e) = self.try_push(data)
        {
            self.error = Some(e);
        }
    }

    fn try_push(&mut self, mut data: &[u8]) -> io::Result<()> {
        let l = self.layout;
        if self.total < l.head && !data.is_empty() {
            let n = data.len().min((l.head - self.total) as usize);
            if self.head.is_none() {
                self.head = Some(create(&self.dir.join(format!("{}.head", self.name)))?);
            }
            let f = self.head.as_mut().expect("head file is open");
            f.write_all(&data[..n])?;
            self.advance(&data[..n]);
            data = &data[n..];
        }
        while !data.is_empty() {
            let pos = self.total - l.head;
            let index = pos / l.seg;
            if self.seg.as_ref().is_none_or(|(i, _)| *i != index) {
                let path = self
                    .dir
                    .join(format!("{}.seg.{index}.{}", self.name, self.lines));
                self.seg = Some((index, create(&path)?));
                self.head = None;
                let keep = l.keep();
                while self.oldest + keep <= index {
                    self.remove_segment(self.oldest);
                    self.oldest += 1;
                }
            }
            let n = data.len().min((l.seg - pos % l.seg) as usize);
            let (_, f) = self.seg.as_mut().expect("segment file is open");
            f.write_all(&data[..n])?;
            self.advance(&data[..n]);
            data = &data[n..];
        }
        Ok(())
    }

    fn advance(&mut self, written: &[u8]) {
        self.total += written.len() as u64;
        self.lines += memchr_count(written);
    }

    fn remove_segment(&self, index: u64) {
        let prefix = format!("{}.seg.{index}.", self.name);
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
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

fn memchr_count(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// A contiguous stored piece of the stream.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Logical offset of its first byte.
    pub start: u64,
    pub len: u64,
    /// Newlines in the stream before `start`.
    pub lines_before: u64,
    path: PathBuf,
}

/// A snapshot of what is stored of one stream.
#[derive(Debug, Clone)]
pub struct StreamView {
    pub pieces: Vec<Piece>,
    /// Every byte the child wrote to the stream, stored or not.
    pub total: u64,
}

impl StreamView {
    pub fn open(dir: &Path, name: &str, layout: Layout) -> io::Result<StreamView> {
        let mut segs: Vec<(u64, u64, PathBuf)> = Vec::new();
        let mut head: Option<PathBuf> = None;
        let seg_prefix = format!("{name}.seg.");
        for e in std::fs::read_dir(dir)?.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if file == format!("{name}.head") {
                head = Some(e.path());
            } else if let Some(rest) = file.strip_prefix(&seg_prefix)
                && let Some((i, l)) = rest.split_once('.')
                && let (Ok(i), Ok(l)) = (i.parse(), l.parse())
            {
                segs.push((i, l, e.path()));
            }
        }
        segs.sort_by_key(|s| s.0);
        let mut pieces = Vec::new();
        if let Some(h) = head {
            let len = size_of(&h)?.min(layout.head);
            pieces.push(Piece {
                start: 0,
                len,
                lines_before: 0,
                path: h,
            });
        }
        for (i, lines, path) in segs {
            let len = size_of(&path)?;
            pieces.push(Piece {
                start: layout.head + i * layout.seg,
                len,
                lines_before: lines,
                path,
            });
        }
        let total = pieces.last().map_or(0, |p| p.start + p.len);
        Ok(StreamView { pieces, total })
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
            read_at(&p.path, at - p.start, want, &mut out)?;
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
            read_at(&p.path, 0, p.len as usize, buf)?;
        }
        Ok(regions)
    }
}

fn size_of(path: &Path) -> io::Result<u64> {
    std::fs::metadata(path).map(|m| m.len())
}

/// Appends up to `len` bytes of `path` from `offset` to `out`; a short
/// file gives what it has.
fn read_at(path: &Path, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    f.take(len as u64).read_to_end(out)?;
    Ok(())
}

/// Reads a stream, retrying when a segment is removed between listing and
/// reading (the writer rotated): the next listing no longer has it.
pub fn with_view<T>(
    dir: &Path,
    name: &str,
    layout: Layout,
    mut f: impl FnMut(&StreamView) -> io::Result<T>,
) -> io::Result<T> {
    let mut tries = 0;
    loop {
        let view = StreamView::open(dir, name, layout)?;
        match f(&view) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 8 => tries += 1,
            r => return r,
        }
    }
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
            assert!(stored(d.path()) <= 1000, "disk use over the cap");
        }
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
        assert!(stored(d.path()) <= 4096);
        let v = StreamView::open(d.path(), "both", l).unwrap();
        assert_eq!(v.total, 1_000_000);
        let (s, tail) = v.read(3000, 1 << 20).unwrap();
        assert_eq!(tail.as_slice(), &data[s as usize..]);
    }
}
