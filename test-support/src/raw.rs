//! A raw RESP2 client over TCP, for what a library client hides: a command
//! that blocks (read its reply later), pub/sub pushes, and real disconnects;
//! and waiters (`LOCK.ACQUIRE ... WAIT`) queued from raw clients.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use crate::commands::run;
use crate::lock::waiter_owners;
use crate::server::{Server, IO_TIMEOUT};
use crate::timing::{now_ms, poll_until};

/// A RESP2 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Nil,
    Int(i64),
    Text(Vec<u8>),
    Error(String),
    Array(Vec<Resp>),
}

impl Resp {
    pub fn is_nil(&self) -> bool {
        matches!(self, Resp::Nil)
    }

    /// The text of a string reply (lossy); panics on anything else.
    pub fn text(&self) -> String {
        match self {
            Resp::Text(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("expected a string reply, got {other:?}"),
        }
    }

    pub fn array(self) -> Vec<Resp> {
        match self {
            Resp::Array(items) => items,
            other => panic!("expected an array reply, got {other:?}"),
        }
    }
}

pub struct RawClient {
    reader: BufReader<TcpStream>,
}

impl RawClient {
    pub fn connect(port: u16) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("raw client connects");
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("read timeout");
        RawClient {
            reader: BufReader::new(stream),
        }
    }

    /// Sends one command without waiting for its reply.
    pub fn send(&mut self, args: &[&str]) {
        self.send_many(1, args);
    }

    /// Sends the same command `times` times in one write (a pipeline).
    pub fn send_many(&mut self, times: usize, args: &[&str]) {
        let mut wire = format!("*{}\r\n", args.len());
        for arg in args {
            wire.push_str(&format!("${}\r\n{}\r\n", arg.len(), arg));
        }
        self.reader
            .get_mut()
            .write_all(wire.repeat(times).as_bytes())
            .expect("raw client sends");
    }

    /// Sends several commands in one write (a pipeline the server reads at once).
    pub fn send_pipeline(&mut self, commands: &[&[&str]]) {
        let mut wire = String::new();
        for args in commands {
            wire.push_str(&format!("*{}\r\n", args.len()));
            for arg in *args {
                wire.push_str(&format!("${}\r\n{}\r\n", arg.len(), arg));
            }
        }
        self.reader
            .get_mut()
            .write_all(wire.as_bytes())
            .expect("raw client sends");
    }

    /// Reads the next reply or push message.
    pub fn read(&mut self) -> Resp {
        self.try_read().expect("raw client reads a reply")
    }

    /// The next reply, or `None` when the server closed the connection (or
    /// nothing came within the read timeout).
    pub fn try_read(&mut self) -> Option<Resp> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1.min(line.len()));
        let number = || {
            rest.parse::<i64>()
                .unwrap_or_else(|_| panic!("bad RESP line {line:?}"))
        };
        Some(match kind {
            "+" => Resp::Text(rest.as_bytes().to_vec()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(number()),
            "_" => Resp::Nil,
            "$" if number() < 0 => Resp::Nil,
            "$" => {
                let mut bytes = vec![0; number() as usize + 2];
                self.reader
                    .read_exact(&mut bytes)
                    .expect("bulk string body");
                bytes.truncate(bytes.len() - 2);
                Resp::Text(bytes)
            }
            "*" if number() < 0 => Resp::Nil,
            "*" => Resp::Array((0..number()).map(|_| self.read()).collect()),
            _ => panic!("unexpected RESP line {line:?}"),
        })
    }

    /// True if nothing arrives within `wait`.
    pub fn nothing_within(&mut self, wait: Duration) -> bool {
        let stream = self.reader.get_ref();
        stream.set_read_timeout(Some(wait)).expect("short timeout");
        let quiet =
            self.reader.buffer().is_empty() && matches!(self.reader.fill_buf(), Err(_) | Ok([]));
        self.reader
            .get_ref()
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("restore timeout");
        quiet
    }

    /// Closes the connection (the server sees a disconnect).
    pub fn disconnect(self) {
        let _ = self.reader.get_ref().shutdown(Shutdown::Both);
    }
}

// ---------------------------------------------------------------------------
// Waiting (LOCK.ACQUIRE ... WAIT) from raw clients
// ---------------------------------------------------------------------------

/// Sends `LOCK.ACQUIRE key owner lease WAIT timeout` and returns once the
/// server shows the client queued (so the next waiter queues behind it).
pub fn queue(server: &Server, key: &str, owner: &str, lease_ms: u64, timeout_ms: u64) -> RawClient {
    queue_with(server, key, owner, lease_ms, timeout_ms, &[])
}

/// [`queue`] with more options after `WAIT timeout` (`TOKEN`).
pub fn queue_with(
    server: &Server,
    key: &str,
    owner: &str,
    lease_ms: u64,
    timeout_ms: u64,
    options: &[&str],
) -> RawClient {
    let before = waiter_owners(server, key).len();
    let mut waiter = RawClient::connect(server.port);
    let (lease, timeout) = (lease_ms.to_string(), timeout_ms.to_string());
    let mut command = vec!["LOCK.ACQUIRE", key, owner, &lease, "WAIT", &timeout];
    command.extend_from_slice(options);
    waiter.send(&command);
    poll_until(Duration::from_secs(5), "the waiter is queued", || {
        waiter_owners(server, key).len() > before
    });
    waiter
}

/// Waits that time out, many at once: one raw client (and thread) per
/// `(key, owner)` of `waiters`, each sending `times` waits of 1 ms
/// (`LOCK.ACQUIRE key owner 1000 WAIT 1`, pipelined) on a lock someone
/// else holds; every one must time out (answer the lease left). Returns
/// once all are answered.
pub fn waits_that_time_out(server: &Server, waiters: Vec<(String, String)>, times: usize) {
    let threads: Vec<_> = waiters
        .into_iter()
        .map(|(key, owner)| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut client = RawClient::connect(port);
                client.send_many(times, &["LOCK.ACQUIRE", &key, &owner, "1000", "WAIT", "1"]);
                for _ in 0..times {
                    let reply = client.read();
                    assert!(
                        matches!(reply, Resp::Int(_)),
                        "each wait times out with the lease: {reply:?}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("waiting client");
    }
}

/// A waiter's reply and the unix-ms time it arrived.
pub fn reply_at(waiter: &mut RawClient) -> (Resp, i64) {
    let reply = waiter.read();
    (reply, now_ms())
}

/// Pauses the server's writes (`CLIENT PAUSE 20000 WRITE`, from a
/// connection of its own), sleeps `wait`, asserts that `waiter` heard
/// nothing meanwhile, runs `while_paused` (the test's own checks during the
/// pause) and unpauses; returns the unix-ms time just before the unpause.
/// One helper for the tests that a timer ending during a write pause acts
/// only after it (latches, semaphores, read-write locks).
pub fn while_writes_paused(
    server: &Server,
    wait: Duration,
    waiter: &mut RawClient,
    while_paused: impl FnOnce(),
) -> i64 {
    let mut admin = server.connection();
    run(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    std::thread::sleep(wait);
    assert!(
        waiter.nothing_within(Duration::from_millis(10)),
        "nothing during the pause"
    );
    while_paused();
    let unpaused_at = now_ms();
    run(&mut admin, &["CLIENT", "UNPAUSE"]);
    unpaused_at
}
