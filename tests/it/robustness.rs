//! Robustness: thousands of random argument lists (alone, inside MULTI and
//! from Lua) leave the server alive, its wrong-type keys untouched and its
//! lock hashes well formed; many lock cycles leave memory flat. (The table
//! of malformed commands is in `bad_input.rs`.)

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, ConnectionLike, Value};
use redis_lock_test_support::*;

// ---------------------------------------------------------------------------
// Random argument lists
// ---------------------------------------------------------------------------

const COMMANDS: [&str; 28] = [
    "LOCK.SEMSET",
    "LOCK.SEMADD",
    "LOCK.SEMACQUIRE",
    "LOCK.SEMRELEASE",
    "LOCK.SEMAVAILABLE",
    "LOCK.SEMDRAIN",
    "LOCK.PERMITACQUIRE",
    "LOCK.PERMITRELEASE",
    "LOCK.PERMITRENEW",
    "LOCK.SEMINFO",
    "LOCK.LATCHSET",
    "LOCK.COUNTDOWN",
    "LOCK.LATCHCOUNT",
    "LOCK.AWAIT",
    "LOCK.LATCHINFO",
    "LOCK.RACQUIRE",
    "LOCK.WACQUIRE",
    "LOCK.RRELEASE",
    "LOCK.WRELEASE",
    "LOCK.RWRENEW",
    "LOCK.ACQUIRE",
    "LOCK.RENEW",
    "LOCK.RELEASE",
    "LOCK.FORCE",
    "LOCK.INFO",
    "LOCK.FENCE",
    "LOCK.CANCEL",
    "lock.acquire",
];
const KEYS: [&[u8]; 6] = [b"fz:a", b"fz:b", b"fz:str", b"fz:list", b"fz:\x00\xff", b""];

fn random_bytes(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..24);
    (0..len).map(|_| rng.gen()).collect()
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    const POOL: [&str; 30] = [
        "",
        "0",
        "-1",
        "1",
        "2",
        "100",
        "30000",
        "60000",
        "1000000000000",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551616",
        "+5",
        "1.5",
        "1e3",
        " 5",
        "05",
        "abc",
        "o",
        "p",
        "WAITS",
        "NOWAIT",
        "TOKEN",
        "token",
        "nil",
        "fz:a",
        "fz:str",
        "\u{0}",
        "99999999999999999999999",
    ];
    match rng.gen_range(0..10) {
        0..=5 => POOL[rng.gen_range(0..POOL.len())].as_bytes().to_vec(),
        6 => KEYS[rng.gen_range(0..KEYS.len())].to_vec(),
        7 => random_bytes(rng),
        8 => b"WAIT".to_vec(), // only ever kept where it cannot block, see below
        _ => rng.gen_range(-5i64..200_000).to_string().into_bytes(),
    }
}

/// Values a WAIT timeout parser must refuse.
const INVALID_TIMEOUTS: [&str; 7] = [
    "-1",
    "x",
    "1.5",
    "",
    "+5",
    "-9223372036854775808",
    "9223372036854775808",
];

/// Asserts that the server still answers `PING` on `con` and still holds
/// `fz:str`'s "keep me", which no fuzzed command may change; `after` names
/// the fuzz. The closing check of both fuzz tests.
fn assert_alive_and_fz_str_kept(con: &mut Connection, after: &str) {
    let pong: String = redis::cmd("PING")
        .query(con)
        .unwrap_or_else(|e| panic!("PING after {after}: {e}"));
    assert_eq!(pong, "PONG");
    let s: Option<String> = redis::cmd("GET")
        .arg("fz:str")
        .query(con)
        .expect("GET fz:str");
    assert_eq!(
        s.as_deref(),
        Some("keep me"),
        "the string key was damaged ({after})"
    );
}

/// Mostly `valid`, sometimes anything.
fn mostly(rng: &mut StdRng, valid: &[&str]) -> Vec<u8> {
    if rng.gen_bool(0.85) {
        valid[rng.gen_range(0..valid.len())].as_bytes().to_vec()
    } else {
        random_value(rng)
    }
}

fn random_command(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let name = COMMANDS[rng.gen_range(0..COMMANDS.len())];
    let mut args = vec![name.as_bytes().to_vec()];
    if rng.gen_bool(0.5) {
        // Random arity, random arguments.
        let arity = rng.gen_range(0..=7);
        for i in 0..arity {
            // Mostly a real key in the key slot, so the lock logic is reached.
            if i == 0 && rng.gen_bool(0.8) {
                args.push(KEYS[rng.gen_range(0..KEYS.len())].to_vec());
            } else {
                args.push(random_value(rng));
            }
        }
    } else {
        // The command's own shape, each argument mostly valid.
        const OWNERS: [&str; 3] = ["o", "p", "q"];
        const LEASES: [&str; 4] = ["1", "100", "30000", "60000"];
        args.push(KEYS[rng.gen_range(0..KEYS.len())].to_vec());
        let name = name.to_ascii_uppercase();
        match name.as_str() {
            "LOCK.ACQUIRE" | "LOCK.RACQUIRE" | "LOCK.WACQUIRE" => {
                args.push(mostly(rng, &OWNERS));
                args.push(mostly(rng, &LEASES));
                if rng.gen_bool(0.2) {
                    args.push(mostly(rng, &["WAIT"]));
                    args.push(random_value(rng));
                }
                if rng.gen_bool(0.2) {
                    args.push(mostly(rng, &["KEEP"]));
                    args.push(mostly(rng, &GRACES));
                }
                // The lock's TOKEN a little more often than a read-write lock's.
                let token_odds = if name == "LOCK.ACQUIRE" { 0.3 } else { 0.2 };
                if rng.gen_bool(token_odds) {
                    args.push(mostly(rng, &["TOKEN"]));
                }
            }
            "LOCK.FENCE" => {
                args.push(mostly(rng, &["1", "5", "1790000000000000"]));
            }
            "LOCK.RENEW" | "LOCK.RWRENEW" => {
                args.push(mostly(rng, &OWNERS));
                args.push(mostly(rng, &LEASES));
            }
            "LOCK.RRELEASE" => {
                args.push(mostly(rng, &OWNERS));
            }
            "LOCK.RELEASE" | "LOCK.WRELEASE" => {
                args.push(mostly(rng, &OWNERS));
                if rng.gen_bool(0.5) {
                    args.push(mostly(rng, &LEASES));
                }
            }
            "LOCK.SEMSET" | "LOCK.LATCHSET" | "LOCK.SEMADD" | "LOCK.SEMACQUIRE"
            | "LOCK.SEMRELEASE" | "LOCK.PERMITACQUIRE" => {
                args.push(mostly(rng, &["0", "1", "2", "5", "-1"]));
                for option in ["PX", "WAIT", "LEASE", "KEEP", "WAITER"] {
                    if rng.gen_bool(0.2) {
                        args.push(mostly(rng, &[option]));
                        let values = match option {
                            "KEEP" => &GRACES[..],
                            "WAITER" => &OWNERS[..],
                            _ => &LEASES[..],
                        };
                        args.push(mostly(rng, values));
                    }
                }
            }
            "LOCK.PERMITRELEASE" | "LOCK.PERMITRENEW" => {
                args.push(mostly(
                    rng,
                    &[PERMIT_ID, "00ff00ff00ff00ff00ff00ff00ff00ff"],
                ));
                args.push(mostly(rng, &LEASES));
            }
            "LOCK.AWAIT" => {
                args.push(random_value(rng));
                for (option, values) in [("KEEP", &GRACES[..]), ("WAITER", &OWNERS[..])] {
                    if rng.gen_bool(0.3) {
                        args.push(mostly(rng, &[option]));
                        args.push(mostly(rng, values));
                    }
                }
            }
            "LOCK.CANCEL" => {
                args.push(mostly(rng, &OWNERS));
            }
            _ => {}
        }
    }
    // Semaphores and latches are strings: kept on keys of their own (and
    // the string and list keys), off the lock keys checked as hashes below.
    if is_counter_command(&args[0]) && args.len() > 1 {
        const COUNTERS: [&str; 4] = ["fz:s1", "fz:s2", "fz:str", "fz:list"];
        args[1] = COUNTERS[rng.gen_range(0..COUNTERS.len())]
            .as_bytes()
            .to_vec();
    }
    // `LOCK.AWAIT` on a latch would block: its timeout is always invalid.
    if args[0].eq_ignore_ascii_case(b"LOCK.AWAIT") && args.len() >= 3 {
        args[2] = INVALID_TIMEOUTS[rng.gen_range(0..INVALID_TIMEOUTS.len())]
            .as_bytes()
            .to_vec();
    }
    // A fence is a string: kept off the lock keys, which the checks below
    // read as hashes.
    if args[0].eq_ignore_ascii_case(b"LOCK.FENCE") && args.len() > 1 {
        const FENCES: [&str; 3] = ["fz:fence", "fz:str", "fz:list"];
        args[1] = FENCES[rng.gen_range(0..FENCES.len())].as_bytes().to_vec();
    }
    // `LOCK.ACQUIRE key owner lease [TOKEN] WAIT <valid timeout>` could block
    // on a held lock: a WAIT among the options always gets an invalid timeout.
    let waits = [
        &b"LOCK.ACQUIRE"[..],
        b"LOCK.RACQUIRE",
        b"LOCK.WACQUIRE",
        b"LOCK.SEMACQUIRE",
        b"LOCK.PERMITACQUIRE",
    ];
    if waits.iter().any(|name| args[0].eq_ignore_ascii_case(name)) {
        for i in 3..args.len().saturating_sub(1) {
            if args[i].eq_ignore_ascii_case(b"WAIT") {
                args[i + 1] = INVALID_TIMEOUTS[rng.gen_range(0..INVALID_TIMEOUTS.len())]
                    .as_bytes()
                    .to_vec();
            }
        }
    }
    args
}

/// `KEEP` graces, valid and not.
const GRACES: [&str; 5] = ["0", "1", "5000", "86400000", "86400001"];

/// A permit id the fuzz uses (unknown to the server, mostly).
const PERMIT_ID: &str = "000102030405060708090a0b0c0d0e0f";

/// Whether `name` is a semaphore's or latch's command.
fn is_counter_command(name: &[u8]) -> bool {
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    [
        "LOCK.SEM",
        "LOCK.PERMIT",
        "LOCK.LATCH",
        "LOCK.COUNTDOWN",
        "LOCK.AWAIT",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// Whether `reply` is one `args[0]` may give.
fn reply_is_plausible(args: &[Vec<u8>], reply: &Value) -> bool {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    if let Value::ServerError(e) = reply {
        // A waiter id named by an earlier LOCK.CANCEL on a semaphore,
        // permits or latch is refused for the grace (`docs/waiting.md`).
        let waiter_id = args.iter().any(|a| a.eq_ignore_ascii_case(b"WAITER"));
        return e.code() == "ERR"
            || e.code() == "WRONGTYPE"
            || (name == "LOCK.FENCE" && e.code() == "STALE")
            || (waiter_id && e.code() == "CANCELLED");
    }
    match name.as_str() {
        "LOCK.ACQUIRE" | "LOCK.RACQUIRE" | "LOCK.WACQUIRE" => match reply {
            Value::Nil => true,
            Value::Int(ttl) => *ttl >= -1,
            Value::Array(pair) => matches!(
                pair.as_slice(),
                [Value::Int(-1), Value::Int(1..)] | [Value::Int(0..), Value::Int(-1)]
            ),
            _ => false,
        },
        "LOCK.FENCE" => matches!(reply, Value::Int(1..)),
        "LOCK.RENEW" | "LOCK.FORCE" | "LOCK.RWRENEW" => matches!(reply, Value::Int(0 | 1)),
        "LOCK.RELEASE" | "LOCK.RRELEASE" | "LOCK.WRELEASE" => {
            matches!(reply, Value::Nil | Value::Int(0 | 1))
        }
        // 7 fields (a lock), 10 (a read-write lock), as a flat array.
        "LOCK.INFO" => {
            matches!(reply, Value::Array(items) if items.len() == 14 || items.len() == 20)
        }
        // Nothing waits in the fuzz: a cancel finds a grant or nothing.
        "LOCK.CANCEL" => match reply {
            Value::Array(items) => matches!(
                items.first().and_then(as_string).as_deref(),
                Some("granted" | "none")
            ),
            _ => false,
        },
        "LOCK.SEMSET" | "LOCK.LATCHSET" | "LOCK.SEMACQUIRE" | "LOCK.PERMITRENEW" => {
            matches!(reply, Value::Int(0 | 1))
        }
        "LOCK.SEMADD" | "LOCK.SEMRELEASE" | "LOCK.SEMAVAILABLE" | "LOCK.SEMDRAIN" => {
            matches!(reply, Value::Int(_))
        }
        "LOCK.COUNTDOWN" | "LOCK.LATCHCOUNT" => matches!(reply, Value::Int(0..)),
        "LOCK.AWAIT" => matches!(reply, Value::Int(0 | 1)),
        "LOCK.PERMITRELEASE" => matches!(reply, Value::Int(1..)),
        "LOCK.PERMITACQUIRE" => match reply {
            Value::Nil => true,
            Value::Array(ids) => ids
                .iter()
                .all(|id| as_string(id).is_some_and(|id| id.len() == 32)),
            _ => false,
        },
        "LOCK.SEMINFO" => matches!(reply, Value::Array(items) if items.len() == 10),
        "LOCK.LATCHINFO" => matches!(reply, Value::Array(items) if items.len() == 8),
        _ => false,
    }
}

#[test]
fn random_argument_lists_never_break_the_server() {
    let seed = std::env::var("LOCK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen::<u64>());
    eprintln!("fuzz seed {seed} (set LOCK_FUZZ_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let server = Server::start();
    let mut con = server.connection();
    set(&mut con, "fz:str", "keep me");
    let _: i64 = redis::cmd("RPUSH")
        .arg("fz:list")
        .arg("x")
        .arg("y")
        .query(&mut con)
        .expect("RPUSH fz:list");

    const TOTAL: usize = 5000;
    const BATCH: usize = 250;
    let mut replies_by_kind: HashMap<&'static str, usize> = HashMap::new();
    let mut implausible = Vec::new();
    for _ in 0..TOTAL / BATCH {
        let commands: Vec<Vec<Vec<u8>>> = (0..BATCH).map(|_| random_command(&mut rng)).collect();
        let mut pipe = redis::pipe();
        for args in &commands {
            pipe.add_command(command(args));
        }
        let replies = con
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, commands.len())
            .unwrap_or_else(|e| {
                panic!(
                    "pipeline failed (seed {seed}): {e}; server alive? log:\n{}",
                    server.log()
                )
            });
        assert_eq!(
            replies.len(),
            commands.len(),
            "one reply per command (seed {seed})"
        );
        for (args, reply) in commands.iter().zip(&replies) {
            let kind = match reply {
                Value::ServerError(_) => "error",
                Value::Nil => "nil",
                Value::Int(_) => "integer",
                Value::Array(_) => "array",
                _ => "other",
            };
            *replies_by_kind.entry(kind).or_default() += 1;
            if !reply_is_plausible(args, reply) {
                implausible.push(format!("{} -> {reply:?}", show_args(args)));
            }
        }
    }
    eprintln!("fuzz replies by kind: {replies_by_kind:?}");
    assert!(
        implausible.is_empty(),
        "implausible replies (seed {seed}):\n{}",
        implausible.join("\n")
    );
    assert!(
        replies_by_kind.get("error").copied().unwrap_or(0) > 0,
        "the fuzz produced no errors at all"
    );
    assert!(
        replies_by_kind.get("nil").copied().unwrap_or(0)
            + replies_by_kind.get("integer").copied().unwrap_or(0)
            > 50,
        "the fuzz hardly reached the lock logic: {replies_by_kind:?}"
    );

    // Alive, and nothing damaged.
    assert_alive_and_fz_str_kept(&mut con, &format!("the fuzz, seed {seed}"));
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("fz:list")
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .expect("LRANGE");
    assert_eq!(l, ["x", "y"], "the list key was damaged (seed {seed})");
    for key in [&b"fz:a"[..], b"fz:b", b"fz:\x00\xff", b""] {
        for (owner, count) in hgetall(&mut con, key) {
            let text = String::from_utf8_lossy(&count);
            // A read-write lock's mode field.
            if owner == b"mode" && (text == "read" || text == "write") {
                continue;
            }
            let n: i64 = text.parse().unwrap_or_else(|_| {
                panic!("count {text:?} of {owner:?} in {key:?} is not an integer")
            });
            assert!(
                n >= 1,
                "count {n} of {owner:?} in {key:?} should be >= 1 (seed {seed})"
            );
            assert!(
                !owner.is_empty(),
                "an empty owner got into {key:?} (seed {seed})"
            );
        }
        // One transaction: the fuzz leaves leases of 1 ms, which can end
        // between two round trips (LOCK.INFO "held", then EXISTS 0).
        let (info, existed): (Value, i64) = redis::pipe()
            .atomic()
            .cmd("LOCK.INFO")
            .arg(key)
            .cmd("EXISTS")
            .arg(key)
            .query(&mut con)
            .expect("LOCK.INFO and EXISTS in MULTI/EXEC");
        // A lock's 6 fields or a read-write lock's 9: the state either way.
        let state = find_field(&info, "state").and_then(|v| as_string(&v));
        assert_eq!(
            state.as_deref() == Some("held"),
            existed == 1,
            "LOCK.INFO state of {key:?}: {info:?}"
        );
    }
    let stats = server.lock_stats();
    assert!(
        stats.contains_key("lock_acquired"),
        "INFO lock_stats still answers: {stats:?}"
    );

    // A well-formed round still works.
    assert_eq!(acquire(&mut con, b"after-fuzz", b"me", 30_000), None);
    assert_eq!(acquire(&mut con, b"after-fuzz", b"me", 30_000), None);
    assert!(acquire(&mut con, b"after-fuzz", b"you", 30_000).is_some());
    assert_eq!(release(&mut con, b"after-fuzz", b"me", None), Some(0));
    assert_eq!(release(&mut con, b"after-fuzz", b"me", None), Some(1));
    assert!(!exists(&mut con, b"after-fuzz"));
    let mut other = server.connection();
    let pong: String = redis::cmd("PING")
        .query(&mut other)
        .expect("PING on a new connection");
    assert_eq!(pong, "PONG");
}

#[test]
fn random_argument_lists_inside_multi_and_lua() {
    // The same garbage through MULTI/EXEC and EVAL: errors stay errors there too.
    let mut rng = StdRng::seed_from_u64(0x10c4);
    let server = Server::start();
    let mut con = server.connection();
    set(&mut con, "fz:str", "keep me");
    for _ in 0..20 {
        let commands: Vec<Vec<Vec<u8>>> = (0..25).map(|_| random_command(&mut rng)).collect();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for args in &commands {
            pipe.add_command(command(args));
        }
        // Module arity errors are runtime errors, so EXEC runs; ignore the result shape.
        let _ = pipe.query::<Value>(&mut con);
        for args in commands.iter().take(5) {
            let mut eval = redis::cmd("EVAL");
            eval.arg("return redis.pcall(unpack(ARGV))").arg(0);
            for a in args {
                eval.arg(&a[..]);
            }
            let _ = eval.query::<Value>(&mut con);
        }
    }
    assert_alive_and_fz_str_kept(&mut con, "MULTI/Lua fuzz");
    assert_eq!(acquire(&mut con, b"after", b"me", 30_000), None);
    assert_eq!(release(&mut con, b"after", b"me", None), Some(1));
}

// ---------------------------------------------------------------------------
// Leaks
// ---------------------------------------------------------------------------

/// One pipeline of every reply path, errors included, on a few reused keys.
fn one_round(con: &mut Connection, round: usize) {
    let mut pipe = redis::pipe();
    for i in 0..100 {
        let key = format!("leak:{}", i % 10);
        let owner = format!("owner-with-a-longish-id-{}:{}", round % 3, i);
        pipe.cmd("LOCK.ACQUIRE")
            .arg(&key)
            .arg(&owner)
            .arg(60_000)
            .ignore();
        pipe.cmd("LOCK.ACQUIRE")
            .arg(&key)
            .arg(&owner)
            .arg(60_000)
            .ignore();
        pipe.cmd("LOCK.ACQUIRE")
            .arg(&key)
            .arg("someone-else")
            .arg(60_000)
            .ignore();
        pipe.cmd("LOCK.RENEW")
            .arg(&key)
            .arg(&owner)
            .arg(60_000)
            .ignore();
        pipe.cmd("LOCK.INFO").arg(&key).ignore();
        pipe.cmd("LOCK.RELEASE")
            .arg(&key)
            .arg(&owner)
            .arg(60_000)
            .ignore();
        pipe.cmd("LOCK.RELEASE").arg(&key).arg(&owner).ignore();
        pipe.cmd("LOCK.RELEASE").arg(&key).arg("nobody").ignore();
        pipe.cmd("LOCK.ACQUIRE")
            .arg(&key)
            .arg(&owner)
            .arg(0)
            .ignore();
        pipe.cmd("LOCK.FORCE").arg(&key).ignore();
    }
    let replies = con
        .req_packed_commands(&pipe.get_packed_pipeline(), 0, 1000)
        .expect("leak-check pipeline");
    assert_eq!(replies.len(), 1000);
}

#[test]
fn memory_stays_flat_over_many_lock_cycles() {
    let server = Server::start();
    let mut con = server.connection();
    // Warm up: allocator arenas, command stats, client buffers.
    for round in 0..5 {
        one_round(&mut con, round);
    }
    let before = used_memory(&mut server.connection());
    for round in 0..60 {
        one_round(&mut con, round);
    }
    let after = used_memory(&mut server.connection());
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).expect("DBSIZE");
    assert_eq!(dbsize, 0, "every lock was forced at the end of each cycle");
    // 60k commands: a leak of even 16 bytes per command would be ~1 MB.
    assert!(
        after - before < 256 * 1024,
        "used_memory grew from {before} to {after} (+{} bytes) over 60k lock commands",
        after - before
    );
}
