//! cabprof's binary trace format (`CABTRACE`, version 1), read and written.
//!
//! ```text
//! offset  size  field
//!      0     8  magic: the ASCII bytes "CABTRACE"
//!      8     4  version: u32 little-endian, = 1
//!     12     4  flags: u32 little-endian; bit 0 = instruction fetches are included (as
//!               loads); every other bit must be 0
//!     16   8*n  n records: one cabprof `Mem` event word each, u64 little-endian
//! ```
//!
//! A record *is* the `Mem` event word that travels through the CAB ring, in the layout that
//! [`cabprof_cab::event`] alone defines (this module reads and checks words only through
//! [`Event::from_mem_word`] and [`Event::is_store`]). So reading is a block copy plus a tag
//! check per word, and a trace takes 8 bytes per access (Lackey text takes about 14). The flags word pads the header to 16 bytes so every
//! record is 8-byte aligned in the file (for readers that map it). A Lackey `M` becomes two
//! records (load, store); an instruction fetch is either left out or a load, as the flags say.
//! A word that is not a `Mem` event (wrong tag, `0`, `u64::MAX`) is a
//! [`TraceError::BadRecord`]; trailing bytes that do not make a whole word are a
//! [`TraceError::Truncated`]. There is no record count or trailer: a trace can be written from
//! a stream and read from a pipe.

use super::{read_full, ParseStats, TraceError, BLOCK_BYTES};
use cabprof_cab::event::Event;
use std::io::{self, Read, Write};

/// The first 8 bytes of a binary trace.
pub const MAGIC: &[u8; 8] = b"CABTRACE";
/// The binary format version this reader and writer speak.
pub const VERSION: u32 = 1;
/// Bytes before the first record of a binary trace.
pub const HEADER_BYTES: usize = 16;
/// Binary header flag: instruction fetches are included, as loads.
pub const FLAG_INSTRUCTIONS: u32 = 1;

/// Streaming binary trace reader: see the module docs.
#[derive(Debug)]
pub struct BinaryReader<R> {
    inner: R,
    flags: u32,
    buf: Box<[u8]>,
    /// Bytes of an incomplete record carried over from the last read, at `buf[..carry]`.
    carry: usize,
    eof: bool,
    stats: ParseStats,
}

impl<R: Read> BinaryReader<R> {
    /// Read and check the header.
    pub fn new(inner: R) -> Result<Self, TraceError> {
        Self::with_block_bytes(inner, BLOCK_BYTES)
    }

    /// Like [`new`](Self::new), reading `block_bytes` (rounded up to 8 bytes) at a time.
    pub fn with_block_bytes(mut inner: R, block_bytes: usize) -> Result<Self, TraceError> {
        let mut header = [0u8; HEADER_BYTES];
        let got = read_full(&mut inner, &mut header)?;
        if got < MAGIC.len() || &header[..8] != MAGIC {
            return Err(TraceError::BadHeader(format!(
                "expected magic \"CABTRACE\", found {:?}",
                String::from_utf8_lossy(&header[..got.min(8)])
            )));
        }
        if got < HEADER_BYTES {
            return Err(TraceError::BadHeader(format!(
                "header is {HEADER_BYTES} bytes, file has {got}"
            )));
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if version != VERSION {
            return Err(TraceError::BadHeader(format!(
                "version {version}; this cabprof reads version {VERSION}"
            )));
        }
        let flags = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
        if flags & !FLAG_INSTRUCTIONS != 0 {
            return Err(TraceError::BadHeader(format!("unknown flags {flags:#x}")));
        }
        Ok(BinaryReader {
            inner,
            flags,
            buf: vec![0; block_bytes.max(8).next_multiple_of(8)].into_boxed_slice(),
            carry: 0,
            eof: false,
            stats: ParseStats {
                bytes: HEADER_BYTES as u64,
                ..ParseStats::default()
            },
        })
    }

    /// The header's flags ([`FLAG_INSTRUCTIONS`]).
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Counters so far.
    pub fn stats(&self) -> ParseStats {
        self.stats
    }

    /// Read one block and emit its records. `Ok(false)` once the input is exhausted. On an
    /// error, every record before the bad one has been emitted and counted, and the reader
    /// stops (later calls return `Ok(false)`).
    pub fn next_block(&mut self, emit: &mut impl FnMut(Event)) -> Result<bool, TraceError> {
        if self.eof {
            return Ok(false);
        }
        let mut end = self.carry;
        while end < self.buf.len() {
            match self.inner.read(&mut self.buf[end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let whole = end / 8 * 8;
        let stats = &mut self.stats;
        let mut stores = 0u64;
        let mut done = 0u64;
        let mut bad = None;
        for chunk in self.buf[..whole].chunks_exact(8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("chunks of 8 bytes"));
            // Every word with the Mem tag is a valid Mem event (`cabprof_cab::event`).
            let Some(event) = Event::from_mem_word(word) else {
                bad = Some(word);
                break;
            };
            emit(event);
            stores += u64::from(event.is_store());
            done += 1;
        }
        stats.stores += stores;
        stats.loads += done - stores;
        stats.events += done;
        stats.bytes += done * 8;
        if let Some(word) = bad {
            // The reader stops here: later calls return `Ok(false)`.
            self.eof = true;
            let index = stats.events;
            return Err(TraceError::BadRecord { index, word });
        }
        self.buf.copy_within(whole..end, 0);
        self.carry = end - whole;
        if self.eof && self.carry > 0 {
            return Err(TraceError::Truncated {
                offset: self.stats.bytes,
                bytes: self.carry,
            });
        }
        Ok(!self.eof)
    }
}

/// Writes a binary trace: the header, then one record per [`write`](Self::write).
#[derive(Debug)]
pub struct BinaryWriter<W: Write> {
    inner: io::BufWriter<W>,
}

impl<W: Write> BinaryWriter<W> {
    /// Write the header with `flags` ([`FLAG_INSTRUCTIONS`] or 0).
    pub fn new(inner: W, flags: u32) -> io::Result<Self> {
        let mut inner = io::BufWriter::with_capacity(BLOCK_BYTES, inner);
        inner.write_all(MAGIC)?;
        inner.write_all(&VERSION.to_le_bytes())?;
        inner.write_all(&flags.to_le_bytes())?;
        Ok(BinaryWriter { inner })
    }

    /// Append one record. Only `Mem` events belong in a trace; others are refused.
    pub fn write(&mut self, event: Event) -> io::Result<()> {
        if !event.is_mem() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{event:?} is not a Mem event"),
            ));
        }
        self.inner.write_all(&event.word().to_le_bytes())
    }

    /// Flush and hand back the writer.
    pub fn finish(self) -> io::Result<W> {
        self.inner.into_inner().map_err(|e| e.into_error())
    }
}
