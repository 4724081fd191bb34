//! Servers: real `redis-server` processes on free loopback ports, each in its
//! own temporary directory, with the lock module loaded (see [`crate::module`]),
//! killed and their directories removed on drop; replicas of each other.
//!
//! * server binary: `$REDIS_SERVER`, else `redis-server` from `PATH`;
//! * module: built from the current sources by the tests themselves, or
//!   `$LOCK_MODULE_PATH`, refused when older than the sources.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, RedisResult, Value};

use crate::module::module_path;
use crate::reply::info_field;
use crate::timing::poll_until;

/// How long a server may take to answer PING, a replica to link up, etc.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// Read timeout of every connection: a hung server fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The server binary: `$REDIS_SERVER` or `redis-server`.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

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

/// Every file under `dir`, in its subdirectories too (a server's data
/// directory: the AOF is a directory of files on Redis 7+).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

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

    /// Starts the server again (after [`Server::crash`], or kills it first)
    /// on the same port and directory, so on the same data and at the same
    /// address for replicas and Sentinels, with its options plus `extra`
    /// (e.g. `--replicaof`). The log so far moves to `redis.log.previous`
    /// (appended), which [`Server::all_logs`] includes. An error when the
    /// port stays taken (someone else's process got it meanwhile) or the
    /// server does not start.
    pub fn restart_with(&mut self, extra: &[(&str, &[&str])]) -> Result<(), String> {
        self.crash();
        let mut options = self.options.clone();
        options.dir = Some(self.dir.clone());
        for (name, values) in extra {
            options = options.config(name, values);
        }
        let log = self.log();
        if !log.is_empty() {
            use std::io::Write;
            let mut previous = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("redis.log.previous"))
                .map_err(|e| format!("keep the old log: {e}"))?;
            previous
                .write_all(log.as_bytes())
                .map_err(|e| format!("keep the old log: {e}"))?;
        }
        let module = options.module.then(module_path);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match Server::spawn(&options, module.as_deref(), &self.dir, self.port) {
                Ok(child) => {
                    self.child = Some(child);
                    return Ok(());
                }
                Err(StartError::Retry(why)) if Instant::now() < deadline => {
                    let _ = why;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(StartError::Retry(why)) | Err(StartError::Fatal(why)) => return Err(why),
            }
        }
    }

    /// Every log this server wrote, across [`Server::restart_with`]s.
    pub fn all_logs(&self) -> String {
        let previous =
            std::fs::read_to_string(self.dir.join("redis.log.previous")).unwrap_or_default();
        previous + &self.log()
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

    /// Creates the ACL user `user` (password `pw`) with `rules` (`~app:*`,
    /// `+lock.acquire`...) and returns a connection authenticated as it.
    pub fn connection_as(&self, user: &str, rules: &[&str]) -> Connection {
        let mut setuser = vec!["ACL", "SETUSER", user, "on", ">pw"];
        setuser.extend_from_slice(rules);
        crate::commands::run(&mut self.connection(), &setuser);
        let mut con = self.connection();
        crate::commands::run(&mut con, &["AUTH", user, "pw"]);
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

    /// The text of `INFO <section>`.
    pub fn info_section(&self, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query(&mut self.connection())
            .unwrap_or_else(|e| panic!("INFO {section}: {e}"))
    }

    /// One `INFO <section>` field.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        info_field(&self.info_section(section), field)
    }

    /// The `lock_stats` INFO section as field -> value (fields keep their
    /// `lock_` prefix, e.g. `lock_acquired`).
    pub fn lock_stats(&self) -> HashMap<String, u64> {
        self.info_section("lock_stats")
            .lines()
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
        self.info_section("commandstats")
            .lines()
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

    /// The server's process id if it was started and not crashed or reaped.
    pub fn is_running_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
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
            let what = format!("redis-server on port {} ({:?})", self.port, self.options);
            show_log_tail(&what, &self.log(), 40);
        }
        self.crash();
    }
}

/// Prints the last `lines` lines of `what`'s `log` to stderr: a failing test
/// shows what its servers said last.
pub(crate) fn show_log_tail(what: &str, log: &str, lines: usize) {
    let tail: Vec<&str> = log.lines().rev().take(lines).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    eprintln!("---- {what} log tail ----\n{}\n----", tail.join("\n"));
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

/// A connection to `127.0.0.1:port` with read and write timeouts.
pub(crate) fn connect(port: u16, resp3: bool) -> RedisResult<Connection> {
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

/// The replication offset a server reports (its own on a master, the
/// processed one on a replica).
pub fn repl_offset(server: &Server) -> i64 {
    server
        .info("replication", "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("master_repl_offset in INFO replication")
}

/// Two replicas of `master`, linked and synced: one with the module and one
/// without it (plain Redis, which can only apply the effects the master
/// replicates): `(with_module, plain)`.
pub fn module_and_plain_replicas(master: &Server) -> (Server, Server) {
    let with_module = Server::start();
    let plain = Server::with(Options::new().without_module());
    with_module.replicaof(master);
    plain.replicaof(master);
    (with_module, plain)
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

/// An AOF master with two replicas, one with the module and one without:
/// what a test of replicated effects needs (a replica must end with the
/// master's keys whether or not it could run the module's logic, and so must
/// the master restarted from its AOF).
pub struct ReplicaTrio {
    pub master: Server,
    pub with_module: Server,
    pub without: Server,
}

impl ReplicaTrio {
    pub fn start() -> ReplicaTrio {
        let master = Server::with(Options::new().aof());
        let (with_module, without) = module_and_plain_replicas(&master);
        wait_for_replicas(&master, &[&with_module, &without]);
        ReplicaTrio {
            master,
            with_module,
            without,
        }
    }

    /// Reads `state` on the master, waits until both replicas show the
    /// same, restarts the master from its AOF and checks it shows the same
    /// again. Returns the state.
    pub fn assert_replicated<T: PartialEq + std::fmt::Debug>(
        &mut self,
        state: impl Fn(&Server) -> T,
    ) -> T {
        let expected = state(&self.master);
        for replica in [&self.with_module, &self.without] {
            poll_until(
                Duration::from_secs(5),
                "the replica has the master's keys",
                || state(replica) == expected,
            );
        }
        self.master.restart_with(&[]).expect("restart from the AOF");
        assert_eq!(
            state(&self.master),
            expected,
            "the AOF rebuilt the same keys"
        );
        expected
    }
}
