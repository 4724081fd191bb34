//! The chaos test's topology: three data nodes (a master and two replicas,
//! all with the module and AOF), three Sentinels doing automatic failover,
//! and an independent resource server (with the module, for `LOCK.FENCE`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use redis::Value;

use redis_lock_test_support::sentinel::{SentinelConfig, Sentinels};
use redis_lock_test_support::*;

/// Sentinel's name for the monitored master.
pub const MASTER_NAME: &str = "chaos";

pub struct Cluster {
    /// The data nodes; node 0 starts as the master.
    pub nodes: Vec<Server>,
    pub sentinels: Sentinels,
    pub resource: Server,
}

/// Sends one command on a fresh connection and reads its reply, every step
/// bounded by `timeout`. The nemesis and the health checks use this, not a
/// `redis::Connection`, whose setup (`CLIENT SETINFO`) reads with no
/// timeout: on a stopped server it would wait until the server resumes,
/// and the nemesis is what would resume it.
pub fn probe(port: u16, cmd: &redis::Cmd, timeout: Duration) -> Result<Value, String> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let fail = |e: std::io::Error| format!("port {port}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(fail)?;
    stream.set_read_timeout(Some(timeout)).map_err(fail)?;
    stream.set_write_timeout(Some(timeout)).map_err(fail)?;
    stream.write_all(&cmd.get_packed_command()).map_err(fail)?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).map_err(fail)?;
        if n == 0 {
            return Err(format!("port {port}: connection closed"));
        }
        reply.extend_from_slice(&chunk[..n]);
        // An incomplete reply does not parse yet.
        if let Ok(value) = redis::parse_redis_value(&reply) {
            return value
                .extract_error()
                .map_err(|e| format!("port {port}: {e}"));
        }
        if Instant::now() > deadline {
            return Err(format!("port {port}: no complete reply within {timeout:?}"));
        }
    }
}

/// `INFO replication` of a node, `None` if it does not answer within 2 s.
pub fn replication_info(port: u16) -> Option<String> {
    let info = probe(
        port,
        redis::cmd("INFO").arg("replication"),
        Duration::from_secs(2),
    )
    .ok()?;
    redis::from_redis_value(info).ok()
}

/// Every data node gets its own `lock.node-id`: the configuration under
/// which docs/fenced.md promises that no two nodes acting as master at once
/// issue the same token. (Derived from replication IDs, numbers can collide,
/// 1 in 15, for a master restarted with a new ID next to the replica
/// promoted meanwhile: a chaos run on Valkey 9.1.2 found two such tokens.)
fn data_node_options(node: usize) -> Options {
    let node = node.to_string();
    Options::new()
        .module_args(&["node-id", &node])
        .aof()
        .config("enable-debug-command", &["local"])
        // A replica that lost its master keeps serving reads (LOCK.INFO),
        // and refuses writes with READONLY as any replica.
        .config("replica-serve-stale-data", &["yes"])
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3).map(|i| Server::with(data_node_options(i))).collect();
        for replica in &nodes[1..] {
            replica.replicaof(&nodes[0]);
        }
        // down-after 1 s made Sentinel flag a just-promoted, healthy master
        // down now and then (a PING unanswered for a second on a loaded
        // machine) and fail it over while it kept serving: two masters, the
        // one thing SYNC 1 cannot survive. failover-timeout 3 s left one
        // Sentinel stuck in its own aborted failover for 30 s.
        let sentinels = Sentinels::start(
            SentinelConfig {
                name: MASTER_NAME.to_string(),
                ..SentinelConfig::new(nodes[0].port)
            }
            .down_after_ms(2000)
            .failover_timeout_ms(6000),
            3,
        );
        sentinels.wait_ready(2);
        let resource = Server::start();
        Cluster {
            nodes,
            sentinels,
            resource,
        }
    }

    pub fn node_of(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }

    /// The master every Sentinel reports, if they agree and it says it is
    /// a master.
    pub fn agreed_master(&self) -> Option<usize> {
        let ports = self.sentinels.master_ports();
        let first = ports[0]?;
        if ports.iter().any(|p| *p != Some(first)) {
            return None;
        }
        let node = self.node_of(first)?;
        let info = replication_info(first)?;
        (info_field(&info, "role").as_deref() == Some("master")).then_some(node)
    }

    /// Waits until the Sentinels agree on a master that has both other
    /// nodes as online replicas, linked up and following it, and each
    /// Sentinel has finished any failover and sees both replicas up: one
    /// fault at a time. The master's index; an error after `timeout`.
    pub fn healed(&self, timeout: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(master) = self.agreed_master() {
                let port = self.nodes[master].port.to_string();
                let online = replication_info(self.nodes[master].port)
                    .map(|info| {
                        (0..2)
                            .filter(|i| {
                                info_field(&info, &format!("slave{i}"))
                                    .is_some_and(|s| s.contains("state=online"))
                            })
                            .count()
                    })
                    .unwrap_or(0);
                let following = self
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != master)
                    .all(|(_, n)| {
                        replication_info(n.port).is_some_and(|info| {
                            info_field(&info, "master_port").as_deref() == Some(port.as_str())
                                && info_field(&info, "master_link_status").as_deref() == Some("up")
                        })
                    });
                // The Sentinels done with their failover too: killing a
                // master whose promotion one of them is still finishing
                // left that one stuck on the dead master.
                if online == 2 && following && self.sentinels.ready(2) {
                    return Ok(master);
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the cluster did not heal within {timeout:?}: sentinels say {:?}; nodes {:?}",
                    self.sentinels.master_ports(),
                    self.nodes
                        .iter()
                        .map(|n| (
                            n.port,
                            replication_info(n.port).map(|i| (
                                info_field(&i, "role"),
                                info_field(&i, "master_port"),
                                info_field(&i, "master_link_status"),
                                info_field(&i, "connected_slaves")
                            ))
                        ))
                        .collect::<Vec<_>>()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the Sentinels agree on a master other than `old`.
    pub fn failed_over_from(&self, old: usize, timeout: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(new) = self.agreed_master().filter(|m| *m != old) {
                return Ok(new);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no failover away from node {old} within {timeout:?}: sentinels say {:?}",
                    self.sentinels.master_ports()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every Sentinel flags replica `i` down (`s_down`).
    pub fn sentinels_see_down(&self, i: usize, timeout: Duration) -> Result<(), String> {
        let port = self.nodes[i].port.to_string();
        let deadline = Instant::now() + timeout;
        let sees_down = |sentinel: u16| {
            let cmd = redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(MASTER_NAME)
                .clone();
            let Ok(Value::Array(replicas)) = probe(sentinel, &cmd, Duration::from_secs(2)) else {
                return false;
            };
            replicas.iter().any(|r| {
                let fields: Vec<(Option<String>, Option<String>)> = map_pairs(r)
                    .iter()
                    .map(|(k, v)| (as_string(k), as_string(v)))
                    .collect();
                let get = |name: &str| {
                    fields
                        .iter()
                        .find(|(k, _)| k.as_deref() == Some(name))
                        .and_then(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                get("port") == port && get("flags").contains("s_down")
            })
        };
        while !self.sentinels.sentinels.iter().all(|s| sees_down(s.port)) {
            if Instant::now() > deadline {
                return Err(format!("the sentinels did not see replica {port} down"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Restarts node `i` from its AOF as a replica of node `master`.
    pub fn restart_as_replica(&mut self, i: usize, master: usize) -> Result<(), String> {
        let port = self.nodes[master].port.to_string();
        self.nodes[i].restart_with(&[("replicaof", &["127.0.0.1", &port])])
    }

    /// Failovers the Sentinels made: the most `+switch-master` lines any of
    /// them logged (each logs every switch it learns of).
    pub fn failovers(&self) -> usize {
        self.sentinels
            .sentinels
            .iter()
            .map(|s| s.log().matches("+switch-master").count())
            .max()
            .unwrap_or(0)
    }

    /// Copies every server's and Sentinel's log to `target/chaos-logs/<name>/`
    /// (the servers' directories go when the test ends); that directory.
    pub fn keep_logs(&self, name: &str) -> std::path::PathBuf {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/chaos-logs")
            .join(name);
        let _ = std::fs::create_dir_all(&dir);
        for (i, node) in self.nodes.iter().enumerate() {
            let _ = std::fs::write(
                dir.join(format!("node{i}-{}.log", node.port)),
                node.all_logs(),
            );
        }
        let _ = std::fs::write(
            dir.join(format!("resource-{}.log", self.resource.port)),
            self.resource.all_logs(),
        );
        for (i, s) in self.sentinels.sentinels.iter().enumerate() {
            let _ = std::fs::write(dir.join(format!("sentinel{i}-{}.log", s.port)), s.log());
        }
        dir
    }

    /// For a failure report: each data node's process state (`R` running,
    /// `S` sleeping, `T` stopped) and whether it answers PING within 1 s;
    /// for one that does not, its threads' stacks (`gdb`, when installed)
    /// go to `dir`/node<i>-stacks.txt.
    pub fn diagnose(&self, dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(pid) = node.is_running_pid() else {
                out.push(format!("node {i} (port {}): not running", node.port));
                continue;
            };
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest[..1].to_string()))
                .unwrap_or_default();
            let ping = probe(node.port, &redis::cmd("PING"), Duration::from_secs(1));
            out.push(format!(
                "node {i} (port {}, pid {pid}): state {state}, PING {ping:?}",
                node.port
            ));
            if ping.is_err() {
                if let Ok(stacks) = std::process::Command::new("gdb")
                    .args([
                        "-batch",
                        "-p",
                        &pid.to_string(),
                        "-ex",
                        "thread apply all bt 30",
                    ])
                    .output()
                {
                    let _ = std::fs::write(dir.join(format!("node{i}-stacks.txt")), stacks.stdout);
                }
            }
        }
        out
    }

    /// Signs of a crash in any server's logs (across restarts), and servers
    /// that are not running: the nemesis restarts every node it kills.
    pub fn crashes(&mut self) -> Vec<String> {
        let mut found = Vec::new();
        let mut servers: Vec<&mut Server> = self.nodes.iter_mut().collect();
        servers.push(&mut self.resource);
        for server in servers {
            let log = server.all_logs();
            for sign in [
                "crashed by signal",
                "ASSERTION FAILED",
                "Guru Meditation",
                "panicked",
                "STACK TRACE",
            ] {
                if let Some(at) = log.find(sign) {
                    let line_start = log[..at].rfind('\n').map_or(0, |i| i + 1);
                    let line_end = log[at..].find('\n').map_or(log.len(), |i| at + i);
                    found.push(format!(
                        "port {}: {}",
                        server.port,
                        &log[line_start..line_end]
                    ));
                }
            }
            if !server.is_alive() {
                found.push(format!("port {}: the server is not running", server.port));
            }
        }
        found
    }
}
