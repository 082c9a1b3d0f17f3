//! Shared by the `serve_*` tests (`tests/it/`, `tests/tracked/`, `serve_process.rs`): a plain
//! HTTP/1.1 client and the wait for a window to open. Each binary has its own one-session lock.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An answer: status and body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Send `request` (a whole request, head and all) and read the answer to the end.
pub fn raw(addr: SocketAddr, request: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).expect("connect to the endpoint");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(request).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read the answer");
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    Answer {
        status,
        head,
        body: all[end + 4..].to_vec(),
    }
}

/// `GET target`.
pub fn get(addr: SocketAddr, target: &str) -> Answer {
    raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// Wait until a window has taken its first snapshot (the index says so), for at most a
/// minute.
pub fn wait_for_open_window(addr: SocketAddr) {
    for _ in 0..6000 {
        if get(addr, "/debug/pprof/")
            .text()
            .contains("window: open since")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no window opened within a minute");
}

/// Whether `program` runs; if not, say so, and fail under CI.
pub fn available(program: &str, args: &[&str], package: &str) -> bool {
    let ok = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok();
    if !ok {
        let message = format!(
            "`{program}` is not installed (Debian package `{package}`): this test cannot check \
             the endpoint with the real client"
        );
        assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
        eprintln!("SKIPPED: {message}");
    }
    ok
}
