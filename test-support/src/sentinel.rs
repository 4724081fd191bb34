//! Redis Sentinel processes for tests: `N` sentinels on free loopback ports
//! monitoring one master, each in its own temporary directory (Sentinel
//! rewrites its config file there), killed on drop like a [`Server`](crate::Server).
//!
//! They run the same binary as the servers (`$REDIS_SERVER ... --sentinel`),
//! which works for Redis 7.0, Redis 8 and Valkey. Timings are small so that a
//! test sees a failover within seconds: `down-after-milliseconds` 1000 and
//! `failover-timeout` 3000 unless [`SentinelConfig`] says otherwise.
//!
//! ```ignore
//! let sentinels = Sentinels::start(SentinelConfig::new(master.port), 3);
//! sentinels.wait_ready(2); // every sentinel knows the others and both replicas
//! assert_eq!(sentinels.master_port(), Some(master.port));
//! ```

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult, Value};

use crate::reply::{as_string, info_field, map_pairs};
use crate::server::{connect, free_port, server_binary, show_log_tail, TestDir, STARTUP_TIMEOUT};
use crate::timing::poll_until;

/// What the sentinels monitor, and how fast they act.
#[derive(Clone, Debug)]
pub struct SentinelConfig {
    /// The master's name in `SENTINEL` commands.
    pub name: String,
    /// The master's loopback port.
    pub master_port: u16,
    /// Sentinels that must agree the master is down (default: a majority).
    pub quorum: Option<usize>,
    pub down_after_ms: u64,
    pub failover_timeout_ms: u64,
    /// More `sentinel <...>` lines, e.g. `"parallel-syncs mymaster 2"`.
    pub extra: Vec<String>,
}

impl SentinelConfig {
    pub fn new(master_port: u16) -> SentinelConfig {
        SentinelConfig {
            name: "mymaster".to_string(),
            master_port,
            quorum: None,
            down_after_ms: 1000,
            failover_timeout_ms: 3000,
            extra: Vec::new(),
        }
    }

    pub fn quorum(mut self, quorum: usize) -> SentinelConfig {
        self.quorum = Some(quorum);
        self
    }

    pub fn down_after_ms(mut self, ms: u64) -> SentinelConfig {
        self.down_after_ms = ms;
        self
    }

    pub fn failover_timeout_ms(mut self, ms: u64) -> SentinelConfig {
        self.failover_timeout_ms = ms;
        self
    }

    fn text(&self, port: u16, dir: &Path, quorum: usize) -> String {
        let name = &self.name;
        let mut text = format!(
            "port {port}\n\
             bind 127.0.0.1\n\
             daemonize no\n\
             dir {dir}\n\
             logfile {log}\n\
             sentinel resolve-hostnames no\n\
             sentinel announce-ip 127.0.0.1\n\
             sentinel monitor {name} 127.0.0.1 {master} {quorum}\n\
             sentinel down-after-milliseconds {name} {down}\n\
             sentinel failover-timeout {name} {failover}\n\
             sentinel parallel-syncs {name} 1\n",
            dir = dir.display(),
            log = dir.join("sentinel.log").display(),
            master = self.master_port,
            down = self.down_after_ms,
            failover = self.failover_timeout_ms,
        );
        for line in &self.extra {
            text.push_str(&format!("sentinel {line}\n"));
        }
        text
    }
}

/// One sentinel process; killed (and its directory removed) on drop.
pub struct Sentinel {
    child: Option<Child>,
    pub port: u16,
    dir: TestDir,
}

impl Sentinel {
    /// Starts a sentinel for `config` on a free port (retrying on another
    /// port if a neighbour test took this one).
    pub fn start(config: &SentinelConfig, quorum: usize) -> Sentinel {
        let dir = TestDir::new("sentinel");
        let mut last_error = String::new();
        for _attempt in 0..8 {
            let port = free_port();
            let conf = dir.path().join("sentinel.conf");
            std::fs::write(&conf, config.text(port, dir.path(), quorum))
                .unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
            let log = dir.path().join("sentinel.log");
            let _ = std::fs::remove_file(&log);
            let mut child = Command::new(server_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run `{}` ({e})", server_binary()));
            let pid = child.id().to_string();
            let deadline = Instant::now() + STARTUP_TIMEOUT;
            let outcome = loop {
                if let Ok(Some(status)) = child.try_wait() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    if text.contains("in use") || text.contains("Could not create server TCP") {
                        break Err(format!("port {port} in use"));
                    }
                    panic!("sentinel exited at startup ({status}) on port {port}; log:\n{text}");
                }
                if let Ok(mut con) = connect(port, false) {
                    if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut con) {
                        if info_field(&info, "process_id").as_deref() == Some(pid.as_str()) {
                            break Ok(());
                        }
                        break Err(format!("port {port} answered by another server"));
                    }
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "sentinel did not answer within {STARTUP_TIMEOUT:?} on port {port}; log:\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            match outcome {
                Ok(()) => {
                    return Sentinel {
                        child: Some(child),
                        port,
                        dir,
                    }
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = why;
                }
            }
        }
        panic!("could not start a sentinel after several ports: {last_error}");
    }

    /// A connection with read/write timeouts.
    pub fn connection(&self) -> RedisResult<Connection> {
        connect(self.port, false)
    }

    /// The sentinel's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }

    /// `SENTINEL MASTER name` as field -> value text.
    pub fn master_state(&self, name: &str) -> RedisResult<Vec<(String, String)>> {
        let reply: Value = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(name)
            .query(&mut self.connection()?)?;
        Ok(map_pairs(&reply)
            .into_iter()
            .map(|(k, v)| {
                (
                    as_string(&k).unwrap_or_default(),
                    as_string(&v).unwrap_or_default(),
                )
            })
            .collect())
    }

    /// `SENTINEL get-master-addr-by-name`: the master's port (loopback).
    pub fn master_port(&self, name: &str) -> Option<u16> {
        let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(name)
            .query(&mut self.connection().ok()?)
            .ok()?;
        reply.map(|(_, port)| port)
    }

    /// SIGKILL: the sentinel is gone until the test ends.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if std::thread::panicking() {
            show_log_tail(&format!("sentinel on port {}", self.port), &self.log(), 30);
        }
        self.kill();
    }
}

/// `count` sentinels monitoring one master.
pub struct Sentinels {
    pub config: SentinelConfig,
    pub sentinels: Vec<Sentinel>,
}

impl Sentinels {
    /// Starts `count` sentinels (quorum: `config.quorum` or a majority).
    pub fn start(config: SentinelConfig, count: usize) -> Sentinels {
        let quorum = config.quorum.unwrap_or(count / 2 + 1);
        let sentinels = (0..count)
            .map(|_| Sentinel::start(&config, quorum))
            .collect();
        Sentinels { config, sentinels }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The sentinels' URLs: what a client that asks them for the master
    /// is given.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}/", s.port))
            .collect()
    }

    /// The master's port per the first sentinel that answers
    /// `SENTINEL get-master-addr-by-name`.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels
            .iter()
            .find_map(|s| s.master_port(&self.config.name))
    }

    /// The master's port per each sentinel (`None`: no answer).
    pub fn master_ports(&self) -> Vec<Option<u16>> {
        self.sentinels
            .iter()
            .map(|s| s.master_port(&self.config.name))
            .collect()
    }

    /// Waits until [`Sentinels::ready`]: from then on a failover can be
    /// authorized.
    pub fn wait_ready(&self, replicas: usize) {
        poll_until(
            Duration::from_secs(30),
            "every sentinel sees the other sentinels and the replicas",
            || self.ready(replicas),
        );
    }

    /// Whether every sentinel knows all the others and `replicas` replicas
    /// of the master, sees nothing down, has no failover in progress (its
    /// flags are just `master`), and all agree on the master.
    pub fn ready(&self, replicas: usize) -> bool {
        let others = (self.sentinels.len() - 1).to_string();
        let replicas = replicas.to_string();
        let name = &self.config.name;
        let ports = self.master_ports();
        if ports[0].is_none() || ports.iter().any(|p| *p != ports[0]) {
            return false;
        }
        self.sentinels.iter().all(|s| {
            let Ok(state) = s.master_state(name) else {
                return false;
            };
            let get = |k: &str| {
                state
                    .iter()
                    .find(|(f, _)| f == k)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or("")
            };
            get("num-other-sentinels") == others
                && get("num-slaves") == replicas
                && get("flags") == "master"
                && s.replicas_up(name) == replicas
        })
    }
}

impl Sentinel {
    /// How many replicas this sentinel lists with no `s_down`/`disconnected` flag, as text.
    fn replicas_up(&self, name: &str) -> String {
        let Ok(mut con) = self.connection() else {
            return String::new();
        };
        let Ok(Value::Array(replicas)) = redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(name)
            .query::<Value>(&mut con)
        else {
            return String::new();
        };
        replicas
            .iter()
            .filter(|r| {
                map_pairs(r).iter().any(|(k, v)| {
                    as_string(k).as_deref() == Some("flags")
                        && as_string(v).as_deref() == Some("slave")
                })
            })
            .count()
            .to_string()
    }
}
