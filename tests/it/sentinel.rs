//! The test support's Sentinel spawner (`test-support/src/sentinel.rs`) does
//! what the chaos test and the client's Sentinel tests rely on: the sentinels
//! find each other and the replicas, answer the master's address, and fail
//! over to a replica when the master dies.

use std::time::Duration;

use redis_lock_test_support::sentinel::{SentinelConfig, Sentinels};
use redis_lock_test_support::*;

#[test]
fn sentinels_report_the_master_and_fail_over_when_it_dies() {
    let _alone = alone();
    let mut master = Server::with(Options::new().aof());
    let replicas = [
        Server::with(Options::new().aof()),
        Server::with(Options::new().aof()),
    ];
    for replica in &replicas {
        replica.replicaof(&master);
    }
    let sentinels = Sentinels::start(SentinelConfig::new(master.port), 3);
    sentinels.wait_ready(2);
    assert_eq!(sentinels.master_ports(), vec![Some(master.port); 3]);

    let mut con = master.connection();
    token_of(&mut con, "L", "a", 60_000);
    wait_for_replicas(&master, &[&replicas[0], &replicas[1]]);
    master.crash();

    // down-after 1 s, then an election and the promotion: a few seconds.
    poll_until(Duration::from_secs(20), "a replica is promoted", || {
        sentinels
            .master_port()
            .is_some_and(|port| port != master.port)
    });
    let new_port = sentinels.master_port().expect("a master");
    let promoted = replicas
        .iter()
        .find(|r| r.port == new_port)
        .expect("the new master is one of the replicas");
    poll_until(
        Duration::from_secs(10),
        "the promoted replica is a master",
        || promoted.info("replication", "role").as_deref() == Some("master"),
    );
    let mut con = promoted.connection();
    assert_eq!(holders(&mut con, "L"), owned_by("a"), "the lock survived");
}
