//! Bad input: every malformed command answers an error naming the problem and
//! changes nothing; thousands of random argument lists leave the server alive,
//! its wrong-type keys untouched and its lock hashes well formed.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, ConnectionLike, Value};
use redis_lock_test_support::*;

/// Everything observable about the keys a bad command might damage.
#[derive(Debug, PartialEq)]
struct Snapshot {
    lock_dump: Option<Vec<u8>>,
    lock_hash: Vec<(Vec<u8>, Vec<u8>)>,
    lock_deadline: i64,
    string_value: Option<Vec<u8>>,
    string_deadline: i64,
    list_value: Vec<Vec<u8>>,
    odd_hash: Vec<(Vec<u8>, Vec<u8>)>,
    big_hash: Vec<(Vec<u8>, Vec<u8>)>,
    fence: Option<i64>,
    /// The token counters: `free`'s (a hash), `fc`'s (text).
    hash_counter: Vec<(Vec<u8>, Vec<u8>)>,
    text_counter: Option<Vec<u8>>,
    dbsize: i64,
}

fn snapshot(con: &mut Connection) -> Snapshot {
    Snapshot {
        lock_dump: redis::cmd("DUMP").arg("lk").query(con).expect("DUMP lk"),
        lock_hash: hgetall(con, b"lk"),
        lock_deadline: pexpiretime(con, b"lk"),
        string_value: redis::cmd("GET").arg("sk").query(con).expect("GET sk"),
        string_deadline: pexpiretime(con, b"sk"),
        list_value: redis::cmd("LRANGE")
            .arg("lst")
            .arg(0)
            .arg(-1)
            .query(con)
            .expect("LRANGE lst"),
        odd_hash: hgetall(con, b"odd"),
        big_hash: hgetall(con, b"big"),
        fence: redis::cmd("GET")
            .arg("fence")
            .query(con)
            .expect("GET fence"),
        hash_counter: hgetall(con, b"redisson_lock_token:{free}"),
        text_counter: redis::cmd("GET")
            .arg("redisson_lock_token:{fc}")
            .query(con)
            .expect("GET counter"),
        dbsize: redis::cmd("DBSIZE").query(con).expect("DBSIZE"),
    }
}

/// `lk`: held by `o` twice with a 60 s lease; `sk`: a string with a TTL;
/// `lst`: a list; `odd`: a hash whose count is not an integer; `big`: a count
/// at i64::MAX; `fence`: a fence at 7; the token counter of `free` is a
/// hash, that of `fc` text.
fn setup(con: &mut Connection) {
    for args in [
        &["SET", "fence", "7"][..],
        &["HSET", "redisson_lock_token:{free}", "f", "1"],
        &["SET", "redisson_lock_token:{fc}", "abc"],
    ] {
        run(con, args);
    }
    assert_eq!(acquire(con, b"lk", b"o", 60_000), None);
    assert_eq!(acquire(con, b"lk", b"o", 60_000), None);
    let _: () = redis::cmd("SET")
        .arg("sk")
        .arg("v")
        .arg("PX")
        .arg(60_000)
        .query(con)
        .expect("SET sk");
    let _: i64 = redis::cmd("RPUSH")
        .arg("lst")
        .arg("a")
        .arg("b")
        .query(con)
        .expect("RPUSH lst");
    let _: i64 = redis::cmd("HSET")
        .arg("odd")
        .arg("o")
        .arg("abc")
        .query(con)
        .expect("HSET odd");
    let _: i64 = redis::cmd("HSET")
        .arg("big")
        .arg("o")
        .arg(i64::MAX)
        .query(con)
        .expect("HSET big");
}

const BAD_LEASES: [&str; 12] = [
    "0",
    "-1",
    "abc",
    "1.5",
    "",
    "9223372036854775807",
    "+5",
    " 5",
    "5 ",
    "05",
    "1e3",
    "9223372036854775808",
];

struct Case {
    args: Vec<Vec<u8>>,
    prefix: &'static str,
    needle: &'static str,
}

fn case(args: &[&[u8]], prefix: &'static str, needle: &'static str) -> Case {
    Case {
        args: args.iter().map(|a| a.to_vec()).collect(),
        prefix,
        needle,
    }
}

fn bad_input_table() -> Vec<Case> {
    let mut cases = Vec::new();
    let arity = "wrong number of arguments";
    for lease in BAD_LEASES {
        let lease = lease.as_bytes();
        // `o` holds `lk`: a command that skipped validation would visibly change it.
        for (name, key) in [
            (&b"LOCK.ACQUIRE"[..], &b"lk"[..]),
            (b"LOCK.ACQUIRE", b"free"),
            (b"LOCK.RENEW", b"lk"),
            (b"LOCK.RELEASE", b"lk"),
        ] {
            cases.push(case(&[name, key, b"o", lease], "ERR", "lease-ms"));
        }
        cases.push(case(
            &[b"LOCK.ACQUIRE", b"lk", b"o", lease, b"WAIT", b"10"],
            "ERR",
            "lease-ms",
        ));
    }
    // Empty owner.
    cases.push(case(&[b"LOCK.ACQUIRE", b"lk", b"", b"100"], "ERR", "owner"));
    cases.push(case(
        &[b"LOCK.ACQUIRE", b"free", b"", b"100"],
        "ERR",
        "owner",
    ));
    cases.push(case(&[b"LOCK.RENEW", b"lk", b"", b"100"], "ERR", "owner"));
    cases.push(case(&[b"LOCK.RELEASE", b"lk", b""], "ERR", "owner"));
    cases.push(case(&[b"LOCK.RELEASE", b"lk", b"", b"100"], "ERR", "owner"));
    // Arity.
    for args in [
        &[&b"LOCK.ACQUIRE"[..]][..],
        &[b"LOCK.ACQUIRE", b"lk"],
        &[b"LOCK.ACQUIRE", b"lk", b"o"],
        &[b"LOCK.RENEW"],
        &[b"LOCK.RENEW", b"lk"],
        &[b"LOCK.RENEW", b"lk", b"o"],
        &[b"LOCK.RENEW", b"lk", b"o", b"100", b"x"],
        &[b"LOCK.RENEW", b"lk", b"o", b"100", b"WAIT", b"10"],
        &[b"LOCK.RELEASE"],
        &[b"LOCK.RELEASE", b"lk"],
        &[b"LOCK.RELEASE", b"lk", b"o", b"100", b"x"],
        &[b"LOCK.RELEASE", b"lk", b"o", b"WAIT", b"10"],
        &[b"LOCK.FORCE"],
        &[b"LOCK.FORCE", b"lk", b"x"],
        &[b"LOCK.FORCE", b"lk", b"lk"],
        &[b"LOCK.INFO"],
        &[b"LOCK.INFO", b"lk", b"x"],
        &[b"LOCK.FENCE", b"fence"],
        &[b"LOCK.FENCE", b"fence", b"1", b"2"],
    ] {
        cases.push(case(args, "ERR", arity));
    }
    // Options: each once, each with its values; anything else is a syntax
    // error (a dangling WAIT or SYNC too: the count of arguments is fine).
    for args in [
        &[&b"LOCK.ACQUIRE"[..], b"lk", b"o", b"100", b"WAIT"][..],
        &[b"LOCK.ACQUIRE", b"lk", b"o", b"100", b"TOKEN", b"WAIT"],
        &[b"LOCK.ACQUIRE", b"lk", b"o", b"100", b"SYNC", b"1"],
        &[b"LOCK.ACQUIRE", b"lk", b"o", b"100", b"WAIT", b"10", b"x"],
        &[
            b"LOCK.ACQUIRE",
            b"lk",
            b"o",
            b"100",
            b"WAIT",
            b"10",
            b"WAIT",
            b"10",
        ],
        &[b"LOCK.ACQUIRE", b"lk", b"o", b"100", b"TOKEN", b"TOKEN"],
        &[b"LOCK.ACQUIRE", b"free", b"o", b"100", b"TOKENS"],
    ] {
        cases.push(case(args, "ERR", "syntax error"));
    }
    // TOKEN: keys whose counter would be in another slot; broken counters.
    for key in [&b"a{b"[..], b"{}x", b"a}b", b""] {
        cases.push(case(
            &[b"LOCK.ACQUIRE", key, b"o", b"100", b"TOKEN"],
            "ERR",
            "slot",
        ));
    }
    cases.push(case(
        &[b"LOCK.ACQUIRE", b"free", b"o", b"100", b"TOKEN"],
        "WRONGTYPE",
        "",
    ));
    cases.push(case(
        &[b"LOCK.ACQUIRE", b"fc", b"o", b"100", b"TOKEN"],
        "ERR",
        "integer",
    ));
    // LOCK.FENCE: bad tokens, wrong type, a fence that is no integer, stale.
    for token in [&b"0"[..], b"-1", b"x", b"1.5", b""] {
        cases.push(case(&[b"LOCK.FENCE", b"fence", token], "ERR", "token"));
    }
    cases.push(case(&[b"LOCK.FENCE", b"lk", b"5"], "WRONGTYPE", ""));
    cases.push(case(&[b"LOCK.FENCE", b"sk", b"5"], "ERR", "integer"));
    cases.push(case(&[b"LOCK.FENCE", b"fence", b"6"], "STALE", "7"));
    // WAIT option syntax (only LOCK.ACQUIRE has options).
    for (option, timeout) in [
        (&b"NOWAIT"[..], &b"5"[..]),
        (b"WAITS", b"5"),
        (b"", b"5"),
        (b"PX", b"100"),
        (b"WAIT", b"-1"),
        (b"WAIT", b"x"),
        (b"WAIT", b"1.5"),
        (b"WAIT", b""),
        (b"WAIT", b"+5"),
        (b"WAIT", b"9223372036854775808"),
        (b"wait", b"-1"),
    ] {
        cases.push(case(
            &[b"LOCK.ACQUIRE", b"lk", b"o", b"100", option, timeout],
            "ERR",
            "WAIT",
        ));
        cases.push(case(
            &[b"LOCK.ACQUIRE", b"free", b"o", b"100", option, timeout],
            "ERR",
            "WAIT",
        ));
    }
    // A bulk-string lease (not `LEASE` the argument): the release lease slot
    // taking `WAIT` is a lease error.
    cases.push(case(
        &[b"LOCK.RELEASE", b"lk", b"o", b"WAIT"],
        "ERR",
        "lease-ms",
    ));
    // Wrong type.
    for key in [&b"sk"[..], b"lst"] {
        cases.push(case(&[b"LOCK.ACQUIRE", key, b"o", b"100"], "WRONGTYPE", ""));
        cases.push(case(&[b"LOCK.RENEW", key, b"o", b"100"], "WRONGTYPE", ""));
        cases.push(case(&[b"LOCK.RELEASE", key, b"o"], "WRONGTYPE", ""));
        cases.push(case(&[b"LOCK.RELEASE", key, b"o", b"100"], "WRONGTYPE", ""));
        cases.push(case(&[b"LOCK.FORCE", key], "WRONGTYPE", ""));
        cases.push(case(&[b"LOCK.INFO", key], "WRONGTYPE", ""));
    }
    // Hold counts a foreign writer broke.
    cases.push(case(
        &[b"LOCK.ACQUIRE", b"odd", b"o", b"100"],
        "ERR",
        "hold count",
    ));
    cases.push(case(&[b"LOCK.RELEASE", b"odd", b"o"], "ERR", "hold count"));
    cases.push(case(
        &[b"LOCK.RELEASE", b"odd", b"o", b"100"],
        "ERR",
        "hold count",
    ));
    cases.push(case(
        &[b"LOCK.ACQUIRE", b"big", b"o", b"100"],
        "ERR",
        "overflow",
    ));
    cases
}

fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn bad_inputs_answer_errors_and_change_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    setup(&mut con);
    let before = snapshot(&mut con);
    assert_eq!(before.lock_hash, vec![(b"o".to_vec(), b"2".to_vec())]);
    assert!(before.lock_deadline > 0 && before.string_deadline > 0);

    let table = bad_input_table();
    assert!(table.len() > 100, "the table has {} cases", table.len());
    let mut failures = Vec::new();
    for Case {
        args,
        prefix,
        needle,
    } in &table
    {
        let what = show_args(args);
        match command(args).query::<Value>(&mut con) {
            Ok(v) => failures.push(format!(
                "{what}: expected {prefix} ...{needle}..., got {v:?}"
            )),
            Err(e) => {
                let text = err_text(&e);
                if !text.starts_with(prefix) || !text.contains(needle) {
                    failures.push(format!(
                        "{what}: expected {prefix} ...{needle}..., got {text:?}"
                    ));
                }
            }
        }
        let now = snapshot(&mut con);
        if now != before {
            failures.push(format!(
                "{what}: changed state\n  before {before:?}\n  after  {now:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs misbehaved:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );

    // And the lock still works afterwards.
    assert_eq!(release(&mut con, b"lk", b"o", None), Some(0));
    assert_eq!(release(&mut con, b"lk", b"o", None), Some(1));
    assert_eq!(acquire(&mut con, b"lk", b"p", 1000), None);
}

#[test]
fn bad_inputs_publish_and_notify_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    setup(&mut con);
    config_set(&mut con, "notify-keyspace-events", "KEA");
    let mut sub = Subscriber::new(
        &server,
        &[
            &unlock_channel(b"lk"),
            &unlock_channel(b"sk"),
            &unlock_channel(b"lst"),
        ],
    );
    let mut keyspace = Subscriber::new(
        &server,
        &[
            b"__keyspace@0__:lk",
            b"__keyspace@0__:sk",
            b"__keyspace@0__:free",
        ],
    );
    let before = server.lock_stats();
    // (A stale token is counted as refused: that is the fence's job.)
    for Case { args, .. } in bad_input_table()
        .into_iter()
        .filter(|case| case.prefix != "STALE")
    {
        assert!(
            command(&args).query::<Value>(&mut con).is_err(),
            "{} must fail",
            show_args(&args)
        );
    }
    let messages = sub.drain(&mut con);
    assert!(
        messages.is_empty(),
        "bad input published unlock messages: {:?}",
        show(&messages)
    );
    let events = keyspace.drain(&mut con);
    assert!(
        events.is_empty(),
        "bad input fired keyspace events: {:?}",
        show(&events)
    );
    let after = server.lock_stats();
    assert_eq!(before, after, "bad input moved INFO lock_stats counters");
}

// ---------------------------------------------------------------------------
// Random argument lists
// ---------------------------------------------------------------------------

const COMMANDS: [&str; 27] = [
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
                for option in ["PX", "WAIT", "LEASE"] {
                    if rng.gen_bool(0.2) {
                        args.push(mostly(rng, &[option]));
                        args.push(mostly(rng, &LEASES));
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
    if args[0].eq_ignore_ascii_case(b"LOCK.AWAIT") && args.len() == 3 {
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
        return e.code() == "ERR"
            || e.code() == "WRONGTYPE"
            || (name == "LOCK.FENCE" && e.code() == "STALE");
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
        // 6 fields (a lock), 9 (a read-write lock), as a flat array.
        "LOCK.INFO" => {
            matches!(reply, Value::Array(items) if items.len() == 12 || items.len() == 18)
        }
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
        "LOCK.SEMINFO" => matches!(reply, Value::Array(items) if items.len() == 8),
        "LOCK.LATCHINFO" => matches!(reply, Value::Array(items) if items.len() == 6),
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
