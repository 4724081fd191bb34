//! The queue room: every wait queue of the server (`wait_queue.rs`, pure),
//! its one timer, and what the queues ask of a kind of object.
//!
//! The queue and its timer serve every kind without naming one. Each
//! waiter and each watch carries its kind's callbacks ([`Kind`]), handed
//! over by the kind's own room when it queues a client or watches a
//! deadline; when the timer fires, it calls the callbacks of the kind its
//! queue is for. This is the shape of Redis's own `blocked.c`, which serves
//! every kind of blocked client from one place and gives a module a
//! callback rather than a case: a new kind of object brings its callbacks,
//! and nothing here changes.
//!
//! **One timer per queue**, aimed by [`aim_timer`]: due just after the
//! object's deadline (a lease, a leased permit, a latch's expiry), "now"
//! when the object changed behind the queue's back, or just after a WAIT
//! timeout so that Redis answers it on time. An earlier moment replaces
//! the timer, a later one keeps it (it fires early, looks, and aims again).
//! The timer stops when its queue goes, so nothing outlives the waiters.
//!
//! **Kept places** (`kept_places.rs`, `docs/waiting.md`): a waiter that
//! left by its timeout or its connection closing leaves its place behind
//! for a grace; the same identity asking again takes it back ([`enqueue`]),
//! or takes the place of its own earlier request still waiting (a sliced
//! wait's next piece, [`enqueue`] answers the earlier one). The grant pass
//! never sees a kept place. Its end is one more deadline of the queue's one
//! timer, which drops it; not while writes are paused, since clients held
//! by the pause could not come back (the grace is postponed by the pause).
//!
//! **Nothing is written while writes are held back** (`CLIENT PAUSE`,
//! `FAILOVER`, `min-replicas-to-write` not met): Redis promises replicas
//! that no write happens then. A timer that finds writes held back looks
//! again every [`PAUSE_POLL_MS`] and only calls its kind once they are
//! allowed, so every kind's hand-offs follow the end of a pause in FIFO
//! order. Commands cannot barge meanwhile: Redis holds back every write
//! command during the pause, and afterwards each kind settles its queue
//! before deciding.

use std::cell::{Cell, RefCell};

use super::hearing;
use crate::errors::Refusal;
use crate::ffi::blocking::{self, BlockedClient, Wake};
use crate::ffi::context::NotifyClass;
use crate::ffi::events::KeyspaceListener;
use crate::ffi::timer::{self, TimerId, TimerJob};
use crate::ffi::{Ctx, RStr};
use crate::grant_policy::{Ask, GrantPolicy};
use crate::kept_places::{Answer, RememberedGrant};
use crate::listing::ObjectKind;
use crate::replica_sync::SyncSpec;
use crate::wait_queue::{self, Joined, KeptInfo, QueueTimer, TimerPlan, WaitQueues, WaiterInfo};
use crate::{config, replicas, resets, semaphore_key, stats, timings};

/// A kind of object clients wait for, as its queue sees it: the callbacks
/// the queue and its timer call. Each kind's room implements it once
/// (`lock.rs`, `semaphore.rs`, `latch.rs`) and hands it over with every
/// waiter and watch.
pub trait Kind: Sync {
    /// The queue's timer fired for `key` of the selected database, on a
    /// master with writes allowed: open the object, carry out what is due
    /// (a lock freed or expired, leased permits past their deadline, a
    /// latch gone) and aim the timer at what comes next.
    fn due(&self, ctx: Ctx, key: &[u8]);

    /// What its command answers `waiter` when it cannot have what it asks
    /// for: its WAIT timeout passed, or a later request of the same
    /// identity took its place (the lock's remaining lease, `0`, nil).
    fn not_granted(&self, ctx: Ctx, key: &[u8], waiter: &Waiter) -> Wake;

    /// Whether a grant's answer is remembered for its waiter's identity
    /// (the ownerless kinds: nothing on their keys says who was granted;
    /// a lock's owner is in its hash), for a cancel or a repeated ask.
    fn remembers_grants(&self) -> bool;

    /// Whether a waiter leaving may let those behind it be served (readers
    /// behind a writer that gave up, a small request behind a large one);
    /// then the timer looks at the object at once.
    fn serves_when_one_leaves(&self) -> bool;

    /// The keyspace event classes that tell of changes others make to the
    /// object behind the queue's back (Redisson's scripts, any client),
    /// for a waiter asking `ask`, or with `None` for a watch: the module
    /// hears them only while such a waiter or watch exists
    /// (`listeners.rs`).
    fn hears(&self, ask: Option<Ask>) -> NotifyClass;
}

/// A kind, as waiters and watches carry it.
pub type KindRef = &'static dyn Kind;
/// A blocked client in a queue.
pub type Waiter = wait_queue::Waiter<BlockedClient, KindRef>;
/// Why a queue is kept while nobody waits.
pub type Watch = wait_queue::Watch<KindRef>;

type Queues = WaitQueues<BlockedClient, TimerId<Due>, KindRef>;

thread_local! {
    // Redis calls commands, callbacks, timers and notifications on its main
    // thread only. Borrows are never held across a call into Redis, since a
    // call (opening a key) can fire a notification that comes back here.
    static QUEUES: RefCell<Queues> = RefCell::new(Queues::default());
    static NEXT_TIMER_SEQ: Cell<u64> = const { Cell::new(0) };
    // Since when a timer found writes paused, while kept places wait for
    // the pause to end (their grace is postponed by it).
    static PAUSED_SINCE: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Runs `f` on the queues (never across a call into Redis).
pub(super) fn queues<T>(f: impl FnOnce(&mut Queues) -> T) -> T {
    QUEUES.with(|q| f(&mut q.borrow_mut()))
}

/// Like [`queues`], for changes that may drop a queue: then stops the
/// dropped queues' timers, so none outlives its waiters, and lets go of the
/// keyspace events nothing needs any more (`hearing.rs`).
pub(super) fn queues_then_stop_timers<T>(ctx: Ctx, f: impl FnOnce(&mut Queues) -> T) -> T {
    let (result, orphaned, dropped) = queues(|q| {
        let before = q.dropped();
        let result = f(q);
        (result, q.take_orphaned_timers(), q.dropped() != before)
    });
    for id in orphaned {
        timer::stop(ctx, id);
    }
    if dropped {
        hearing::queues_dropped::<KeyspaceNews>(ctx, needed_classes);
    }
    result
}

/// Number of clients waiting, all objects together (`INFO lock`).
pub fn waiting_clients() -> usize {
    queues(|q| q.total())
}

/// Number of live queue timers (`INFO lock`): at most one per queue.
pub fn live_timers() -> usize {
    queues(|q| q.live_timers())
}

/// The waiters of `key` in queue order, for `LOCK.INFO` and its siblings.
pub fn snapshot(ctx: Ctx, key: RStr) -> Vec<WaiterInfo> {
    let (db, now) = (ctx.selected_db(), ctx.now_ms());
    queues(|q| q.snapshot(db, key.as_bytes(), now))
}

/// The places kept on `key`, in queue order, for `LOCK.INFO` and its
/// siblings.
pub fn kept_places(ctx: Ctx, key: RStr) -> Vec<KeptInfo> {
    let db = ctx.selected_db();
    queues(|q| q.kept_places(db, key.as_bytes()))
}

/// The keys of the selected database that have a queue (for the listing,
/// which also shows waiters and kept places of objects whose key does not
/// exist).
pub fn queued_keys(ctx: Ctx) -> Vec<Vec<u8>> {
    let db = ctx.selected_db();
    queues(|q| q.keys(Some(db)))
        .into_iter()
        .map(|(_, key)| key)
        .collect()
}

/// How many places are kept and grants remembered (`INFO lock`).
pub fn absent_counts() -> (usize, usize) {
    queues(|q| q.absent_counts())
}

/// Whether there is no queue at all: nobody waits, nothing is watched.
pub fn nothing_waits() -> bool {
    queues(|q| q.is_empty())
}

/// Whether clients queue for `key` of the selected database. Nobody
/// waiting anywhere (the usual case) costs no lookup.
pub fn has_waiters(ctx: Ctx, key: &[u8]) -> bool {
    waiting_clients() > 0 && queues(|q| q.has_waiters(ctx.selected_db(), key))
}

/// Whether a waiter of `key`'s queue (selected database) asks for what
/// `asks` says.
pub fn any_asks(ctx: Ctx, key: &[u8], asks: impl Fn(Ask) -> bool) -> bool {
    queues(|q| q.any_ask(ctx.selected_db(), key, asks))
}

/// `key`'s watch: `None` when it has no queue at all, `Some(None)` when
/// clients wait but nothing is watched.
pub fn watch_of(ctx: Ctx, key: &[u8]) -> Option<Option<Watch>> {
    let db = ctx.selected_db();
    queues(|q| q.kind(db, key).map(|_| q.watched(db, key)))
}

/// What a client that starts waiting asks for.
pub struct Wants<'a> {
    pub owner: &'a [u8],
    /// The lease it gets from the moment it is granted.
    pub lease_ms: i64,
    /// How long it waits at most (0 = forever).
    pub timeout_ms: i64,
    /// A fencing token with the grant.
    pub token: bool,
    /// The grant is answered only once replicas acknowledged it.
    pub sync: Option<SyncSpec>,
    /// The lock, or a read-write lock's read or write hold, permits, a latch.
    pub ask: Ask,
    /// How long its place is kept when it leaves by its timeout or its
    /// connection closing (`KEEP`, else `lock.keep-place-ms`); 0: not kept.
    pub keep_ms: i64,
}

impl<'a> Wants<'a> {
    /// What a semaphore's or latch's waiter asks for: no owner (permits
    /// and latches have none), its `WAITER` id as its identity (empty: none),
    /// no token, no replica acknowledgements.
    pub fn ownerless(ask: Ask, lease_ms: i64, timeout_ms: i64, keep: Keep<'a>) -> Wants<'a> {
        Wants {
            owner: keep.identity,
            lease_ms,
            timeout_ms,
            token: false,
            sync: None,
            ask,
            keep_ms: keep.grace_ms,
        }
    }
}

/// An ownerless waiter's `WAITER` id (empty: none) and its place's grace
/// (`KEEP`, else `lock.keep-place-ms`).
#[derive(Clone, Copy, Debug)]
pub struct Keep<'a> {
    pub identity: &'a [u8],
    pub grace_ms: i64,
}

impl<'a> Keep<'a> {
    /// From a command's `WAITER` and `KEEP` options.
    pub fn of(waiter: Option<&'a [u8]>, keep_ms: Option<i64>) -> Keep<'a> {
        Keep {
            identity: waiter.unwrap_or_default(),
            grace_ms: keep_ms.unwrap_or_else(config::keep_place_ms),
        }
    }
}

/// Puts the blocked `client` in `key`'s queue in the selected database,
/// waiting for `wants` of an object of `kind`: at the back, or at its
/// identity's place ([`WaitQueues::join`]). A kept place taken back may be
/// served at once (a reader ahead of a waiting writer, a small request
/// ahead of a large one), so the timer looks at once; a request whose
/// place it took is answered as if its timeout had passed.
pub(super) fn enqueue(ctx: Ctx, key: &[u8], client: BlockedClient, kind: KindRef, wants: Wants) {
    let (db, now, now_us) = (ctx.selected_db(), ctx.now_ms(), timings::now_us());
    let waiter = Waiter {
        client,
        kind,
        owner: wants.owner.to_vec(),
        lease_ms: wants.lease_ms,
        since_ms: now,
        joined_ms: now,
        since_us: now_us,
        joined_us: now_us,
        place: 0,
        keep_ms: wants.keep_ms,
        timeout_ms: wants.timeout_ms,
        token: wants.token,
        sync: wants.sync,
        ask: wants.ask,
    };
    hearing::hear::<KeyspaceNews>(ctx, kind.hears(Some(waiter.ask)));
    stats::WAITS_STARTED.incr();
    match queues(|q| q.join(db, key, waiter)) {
        // A new waiter of the key (a rejoin or take-over continues a wait
        // already counted).
        Joined::Back => {
            if timings::wait_started(db, key) {
                resets::mark_soon(ctx);
            }
        }
        Joined::Rejoined => {
            stats::PLACES_REJOINED.incr();
            arm(ctx, db, key, now);
        }
        Joined::TookOver(earlier) => {
            stats::WAITS_CONTINUED.incr();
            wait_ended(ctx, db, key, &earlier, false);
            let answer = earlier.kind.not_granted(ctx, key, &earlier);
            blocking::unblock(earlier.client, Some(answer));
        }
    }
    wake_for_deadlines(ctx, db, key);
}

/// `answer` (permits taken, their ids, a latch's outcome) remembered for
/// `identity` until `until`; `None` for answers that are not remembered.
fn remembered_grant(
    identity: &[u8],
    ask: Ask,
    answer: &Wake,
    until: i64,
) -> Option<RememberedGrant> {
    let answer = match answer {
        Wake::Integer(value) => Answer::Integer(*value),
        Wake::Strings(ids) => Answer::Ids(ids.clone()),
        _ => return None,
    };
    Some(RememberedGrant {
        identity: identity.to_vec(),
        ask,
        answer,
        until,
    })
}

/// Remembers, for `keep.grace_ms`, that `keep.identity` was granted `ask`
/// on `key` (selected database) with `answer` (the ownerless kinds, whose
/// keys do not say who was granted): a cancel or a repeated ask of that
/// waiter id is told so. A place kept for it is dropped. Nothing without
/// an identity or a grace; nothing, counted, at the cap.
pub fn remember_grant(ctx: Ctx, key: &[u8], keep: Keep, ask: Ask, answer: &Wake) {
    if keep.identity.is_empty() || keep.grace_ms <= 0 {
        return;
    }
    let (db, now) = (ctx.selected_db(), ctx.now_ms());
    let until = now.saturating_add(keep.grace_ms);
    let Some(grant) = remembered_grant(keep.identity, ask, answer, until) else {
        return;
    };
    let cap = config::keep_places_max();
    if !queues_then_stop_timers(ctx, |q| q.remember(db, key, grant, cap)) {
        stats::PLACES_OVER_CAP.incr();
    }
    arm(ctx, db, key, until);
}

/// What a grant to the waiter id `identity` for `ask` on `key` (selected
/// database) answered, if it is remembered: a repeated ask is told that (or
/// `CANCELLED`, when the waiter id's wait was cancelled).
pub fn remembered(ctx: Ctx, key: &[u8], identity: &[u8], ask: Ask) -> Option<Wake> {
    if identity.is_empty() {
        return None;
    }
    let db = ctx.selected_db();
    let answer = queues(|q| q.remembered(db, key, identity, ask))?;
    Some(match answer {
        Answer::Integer(value) => Wake::Integer(value),
        Answer::Ids(ids) => Wake::Strings(ids),
        Answer::Cancelled => Wake::Cancelled,
    })
}

/// `key`'s object (selected database) was decided for everyone, absent
/// waiters too (a latch opened or expired): each place kept for it is
/// answered `answer` in its absence, for when it asks again.
pub fn answer_absent(ctx: Ctx, key: &[u8], answer: &Wake) {
    let Wake::Integer(value) = answer else {
        return;
    };
    let db = ctx.selected_db();
    queues(|q| q.answer_absent(db, key, Answer::Integer(*value)));
}

/// Takes the run of waiters policy `P` grants from the head of `key`'s
/// queue (selected database), given what the object has `free`; `ask_of`
/// says how `P` sees a waiter's ask. Waiters whose timeout has come are
/// left to Redis (see [`WaitQueues::pop_run`]).
pub fn take_run<P: GrantPolicy>(
    ctx: Ctx,
    key: &[u8],
    free: P::Free,
    ask_of: impl Fn(&Waiter) -> &P::Ask,
) -> Vec<Waiter> {
    let (db, now) = (ctx.selected_db(), ctx.live_now_ms());
    queues_then_stop_timers(ctx, |q| q.pop_run::<P>(db, key, free, now, ask_of))
}

/// A waiter taken from `key`'s queue was granted what it asked for:
/// counted here, the one place `waits_granted` and the wait times move,
/// remembered for its
/// identity where its kind remembers grants ([`remember_grant`]), and
/// answered with `answer`. `None`: its answer is held back, and answered
/// later by whoever holds it (a grant waiting for replicas, `synced.rs`).
pub fn granted(ctx: Ctx, key: &[u8], waiter: &Waiter, answer: Option<Wake>) {
    stats::WAITS_GRANTED.incr();
    wait_ended(ctx, ctx.selected_db(), key, waiter, true);
    if let Some(wake) = answer {
        if waiter.kind.remembers_grants() {
            let keep = Keep {
                identity: &waiter.owner,
                grace_ms: waiter.keep_ms,
            };
            remember_grant(ctx, key, keep, waiter.ask, &wake);
        }
        blocking::unblock(waiter.client, Some(wake));
    }
}

/// A request of `waiter` left `key`'s queue in database `db`, granted or
/// not (timed out, gone, cancelled, taken over by its next piece): its wait
/// time (`timings.rs`).
pub(super) fn wait_ended(ctx: Ctx, db: i32, key: &[u8], waiter: &Waiter, granted: bool) {
    let now = timings::now_us();
    let in_queue = now.saturating_sub(waiter.since_us);
    let waited = granted.then(|| now.saturating_sub(waiter.joined_us));
    let kind = ObjectKind::of_ask(waiter.ask);
    if timings::wait_ended(kind, db, key, in_queue, waited) {
        resets::mark_soon(ctx);
    }
}

/// A waiter taken from its queue cannot have what it asked for: it hears
/// `refusal`.
pub fn refused(client: BlockedClient, refusal: Refusal) {
    blocking::unblock(client, Some(Wake::Refused(refusal)));
}

/// Hears what others do to the objects queues wait for: keyspace events,
/// of the classes the waiters and watches need (`hearing.rs`).
struct KeyspaceNews;

impl KeyspaceListener for KeyspaceNews {
    /// An event of a class heard (see `hearing.rs`), on any key:
    /// a lock with waiters may have been deleted by someone else, a
    /// semaphore given permits, a write lock downgraded.
    fn notified(ctx: Ctx, event: &[u8], key: RStr) {
        if queues(|q| q.is_empty()) || event.starts_with(b"lock.") {
            return; // nobody waits, nothing watched, or our own announcement
        }
        // Look at it on the next turn of the event loop (a no-op when nobody
        // waits for this key and it is not watched). A change to a
        // semaphore's leased-permit set (Redisson's scripts lease, renew and
        // release there) is a change to the semaphore.
        let db = ctx.selected_db();
        aim_timer(ctx, db, key.as_bytes(), Aim::Now);
        for semaphore in semaphore_key::semaphores_of_permits_key(key.as_bytes()) {
            aim_timer(ctx, db, semaphore, Aim::Now);
        }
    }
}

/// The keyspace event classes the queues need heard now: what every
/// waiter and watch needs ([`Kind::hears`]).
fn needed_classes() -> NotifyClass {
    let mut needed = NotifyClass::NONE;
    queues(|q| q.for_each_interest(|kind, ask| needed = needed.or(kind.hears(ask))));
    needed
}

/// Where the queue's timer goes: the one way it is aimed, after a decision
/// ([`Target::aim`](super::carry_out::Target::aim)), a look, or news from
/// the server.
pub enum Aim {
    /// No change.
    Keep,
    /// Just after this deadline of the object (when Redis counts it
    /// expired), if clients wait for it: a lease that ends hands the lock
    /// on then, not when Redis's background expiry gets to it.
    After(i64),
    /// At once: the object may have changed behind the queue's back (a
    /// `DEL`, a Redisson script, a flush), or a waiter left.
    Now,
    /// Keep the queue, and its timer just after `at`, even while nobody
    /// waits: the object has a deadline of its own to act on (a leased
    /// permit to take back, a latch to expire).
    Watch(Watch, i64),
    /// Nothing to watch any more: the queue goes with its last waiter.
    Unwatch,
}

/// Aims `key`'s queue timer (`db`) as `aim` says; nothing when nobody
/// waits for the object and it is not watched.
pub fn aim_timer(ctx: Ctx, db: i32, key: &[u8], aim: Aim) {
    match aim {
        Aim::Keep => {}
        Aim::After(deadline) => {
            if !nothing_waits() {
                arm(ctx, db, key, after(deadline));
            }
        }
        Aim::Now => arm(ctx, db, key, ctx.now_ms()),
        Aim::Watch(watch, at) => {
            hearing::hear::<KeyspaceNews>(ctx, watch.kind.hears(None));
            queues(|q| q.watch(db, key, watch));
            arm(ctx, db, key, after(at));
        }
        Aim::Unwatch => queues_then_stop_timers(ctx, |q| q.unwatch(db, key)),
    }
}

/// The first moment an object with `deadline` counts as expired: Redis
/// expires a key once now > deadline.
pub fn after(deadline: i64) -> i64 {
    deadline.saturating_add(1)
}

/// Makes sure the server wakes up just after the earliest WAIT timeout of
/// `key`'s queue, so Redis answers it on time (see
/// [`WaitQueues::timeout_wake`]), and when its next kept place or
/// remembered grant ends (while writes are paused, every
/// [`PAUSE_POLL_MS`], to see when they no longer are).
pub(super) fn wake_for_deadlines(ctx: Ctx, db: i32, key: &[u8]) {
    let now = ctx.now_ms();
    let (timeout, absent) = queues(|q| (q.timeout_wake(db, key, now), q.absent_end(db, key)));
    let absent = absent.map(|end| match end > now {
        true => end,
        false => now.saturating_add(PAUSE_POLL_MS),
    });
    if let Some(at) = timeout.into_iter().chain(absent).min() {
        arm(ctx, db, key, at);
    }
}

/// Drops `key`'s kept places and remembered grants whose grace ended,
/// unless writes are paused: clients held by the pause could not come
/// back, so every grace is postponed by the pause, once it ends
/// ([`crate::kept_places::Absent::postpone`]). Redis does not tell a module
/// when a pause begins or ends: it counts from when the module first saw it
/// (a timer, or a place kept during it) to when a timer first sees writes
/// allowed again. A place kept before the pause loses the part of its grace
/// between the pause's start and that first sight (`docs/waiting.md`).
fn end_absent(ctx: Ctx, db: i32, key: &[u8]) {
    let now = ctx.now_ms();
    if ctx.writes_paused() {
        pause_seen(now);
        return;
    }
    if let Some(since) = PAUSED_SINCE.with(Cell::take) {
        // Redis serves the clients the pause held in its next turn, before
        // any timer: nothing is dropped before then.
        let not_before = now.saturating_add(PAUSE_POLL_MS);
        queues(|q| q.postpone_absent(since, now, not_before));
    }
    let dropped = queues_then_stop_timers(ctx, |q| q.expire_absent(db, key, now));
    stats::PLACES_DROPPED.add(dropped as u64);
}

/// A place was kept at `now`: if writes are paused, its grace starts when
/// the pause ends.
pub(super) fn place_kept(ctx: Ctx, now: i64) {
    if ctx.writes_paused() {
        pause_seen(now);
    }
}

fn pause_seen(now: i64) {
    PAUSED_SINCE.with(|since| since.set(Some(since.get().unwrap_or(now))));
}

/// How often an object that must be looked at is looked at again while
/// writes are held back: a hand-off follows the end of a pause by at most
/// this.
pub const PAUSE_POLL_MS: i64 = 5;

/// The longest a timer is set for. A lease may end centuries from now, and
/// Redis computes a timer's due time as `now_us + period_ms * 1000`, which
/// overflows (undefined behaviour, a due time anywhere) for periods past
/// ~292 000 years. A timer that fires before the deadline finds the object
/// as it was and aims again, so long leases just take a few hops.
const MAX_TIMER_DELAY_MS: i64 = 3_600_000;

/// A queue's timer job: the object of `key` in `db` is due a look. `seq`
/// tells whether it is still the queue's current timer when it fires (see
/// [`QueueTimer`]).
pub(super) struct Due {
    db: i32,
    key: Vec<u8>,
    seq: u64,
}

impl TimerJob for Due {
    fn fire(self, ctx: Ctx) {
        if queues(|q| q.timer_fired(self.db, &self.key, self.seq)) {
            end_absent(ctx, self.db, &self.key);
            look(ctx, self.db, &self.key);
            wake_for_deadlines(ctx, self.db, &self.key);
        }
    }
}

/// Makes sure `key`'s queue timer is due by `at` (unix ms); nothing when
/// the key has no queue.
fn arm(ctx: Ctx, db: i32, key: &[u8], at: i64) {
    let stop = match queues(|q| q.plan_timer(db, key, at)) {
        TimerPlan::NoQueue | TimerPlan::Keep => return,
        TimerPlan::Start { stop } => stop,
    };
    if let Some(id) = stop {
        timer::stop(ctx, id);
    }
    let seq = NEXT_TIMER_SEQ.with(|next| {
        next.set(next.get().wrapping_add(1));
        next.get()
    });
    let job = Due {
        db,
        key: key.to_vec(),
        seq,
    };
    let delay_ms = at.saturating_sub(ctx.now_ms()).clamp(0, MAX_TIMER_DELAY_MS);
    let id = timer::start(ctx, delay_ms, job);
    queues_then_stop_timers(ctx, |q| {
        q.timer_started(db, key, QueueTimer { id, seq, due: at })
    });
}

/// What a fired timer does next (the policy, without Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Nothing: this server is no master.
    Nothing,
    /// Look again at this time (unix ms).
    LookAgainAt(i64),
    /// Hand the object to its kind.
    Open,
}

/// Never open a key while writes are held back (paused: Redis holds expiry
/// back then; or too few good replicas for `min-replicas-to-write`), and
/// never as a replica.
fn next_step(master: bool, held_back: bool, now: i64) -> Step {
    if !master {
        Step::Nothing
    } else if held_back {
        Step::LookAgainAt(now.saturating_add(PAUSE_POLL_MS))
    } else {
        Step::Open
    }
}

/// Whether a write the module would make on its own (a timer's hand-off)
/// must wait: Redis promises no writes while writes are paused, and refuses
/// write commands with `NOREPLICAS` while fewer than `min-replicas-to-write`
/// replicas are good. Commands need no check: Redis refuses them itself
/// (a script's writes, MULTI's EXEC included) before they reach the module.
pub fn writes_held_back(ctx: Ctx) -> bool {
    ctx.writes_paused() || replicas::too_few_good(ctx)
}

/// A queue's timer fired: the checks every kind shares (a master, writes
/// not held back, the key's database), then the kind of the queue's head
/// waiter (or of its watch) carries out what is due.
fn look(ctx: Ctx, db: i32, key: &[u8]) {
    let Some(kind) = queues(|q| q.kind(db, key)) else {
        return; // nobody waits, nothing watched
    };
    match next_step(ctx.is_master(), writes_held_back(ctx), ctx.now_ms()) {
        Step::Nothing => {}
        Step::LookAgainAt(at) => arm(ctx, db, key, at),
        Step::Open => {
            if ctx.select_db(db) {
                kind.due(ctx, key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;

    #[test]
    fn nothing_is_opened_while_writes_are_paused() {
        assert_eq!(
            next_step(true, true, NOW),
            Step::LookAgainAt(NOW + PAUSE_POLL_MS)
        );
        assert_eq!(next_step(true, false, NOW), Step::Open);
    }

    #[test]
    fn as_a_replica_nothing_happens() {
        for paused in [false, true] {
            assert_eq!(next_step(false, paused, NOW), Step::Nothing);
        }
    }

    #[test]
    fn deadlines_count_from_the_first_expired_millisecond() {
        assert_eq!(after(10), 11);
        assert_eq!(after(i64::MAX), i64::MAX);
    }
}
