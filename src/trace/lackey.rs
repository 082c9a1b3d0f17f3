//! Valgrind Lackey's text format (`valgrind --tool=lackey --trace-mem=yes`), read fast.
//!
//! ```text
//! ==12345== Lackey, an example Valgrind tool      valgrind's own lines: skipped
//! I  0400d7d4,8                                   instruction fetch: counted, skipped unless
//!  L 04f6b868,8                                     `instructions` (then a load)
//!  S 7ff0001f0,8                                  load / store of 8 bytes
//!  M 0421c7f0,4                                   modify: a load, then a store
//! ```
//!
//! Lackey writes `"I  %08lx,%lu"`, `" L %08lx,%lu"`, `" S ..."`, `" M ..."`. The parser
//! accepts those and a little more: any leading and separating spaces or tabs, an optional
//! `0x`, 1 to 16 hex digits in either case, a decimal size from 1 to [`MAX_RECORD_SIZE`],
//! trailing spaces, tabs or `\r`, and a final line without `\n`. Lines starting with `==` or
//! `--` (valgrind's `==pid==` and `--pid--` messages) and blank lines are skipped and counted.
//! Anything else is a [`TraceError::Malformed`] naming the 1-based line number and the line.
//!
//! **Sizes.** A `Mem` event carries a power-of-two size of at most 128 bytes. Lackey reports the
//! size the guest instruction accesses, which is usually 1, 2, 4, 8, 16, 32 or 64, but can be
//! 3, 6, 10 (x87), 12, 24, 28 or hundreds of bytes (`fxsave`, `xsave`). A size that is not a
//! power of two is **rounded up** to the next one at the same address (so one Lackey access
//! stays one simulated access; the cost is that the widened access may touch one extra line
//! when it ends within `size` bytes of a line boundary); a size above 128 is **split** into
//! consecutive 128-byte accesses, the last one rounded up. Both are counted in
//! [`ParseStats::rounded`] and [`ParseStats::split`]. Addresses above
//! [`cabprof_cab::event::MAX_ADDRESS`] (2^56 - 1; no user-space address is) are malformed.
//!
//! **Cachegrind counting** ([`LackeyReader::count_as_cachegrind`]). To reproduce Valgrind
//! Cachegrind's figures the records are read as cachegrind counts the same accesses: a `M`
//! record is *one* access, a read (cachegrind counts its "modify" events as data reads); a
//! size above the line size is capped at the line size (cachegrind caps accesses at its
//! smallest line size, so that none covers more than two lines); an `I` record is always
//! emitted, as a `Marker` word with [`IFETCH_MARKER`] followed by its `Mem` word, since
//! cachegrind's shared last level sees the instruction fetches too. A size that is not a power
//! of two cannot ride in a `Mem` word, and rounding it would change which lines it touches; it
//! is replaced by an access that covers exactly the same lines at the simulated line size (1
//! byte at the address within one line; 2 bytes across the boundary when it crosses one). A
//! cache simulator or reuse-distance analysis counting as cachegrind then counts one access per
//! word. See `cabprof_analyses::cache_sim` for the simulator's side.
//!
//! Reading is allocation-free per line: the input is read in [`BLOCK_BYTES`] blocks and each
//! line is parsed in place, byte by byte, with a hand-written hex parser; only a malformed line
//! is copied (into its error).
//!

use super::{ParseStats, TraceError, BLOCK_BYTES};
use cabprof_analyses::cache_sim::{CACHEGRIND_MIN_LINE, IFETCH_MARKER};
use cabprof_cab::event::{Event, MAX_ACCESS_SIZE, MAX_ADDRESS};
use std::io::{self, Read};

/// Largest size a Lackey record may give (bytes). Lackey's largest real accesses are
/// `xsave` areas of a few KiB; anything bigger is taken for garbage.
pub const MAX_RECORD_SIZE: u64 = 1 << 16;
/// Longest content kept in a [`TraceError::Malformed`] (bytes of the line).
const MAX_SHOWN: usize = 200;

/// The kind of a Lackey record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `I`: instruction fetch.
    Instruction,
    /// `L`: load.
    Load,
    /// `S`: store.
    Store,
    /// `M`: modify (load then store).
    Modify,
}

/// One Lackey record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// What kind of access.
    pub op: Op,
    /// The address.
    pub addr: u64,
    /// Size in bytes, `1..=MAX_RECORD_SIZE`.
    pub size: u64,
}

/// What one Lackey line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// An access.
    Record(Record),
    /// A valgrind message (`==pid== ...`, `--pid-- ...`).
    Message,
    /// Empty or only whitespace.
    Blank,
}

/// Parse one Lackey line (without its `\n`; a trailing `\r` is allowed). The error says what
/// was expected. Never panics, whatever the bytes.
pub fn parse_line(line: &[u8]) -> Result<Line, &'static str> {
    match parse_at(line, 0, true) {
        Step::Line(l, _) => Ok(l),
        Step::Malformed(reason) => Err(reason),
        // With `at_eof` a line always ends at the end of the slice.
        Step::Incomplete => Err("incomplete line"),
    }
}

/// The outcome of parsing the line that starts at some position of a buffer.
enum Step {
    /// A line, and the position just after its `\n` (or the buffer's end at EOF).
    Line(Line, usize),
    /// The buffer ends before the line does.
    Incomplete,
    /// Not a Lackey line.
    Malformed(&'static str),
}

#[inline(always)]
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Parse the line starting at `buf[p]`. When `at_eof`, the end of `buf` ends the line; else a
/// line must end with `\n` inside `buf`, and running off the end is [`Step::Incomplete`].
///
/// One function for a line, field after field: the hot loop of trace reading, kept in one
/// body so that the position stays in a register from the first byte to the newline.
#[inline(always)]
fn parse_at(buf: &[u8], mut p: usize, at_eof: bool) -> Step {
    // Each `match buf.get(p)` below: `None` is the end of the buffer.
    macro_rules! end_or_incomplete {
        ($line:expr) => {
            if at_eof {
                return Step::Line($line, p);
            } else {
                return Step::Incomplete;
            }
        };
    }
    let start = p;
    // Leading blanks (Lackey writes one before L, S and M, none before I).
    loop {
        match buf.get(p) {
            Some(&b) if is_blank(b) => p += 1,
            Some(_) => break,
            None => end_or_incomplete!(Line::Blank),
        }
    }
    let op = match buf[p] {
        b'I' => Op::Instruction,
        b'L' => Op::Load,
        b'S' => Op::Store,
        b'M' => Op::Modify,
        b'\n' => return Step::Line(Line::Blank, p + 1),
        b'\r' => {
            return match buf.get(p + 1) {
                Some(b'\n') => Step::Line(Line::Blank, p + 2),
                Some(_) => Step::Malformed("stray carriage return"),
                None if at_eof => Step::Line(Line::Blank, p + 1),
                None => Step::Incomplete,
            }
        }
        c @ (b'=' | b'-') if p == start => {
            // A valgrind message (`==pid== ...`, `--pid-- ...`): skip to the end of the line.
            match buf.get(p + 1) {
                Some(&d) if d == c => {}
                None if !at_eof => return Step::Incomplete,
                _ => return Step::Malformed("expected I, L, S or M (or a valgrind ==pid== line)"),
            }
            return match buf[p..].iter().position(|&b| b == b'\n') {
                Some(n) => Step::Line(Line::Message, p + n + 1),
                None if at_eof => Step::Line(Line::Message, buf.len()),
                None => Step::Incomplete,
            };
        }
        _ => return Step::Malformed("expected I, L, S or M (or a valgrind ==pid== line)"),
    };
    p += 1;
    // At least one blank between the kind and the address.
    match buf.get(p) {
        Some(&b) if is_blank(b) => p += 1,
        Some(_) => return Step::Malformed("expected a space after the access kind"),
        None if at_eof => return Step::Malformed("expected ADDRESS,SIZE after the access kind"),
        None => return Step::Incomplete,
    }
    while let Some(&b) = buf.get(p) {
        if !is_blank(b) {
            break;
        }
        p += 1;
    }
    if buf.get(p) == Some(&b'0') && matches!(buf.get(p + 1), Some(b'x' | b'X')) {
        p += 2;
    }
    // The address: 1 to 16 hex digits; eight at a time when 17 bytes are there to look at.
    let mut addr = 0u64;
    let digits_from = p;
    if let Some(ahead) = buf.get(p..p + 17) {
        let (value, digits) = hex_prefix(ahead);
        if digits > 16 {
            return Step::Malformed("address longer than 16 hex digits");
        }
        addr = value;
        p += digits;
    } else {
        loop {
            let b = match buf.get(p) {
                Some(&b) => b,
                None if at_eof => break,
                None => return Step::Incomplete,
            };
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => break,
            };
            if p - digits_from == 16 {
                return Step::Malformed("address longer than 16 hex digits");
            }
            addr = (addr << 4) | d as u64;
            p += 1;
        }
    }
    if p == digits_from {
        return Step::Malformed("expected a hex address");
    }
    if buf.get(p) != Some(&b',') {
        return Step::Malformed("expected ',' after the address");
    }
    p += 1;
    // The size: decimal, 1..=MAX_RECORD_SIZE.
    let mut size = 0u64;
    let digits_from = p;
    loop {
        let b = match buf.get(p) {
            Some(&b) => b,
            None if at_eof => break,
            None => return Step::Incomplete,
        };
        if !b.is_ascii_digit() {
            break;
        }
        size = size * 10 + (b - b'0') as u64;
        if size > MAX_RECORD_SIZE {
            return Step::Malformed("size larger than 65536 bytes");
        }
        p += 1;
    }
    if p == digits_from {
        return Step::Malformed("expected a decimal size after ','");
    }
    if size == 0 {
        return Step::Malformed("size 0");
    }
    if addr > MAX_ADDRESS {
        return Step::Malformed("address above 2^56 (cabprof events carry 56-bit addresses)");
    }
    let line = Line::Record(Record { op, addr, size });
    // Trailing blanks and `\r`, then the newline.
    loop {
        match buf.get(p) {
            Some(b'\n') => return Step::Line(line, p + 1),
            Some(&b) if is_blank(b) || b == b'\r' => p += 1,
            Some(_) => return Step::Malformed("unexpected text after the size"),
            None => end_or_incomplete!(line),
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The hex number at the start of `bytes` (at least 17 of them) and its number of digits,
/// 0 to 16, or 17 when there are more than 16. Reads 8 bytes at a time (SWAR: "SIMD within a
/// register"), so an address costs a few dozen instructions and no branch per digit.
#[inline(always)]
fn hex_prefix(bytes: &[u8]) -> (u64, usize) {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (lo, n_lo) = hex8(word(0));
    if n_lo < 8 {
        return (lo, n_lo);
    }
    let (hi, n_hi) = hex8(word(8));
    if n_hi == 8 && bytes[16].is_ascii_hexdigit() {
        return (0, 17);
    }
    // `n_hi <= 8`, so the shift is at most 32.
    ((lo << (4 * n_hi)) | hi, 8 + n_hi)
}

/// The value of the leading hex digits of the 8 bytes of `v` (byte 0 first, as in memory) and
/// how many there are (0..=8).
#[inline(always)]
fn hex8(v: u64) -> (u64, usize) {
    // Per byte x < 0x80: `((x | 0x80) - c) & 0x80` is set iff x >= c, with no borrow between
    // bytes (each minuend byte is >= 0x80 > c). Bytes >= 0x80 are excluded by `!v`.
    let at_least = |x: u64, c: u8| ((x | HIGH) - ONES * c as u64) & HIGH;
    let digit = at_least(v, b'0') & !at_least(v, b'9' + 1);
    let folded = v | (ONES * 0x20); // 'A'..='F' -> 'a'..='f'
    let alpha = at_least(folded, b'a') & !at_least(folded, b'f' + 1);
    let hex = (digit | alpha) & !v & HIGH;
    let n = ((!hex & HIGH).trailing_zeros() / 8) as usize; // 64 / 8 = 8 when all are digits
    if n == 0 {
        return (0, 0);
    }
    // Digit values: the low nibble, plus 9 for letters (bit 6 set: 'a' = 0x61 -> 1 + 9).
    let nibbles = (v & (ONES * 0x0F)) + 9 * ((v >> 6) & ONES);
    // Keep the n digits, moved to the end (the low-order positions of the number).
    let x = nibbles << (8 * (8 - n));
    // Merge neighbours: byte pairs into 8-bit values, pairs of those into 16, then 32.
    let x = ((x & 0x000F_000F_000F_000F) << 4) | ((x >> 8) & 0x000F_000F_000F_000F);
    let x = ((x & 0x0000_00FF_0000_00FF) << 8) | ((x >> 16) & 0x0000_00FF_0000_00FF);
    let x = ((x & 0xFFFF) << 16) | ((x >> 32) & 0xFFFF);
    (x, n)
}

/// Emit the event word(s) of one access: one `Mem` event, or several for a size above 128.
/// `addr <= MAX_ADDRESS` and `1 <= size <= MAX_RECORD_SIZE`.
#[inline(always)]
fn emit_access(
    addr: u64,
    size: u64,
    store: bool,
    stats: &mut ParseStats,
    emit: &mut impl FnMut(Event),
) {
    const MAX: u64 = MAX_ACCESS_SIZE as u64;
    if size.is_power_of_two() && size <= MAX {
        push_mem(addr, size as u32, store, stats, emit);
        return;
    }
    if size <= MAX {
        stats.rounded += 1;
        push_mem(addr, size.next_power_of_two() as u32, store, stats, emit);
        return;
    }
    stats.split += 1;
    let mut at = addr;
    let mut left = size;
    while left > 0 {
        let piece = left.min(MAX);
        // An address past MAX_ADDRESS (only possible within 64 KiB of 2^56) is clamped there;
        // no real trace comes near.
        push_mem(
            at.min(MAX_ADDRESS),
            piece.next_power_of_two() as u32,
            store,
            stats,
            emit,
        );
        at += piece;
        left -= piece;
    }
}

#[inline(always)]
fn push_mem(
    addr: u64,
    size: u32,
    store: bool,
    stats: &mut ParseStats,
    emit: &mut impl FnMut(Event),
) {
    // Cannot fail: the caller checked the address, and the size is a power of two <= 128.
    if let Ok(e) = Event::mem(addr, size, store) {
        stats.events += 1;
        emit(e);
    }
}

/// Emit one record's access the cachegrind way (see the module docs): capped at the line size,
/// one `Mem` word covering the same lines at `2^line_shift`-byte lines.
#[inline(always)]
fn emit_cachegrind(
    addr: u64,
    size: u64,
    store: bool,
    line_shift: u32,
    stats: &mut ParseStats,
    emit: &mut impl FnMut(Event),
) {
    let cap = 1u64 << line_shift;
    if size > cap {
        stats.capped += 1;
    }
    let size = size.min(cap);
    if size.is_power_of_two() && size <= MAX_ACCESS_SIZE as u64 {
        push_mem(addr, size as u32, store, stats, emit);
        return;
    }
    let first = addr >> line_shift;
    let last = (addr + size - 1) >> line_shift;
    if first == last {
        push_mem(addr, 1, store, stats, emit);
    } else {
        push_mem((last << line_shift) - 1, 2, store, stats, emit);
    }
}

/// Streaming Lackey reader: see the module docs.
#[derive(Debug)]
pub struct LackeyReader<R> {
    inner: R,
    /// Input bytes; `buf[start..end]` is not parsed yet and starts at a line boundary.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    instructions: bool,
    /// Set by an error: the reader has stopped for good.
    failed: bool,
    /// Cachegrind counting: `log2` of the simulated line size.
    cachegrind_line_shift: Option<u32>,
    stats: ParseStats,
}

impl<R: Read> LackeyReader<R> {
    /// A reader of `inner`; instruction fetches are emitted as loads if `instructions`.
    pub fn new(inner: R, instructions: bool) -> Self {
        Self::with_block_bytes(inner, instructions, BLOCK_BYTES)
    }

    /// Like [`new`](Self::new) with a `block_bytes` buffer (at least 1): a line longer than
    /// that is malformed. Small blocks exercise the refill path in tests.
    pub fn with_block_bytes(inner: R, instructions: bool, block_bytes: usize) -> Self {
        LackeyReader {
            inner,
            buf: vec![0; block_bytes.max(1)].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            instructions,
            failed: false,
            cachegrind_line_shift: None,
            stats: ParseStats::default(),
        }
    }

    /// Read records as Valgrind Cachegrind counts them, for a simulator with
    /// `line_bytes`-byte lines (a power of two, at least 16): see the module docs. Instruction
    /// fetches are emitted whatever `instructions` said.
    ///
    /// # Panics
    /// If `line_bytes` is not a power of two of at least 16 (callers validate the geometry
    /// first, with `cabprof_analyses::CacheSim::cachegrind`).
    pub fn count_as_cachegrind(&mut self, line_bytes: u32) {
        assert!(
            line_bytes.is_power_of_two() && line_bytes >= CACHEGRIND_MIN_LINE,
            "line_bytes = {line_bytes}: must be a power of two, at least 16"
        );
        self.cachegrind_line_shift = Some(line_bytes.trailing_zeros());
        self.instructions = true;
    }

    /// Counters so far.
    pub fn stats(&self) -> ParseStats {
        self.stats
    }

    /// Whether instruction fetches are emitted (as loads).
    pub fn instructions(&self) -> bool {
        self.instructions
    }

    /// Read one block and emit the events of its complete lines. `Ok(false)` once the input
    /// is exhausted. On an error, every line before the bad one has been emitted and counted,
    /// and the reader stops (later calls return `Ok(false)`).
    pub fn next_block(&mut self, emit: &mut impl FnMut(Event)) -> Result<bool, TraceError> {
        if self.failed || (self.eof && self.start == self.end) {
            return Ok(false);
        }
        self.fill()?;
        let at_eof = self.eof;
        let buf = &self.buf[..self.end];
        let mut p = self.start;
        let stats = &mut self.stats;
        let cachegrind = self.cachegrind_line_shift;
        while p < buf.len() {
            match parse_at(buf, p, at_eof) {
                Step::Line(line, next) => {
                    stats.lines += 1;
                    match line {
                        Line::Record(r) if cachegrind.is_some() => {
                            let shift = cachegrind.unwrap_or_default();
                            let store = match r.op {
                                Op::Load => {
                                    stats.loads += 1;
                                    false
                                }
                                Op::Store => {
                                    stats.stores += 1;
                                    true
                                }
                                Op::Modify => {
                                    stats.modifies += 1;
                                    false
                                }
                                Op::Instruction => {
                                    stats.instructions += 1;
                                    if let Ok(marker) = Event::marker(IFETCH_MARKER) {
                                        emit(marker);
                                    }
                                    false
                                }
                            };
                            emit_cachegrind(r.addr, r.size, store, shift, stats, emit);
                        }
                        Line::Record(r) => match r.op {
                            Op::Load => {
                                stats.loads += 1;
                                emit_access(r.addr, r.size, false, stats, emit);
                            }
                            Op::Store => {
                                stats.stores += 1;
                                emit_access(r.addr, r.size, true, stats, emit);
                            }
                            Op::Modify => {
                                stats.modifies += 1;
                                emit_access(r.addr, r.size, false, stats, emit);
                                emit_access(r.addr, r.size, true, stats, emit);
                            }
                            Op::Instruction => {
                                stats.instructions += 1;
                                if self.instructions {
                                    emit_access(r.addr, r.size, false, stats, emit);
                                }
                            }
                        },
                        Line::Message => stats.messages += 1,
                        Line::Blank => stats.blank += 1,
                    }
                    stats.bytes += (next - p) as u64;
                    p = next;
                }
                Step::Incomplete => {
                    if p == 0 && buf.len() == self.buf.len() {
                        self.start = p;
                        return Err(self.malformed(p, "line longer than the read buffer"));
                    }
                    break;
                }
                Step::Malformed(reason) => {
                    self.start = p;
                    return Err(self.malformed(p, reason));
                }
            }
        }
        self.start = p;
        Ok(!(self.eof && self.start == self.end))
    }

    /// Move the unparsed tail to the front and read until the buffer is full or the input ends.
    fn fill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while !self.eof && self.end < self.buf.len() {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The error for the line starting at `buf[p]` (line number `lines + 1`). Reads on past
    /// the buffer, if the line continues, to show up to [`MAX_SHOWN`] bytes of it whatever the
    /// block size; the reader is finished afterwards.
    fn malformed(&mut self, p: usize, reason: &'static str) -> TraceError {
        self.failed = true;
        let mut line = self.buf[p..self.end].to_vec();
        let mut more = [0u8; 256];
        while !self.eof && !line.contains(&b'\n') && line.len() <= MAX_SHOWN {
            match self.inner.read(&mut more) {
                Ok(0) | Err(_) => self.eof = true,
                Ok(n) => line.extend_from_slice(&more[..n]),
            }
        }
        if let Some(n) = line.iter().position(|&b| b == b'\n') {
            line.truncate(n);
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let mut content = String::from_utf8_lossy(&line[..line.len().min(MAX_SHOWN)]).into_owned();
        if line.len() > MAX_SHOWN {
            content.push('…');
        }
        TraceError::Malformed {
            line: self.stats.lines + 1,
            content,
            reason,
        }
    }
}
