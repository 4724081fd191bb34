//! The lock's commands inside the server: the lease limit
//! (`lock.max-lease-ms`), `INFO lock_stats` counters, command metadata
//! (`COMMAND INFO`), MULTI/EXEC and Lua, memory pressure (`maxmemory`), and
//! WATCH.

use redis::Value;
use redis_lock_test_support::redisson::ACQUIRE_HINCRBY;
use redis_lock_test_support::*;

const LEASE: i64 = 30_000;

// ---------------------------------------------------------------------------
// lock.max-lease-ms
// ---------------------------------------------------------------------------

#[test]
fn max_lease_refuses_longer_leases() {
    let server = Server::start();
    let mut con = server.connection();
    config_set(&mut con, "lock.max-lease-ms", "1000");

    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(1001)
        .query::<Value>(&mut con);
    expect_err(r, "ERR", "lock.max-lease-ms", "LOCK.ACQUIRE above max");
    assert!(!exists(&mut con, b"res"), "refused acquire created the key");

    assert_eq!(
        acquire(&mut con, b"res", b"A", 1000),
        None,
        "exactly max is fine"
    );
    let deadline = pexpiretime(&mut con, b"res");
    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(5000)
        .query::<Value>(&mut con);
    expect_err(
        r,
        "ERR",
        "lock.max-lease-ms",
        "LOCK.ACQUIRE re-entry above max",
    );
    let r = redis::cmd("LOCK.RENEW")
        .arg("res")
        .arg("A")
        .arg(5000)
        .query::<Value>(&mut con);
    expect_err(r, "ERR", "lock.max-lease-ms", "LOCK.RENEW above max");
    // A release is never refused for its lease: it clamps it to the cap
    // (tests/it/production.rs, a_release_with_a_lease_above_the_cap_...).
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "refused commands changed the count"
    );
    assert_eq!(
        pexpiretime(&mut con, b"res"),
        deadline,
        "refused commands changed the lease"
    );

    config_set(&mut con, "lock.max-lease-ms", "0");
    assert_eq!(
        acquire(&mut con, b"res", b"A", 1_000_000_000_000),
        None,
        "0 = unlimited"
    );
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.max-lease-ms")
        .arg("-5")
        .query::<()>(&mut con);
    assert!(bad.is_err(), "a negative lock.max-lease-ms must be refused");
}

#[test]
fn leases_longer_than_100_years_are_refused_alike() {
    const TOO_LONG: &str = "ERR lease-ms must be at most 3155760000000 (milliseconds, 100 years)";
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"held", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"held", b"A", LEASE), None, "count 2");
    let deadline = pexpiretime(&mut con, b"held");

    // 100 years and 1 ms; 285,000 years (fits an i64 deadline); i64::MAX
    // (overflows one); 20 digits (overflows an i64).
    for lease in [
        "3155760000001",
        "9000000000000000",
        "9223372036854775807",
        "99999999999999999999",
    ] {
        for args in [
            &["LOCK.ACQUIRE", "free", "A", lease][..],
            &["LOCK.ACQUIRE", "free", "A", lease, "TOKEN"],
            &["LOCK.ACQUIRE", "held", "A", lease],
            &["LOCK.ACQUIRE", "held", "B", lease, "WAIT", "10"],
            &["LOCK.RENEW", "held", "A", lease],
            &["LOCK.RELEASE", "held", "A", lease],
        ] {
            let reply = command(args).query::<Value>(&mut con);
            match reply {
                Err(e) => assert_eq!(err_text(&e), TOO_LONG, "{args:?}"),
                Ok(v) => panic!("{args:?} was accepted: {v:?}"),
            }
        }
    }
    assert!(
        !exists(&mut con, b"free"),
        "a refused acquire created the key"
    );
    assert!(!exists(&mut con, b"redisson_lock_token:{free}"));
    assert_eq!(
        hgetall(&mut con, b"held"),
        vec![(b"A".to_vec(), b"2".to_vec())]
    );
    assert_eq!(
        pexpiretime(&mut con, b"held"),
        deadline,
        "the lease is untouched"
    );

    // Exactly 100 years is a lease like any other.
    assert_eq!(acquire(&mut con, b"free", b"A", 3_155_760_000_000), None);
    let ttl = pttl(&mut con, b"free");
    assert!(
        ttl > 3_155_759_000_000 && ttl <= 3_155_760_000_000,
        "PTTL {ttl}"
    );
}

// ---------------------------------------------------------------------------
// INFO lock_stats
// ---------------------------------------------------------------------------

#[test]
fn info_counters_move() {
    let server = Server::start();
    let mut con = server.connection();
    let before = server.lock_stats();
    for field in [
        "lock_acquired",
        "lock_reentered",
        "lock_contended",
        "lock_released",
        "lock_forced",
    ] {
        assert_eq!(
            before.get(field),
            Some(&0),
            "INFO lock_stats {field} starts at 0: {before:?}"
        );
    }

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // acquired
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // reentered
    assert!(acquire(&mut con, b"res", b"B", LEASE).is_some()); // contended
    assert!(acquire(&mut con, b"res", b"C", LEASE).is_some()); // contended
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0)); // nothing
    assert_eq!(release(&mut con, b"res", b"B", None), None); // nothing
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1)); // released
    assert_eq!(acquire(&mut con, b"res", b"B", LEASE), None); // acquired
    assert_eq!(force(&mut con, b"res"), 1); // forced
    assert_eq!(force(&mut con, b"res"), 0); // nothing
    assert_eq!(renew(&mut con, b"res", b"B", LEASE), 0); // nothing

    let after = server.lock_stats();
    let expected = [
        ("lock_acquired", 2),
        ("lock_reentered", 1),
        ("lock_contended", 2),
        ("lock_released", 1),
        ("lock_forced", 1),
    ];
    for (field, n) in expected {
        assert_eq!(
            after.get(field),
            Some(&n),
            "INFO lock_stats {field}: {after:?}"
        );
    }
    // Also reachable by the module name.
    let text: String = redis::cmd("INFO")
        .arg("lock")
        .query(&mut con)
        .expect("INFO lock");
    assert_eq!(
        info_field(&text, "lock_acquired").as_deref(),
        Some("2"),
        "INFO lock: {text}"
    );
}

// ---------------------------------------------------------------------------
// Command metadata
// ---------------------------------------------------------------------------

fn command_info(con: &mut redis::Connection, name: &str) -> (Vec<String>, i64, i64, i64) {
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(con)
        .expect("COMMAND INFO");
    let Value::Array(outer) = &v else {
        panic!("COMMAND INFO reply {v:?}")
    };
    let Some(Value::Array(doc)) = outer.first() else {
        panic!("{name} unknown to COMMAND INFO: {v:?}")
    };
    assert_eq!(
        as_string(&doc[0])
            .map(|s| s.to_ascii_lowercase())
            .as_deref(),
        Some(name),
        "{v:?}"
    );
    let flags = match &doc[2] {
        Value::Array(f) | Value::Set(f) => f.iter().filter_map(as_string).collect(),
        other => panic!("flags {other:?}"),
    };
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("key position {other:?}"),
    };
    (flags, int(&doc[3]), int(&doc[4]), int(&doc[5]))
}

#[test]
fn command_info_key_positions_and_flags() {
    let server = Server::start();
    let mut con = server.connection();
    for name in [
        "lock.acquire",
        "lock.renew",
        "lock.release",
        "lock.force",
        "lock.info",
        "lock.racquire",
        "lock.wacquire",
        "lock.rrelease",
        "lock.wrelease",
        "lock.rwrenew",
        "lock.semset",
        "lock.semadd",
        "lock.semacquire",
        "lock.semrelease",
        "lock.semavailable",
        "lock.semdrain",
        "lock.permitacquire",
        "lock.permitrelease",
        "lock.permitrenew",
        "lock.seminfo",
        "lock.latchset",
        "lock.countdown",
        "lock.latchcount",
        "lock.await",
        "lock.latchinfo",
    ] {
        let (flags, first, last, step) = command_info(&mut con, name);
        assert_eq!((first, last, step), (1, 1, 1), "{name} key positions");
        match name {
            "lock.acquire" | "lock.racquire" | "lock.wacquire" | "lock.semset" | "lock.semadd"
            | "lock.semacquire" | "lock.permitacquire" | "lock.latchset" => {
                assert!(
                    flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    flags.contains(&"denyoom".to_string()),
                    "{name} flags {flags:?}"
                );
            }
            "lock.info" | "lock.semavailable" | "lock.seminfo" | "lock.latchcount"
            | "lock.await" | "lock.latchinfo" => {
                assert!(
                    flags.contains(&"readonly".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    !flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
            }
            _ => {
                assert!(
                    flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    !flags.contains(&"denyoom".to_string()),
                    "{name} must work under memory pressure: {flags:?}"
                );
            }
        }
    }
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("LOCK.ACQUIRE")
        .arg("the-key")
        .arg("owner")
        .arg(100)
        .query(&mut con)
        .expect("COMMAND GETKEYS");
    assert_eq!(keys, ["the-key"]);
}

// ---------------------------------------------------------------------------
// MULTI/EXEC and Lua
// ---------------------------------------------------------------------------

#[test]
fn commands_work_inside_multi_exec() {
    let server = Server::start();
    let mut con = server.connection();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("B")
        .arg(LEASE)
        .cmd("LOCK.RENEW")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.RELEASE")
        .arg("res")
        .arg("A")
        .cmd("HGET")
        .arg("res")
        .arg("A")
        .cmd("LOCK.RELEASE")
        .arg("res")
        .arg("A")
        .cmd("EXISTS")
        .arg("res")
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("C")
        .arg(LEASE)
        .cmd("LOCK.FORCE")
        .arg("res")
        .cmd("LOCK.INFO")
        .arg("res")
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert_eq!(replies[0], Value::Nil);
    assert_eq!(replies[1], Value::Nil);
    assert!(
        matches!(replies[2], Value::Int(t) if t > 0 && t <= LEASE),
        "contended in MULTI: {:?}",
        replies[2]
    );
    assert_eq!(replies[3], Value::Int(1));
    assert_eq!(replies[4], Value::Int(0));
    assert_eq!(as_string(&replies[5]).as_deref(), Some("1"));
    assert_eq!(replies[6], Value::Int(1));
    assert_eq!(replies[7], Value::Int(0));
    assert_eq!(replies[8], Value::Nil);
    assert_eq!(replies[9], Value::Int(1));
    assert_eq!(LockInfo::parse(&replies[10]).state, "free");
}

#[test]
fn commands_work_from_lua() {
    let server = Server::start();
    let mut con = server.connection();
    let script = "return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))";
    let run = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg("res")
            .arg(args)
            .query(con)
    };
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "A", "30000"]).expect("acquire in Lua"),
        Value::Nil
    );
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "A", "30000"]).expect("re-enter in Lua"),
        Value::Nil
    );
    let busy = run(&mut con, &["LOCK.ACQUIRE", "B", "30000"]).expect("contended in Lua");
    assert!(
        matches!(busy, Value::Int(t) if t > 0 && t <= LEASE),
        "{busy:?}"
    );
    assert_eq!(
        run(&mut con, &["LOCK.RENEW", "A", "30000"]).expect("renew in Lua"),
        Value::Int(1)
    );
    assert_eq!(
        run(&mut con, &["LOCK.RELEASE", "A"]).expect("release in Lua"),
        Value::Int(0)
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    let info = LockInfo::parse(&run(&mut con, &["LOCK.INFO"]).expect("info in Lua"));
    assert_eq!(info.count_of(b"A"), Some(1));
    assert_eq!(
        run(&mut con, &["LOCK.RELEASE", "A"]).expect("release in Lua"),
        Value::Int(1)
    );
    assert!(!exists(&mut con, b"res"));
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "B", "30000"]).expect("acquire in Lua"),
        Value::Nil
    );
    assert_eq!(
        run(&mut con, &["LOCK.FORCE"]).expect("force in Lua"),
        Value::Int(1)
    );
    // Errors surface through Lua too.
    let err = run(&mut con, &["LOCK.ACQUIRE", "A", "0"]);
    let text = expect_err(err, "", "lease-ms", "bad lease in Lua");
    assert!(text.contains("ERR"), "{text}");
    assert!(!exists(&mut con, b"res"));
}

// ---------------------------------------------------------------------------
// Memory pressure
// ---------------------------------------------------------------------------

#[test]
fn under_maxmemory_only_acquire_is_refused() {
    // deny-oom is on LOCK.ACQUIRE only: holders can still renew, release and
    // operators force while the server is out of memory.
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"other", b"B", LEASE), None);
    config_set(&mut con, "maxmemory-policy", "noeviction");
    config_set(&mut con, "maxmemory", "1");

    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("new")
        .arg("C")
        .arg(LEASE)
        .query::<Value>(&mut con);
    expect_err(r, "OOM", "", "LOCK.ACQUIRE of a new lock under maxmemory");
    assert!(!exists(&mut con, b"new"));
    assert_eq!(
        renew(&mut con, b"res", b"A", LEASE),
        1,
        "renew works under maxmemory"
    );
    assert_eq!(
        release(&mut con, b"res", b"A", None),
        Some(0),
        "release works under maxmemory"
    );
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(force(&mut con, b"other"), 1, "force works under maxmemory");
    assert_eq!(
        lock_info(&mut con, b"res").state,
        "free",
        "LOCK.INFO works under maxmemory"
    );

    config_set(&mut con, "maxmemory", "0");
    assert_eq!(
        acquire(&mut con, b"new", b"C", LEASE),
        None,
        "acquire works again without the limit"
    );
}

// ---------------------------------------------------------------------------
// WATCH (optimistic transactions on lock keys)
// ---------------------------------------------------------------------------

/// WATCHes `key` on one connection, runs `args` on another, then tries an
/// EXEC: true if the transaction went through (the key was not signalled as
/// modified).
fn watch_survives(server: &Server, key: &str, args: &[&str]) -> bool {
    let mut watcher = server.connection();
    let mut other = server.connection();
    let _: () = redis::cmd("WATCH")
        .arg(key)
        .query(&mut watcher)
        .expect("WATCH");
    let _ = command(args).query::<Value>(&mut other);
    let _: () = redis::cmd("MULTI").query(&mut watcher).expect("MULTI");
    let queued: String = redis::cmd("PING")
        .query(&mut watcher)
        .expect("PING in MULTI");
    assert_eq!(queued, "QUEUED");
    match redis::cmd("EXEC")
        .query::<Value>(&mut watcher)
        .expect("EXEC")
    {
        Value::Nil => false,
        Value::Array(_) => true,
        other => panic!("EXEC reply {other:?}"),
    }
}

#[test]
fn watch_is_aborted_by_lock_changes() {
    let server = Server::start();
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "acquire of a free lock"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "re-entry"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RENEW", "res", "A", "30000"]),
        "renew by the holder"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RELEASE", "res", "A"]),
        "partial release"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RELEASE", "res", "A"]),
        "last release"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "acquire again"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.FORCE", "res"]),
        "force"
    );
}

/// A command that changes nothing must not abort other clients' WATCH (the
/// module signals keys as modified only when it writes them), just as a
/// contended Redisson acquire script does not.
#[test]
fn watch_is_not_aborted_by_commands_that_change_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    set(&mut con, "str", "v");

    // Control: Redisson's own acquire script, contended, leaves a WATCHer alone.
    assert!(
        watch_survives(
            &server,
            "res",
            &["EVAL", ACQUIRE_HINCRBY, "1", "res", "30000", "B"]
        ),
        "control: a contended Redisson acquire script does not abort a WATCHer"
    );

    let no_ops: [(&str, &[&str]); 9] = [
        ("res", &["LOCK.INFO", "res"]),
        ("res", &["LOCK.ACQUIRE", "res", "B", "30000"]),
        ("res", &["LOCK.RENEW", "res", "B", "30000"]),
        ("res", &["LOCK.RELEASE", "res", "B"]),
        ("missing", &["LOCK.RENEW", "missing", "B", "30000"]),
        ("missing", &["LOCK.RELEASE", "missing", "B"]),
        ("missing", &["LOCK.FORCE", "missing"]),
        ("str", &["LOCK.FORCE", "str"]),
        ("res", &["LOCK.ACQUIRE", "res", "B", "0"]),
    ];
    let mut aborted = Vec::new();
    for (key, args) in no_ops {
        if !watch_survives(&server, key, args) {
            aborted.push(args.join(" "));
        }
    }
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    assert!(
        aborted.is_empty(),
        "commands that changed nothing still aborted a WATCHer's EXEC (spurious modified-key signal): {aborted:?}"
    );
}
