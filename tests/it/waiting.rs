//! Server-side waiting: `LOCK.ACQUIRE key owner lease-ms WAIT timeout-ms`.
//!
//! Waiters are raw TCP clients: a test sends the command, sees the waiter in
//! `LOCK.INFO` (so queue order is known), and reads the reply later; closing
//! the socket is a real disconnect.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

#[test]
fn ten_waiters_are_granted_in_arrival_order() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, "L", "holder", 30_000), None);
    let mut waiters: Vec<RawClient> = (0..10)
        .map(|i| queue(&server, "L", &format!("w{i}"), 30_000, 0))
        .collect();
    assert_eq!(
        waiter_owners(&server, "L"),
        (0..10).map(|i| format!("w{i}")).collect::<Vec<_>>()
    );

    assert_eq!(release(&mut con, "L", "holder", None), Some(1));
    for (i, waiter) in waiters.iter_mut().enumerate() {
        let owner = format!("w{i}");
        assert_eq!(waiter.read(), Resp::Nil, "{owner} is granted");
        assert!(
            holder_is(&mut con, "L", &owner),
            "{owner} holds the lock when granted: {:?}",
            holders(&mut con, "L")
        );
        assert_eq!(release(&mut con, "L", &owner, None), Some(1));
    }
    assert!(!exists(&mut con, "L"));
    assert_eq!(stat(&server, "lock_handoffs"), 10);
    assert_eq!(stat(&server, "lock_waiting_clients"), 0);
}

#[test]
fn lock_info_lists_waiters_in_order_with_their_waiting_time() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "holder", 30_000);
    let _a = queue(&server, "L", "a", 1000, 0);
    std::thread::sleep(Duration::from_millis(50));
    let _b = queue(&server, "L", "b", 1000, 7000);
    let info = lock_info(&mut con, "L");
    let get = |i: usize, name: &str| info.waiter_field(i, name);
    assert_eq!(as_string(&get(0, "owner")).as_deref(), Some("a"));
    assert_eq!(as_string(&get(1, "owner")).as_deref(), Some("b"));
    let (Value::Int(waited_a), Value::Int(waited_b)) = (get(0, "waited_ms"), get(1, "waited_ms"))
    else {
        panic!()
    };
    assert!(
        waited_a >= waited_b + 40,
        "a waited longer than b: {waited_a} vs {waited_b}"
    );
    assert_eq!(get(0, "timeout_ms"), Value::Int(0));
    assert_eq!(get(1, "timeout_ms"), Value::Int(7000));
}

#[test]
fn a_wait_times_out_on_time_with_the_holders_lease() {
    let _alone = alone();
    // Redis's default hz 10: its cron ticks every 100 ms, and a wait timeout
    // used to be answered on the next tick (WAIT 50 after 100 ms).
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "holder", 30_000);
    for timeout_ms in [50i64, 120, 300] {
        let started = Instant::now();
        let mut waiter = RawClient::connect(server.port);
        waiter.send(&[
            "LOCK.ACQUIRE",
            "L",
            "w",
            "1000",
            "WAIT",
            &timeout_ms.to_string(),
        ]);
        let reply = waiter.read();
        let elapsed = started.elapsed().as_millis() as i64;
        let Resp::Int(ttl) = reply else {
            panic!("a timed-out wait answers the remaining lease, got {reply:?}")
        };
        assert!(ttl > 25_000 && ttl <= 30_000, "remaining lease {ttl}");
        assert!(
            elapsed >= timeout_ms && elapsed <= timeout_ms + 25,
            "WAIT {timeout_ms} answered after {elapsed} ms"
        );
    }
    assert!(
        holder_is(&mut con, "L", "holder"),
        "a timeout changes nothing"
    );
    assert_eq!(stat(&server, "lock_waits_timed_out"), 3);
    assert_eq!(stat(&server, "lock_waiting_clients"), 0);
}

#[test]
fn a_free_or_re_entered_lock_is_granted_at_once_even_with_wait() {
    let server = Server::start();
    let mut con = server.connection();
    let got: Option<i64> = redis::cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("a")
        .arg(5000)
        .arg("WAIT")
        .arg(0)
        .query(&mut con)
        .expect("acquire");
    assert_eq!(got, None);
    let got: Option<i64> = redis::cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("a")
        .arg(5000)
        .arg("wait")
        .arg(0)
        .query(&mut con)
        .expect("re-enter");
    assert_eq!(got, None);
    assert_eq!(
        holders(&mut con, "L"),
        vec![("a".to_string(), "2".to_string())]
    );
}

#[test]
fn release_and_force_hand_the_lock_to_the_waiter_and_publish_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub_con = server.connection();
    let mut pubsub = sub_con.as_pubsub();
    pubsub.subscribe(unlock_channel("L")).expect("SUBSCRIBE");
    pubsub
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");

    acquire(&mut con, "L", "a", 30_000);
    let mut b = queue(&server, "L", "b", 30_000, 0);
    assert_eq!(release(&mut con, "L", "a", None), Some(1));
    assert_eq!(b.read(), Resp::Nil);
    assert!(holder_is(&mut con, "L", "b"));

    let mut c = queue(&server, "L", "c", 30_000, 0);
    assert_eq!(force(&mut con, "L"), 1);
    assert_eq!(c.read(), Resp::Nil);
    assert!(holder_is(&mut con, "L", "c"));
    assert!(
        pubsub.get_message().is_err(),
        "no unlock message while the lock is handed on"
    );

    assert_eq!(release(&mut con, "L", "c", None), Some(1));
    let message = pubsub
        .get_message()
        .expect("the unlock message once the lock is left free");
    assert_eq!(message.get_payload::<String>().expect("payload"), "0");
}

#[test]
fn del_unlink_hdel_rename_move_and_flush_by_anyone_hand_the_lock_on() {
    let server = Server::start();
    let mut con = server.connection();
    let frees: [&[&str]; 7] = [
        &["DEL", "L"],
        &["UNLINK", "L"],
        &["HDEL", "L", "a"],
        &["RENAME", "L", "elsewhere"],
        &["MOVE", "L", "1"],
        &["FLUSHDB"],
        &["FLUSHALL"],
    ];
    for free in frees {
        acquire(&mut con, "L", "a", 30_000);
        let mut waiter = queue(&server, "L", "b", 30_000, 0);
        run(&mut con, free);
        assert_eq!(waiter.read(), Resp::Nil, "granted after {free:?}");
        assert!(holder_is(&mut con, "L", "b"), "b holds after {free:?}");
        assert_eq!(release(&mut con, "L", "b", None), Some(1));
    }
}

#[test]
fn an_expired_lease_is_handed_on_within_20_ms_of_its_deadline() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    for round in 0..3 {
        acquire(&mut con, "L", "a", 300);
        let deadline = pexpiretime(&mut con, "L");
        let mut waiter = queue(&server, "L", "b", 30_000, 0);
        assert_eq!(waiter.read(), Resp::Nil);
        assert!(holder_is(&mut con, "L", "b"));
        assert_handed_on_in_time(&mut con, "L", 30_000, deadline, &format!("round {round}"));
        assert_eq!(release(&mut con, "L", "b", None), Some(1));
    }
}

#[test]
fn a_renewed_lease_is_not_handed_on_early() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "a", 200);
    let mut waiter = queue(&server, "L", "b", 30_000, 0);
    assert_eq!(renew(&mut con, "L", "a", 600), 1);
    let deadline = pexpiretime(&mut con, "L");
    assert_eq!(waiter.read(), Resp::Nil);
    assert_handed_on_in_time(&mut con, "L", 30_000, deadline, "the renewed lease");
}

#[test]
fn nobody_barges_past_the_queue() {
    let server = Server::start();
    let mut con = server.connection();
    // A release and a competing acquire in one pipeline: the queued waiter wins.
    acquire(&mut con, "L", "a", 30_000);
    let mut waiter = queue(&server, "L", "w", 30_000, 0);
    let (released, barger): (i64, Option<i64>) = redis::pipe()
        .cmd("LOCK.RELEASE")
        .arg("L")
        .arg("a")
        .cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("barger")
        .arg(30_000)
        .query(&mut con)
        .expect("pipeline");
    assert_eq!(released, 1);
    assert!(
        matches!(barger, Some(ttl) if ttl > 0),
        "the barger is refused: {barger:?}"
    );
    assert_eq!(waiter.read(), Resp::Nil);
    assert!(holder_is(&mut con, "L", "w"));
    release(&mut con, "L", "w", None);

    // Same with a DEL (handed on by a timer): the acquire right behind it
    // must still find the lock handed to the queue.
    acquire(&mut con, "L", "a", 30_000);
    let mut waiter = queue(&server, "L", "w", 30_000, 0);
    let (_, barger): (i64, Option<i64>) = redis::pipe()
        .cmd("DEL")
        .arg("L")
        .cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("barger")
        .arg(30_000)
        .query(&mut con)
        .expect("pipeline");
    assert!(
        matches!(barger, Some(ttl) if ttl > 0),
        "the barger is refused after DEL: {barger:?}"
    );
    assert_eq!(waiter.read(), Resp::Nil);
    assert!(holder_is(&mut con, "L", "w"));
}

#[test]
fn killed_and_disconnected_waiters_leave_the_queue_and_are_skipped() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "a", 30_000);
    let killed = queue(&server, "L", "killed", 30_000, 0);
    let gone = queue(&server, "L", "gone", 30_000, 0);
    let mut last = queue(&server, "L", "last", 30_000, 0);
    assert_eq!(waiter_owners(&server, "L"), vec!["killed", "gone", "last"]);

    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut con)
        .expect("CLIENT LIST");
    let blocked_ids: Vec<String> = clients
        .lines()
        .filter(|l| l.contains("cmd=lock.acquire") && l.contains("flags=b"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("id="))
                .map(str::to_string)
        })
        .collect();
    assert_eq!(blocked_ids.len(), 3, "three blocked clients: {clients}");
    let killed_n: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&blocked_ids[0])
        .query(&mut con)
        .expect("KILL");
    assert_eq!(killed_n, 1);
    drop(killed);
    poll_until(
        Duration::from_secs(2),
        "the killed waiter leaves at once",
        || waiter_owners(&server, "L") == vec!["gone", "last"],
    );
    gone.disconnect();
    poll_until(
        Duration::from_secs(2),
        "the disconnected waiter leaves at once",
        || waiter_owners(&server, "L") == vec!["last"],
    );
    assert_eq!(release(&mut con, "L", "a", None), Some(1));
    assert_eq!(last.read(), Resp::Nil);
    assert!(holder_is(&mut con, "L", "last"));
    assert_eq!(stat(&server, "lock_waiting_clients"), 0);
}

#[test]
fn multi_and_lua_do_not_block() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "a", 30_000);
    let started = Instant::now();
    let (ttl,): (i64,) = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("b")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert!(ttl > 0, "inside MULTI the acquire answers the lease: {ttl}");
    let ttl: i64 = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 1000, 'WAIT', 0)")
        .arg(1)
        .arg("L")
        .query(&mut con)
        .expect("EVAL");
    assert!(ttl > 0, "inside Lua the acquire answers the lease: {ttl}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "nothing blocked"
    );
    assert_eq!(stat(&server, "lock_waits_started"), 0);
}

#[test]
fn replicas_receive_hand_offs_as_effects_and_never_block() {
    let master = Server::start();
    let (with_module, without_module) = module_and_plain_replicas(&master);
    let mut con = master.connection();

    // Hand-off by release, then by lease expiry (done from a timer).
    acquire(&mut con, "L", "a", 30_000);
    let mut b = queue(&master, "L", "b", 40_000, 0);
    release(&mut con, "L", "a", None);
    assert_eq!(b.read(), Resp::Nil);
    acquire(&mut con, "E", "a", 200);
    let mut c = queue(&master, "E", "c", 50_000, 0);
    assert_eq!(c.read(), Resp::Nil);

    wait_for_replicas(&master, &[&with_module, &without_module]);
    for key in ["L", "E"] {
        let at_master = pexpiretime(&mut con, key);
        let owners = holders(&mut con, key);
        for replica in [&with_module, &without_module] {
            let mut rc = replica.connection();
            assert_eq!(
                holders(&mut rc, key),
                owners,
                "{key}: replica holds the master's hash"
            );
            let at = pexpiretime(&mut rc, key);
            assert_eq!(
                at, at_master,
                "{key}: replica has the master's absolute deadline"
            );
        }
    }
    assert_eq!(
        holders(&mut con, "L"),
        vec![("b".to_string(), "1".to_string())]
    );
    assert_eq!(
        holders(&mut con, "E"),
        vec![("c".to_string(), "1".to_string())]
    );

    // A replica refuses lock writes rather than blocking anyone.
    let refused = redis::cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("x")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query::<Value>(&mut with_module.connection());
    expect_err(refused, "READONLY", "", "LOCK.ACQUIRE WAIT on a replica");
}

#[test]
fn memory_stays_flat_over_ten_thousand_wait_timeouts() {
    let _alone = alone();
    let server = Server::with(Options::new().config("hz", &["100"]));
    let mut con = server.connection();
    acquire(&mut con, "L", "holder", 600_000);
    let run = |cycles_per_client: usize| {
        let clients = 50;
        let waiters = (0..clients).map(|c| ("L".to_string(), format!("w{c}")));
        waits_that_time_out(&server, waiters.collect(), cycles_per_client);
        clients * cycles_per_client
    };
    let warmup = run(20);
    let before = used_memory(&mut con);
    let cycles = run(200);
    let after = used_memory(&mut con);
    assert_eq!(cycles, 10_000);
    assert_eq!(
        stat(&server, "lock_waits_timed_out") as usize,
        warmup + cycles
    );
    assert_eq!(stat(&server, "lock_waiting_clients"), 0);
    assert!(
        after - before < 256 * 1024,
        "memory grew by {} bytes over 10k waits",
        after - before
    );
}

#[test]
fn stock_scenario_with_wait_and_no_retry_loop() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    set(&mut con, "MoonCakeStock", 90);
    let buyers = 100;
    let sold = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let lowest = Arc::new(Mutex::new(i64::MAX));
    let start = Arc::new(Barrier::new(buyers));
    let handles: Vec<_> = (0..buyers)
        .map(|i| {
            let (sold, inside, max_inside, lowest, start) = (
                sold.clone(),
                inside.clone(),
                max_inside.clone(),
                lowest.clone(),
                start.clone(),
            );
            let url = server.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url)
                    .expect("client")
                    .get_connection()
                    .expect("connection");
                let owner = format!("8e0c2a5e-buyer:{i}");
                start.wait();
                let got: Option<i64> = redis::cmd("LOCK.ACQUIRE")
                    .arg("MoonCake")
                    .arg(&owner)
                    .arg(30_000)
                    .arg("WAIT")
                    .arg(10_000)
                    .query(&mut con)
                    .expect("acquire");
                assert_eq!(got, None, "{owner} is granted the lock without retrying");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                let stock: i64 = redis::cmd("GET")
                    .arg("MoonCakeStock")
                    .query(&mut con)
                    .expect("GET");
                if stock > 0 {
                    set(&mut con, "MoonCakeStock", stock - 1);
                    sold.fetch_add(1, Ordering::SeqCst);
                    let mut low = lowest.lock().expect("lowest");
                    *low = (*low).min(stock - 1);
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(release(&mut con, "MoonCake", &owner, None), Some(1));
            })
        })
        .collect();
    for h in handles {
        h.join().expect("buyer");
    }
    let stock: i64 = redis::cmd("GET")
        .arg("MoonCakeStock")
        .query(&mut con)
        .expect("GET");
    assert_eq!(sold.load(Ordering::SeqCst), 90);
    assert_eq!(stock, 0);
    assert!(*lowest.lock().unwrap() >= 0, "stock never went negative");
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "one buyer at a time");
}

/// Server CPU seconds (user + system) so far.
fn server_cpu_seconds(server: &Server) -> f64 {
    ["used_cpu_user", "used_cpu_sys"]
        .iter()
        .map(|f| {
            server
                .info("cpu", f)
                .and_then(|v| v.parse::<f64>().ok())
                .expect("INFO cpu")
        })
        .sum()
}

/// A WAIT whose end overflows is refused (as BLPOP refuses one). A lease far
/// beyond the module's longest timer (an hour) must still leave the server
/// idle while someone waits for it: the module's expiry timer is capped and
/// re-armed rather than handed the whole period (a timer due at a
/// wrapped-around time could fire at once and re-arm forever).
#[test]
fn huge_timeouts_are_refused_and_huge_leases_do_not_spin_the_server() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    // The longest lease accepted, 100 years: far past the longest timer.
    assert_eq!(acquire(&mut con, "L", "a", 3_155_760_000_000), None);

    let refused = redis::cmd("LOCK.ACQUIRE")
        .arg("L")
        .arg("b")
        .arg(1000)
        .arg("WAIT")
        .arg(i64::MAX)
        .query::<Value>(&mut con);
    expect_err(
        refused,
        "ERR",
        "WAIT timeout-ms",
        "a WAIT ending past the end of time",
    );
    assert_eq!(
        stat(&server, "lock_waits_started"),
        0,
        "the refused WAIT queued nothing"
    );

    let cpu_before = server_cpu_seconds(&server);
    let mut waiter = RawClient::connect(server.port);
    waiter.send(&["LOCK.ACQUIRE", "L", "b", "1000", "WAIT", "400"]);
    let Resp::Int(ttl) = waiter.read() else {
        panic!("the wait times out with the lease")
    };
    assert!(ttl > 3_155_000_000_000, "remaining lease {ttl}");
    let cpu = server_cpu_seconds(&server) - cpu_before;
    assert!(
        cpu < 0.15,
        "the server burned {cpu:.3} s of CPU during a 400 ms wait"
    );
}

/// Eviction frees a lock like a DEL. With `volatile-ttl` the lock is the only
/// evictable key, so filling memory must evict exactly it; the waiter's grant
/// (nothing else can end a 10-minute lease) proves the hand-off. (The new
/// holder's hash may be evicted in turn by the next command over the limit,
/// which is why the test does not inspect it afterwards.)
#[test]
fn an_evicted_lock_is_handed_on() {
    let server = Server::with(Options::new().config("maxmemory-policy", &["volatile-ttl"]));
    let mut con = server.connection();
    let used = used_memory(&mut server.connection());
    config_set(&mut con, "maxmemory", used + 4 * 1024 * 1024);
    acquire(&mut con, "L", "a", 600_000);
    let mut waiter = queue(&server, "L", "b", 600_000, 0);

    let filler = vec![b'x'; 64 * 1024];
    let mut filled = false;
    for i in 0..500 {
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("filler:{i}"))
            .arg(&filler[..])
            .query(&mut con);
        if let Err(e) = set {
            assert!(err_text(&e).starts_with("OOM"), "only OOM is expected: {e}");
            filled = true;
            break;
        }
    }
    assert!(filled, "memory never reached maxmemory");
    assert_eq!(
        waiter.read(),
        Resp::Nil,
        "the waiter is granted the evicted lock"
    );
    let evicted: i64 = server
        .info("stats", "evicted_keys")
        .and_then(|v| v.parse().ok())
        .expect("evicted_keys");
    assert!(evicted >= 1, "the lock was evicted");
    assert!(stat(&server, "lock_handoffs") >= 1, "and handed on");
}

/// A waiter whose `WAIT` timeout comes in the very moment the lease before
/// it ends is always answered, and holds the lock exactly when it was told
/// so. (On Redis 7.0 a grant made as Redis timed the client out lost its
/// reply: the lock stayed held by a client that had been told nothing, 19
/// times in 20 with these timings. The grant pass now leaves a waiter at
/// its timeout to Redis.)
#[test]
fn a_wait_ending_as_the_lease_ends_is_answered_and_held_only_when_granted() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let mut granted = 0;
    for i in 0..20 {
        let key = format!("edge:{i}");
        assert_eq!(acquire(&mut con, &key, "a", 200), None);
        let mut waiter = RawClient::connect(server.port);
        waiter.send(&["LOCK.ACQUIRE", &key, "b", "5000", "WAIT", "199"]);
        let reply = waiter
            .try_read()
            .unwrap_or_else(|| panic!("round {i}: no reply to the wait"));
        match reply {
            Resp::Nil => {
                granted += 1;
                assert_eq!(holders(&mut con, &key), owned_by("b"), "round {i}");
            }
            Resp::Int(_) => assert!(!holder_is(&mut con, &key, "b"), "round {i}: held untold"),
            other => panic!("round {i}: {other:?}"),
        }
    }
    eprintln!("{granted} of 20 waits granted at the edge, the rest timed out");
}

/// The module hears keyspace events (`INFO lock`'s `lock_keyspace_events`,
/// in `notify-keyspace-events` letters) only while something needs them:
/// none while nothing waits, so writes to other keys pay nothing; a
/// waiter's classes from the moment it queues; and once nobody waits,
/// none again where the server can unsubscribe (Redis 8.2+), or the same
/// classes kept where it cannot (Redis 7.x, Valkey up to 9.1).
#[test]
fn keyspace_events_are_heard_only_while_something_needs_them() {
    let server = Server::start();
    let mut con = server.connection();
    let heard = || {
        server
            .info("lock", "lock_keyspace_events")
            .expect("INFO lock")
    };
    let version = server.info("server", "redis_version").expect("version");
    let valkey = server.info("server", "valkey_version").is_some();
    let numbers: Vec<u32> = version.split('.').filter_map(|n| n.parse().ok()).collect();
    let redis_8_2 = !valkey && numbers >= vec![8, 2];
    let can_unsubscribe = server.info("lock", "lock_keyspace_unsubscribe").as_deref() == Some("1");
    assert_eq!(can_unsubscribe, redis_8_2, "{version}, valkey: {valkey}");

    assert_eq!(heard(), "none", "nothing waits");
    run(&mut con, &["INCR", "counter"]);
    run(&mut con, &["SET", "s", "v", "EX", "60"]);
    run(&mut con, &["HSET", "h", "f", "v"]);
    assert_eq!(acquire(&mut con, "L", "holder", 30_000), None);
    run(&mut con, &["LOCK.SEMSET", "sem", "0"]);
    assert_eq!(heard(), "none", "nothing waits yet");

    // A lock's waiter: deletes (g), expiries (x), evictions (e).
    let mut lock_waiter = queue(&server, "L", "w", 30_000, 0);
    assert_eq!(heard(), "gxe");
    // A semaphore's: its permits ($) and leases (z) too.
    let mut sem_waiter = queue_for(&server, &["LOCK.SEMACQUIRE", "sem", "1", "WAIT", "0"]);
    assert_eq!(heard(), "g$zxe");
    // A reader's: hash writes (h), for Redisson's downgrade.
    assert_eq!(wacquire(&mut con, "doc", "writer", 30_000), Value::Nil);
    let mut reader = RawClient::connect(server.port);
    reader.send(&["LOCK.RACQUIRE", "doc", "r", "30000", "WAIT", "0"]);
    poll_until(Duration::from_secs(5), "the reader waits", || {
        heard().contains('h')
    });
    assert_eq!(heard(), "g$hzxe");

    assert_eq!(release(&mut con, "L", "holder", None), Some(1));
    assert_eq!(lock_waiter.read(), Resp::Nil);
    run(&mut con, &["LOCK.SEMRELEASE", "sem", "1"]);
    assert_eq!(sem_waiter.read(), Resp::Int(1));
    assert_eq!(
        run(&mut con, &["LOCK.WRELEASE", "doc", "writer"]),
        Value::Int(1)
    );
    assert_eq!(reader.read(), Resp::Nil);
    assert_eq!(stat(&server, "lock_waiting_clients"), 0);
    if can_unsubscribe {
        poll_until(Duration::from_secs(2), "every class let go", || {
            heard() == "none"
        });
    } else {
        // Nothing can be let go: the classes stay heard until a restart
        // (docs/operations.md, Known limits), and a new waiter subscribes
        // nothing twice.
        assert_eq!(heard(), "g$hzxe");
        let mut again = queue(&server, "L", "w2", 30_000, 100);
        assert!(matches!(again.read(), Resp::Int(_)), "times out");
        assert_eq!(heard(), "g$hzxe");
    }
}

fn wacquire(con: &mut redis::Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    run(con, &["LOCK.WACQUIRE", key, owner, &lease_ms.to_string()])
}
