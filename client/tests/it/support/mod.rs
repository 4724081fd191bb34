//! What the client's tests share beyond the workspace's test support (the
//! `redis-lock-test-support` crate, which the module's tests use too):
//! clients on a test server, and a TCP proxy that cuts a connection right
//! after a chosen command reached the server.

#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis_lock_client::{
    blocking, Awaited, CountDownLatch, LockClient, LockError, LockGuard, Options,
    PermitExpirableSemaphore, Semaphore,
};
use redis_lock_test_support::{exists, Server};
use tokio::task::JoinHandle;

/// A client on `127.0.0.1:port` with `options`.
pub fn client_on(port: u16, options: Options) -> LockClient {
    let url = format!("redis://127.0.0.1:{port}/");
    LockClient::with_options(redis::Client::open(url).expect("a valid URL"), options)
        .expect("created inside a runtime")
}

/// A blocking client on `127.0.0.1:port` with `options`.
pub fn blocking_client_on(port: u16, options: Options) -> blocking::LockClient {
    let url = format!("redis://127.0.0.1:{port}/");
    blocking::LockClient::with_options(redis::Client::open(url).expect("a valid URL"), options)
        .expect("a blocking client")
}

/// A server of its own, and a client on it with `options`.
pub fn server_with_client(options: Options) -> (Server, LockClient) {
    let server = Server::start();
    let locks = client_on(server.port, options);
    (server, locks)
}

/// A server, a [`Proxy`] in front of it, and a client with default options
/// that talks through the proxy as `owner`.
pub fn through_proxy(owner: &str) -> (Server, Proxy, LockClient) {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let locks = client_on(proxy.port, Options::default()).as_owner(owner);
    (server, proxy, locks)
}

/// The armed cut: the command to look for, and how to cut.
type Trigger = Arc<Mutex<Option<(Vec<u8>, Cut)>>>;

/// A TCP proxy in front of a server. Once armed with [`Proxy::cut_after`],
/// the first client->server chunk containing the needle is forwarded, the
/// proxy waits until the server answered (so the command surely ran), and
/// then closes both sides without passing the reply on: the client sees its
/// connection die with the command's outcome unknown.
pub struct Proxy {
    pub port: u16,
    needle: Trigger,
    /// Set by [`Proxy::release`]: held bytes go on to the server.
    released: Arc<AtomicBool>,
    /// How many connections were cut or held.
    pub cuts: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let needle: Trigger = Arc::new(Mutex::new(None));
        let cuts = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let (n, c, s, r) = (needle.clone(), cuts.clone(), stop.clone(), released.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (n, c, r) = (n.clone(), c.clone(), r.clone());
                std::thread::spawn(move || pump(client, server, n, c, r));
            }
        });
        Proxy {
            port,
            needle,
            released,
            cuts,
            stop,
        }
    }

    /// Cuts the next connection that sends `command` (e.g. `LOCK.ACQUIRE`),
    /// once, after the server has answered it.
    pub fn cut_after(&self, command: &str) {
        *self.needle.lock().expect("proxy state") = Some((command.as_bytes().to_vec(), Cut::After));
    }

    /// From the next command `command` on that connection, forwards what
    /// the client sends but passes no reply back, keeping the connection
    /// open: the client waits for an answer the server already gave.
    pub fn swallow_after(&self, command: &str) {
        *self.needle.lock().expect("proxy state") =
            Some((command.as_bytes().to_vec(), Cut::Swallow));
    }

    /// From the next command `command` on, holds back everything that
    /// connection sends (the server sees nothing, the connection stays
    /// open, also after the client closed its end) until [`Proxy::release`]
    /// delivers it: a command delayed in the network.
    pub fn hold_from(&self, command: &str) {
        *self.needle.lock().expect("proxy state") = Some((command.as_bytes().to_vec(), Cut::Hold));
    }

    /// Delivers what [`Proxy::hold_from`] held back, then closes that
    /// connection if its client already has.
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    /// Cuts the next connection that sends `command` without forwarding it:
    /// the command never ran, though the client cannot tell.
    pub fn cut_before(&self, command: &str) {
        *self.needle.lock().expect("proxy state") =
            Some((command.as_bytes().to_vec(), Cut::Before));
    }
}

/// Whether the proxy forwards the command it cuts the connection on.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    After,
    Before,
    /// Forward it, then pass no reply on, but keep the connection open.
    Swallow,
    /// Forward nothing from it on until released.
    Hold,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Copies both ways; client->server chunks are checked for the needle.
fn pump(
    mut client: TcpStream,
    mut server: TcpStream,
    needle: Trigger,
    cuts: Arc<AtomicUsize>,
    released: Arc<AtomicBool>,
) {
    let (mut server_r, mut client_w) = match (server.try_clone(), client.try_clone()) {
        (Ok(s), Ok(c)) => (s, c),
        _ => return,
    };
    // server -> client, unless the connection is being cut.
    let cutting = Arc::new(AtomicBool::new(false));
    let swallowing = Arc::new(AtomicBool::new(false));
    let swallow2 = swallowing.clone();
    let replied = Arc::new(AtomicBool::new(false));
    let (cut2, replied2, cuts2) = (cutting.clone(), replied.clone(), cuts.clone());
    let back = std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            let n = match server_r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if swallow2.load(Ordering::SeqCst) {
                continue;
            }
            if cut2.load(Ordering::SeqCst) {
                // Counted before the client can see the cut.
                cuts2.fetch_add(1, Ordering::SeqCst);
                replied2.store(true, Ordering::SeqCst);
                break; // swallow the reply
            }
            if client_w.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = client_w.shutdown(Shutdown::Both);
    });
    let mut buf = [0u8; 16384];
    let mut held: Option<Vec<u8>> = None;
    loop {
        if held.is_some() && released.load(Ordering::SeqCst) {
            let bytes = held.take().unwrap_or_default();
            if server.write_all(&bytes).is_err() {
                break;
            }
            let _ = client.set_read_timeout(None);
        }
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) if held.is_some() => {
                // The client is gone (or a poll timed out): keep the
                // server's side open until the held bytes are released.
                if !released.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                continue;
            }
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(held) = held.as_mut() {
            held.extend_from_slice(chunk);
            continue;
        }
        let cut_now = {
            let mut armed = needle.lock().expect("proxy state");
            match armed.as_ref() {
                Some((cmd, how)) if contains(chunk, cmd) => {
                    let how = *how;
                    *armed = None;
                    Some(how)
                }
                _ => None,
            }
        };
        if cut_now == Some(Cut::Hold) {
            cuts.fetch_add(1, Ordering::SeqCst);
            held = Some(chunk.to_vec());
            // Poll, so a release is seen while the client sends nothing.
            let _ = client.set_read_timeout(Some(Duration::from_millis(5)));
            continue;
        }
        if cut_now == Some(Cut::Swallow) {
            swallowing.store(true, Ordering::SeqCst);
        }
        if cut_now == Some(Cut::Before) {
            cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if cut_now == Some(Cut::After) {
            cutting.store(true, Ordering::SeqCst);
            if server.write_all(chunk).is_err() {
                break;
            }
            // Wait (bounded) until the server's reply arrived: it ran.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !replied.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            break;
        }
        if server.write_all(chunk).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = back.join();
}

/// `waiter`'s `attempt` (a `try_` form, given its client and the wait)
/// finds the lock taken, at once; then it starts waiting, up to 10 s, in a
/// task of its own: that task.
pub async fn refused_then_waiting<G, F>(
    waiter: &LockClient,
    attempt: impl Fn(LockClient, Duration) -> F,
) -> JoinHandle<F::Output>
where
    F: Future<Output = Result<Option<G>, LockError>> + Send + 'static,
    G: Send + 'static,
{
    let now = attempt(waiter.clone(), Duration::ZERO).await;
    assert!(now.expect("try").is_none(), "the lock is taken");
    tokio::spawn(attempt(waiter.clone(), Duration::from_secs(10)))
}

/// Awaits a spawned wait that must be granted within `timeout`: the task
/// ended in time, and its wait answered without an error. The answer: a
/// guard (for a `try_` form, `Some` guard).
pub async fn granted_within<T, E: std::fmt::Debug>(
    timeout: Duration,
    waiting: JoinHandle<Result<T, E>>,
) -> T {
    tokio::time::timeout(timeout, waiting)
        .await
        .expect("granted in time")
        .expect("the waiting task ends")
        .expect("the wait answers without an error")
}

/// Awaits a spawned wait (`try_lock`, a MultiLock's `try_lock`) that must
/// end in a grant: the task ended, the wait answered without an error, and
/// it was granted. Its guard.
pub async fn handed_to<G, E: std::fmt::Debug>(waiting: JoinHandle<Result<Option<G>, E>>) -> G {
    waiting
        .await
        .expect("the waiting task ends")
        .expect("the wait answers without an error")
        .expect("the wait is granted")
}

/// Awaits `read` (a read of what a wait is blocked on, with its own
/// checks) and a lock and unlock of `elsewhere` on `locks`, and asserts
/// they took under a second: one check for the latch's and the semaphore's
/// "a wait does not stall the client's other commands".
pub async fn assert_not_stalled_by_a_wait(locks: &LockClient, read: impl Future<Output = ()>) {
    let started = Instant::now();
    read.await;
    let guard = locks.lock("elsewhere").await.expect("a lock meanwhile");
    guard.unlock().await.expect("unlock");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "commands waited {:?} behind the wait",
        started.elapsed()
    );
}

/// Awaits `future`: its output, and how long it took.
pub async fn timed<T>(future: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let output = future.await;
    (output, started.elapsed())
}

/// The answer of a `try_` form that must be a grant (`what` says why): its
/// guard.
pub async fn granted<G, E: std::fmt::Debug>(
    trying: impl Future<Output = Result<Option<G>, E>>,
    what: &str,
) -> G {
    trying.await.expect("try").expect(what)
}

/// The answer of a `try_` form that must be a refusal: still taken.
pub async fn refused<G, E: std::fmt::Debug>(trying: impl Future<Output = Result<Option<G>, E>>) {
    assert!(trying.await.expect("try").is_none(), "still taken");
}

/// Unlocks `guard`, the last hold of its lock: then the lock's key is gone
/// (`con`: a connection to the server that had it).
pub async fn unlock_last(guard: LockGuard, con: &mut redis::Connection) {
    let name = guard.name().to_string();
    guard.unlock().await.expect("unlock");
    assert!(!exists(con, &name), "{name} is free after its last hold");
}

/// The semaphore `name`, new: set to `permits`.
pub async fn new_semaphore(locks: &LockClient, name: &str, permits: u64) -> Semaphore {
    let semaphore = locks.semaphore(name);
    let set = semaphore.try_set_permits(permits, None).await;
    assert!(set.expect("set"), "{name} is new");
    semaphore
}

/// The permit-expirable semaphore `name`, new: set to `permits`.
pub async fn new_permits(locks: &LockClient, name: &str, permits: u64) -> PermitExpirableSemaphore {
    let semaphore = locks.permit_expirable_semaphore(name);
    let set = semaphore.try_set_permits(permits, None).await;
    assert!(set.expect("set"), "{name} is new");
    semaphore
}

/// `latch.await_zero(timeout)` in a task of its own: that task.
pub fn spawn_await_zero(
    latch: &CountDownLatch,
    timeout: Option<Duration>,
) -> JoinHandle<Result<Awaited, LockError>> {
    let latch = latch.clone();
    tokio::spawn(async move { latch.await_zero(timeout).await })
}

/// The count-down latch `name`, new: set to `count`.
pub async fn new_latch(locks: &LockClient, name: &str, count: u64) -> CountDownLatch {
    let latch = locks.count_down_latch(name);
    assert!(
        latch.try_set_count(count, None).await.expect("set"),
        "{name} is new"
    );
    latch
}
