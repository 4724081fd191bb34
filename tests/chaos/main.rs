//! A Jepsen-style chaos test of the locks through real failovers.
//!
//! **Topology** (`chaos/cluster.rs`): three data nodes with the module and
//! AOF (`appendfsync always`), a master and two replicas; three Sentinels
//! (down-after 2 s, failover-timeout 6 s) doing automatic failover; an
//! independent resource server with the module, for `LOCK.FENCE`.
//!
//! **Workers** (`chaos/worker.rs`, 12 threads, `CHAOS_WORKERS`): in a
//! loop, find the master through Sentinel (even workers ask before every
//! acquire; odd ones keep the master they found until it answers an error,
//! as caching clients do, so they keep talking to an old master that
//! resumed after a failover), `LOCK.ACQUIRE <lock> <owner> 2000 WAIT 1000
//! TOKEN` (in the synced mode also `SYNC 1 500`) on one of two locks, with
//! an owner unique to the attempt; on a grant, one or two writes to the
//! resource, each ONE script: `LOCK.FENCE fence:{lock} <token>` then
//! `RPUSH history:{lock} "<token>:w<worker>:<attempt>"`; hold a little
//! (5% of holds: 50-800 ms); then `LOCK.RELEASE`. Each grant is recorded
//! with its owner, token, node, the client's clock before sending the
//! acquire (`sent`) and after its reply (`acked`), in µs, the lease, its
//! writes (accepted, refused `STALE`, failed), when its release was sent
//! and the answer. Connection errors, `READONLY`, timeouts, `NOSYNC` are
//! counted and the worker carries on. Workers do not renew. Reads wait
//! 10 s, so a command sent to a master that is then stopped is answered
//! when it resumes.
//!
//! **Nemesis** (`chaos/nemesis.rs`), seeded (the seed is printed;
//! `CHAOS_SEED` replays the nemesis's and the workers' random choices, not
//! the machine's timing; `CHAOS_ACTIONS` restricts the choices), one fault
//! at a time, each undone and the cluster healed (the Sentinels agree on a
//! master with two linked replicas and have finished their failovers)
//! before the next: SIGSTOP/SIGCONT of the master, under down-after, or
//! until Sentinel promoted a replica (then two masters for 0.2-1.5 s until
//! the nemesis demotes the old one with `REPLICAOF`, sooner than Sentinel's
//! next INFO would); SIGKILL of the master and restart from its AOF as a
//! replica of the new master, or at once as a master for Sentinel to sort
//! out; SIGSTOP of one replica (or both) then SIGKILL of the master (a
//! promotion that lost grants); `CLIENT PAUSE WRITE`; `FAILOVER`; `DEBUG
//! SLEEP` under down-after; `DEL` of a token counter; a worker stalled past
//! its lease between its grant and its write, until another holder wrote
//! with a newer token. The first action of a fenced run fails over (a kill;
//! a stop past the failover in the synced mode), so every such run fails
//! over (the test asserts it); slow actions start only with 5 s of the run
//! left. Synced runs keep to what SYNC 1 with two replicas must survive
//! (see [`nemesis::actions`]): one node failing at a time, Sentinel
//! promoting a replica that has every acknowledged grant. So no two-node
//! faults, no killed master back as a master, no `FAILOVER`; before a kill
//! or a stop past the failover the master is stopped until both replicas
//! report the same offset (Sentinel compares offsets it read up to seconds
//! earlier); with one replica stopped, the master is killed only once the
//! other has what the master wrote before the stop and every Sentinel flags
//! the stopped one down (so none promotes it). `FAILOVER` (Redis's, which
//! Sentinel then undoes, 20-30 s of READONLY) only in runs of 30 s or more.
//!
//! **Checker** (`chaos/checker.rs`), over acknowledged grants only (an
//! acquire whose reply was lost may have granted; nobody relied on it):
//!
//! 1. *No duplicate token*: no token of a lock was acknowledged to two
//!    grants of that lock. Owners are unique per grant, so a re-entry
//!    cannot explain one. (Each lock has its own counter, so two locks may
//!    share a token.)
//! 2. *Fenced order*: the resource's accepted writes of a lock (its history
//!    list, in the order it accepted them) have strictly increasing tokens,
//!    except consecutive writes of one grant, which share a token.
//! 3. *No silently lost grant* (asserted in the synced mode only; the
//!    unsynced mode reports it): grant G's holder counts on the lock from
//!    `acked(G)` until `end(G) = min(release sent(G), sent(G) + lease -
//!    100 ms)`, its *claim* (empty if `acked(G) >= end(G)`). The server
//!    started the lease after `sent(G)`, so no correct server lets it end
//!    before `sent(G) + lease`; the 100 ms is slack for the server's clock
//!    in whole ms. Two grants of one lock whose claims intersect are a
//!    violation, and the one acknowledged first was silently lost: the
//!    other holder was told it holds the lock while the first still did.
//!    This is sound: if G was granted first, a correct server grants H only
//!    once G is released (processed after `release sent(G)`) or expired
//!    (after `sent(G) + lease`), and H's `acked` comes after its grant, so
//!    after `end(G)`. Times are the client's clock in µs (one machine: the
//!    servers' clock too). A holder is never told it lost the lock before
//!    `end(G)`: workers do not renew, and their release, whose nil answer
//!    would tell, is sent at `end(G)` at the earliest. A stalled worker's
//!    late write is (2)'s business, not (3)'s.
//! 4. *No crash*: no server log says `crashed by signal`, `ASSERTION
//!    FAILED`, `Guru Meditation`, `panicked` or `STACK TRACE`, and every
//!    server runs at the end (the nemesis restarts those it kills).
//!
//! The control run removes `LOCK.FENCE` from the script and makes a worker
//! stall past its lease until another holder wrote with a newer token,
//! then write: (2) must find the stale write, every time.
//!
//! `CHAOS_SECS` (default 4) sets how long the nemesis acts per run;
//! `make test-chaos` runs 60 s per server (see the Makefile), and prints
//! a summary per run.

mod checker;
mod cluster;
mod nemesis;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use checker::Report;
use cluster::Cluster;
use nemesis::Action;
use redis_lock_test_support::server_binary;
use worker::{history_key, Shared, WorkerConfig};

const LEASE_MS: i64 = 2000;
const WAIT_MS: i64 = 1000;
const SYNC_MS: i64 = 500;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number: {v:?}")),
        Err(_) => default,
    }
}

struct Spec {
    label: &'static str,
    synced: bool,
    fenced: bool,
    secs: u64,
    actions: Vec<Action>,
    /// The first action: fenced runs start with a failover.
    first: Action,
    max_actions: usize,
}

/// One run: the cluster, the workers, the nemesis for `spec.secs`, then the
/// checker. Panics if the cluster does not heal (with the seed).
fn run(spec: Spec) -> Report {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .map(|s| s.parse().expect("CHAOS_SEED is a number"))
        .unwrap_or_else(|| rand::thread_rng().gen::<u64>());
    let label = format!("{} on {}", spec.label, server_binary());
    println!(
        "chaos [{label}]: seed {seed} (replay: CHAOS_SEED={seed}), {} s",
        spec.secs
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut cluster = Cluster::start();
    let setup = started.elapsed();
    // CHAOS_ACTIONS=KillMaster,PauseWrites: only these (for a replay or a hunt).
    let mut allowed = spec.actions.clone();
    if let Ok(only) = std::env::var("CHAOS_ACTIONS") {
        allowed.retain(|a| only.split(',').any(|name| name.trim() == a.name()));
        assert!(
            !allowed.is_empty(),
            "CHAOS_ACTIONS={only:?} leaves no action"
        );
    }
    let config = WorkerConfig {
        workers: env_number("CHAOS_WORKERS", 12) as usize,
        locks: 2,
        lease_ms: LEASE_MS,
        wait_ms: WAIT_MS,
        sync_ms: spec.synced.then_some(SYNC_MS),
        fenced: spec.fenced,
    };
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        stall: AtomicI64::new(-1),
        stalls_asked: AtomicI64::new(0),
        stalls_done: AtomicI64::new(0),
        sentinel_ports: cluster.sentinels.sentinels.iter().map(|s| s.port).collect(),
        resource_port: cluster.resource.port,
        config: config.clone(),
    });
    let workers: Vec<_> = (0..config.workers)
        .map(|i| {
            let shared = shared.clone();
            std::thread::spawn(move || worker::run(i, seed, shared))
        })
        .collect();

    let until = Instant::now() + Duration::from_secs(spec.secs);
    let outcome = nemesis::run(
        &mut cluster,
        &shared,
        &mut rng,
        &allowed,
        Some(spec.first),
        until,
        spec.max_actions,
    );
    // The stalls asked for are done before the workers stop: a stalled
    // worker waits for another one to write.
    let deadline = Instant::now() + Duration::from_secs(30);
    while shared.stalls_done.load(Ordering::SeqCst) < shared.stalls_asked.load(Ordering::SeqCst)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    shared.stop.store(true, Ordering::SeqCst);
    let histories: Vec<_> = workers
        .into_iter()
        .map(|w| w.join().expect("a worker panicked"))
        .collect();
    let name = format!("{}-{seed}", spec.label.replace([' ', ','], "-"));
    let actions = outcome.unwrap_or_else(|e| {
        let kept = cluster.keep_logs(&name);
        let nodes = cluster.diagnose(&kept);
        panic!(
            "chaos [{label}] seed {seed}: {e}\n  nodes: {nodes:?}\n  crashes: {:?}\n  logs kept in {}",
            cluster.crashes(),
            kept.display()
        )
    });

    let mut resource = cluster.resource.connection();
    let lists: Vec<Vec<String>> = (0..config.locks)
        .map(|lock| {
            redis::cmd("LRANGE")
                .arg(history_key(lock))
                .arg(0)
                .arg(-1)
                .query(&mut resource)
                .expect("LRANGE history")
        })
        .collect();
    let mut report = checker::check(&histories, &lists);
    report.actions = actions;
    report.failovers = cluster.failovers();
    report.crashes = cluster.crashes();
    let failed = !(report.duplicates.is_empty()
        && report.order_violations.is_empty()
        && report.lost_grants.is_empty()
        && report.crashes.is_empty());
    if failed && spec.fenced {
        println!(
            "chaos [{label}]: logs kept in {}",
            cluster.keep_logs(&name).display()
        );
    }
    println!(
        "{} (setup {:.1} s, run {:.1} s)",
        report.summary(&format!("{label}, seed {seed}")),
        setup.as_secs_f64(),
        (started.elapsed() - setup).as_secs_f64()
    );
    report
}

fn secs() -> u64 {
    env_number("CHAOS_SECS", 4)
}

/// Some work was done under the nemesis: the run means something.
fn assert_meaningful(report: &Report, details: &str) {
    assert!(
        report.grants >= 20,
        "too few grants to mean anything{details}"
    );
    assert!(report.writes_accepted >= 10, "too few writes{details}");
    assert!(
        report.failovers >= 1,
        "every run fails over at least once{details}"
    );
}

/// A fenced run of `secs()` that starts with `first` (a failover) and
/// did enough to mean something: its report, and the details every
/// assertion on it prints.
fn fenced_run(label: &'static str, synced: bool, first: Action) -> (Report, String) {
    let report = run(Spec {
        label,
        synced,
        fenced: true,
        secs: secs(),
        actions: nemesis::actions(synced, secs() >= 30),
        first,
        max_actions: 200,
    });
    let details = format!("\n{}{}", report.summary(label), report.details(10));
    assert_meaningful(&report, &details);
    (report, details)
}

/// What every fenced run keeps, synced or not: (1) no token acknowledged
/// twice, (2) the resource's writes in token order, (4) no crash.
fn assert_fenced_safety(report: &Report, details: &str) {
    assert!(
        report.duplicates.is_empty(),
        "(1) duplicate tokens{details}"
    );
    assert!(
        report.order_violations.is_empty(),
        "(2) writes out of order{details}"
    );
    assert!(report.crashes.is_empty(), "(4) crashes{details}");
}

#[test]
fn chaos_unsynced_never_reissues_a_token_and_the_fence_keeps_writes_in_order() {
    let (report, details) = fenced_run("unsynced", false, Action::KillMaster);
    assert_fenced_safety(&report, &details);
}

#[test]
fn chaos_synced_loses_no_acknowledged_grant() {
    let (report, details) = fenced_run("synced", true, Action::StopMasterPastFailover);
    assert_fenced_safety(&report, &details);
    assert!(
        report.lost_grants.is_empty(),
        "(3) lost acknowledged grants{details}"
    );
}

/// The control: without the fence, a holder stalled past its lease writes
/// after a newer holder, and the checker must see it.
#[test]
fn chaos_control_without_the_fence_fails_the_checker() {
    let report = run(Spec {
        label: "control, no fence",
        synced: false,
        fenced: false,
        secs: 1,
        actions: vec![Action::StallWorker],
        first: Action::StallWorker,
        max_actions: 1,
    });
    let details = format!("\n{}{}", report.summary("control"), report.details(10));
    assert!(report.stalls >= 1, "the worker stalled{details}");
    assert!(
        !report.order_violations.is_empty(),
        "(2) must catch the stale write without the fence{details}"
    );
}

/// The checker on made-up histories: each check flags what it must, and
/// nothing more (so the chaos runs' zeros mean something).
#[test]
fn the_checker_flags_duplicates_disorder_and_overlapping_claims() {
    use worker::{Grant, History, Write};
    let grant = |owner: &str, token: i64, sent_ms: i64, acked_ms: i64, release_ms: i64| Grant {
        lock: 0,
        owner: owner.to_string(),
        token,
        port: 1,
        sent_us: sent_ms * 1000,
        acked_us: acked_ms * 1000,
        lease_ms: 2000,
        writes: vec![Write::Accepted],
        release_sent_us: Some(release_ms * 1000),
        release_reply: "1".to_string(),
        stalled: false,
    };
    let history = |grants: Vec<Grant>| {
        vec![History {
            grants,
            ..History::default()
        }]
    };
    let list = |entries: &[&str]| vec![entries.iter().map(|e| e.to_string()).collect()];

    // A clean history: one grant after the other, writes in order (a grant
    // may write twice with its token).
    let clean = history(vec![
        grant("w0-1", 10, 0, 1, 5),
        grant("w1-1", 20, 2, 6, 9),
        // Acknowledged after the first's lease (from its send) less 100 ms.
        grant("w2-1", 30, 1000, 1901, 1950),
    ]);
    let writes = list(&["10:w0:1", "10:w0:1", "20:w1:1", "30:w2:1"]);
    let report = checker::check(&clean, &writes);
    assert!(report.duplicates.is_empty() && report.order_violations.is_empty());
    assert!(report.lost_grants.is_empty(), "{:?}", report.lost_grants);

    // (1) one token, two grants; (2) the same token from two grants, and a
    // lower token after a higher one.
    let report = checker::check(
        &history(vec![grant("w0-1", 10, 0, 1, 5), grant("w1-1", 10, 2, 6, 9)]),
        &list(&["10:w0:1", "10:w1:1", "20:w2:1", "15:w3:1"]),
    );
    assert_eq!(report.duplicates.len(), 1, "{:?}", report.duplicates);
    assert_eq!(
        report.order_violations.len(),
        2,
        "{:?}",
        report.order_violations
    );

    // (3) a grant acknowledged while another holder still counted on its
    // own (not released, lease not over): whichever was acknowledged first.
    let report = checker::check(
        &history(vec![
            grant("w0-1", 10, 0, 1, 1500),
            grant("w1-1", 20, 1000, 1001, 1010),
        ]),
        &list(&[]),
    );
    assert_eq!(report.lost_grants.len(), 1, "{:?}", report.lost_grants);
    assert!(report.lost_grants[0].contains("w0-1"));
}
