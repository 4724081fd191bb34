//! The wait queues' unit tests (`wait_queue.rs`).

use super::*;

type Queues = WaitQueues<usize, u64, &'static str>;

fn waiter(client: usize) -> Waiter<usize, &'static str> {
    Waiter {
        client,
        kind: "lock",
        owner: format!("o{client}").into_bytes(),
        lease_ms: 1000,
        since_ms: 100,
        joined_ms: 100,
        place: 0,
        keep_ms: 0,
        timeout_ms: 0,
        token: false,
        sync: None,
        ask: Ask::Lock,
    }
}

#[test]
fn interests_list_every_waiter_and_watch_and_drops_are_counted() {
    let mut q = Queues::default();
    let interests = |q: &Queues| {
        let mut seen = Vec::new();
        q.for_each_interest(|kind, ask| seen.push((*kind, ask)));
        seen.sort_by_key(|(kind, _)| *kind);
        seen
    };
    assert!(interests(&q).is_empty(), "nothing waits");
    q.push(0, b"rw", waiter(1));
    q.push(
        0,
        b"rw",
        Waiter {
            kind: "rwlock",
            ask: Ask::Rw(crate::grant_policy::Mode::Read),
            ..waiter(2)
        },
    );
    let watch = Watch {
        kind: "semaphore",
        deadline: None,
    };
    q.watch(1, b"sem", watch);
    assert_eq!(
        interests(&q),
        vec![
            ("lock", Some(Ask::Lock)),
            ("rwlock", Some(Ask::Rw(crate::grant_policy::Mode::Read))),
            ("semaphore", None)
        ]
    );
    let dropped = q.dropped();
    q.remove_client(2);
    assert_eq!(q.dropped(), dropped, "the queue stays with its writer");
    q.remove_client(1);
    q.unwatch(1, b"sem");
    assert_eq!(q.dropped(), dropped + 2);
    assert!(interests(&q).is_empty());
    q.push(0, b"k", waiter(3));
    q.drain_all();
    assert_eq!(q.dropped(), dropped + 3, "a demotion drops queues too");
}

#[test]
fn waiters_are_granted_in_arrival_order() {
    let mut q = Queues::default();
    for c in 1..=10 {
        q.push(0, b"k", waiter(c));
    }
    let order: Vec<usize> = std::iter::from_fn(|| q.pop_next(0, b"k"))
        .map(|w| w.client)
        .collect();
    assert_eq!(order, (1..=10).collect::<Vec<_>>());
    assert_eq!(q.total(), 0);
    assert!(!q.has_waiters(0, b"k"));
}

#[test]
fn a_waiter_whose_timeout_has_come_is_passed_over_and_left_to_redis() {
    use crate::grant_policy::{Mode, ReadWrite, RwHolders};
    let mut q = Queues::default();
    let mut timing_out = waiter(1);
    timing_out.timeout_ms = 50; // since 100: times out at 150
    q.push(0, b"k", timing_out);
    q.push(0, b"k", waiter(2));
    fn mode<'a>(w: &'a Waiter<usize, &'static str>) -> &'a Mode {
        w.ask.mode()
    }
    let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 149, mode);
    assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [1]);
    q.push(0, b"k", {
        let mut w = waiter(3);
        w.timeout_ms = 50;
        w
    });
    let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 150, mode);
    assert_eq!(
        run.iter().map(|w| w.client).collect::<Vec<_>>(),
        [2],
        "3 is timing out: the next one is served"
    );
    assert!(q.has_waiters(0, b"k"), "3 stays until Redis times it out");
    assert!(q.remove_client(3).is_some());
}

#[test]
fn a_watched_queue_stays_without_waiters_until_unwatched() {
    let mut q = Queues::default();
    let watch = Watch {
        kind: "latch",
        deadline: Some(5),
    };
    q.watch(0, b"k", watch);
    assert_eq!(q.kind(0, b"k"), Some("latch"));
    assert!(!q.has_waiters(0, b"k"));
    q.push(0, b"k", waiter(1));
    assert_eq!(
        q.kind(0, b"k"),
        Some("lock"),
        "the head waiter's kind first"
    );
    assert!(q.remove_client(1).is_some());
    assert_eq!(q.watched(0, b"k"), Some(watch), "kept: still watched");
    q.unwatch(0, b"k");
    assert_eq!(q.kind(0, b"k"), None);
    assert!(q.keys(None).is_empty());
}

#[test]
fn keys_and_databases_have_separate_queues() {
    let mut q = Queues::default();
    q.push(0, b"a", waiter(1));
    q.push(1, b"a", waiter(2));
    q.push(0, b"b", waiter(3));
    assert_eq!(q.pop_next(1, b"a").map(|w| w.client), Some(2));
    assert_eq!(q.pop_next(1, b"a"), None);
    assert_eq!(q.pop_next(0, b"a").map(|w| w.client), Some(1));
    assert_eq!(q.total(), 1);
    assert_eq!(q.keys(None), vec![(0, b"b".to_vec())]);
    assert_eq!(q.keys(Some(1)), vec![]);
}

#[test]
fn a_timed_out_or_gone_waiter_leaves_at_once_and_is_never_granted() {
    let mut q = Queues::default();
    for c in 1..=3 {
        q.push(0, b"k", waiter(c));
    }
    assert_eq!(
        q.remove_client(2).map(|(key, w)| (key, w.client)),
        Some((b"k".to_vec(), 2))
    );
    assert_eq!(q.remove_client(2), None, "removing twice finds nothing");
    assert_eq!(q.pop_next(0, b"k").map(|w| w.client), Some(1));
    assert_eq!(q.pop_next(0, b"k").map(|w| w.client), Some(3));
    assert_eq!(q.remove_client(1), None, "a granted waiter is not waiting");
}

#[test]
fn empty_queues_are_dropped_so_memory_stays_flat() {
    let mut q = Queues::default();
    for round in 0..10_000 {
        q.push(
            round % 7,
            format!("key{round}").as_bytes(),
            waiter(round as usize),
        );
        q.remove_client(round as usize);
    }
    assert_eq!(q.total(), 0);
    assert!(q.queues.is_empty() && q.index.is_empty());
}

#[test]
fn snapshots_show_queue_order_and_waiting_time() {
    let mut q = Queues::default();
    q.push(0, b"k", waiter(1));
    q.push(
        0,
        b"k",
        Waiter {
            since_ms: 150,
            joined_ms: 150,
            timeout_ms: 500,
            ..waiter(2)
        },
    );
    let shot = q.snapshot(0, b"k", 200);
    assert_eq!(shot.len(), 2);
    assert_eq!(
        (
            shot[0].owner.as_slice(),
            shot[0].waited_ms,
            shot[0].timeout_ms
        ),
        (&b"o1"[..], 100, 0)
    );
    assert_eq!(
        (
            shot[1].owner.as_slice(),
            shot[1].waited_ms,
            shot[1].timeout_ms
        ),
        (&b"o2"[..], 50, 500)
    );
    assert!(q.snapshot(0, b"other", 200).is_empty());
}

#[test]
fn drain_takes_everyone() {
    let mut q = Queues::default();
    q.push(0, b"a", waiter(1));
    q.push(3, b"b", waiter(2));
    let mut drained: Vec<usize> = q.drain_all().into_iter().map(|w| w.client).collect();
    drained.sort();
    assert_eq!(drained, vec![1, 2]);
    assert_eq!(q.total(), 0);
}

fn timer(id: u64, due: i64) -> QueueTimer<u64> {
    QueueTimer { id, seq: id, due }
}

#[test]
fn a_queue_keeps_one_timer_and_only_an_earlier_time_replaces_it() {
    let mut q = Queues::default();
    assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::NoQueue);
    q.push(0, b"k", waiter(1));
    assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::Start { stop: None });
    q.timer_started(0, b"k", timer(7, 10));
    assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::Keep);
    assert_eq!(
        q.plan_timer(0, b"k", 20),
        TimerPlan::Keep,
        "fires early, re-arms"
    );
    assert_eq!(
        q.plan_timer(0, b"k", 5),
        TimerPlan::Start { stop: Some(7) },
        "a shortened lease replaces the timer"
    );
    q.timer_started(0, b"k", timer(8, 5));
    assert_eq!(q.live_timers(), 1);
    assert!(
        !q.timer_fired(0, b"k", 7),
        "a replaced timer is not current"
    );
    assert!(q.timer_fired(0, b"k", 8));
    assert_eq!(q.live_timers(), 0);
    assert_eq!(q.plan_timer(0, b"k", 20), TimerPlan::Start { stop: None });
}

#[test]
fn a_dropped_queue_hands_its_timer_back_to_be_stopped() {
    let mut q = Queues::default();
    q.push(0, b"a", waiter(1));
    q.push(0, b"a", waiter(2));
    q.timer_started(0, b"a", timer(5, 100));
    q.remove_client(1);
    assert!(q.take_orphaned_timers().is_empty(), "someone still waits");
    q.remove_client(2);
    assert_eq!(q.take_orphaned_timers(), vec![5]);
    assert!(q.take_orphaned_timers().is_empty(), "handed back once");

    q.push(0, b"b", waiter(3));
    q.timer_started(0, b"b", timer(6, 100));
    q.pop_next(0, b"b");
    assert_eq!(q.take_orphaned_timers(), vec![6]);

    q.push(1, b"c", waiter(4));
    q.timer_started(1, b"c", timer(9, 100));
    q.drain_all();
    assert_eq!(q.take_orphaned_timers(), vec![9]);

    q.timer_started(2, b"gone", timer(11, 100));
    assert_eq!(q.take_orphaned_timers(), vec![11], "no queue: stop at once");
    assert_eq!(q.live_timers(), 0);
}

#[test]
fn wait_then_leave_cycles_leave_no_timer_behind() {
    let mut q = Queues::default();
    let mut stopped = 0;
    for round in 0..100_000u64 {
        q.push(0, b"k", waiter(round as usize));
        if let TimerPlan::Start { stop } = q.plan_timer(0, b"k", 1_000) {
            stopped += stop.iter().count();
            q.timer_started(0, b"k", timer(round, 1_000));
        }
        q.remove_client(round as usize);
        stopped += q.take_orphaned_timers().len();
    }
    assert_eq!(stopped, 100_000, "every timer started was stopped");
    assert_eq!(q.live_timers(), 0);
    assert!(q.queues.is_empty() && q.index.is_empty());
}

#[test]
fn queues_wake_just_after_the_earliest_wait_timeout() {
    let mut q: WaitQueues<usize, u32, &str> = WaitQueues::default();
    let waiter = |client, since_ms, timeout_ms| Waiter {
        client,
        kind: "lock",
        owner: b"o".to_vec(),
        lease_ms: 1,
        since_ms,
        joined_ms: since_ms,
        place: 0,
        keep_ms: 0,
        timeout_ms,
        token: false,
        sync: None,
        ask: Ask::Lock,
    };
    assert_eq!(q.timeout_wake(0, b"k", 100), None, "no queue");
    q.push(0, b"k", waiter(1, 100, 0));
    assert_eq!(q.timeout_wake(0, b"k", 100), None, "waits forever");
    q.push(0, b"k", waiter(2, 100, 50));
    q.push(0, b"k", waiter(3, 110, 20));
    assert_eq!(q.timeout_wake(0, b"k", 100), Some(131), "110 + 20 + 1");
    assert_eq!(
        q.timeout_wake(0, b"k", 131),
        Some(132),
        "just passed: again in a ms"
    );
    assert_eq!(
        q.timeout_wake(0, b"k", 136),
        Some(151),
        "past the grace: the next one"
    );
    assert_eq!(q.timeout_wake(0, b"k", 200), None);
    assert_eq!(q.timeout_wake(1, b"k", 100), None, "another db");
}

#[test]
fn a_pass_takes_the_run_its_policy_grants_and_leaves_the_rest_queued() {
    use crate::grant_policy::{Mode, ReadWrite, RwHolders};
    let mut q: Queues = WaitQueues::default();
    for client in 1..=5 {
        q.push(0, b"k", waiter(client));
    }
    fn mode<'a>(w: &'a Waiter<usize, &'static str>) -> &'a Mode {
        if w.client == 4 {
            &Mode::Write
        } else {
            &Mode::Read
        }
    }
    let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 0, mode);
    assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(q.total(), 2, "the writer and the reader behind it wait");
    assert_eq!(q.remove_client(2), None, "granted clients left the index");
    let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 0, mode);
    assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [4]);
}
