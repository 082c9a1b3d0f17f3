//! Memory traces: Valgrind Lackey's text format, read fast, and cabprof's binary format, read
//! and written. Both readers turn a trace into cabprof `Mem` event words
//! ([`cabprof_cab::event::Event::mem`]) handed to a callback, one block of input at a time, so the
//! caller can push them into a CAB ring and report progress between blocks.
//!
//! - [`lackey`]: the Lackey text parser and its streaming reader.
//! - [`binary`]: the `CABTRACE` binary format, its reader and writer.
//! - [`TraceReader`] (here): either reader, the format chosen or detected from the first bytes.
//! - [`output`]: files written all or nothing (through a temporary file), and a same-file test.
//!
//! The event-word layout itself belongs to [`cabprof_cab::event`]: a binary record *is* an event word,
//! and this module only ever builds and inspects words through that module's functions.

pub mod binary;
pub mod lackey;
pub mod output;

pub use binary::{BinaryReader, BinaryWriter, FLAG_INSTRUCTIONS, HEADER_BYTES, MAGIC, VERSION};
pub use lackey::{parse_line, LackeyReader, Line, Op, Record, MAX_RECORD_SIZE};
pub use output::{is_same_file, OutputFile};

use cabprof_cab::event::Event;
use std::fmt;
use std::io::{self, Read};

/// Bytes read from the input at a time. 1 MiB: large enough that a `read` call costs nothing
/// per access, small enough to stay in L2 alongside the ring's chunks.
pub const BLOCK_BYTES: usize = 1 << 20;

/// Which reader to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Valgrind Lackey text.
    Lackey,
    /// cabprof's binary format.
    Binary,
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceFormat::Lackey => "Lackey text",
            TraceFormat::Binary => "cabprof binary",
        })
    }
}

/// Why a trace could not be read. Everything parsed before the error has been emitted.
#[derive(Debug)]
pub enum TraceError {
    /// Reading failed.
    Io(io::Error),
    /// A Lackey line that is not a record, a valgrind message nor blank.
    Malformed {
        /// 1-based line number.
        line: u64,
        /// The line (lossy UTF-8, without its newline; cut at 200 bytes).
        content: String,
        /// What was expected.
        reason: &'static str,
    },
    /// A binary trace's header is wrong.
    BadHeader(String),
    /// A binary record that is not a `Mem` event word.
    BadRecord {
        /// 0-based record number.
        index: u64,
        /// The word.
        word: u64,
    },
    /// A binary trace ends inside a record.
    Truncated {
        /// Byte offset of the incomplete record.
        offset: u64,
        /// Bytes of it present.
        bytes: usize,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io(e) => write!(f, "read error: {e}"),
            TraceError::Malformed {
                line,
                content,
                reason,
            } => write!(f, "malformed Lackey line {line}: {reason}: {content:?}"),
            TraceError::BadHeader(what) => write!(f, "not a cabprof binary trace: {what}"),
            TraceError::BadRecord { index, word } => write!(
                f,
                "binary record {index} (byte offset {}) is {word:#018x}, not a Mem event word",
                HEADER_BYTES as u64 + index * 8
            ),
            TraceError::Truncated { offset, bytes } => write!(
                f,
                "binary trace truncated: {bytes} byte(s) at offset {offset} do not make an \
                 8-byte record"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

impl From<io::Error> for TraceError {
    fn from(e: io::Error) -> Self {
        TraceError::Io(e)
    }
}

/// What a reader has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Bytes of input consumed (for Lackey: whole lines; for binary: header and records).
    pub bytes: u64,
    /// Lines read (Lackey only).
    pub lines: u64,
    /// Instruction fetch records (`I`), whether emitted or not.
    pub instructions: u64,
    /// Load records (` L`; binary: load words).
    pub loads: u64,
    /// Store records (` S`; binary: store words).
    pub stores: u64,
    /// Modify records (` M`), each emitted as a load and a store.
    pub modifies: u64,
    /// Valgrind message lines (`==pid==`, `--pid--`) skipped.
    pub messages: u64,
    /// Blank lines skipped.
    pub blank: u64,
    /// Records whose size was rounded up to a power of two.
    pub rounded: u64,
    /// Records larger than 128 bytes, split into several accesses.
    pub split: u64,
    /// Records larger than a cache line, taken as their first line's worth of bytes
    /// (cachegrind counting only).
    pub capped: u64,
    /// `Mem` event words emitted.
    pub events: u64,
}

/// Read until `buf` is full or the input ends; the number of bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A trace of either format, detected or chosen.
#[derive(Debug)]
pub enum TraceReader<R> {
    /// Lackey text.
    Lackey(LackeyReader<R>),
    /// cabprof binary.
    Binary(BinaryReader<R>),
}

/// The input with the bytes already looked at put back in front.
pub type Peeked<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

impl<R: Read> TraceReader<Peeked<R>> {
    /// Open `inner` as `format`, or detect it (`None`): a binary trace starts with
    /// [`MAGIC`], anything else is read as Lackey text.
    pub fn open(
        mut inner: R,
        format: Option<TraceFormat>,
        instructions: bool,
    ) -> Result<Self, TraceError> {
        let mut head = vec![0u8; MAGIC.len()];
        let got = read_full(&mut inner, &mut head)?;
        head.truncate(got);
        let format = format.unwrap_or(if head == MAGIC {
            TraceFormat::Binary
        } else {
            TraceFormat::Lackey
        });
        let input = io::Cursor::new(head).chain(inner);
        Ok(match format {
            TraceFormat::Lackey => TraceReader::Lackey(LackeyReader::new(input, instructions)),
            TraceFormat::Binary => TraceReader::Binary(BinaryReader::new(input)?),
        })
    }
}

impl<R: Read> TraceReader<R> {
    /// Which format is being read.
    pub fn format(&self) -> TraceFormat {
        match self {
            TraceReader::Lackey(_) => TraceFormat::Lackey,
            TraceReader::Binary(_) => TraceFormat::Binary,
        }
    }

    /// Whether instruction fetches reach the simulator: asked for (Lackey) or recorded in the
    /// header (binary).
    pub fn includes_instructions(&self) -> bool {
        match self {
            TraceReader::Lackey(r) => r.instructions(),
            TraceReader::Binary(r) => r.flags() & FLAG_INSTRUCTIONS != 0,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ParseStats {
        match self {
            TraceReader::Lackey(r) => r.stats(),
            TraceReader::Binary(r) => r.stats(),
        }
    }

    /// One block; see [`LackeyReader::next_block`] and [`BinaryReader::next_block`].
    #[inline]
    pub fn next_block(&mut self, emit: &mut impl FnMut(Event)) -> Result<bool, TraceError> {
        match self {
            TraceReader::Lackey(r) => r.next_block(emit),
            TraceReader::Binary(r) => r.next_block(emit),
        }
    }

    /// Read to the end, emitting every event.
    pub fn read_all(&mut self, emit: &mut impl FnMut(Event)) -> Result<(), TraceError> {
        while self.next_block(emit)? {}
        Ok(())
    }
}
