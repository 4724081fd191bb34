//! The chaos test's nemesis: one fault at a time, chosen by a seeded RNG,
//! each undone (or healed by Sentinel) before the next.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::cluster::{probe, replication_info, Cluster};
use super::worker::{lock_name, Shared};
use redis_lock_test_support::info_field;

/// How long Sentinel may take to fail over, and the cluster to heal.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(45);
const HEAL_TIMEOUT: Duration = Duration::from_secs(60);
/// A command to a running server.
const SHORT: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// SIGSTOP the master for less than Sentinel's down-after, SIGCONT.
    StopMaster,
    /// SIGSTOP the master until Sentinel promoted a replica, then SIGCONT:
    /// two masters until Sentinel demotes the old one.
    StopMasterPastFailover,
    /// SIGKILL the master; after the failover, restart it from its AOF as a
    /// replica of the new master.
    KillMaster,
    /// SIGKILL the master and restart it at once from its AOF as a master,
    /// for Sentinel to sort out (it may or may not have noticed).
    KillMasterQuickRestart,
    /// SIGSTOP one replica, let the master write, kill the master; the
    /// other replica is promoted. Synced runs first wait until the other
    /// replica has everything the master wrote before the stop, and until
    /// every Sentinel flags the stopped one down.
    LagReplicaThenKill,
    /// SIGSTOP both replicas, let the master write, kill it, SIGCONT them:
    /// the promoted replica misses the master's last grants.
    LagReplicasThenKill,
    /// `CLIENT PAUSE <ms> WRITE` on the master.
    PauseWrites,
    /// `FAILOVER TIMEOUT 5000` on the master (Redis's coordinated one).
    Failover,
    /// `DEBUG SLEEP` on the master, shorter than down-after.
    DebugSleep,
    /// `DEL` of a lock's token counter on the master.
    DelCounter,
    /// A worker stalls past its lease between its grant and its write.
    StallWorker,
}

impl Action {
    pub fn name(self) -> String {
        format!("{self:?}")
    }

    /// A failover and a heal follow: several seconds.
    fn slow(self) -> bool {
        use Action::*;
        matches!(
            self,
            StopMasterPastFailover
                | KillMaster
                | KillMasterQuickRestart
                | LagReplicaThenKill
                | LagReplicasThenKill
                | Failover
        )
    }
}

/// A slow action is only started with this much of the run left, so that
/// a short run ends on time.
const SLOW_ACTION_TIME: Duration = Duration::from_secs(5);

/// The actions of a run. Synced runs keep to faults SYNC 1 with two
/// replicas must survive: one node failing at a time, failovers by Sentinel
/// after the old master is unreachable. An uncoordinated promotion with the
/// old master still reachable (`SENTINEL FAILOVER`), two nodes failing, a
/// killed master back as a master (it may be one next to a promoted
/// replica), `FAILOVER` (Sentinel then turns the promoted replica back into
/// a replica of the old master, losing what it took) are outside it.
/// `FAILOVER` also leaves the unsynced cluster answering READONLY for 20-30
/// s until Sentinel sorts it out, so only long runs (`long`) do it.
pub fn actions(synced: bool, long: bool) -> Vec<Action> {
    use Action::*;
    let mut all = vec![
        StopMaster,
        StopMasterPastFailover,
        KillMaster,
        LagReplicaThenKill,
        PauseWrites,
        DebugSleep,
        DelCounter,
        StallWorker,
    ];
    if !synced {
        all.extend([KillMasterQuickRestart, LagReplicasThenKill]);
        if long {
            all.push(Failover);
        }
    }
    all
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn master_offset(port: u16) -> Option<i64> {
    replication_info(port).and_then(|i| info_field(&i, "master_repl_offset")?.parse().ok())
}

/// Waits (up to 2 s) until the replicas report the same offset, once the
/// master is stopped: they have read everything it sent them.
fn replicas_converge(cluster: &Cluster, replicas: &[usize]) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let offsets: Vec<Option<i64>> = replicas
            .iter()
            .map(|r| master_offset(cluster.nodes[*r].port))
            .collect();
        if offsets[0].is_some() && offsets.iter().all(|o| *o == offsets[0]) {
            return;
        }
        sleep_ms(5);
    }
}

/// Runs the nemesis until `until` or `max_actions`; the first action is
/// `first` when given (a run must see a failover). Returns the actions done.
pub fn run(
    cluster: &mut Cluster,
    shared: &Shared,
    rng: &mut StdRng,
    allowed: &[Action],
    first: Option<Action>,
    until: Instant,
    max_actions: usize,
) -> Result<BTreeMap<String, usize>, String> {
    let mut done = BTreeMap::new();
    let synced = shared.config.sync_ms.is_some();
    let mut next = first;
    while Instant::now() < until && done.values().sum::<usize>() < max_actions {
        let master = cluster.healed(HEAL_TIMEOUT)?;
        sleep_ms(rng.gen_range(100..600));
        let left = until.saturating_duration_since(Instant::now());
        let fits: Vec<Action> = allowed
            .iter()
            .copied()
            .filter(|a| !a.slow() || left >= SLOW_ACTION_TIME)
            .collect();
        let Some(action) = next.take().or_else(|| fits.choose(rng).copied()) else {
            sleep_ms(100);
            continue;
        };
        perform(cluster, shared, rng, action, master, synced)?;
        *done.entry(action.name()).or_default() += 1;
    }
    cluster.healed(HEAL_TIMEOUT)?;
    Ok(done)
}

fn perform(
    cluster: &mut Cluster,
    shared: &Shared,
    rng: &mut StdRng,
    action: Action,
    master: usize,
    synced: bool,
) -> Result<(), String> {
    let port = cluster.nodes[master].port;
    let replicas: Vec<usize> = (0..cluster.nodes.len()).filter(|i| *i != master).collect();
    match action {
        Action::StopMaster => {
            cluster.nodes[master].signal("STOP");
            // Well under down-after (2 s), even with a slow Sentinel.
            sleep_ms(rng.gen_range(100..400));
            cluster.nodes[master].signal("CONT");
        }
        Action::StopMasterPastFailover => {
            cluster.nodes[master].signal("STOP");
            if synced {
                replicas_converge(cluster, &replicas);
            }
            let promoted = cluster.failed_over_from(master, FAILOVER_TIMEOUT);
            sleep_ms(rng.gen_range(0..300));
            cluster.nodes[master].signal("CONT");
            let promoted = promoted?;
            // Sentinel demotes the old master only once its next INFO (every
            // 10 s) shows it: do it sooner, as an operator would, leaving
            // two masters for a while.
            sleep_ms(rng.gen_range(200..1500));
            let new_port = cluster.nodes[promoted].port.to_string();
            probe(
                port,
                redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&new_port),
                SHORT,
            )
            .map_err(|e| format!("REPLICAOF the new master: {e}"))?;
        }
        Action::KillMaster => {
            if synced {
                // Sentinel promotes the replica with the greatest offset as
                // it last saw it, which may be a second old: stop the
                // master and let both replicas read all it sent, so that
                // whichever is promoted has every acknowledged grant.
                cluster.nodes[master].signal("STOP");
                replicas_converge(cluster, &replicas);
            }
            cluster.nodes[master].crash();
            let new = cluster.failed_over_from(master, FAILOVER_TIMEOUT)?;
            cluster.restart_as_replica(master, new)?;
        }
        Action::KillMasterQuickRestart => {
            cluster.nodes[master].crash();
            sleep_ms(rng.gen_range(50..1500));
            cluster.nodes[master].restart_with(&[])?;
        }
        Action::LagReplicaThenKill => {
            let (stopped, other) = if rng.gen_bool(0.5) {
                (replicas[0], replicas[1])
            } else {
                (replicas[1], replicas[0])
            };
            cluster.nodes[stopped].signal("STOP");
            if synced {
                // Everything acknowledged so far is on a replica; from now
                // on only `other` can acknowledge. Make sure `other` has
                // what only `stopped` might have acknowledged.
                let target = master_offset(port).unwrap_or(0);
                let deadline = Instant::now() + Duration::from_secs(10);
                while master_offset(cluster.nodes[other].port).unwrap_or(0) < target {
                    if Instant::now() > deadline {
                        cluster.nodes[stopped].signal("CONT");
                        return Err("the running replica did not catch up".to_string());
                    }
                    sleep_ms(5);
                }
                // Sentinel must not promote the stopped replica, which
                // lacks what `other` acknowledged since: it skips replicas
                // it sees down, whatever offsets it last read.
                if let Err(e) = cluster.sentinels_see_down(stopped, Duration::from_secs(10)) {
                    cluster.nodes[stopped].signal("CONT");
                    return Err(e);
                }
            }
            sleep_ms(rng.gen_range(100..500));
            cluster.nodes[master].crash();
            let new = cluster.failed_over_from(master, FAILOVER_TIMEOUT);
            cluster.nodes[stopped].signal("CONT");
            cluster.restart_as_replica(master, new?)?;
        }
        Action::LagReplicasThenKill => {
            for r in &replicas {
                cluster.nodes[*r].signal("STOP");
            }
            sleep_ms(rng.gen_range(100..500));
            cluster.nodes[master].crash();
            for r in &replicas {
                cluster.nodes[*r].signal("CONT");
            }
            let new = cluster.failed_over_from(master, FAILOVER_TIMEOUT)?;
            cluster.restart_as_replica(master, new)?;
        }
        Action::PauseWrites => {
            let ms = rng.gen_range(200..1500).to_string();
            probe(
                port,
                redis::cmd("CLIENT").arg(&["PAUSE", &ms, "WRITE"]),
                SHORT,
            )
            .map_err(|e| format!("CLIENT PAUSE: {e}"))?;
            sleep_ms(ms.parse::<u64>().unwrap_or(0) + 100);
        }
        Action::Failover => {
            // Refused at times (a replica not in sync yet): also a fine outcome.
            let _ = probe(
                port,
                redis::cmd("FAILOVER").arg(&["TIMEOUT", "5000"]),
                SHORT,
            );
            sleep_ms(1000);
        }
        Action::DebugSleep => {
            let secs = format!("{:.2}", rng.gen_range(0.1..0.4));
            probe(port, redis::cmd("DEBUG").arg(&["SLEEP", &secs]), SHORT * 3)
                .map_err(|e| format!("DEBUG SLEEP: {e}"))?;
        }
        Action::DelCounter => {
            let lock = rng.gen_range(0..shared.config.locks);
            let counter = format!("redisson_lock_token:{{{}}}", lock_name(lock));
            probe(port, redis::cmd("DEL").arg(counter), SHORT)
                .map_err(|e| format!("DEL counter: {e}"))?;
        }
        Action::StallWorker => {
            // One stall at a time: the last one asked for is done first.
            let deadline = Instant::now() + Duration::from_secs(30);
            while shared.stall.load(Ordering::SeqCst) != -1 {
                if Instant::now() > deadline {
                    return Err("a stalled worker never got a grant".to_string());
                }
                sleep_ms(20);
            }
            let worker = rng.gen_range(0..shared.config.workers) as i64;
            shared.stalls_asked.fetch_add(1, Ordering::SeqCst);
            shared.stall.store(worker, Ordering::SeqCst);
        }
    }
    Ok(())
}
