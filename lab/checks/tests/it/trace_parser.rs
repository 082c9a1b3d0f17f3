//! The trace readers of `cabprof::trace`: no input panics the Lackey parser, the result does
//! not depend on how the input is cut into blocks, every well-formed record parses to what it
//! says, and the binary format round-trips.

use cabprof::trace::{
    parse_line, BinaryReader, BinaryWriter, LackeyReader, Line, Op, ParseStats, Record, TraceError,
    TraceReader, FLAG_INSTRUCTIONS,
};
use cabprof_cab::event::{decode, Event, EventKind, MAX_ADDRESS};
use proptest::prelude::*;
use std::io::Cursor;

/// Everything a Lackey reader produces: the events, the counters, and the error (as text).
fn read_lackey(bytes: &[u8], block: usize, instructions: bool) -> (Vec<u64>, ParseStats, String) {
    let mut reader = LackeyReader::with_block_bytes(Cursor::new(bytes), instructions, block);
    let mut words = Vec::new();
    let mut error = String::new();
    loop {
        match reader.next_block(&mut |e: Event| words.push(e.word())) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                error = e.to_string();
                break;
            }
        }
    }
    (words, reader.stats(), error)
}

fn read_binary(bytes: &[u8], block: usize) -> Result<(Vec<u64>, ParseStats), TraceError> {
    let mut reader = BinaryReader::with_block_bytes(Cursor::new(bytes), block)?;
    let mut words = Vec::new();
    while reader.next_block(&mut |e: Event| words.push(e.word()))? {}
    Ok((words, reader.stats()))
}

fn write_binary(events: &[Event], flags: u32) -> Vec<u8> {
    let mut w = BinaryWriter::new(Vec::new(), flags).unwrap();
    for &e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

/// Bytes that look like Lackey output often enough to reach deep into the parser.
fn lackeyish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"I  0400d7d4,8\n".to_vec()),
        Just(b" L 04f6b868,8\n".to_vec()),
        Just(b" S 7ff0001f0,16\n".to_vec()),
        Just(b" M 0421c7f0,6\n".to_vec()),
        Just(b" L 1000,300\n".to_vec()),
        Just(b"==123== Lackey\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b" L ffffffffffffffff,8\n".to_vec()),
        Just(b" L 0x10,0\n".to_vec()),
        prop::collection::vec(
            prop::sample::select(b" \t\r\nILSM=-0123456789abcdefxX,".to_vec()),
            0..24
        ),
        prop::collection::vec(any::<u8>(), 0..12),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_line_panics_the_parser(line in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_line(&line);
    }

    #[test]
    fn no_input_panics_the_reader_and_blocks_do_not_matter(
        bytes in lackeyish(),
        block in 1usize..48,
        instructions in any::<bool>(),
    ) {
        let whole = read_lackey(&bytes, 1 << 16, instructions);
        let cut = read_lackey(&bytes, block, instructions);
        // A line longer than the small block is an error only there; otherwise identical.
        if !cut.2.contains("longer than the read buffer") {
            prop_assert_eq!(&cut, &whole);
        }
        // Whatever the outcome, counters agree with what was emitted.
        let s = whole.1;
        prop_assert_eq!(s.events, whole.0.len() as u64);
        prop_assert!(s.lines >= s.loads + s.stores + s.modifies + s.instructions);
        for &w in &whole.0 {
            let is_mem = matches!(decode(w), Some(EventKind::Mem { .. }));
            prop_assert!(is_mem, "not a Mem word: {:#x}", w);
        }
    }

    #[test]
    fn well_formed_records_parse_to_what_they_say(
        op in prop::sample::select(vec![b'I', b'L', b'S', b'M']),
        addr in 0u64..=MAX_ADDRESS,
        size in 1u64..=65_536,
        lead in 0usize..3,
        gap in 1usize..3,
        zero_x in any::<bool>(),
        upper in any::<bool>(),
        trail in prop::sample::select(vec!["", " ", "\r", " \t"]),
    ) {
        let hex = if upper { format!("{addr:08X}") } else { format!("{addr:08x}") };
        let line = format!(
            "{}{}{}{}{hex},{size}{trail}",
            " ".repeat(lead),
            op as char,
            " ".repeat(gap),
            if zero_x { "0x" } else { "" },
        );
        let op = match op {
            b'I' => Op::Instruction,
            b'L' => Op::Load,
            b'S' => Op::Store,
            _ => Op::Modify,
        };
        prop_assert_eq!(parse_line(line.as_bytes()), Ok(Line::Record(Record { op, addr, size })));
    }

    #[test]
    fn binary_round_trips(
        accesses in prop::collection::vec(
            (0u64..=MAX_ADDRESS, 0u32..8, any::<bool>()), 0..300),
        block in 1usize..100,
        flags in prop::sample::select(vec![0, FLAG_INSTRUCTIONS]),
    ) {
        let events: Vec<Event> = accesses
            .iter()
            .map(|&(addr, log, store)| Event::mem(addr, 1 << log, store).unwrap())
            .collect();
        let bytes = write_binary(&events, flags);
        prop_assert_eq!(bytes.len(), 16 + 8 * events.len());
        let (words, stats) = read_binary(&bytes, block).unwrap();
        let expected: Vec<u64> = events.iter().map(|e| e.word()).collect();
        prop_assert_eq!(words, expected);
        let stores = accesses.iter().filter(|a| a.2).count() as u64;
        prop_assert_eq!((stats.loads, stats.stores), (events.len() as u64 - stores, stores));
        let reader = TraceReader::open(Cursor::new(&bytes), None, false).unwrap();
        prop_assert_eq!(reader.includes_instructions(), flags == FLAG_INSTRUCTIONS);
    }

    #[test]
    fn lackey_to_binary_keeps_every_event(bytes in lackeyish(), instructions in any::<bool>()) {
        let (words, _, _) = read_lackey(&bytes, 1 << 16, instructions);
        let events: Vec<Event> = words.iter().map(|&w| Event::from_word(w).unwrap()).collect();
        let (back, _) = read_binary(&write_binary(&events, 0), 64).unwrap();
        prop_assert_eq!(back, words);
    }

    #[test]
    fn no_input_panics_the_binary_reader(
        body in prop::collection::vec(any::<u8>(), 0..200),
        block in 1usize..64,
        header_ok in any::<bool>(),
    ) {
        let mut bytes = if header_ok { write_binary(&[], 0) } else { Vec::new() };
        bytes.extend_from_slice(&body);
        let _ = read_binary(&bytes, block);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Addresses of every width, zero-padded, parsed with and without enough bytes after
    /// them for the 8-at-a-time path, and with a non-hex byte right after.
    #[test]
    fn addresses_of_every_width_parse(
        addr in 0u64..=MAX_ADDRESS,
        width in 1usize..=16,
        upper in any::<bool>(),
        pad in 0usize..20,
        stop in prop::sample::select(vec![b',', b'g', b'G', b'/', b':', b'@', b'`', 0x80, 0xC6]),
    ) {
        let hex = if upper { format!("{addr:0width$X}") } else { format!("{addr:0width$x}") };
        let line = format!(" S {hex},4{}", " ".repeat(pad));
        let digits = hex.len();
        let expect = if digits > 16 {
            Err("address longer than 16 hex digits")
        } else {
            Ok(Line::Record(Record { op: Op::Store, addr, size: 4 }))
        };
        prop_assert_eq!(parse_line(line.as_bytes()), expect);
        // Any other byte after the digits stops them (and is then not the expected ',').
        let mut odd = format!(" S {hex}").into_bytes();
        odd.push(stop);
        odd.extend_from_slice(b"4                    ");
        let got = parse_line(&odd);
        if stop == b',' {
            prop_assert!(got.is_ok() || digits > 16);
        } else {
            prop_assert!(got.is_err());
        }
    }
}

#[test]
fn seventeen_digit_addresses_are_rejected_on_both_paths() {
    for tail in ["", "                    "] {
        let line = format!(" L 00000000000001000,8{tail}");
        assert_eq!(
            parse_line(line.as_bytes()),
            Err("address longer than 16 hex digits")
        );
        let line = format!(" L 0000000000001000,8{tail}");
        assert!(parse_line(line.as_bytes()).is_ok());
    }
}

#[test]
fn lackey_lines_become_the_right_events() {
    let text = "==42== Lackey, an example Valgrind tool\n\
                I  0400d7d4,8\n \
                L 04f6b868,8\n \
                S 7ff0001f0,4\n \
                M 0421c7f0,2\n\
                \n \
                L 1000,6\n \
                S 2000,300";
    let (words, stats, error) = read_lackey(text.as_bytes(), 1 << 16, false);
    assert_eq!(error, "");
    let mem = |addr, size, store| Event::mem(addr, size, store).unwrap().word();
    assert_eq!(
        words,
        [
            mem(0x04f6b868, 8, false),
            mem(0x7ff0001f0, 4, true),
            mem(0x0421c7f0, 2, false),
            mem(0x0421c7f0, 2, true),
            mem(0x1000, 8, false),  // 6 rounded up
            mem(0x2000, 128, true), // 300 split: 128 + 128 + 44 -> 64
            mem(0x2080, 128, true),
            mem(0x2100, 64, true),
        ]
    );
    assert_eq!(
        stats,
        ParseStats {
            bytes: text.len() as u64,
            lines: 8,
            instructions: 1,
            loads: 2,
            stores: 2,
            modifies: 1,
            messages: 1,
            blank: 1,
            rounded: 1,
            split: 1,
            capped: 0,
            events: 8,
        }
    );
    let (with_fetches, _, _) = read_lackey(text.as_bytes(), 1 << 16, true);
    assert_eq!(with_fetches[0], mem(0x0400d7d4, 8, false));
}

#[test]
fn a_malformed_line_is_named_and_what_came_before_is_kept() {
    let text = " L 1000,8\n S 2000,8\n L 3000;8\n L 4000,8\n";
    for block in [10, 13, 1 << 16] {
        let (words, stats, error) = read_lackey(text.as_bytes(), block, false);
        assert_eq!(words.len(), 2, "block {block}");
        assert_eq!(stats.lines, 2);
        assert_eq!(
            error,
            "malformed Lackey line 3: expected ',' after the address: \" L 3000;8\""
        );
    }
    for (line, reason) in [
        (" X 1000,8", "expected I, L, S or M"),
        (" L,8", "expected a space after the access kind"),
        (" L 1000", "expected ',' after the address"),
        (" L 1000,", "expected a decimal size"),
        (" L 1000,0", "size 0"),
        (" L 1000,99999", "size larger than"),
        (" L 12345678901234567,8", "longer than 16 hex digits"),
        (" L 100000000000000,8", "address above 2^56"),
        (" L 1000,8 junk", "unexpected text after the size"),
        ("=x", "expected I, L, S or M"),
    ] {
        let err = parse_line(line.as_bytes()).unwrap_err();
        assert!(err.contains(reason), "{line:?}: {err}");
    }
}

#[test]
fn binary_errors_name_the_record() {
    let good = write_binary(&[Event::mem(0x40, 8, false).unwrap()], 0);
    // A word that is not a Mem event (a Call), after one good record.
    let mut bad = good.clone();
    let call = Event::call(
        cabprof_cab::MethodId::ROOT,
        cabprof_cab::MethodId::new(1).unwrap(),
    );
    bad.extend_from_slice(&call.word().to_le_bytes());
    let err = read_binary(&bad, 1 << 10).unwrap_err().to_string();
    assert!(err.contains("binary record 1 (byte offset 24)"), "{err}");
    // Three stray bytes.
    let mut truncated = good.clone();
    truncated.extend_from_slice(&[1, 2, 3]);
    let err = read_binary(&truncated, 1 << 10).unwrap_err().to_string();
    assert!(err.contains("3 byte(s) at offset 24"), "{err}");
    // Header problems.
    for (bytes, what) in [
        (b"CABTRACX\x01\0\0\0\0\0\0\0".to_vec(), "expected magic"),
        (b"CABTRACE\x02\0\0\0\0\0\0\0".to_vec(), "version 2"),
        (b"CABTRACE\x01\0\0\0\x02\0\0\0".to_vec(), "unknown flags"),
        (b"CABTRACE\x01\0".to_vec(), "header is 16 bytes"),
    ] {
        let err = read_binary(&bytes, 64).unwrap_err().to_string();
        assert!(err.contains(what), "{err}");
    }
}
