//! The chaos test's workers: each finds the master through Sentinel, takes
//! a lock with a token, writes to the resource through one fenced script,
//! releases, and records everything it saw for the checker.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};

/// What a run's workers do.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub workers: usize,
    pub locks: usize,
    pub lease_ms: i64,
    pub wait_ms: i64,
    /// `SYNC 1 <ms>` on every acquire.
    pub sync_ms: Option<i64>,
    /// The script checks `LOCK.FENCE` before writing (false: the control).
    pub fenced: bool,
}

pub fn lock_name(lock: usize) -> String {
    format!("chaos-L{lock}")
}

pub fn fence_key(lock: usize) -> String {
    format!("fence:{{chaos-L{lock}}}")
}

pub fn history_key(lock: usize) -> String {
    format!("history:{{chaos-L{lock}}}")
}

/// The write: fence first (its STALE error stops the script), then record.
const FENCED_WRITE: &str = "redis.call('LOCK.FENCE', KEYS[1], ARGV[1]) \
                            return redis.call('RPUSH', KEYS[2], ARGV[2])";
/// The control's write: the same without the fence.
const UNFENCED_WRITE: &str = "return redis.call('RPUSH', KEYS[2], ARGV[2])";

/// One write's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Accepted,
    /// `STALE ...` from `LOCK.FENCE`.
    Refused,
    Error(String),
}

/// One acknowledged grant: `LOCK.ACQUIRE` answered `[-1, token]`.
#[derive(Clone, Debug)]
pub struct Grant {
    pub lock: usize,
    /// Unique per grant: `w<worker>-<attempt>`.
    pub owner: String,
    pub token: i64,
    /// The node that granted it.
    pub port: u16,
    /// Client clock (unix µs) before sending the acquire, after its reply.
    pub sent_us: i64,
    pub acked_us: i64,
    pub lease_ms: i64,
    pub writes: Vec<Write>,
    /// When the holder sent `LOCK.RELEASE` (it stopped relying on the lock
    /// then), and the answer: `1`, `nil`, or an error.
    pub release_sent_us: Option<i64>,
    pub release_reply: String,
    /// The worker was stalled past its lease before writing (the nemesis).
    pub stalled: bool,
}

/// One worker's history.
#[derive(Default, Debug)]
pub struct History {
    pub grants: Vec<Grant>,
    pub attempts: usize,
    /// Acquires answered "busy" (the wait timed out).
    pub busy: usize,
    /// Errors by kind: `READONLY`, `NOSYNC`, `io` (connection refused,
    /// reset, timeout), `no-master` (Sentinel did not answer)...
    pub errors: BTreeMap<String, usize>,
}

impl History {
    fn error(&mut self, kind: &str) {
        *self.errors.entry(kind.to_string()).or_default() += 1;
    }
}

/// What the workers and the nemesis share.
pub struct Shared {
    pub stop: AtomicBool,
    /// A worker the nemesis asks to stall past its lease after its next
    /// grant (-1: none); the worker takes it back to -1.
    pub stall: AtomicI64,
    /// Stalls the nemesis asked for, and stalls done: the run lets the
    /// workers run until they are equal.
    pub stalls_asked: AtomicI64,
    pub stalls_done: AtomicI64,
    pub sentinel_ports: Vec<u16>,
    pub resource_port: u16,
    pub config: WorkerConfig,
}

/// The client clock in unix µs: grants a few µs apart must be ordered.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

fn connect(port: u16, read_timeout: Duration) -> redis::RedisResult<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_millis(500))?;
    con.set_read_timeout(Some(read_timeout))?;
    con.set_write_timeout(Some(read_timeout))?;
    Ok(con)
}

/// An error's kind for the history: the server's code, or `io`.
fn kind(e: &redis::RedisError) -> String {
    match e.code() {
        Some(code) => code.to_string(),
        None => "io".to_string(),
    }
}

/// The highest token the resource accepted for `lock` (0: none yet).
fn resource_top(resource: &mut Connection, lock: usize) -> i64 {
    redis::cmd("GET")
        .arg(fence_key(lock))
        .query::<Option<i64>>(resource)
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// The highest token in the resource's history of `lock` (the fence key is
/// not written in the control run, so read the list's last entry).
fn history_top(resource: &mut Connection, lock: usize) -> i64 {
    let last: Option<String> = redis::cmd("LINDEX")
        .arg(history_key(lock))
        .arg(-1)
        .query(resource)
        .ok()
        .flatten();
    let from_list = last
        .and_then(|e| e.split(':').next().and_then(|t| t.parse().ok()))
        .unwrap_or(0);
    from_list.max(resource_top(resource, lock))
}

pub fn run(index: usize, seed: u64, shared: Arc<Shared>) -> History {
    let cfg = &shared.config;
    let mut rng = StdRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9));
    let mut history = History::default();
    // Long enough that a command sent to a master that is then stopped
    // (until Sentinel promoted a replica) is answered when it resumes: a
    // client with a stale view of who the master is, the split brain.
    let read_timeout = Duration::from_secs(10);
    let mut master: Option<(u16, Connection)> = None;
    let mut sentinel: Option<Connection> = None;
    let mut sentinel_next = index;
    let mut resource = connect(shared.resource_port, Duration::from_secs(10))
        .expect("the resource server never fails");

    while !shared.stop.load(Ordering::Relaxed) {
        history.attempts += 1;
        let attempt = history.attempts;

        // The master, per Sentinel. Even workers ask before every acquire;
        // odd ones keep using the master they found until it answers an
        // error (as clients that cache it do), so they keep talking to an
        // old master that resumed after a failover until it is demoted.
        let caching = index % 2 == 1;
        if !(caching && master.is_some()) {
            if sentinel.is_none() {
                let port = shared.sentinel_ports[sentinel_next % shared.sentinel_ports.len()];
                sentinel_next += 1;
                sentinel = connect(port, Duration::from_secs(2)).ok();
            }
            let addr: Option<(String, u16)> = match sentinel.as_mut().map(|s| {
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(super::cluster::MASTER_NAME)
                    .query(s)
            }) {
                Some(Ok(addr)) => addr,
                _ => {
                    sentinel = None;
                    None
                }
            };
            let Some((_, port)) = addr else {
                history.error("no-master");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            if master.as_ref().map(|(p, _)| *p) != Some(port) {
                master = match connect(port, read_timeout) {
                    Ok(con) => Some((port, con)),
                    Err(e) => {
                        history.error(&kind(&e));
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
            }
        }
        let port = master.as_ref().expect("connected").0;
        let con = &mut master.as_mut().expect("connected").1;

        let lock = rng.gen_range(0..cfg.locks);
        let owner = format!("w{index}-{attempt}");
        let mut cmd = redis::cmd("LOCK.ACQUIRE");
        cmd.arg(lock_name(lock))
            .arg(&owner)
            .arg(cfg.lease_ms)
            .arg("WAIT")
            .arg(cfg.wait_ms)
            .arg("TOKEN");
        if let Some(sync_ms) = cfg.sync_ms {
            cmd.arg("SYNC").arg(1).arg(sync_ms);
        }
        let sent_us = now_us();
        let reply: redis::RedisResult<(i64, i64)> = cmd.query(con);
        let acked_us = now_us();
        let token = match reply {
            Ok((-1, token)) => token,
            Ok(_) => {
                history.busy += 1;
                continue;
            }
            Err(e) => {
                history.error(&kind(&e));
                if e.code().is_none() || caching {
                    master = None;
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };

        let mut grant = Grant {
            lock,
            owner: owner.clone(),
            token,
            port,
            sent_us,
            acked_us,
            lease_ms: cfg.lease_ms,
            writes: Vec::new(),
            release_sent_us: None,
            release_reply: String::new(),
            stalled: false,
        };

        // The nemesis's stall: as if this process were paused past its
        // lease (GC, swap) until someone else wrote with a newer token.
        if shared
            .stall
            .compare_exchange(index as i64, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            grant.stalled = true;
            let lease_end = sent_us + cfg.lease_ms * 1000;
            std::thread::sleep(Duration::from_micros((lease_end - now_us()).max(0) as u64));
            std::thread::sleep(Duration::from_millis(100));
            let give_up = Instant::now() + Duration::from_secs(20);
            while history_top(&mut resource, lock) <= token && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(20));
            }
            shared.stalls_done.fetch_add(1, Ordering::SeqCst);
        }

        let script = if cfg.fenced {
            FENCED_WRITE
        } else {
            UNFENCED_WRITE
        };
        for _ in 0..rng.gen_range(1..=2) {
            let entry = format!("{token}:w{index}:{attempt}");
            let result: redis::RedisResult<Value> = redis::cmd("EVAL")
                .arg(script)
                .arg(2)
                .arg(fence_key(lock))
                .arg(history_key(lock))
                .arg(token)
                .arg(&entry)
                .query(&mut resource);
            grant.writes.push(match result {
                Ok(_) => Write::Accepted,
                Err(e) if format!("{e}").contains("STALE") => Write::Refused,
                Err(e) => Write::Error(format!("{e}")),
            });
        }
        // Most holds are short; some last a good part of the lease, so that
        // failovers happen while holders count on their grants (check 3).
        if rng.gen_bool(0.05) {
            std::thread::sleep(Duration::from_millis(rng.gen_range(50..800)));
        } else if rng.gen_bool(0.3) {
            std::thread::sleep(Duration::from_millis(rng.gen_range(1..20)));
        }

        grant.release_sent_us = Some(now_us());
        let released: redis::RedisResult<Option<i64>> = redis::cmd("LOCK.RELEASE")
            .arg(lock_name(lock))
            .arg(&owner)
            .query(con);
        grant.release_reply = match released {
            Ok(Some(n)) => n.to_string(),
            Ok(None) => "nil".to_string(),
            Err(e) => {
                if e.code().is_none() || caching {
                    master = None;
                }
                format!("error {}", kind(&e))
            }
        };
        history.grants.push(grant);
    }
    history
}
