//! Test harness: real `redis-server` processes on free loopback ports, each in
//! its own temporary directory, with the lock module loaded, and the one copy
//! of the helpers every test file shares.
//!
//! * server binary: `$REDIS_SERVER`, else `redis-server` from `PATH`;
//! * module: built from the current sources by the tests themselves, or
//!   `$LOCK_MODULE_PATH`, refused when older than the sources (see
//!   [`module`]).
//!
//! Every test starts its own servers, so tests run in parallel; a server is
//! killed and its directory removed when its [`Server`] is dropped.
//!
//! Helpers take keys and owners as anything the `redis` crate can send
//! (`"L"`, `b"k\x00"`, `&String`, `&[u8]`...) and any connection
//! (`redis::Connection`, a cluster connection).

#![allow(dead_code)]

pub mod module;
pub mod raw;
pub mod redisson;
pub mod sentinel;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, ConnectionLike, RedisError, RedisResult, ToRedisArgs, Value};

pub use module::module_path;
use raw::{RawClient, Resp};

/// How long a server may take to answer PING, a replica to link up, etc.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// Read timeout of every connection: a hung server fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Locations
// ---------------------------------------------------------------------------

/// The server binary: `$REDIS_SERVER` or `redis-server`.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

// ---------------------------------------------------------------------------
// Temporary directories
// ---------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop.
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "redis-lock-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create test dir {}: {e}", path.display()));
        TestDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

// ---------------------------------------------------------------------------
// Server options
// ---------------------------------------------------------------------------

/// How to start a server. `Options::new()` = module loaded, no persistence.
#[derive(Clone, Debug)]
pub struct Options {
    module: bool,
    module_args: Vec<String>,
    args: Vec<(String, Vec<String>)>,
    aof: bool,
    dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            module: true,
            module_args: Vec::new(),
            args: Vec::new(),
            aof: false,
            dir: None,
        }
    }
}

impl Options {
    pub fn new() -> Options {
        Options::default()
    }

    /// A plain server (e.g. a replica without the module).
    pub fn without_module(mut self) -> Options {
        self.module = false;
        self
    }

    /// Arguments after the module path on the `loadmodule` line.
    pub fn module_args(mut self, args: &[&str]) -> Options {
        self.module_args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    /// An extra `--name value...` config.
    pub fn config(mut self, name: &str, values: &[&str]) -> Options {
        self.args.push((
            name.to_string(),
            values.iter().map(|s| s.to_string()).collect(),
        ));
        self
    }

    /// `--appendonly yes --appendfsync always`.
    pub fn aof(mut self) -> Options {
        self.aof = true;
        self
    }

    /// Use (and do not remove) this directory: for restarts on the same data.
    pub fn dir(mut self, dir: &Path) -> Options {
        self.dir = Some(dir.to_path_buf());
        self
    }
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// A running `redis-server`; killed (and its own temp dir removed) on drop.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    _owned_dir: Option<TestDir>,
    options: Options,
}

/// A loopback port nobody listened on a moment ago (a server's, a cluster bus's).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener
        .local_addr()
        .expect("local address of the port probe")
        .port()
}

enum StartError {
    /// Worth retrying on another port (bind failure, someone else's server).
    Retry(String),
    /// Startup failed for a reason a new port will not fix.
    Fatal(String),
}

impl Server {
    /// A server with the module loaded and default options.
    pub fn start() -> Server {
        Server::with(Options::new())
    }

    pub fn with(options: Options) -> Server {
        let (owned, dir) = match &options.dir {
            Some(dir) => (None, dir.clone()),
            None => {
                let owned = TestDir::new("srv");
                let dir = owned.path().to_path_buf();
                (Some(owned), dir)
            }
        };
        let module = options.module.then(module_path);
        let mut last_error = String::new();
        for _attempt in 0..8 {
            let port = free_port();
            match Server::spawn(&options, module.as_deref(), &dir, port) {
                Ok(child) => {
                    return Server {
                        child: Some(child),
                        port,
                        dir,
                        _owned_dir: owned,
                        options,
                    };
                }
                Err(StartError::Retry(why)) => last_error = why,
                Err(StartError::Fatal(why)) => panic!("{why}"),
            }
        }
        panic!(
            "could not start {} after several ports: {last_error}",
            server_binary()
        );
    }

    fn spawn(
        options: &Options,
        module: Option<&Path>,
        dir: &Path,
        port: u16,
    ) -> Result<Child, StartError> {
        let log = dir.join("redis.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = server_command(options, module, dir, port);
        let mut child = cmd.spawn().map_err(|e| {
            StartError::Fatal(format!(
                "cannot run `{}` ({e}); set REDIS_SERVER",
                server_binary()
            ))
        })?;
        let pid = child.id();

        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log_text = std::fs::read_to_string(&log).unwrap_or_default();
                let why = format!(
                    "{} exited at startup ({status}) on port {port}; log:\n{log_text}",
                    server_binary()
                );
                return if log_text.contains("in use")
                    || log_text.contains("Could not create server TCP")
                {
                    Err(StartError::Retry(why))
                } else {
                    Err(StartError::Fatal(why))
                };
            }
            // No connection or no PONG yet: not listening, or LOADING.
            if let Ok(mut con) = connect(port, false) {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    // Make sure the server answering is ours, not a neighbour
                    // test's that won the race for this port.
                    let info: String = redis::cmd("INFO")
                        .arg("server")
                        .query(&mut con)
                        .unwrap_or_default();
                    if info_field(&info, "process_id") == Some(pid.to_string()) {
                        return Ok(child);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(StartError::Retry(format!(
                        "port {port} answered by another server"
                    )));
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log_text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(StartError::Fatal(format!(
                    "{} did not answer PING within {STARTUP_TIMEOUT:?} on port {port}; log:\n{log_text}",
                    server_binary()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A RESP2 connection with read/write timeouts.
    pub fn connection(&self) -> Connection {
        connect(self.port, false)
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{}: {e}", self.port))
    }

    /// A RESP2 connection to database `db`.
    pub fn connection_db(&self, db: i64) -> Connection {
        let mut con = self.connection();
        let _: () = redis::cmd("SELECT")
            .arg(db)
            .query(&mut con)
            .expect("SELECT");
        con
    }

    /// A RESP3 connection (HELLO 3 sent by the client library).
    pub fn resp3_connection(&self) -> Connection {
        connect(self.port, true)
            .unwrap_or_else(|e| panic!("RESP3 connect to 127.0.0.1:{}: {e}", self.port))
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// One `INFO <section>` field.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.connection())
            .expect("INFO");
        info_field(&text, field)
    }

    /// The `lock_stats` INFO section as field -> value (fields keep their
    /// `lock_` prefix, e.g. `lock_acquired`).
    pub fn lock_stats(&self) -> HashMap<String, u64> {
        let text: String = redis::cmd("INFO")
            .arg("lock_stats")
            .query(&mut self.connection())
            .expect("INFO lock_stats");
        text.lines()
            .filter_map(|line| line.split_once(':'))
            .filter_map(|(k, v)| {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .map(|v| (k.trim().to_string(), v))
            })
            .collect()
    }

    /// `INFO commandstats` as command name (lower case, e.g. `lock.acquire`) -> calls.
    pub fn command_stats(&self) -> HashMap<String, u64> {
        let text: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .expect("INFO commandstats");
        text.lines()
            .filter_map(|line| line.strip_prefix("cmdstat_"))
            .filter_map(|line| line.split_once(':'))
            .map(|(name, rest)| {
                let calls = rest
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("calls="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                (name.to_ascii_lowercase(), calls)
            })
            .collect()
    }

    /// Makes this server a replica of `master` and waits until the link is up
    /// and the initial sync is done.
    pub fn replicaof(&self, master: &Server) {
        let mut con = self.connection();
        let _: Value = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(master.port)
            .query(&mut con)
            .expect("REPLICAOF");
        poll_until(STARTUP_TIMEOUT, "replica link up", || {
            let text: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut con)
                .expect("INFO replication");
            info_field(&text, "master_link_status").as_deref() == Some("up")
                && info_field(&text, "master_sync_in_progress").as_deref() != Some("1")
        });
        wait_for_replicas(master, &[self]);
    }

    /// SIGKILL, keeping the directory: a crash.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .expect("the server was not crashed")
            .id()
    }

    /// Sends a signal (`STOP`, `CONT`, `TERM`...) to the server process.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {}", self.pid());
    }

    /// Waits up to `timeout` for the process to exit on its own; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!(
                "---- redis-server on port {} ({:?}) log tail ----\n{}\n----",
                self.port,
                self.options,
                tail.join("\n")
            );
        }
        self.crash();
    }
}

/// The command line of every server the tests start: `port` on loopback
/// (0: none), logging to `dir`/redis.log, no snapshots, then `options`.
fn server_command(options: &Options, module: Option<&Path>, dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new(server_binary());
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .arg("--daemonize")
        .arg("no")
        .arg("--save")
        .arg("")
        .arg("--repl-diskless-sync-delay")
        .arg("0");
    if options.aof {
        cmd.arg("--appendonly")
            .arg("yes")
            .arg("--appendfsync")
            .arg("always");
    } else {
        cmd.arg("--appendonly").arg("no");
    }
    if let Some(module) = module {
        cmd.arg("--loadmodule")
            .arg(module)
            .args(&options.module_args);
    }
    for (name, values) in &options.args {
        cmd.arg(format!("--{name}")).args(values);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Starts a server with `options` that must refuse to start: it must exit at
/// startup with a failure status. Returns its log.
///
/// It listens on a unix socket in its own directory and on no TCP port
/// (`--port 0`), so no neighbour test can race it for a port; a server that
/// wrongly started is recognised by its "ready to accept connections" log line.
pub fn startup_refused(options: Options) -> String {
    let owned = TestDir::new("refused");
    let dir = options.dir.as_deref().unwrap_or(owned.path());
    let log_path = dir.join("redis.log");
    let _ = std::fs::remove_file(&log_path);
    let module = options.module.then(module_path);
    let mut child = server_command(&options, module.as_deref(), dir, 0)
        .arg("--unixsocket")
        .arg(dir.join("redis.sock"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", server_binary()));
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Ok(Some(status)) = child.try_wait() {
            assert!(
                !status.success(),
                "{options:?}: the server exited with {status}; log:\n{log}"
            );
            return std::fs::read_to_string(&log_path).unwrap_or_default();
        }
        let started = log
            .to_ascii_lowercase()
            .contains("ready to accept connections");
        if started || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{options:?}: the server did not refuse to start; log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn connect(port: u16, resp3: bool) -> RedisResult<Connection> {
    let url = if resp3 {
        format!("redis://127.0.0.1:{port}/?protocol=resp3")
    } else {
        format!("redis://127.0.0.1:{port}/")
    };
    let client = redis::Client::open(url)?;
    let con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// `field:value` out of an INFO text.
pub fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim().to_string())
    })
}

/// The replication offset a server reports (its own on a master, the
/// processed one on a replica).
pub fn repl_offset(server: &Server) -> i64 {
    server
        .info("replication", "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("master_repl_offset in INFO replication")
}

/// Waits until every replica has processed everything the master wrote so far.
pub fn wait_for_replicas(master: &Server, replicas: &[&Server]) {
    let target = repl_offset(master);
    let acked: i64 = redis::cmd("WAIT")
        .arg(replicas.len())
        .arg(5000)
        .query(&mut master.connection())
        .expect("WAIT on the master");
    assert!(
        acked >= replicas.len() as i64,
        "only {acked} of {} replicas acknowledged the writes",
        replicas.len()
    );
    for replica in replicas {
        poll_until(
            STARTUP_TIMEOUT,
            "replica caught up with the master offset",
            || repl_offset(replica) >= target,
        );
    }
}

// ---------------------------------------------------------------------------
// Polling and time
// ---------------------------------------------------------------------------

/// Calls `check` every few ms until it is true; panics naming `what` after `timeout`.
pub fn poll_until(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------
// Replies and errors
// ---------------------------------------------------------------------------

/// An error as the server sent it: `CODE detail`.
pub fn err_text(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => format!("<not a server error: {e}>"),
    }
}

/// Asserts `result` is a server error starting with `prefix` and containing
/// `needle`; returns the error text.
pub fn expect_err<T: std::fmt::Debug>(
    result: RedisResult<T>,
    prefix: &str,
    needle: &str,
    what: &str,
) -> String {
    match result {
        Ok(v) => panic!("{what}: expected an error `{prefix} ...{needle}...`, got reply {v:?}"),
        Err(e) => {
            let text = err_text(&e);
            assert!(
                text.starts_with(prefix),
                "{what}: error should start with {prefix:?}: {text:?}"
            );
            assert!(
                text.contains(needle),
                "{what}: error should mention {needle:?}: {text:?}"
            );
            text
        }
    }
}

/// Bytes of a bulk/simple string reply.
pub fn as_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes().to_vec()),
        _ => None,
    }
}

pub fn as_string(v: &Value) -> Option<String> {
    as_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The pairs of a map reply: a RESP3 map or a RESP2 flat key/value array.
pub fn map_pairs(v: &Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(pairs) => pairs.clone(),
        Value::Array(items) => {
            assert!(
                items.len() % 2 == 0,
                "a flat map must have an even length: {v:?}"
            );
            items
                .chunks(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect()
        }
        other => panic!("expected a map or flat array, got {other:?}"),
    }
}

/// `LOCK.INFO`, decoded from either protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct LockInfo {
    pub state: String,
    /// owner -> count reply (Int normally; bulk bytes for a foreign value).
    pub owners: Vec<(Vec<u8>, Value)>,
    pub ttl_ms: i64,
    pub deadline_ms: i64,
    pub waiters: Vec<Value>,
    /// The last fencing token (`None`: nil).
    pub token: Option<i64>,
}

impl LockInfo {
    pub fn parse(v: &Value) -> LockInfo {
        let pairs = map_pairs(v);
        let fields: Vec<String> = pairs
            .iter()
            .map(|(k, _)| as_string(k).expect("LOCK.INFO field name"))
            .collect();
        assert_eq!(
            fields,
            [
                "state",
                "owners",
                "ttl_ms",
                "deadline_ms",
                "waiters",
                "token"
            ],
            "LOCK.INFO fields: {v:?}"
        );
        let get = |name: &str| {
            &pairs[fields
                .iter()
                .position(|f| f == name)
                .expect("field present")]
            .1
        };
        let int = |name: &str| match get(name) {
            Value::Int(i) => *i,
            other => panic!("LOCK.INFO {name} should be an integer: {other:?}"),
        };
        LockInfo {
            state: as_string(get("state")).expect("state is a string"),
            owners: map_pairs(get("owners"))
                .into_iter()
                .map(|(k, v)| (as_bytes(&k).expect("owner id is a string"), v))
                .collect(),
            ttl_ms: int("ttl_ms"),
            deadline_ms: int("deadline_ms"),
            waiters: match get("waiters") {
                Value::Array(w) | Value::Set(w) => w.clone(),
                other => panic!("LOCK.INFO waiters should be an array: {other:?}"),
            },
            token: match get("token") {
                Value::Nil => None,
                Value::Int(token) => Some(*token),
                other => panic!("LOCK.INFO token should be an integer or nil: {other:?}"),
            },
        }
    }

    /// Field `name` (`owner`, `waited_ms`, `timeout_ms`...) of the `i`th waiter.
    pub fn waiter_field(&self, i: usize, name: &str) -> Value {
        map_pairs(&self.waiters[i])
            .into_iter()
            .find(|(k, _)| as_string(k).as_deref() == Some(name))
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("waiter {i} has no {name}: {:?}", self.waiters[i]))
    }

    pub fn count_of(&self, owner: &[u8]) -> Option<i64> {
        self.owners
            .iter()
            .find(|(o, _)| o == owner)
            .map(|(_, v)| match v {
                Value::Int(i) => *i,
                other => panic!(
                    "count of {:?} is not an integer: {other:?}",
                    String::from_utf8_lossy(owner)
                ),
            })
    }
}

// ---------------------------------------------------------------------------
// Commands, typed
// ---------------------------------------------------------------------------

/// A command from its name and arguments in one list: `&["SET", "k", "v"]`,
/// `&[b"LOCK.INFO", key]`, `&args` of a `Vec<Vec<u8>>`...
pub fn command(args: impl ToRedisArgs) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    cmd.arg(args);
    cmd
}

/// Runs `args` (name first); a server error fails the test, naming the command.
pub fn run(con: &mut impl ConnectionLike, args: &[&str]) -> Value {
    command(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// Runs `cmd` and decodes its reply; an error fails the test, naming the command.
fn query<T: redis::FromRedisValue>(con: &mut impl ConnectionLike, cmd: &redis::Cmd) -> T {
    cmd.query(con).unwrap_or_else(|e| {
        let line = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
                redis::Arg::Cursor => "<cursor>".to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        panic!("{line}: {e}")
    })
}

/// `cmd` with `name` and one `arg`: most helpers below are one of these.
fn cmd1(name: &str, arg: impl ToRedisArgs) -> redis::Cmd {
    let mut cmd = redis::cmd(name);
    cmd.arg(arg);
    cmd
}

pub fn lock_info(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> LockInfo {
    LockInfo::parse(&query(con, &cmd1("LOCK.INFO", key)))
}

/// The hash of a lock as sorted (field, value) pairs.
pub fn hgetall(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> Vec<(Vec<u8>, Vec<u8>)> {
    sorted_pairs(con, key)
}

/// The hash of a lock as sorted (owner, count) text pairs: what [`owned_by`]
/// builds.
pub fn holders(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> Vec<(String, String)> {
    sorted_pairs(con, key)
}

fn sorted_pairs<T: redis::FromRedisValue + Ord>(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
) -> Vec<(T, T)> {
    let mut pairs: Vec<(T, T)> = query(con, &cmd1("HGETALL", key));
    pairs.sort();
    pairs
}

/// What [`holders`] answers for a lock `owner` holds once.
pub fn owned_by(owner: &str) -> Vec<(String, String)> {
    vec![(owner.to_string(), "1".to_string())]
}

pub fn holder_is(con: &mut impl ConnectionLike, key: impl ToRedisArgs, owner: &str) -> bool {
    holders(con, key) == owned_by(owner)
}

pub fn pttl(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("PTTL", key))
}

pub fn pexpiretime(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("PEXPIRETIME", key))
}

/// Runs the rest of a test alone among the tests of its binary that also
/// call this: the timing-sensitive ones (a hand-off within 20 ms of a
/// deadline) and the CPU-heavy ones (dozens of client threads). On a 2-core
/// machine a heavy neighbour starves the measured server of CPU for tens of
/// ms, which is the machine's doing, not the module's. Other tests still
/// run in parallel; test binaries run one after another anyway.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many ms after `deadline` the server handed `key` on to a waiter that
/// asked for `lease_ms`, by the server's own clock: a hand-off sets the new
/// holder's deadline to the moment it happened plus its lease. (When the
/// waiter's reply is read also counts this test process's own scheduling,
/// tens of ms on a loaded 2-core machine.)
pub fn handed_on_after(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    lease_ms: i64,
    deadline: i64,
) -> i64 {
    pexpiretime(con, key) - lease_ms - deadline
}

pub fn exists(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> bool {
    query::<i64>(con, &cmd1("EXISTS", key)) == 1
}

/// Server time in unix ms.
pub fn server_now_ms(con: &mut impl ConnectionLike) -> i64 {
    let (secs, micros): (i64, i64) = query(con, &redis::cmd("TIME"));
    secs * 1000 + micros / 1000
}

/// `CONFIG GET name`: its one value.
pub fn config_get(con: &mut impl ConnectionLike, name: &str) -> String {
    let pair: Vec<String> = query(con, &cmd1("CONFIG", &["GET", name]));
    match <[String; 2]>::try_from(pair) {
        Ok([got, value]) if got == name => value,
        Ok(pair) => panic!("CONFIG GET {name} answered another config: {pair:?}"),
        Err(pair) => panic!("{name} is a config: CONFIG GET answered {pair:?}"),
    }
}

/// `CONFIG SET name value`, which must succeed.
pub fn config_set(con: &mut impl ConnectionLike, name: &str, value: impl ToRedisArgs) {
    let mut cmd = cmd1("CONFIG", &["SET", name]);
    cmd.arg(value);
    let () = query(con, &cmd);
}

/// `used_memory` from INFO memory.
pub fn used_memory(con: &mut impl ConnectionLike) -> i64 {
    let info: String = query(con, &cmd1("INFO", "memory"));
    info_field(&info, "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory in INFO memory")
}

// ---------------------------------------------------------------------------
// Lock commands, typed
// ---------------------------------------------------------------------------

fn lock_command(
    name: &str,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: Option<i64>,
) -> redis::Cmd {
    let mut cmd = cmd1(name, key);
    cmd.arg(owner).arg(lease_ms);
    cmd
}

/// `LOCK.ACQUIRE`: `None` = granted (nil), `Some(ttl)` = busy.
pub fn acquire(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> Option<i64> {
    query(
        con,
        &lock_command("LOCK.ACQUIRE", key, owner, Some(lease_ms)),
    )
}

/// `LOCK.ACQUIRE ... TOKEN`: Redisson RFencedLock's pair, `(-1, token)` =
/// granted, `(ttl, -1)` = busy.
pub fn acquire_token(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> (i64, i64) {
    let mut cmd = lock_command("LOCK.ACQUIRE", key, owner, Some(lease_ms));
    cmd.arg("TOKEN");
    query(con, &cmd)
}

/// `acquire_token` for a grant: the token.
pub fn token_of(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> i64 {
    match acquire_token(con, key, owner, lease_ms) {
        (-1, token) if token > 0 => token,
        other => panic!("expected a grant with a token, got {other:?}"),
    }
}

/// The lock's token counter, per `GET redisson_lock_token:{key}`.
pub fn counter(con: &mut impl ConnectionLike, key: &str) -> Option<i64> {
    query(con, &cmd1("GET", format!("redisson_lock_token:{{{key}}}")))
}

/// `LOCK.RENEW`: 1 = renewed, 0 = not held by `owner`.
pub fn renew(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> i64 {
    query(con, &lock_command("LOCK.RENEW", key, owner, Some(lease_ms)))
}

/// `LOCK.RELEASE`, with or without a lease: `None` = not held (nil),
/// `Some(0)` = still held, `Some(1)` = freed.
pub fn release(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: Option<i64>,
) -> Option<i64> {
    query(con, &lock_command("LOCK.RELEASE", key, owner, lease_ms))
}

/// `LOCK.FORCE`: 1 = deleted, 0 = no lock.
pub fn force(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("LOCK.FORCE", key))
}

/// Redisson's unlock channel for `key` with the default prefix.
pub fn unlock_channel(key: impl AsRef<[u8]>) -> Vec<u8> {
    channel_with_prefix(b"redisson_lock__channel", key)
}

pub fn channel_with_prefix(prefix: &[u8], key: impl AsRef<[u8]>) -> Vec<u8> {
    let mut c = prefix.to_vec();
    c.extend_from_slice(b":{");
    c.extend_from_slice(key.as_ref());
    c.push(b'}');
    c
}

// ---------------------------------------------------------------------------
// Pub/sub
// ---------------------------------------------------------------------------

/// A real subscriber on its own RESP2 connection.
///
/// Negative checks need no sleeps: [`Subscriber::drain`] publishes a marker on
/// a private channel after the commands under test and returns whatever
/// arrived before it (Redis delivers one client's messages in order).
pub struct Subscriber {
    con: Connection,
    marker: Vec<u8>,
    seq: u64,
}

/// One message: (channel, payload).
pub type Message = (Vec<u8>, Vec<u8>);

impl Subscriber {
    pub fn new(server: &Server, channels: &[&[u8]]) -> Subscriber {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let marker = format!(
            "test-marker-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
        .into_bytes();
        let mut sub = Subscriber {
            con: server.connection(),
            marker,
            seq: 0,
        };
        let mut all: Vec<&[u8]> = channels.to_vec();
        let marker = sub.marker.clone();
        all.push(&marker);
        let packed = redis::cmd("SUBSCRIBE").arg(&all).get_packed_command();
        sub.con
            .send_packed_command(&packed)
            .expect("send SUBSCRIBE");
        for _ in &all {
            let reply = sub.con.recv_response().expect("SUBSCRIBE confirmation");
            match &reply {
                Value::Array(items)
                    if items.first().and_then(as_string).as_deref() == Some("subscribe") => {}
                other => panic!("unexpected reply to SUBSCRIBE: {other:?}"),
            }
        }
        sub
    }

    /// Publishes a marker through `publisher` and returns every message that
    /// arrived before it, in order.
    pub fn drain(&mut self, publisher: &mut Connection) -> Vec<Message> {
        self.seq += 1;
        let token = format!("m{}", self.seq).into_bytes();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&self.marker)
            .arg(&token)
            .query(publisher)
            .expect("PUBLISH marker");
        assert!(receivers >= 1, "the marker PUBLISH reached no subscriber");
        let mut out = Vec::new();
        loop {
            let reply = self
                .con
                .recv_response()
                .expect("a pub/sub message (read timed out?)");
            let Value::Array(items) = &reply else {
                panic!("unexpected pub/sub frame {reply:?}")
            };
            let kind = items.first().and_then(as_string).unwrap_or_default();
            let (channel, payload) = match kind.as_str() {
                "message" if items.len() == 3 => (as_bytes(&items[1]), as_bytes(&items[2])),
                "pmessage" if items.len() == 4 => (as_bytes(&items[2]), as_bytes(&items[3])),
                _ => panic!("unexpected pub/sub frame {reply:?}"),
            };
            let (channel, payload) = (
                channel.expect("channel bytes"),
                payload.expect("payload bytes"),
            );
            if channel == self.marker {
                if payload == token {
                    return out;
                }
                continue; // an older marker
            }
            out.push((channel, payload));
        }
    }
}

/// Messages rendered for assertion messages.
pub fn show(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|(c, p)| {
            (
                String::from_utf8_lossy(c).into_owned(),
                String::from_utf8_lossy(p).into_owned(),
            )
        })
        .collect()
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

/// A waiter's reply and the unix-ms time it arrived.
pub fn reply_at(waiter: &mut RawClient) -> (Resp, i64) {
    let reply = waiter.read();
    (reply, now_ms())
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// The owners in the lock's wait queue, in order, per `LOCK.INFO`.
pub fn waiter_owners(server: &Server, key: &str) -> Vec<String> {
    let info = lock_info(&mut server.connection(), key);
    (0..info.waiters.len())
        .map(|i| as_string(&info.waiter_field(i, "owner")).expect("a waiter's owner is a string"))
        .collect()
}

pub fn stat(server: &Server, name: &str) -> u64 {
    server
        .lock_stats()
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("INFO lock_stats has {name}"))
}
