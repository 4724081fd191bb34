//! Redis Cluster: three masters on loopback, each with the module, joined by
//! `redis-cli --cluster create`, driven by the `redis` crate's cluster client.

use std::time::Duration;

use redis::Value;
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

/// The lease of every lock taken here.
const LEASE: i64 = 30_000;

#[test]
fn locks_work_on_every_node_through_the_cluster_client_and_moved_routing() {
    let cluster = Cluster::start();
    let mut con = cluster.client();

    // Keys across the whole slot space: every node gets some.
    let keys: Vec<String> = (0..300).map(|i| format!("lock:{i}")).collect();
    let mut per_node = std::collections::HashMap::new();
    for key in &keys {
        assert_eq!(acquire(&mut con, key, "a", LEASE), None, "{key} taken");
        assert_eq!(acquire(&mut con, key, "a", LEASE), None, "{key} re-entered");
        assert!(
            matches!(acquire(&mut con, key, "b", LEASE), Some(ttl) if ttl > 0),
            "{key} excludes b"
        );
        *per_node.entry(cluster.node_for(key).port).or_insert(0) += 1;
        // The hash lives on the slot's own node.
        let count: Option<String> = redis::cmd("HGET")
            .arg(key)
            .arg("a")
            .query(&mut cluster.node_for(key).connection())
            .expect("HGET");
        assert_eq!(count.as_deref(), Some("2"), "{key} on its own node");
    }
    assert_eq!(
        per_node.len(),
        3,
        "keys landed on all three masters: {per_node:?}"
    );
    for key in &keys {
        assert_eq!(release(&mut con, key, "a", None), Some(0));
        assert_eq!(release(&mut con, key, "a", None), Some(1));
    }

    // Hash-tagged keys share a slot and a node.
    let tagged = ["{order:7}:stock", "{order:7}:payment"];
    assert_eq!(
        cluster.node_for(tagged[0]).port,
        cluster.node_for(tagged[1]).port
    );
    for key in tagged {
        assert_eq!(acquire(&mut con, key, "a", LEASE), None);
    }

    // The key position (1/1/1) is what routes: a wrong node answers MOVED.
    let wrong = cluster.other_node("lock:1");
    let moved = redis::cmd("LOCK.ACQUIRE")
        .arg("lock:1")
        .arg("a")
        .arg(1000)
        .query::<Value>(&mut wrong.connection());
    expect_err(
        moved,
        "MOVED",
        &cluster.node_for("lock:1").port.to_string(),
        "LOCK.ACQUIRE on the wrong node",
    );
    let moved = redis::cmd("LOCK.INFO")
        .arg("lock:1")
        .query::<Value>(&mut wrong.connection());
    expect_err(moved, "MOVED", "", "LOCK.INFO on the wrong node");
}

#[test]
fn unlock_messages_are_sharded_to_the_keys_own_node() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    let key = "MoonCake";
    let channel = String::from_utf8(unlock_channel(key)).expect("a text channel");
    let node = cluster.node_for(key);

    let mut sharded = RawClient::connect(node.port);
    sharded.send(&["SSUBSCRIBE", &channel]);
    assert_eq!(sharded.read().array()[0].text(), "ssubscribe");
    let mut classic = RawClient::connect(node.port);
    classic.send(&["SUBSCRIBE", &channel]);
    assert_eq!(classic.read().array()[0].text(), "subscribe");

    for free in ["release", "force"] {
        acquire(&mut con, key, "a", LEASE);
        if free == "release" {
            assert_eq!(release(&mut con, key, "a", None), Some(1));
        } else {
            assert_eq!(force(&mut con, key), 1);
        }
        let message = sharded.read().array();
        let texts: Vec<String> = message.iter().map(|v| v.text()).collect();
        assert_eq!(
            texts,
            vec!["smessage".to_string(), channel.clone(), "0".to_string()],
            "after {free}"
        );
    }
    assert!(
        classic.nothing_within(Duration::from_millis(200)),
        "no classic broadcast in cluster mode"
    );

    // lock.publish classic puts it back on the classic channel.
    for n in &cluster.nodes {
        config_set(&mut n.connection(), "lock.publish", "classic");
    }
    acquire(&mut con, key, "a", LEASE);
    release(&mut con, key, "a", None);
    let texts: Vec<String> = classic.read().array().iter().map(|v| v.text()).collect();
    assert_eq!(texts, vec!["message".to_string(), channel, "0".to_string()]);
}

#[test]
fn waiting_and_hand_off_work_in_the_cluster() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    for key in ["lock:a", "lock:b", "lock:c", "{tag}:x"] {
        assert_eq!(acquire(&mut con, key, "holder", LEASE), None);
        // A waiter talks to the node that serves the key, as a cluster client would.
        let mut waiter = queue(cluster.node_for(key), key, "waiter", 30_000, 5_000);
        assert_eq!(release(&mut con, key, "holder", None), Some(1));
        assert!(waiter.read().is_nil(), "{key}: the waiter is granted");
        assert_eq!(holders(&mut con, key), owned_by("waiter"), "{key}");
    }
}

/// A read-write lock's hold keys live in its slot, on its node (Redisson's
/// suffix rule), for keys with and without hash tags; readers and a writer
/// share one queue there, and the unlock message is sharded to that node.
#[test]
fn read_write_locks_keep_every_key_in_the_locks_slot() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    for key in ["doc:a", "doc:b", "{tag}:doc"] {
        let node = cluster.node_for(key);
        let mut direct = node.connection();
        assert_eq!(
            run(&mut con, &["LOCK.RACQUIRE", key, "r", "30000"]),
            Value::Nil
        );
        let hold = if key.contains('{') {
            format!("{key}:r:rwlock_timeout:1")
        } else {
            format!("{{{key}}}:r:rwlock_timeout:1")
        };
        assert!(
            exists(&mut direct, &hold),
            "{key}: its hold key {hold} is on its node"
        );
        assert_eq!(cluster.slot(&hold), cluster.slot(key), "{key}");
        let mut writer = RawClient::connect(node.port);
        writer.send(&["LOCK.WACQUIRE", key, "w", "30000", "WAIT", "5000"]);
        poll_until(Duration::from_secs(5), "the writer queues", || {
            waiter_count(&mut direct, key) == 1
        });
        assert_eq!(run(&mut con, &["LOCK.RRELEASE", key, "r"]), Value::Int(1));
        assert!(writer.read().is_nil(), "{key}: the writer is granted");
        assert!(!exists(&mut direct, &hold));
        assert_eq!(run(&mut con, &["LOCK.WRELEASE", key, "w"]), Value::Int(1));
    }
}

#[test]
fn semaphores_and_latches_keep_every_key_in_their_slot_and_wait_on_their_node() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    for key in ["sem:a", "{tag}:sem"] {
        let node = cluster.node_for(key);
        let mut direct = node.connection();
        assert_eq!(run(&mut con, &["LOCK.SEMSET", key, "1"]), Value::Int(1));
        let ids = ids_of(&run(
            &mut con,
            &["LOCK.PERMITACQUIRE", key, "1", "LEASE", "30000"],
        ));
        assert_eq!(
            permits_taken(&mut direct, key),
            1,
            "{key}: its set is on its node"
        );
        assert_eq!(cluster.slot(&permits_key(key)), cluster.slot(key), "{key}");
        let mut waiter = RawClient::connect(node.port);
        waiter.send(&["LOCK.SEMACQUIRE", key, "1", "WAIT", "5000"]);
        poll_until(Duration::from_secs(5), "the waiter queues", || {
            queued(&mut direct, "LOCK.SEMINFO", key).len() == 1
        });
        assert_eq!(
            run(&mut con, &["LOCK.PERMITRELEASE", key, &ids[0]]),
            Value::Int(1)
        );
        assert_eq!(waiter.read(), Resp::Int(1), "{key}: the waiter is served");
        let latch = format!("{key}:latch");
        assert_eq!(
            run(&mut con, &["LOCK.LATCHSET", &latch, "1"]),
            Value::Int(1)
        );
        let node = cluster.node_for(&latch);
        let mut awaiting = RawClient::connect(node.port);
        awaiting.send(&["LOCK.AWAIT", &latch, "5000"]);
        let mut direct = node.connection();
        poll_until(Duration::from_secs(5), "the await queues", || {
            queued(&mut direct, "LOCK.LATCHINFO", &latch).len() == 1
        });
        assert_eq!(run(&mut con, &["LOCK.COUNTDOWN", &latch]), Value::Int(0));
        assert_eq!(awaiting.read(), Resp::Int(1));
    }
}

fn waiter_count(con: &mut redis::Connection, key: &str) -> usize {
    let info = run(con, &["LOCK.INFO", key]);
    find_field(&info, "waiters").map_or(0, |v| match v {
        Value::Array(items) => items.len(),
        _ => 0,
    })
}

/// A lock's token counter lives in the lock's slot, on its node, for keys
/// with and without hash tags; keys whose braces would split them are refused.
#[test]
fn fencing_tokens_live_in_the_locks_slot_on_every_node() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    let mut last = std::collections::HashMap::new();
    for round in 0..2 {
        for i in 0..60 {
            for key in [format!("lock:{i}"), format!("{{order:{i}}}:stock")] {
                let token = token_of(&mut con, &key, "a", LEASE);
                let counter = if key.contains('{') {
                    format!("redisson_lock_token:{key}")
                } else {
                    format!("redisson_lock_token:{{{key}}}")
                };
                let node = cluster.node_for(&key);
                assert_eq!(cluster.node_for(&counter).port, node.port, "{key}");
                let stored: i64 = redis::cmd("GET")
                    .arg(&counter)
                    .query(&mut node.connection())
                    .expect("GET counter on the lock's node");
                assert_eq!(stored, token, "{key}");
                if round == 1 {
                    assert!(token > last[&key], "{key}");
                }
                last.insert(key, token);
            }
        }
    }
    let refused = redis::cmd("LOCK.ACQUIRE")
        .arg("half{open")
        .arg("a")
        .arg(LEASE)
        .arg("TOKEN")
        .query::<Value>(&mut con);
    expect_err(
        refused,
        "ERR TOKEN",
        "cluster slot",
        "a key whose braces split",
    );
}

/// A cluster whose first master has a replica (a fourth node, in sync and
/// known to its master as its replica): (cluster, replica, a key the first
/// master serves).
fn cluster_with_replica(node_timeout_ms: u64) -> (Cluster, Server, String) {
    let cluster = Cluster::start_with(node_timeout_ms);
    let master = &cluster.nodes[0];
    let master_id: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut master.connection())
        .expect("CLUSTER MYID");
    let bus_port = config_get(&mut master.connection(), "cluster-port");
    let replica = Server::with(node_options(node_timeout_ms));
    let mut rc = replica.connection();
    let _: Value = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(master.port)
        .arg(bus_port)
        .query(&mut rc)
        .expect("CLUSTER MEET");
    poll_until(
        Duration::from_secs(20),
        "the new node knows the cluster",
        || info_field(&cluster_info(&replica), "cluster_known_nodes").as_deref() == Some("4"),
    );
    let _: Value = redis::cmd("CLUSTER")
        .arg("REPLICATE")
        .arg(&master_id)
        .query(&mut rc)
        .expect("CLUSTER REPLICATE");
    poll_until(Duration::from_secs(20), "the replica is in sync", || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut rc)
            .expect("INFO");
        info_field(&info, "master_link_status").as_deref() == Some("up")
    });
    // The master ignores a manual failover request from a node it does not
    // yet know as its replica, and the other masters, who vote, likewise.
    for node in &cluster.nodes {
        poll_until(
            Duration::from_secs(20),
            "every master knows the replica",
            || {
                let replicas: Vec<String> = redis::cmd("CLUSTER")
                    .arg("REPLICAS")
                    .arg(&master_id)
                    .query(&mut node.connection())
                    .expect("CLUSTER REPLICAS");
                replicas.len() == 1
            },
        );
    }
    let key = key_on_first_master(&cluster);
    (cluster, replica, key)
}

/// A key the cluster's first master serves.
fn key_on_first_master(cluster: &Cluster) -> String {
    (0..)
        .map(|i| format!("lock:{i}"))
        .find(|k| cluster.node_for(k).port == cluster.nodes[0].port)
        .expect("a key on the first master")
}

/// `CLUSTER FAILOVER` sent to `replica`: a manual failover, which starts
/// with its master pausing writes.
fn manual_failover(replica: &Server) {
    let _: Value = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut replica.connection())
        .expect("CLUSTER FAILOVER");
}

fn role(server: &Server) -> String {
    server.info("replication", "role").expect("role")
}

/// `CLUSTER FAILOVER` makes the master pause writes until its replica has
/// every write. A lease ending in that pause must neither abort the master
/// nor be handed on (the replica, about to be promoted, would not have it);
/// when the manual failover gives up, the hand-off happens.
#[test]
fn a_lease_ending_during_a_cluster_failover_pause_waits_for_it() {
    // A long node timeout: freezing two masters below must not fail them.
    let (cluster, replica, key) = cluster_with_replica(15_000);
    let master = &cluster.nodes[0];
    let mut mc = master.connection();
    acquire(&mut mc, &key, "a", LEASE);
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(&key)
        .arg(400)
        .query(&mut mc)
        .expect("PEXPIRE");
    let mut waiter = queue(master, &key, "b", 30_000, 0);

    // With the other masters frozen the replica cannot win its election:
    // the master stays paused until the manual failover times out (5 s).
    for other in &cluster.nodes[1..] {
        other.signal("STOP");
    }
    manual_failover(&replica);
    let failover_at = now_ms();
    std::thread::sleep(Duration::from_millis(1000));
    let mut probe = RawClient::connect(master.port);
    probe.send(&["SET", &format!("{{{key}}}probe"), "1"]);
    assert!(
        probe.nothing_within(Duration::from_millis(100)),
        "the master pauses writes during the manual failover"
    );
    assert!(
        holders(&mut mc, &key).is_empty(),
        "the lease ended, nothing handed on"
    );
    assert_eq!(waiter_owners(master, &key), vec!["b"]);

    let (reply, at) = reply_at(&mut waiter);
    assert_eq!(reply, Resp::Nil, "granted once the manual failover gave up");
    assert!(
        at - failover_at >= 4_000,
        "granted {} ms into the failover",
        at - failover_at
    );
    assert_eq!(holders(&mut mc, &key), owned_by("b"));
    // Resume the other masters only once the replica has given up too.
    poll_until(Duration::from_secs(20), "the replica gives up", || {
        replica.log().contains("Manual failover timed out")
    });
    for other in &cluster.nodes[1..] {
        other.signal("CONT");
    }
    assert!(!master.log().contains("ASSERTION"));
    assert_eq!(role(master), "master");
}

/// A manual failover that succeeds: the old master's waiters get Redis's
/// demotion error, and the new master holds the lock with the same deadline.
#[test]
fn a_cluster_failover_demotes_waiters_and_the_new_master_holds_the_lock() {
    let (cluster, replica, key) = cluster_with_replica(5_000);
    let master = &cluster.nodes[0];
    let mut mc = master.connection();
    let token = token_of(&mut mc, &key, "a", LEASE);
    let deadline = pexpiretime(&mut mc, &key);
    let mut waiter = queue(master, &key, "b", 30_000, 0);
    manual_failover(&replica);
    // Redis 7.0 and 8.2 force-unblock blocked clients before a module hears
    // of the demotion (and close the connection); Valkey 9.1's cluster
    // failover lets the module answer first.
    match waiter.read() {
        Resp::Error(text) if text.starts_with("UNBLOCKED") => {
            assert_eq!(waiter.try_read(), None, "the connection is closed")
        }
        Resp::Error(text) => {
            assert_eq!(text, "ERR lock wait aborted: this server became a replica")
        }
        other => panic!("expected the demotion error, got {other:?}"),
    }
    poll_until(Duration::from_secs(20), "the replica is promoted", || {
        role(&replica) == "master"
    });
    let mut rc = replica.connection();
    assert_eq!(holders(&mut rc, &key), owned_by("a"));
    assert_eq!(pexpiretime(&mut rc, &key), deadline);
    assert_eq!(stat(master, "lock_waits_granted"), 0);
    // The new master goes on with greater tokens.
    assert!(token_of(&mut rc, &key, "a", LEASE) > token);
}
