//! The command's standard input, relayed.
//!
//! The command never holds a descriptor of the caller's objects: not the
//! caller's terminal, not a file or FIFO it was handed. A descriptor is
//! enough to change its object's mode, owner and times (`fchmod(0)`,
//! `futimens(0)`), whatever the mount view says about paths. So stdin
//! reaches the command through an object agent-rsh makes for the run and
//! relays into:
//!
//! - `/dev/null`, opened fresh (no `--stdin`);
//! - a pipe (bytes given by the caller, a job's FIFO, a `--stdin` that is
//!   not a terminal): a pipe's metadata belongs to pipefs and is private
//!   to the run;
//! - a pseudo-terminal agent-rsh allocates (a `--stdin` that is the
//!   caller's terminal): the command sees a terminal, its own. It is the
//!   command's controlling terminal (so its `/dev/tty` is this pty too);
//!   the caller's terminal is put in raw input mode while the relay runs
//!   (the pty's own line discipline edits, echoes and turns ^C into
//!   SIGINT for the command), its window size is passed on, and its modes
//!   are restored when the relay ends, whatever ended the run.
//!
//! Memory is bounded: one chunk in flight per direction; nothing is read
//! from the source until the previous chunk is written.

use super::{READ_CHUNK, set_nonblocking};
use crate::confine::errno;
use crate::plan::StdinMode;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// Where the bytes come from.
enum Source<'p> {
    /// Given bytes, then end of file.
    Bytes(&'p [u8]),
    /// A descriptor agent-rsh owns and made non-blocking (a job's FIFO).
    Own(OwnedFd),
    /// A duplicate of the caller's standard input. Its file description is
    /// shared with the caller's other processes, so it stays blocking:
    /// reads ask `FIONREAD` first and take no more than is there.
    Caller(OwnedFd),
    /// Ended (end of file, an error, or the command closed its side).
    Done,
}

/// The pty side of a terminal relay.
struct Pty {
    /// Where the pty's output (echo, prompts written to the terminal) is
    /// shown: the caller's terminal, or nowhere.
    show: Option<OwnedFd>,
    /// The master still has a slave side open (it reads EIO when not).
    open: bool,
    /// The caller's terminal modes while the relay runs, restored on drop.
    raw: Option<RawMode>,
    /// The last byte relayed, to end a partial line before end of file.
    last: u8,
    eof_sent: bool,
}

/// The parent's side of the command's standard input.
pub(super) struct Relay<'p> {
    /// The command's fd 0, until it is started (then dropped, so the
    /// parent holds no reading end).
    child: Option<OwnedFd>,
    /// The pipe's write end or the pty's master.
    to: Option<OwnedFd>,
    source: Source<'p>,
    buf: Vec<u8>,
    pos: usize,
    pty: Option<Pty>,
    /// For the pty: the command must make it its controlling terminal.
    pub(super) ctty: bool,
    /// The command starts a session of its own (it has the caller's
    /// terminal as stdin no more, so it has no business in its session).
    pub(super) session: bool,
    pub(super) warning: Option<String>,
}

/// Slots in the run loop's poll array.
pub(super) const SLOTS: usize = 4;
const SRC: usize = 0;
const TO: usize = 1;
const MASTER_IN: usize = 2;
const WINCH: usize = 3;

impl<'p> Relay<'p> {
    pub(super) fn new(mode: &'p StdinMode) -> io::Result<Relay<'p>> {
        let mut r = Relay {
            child: None,
            to: None,
            source: Source::Done,
            buf: Vec::new(),
            pos: 0,
            pty: None,
            ctty: false,
            session: false,
            warning: None,
        };
        match mode {
            StdinMode::Null => {
                r.child = Some(std::fs::File::open("/dev/null")?.into());
            }
            StdinMode::Data(bytes) => {
                r.source = Source::Bytes(bytes);
                r.pipe()?;
            }
            StdinMode::Fd(fd) => {
                let own = dup(*fd)?;
                set_nonblocking(own.as_raw_fd());
                r.source = Source::Own(own);
                r.pipe()?;
            }
            StdinMode::Inherit => {
                r.session = true;
                r.source = match dup(0) {
                    Ok(fd) => Source::Caller(fd),
                    // agent-rsh was started with stdin closed: no input.
                    Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                        r.child = Some(std::fs::File::open("/dev/null")?.into());
                        return Ok(r);
                    }
                    Err(e) => return Err(e),
                };
                if crate::sys::stdin_is_terminal() {
                    match open_pty() {
                        Ok((master, slave)) => {
                            r.terminal(master, slave);
                            return Ok(r);
                        }
                        Err(e) => {
                            r.warning = Some(format!(
                                "standard input is a terminal but no pseudo-terminal could be allocated ({e}); the command reads it through a pipe and sees no terminal"
                            ));
                        }
                    }
                }
                r.pipe()?;
            }
        }
        Ok(r)
    }

    fn pipe(&mut self) -> io::Result<()> {
        let (rd, wr) = crate::sys::pipe()?;
        set_nonblocking(wr.as_raw_fd());
        self.child = Some(rd);
        self.to = Some(wr);
        Ok(())
    }

    /// The pty gets the caller's terminal modes and window size; the
    /// caller's terminal itself is changed only by `begin`.
    fn terminal(&mut self, master: OwnedFd, slave: OwnedFd) {
        // SAFETY: termios and winsize calls on stack values and fds we hold.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) == 0 {
                libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t);
            }
        }
        copy_window_size(master.as_raw_fd());
        set_nonblocking(master.as_raw_fd());
        self.child = Some(slave);
        self.to = Some(master);
        self.ctty = true;
        self.pty = Some(Pty {
            show: terminal_writer(),
            open: true,
            raw: None,
            last: b'\n',
            eof_sent: false,
        });
    }

    /// The command's fd 0 (for the child spec); -1 when it has none.
    pub(super) fn child_fd(&self) -> RawFd {
        self.child.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// The command runs: the parent lets go of the reading end and, for
    /// the pty, takes the caller's terminal into raw mode.
    pub(super) fn begin(&mut self) {
        self.child = None;
        self.enter_raw();
        // Empty given bytes, or input that ended already: EOF now.
        self.flush();
    }

    fn enter_raw(&mut self) {
        let Some(pty) = &mut self.pty else { return };
        // In the background of its terminal agent-rsh neither reads it
        // nor changes its modes (the kernel would stop it for that): the
        // command's input ends at once.
        // (A terminal that is not agent-rsh's controlling terminal has no
        // foreground group for it: reading it stops nobody.)
        // SAFETY: tcgetpgrp and getpgrp have no memory effects.
        let background = unsafe {
            let fg = libc::tcgetpgrp(0);
            fg > 0 && fg != libc::getpgrp()
        };
        if background {
            self.source = Source::Done;
            return;
        }
        pty.raw = RawMode::enter(0);
        if let Err(e) = winch_pipe() {
            self.warning = Some(format!(
                "window size changes are not passed to the command's terminal: {e}"
            ));
        }
    }

    /// The run is over: what the pty still holds is shown, then every
    /// descriptor is closed and the caller's terminal modes come back.
    pub(super) fn end(&mut self) {
        if let Some(pty) = &mut self.pty
            && let Some(master) = &self.to
        {
            while pty.open && show_output(master.as_raw_fd(), pty) {}
        }
        self.source = Source::Done;
        self.to = None;
        self.pty = None;
    }

    /// The poll entries of the relay, in slot order.
    pub(super) fn pollfds(&self) -> [libc::pollfd; SLOTS] {
        let none = libc::pollfd {
            fd: -1,
            events: 0,
            revents: 0,
        };
        let mut p = [none; SLOTS];
        let pending = self.pending();
        if pending == 0
            && self.to.is_some()
            && let Source::Own(fd) | Source::Caller(fd) = &self.source
        {
            p[SRC] = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
        }
        if let Some(to) = &self.to {
            // With nothing to write, POLLERR still says the command closed
            // its side of the pipe.
            let input = pending > 0 || matches!(self.source, Source::Bytes(b) if !b.is_empty());
            p[TO] = libc::pollfd {
                fd: if self.pty.is_some() && !input {
                    -1
                } else {
                    to.as_raw_fd()
                },
                events: if input { libc::POLLOUT } else { 0 },
                revents: 0,
            };
            if let Some(pty) = &self.pty
                && pty.open
            {
                p[MASTER_IN] = libc::pollfd {
                    fd: to.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
            }
        }
        if let Some(pty) = &self.pty
            && pty.raw.is_some()
            && let Ok(w) = winch_pipe()
        {
            p[WINCH] = libc::pollfd {
                fd: w.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
        }
        p
    }

    /// Acts on what poll reported for the relay's slots.
    pub(super) fn handle(&mut self, fds: &[libc::pollfd]) {
        if fds[WINCH].revents != 0 {
            if let Ok(w) = winch_pipe() {
                drain(w.as_raw_fd());
            }
            if let Some(m) = &self.to {
                copy_window_size(m.as_raw_fd());
            }
        }
        if fds[MASTER_IN].revents != 0
            && let (Some(pty), Some(m)) = (&mut self.pty, &self.to)
        {
            show_output(m.as_raw_fd(), pty);
        }
        if self.pty.is_none() && fds[TO].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            // The command closed its side of the pipe.
            self.close_input();
            return;
        }
        if fds[SRC].revents != 0 {
            self.fill();
        }
        if fds[TO].revents != 0 || fds[SRC].revents != 0 {
            self.flush();
        }
    }

    /// No more input: the source is let go (a job's FIFO then has no
    /// reader, so a later `send` learns it), and so is the pipe.
    fn close_input(&mut self) {
        self.source = Source::Done;
        self.buf = Vec::new();
        self.pos = 0;
        if self.pty.is_none() {
            self.to = None;
        }
    }

    /// Bytes read from the source and not yet written.
    fn pending(&self) -> usize {
        match self.source {
            Source::Bytes(b) => b.len(),
            _ => self.buf.len() - self.pos,
        }
    }

    /// Reads one chunk from the source into the empty buffer.
    fn fill(&mut self) {
        let (fd, caller) = match &self.source {
            Source::Own(fd) => (fd.as_raw_fd(), false),
            Source::Caller(fd) => (fd.as_raw_fd(), true),
            _ => return,
        };
        if self.pending() > 0 {
            return;
        }
        let mut want = READ_CHUNK;
        if caller {
            // A blocking read takes no more than is there. With nothing
            // there, poll reported an end (a closed pipe, a hung-up
            // terminal), which read returns at once.
            let mut avail: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut avail) } == 0 && avail > 0 {
                want = want.min(avail as usize);
            }
        }
        self.buf.clear();
        self.buf.reserve_exact(READ_CHUNK);
        self.pos = 0;
        // SAFETY: read into the buffer's spare capacity (at least `want`).
        let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), want) };
        if n > 0 {
            // SAFETY: read(2) initialised the first n bytes.
            unsafe { self.buf.set_len(n as usize) };
            if let Some(pty) = &mut self.pty {
                pty.last = self.buf[n as usize - 1];
            }
        } else if n == 0 || !matches!(errno(), libc::EAGAIN | libc::EINTR) {
            // End of file (a hung-up terminal reads EIO).
            self.source = Source::Done;
        }
    }

    /// Writes what is pending; at the source's end, passes the end of file
    /// on: the pipe's write end is closed, the pty gets its EOF character.
    fn flush(&mut self) {
        let Some(to) = &self.to else { return };
        let to = to.as_raw_fd();
        loop {
            let data: &[u8] = match self.source {
                Source::Bytes(b) => b,
                _ => &self.buf[self.pos..],
            };
            if data.is_empty() {
                break;
            }
            // SAFETY: write from a live slice.
            let n = unsafe { libc::write(to, data.as_ptr().cast(), data.len().min(READ_CHUNK)) };
            if n > 0 {
                match &mut self.source {
                    Source::Bytes(b) => *b = &b[n as usize..],
                    _ => self.pos += n as usize,
                }
                continue;
            }
            if n == 0 || matches!(errno(), libc::EAGAIN | libc::EINTR) {
                return;
            }
            // The command closed its side (EPIPE) or the pty is gone.
            self.close_input();
            if let Some(pty) = &mut self.pty {
                pty.eof_sent = true;
            }
            return;
        }
        if !matches!(self.source, Source::Done | Source::Bytes(_)) {
            return;
        }
        self.source = Source::Done;
        match &mut self.pty {
            Some(pty) => {
                if !pty.eof_sent {
                    pty.eof_sent = true;
                    send_eof(to, pty.last);
                }
            }
            None => self.to = None,
        }
    }
}

/// Writes the pty's end-of-file character (twice after a partial line:
/// the first ends the line) when the command reads it in canonical mode.
fn send_eof(master: RawFd, last: u8) {
    // SAFETY: tcgetattr on the master reads the pty's modes.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(master, &mut t) != 0 || t.c_lflag & libc::ICANON == 0 {
            return;
        }
        let eof = t.c_cc[libc::VEOF];
        let b = [eof, eof];
        let n = if last == b'\n' { 1 } else { 2 };
        libc::write(master, b.as_ptr().cast(), n);
    }
}

/// Reads one chunk of the pty's output and shows it; false when nothing
/// more is there now (or ever: `open` turns false).
fn show_output(master: RawFd, pty: &mut Pty) -> bool {
    let mut b = [0u8; 4096];
    // SAFETY: read into a stack buffer.
    let n = unsafe { libc::read(master, b.as_mut_ptr().cast(), b.len()) };
    if n <= 0 {
        if n == 0 || !matches!(errno(), libc::EAGAIN | libc::EINTR) {
            pty.open = false;
        }
        return false;
    }
    if let Some(show) = &pty.show
        && !write_all(show.as_raw_fd(), &b[..n as usize])
    {
        pty.show = None;
    }
    true
}

fn write_all(fd: RawFd, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        // SAFETY: write from a live slice.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n > 0 {
            data = &data[n as usize..];
        } else if n == 0 || errno() != libc::EINTR {
            return false;
        }
    }
    true
}

fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new fd we own.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if d < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// A new pty pair: (master, slave), both close-on-exec.
fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: posix_openpt returns a new fd we own.
    let m = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if m < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    // SAFETY: unlockpt and TIOCGPTPEER on the master we hold.
    let s = unsafe {
        if libc::unlockpt(m) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::ioctl(
            m,
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok((master, unsafe { OwnedFd::from_raw_fd(s) }))
}

/// Where the pty's output is shown: the caller's terminal through its
/// stdin when that is open for writing, else reopened for writing.
fn terminal_writer() -> Option<OwnedFd> {
    // SAFETY: F_GETFL has no memory effects.
    let fl = unsafe { libc::fcntl(0, libc::F_GETFL) };
    if fl >= 0 && fl & libc::O_ACCMODE != libc::O_RDONLY {
        return dup(0).ok();
    }
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/proc/self/fd/0")
        .ok()
        .map(Into::into)
}

use std::os::unix::fs::OpenOptionsExt;

/// The caller's window size onto the pty (the kernel then sends SIGWINCH
/// to the command's foreground process group).
fn copy_window_size(master: RawFd) {
    // SAFETY: TIOCGWINSZ/TIOCSWINSZ on a stack winsize.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(master, libc::TIOCSWINSZ, &ws);
        }
    }
}

/// A self-pipe that SIGWINCH writes a byte into, installed on first use.
fn winch_pipe() -> io::Result<&'static OwnedFd> {
    static CELL: OnceLock<Result<OwnedFd, i32>> = OnceLock::new();
    let r = CELL.get_or_init(|| {
        let (r, w) = crate::sys::pipe().map_err(|e| e.raw_os_error().unwrap_or(0))?;
        set_nonblocking(r.as_raw_fd());
        set_nonblocking(w.as_raw_fd());
        let wfd = w.as_raw_fd();
        std::mem::forget(w);
        // SAFETY: the handler only calls write(2), which is
        // async-signal-safe; the fd lives for the whole process.
        unsafe {
            signal_hook::low_level::register(libc::SIGWINCH, move || {
                let b = 0u8;
                libc::write(wfd, (&b as *const u8).cast(), 1);
            })
        }
        .map_err(|e| e.raw_os_error().unwrap_or(0))?;
        Ok(r)
    });
    r.as_ref().map_err(|e| io::Error::from_raw_os_error(*e))
}

fn drain(fd: RawFd) {
    let mut b = [0u8; 64];
    // SAFETY: read into a stack buffer from a non-blocking pipe.
    while unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) } > 0 {}
}

/// The caller's terminal in raw input mode (no line editing, echo or
/// signal characters: the pty has its own), output processing kept (the
/// command's output, relayed to agent-rsh's stdout, still gets its
/// carriage returns). Restored on drop.
struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

impl RawMode {
    fn enter(fd: RawFd) -> Option<RawMode> {
        // SAFETY: termios calls on stack values.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut saved) != 0 {
                return None;
            }
            let mut t = saved;
            t.c_iflag &= !(libc::IGNBRK
                | libc::BRKINT
                | libc::PARMRK
                | libc::ISTRIP
                | libc::INLCR
                | libc::IGNCR
                | libc::ICRNL
                | libc::IXON);
            t.c_lflag &= !(libc::ECHO | libc::ECHONL | libc::ICANON | libc::ISIG | libc::IEXTEN);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
                return None;
            }
            Some(RawMode { fd, saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: tcsetattr from a saved value.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}
