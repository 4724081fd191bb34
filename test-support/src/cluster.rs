//! Redis Cluster: three masters on loopback, each with the module, joined by
//! `redis-cli --cluster create`, and the node that serves a key.

use std::process::Command;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::Value;

use crate::reply::info_field;
use crate::server::{free_port, Options, Server};
use crate::timing::poll_until;

/// Three masters on loopback, each with the module, joined by
/// `redis-cli --cluster create` (`$REDIS_CLI`, else `redis-cli` from `PATH`);
/// its nodes are killed on drop.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

/// A cluster node's options: its own bus port, `node_timeout_ms`.
pub fn node_options(node_timeout_ms: u64) -> Options {
    Options::new()
        .config("cluster-enabled", &["yes"])
        .config("cluster-config-file", &["nodes.conf"])
        // Not the default bus port, port + 10000: it may not exist.
        .config("cluster-port", &[&free_port().to_string()])
        .config("cluster-node-timeout", &[&node_timeout_ms.to_string()])
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(5000)
    }

    pub fn start_with(node_timeout_ms: u64) -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| Server::with(node_options(node_timeout_ms)))
            .collect();
        let cli = std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string());
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let output = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .arg("--cluster-yes")
            .output()
            .unwrap_or_else(|e| panic!("run `{cli} --cluster create` ({e}); set REDIS_CLI"));
        assert!(
            output.status.success(),
            "cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        for node in &nodes {
            poll_until(
                Duration::from_secs(20),
                "every node sees the cluster ok",
                || {
                    let info = cluster_info(node);
                    info_field(&info, "cluster_state").as_deref() == Some("ok")
                        && info_field(&info, "cluster_slots_ok").as_deref() == Some("16384")
                        && info_field(&info, "cluster_known_nodes").as_deref() == Some("3")
                },
            );
        }
        Cluster { nodes }
    }

    pub fn client(&self) -> ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(|n| n.url()).collect();
        ClusterClient::new(urls)
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> i64 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[0].connection())
            .expect("KEYSLOT")
    }

    /// The node serving `key`'s slot.
    pub fn node_for(&self, key: &str) -> &Server {
        let slot = self.slot(key);
        let mut con = self.nodes[0].connection();
        let ranges: Vec<Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut con)
            .expect("CLUSTER SLOTS");
        for range in ranges {
            let Value::Array(parts) = range else { continue };
            let (Value::Int(lo), Value::Int(hi), Value::Array(master)) =
                (&parts[0], &parts[1], &parts[2])
            else {
                continue;
            };
            if (*lo..=*hi).contains(&slot) {
                let Value::Int(port) = master[1] else {
                    panic!("port in CLUSTER SLOTS")
                };
                return self
                    .nodes
                    .iter()
                    .find(|n| i64::from(n.port) == port)
                    .expect("a node of ours");
            }
        }
        panic!("no node serves slot {slot}");
    }

    /// Any node that does not serve `key`.
    pub fn other_node(&self, key: &str) -> &Server {
        let owner = self.node_for(key).port;
        self.nodes
            .iter()
            .find(|n| n.port != owner)
            .expect("another node")
    }
}

/// `CLUSTER INFO` of `node`, for [`info_field`].
pub fn cluster_info(node: &Server) -> String {
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut node.connection())
        .expect("CLUSTER INFO")
}
