//! Fencing tokens (`LOCK.ACQUIRE ... TOKEN`, `LOCK.FENCE`): tokens only
//! grow, through re-entry, hand-off, expiry, force, DEL, Redisson's script,
//! a failover that lost writes, AOF and older-RDB restarts; replicas hold
//! the same counter; a fence refuses a paused holder's stale write.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::redisson::{script_fenced_acquire, script_unlock};
use redis_lock_test_support::*;

const COUNTER: &str = "redisson_lock_token:{L}";

/// A waiter's `[-1, token]` grant.
fn granted_token(waiter: &mut RawClient) -> i64 {
    match waiter.read() {
        Resp::Array(pair) => match pair.as_slice() {
            [Resp::Int(-1), Resp::Int(token)] if *token > 0 => *token,
            other => panic!("expected [-1, token], got {other:?}"),
        },
        other => panic!("expected [-1, token], got {other:?}"),
    }
}

/// Sends `args`, which must be refused with an error starting with
/// `prefix` and mentioning `needle`.
fn refused(con: &mut Connection, args: &[&str], prefix: &str, needle: &str) {
    let reply = redis::cmd(args[0]).arg(&args[1..]).query::<Value>(con);
    expect_err(reply, prefix, needle, &args.join(" "));
}

/// A reply that must be a pair of integers.
fn pair(reply: &Value) -> (i64, i64) {
    redis::from_redis_value(reply.clone()).unwrap_or_else(|_| panic!("a pair: {reply:?}"))
}

/// Who holds `L` in the mixed-grant driver, and how often.
struct Holder {
    owner: String,
    count: i64,
}

/// How a grant is made in [`drive`].
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Module,
    /// The model of Redisson RFencedLock's script.
    Script,
}

/// Makes `grants` grants of lock `L` with tokens, mixing re-entry, release,
/// hand-off on release and on expiry, expiry, `LOCK.FORCE` and `DEL`; with
/// `script_share` of the direct grants made by Redisson's script instead of
/// the command. Asserts every token is greater than the one before.
fn drive(server: &Server, grants: usize, script_share: f64, seed: u64) {
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut holder: Option<Holder> = None;
    let mut last = 0_i64;
    let mut next_owner = 0_u64;
    let mut issued = 0;
    let mut by_script = 0;
    let mut check = |token: i64, what: &str| {
        assert!(token > last, "{what}: token {token} after {last}");
        last = token;
    };
    while issued < grants {
        let via = if rng.gen_bool(script_share) {
            Via::Script
        } else {
            Via::Module
        };
        // Redisson's script cannot wait: its hand-off rolls re-enter instead,
        // so `script_share` of the grants are the script's.
        let roll = match rng.gen::<f64>() {
            r if via == Via::Script && (0.60..0.81).contains(&r) => 0.0,
            r => r,
        };
        let mut grant = |con: &mut Connection, owner: &str| -> i64 {
            match via {
                Via::Module => token_of(con, "L", owner, 30_000),
                Via::Script => {
                    by_script += 1;
                    match script_fenced_acquire(con, "L", owner, 30_000) {
                        (-1, token) => token,
                        other => panic!("the script must grant {owner}: {other:?}"),
                    }
                }
            }
        };
        let mut fresh = || {
            next_owner += 1;
            format!("o{next_owner}")
        };
        match (&mut holder, roll) {
            // Nobody holds it: a fresh grant.
            (None, _) => {
                let owner = fresh();
                check(grant(&mut con, &owner), "first grant");
                holder = Some(Holder { owner, count: 1 });
            }
            // Re-entry by the holder.
            (Some(h), r) if r < 0.45 => {
                check(grant(&mut con, &h.owner), "re-entry");
                h.count += 1;
            }
            // Released (to the last hold), then a new owner takes it.
            (Some(h), r) if r < 0.60 => {
                for i in (0..h.count).rev() {
                    let left = if via == Via::Script {
                        script_unlock(&mut con, b"L", &h.owner, 30_000)
                    } else {
                        Value::Int(release(&mut con, "L", &h.owner, None).unwrap_or(-1))
                    };
                    assert_eq!(left, Value::Int(i64::from(i == 0)));
                }
                holder = None;
                continue;
            }
            // Handed on to a TOKEN waiter when the holder releases.
            (Some(h), r) if r < 0.78 => {
                let owner = fresh();
                let mut waiter = queue_with(server, "L", &owner, 30_000, 0, &["TOKEN"]);
                for _ in 0..h.count {
                    release(&mut con, "L", &h.owner, None);
                }
                check(granted_token(&mut waiter), "hand-off on release");
                holder = Some(Holder { owner, count: 1 });
            }
            // Handed on to a TOKEN waiter when the lease ends.
            (Some(h), r) if r < 0.81 => {
                let owner = fresh();
                let mut waiter = queue_with(server, "L", &owner, 30_000, 0, &["TOKEN"]);
                assert_eq!(renew(&mut con, "L", &h.owner, 2), 1);
                check(granted_token(&mut waiter), "hand-off on expiry");
                holder = Some(Holder { owner, count: 1 });
            }
            // The lease ends with nobody waiting; someone takes it later.
            (Some(h), r) if r < 0.83 => {
                assert_eq!(renew(&mut con, "L", &h.owner, 1), 1);
                std::thread::sleep(Duration::from_millis(3));
                holder = None;
                continue;
            }
            // An operator forces it.
            (Some(_), r) if r < 0.92 => {
                assert_eq!(force(&mut con, "L"), 1);
                holder = None;
                continue;
            }
            // Someone deletes the lock key.
            (Some(_), _) => {
                run(&mut con, &["DEL", "L"]);
                holder = None;
                continue;
            }
        }
        issued += 1;
    }
    assert_eq!(
        counter(&mut con, "L"),
        Some(last),
        "the counter is the last"
    );
    let share = by_script as f64 / grants as f64;
    assert!(
        (share - script_share).abs() < 0.05,
        "{by_script} of {grants} grants came from the script"
    );
}

#[test]
fn tokens_grow_over_10000_grants_mixing_reentry_handoff_expiry_and_force() {
    let server = Server::start();
    drive(&server, 10_000, 0.0, 7);
    assert!(stat(&server, "lock_handoffs") > 500, "hand-offs were made");
    assert_eq!(stat(&server, "lock_tokens_issued"), 10_000);
}

#[test]
fn tokens_grow_when_half_the_grants_come_from_redissons_fenced_script() {
    let server = Server::start();
    drive(&server, 10_000, 0.5, 11);
}

/// A Redisson fenced acquire after a module one, and the reverse, each get
/// a greater token: both raise the one counter.
#[test]
fn the_module_and_redissons_script_share_one_sequence() {
    let server = Server::start();
    let mut con = server.connection();
    let (_, first) = script_fenced_acquire(&mut con, "L", "r", 30_000);
    assert_eq!(first, 1, "Redisson starts its counter at 1");
    let module = token_of(&mut con, "L", "r", 30_000);
    assert!(module > first);
    let (_, script) = script_fenced_acquire(&mut con, "L", "r", 30_000);
    assert_eq!(script, module + 1, "Redisson INCRs the module's token");
    // script + 1, or the clock's floor if a millisecond has passed.
    let last = token_of(&mut con, "L", "r", 30_000);
    assert!(last > script, "{last} after {script}");
    assert_eq!(lock_info(&mut con, "L").count_of(b"r"), Some(4));
    assert_eq!(lock_info(&mut con, "L").token, Some(last));
}

/// A token's `seq` (all but its low 4 bits) is at least the server's clock
/// in ms x 128; its low 4 bits are the node's number; it is exact in a double.
#[test]
fn tokens_are_at_least_the_clock_floor_and_carry_the_node_number() {
    let server = Server::start();
    let mut con = server.connection();
    let before = server_now_ms(&mut con);
    let token = token_of(&mut con, "L", "a", 30_000);
    let after = server_now_ms(&mut con);
    let seq = token >> 4;
    assert!(
        (before * 128..=(after + 1) * 128).contains(&seq),
        "{token}'s seq {seq} is the clock {before}..{after} ms x 128"
    );
    assert!(token < 1 << 53, "exact in a double");
    config_set(&mut con, "lock.node-id", 5);
    let token = token_of(&mut con, "L", "a", 30_000);
    assert_eq!(token % 16, 5, "{token}");
    config_set(&mut con, "lock.node-id", 15);
    assert_eq!(token_of(&mut con, "L", "a", 30_000) % 16, 15);
    config_set(&mut con, "lock.node-id", -1);
    let auto = token_of(&mut con, "L", "a", 30_000);
    assert!(auto > token);
    for bad in ["16", "-2", "x"] {
        let reply = redis::cmd("CONFIG")
            .arg(&["SET", "lock.node-id", bad])
            .query::<Value>(&mut con);
        expect_err(reply, "ERR", "node-id", bad);
    }
}

/// The single-server half of the split-brain report: in one script (one
/// millisecond, time frozen on Redis 7.2+), grant, release, delete the
/// counter, grant again. The earlier rule gave the same token twice.
#[test]
fn a_counter_deleted_within_one_millisecond_never_repeats_a_token() {
    let server = Server::start();
    let mut con = server.connection();
    let script = r"
        local first = redis.call('LOCK.ACQUIRE', KEYS[1], 'a', 30000, 'TOKEN')[2]
        redis.call('LOCK.RELEASE', KEYS[1], 'a')
        redis.call('DEL', KEYS[2])
        local second = redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 30000, 'TOKEN')[2]
        redis.call('DEL', KEYS[2])
        local third = redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 30000, 'TOKEN')[2]
        redis.call('LOCK.FORCE', KEYS[1])
        return {first, second, third}";
    for round in 0..50 {
        let tokens: Vec<i64> = redis::cmd("EVAL")
            .arg(&[script, "2", "L", COUNTER])
            .query(&mut con)
            .expect("the script");
        assert!(
            tokens[0] < tokens[1] && tokens[1] < tokens[2],
            "round {round}: {tokens:?} (a grant after a release, a re-entry, each after a DEL)"
        );
    }
}

/// The split-brain report: master A with replica B, one fenced grant on A,
/// `REPLICAOF NO ONE` on B, then grants sent to both at once. Both have the
/// same counter and, often, the same millisecond: the earlier rule gave both
/// holders one token and `LOCK.FENCE` let both write. Now every pair of
/// tokens differs (in the node number at least) and the fence lets only the
/// greater one write after it.
#[test]
fn two_masters_in_a_split_brain_never_give_one_token_to_two_holders() {
    let _alone = alone();
    let a = Server::start();
    let b = Server::start();
    let resource = Server::start();
    b.replicaof(&a);
    let mut ca = a.connection();
    token_of(&mut ca, "lk", "first", 100);
    release(&mut ca, "lk", "first", None);
    wait_for_replicas(&a, &[&b]);
    let mut cb = b.connection();
    run(&mut cb, &["REPLICAOF", "NO", "ONE"]);
    let mut res = resource.connection();
    let (mut ra, mut rb) = (RawClient::connect(a.port), RawClient::connect(b.port));
    for round in 0..100 {
        let lock = if round == 0 {
            "lk".to_string()
        } else {
            format!("lk{round}")
        };
        // Both requests leave before either reply is read.
        ra.send(&["LOCK.ACQUIRE", &lock, "a", "100", "TOKEN"]);
        rb.send(&["LOCK.ACQUIRE", &lock, "b", "100", "TOKEN"]);
        let ta = granted_token(&mut ra);
        let tb = granted_token(&mut rb);
        assert_ne!(ta, tb, "round {round}: one token for two holders");
        assert_ne!(ta % 16, tb % 16, "round {round}: distinct node numbers");
        let fence = format!("fence{round}");
        let (low, high) = (ta.min(tb), ta.max(tb));
        run(&mut res, &["LOCK.FENCE", &fence, &high.to_string()]);
        let stale = redis::cmd("LOCK.FENCE")
            .arg(&fence)
            .arg(low)
            .query::<Value>(&mut res);
        expect_err(stale, "STALE", "older", "the lower token after the higher");
    }
}

// ---- replies -----------------------------------------------------------------

#[test]
fn token_replies_are_redissons_pairs_for_every_outcome() {
    let server = Server::start();
    let mut con = server.connection();
    let t1 = token_of(&mut con, "L", "a", 30_000);
    let (ttl, none) = acquire_token(&mut con, "L", "b", 30_000);
    assert!(
        (29_000..=30_000).contains(&ttl) && none == -1,
        "{ttl} {none}"
    );
    assert_eq!(stat(&server, "lock_tokens_issued"), 1, "busy: no token");

    // WAIT timing out: [ttl, -1]; WAIT granted: [-1, token].
    let reply = run(
        &mut con,
        &["LOCK.ACQUIRE", "L", "b", "1000", "TOKEN", "WAIT", "20"],
    );
    let (ttl, none) = pair(&reply);
    assert!(ttl > 0 && none == -1, "timed out: {reply:?}");
    let mut waiter = queue_with(&server, "L", "b", 30_000, 0, &["TOKEN"]);
    assert_eq!(release(&mut con, "L", "a", None), Some(1));
    let t2 = granted_token(&mut waiter);
    assert!(t2 > t1);
    assert_eq!(holders(&mut con, "L"), owned_by("b"));
    assert_eq!(lock_info(&mut con, "L").token, Some(t2));

    // A plain waiter next to TOKEN ones gets nil, and raises nothing.
    let mut plain = queue(&server, "L", "c", 30_000, 0);
    assert_eq!(release(&mut con, "L", "b", None), Some(1));
    assert_eq!(plain.read(), Resp::Nil);
    assert_eq!(counter(&mut con, "L"), Some(t2));

    // From a script and in MULTI: the same pair.
    let reply = run(
        &mut con,
        &[
            "EVAL",
            "return redis.call('LOCK.ACQUIRE', KEYS[1], 'c', 5000, 'TOKEN')",
            "1",
            "L",
        ],
    );
    assert_eq!(pair(&reply).0, -1, "granted in a script");
    let replies: Vec<(i64, i64)> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("c")
        .arg(5000)
        .arg("TOKEN")
        .cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("d")
        .arg(5000)
        .arg("TOKEN")
        .query(&mut con)
        .expect("MULTI");
    assert_eq!(replies[0].0, -1);
    assert!(replies[0].1 > t2);
    assert_eq!(replies[1].1, -1, "busy for d");
}

#[test]
fn bad_token_requests_are_refused_and_change_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    // Keys whose braces would put the counter in another cluster slot.
    for key in ["a{b", "{}x", "a}b"] {
        refused(
            &mut con,
            &["LOCK.ACQUIRE", key, "o", "1000", "TOKEN"],
            "ERR TOKEN",
            "cluster slot",
        );
        assert!(!exists(&mut con, key));
    }
    // A key with a hash tag uses Redisson's counter name without new braces.
    token_of(&mut con, "{orders}:42", "o", 1000);
    assert!(exists(&mut con, "redisson_lock_token:{orders}:42"));

    // A counter of the wrong type or not an integer refuses the acquire.
    let take = ["LOCK.ACQUIRE", "L", "o", "1000", "TOKEN"];
    run(&mut con, &["HSET", COUNTER, "f", "v"]);
    refused(&mut con, &take, "WRONGTYPE", "");
    run(&mut con, &["SET", COUNTER, "abc"]);
    refused(&mut con, &take, "ERR", "does not hold an integer");
    run(&mut con, &["SET", COUNTER, &i64::MAX.to_string()]);
    refused(&mut con, &take, "ERR", "overflow");
    assert!(!exists(&mut con, "L"), "nothing was taken");
    assert_eq!(stat(&server, "lock_acquired"), 1);

    // Options: each at most once, in any order.
    for args in [
        &["LOCK.ACQUIRE", "L", "o", "1000", "TOKEN", "TOKEN"][..],
        &["LOCK.ACQUIRE", "L", "o", "1000", "WAIT", "1", "WAIT", "1"],
        &["LOCK.ACQUIRE", "L", "o", "1000", "TOKENS"],
    ] {
        refused(&mut con, args, "ERR", "syntax error");
    }
}

/// A waiter granted the lock whose counter cannot be raised gets the error,
/// and the lock goes to the next waiter.
#[test]
fn a_waiter_whose_counter_is_broken_gets_the_error_and_the_next_one_the_lock() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "a", 30_000);
    let mut fenced = queue_with(&server, "L", "b", 30_000, 0, &["TOKEN"]);
    let mut plain = queue(&server, "L", "c", 30_000, 0);
    run(&mut con, &["SET", COUNTER, "not a number"]);
    assert_eq!(release(&mut con, "L", "a", None), Some(1));
    match fenced.read() {
        Resp::Error(e) => assert!(e.contains("does not hold an integer"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(plain.read(), Resp::Nil);
    assert_eq!(holders(&mut con, "L"), owned_by("c"));
}

// ---- the counter's life ------------------------------------------------------

#[test]
fn counters_expire_a_retention_after_the_lease_and_tokens_still_grow() {
    let server = Server::start();
    let mut con = server.connection();
    token_of(&mut con, "L", "a", 30_000);
    let day_after_lease = pexpiretime(&mut con, "L") + 86_400_000;
    assert_eq!(
        pexpiretime(&mut con, COUNTER),
        (day_after_lease + 999) / 1000 * 1000,
        "a day after the lease, by default, rounded up to the second"
    );
    // Re-entries move it along with the lease, never back.
    std::thread::sleep(Duration::from_millis(1100));
    let before = pexpiretime(&mut con, COUNTER);
    token_of(&mut con, "L", "a", 30_000);
    assert!(pexpiretime(&mut con, COUNTER) > before);

    // A short retention: the counter goes, and the next token is greater.
    config_set(&mut con, "lock.token-retention-ms", 50);
    let t1 = token_of(&mut con, "S", "a", 20);
    let counter_s = "redisson_lock_token:{S}";
    poll_until(Duration::from_secs(5), "the counter expires", || {
        !exists(&mut con, counter_s)
    });
    assert!(token_of(&mut con, "S", "b", 20) > t1);

    // Retention 0: no expiry of the module's own.
    config_set(&mut con, "lock.token-retention-ms", 0);
    token_of(&mut con, "Z", "a", 20);
    assert_eq!(pttl(&mut con, "redisson_lock_token:{Z}"), -1);

    // A counter without expiry (Redisson's) never gets one; a later expiry stays.
    config_set(&mut con, "lock.token-retention-ms", 1000);
    script_fenced_acquire(&mut con, "R", "r", 30_000);
    token_of(&mut con, "R", "r", 30_000);
    assert_eq!(pttl(&mut con, "redisson_lock_token:{R}"), -1);
    let far = server_now_ms(&mut con) + 3_600_000;
    run(&mut con, &["PEXPIREAT", COUNTER, &far.to_string()]);
    token_of(&mut con, "L", "a", 30_000);
    assert_eq!(pexpiretime(&mut con, COUNTER), far);
}

/// `DEL` of the counter, `FLUSHALL`: the clock floor still puts the next
/// token above the last.
#[test]
fn a_deleted_counter_restarts_above_the_last_token() {
    let server = Server::start();
    let mut con = server.connection();
    let t1 = token_of(&mut con, "L", "a", 30_000);
    run(&mut con, &["DEL", COUNTER]);
    std::thread::sleep(Duration::from_millis(2));
    let t2 = token_of(&mut con, "L", "a", 30_000);
    assert!(t2 > t1);
    run(&mut con, &["FLUSHALL"]);
    std::thread::sleep(Duration::from_millis(2));
    assert!(token_of(&mut con, "L", "a", 30_000) > t2);
}

// ---- replication, failover, restarts -----------------------------------------

/// The counter and its deadline, as a replica sees it.
fn counter_state(con: &mut Connection) -> (Option<i64>, i64) {
    (counter(con, "L"), pexpiretime(con, COUNTER))
}

#[test]
fn replicas_with_and_without_the_module_hold_the_same_counter() {
    let master = Server::start();
    let (with, without) = module_and_plain_replicas(&master);
    let mut con = master.connection();
    token_of(&mut con, "L", "a", 30_000);
    token_of(&mut con, "L", "a", 30_000);
    let mut waiter = queue_with(&master, "L", "b", 30_000, 0, &["TOKEN"]);
    release(&mut con, "L", "a", None);
    release(&mut con, "L", "a", None);
    let last = granted_token(&mut waiter);
    run(&mut con, &["LOCK.FENCE", "fence", &last.to_string()]);
    wait_for_replicas(&master, &[&with, &without]);

    let expected = counter_state(&mut con);
    assert_eq!(expected.0, Some(last));
    for replica in [&with, &without] {
        let mut rc = replica.connection();
        assert_eq!(counter_state(&mut rc), expected);
        assert_eq!(holders(&mut rc, "L"), owned_by("b"));
        assert_eq!(pexpiretime(&mut rc, "L"), pexpiretime(&mut con, "L"));
        assert_eq!(
            redis::cmd("GET")
                .arg("fence")
                .query::<i64>(&mut rc)
                .unwrap(),
            last
        );
    }
}

/// The scenario Redisson's `INCR` fails: the replica is frozen while the
/// master hands out tokens, the master dies, the replica is promoted with an
/// old counter. Its next token must still exceed every one the master issued.
#[test]
fn a_failover_that_lost_writes_never_reissues_a_token() {
    let _alone = alone();
    let mut master = Server::start();
    let replica = Server::start();
    replica.replicaof(&master);
    let mut con = master.connection();
    token_of(&mut con, "L", "a", 30_000);
    wait_for_replicas(&master, &[&replica]);

    replica.signal("STOP");
    // Fill the socket buffers between the two first, so that the grants
    // below stay in the master's memory and die with it (otherwise the
    // replica could still read them from its socket after SIGCONT).
    let filler = vec![b'x'; 16 << 20];
    for i in 0..2 {
        set(&mut con, format!("filler{i}"), &filler);
    }
    let mut issued = Vec::new();
    for i in 0..2_000 {
        // Re-entries, and now and then a hand-off to a new owner.
        if i % 100 == 99 {
            let owner = format!("w{i}");
            let mut waiter = queue_with(&master, "L", &owner, 30_000, 0, &["TOKEN"]);
            run(&mut con, &["LOCK.FORCE", "L"]);
            issued.push(granted_token(&mut waiter));
            run(&mut con, &["LOCK.FORCE", "L"]);
        } else {
            issued.push(token_of(&mut con, "L", "a", 30_000));
        }
    }
    let highest = *issued.iter().max().unwrap();
    master.crash();
    replica.signal("CONT");

    let mut rc = replica.connection();
    let stale = counter(&mut rc, "L").expect("the replica has an old counter");
    assert!(
        stale < highest,
        "the replica missed the last grants ({stale} vs {highest})"
    );
    run(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    run(&mut rc, &["LOCK.FORCE", "L"]);
    let next = token_of(&mut rc, "L", "z", 30_000);
    assert!(
        next > highest,
        "the new master's token {next} must exceed the old master's {highest}"
    );
}

#[test]
fn restarts_from_the_aof_and_from_an_older_rdb_never_reissue_a_token() {
    let _alone = alone();
    let dir = TestDir::new("fencing-restart");
    let mut server = Server::with(Options::new().aof().dir(dir.path()));
    let mut con = server.connection();
    token_of(&mut con, "L", "a", 600_000);
    run(&mut con, &["SAVE"]);
    let rdb = dir.path().join("dump.rdb");
    let older = dir.path().join("older.rdb");
    std::fs::copy(&rdb, &older).expect("copy the RDB");
    let mut last = 0;
    for _ in 0..500 {
        last = token_of(&mut con, "L", "a", 600_000);
    }
    let before = counter_state(&mut con);

    // AOF: the very same counter and deadline.
    server.crash();
    let mut server = Server::with(Options::new().aof().dir(dir.path()));
    let mut con = server.connection();
    assert_eq!(counter_state(&mut con), before);
    assert!(token_of(&mut con, "L", "a", 600_000) > last);
    let last = token_of(&mut con, "L", "a", 600_000);
    server.crash();

    // The older RDB (no AOF): its counter is behind, its tokens are not.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() || path.extension().is_some_and(|e| e == "aof") {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
    std::fs::copy(&older, &rdb).expect("restore the older RDB");
    let server = Server::with(Options::new().dir(dir.path()));
    let mut con = server.connection();
    let stale = counter(&mut con, "L").expect("the older counter");
    assert!(stale < last, "the RDB is older ({stale} vs {last})");
    assert!(token_of(&mut con, "L", "a", 600_000) > last);
}

// ---- the fence ---------------------------------------------------------------

/// Decrements `{stock}` if the fence lets `token` through: the stock scenario's
/// write, fenced. Returns the stock left, or the error text.
const SELL: &str = "redis.call('LOCK.FENCE', KEYS[1], ARGV[1]) \
    local left = tonumber(redis.call('GET', KEYS[2])) \
    if left > 0 then return redis.call('DECR', KEYS[2]) end \
    return -1";

fn sell(con: &mut Connection, token: i64) -> Result<i64, String> {
    redis::cmd("EVAL")
        .arg(SELL)
        .arg(2)
        .arg("{stock}:fence")
        .arg("{stock}")
        .arg(token)
        .query(con)
        .map_err(|e| err_text(&e))
}

/// Kleppmann's scenario: a holder pauses past its lease, another takes the
/// lock and writes; the first wakes up and writes with its old token.
#[test]
fn the_fence_refuses_a_paused_holders_stale_token() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["SET", "{stock}", "90"]);
    let paused = token_of(&mut con, "{stock}:lock", "a", 50);
    poll_until(Duration::from_secs(5), "a's lease ends", || {
        !exists(&mut con, "{stock}:lock")
    });
    let fresh = token_of(&mut con, "{stock}:lock", "b", 30_000);
    assert_eq!(sell(&mut con, fresh), Ok(89));
    assert_eq!(sell(&mut con, fresh), Ok(88), "the holder writes again");

    let err = sell(&mut con, paused).expect_err("a's write is refused");
    assert!(err.starts_with("STALE"), "{err}");
    assert!(err.contains(&fresh.to_string()), "{err}");
    assert_eq!(
        redis::cmd("GET")
            .arg("{stock}")
            .query::<i64>(&mut con)
            .unwrap(),
        88,
        "nothing written"
    );
    assert_eq!(stat(&server, "lock_fences_refused"), 1);
    assert_eq!(stat(&server, "lock_fences_passed"), 2);

    // Bad input changes nothing.
    for (args, prefix, needle) in [
        (&["LOCK.FENCE", "{stock}:fence", "0"][..], "ERR", "positive"),
        (&["LOCK.FENCE", "{stock}:fence", "x"], "ERR", "positive"),
        (&["LOCK.FENCE", "{stock}"], "ERR", "wrong number"),
        (
            &["LOCK.FENCE", "{stock}:lock", "1"],
            "ERR",
            "fenced lock's key",
        ),
    ] {
        refused(&mut con, args, prefix, needle);
    }
    run(&mut con, &["SET", "text", "abc"]);
    refused(
        &mut con,
        &["LOCK.FENCE", "text", "1"],
        "ERR",
        "does not hold an integer",
    );
    assert_eq!(
        redis::cmd("GET")
            .arg("{stock}:fence")
            .query::<i64>(&mut con)
            .unwrap(),
        fresh
    );
}

/// Keys swapped by mistake: the lock's key given to `LOCK.FENCE`. Recording
/// a token there would leave a string without expiry where the lock lives,
/// and every `LOCK.*` on it would answer WRONGTYPE from then on.
#[test]
fn the_fence_refuses_a_fenced_locks_own_key() {
    let server = Server::start();
    let mut con = server.connection();
    for lock in ["L", "{orders}:42"] {
        let token = token_of(&mut con, lock, "a", 30_000);
        let before = counter(&mut con, lock);
        // Held (a hash) and free (no key): refused alike, naming the key.
        for held in [true, false] {
            if !held {
                assert_eq!(run(&mut con, &["LOCK.RELEASE", lock, "a"]), Value::Int(1));
            }
            let fence = ["LOCK.FENCE", lock, &token.to_string()];
            let reply = redis::cmd(fence[0])
                .arg(&fence[1..])
                .query::<Value>(&mut con);
            let text = expect_err(reply, "ERR", "fenced lock's key", lock);
            assert!(text.contains(&format!("'{lock}'")), "{text}");
            assert_eq!(exists(&mut con, lock), held, "{lock}: the key is as it was");
            assert_eq!(counter(&mut con, lock), before, "{lock}: the counter too");
        }
        // The lock still works, with a newer token.
        assert!(token_of(&mut con, lock, "b", 30_000) > token);
    }
    assert_eq!(stat(&server, "lock_fences_passed"), 0);
    assert_eq!(stat(&server, "lock_fences_refused"), 0, "not a stale token");

    // A fence next to the lock, in its slot, is a fence like any other.
    let token = token_of(&mut con, "{orders}:42", "b", 30_000);
    assert_eq!(
        run(
            &mut con,
            &["LOCK.FENCE", "{orders}:fence", &token.to_string()]
        ),
        Value::Int(token)
    );
}

/// docs/fenced.md's example: stock 90, 100 buyers, each selling one under the
/// lock with its token through the fence; 90 sold, never below zero.
#[test]
fn hundred_fenced_buyers_sell_ninety_cakes() {
    let server = Arc::new(Server::start());
    run(&mut server.connection(), &["SET", "{stock}", "90"]);
    let (sold, sold_out) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let lowest = Arc::new(AtomicI64::new(90));
    let start = Arc::new(Barrier::new(100));
    let buyers: Vec<_> = (0..100)
        .map(|i| {
            let (server, sold, sold_out, lowest, start) = (
                server.clone(),
                sold.clone(),
                sold_out.clone(),
                lowest.clone(),
                start.clone(),
            );
            std::thread::spawn(move || {
                let mut con = server.connection();
                let owner = format!("buyer{i}");
                start.wait();
                let reply: (i64, i64) = redis::cmd("LOCK.ACQUIRE")
                    .arg("{stock}:lock")
                    .arg(&owner)
                    .arg(10_000)
                    .arg("WAIT")
                    .arg(20_000)
                    .arg("TOKEN")
                    .query(&mut con)
                    .expect("acquire");
                assert_eq!(reply.0, -1, "{owner} waited its turn");
                match sell(&mut con, reply.1).expect("a fresh token passes") {
                    -1 => sold_out.fetch_add(1, Ordering::SeqCst),
                    left => {
                        lowest.fetch_min(left, Ordering::SeqCst);
                        sold.fetch_add(1, Ordering::SeqCst)
                    }
                };
                assert_eq!(release(&mut con, "{stock}:lock", &owner, None), Some(1));
            })
        })
        .collect();
    for buyer in buyers {
        buyer.join().expect("buyer");
    }
    assert_eq!(sold.load(Ordering::SeqCst), 90);
    assert_eq!(sold_out.load(Ordering::SeqCst), 10);
    assert_eq!(lowest.load(Ordering::SeqCst), 0);
    assert_eq!(stat(&server, "lock_fences_refused"), 0);
}
