//! Bad input: every malformed command answers an error naming the problem,
//! changes nothing, and publishes and notifies nothing. (Random argument
//! lists are in `robustness.rs`.)

use redis::{Connection, Value};
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
    // KEEP and WAITER (docs/waiting.md): a grace out of range, an empty or
    // missing waiter id, each at most once; LOCK.CANCEL's identity.
    for grace in [
        &b"-1"[..],
        b"x",
        b"",
        b"1.5",
        b"86400001",
        b"99999999999999999999",
    ] {
        for args in [
            &[&b"LOCK.ACQUIRE"[..], b"lk", b"o", b"100", b"KEEP", grace][..],
            &[
                b"LOCK.WACQUIRE",
                b"free",
                b"o",
                b"100",
                b"WAIT",
                b"5",
                b"KEEP",
                grace,
            ],
            &[b"LOCK.SEMACQUIRE", b"sem", b"1", b"KEEP", grace],
            &[
                b"LOCK.PERMITACQUIRE",
                b"sem",
                b"1",
                b"KEEP",
                grace,
                b"WAITER",
                b"w",
            ],
            &[b"LOCK.AWAIT", b"latch", b"5", b"KEEP", grace],
        ] {
            cases.push(case(args, "ERR", "KEEP grace-ms"));
        }
    }
    for args in [
        &[&b"LOCK.SEMACQUIRE"[..], b"sem", b"1", b"WAITER", b""][..],
        &[
            b"LOCK.PERMITACQUIRE",
            b"sem",
            b"1",
            b"WAIT",
            b"5",
            b"WAITER",
            b"",
        ],
        &[b"LOCK.AWAIT", b"latch", b"5", b"WAITER", b""],
    ] {
        cases.push(case(args, "ERR", "WAITER waiter-id"));
    }
    for args in [
        &[&b"LOCK.ACQUIRE"[..], b"lk", b"o", b"100", b"KEEP"][..],
        &[
            b"LOCK.ACQUIRE",
            b"lk",
            b"o",
            b"100",
            b"KEEP",
            b"1",
            b"KEEP",
            b"1",
        ],
        &[
            b"LOCK.RACQUIRE",
            b"lk",
            b"o",
            b"100",
            b"KEEP",
            b"1",
            b"WAITER",
            b"w",
        ],
        &[b"LOCK.SEMACQUIRE", b"sem", b"1", b"WAITER"],
        &[
            b"LOCK.SEMACQUIRE",
            b"sem",
            b"1",
            b"WAITER",
            b"a",
            b"WAITER",
            b"b",
        ],
        &[
            b"LOCK.PERMITACQUIRE",
            b"sem",
            b"1",
            b"KEEP",
            b"1",
            b"KEEP",
            b"2",
        ],
        &[b"LOCK.AWAIT", b"latch", b"5", b"KEEP"],
        &[b"LOCK.AWAIT", b"latch", b"5", b"WAIT", b"5"],
        &[b"LOCK.AWAIT", b"latch", b"5", b"KEEP", b"1", b"KEEP", b"1"],
    ] {
        cases.push(case(args, "ERR", "syntax error"));
    }
    for args in [
        &[&b"LOCK.CANCEL"[..]][..],
        &[b"LOCK.CANCEL", b"lk"],
        &[b"LOCK.CANCEL", b"lk", b"o", b"x"],
    ] {
        cases.push(case(args, "ERR", "'lock.cancel'"));
    }
    cases.push(case(
        &[b"LOCK.CANCEL", b"lk", b""],
        "ERR",
        "owner-or-waiter-id",
    ));
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
