//! Lock writes replicate as plain effects (a grant as one `RESTORE key
//! <absolute> <hash> REPLACE ABSTTL`; `HSET`, `PEXPIREAT <absolute>`, `DEL`):
//! replicas with and without the module, and an AOF reloaded after a crash,
//! end with exactly the master's hash, encoding and deadline.

use std::collections::HashMap;

use redis::{Connection, Value};
use redis_lock_test_support::*;

/// A master with the module, a replica with it and a replica without it.
struct Trio {
    master: Server,
    with_module: Server,
    plain: Server,
}

impl Trio {
    fn start() -> Trio {
        let master = Server::start();
        let (with_module, plain) = module_and_plain_replicas(&master);
        Trio {
            master,
            with_module,
            plain,
        }
    }

    fn sync(&self) {
        wait_for_replicas(&self.master, &[&self.with_module, &self.plain]);
    }

    /// After a sync: both replicas hold exactly the master's hash and deadline for `key`.
    fn assert_same(&self, key: &[u8], step: &str) {
        self.sync();
        let mut m = self.master.connection();
        let hash = hgetall(&mut m, key);
        let deadline = pexpiretime(&mut m, key);
        let existed = exists(&mut m, key);
        let encoding = object_encoding(&mut m, key);
        for (name, replica) in [
            ("replica with the module", &self.with_module),
            ("replica without the module", &self.plain),
        ] {
            let mut r = replica.connection();
            assert_eq!(
                hgetall(&mut r, key),
                hash,
                "{step}: {name} hash of {:?}",
                String::from_utf8_lossy(key)
            );
            assert_eq!(
                pexpiretime(&mut r, key),
                deadline,
                "{step}: {name} absolute deadline of {:?}",
                String::from_utf8_lossy(key)
            );
            assert_eq!(
                object_encoding(&mut r, key),
                encoding,
                "{step}: {name} encoding of {:?}",
                String::from_utf8_lossy(key)
            );
            assert_eq!(
                exists(&mut r, key),
                existed,
                "{step}: {name} existence of {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }
}

#[test]
fn replicas_with_and_without_module_hold_the_same_lock() {
    let trio = Trio::start();
    let mut m = trio.master.connection();

    assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    assert_eq!(
        hgetall(&mut m, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    trio.assert_same(b"res", "acquire");

    assert_eq!(acquire(&mut m, b"res", b"A", 50_000), None);
    assert_eq!(
        hgetall(&mut m, b"res"),
        vec![(b"A".to_vec(), b"2".to_vec())]
    );
    trio.assert_same(b"res", "re-entry");

    assert_eq!(renew(&mut m, b"res", b"A", 70_000), 1);
    trio.assert_same(b"res", "renew");

    assert_eq!(release(&mut m, b"res", b"A", Some(40_000)), Some(0));
    assert_eq!(
        hgetall(&mut m, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    trio.assert_same(b"res", "partial release with lease");

    assert_eq!(acquire(&mut m, b"res", b"A", 45_000), None);
    let deadline = pexpiretime(&mut m, b"res");
    assert_eq!(release(&mut m, b"res", b"A", None), Some(0));
    assert_eq!(pexpiretime(&mut m, b"res"), deadline);
    trio.assert_same(b"res", "partial release keeping the lease");

    assert_eq!(release(&mut m, b"res", b"A", None), Some(1));
    assert!(!exists(&mut m, b"res"));
    trio.assert_same(b"res", "last release");

    assert_eq!(acquire(&mut m, b"other", b"B", 60_000), None);
    assert_eq!(acquire(&mut m, b"other", b"B", 60_000), None);
    trio.assert_same(b"other", "acquire before force");
    assert_eq!(force(&mut m, b"other"), 1);
    trio.assert_same(b"other", "force");

    // Binary owner and key.
    let key: &[u8] = b"bin\x00\xff";
    let owner: &[u8] = b"\x00owner\xfe";
    assert_eq!(acquire(&mut m, key, owner, 60_000), None);
    assert_eq!(acquire(&mut m, key, owner, 60_000), None);
    trio.assert_same(key, "binary acquire");
    assert_eq!(release(&mut m, key, owner, None), Some(0));
    trio.assert_same(key, "binary partial release");

    // The farthest deadline: the longest lease accepted, 100 years.
    let now = server_now_ms(&mut m);
    assert_eq!(acquire(&mut m, b"far", b"F", 3_155_760_000_000), None);
    assert!(pexpiretime(&mut m, b"far") >= now + 3_155_760_000_000);
    trio.assert_same(b"far", "a deadline 100 years away");

    // A lock left held, to compare LOCK.INFO on the replica with the module.
    assert_eq!(acquire(&mut m, b"held", b"C", 60_000), None);
    trio.assert_same(b"held", "held lock");

    // The replication stream carried effects, never LOCK.* commands.
    for (name, replica) in [
        ("replica with the module", &trio.with_module),
        ("replica without the module", &trio.plain),
    ] {
        let stats = replica.command_stats();
        let lock_cmds: Vec<&String> = stats.keys().filter(|k| k.starts_with("lock.")).collect();
        assert!(
            lock_cmds.is_empty(),
            "{name} executed {lock_cmds:?} from the replication stream: {stats:?}"
        );
        for effect in ["restore", "hset", "pexpireat", "del"] {
            assert!(
                stats.get(effect).copied().unwrap_or(0) > 0,
                "{name} never ran {effect}: {stats:?}"
            );
        }
        for relative in ["pexpire", "expire", "hincrby"] {
            assert!(
                !stats.contains_key(relative),
                "{name} ran {relative} (not an absolute effect): {stats:?}"
            );
        }
    }

    // LOCK.INFO is a read: it answers on the replica with the module.
    let mut r = trio.with_module.connection();
    let info = lock_info(&mut r, b"held");
    let deadline = pexpiretime(&mut m, b"held");
    assert_eq!(info.state, "held");
    assert_eq!(info.count_of(b"C"), Some(1));
    assert!(
        (info.deadline_ms - deadline).abs() <= 50,
        "replica LOCK.INFO deadline {} vs master {deadline}",
        info.deadline_ms
    );
}

/// `OBJECT ENCODING key`, or `None` without the key.
fn object_encoding(con: &mut Connection, key: &[u8]) -> Option<String> {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(con)
        .expect("OBJECT ENCODING")
}

#[test]
fn a_grant_replicates_as_one_restore_unless_the_hash_has_other_fields() {
    let trio = Trio::start();
    let mut m = trio.master.connection();
    let before = effect_counts(&trio.plain);
    assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    trio.assert_same(b"res", "a fresh grant");
    let after = effect_counts(&trio.plain);
    let ran = |counts: &HashMap<String, u64>, name: &str| counts.get(name).copied().unwrap_or(0);
    assert_eq!(
        ran(&after, "restore"),
        ran(&before, "restore") + 1,
        "{after:?}"
    );
    for name in ["hset", "pexpireat", "multi"] {
        assert_eq!(ran(&after, name), ran(&before, name), "{name}: {after:?}");
    }

    // An owner longer than hash-max-listpack-value (64): the master's hash
    // is a hashtable, and so is the replica's.
    let long = [b'o'; 100];
    assert_eq!(acquire(&mut m, b"long", &long[..], 60_000), None);
    assert_eq!(
        object_encoding(&mut m, b"long").as_deref(),
        Some("hashtable")
    );
    trio.assert_same(b"long", "a long owner");

    // A field someone else wrote into a held lock stays on the replicas: the
    // re-entry replicates HSET + PEXPIREAT, not a RESTORE of a hash without it.
    let _: i64 = redis::cmd("HSET")
        .arg("res")
        .arg("other")
        .arg("x")
        .query(&mut m)
        .unwrap();
    assert_eq!(acquire(&mut m, b"res", b"A", 50_000), None);
    assert_eq!(hgetall(&mut m, b"res").len(), 2);
    trio.assert_same(b"res", "a re-entry into a hash with another field");
}

fn effect_counts(replica: &Server) -> HashMap<String, u64> {
    replica
        .command_stats()
        .into_iter()
        .filter(|(k, _)| {
            ["restore", "hset", "pexpireat", "del", "multi", "exec"].contains(&k.as_str())
        })
        .collect()
}

#[test]
fn commands_that_change_nothing_replicate_nothing() {
    let trio = Trio::start();
    let mut m = trio.master.connection();
    assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    trio.assert_same(b"res", "setup");
    let before_mod = effect_counts(&trio.with_module);
    let before_plain = effect_counts(&trio.plain);

    assert!(acquire(&mut m, b"res", b"B", 60_000).is_some());
    assert_eq!(renew(&mut m, b"res", b"B", 60_000), 0);
    assert_eq!(renew(&mut m, b"missing", b"B", 60_000), 0);
    assert_eq!(release(&mut m, b"res", b"B", None), None);
    assert_eq!(release(&mut m, b"missing", b"B", Some(1000)), None);
    assert_eq!(force(&mut m, b"missing"), 0);
    let _ = lock_info(&mut m, b"res");
    let _ = redis::cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(0)
        .query::<Value>(&mut m); // error
                                 // A marker write, so the sync below waits past everything above.
    set(&mut m, "marker", 1);
    trio.assert_same(b"res", "no-ops");

    assert_eq!(
        effect_counts(&trio.with_module),
        before_mod,
        "no-op lock commands replicated effects"
    );
    assert_eq!(
        effect_counts(&trio.plain),
        before_plain,
        "no-op lock commands replicated effects"
    );
}

/// A master on which owner A holds `res` `holds` times (60 s lease), a
/// replica with the module that has caught up, and a connection to the
/// master: where the tests of a replica's own copy of a lock start.
fn master_holding_res_and_its_replica(holds: usize) -> (Server, Server, Connection) {
    let master = Server::start();
    let replica = Server::start();
    replica.replicaof(&master);
    let mut m = master.connection();
    for _ in 0..holds {
        assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    }
    wait_for_replicas(&master, &[&replica]);
    (master, replica, m)
}

#[test]
fn replica_refuses_lock_writes_with_readonly() {
    let (_master, replica, mut m) = master_holding_res_and_its_replica(1);

    let mut r = replica.connection();
    let writes: [&[&str]; 5] = [
        &["LOCK.ACQUIRE", "res", "A", "60000"],
        &["LOCK.ACQUIRE", "new", "A", "60000"],
        &["LOCK.RENEW", "res", "A", "60000"],
        &["LOCK.RELEASE", "res", "A"],
        &["LOCK.FORCE", "res"],
    ];
    for args in writes {
        let r2 = command(args).query::<Value>(&mut r);
        expect_err(r2, "READONLY", "", &args.join(" "));
    }
    assert_eq!(
        hgetall(&mut r, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "the replica's copy is unchanged"
    );
    assert!(!exists(&mut r, b"new"));
    assert_eq!(
        lock_info(&mut r, b"res").count_of(b"A"),
        Some(1),
        "LOCK.INFO works on a replica"
    );
    assert_eq!(
        hgetall(&mut m, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "the master is unchanged"
    );
}

#[test]
fn replica_attached_after_the_lock_gets_it_by_full_sync() {
    let master = Server::start();
    let mut m = master.connection();
    assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    assert_eq!(acquire(&mut m, b"res", b"A", 60_000), None);
    let deadline = pexpiretime(&mut m, b"res");
    let plain = Server::with(Options::new().without_module());
    plain.replicaof(&master);
    let mut r = plain.connection();
    assert_eq!(
        hgetall(&mut r, b"res"),
        vec![(b"A".to_vec(), b"2".to_vec())]
    );
    assert_eq!(pexpiretime(&mut r, b"res"), deadline);
    // And the stream continues after the full sync.
    assert_eq!(release(&mut m, b"res", b"A", None), Some(0));
    assert_eq!(release(&mut m, b"res", b"A", None), Some(1));
    wait_for_replicas(&master, &[&plain]);
    assert!(!exists(&mut r, b"res"));
}

// ---------------------------------------------------------------------------
// AOF
// ---------------------------------------------------------------------------

/// Every file under `dir` except the log, searched for LOCK.* command names.
fn lock_commands_in_files(dir: &std::path::Path) -> Vec<String> {
    let files = files_under(dir);
    let mut found = Vec::new();
    for file in files {
        if file.file_name().and_then(|n| n.to_str()) == Some("redis.log") {
            continue;
        }
        let bytes = std::fs::read(&file)
            .expect("read a data file")
            .to_ascii_lowercase();
        for name in ["lock.acquire", "lock.renew", "lock.release", "lock.force"] {
            if bytes.windows(name.len()).any(|w| w == name.as_bytes()) {
                found.push(format!("{name} in {}", file.display()));
            }
        }
    }
    found
}

fn aof_files_exist(dir: &std::path::Path) -> bool {
    let aof_dir = dir.join("appendonlydir");
    aof_dir.is_dir() || dir.join("appendonly.aof").is_file()
}

/// A lock's hash and absolute deadline.
type State = (Vec<(Vec<u8>, Vec<u8>)>, i64);

fn state(con: &mut Connection, key: &[u8]) -> State {
    (hgetall(con, key), pexpiretime(con, key))
}

/// Asserts that `server`, started on the AOF of
/// `aof_reload_after_crash_keeps_hash_count_and_exact_deadline`, holds `res`
/// and `kept` as given and neither the released nor the forced lock; `who`
/// names the server. The same check for the module's reload and a plain
/// server's. Returns a connection to `server`.
fn assert_loaded_from_the_aof(server: &Server, res: &State, kept: &State, who: &str) -> Connection {
    let mut con = server.connection();
    assert_eq!(
        &state(&mut con, b"res"),
        res,
        "{who}: lock hash and exact deadline"
    );
    assert_eq!(&state(&mut con, b"kept"), kept, "{who}: kept lease");
    assert!(
        !exists(&mut con, b"gone"),
        "{who}: a released lock came back"
    );
    assert!(
        !exists(&mut con, b"forced"),
        "{who}: a forced lock came back"
    );
    con
}

#[test]
fn aof_reload_after_crash_keeps_hash_count_and_exact_deadline() {
    let dir = TestDir::new("aof");
    let mut first = Server::with(Options::new().aof().dir(dir.path()));
    let mut con = first.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", 60_000), None);
    assert_eq!(acquire(&mut con, b"res", b"A", 60_000), None); // re-entrant count 2
    assert_eq!(acquire(&mut con, b"gone", b"B", 60_000), None);
    assert_eq!(release(&mut con, b"gone", b"B", None), Some(1));
    assert_eq!(acquire(&mut con, b"forced", b"C", 60_000), None);
    assert_eq!(force(&mut con, b"forced"), 1);
    assert_eq!(acquire(&mut con, b"kept", b"D", 90_000), None);
    assert_eq!(acquire(&mut con, b"kept", b"D", 90_000), None);
    assert_eq!(release(&mut con, b"kept", b"D", None), Some(0)); // count 1, lease kept
    let res = state(&mut con, b"res");
    let kept = state(&mut con, b"kept");
    assert_eq!(res.0, vec![(b"A".to_vec(), b"2".to_vec())]);
    assert!(res.1 > 0 && kept.1 > 0);
    drop(con);
    // appendfsync always: every write is on disk before its reply.
    first.crash();
    assert!(!first.is_alive());
    assert!(
        aof_files_exist(dir.path()),
        "no AOF written in {}",
        dir.path().display()
    );
    let found = lock_commands_in_files(dir.path());
    assert!(
        found.is_empty(),
        "the AOF holds LOCK.* commands instead of effects: {found:?}"
    );

    // Restart with the module on the same directory.
    let mut second = Server::with(Options::new().aof().dir(dir.path()));
    let mut con =
        assert_loaded_from_the_aof(&second, &res, &kept, "module server after the AOF reload");
    assert!(
        acquire(&mut con, b"res", b"B", 60_000).is_some(),
        "the reloaded lock still excludes others"
    );
    // The re-entrant count survived: two releases needed.
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0));
    let res_after = state(&mut con, b"res");
    assert_eq!(res_after, (vec![(b"A".to_vec(), b"1".to_vec())], res.1));
    drop(con);
    second.crash();

    // A server without the module loads the same AOF: it holds only plain commands.
    let third = Server::with(Options::new().aof().without_module().dir(dir.path()));
    assert_loaded_from_the_aof(&third, &res_after, &kept, "plain server reading the AOF");
}

#[test]
fn lazily_expired_lock_taken_by_another_owner_replicates_in_order() {
    // With active expiry off, the master notices A's lapsed lease only when B's
    // LOCK.ACQUIRE opens the key: the expiry's DEL must reach the replicas
    // before B's HSET, or they would lose B's lock (or keep A in it).
    let master = Server::with(Options::new().config("enable-debug-command", &["yes"]));
    let (with_module, plain) = module_and_plain_replicas(&master);
    let mut m = master.connection();
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut m)
        .expect("DEBUG SET-ACTIVE-EXPIRE 0");

    assert_eq!(acquire(&mut m, b"res", b"A", 50), None);
    let deadline = pexpiretime(&mut m, b"res");
    poll_until(
        std::time::Duration::from_secs(2),
        "the server clock passes A's deadline",
        || server_now_ms(&mut m) > deadline + 5,
    );
    assert_eq!(
        acquire(&mut m, b"res", b"B", 60_000),
        None,
        "B takes the lapsed lock"
    );
    assert_eq!(
        hgetall(&mut m, b"res"),
        vec![(b"B".to_vec(), b"1".to_vec())]
    );
    let deadline = pexpiretime(&mut m, b"res");
    wait_for_replicas(&master, &[&with_module, &plain]);
    for (name, replica) in [
        ("replica with the module", &with_module),
        ("replica without the module", &plain),
    ] {
        let mut r = replica.connection();
        assert_eq!(
            hgetall(&mut r, b"res"),
            vec![(b"B".to_vec(), b"1".to_vec())],
            "{name}"
        );
        assert_eq!(pexpiretime(&mut r, b"res"), deadline, "{name}");
    }
}

#[test]
fn lock_writes_from_multi_and_lua_replicate() {
    let trio = Trio::start();
    let mut m = trio.master.connection();

    let _: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("tx")
        .arg("A")
        .arg(60_000)
        .cmd("LOCK.ACQUIRE")
        .arg("tx")
        .arg("A")
        .arg(50_000)
        .cmd("LOCK.ACQUIRE")
        .arg("tx-gone")
        .arg("A")
        .arg(60_000)
        .cmd("LOCK.FORCE")
        .arg("tx-gone")
        .cmd("SET")
        .arg("tx-plain")
        .arg("1")
        .query(&mut m)
        .expect("MULTI/EXEC of lock commands");
    assert_eq!(hgetall(&mut m, b"tx"), vec![(b"A".to_vec(), b"2".to_vec())]);
    trio.assert_same(b"tx", "MULTI acquire + re-entry");
    trio.assert_same(b"tx-gone", "MULTI acquire + force");

    let script = "redis.call('LOCK.ACQUIRE', KEYS[1], 'L', '60000'); \
                  redis.call('LOCK.ACQUIRE', KEYS[1], 'L', '40000'); \
                  redis.call('LOCK.RELEASE', KEYS[1], 'L'); \
                  redis.call('LOCK.RENEW', KEYS[1], 'L', '70000'); \
                  return redis.call('HGET', KEYS[1], 'L')";
    let count: String = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("lua")
        .query(&mut m)
        .expect("EVAL of lock commands");
    assert_eq!(count, "1");
    trio.assert_same(b"lua", "Lua acquire, re-entry, release, renew");
    let freed: i64 = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.RELEASE', KEYS[1], 'L')")
        .arg(1)
        .arg("lua")
        .query(&mut m)
        .expect("EVAL release");
    assert_eq!(freed, 1);
    trio.assert_same(b"lua", "Lua last release");
}

#[test]
fn locks_in_another_database_replicate_to_that_database() {
    let trio = Trio::start();
    let mut m3 = trio.master.connection_db(3);
    assert_eq!(acquire(&mut m3, b"res", b"A", 60_000), None);
    assert_eq!(acquire(&mut m3, b"res", b"A", 60_000), None);
    let deadline = pexpiretime(&mut m3, b"res");
    trio.sync();
    for (name, replica) in [
        ("replica with the module", &trio.with_module),
        ("replica without the module", &trio.plain),
    ] {
        let mut r3 = replica.connection_db(3);
        assert_eq!(
            hgetall(&mut r3, b"res"),
            vec![(b"A".to_vec(), b"2".to_vec())],
            "{name}, db 3"
        );
        assert_eq!(pexpiretime(&mut r3, b"res"), deadline, "{name}, db 3");
        assert!(
            !exists(&mut replica.connection(), b"res"),
            "{name}: the lock leaked into db 0"
        );
    }
    assert_eq!(release(&mut m3, b"res", b"A", None), Some(0));
    assert_eq!(release(&mut m3, b"res", b"A", None), Some(1));
    trio.sync();
    for replica in [&trio.with_module, &trio.plain] {
        assert!(
            !exists(&mut replica.connection_db(3), b"res"),
            "released in db 3 on the replica"
        );
    }
}

#[test]
fn promoted_replica_continues_the_lock() {
    // Failover: the replica with the module becomes a master and the holder
    // carries on with the same hold count and lease.
    let (_master, replica, mut m) = master_holding_res_and_its_replica(2);
    let deadline = pexpiretime(&mut m, b"res");

    let mut r = replica.connection();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .expect("REPLICAOF NO ONE");
    let mut sub = Subscriber::new(&replica, &[&unlock_channel(b"res")]);
    assert_eq!(
        pexpiretime(&mut r, b"res"),
        deadline,
        "the lease survives the promotion"
    );
    assert!(
        acquire(&mut r, b"res", b"B", 60_000).is_some(),
        "the promoted server still excludes others"
    );
    assert_eq!(release(&mut r, b"res", b"A", None), Some(0));
    assert_eq!(release(&mut r, b"res", b"A", None), Some(1));
    let messages = sub.drain(&mut r);
    assert_eq!(
        messages,
        vec![(unlock_channel(b"res"), b"0".to_vec())],
        "{:?}",
        show(&messages)
    );
    assert_eq!(acquire(&mut r, b"res", b"B", 60_000), None);
}
