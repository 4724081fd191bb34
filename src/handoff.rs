//! Server-side waiting and the fair hand-off: what happens when a lock frees.
//!
//! `LOCK.ACQUIRE ... WAIT` blocks the client in the key's FIFO queue
//! (`wait_queue.rs`). Whenever the lock frees, the first waiter is granted it
//! **in that same event**: the hash and lease are written and replicated as
//! effects, then the waiter is unblocked with reply nil. No other client can
//! slip in between, so waiting is fair and nobody barges.
//!
//! Why not Redis's `RedisModule_BlockClientOnKeys`? It wakes clients when a
//! key is *signalled ready*, and a freed lock is a *deleted* hash: on Redis
//! 7.0.15 the reply callback is never called once the key is gone, and a
//! deleted key never signals readiness on any version. Even where it works,
//! readiness wakes waiters to retry later in the event loop, when another
//! client may already have taken the lock; granting inside the freeing event
//! from our own queue is what makes the hand-off fair.
//!
//! How each way a lock can free reaches [`grant_next`]:
//! * `LOCK.RELEASE` (last hold) and `LOCK.FORCE`: directly, in the command.
//! * Lease expiry: the queue's timer, due just after the lock's deadline,
//!   opens the key (which makes Redis expire it) and hands it on. Redis's own
//!   active expiry can notice 100+ ms late; the timer makes it a few ms.
//!   Every way a deadline is set re-aims the timer ([`lease_changed`]): a
//!   re-entry, renewal or release with a shorter lease, a `PEXPIRE` by anyone.
//! * `DEL`/`UNLINK`/`HDEL` of the last field/`RENAME`/`MOVE`, eviction, expiry
//!   noticed by Redis, `FLUSHDB`/`FLUSHALL`: keyspace notifications and the
//!   flush server event set the queue's timer to "now". Writing keys inside a
//!   notification callback can corrupt Redis 7.0's state, hence the timer. Until it
//!   runs, any `LOCK.ACQUIRE` of that key first hands the free lock to the
//!   queue ([`settle`]), so the gap cannot be used to barge.
//!
//! Each queue has **at most one timer**, stopped as soon as its last waiter
//! leaves (see `wait_queue.rs`), so nothing piles up and `MODULE UNLOAD`
//! works as soon as nobody waits.
//!
//! **Nothing is written while writes are paused** (`CLIENT PAUSE`, `FAILOVER`,
//! `SHUTDOWN` waiting for replicas, `CLUSTER FAILOVER`). Redis promises
//! replicas that no write happens then, and it holds expired keys back, so a
//! write would either be lost by a failover after the waiter was told "yours"
//! (two holders) or abort the server. A timer that finds writes paused looks
//! again every [`PAUSE_POLL_MS`]; when the pause ends the hand-offs happen,
//! in FIFO order. Commands cannot barge meanwhile: Redis holds back every
//! write command during the pause, and afterwards `LOCK.ACQUIRE` settles the
//! queue first.
//!
//! Waiters that time out or disconnect (also `CLIENT KILL`) leave the queue at
//! once. Where blocking is not allowed (MULTI, Lua, a replica) WAIT acts as a
//! plain acquire. When the server becomes a replica, waiters get an error
//! (usually Redis's own, which it sends before telling modules; see README).
//!
//! Every blocked client is unblocked exactly once by us (grant, timeout,
//! disconnect or demotion), which is what frees Redis's handle for it.

use std::cell::{Cell, RefCell};

use crate::commands::acquire::{self, Acquire};
use crate::counter_key::{self, NextToken};
use crate::events;
use crate::ffi::blocking::{self, BlockedClient, WaitHandler, Wake};
use crate::ffi::context::NotifyClass;
use crate::ffi::events::{KeyspaceListener, ServerEvent, ServerEventKind, ServerEventListener};
use crate::ffi::timer::{self, TimerId, TimerJob};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::lock::{self, Write};
use crate::lock_key::LockKey;
use crate::replica_sync::{self, Outcome, PendingGrant, SyncSpec, SyncTable};
use crate::wait_queue::{QueueTimer, TimerPlan, WaitQueues, Waiter, WaiterInfo};
use crate::{replicas, stats};

type Queues = WaitQueues<BlockedClient, TimerId<LookAt>>;

thread_local! {
    // Redis calls commands, callbacks, timers and notifications on its main
    // thread only. Borrows are never held across a call into Redis, since a
    // call (opening a key) can fire a notification that comes back here.
    static QUEUES: RefCell<Queues> = RefCell::new(Queues::default());
    static NEXT_TIMER_SEQ: Cell<u64> = const { Cell::new(0) };
    // Grants waiting for replica acknowledgements (replica_sync.rs), the
    // grants to undo once writes are allowed, and their one timer.
    static SYNCS: RefCell<SyncTable<BlockedClient>> = RefCell::new(SyncTable::default());
    static UNDO: RefCell<Vec<Undo>> = const { RefCell::new(Vec::new()) };
    static SYNC_TIMER: Cell<Option<TimerId<SyncTick>>> = const { Cell::new(None) };
    // Replicas are to be asked for acknowledgements on the next look (it
    // could not be done in the same callback as an undo's writes).
    static ASK_NEXT: Cell<bool> = const { Cell::new(false) };
}

fn syncs<T>(f: impl FnOnce(&mut SyncTable<BlockedClient>) -> T) -> T {
    SYNCS.with(|t| f(&mut t.borrow_mut()))
}

fn queues<T>(f: impl FnOnce(&mut Queues) -> T) -> T {
    QUEUES.with(|q| f(&mut q.borrow_mut()))
}

/// Like [`queues`], for changes that may drop a queue: then stops the
/// dropped queues' timers, so none outlives its waiters.
fn queues_then_stop_timers<T>(ctx: Ctx, f: impl FnOnce(&mut Queues) -> T) -> T {
    let (result, orphaned) = queues(|q| {
        let result = f(q);
        (result, q.take_orphaned_timers())
    });
    for id in orphaned {
        timer::stop(ctx, id);
    }
    result
}

/// Number of clients waiting, all locks together (`INFO lock`).
pub fn waiting_clients() -> usize {
    queues(|q| q.total())
}

/// Number of grants waiting for replica acknowledgements (`INFO lock`).
pub fn grants_awaiting_replicas() -> usize {
    syncs(|t| t.len())
}

/// Number of live hand-off timers (`INFO lock`): at most one per waited-for lock.
pub fn live_timers() -> usize {
    queues(|q| q.live_timers())
}

/// The waiters of `key` in queue order, for `LOCK.INFO`.
pub fn snapshot(ctx: Ctx, key: RStr) -> Vec<WaiterInfo> {
    let (db, now) = (ctx.selected_db(), ctx.now_ms());
    queues(|q| q.snapshot(db, key.as_bytes(), now))
}

/// What a client that starts waiting asks for.
pub struct Wants<'a> {
    pub owner: &'a [u8],
    /// The lease it gets from the moment it is granted the lock.
    pub lease_ms: i64,
    /// How long it waits at most (0 = forever).
    pub timeout_ms: i64,
    /// A fencing token with the grant.
    pub token: bool,
    /// The grant is answered only once replicas acknowledged it.
    pub sync: Option<SyncSpec>,
}

/// Blocks the calling client until it is granted `lock` or its timeout passes.
pub fn wait(ctx: Ctx, lock: &LockKey, wants: Wants) {
    let client = blocking::block::<Waiting>(ctx, wants.timeout_ms);
    let db = ctx.selected_db();
    let key = lock.name().as_bytes();
    let waiter = Waiter {
        client,
        owner: wants.owner.to_vec(),
        lease_ms: wants.lease_ms,
        since_ms: ctx.now_ms(),
        timeout_ms: wants.timeout_ms,
        token: wants.token,
        sync: wants.sync,
    };
    queues(|q| q.push(db, key, waiter));
    stats::WAITS_STARTED.incr();
    if let Some(deadline) = lock.deadline_ms() {
        look_at(ctx, db, key, after(deadline));
    }
    wake_for_timeouts(ctx, db, key);
}

/// Makes sure the server wakes up just after the earliest WAIT timeout of
/// `key`'s queue, so Redis answers it on time (see
/// [`WaitQueues::timeout_wake`]).
fn wake_for_timeouts(ctx: Ctx, db: i32, key: &[u8]) {
    if let Some(at) = queues(|q| q.timeout_wake(db, key, ctx.now_ms())) {
        look_at(ctx, db, key, at);
    }
}

/// A command just wrote `write` to `lock`: if it set a deadline and clients
/// wait for the lock, make sure the queue's timer is due by then. (A lease
/// made shorter by re-entry, renewal or release must still be handed on
/// when it ends, not when Redis's background expiry gets to it.)
pub fn lease_changed(ctx: Ctx, lock: &LockKey, write: &Write<RStr>) {
    let Some(deadline) = write.deadline() else {
        return;
    };
    if waiting_clients() == 0 {
        return;
    }
    look_at(
        ctx,
        ctx.selected_db(),
        lock.name().as_bytes(),
        after(deadline),
    );
}

/// The first moment a lock with `deadline` counts as expired: Redis expires
/// a key once now > deadline.
fn after(deadline: i64) -> i64 {
    deadline.saturating_add(1)
}

/// Before deciding on `lock`: if it is free but clients queue for it (it was
/// freed by DEL, expiry... and the hand-off timer has not run yet), hand it to
/// them first. Returns whether it did.
pub fn settle(ctx: Ctx, lock: &LockKey) -> bool {
    // Nobody waits anywhere (the usual case): no call into Redis at all.
    if waiting_clients() == 0 || lock.exists() {
        return false;
    }
    let db = ctx.selected_db();
    if !queues(|q| q.has_waiters(db, lock.name().as_bytes())) {
        return false;
    }
    grant_next(ctx, lock, db)
}

/// A lock was just left free by a command: grant it to the first waiter, or,
/// when nobody waits, publish the unlock message.
pub fn grant_or_announce(ctx: Ctx, lock: &LockKey) {
    if !grant_next(ctx, lock, ctx.selected_db()) {
        events::publish_unlock(ctx, lock.name());
    }
}

/// Grants the free `lock` to the first waiter of its queue. False if none.
///
/// A waiter that asked for a token but whose counter cannot be raised (it
/// was overwritten with a non-integer, say) gets that error instead of the
/// lock, which goes to the next waiter.
fn grant_next(ctx: Ctx, lock: &LockKey, db: i32) -> bool {
    let key = lock.name().as_bytes();
    loop {
        let Some(waiter) = queues_then_stop_timers(ctx, |q| q.pop_next(db, key)) else {
            return false;
        };
        let counter_name = match waiter.token {
            true => match counter_key::counter_name(lock.name()) {
                Ok(name) => Some(name),
                Err(e) => {
                    blocking::unblock(waiter.client, Some(Wake::Refused(e)));
                    continue;
                }
            },
            false => None,
        };
        let next_token = match &counter_name {
            Some(name) => match NextToken::prepare(ctx, name.borrow()) {
                Ok(next) => Some(next),
                Err(e) => {
                    blocking::unblock(waiter.client, Some(Wake::Refused(e)));
                    continue;
                }
            },
            None => None,
        };
        let expire_at = ctx.now_ms().saturating_add(waiter.lease_ms);
        let owner = OwnedStr::new(&waiter.owner);
        let decision = lock::hand_off(owner.borrow(), expire_at);
        lock.apply(decision.write);
        let token = next_token.map(|next| next.issue(expire_at));
        if let Some(event) = decision.event {
            events::notify(ctx, lock.name(), event);
        }
        match waiter.sync {
            Some(spec) => {
                hold_reply_for_replicas(ctx, waiter.client, lock, &waiter.owner, token, spec)
            }
            None => blocking::unblock(waiter.client, Some(Wake::Granted { token })),
        }
        stats::handed_off();
        look_at(ctx, db, key, after(expire_at));
        return true;
    }
}

// ---- blocked clients ---------------------------------------------------------

/// What happens to a blocked waiter.
struct Waiting;

impl WaitHandler for Waiting {
    fn reply(ctx: Ctx, wake: &Wake) {
        match wake {
            Wake::Granted { token: None } => ctx.reply_null(),
            Wake::Granted { token: Some(token) } => acquire::reply_pair(ctx, -1, *token),
            Wake::Demoted => ctx.reply_error("ERR lock wait aborted: this server became a replica"),
            Wake::Refused(message) => ctx.reply_error(message),
        }
    }

    /// The WAIT timeout passed: leave the queue, reply the holder's remaining
    /// lease (with `TOKEN`, as the pair `[ttl, -1]`).
    fn timed_out(ctx: Ctx, client: BlockedClient, argv: &[RStr], woken: Option<&Wake>) {
        if let Some(grant) = syncs(|t| t.remove_client(client)) {
            // Granted, but the WAIT timeout came before the replicas did.
            let message = replica_sync::nosync_message(grant.spec, 0);
            stats::GRANTS_UNDONE.incr();
            undo_later(ctx, grant);
            ctx.reply_error(&format!("{message} (the WAIT timeout came first)"));
            blocking::unblock(client, None);
            return;
        }
        if queues_then_stop_timers(ctx, |q| q.remove_client(client)).is_none() {
            // Woken just before the timeout fired (granted, say): answer that.
            if let Some(wake) = woken {
                Self::reply(ctx, wake);
            }
            return;
        }
        stats::WAITS_TIMED_OUT.incr();
        let ttl = argv
            .get(1)
            .and_then(|&key| LockKey::open_read(ctx, key).ok())
            .map_or(-2, |lock| lock.ttl_ms());
        let token = Acquire::parse(argv).is_ok_and(|cmd| cmd.token);
        acquire::reply_busy(ctx, ttl, token);
        blocking::unblock(client, None);
    }

    /// The waiting client went away (QUIT, CLIENT KILL, network): leave the
    /// queue; a grant it was still to be told about is undone.
    fn disconnected(ctx: Ctx, client: BlockedClient) {
        if let Some(grant) = syncs(|t| t.remove_client(client)) {
            stats::GRANTS_UNDONE.incr();
            undo_later(ctx, grant);
            blocking::unblock(client, None);
        } else if queues_then_stop_timers(ctx, |q| q.remove_client(client)).is_some() {
            blocking::unblock(client, None);
        }
    }
}

// ---- timers ---------------------------------------------------------------

/// How often a lock that must be handed on is looked at again while writes
/// are paused: the hand-off follows the end of a pause by at most this.
pub const PAUSE_POLL_MS: i64 = 5;

/// The longest a timer is set for. A lease may end centuries from now, and
/// Redis computes a timer's due time as `now_us + period_ms * 1000`, which
/// overflows (undefined behaviour, a due time anywhere) for periods past
/// ~292 000 years. A timer that fires before the deadline finds the lock held
/// and sets the next one, so long leases just take a few hops.
const MAX_TIMER_DELAY_MS: i64 = 3_600_000;

/// A queue's timer job: look at the lock of `key` in `db`. `seq` tells whether
/// it is still the queue's current timer when it fires (see [`QueueTimer`]).
struct LookAt {
    db: i32,
    key: Vec<u8>,
    seq: u64,
}

impl TimerJob for LookAt {
    fn fire(self, ctx: Ctx) {
        if queues(|q| q.timer_fired(self.db, &self.key, self.seq)) {
            settle_key(ctx, self.db, &self.key);
            wake_for_timeouts(ctx, self.db, &self.key);
        }
    }
}

/// Makes sure the lock of `key` is looked at by `at` (unix ms), by the
/// queue's one timer; nothing if nobody waits for it.
fn look_at(ctx: Ctx, db: i32, key: &[u8], at: i64) {
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
    let job = LookAt {
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

/// What a queue's timer finds when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// The lock is free (deleted, or expired just now).
    Free,
    /// Still held, until this deadline (`None`: no expiry).
    Held(Option<i64>),
}

/// What to do next for a waited-for lock (the policy, without Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Nothing: nobody waits, or this server is no master.
    Nothing,
    /// Look again at this time (unix ms).
    LookAgainAt(i64),
    /// Open the key and see (then [`next_step`] with what was found).
    Open,
    /// Hand the lock to the first waiter.
    HandOn,
}

/// Decides, for a fired timer, what to do: never open a key while writes are
/// held back (paused: Redis holds expiry back then; or too few good replicas
/// for `min-replicas-to-write`), hand on a free lock, and otherwise wait for
/// the lock's deadline.
fn next_step(waiters: bool, master: bool, held_back: bool, now: i64, found: Option<Found>) -> Step {
    if !waiters || !master {
        return Step::Nothing;
    }
    if held_back {
        return Step::LookAgainAt(now.saturating_add(PAUSE_POLL_MS));
    }
    match found {
        None => Step::Open,
        Some(Found::Free) => Step::HandOn,
        Some(Found::Held(Some(deadline))) => Step::LookAgainAt(after(deadline)),
        Some(Found::Held(None)) => Step::Nothing,
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

/// Outside a command: carries out [`next_step`] for the lock of `key` in `db`.
fn settle_key(ctx: Ctx, db: i32, key: &[u8]) {
    let waiters = queues(|q| q.has_waiters(db, key));
    let held_back = waiters && writes_held_back(ctx);
    let step = |found| next_step(waiters, ctx.is_master(), held_back, ctx.now_ms(), found);
    match step(None) {
        Step::Nothing | Step::HandOn => {}
        Step::LookAgainAt(at) => look_at(ctx, db, key, at),
        Step::Open => {
            if !ctx.select_db(db) {
                return;
            }
            let name = OwnedStr::new(key);
            let Ok(lock) = LockKey::open_write(ctx, name.borrow()) else {
                return;
            };
            let found = if lock.exists() {
                Found::Held(lock.deadline_ms())
            } else {
                Found::Free
            };
            match step(Some(found)) {
                Step::HandOn => {
                    grant_next(ctx, &lock, db);
                }
                Step::LookAgainAt(at) => look_at(ctx, db, key, at),
                Step::Nothing | Step::Open => {}
            }
        }
    }
}

// ---- grants that wait for replicas ------------------------------------------

/// A grant to undo: one hold of `owner` on `key` in `db`.
struct Undo {
    db: i32,
    key: Vec<u8>,
    owner: Vec<u8>,
}

/// A command granted `lock` to its caller, who asked for `spec`: the reply
/// waits for the replicas (see `replica_sync.rs`). The caller is blocked
/// without a Redis timeout: the sync timer answers it by its deadline.
pub fn await_replicas(ctx: Ctx, lock: &LockKey, owner: &[u8], token: Option<i64>, spec: SyncSpec) {
    let client = blocking::block::<Waiting>(ctx, 0);
    hold_reply_for_replicas(ctx, client, lock, owner, token, spec);
}

/// Keeps the blocked `client`, just granted `lock`, waiting for `spec`.
fn hold_reply_for_replicas(
    ctx: Ctx,
    client: BlockedClient,
    lock: &LockKey,
    owner: &[u8],
    token: Option<i64>,
    spec: SyncSpec,
) {
    let grant = PendingGrant {
        client,
        db: ctx.selected_db(),
        key: lock.name().as_bytes().to_vec(),
        owner: owner.to_vec(),
        token,
        spec,
        deadline_ms: ctx.now_ms().saturating_add(spec.timeout_ms),
        offset: None,
    };
    syncs(|t| t.push(grant));
    // The first look comes after the grant's writes were propagated (when
    // this command or callback ends).
    start_sync_timer(ctx, 0);
}

/// Undoes `grant` as soon as writes are allowed (on the sync timer).
fn undo_later(ctx: Ctx, grant: PendingGrant<BlockedClient>) {
    UNDO.with(|undo| {
        undo.borrow_mut().push(Undo {
            db: grant.db,
            key: grant.key,
            owner: grant.owner,
        })
    });
    start_sync_timer(ctx, 0);
}

fn start_sync_timer(ctx: Ctx, delay_ms: i64) {
    if SYNC_TIMER.with(Cell::get).is_none() {
        let id = timer::start(ctx, delay_ms, SyncTick);
        SYNC_TIMER.with(|t| t.set(Some(id)));
    }
}

/// The one timer of the grants waiting for replicas.
struct SyncTick;

impl TimerJob for SyncTick {
    fn fire(self, ctx: Ctx) {
        SYNC_TIMER.with(|t| t.set(None));
        let undone = undo_grants(ctx);
        if ctx.is_master() && grants_awaiting_replicas() > 0 {
            let acks = replicas::acks(ctx).unwrap_or_default();
            let look = syncs(|t| t.look(&acks, ctx.now_ms()));
            for (grant, outcome) in look.ended {
                answer(ctx, grant, outcome);
            }
            if look.ask_replicas {
                ASK_NEXT.with(|ask| ask.set(true));
            }
        }
        // Not in the callback that wrote undos: Redis would wrap both in a
        // MULTI for the replicas.
        if !undone && ASK_NEXT.with(|ask| ask.replace(false)) {
            replicas::ask_for_acks(ctx);
        }
        let undo_left = UNDO.with(|undo| !undo.borrow().is_empty());
        if grants_awaiting_replicas() > 0 || undo_left || ASK_NEXT.with(Cell::get) {
            let delay = if grants_awaiting_replicas() > 0 {
                replica_sync::LOOK_EVERY_MS
            } else {
                PAUSE_POLL_MS
            };
            start_sync_timer(ctx, delay);
        }
    }
}

/// Answers a grant whose wait for replicas ended.
fn answer(ctx: Ctx, grant: PendingGrant<BlockedClient>, outcome: Outcome) {
    match outcome {
        Outcome::Acknowledged => {
            stats::GRANTS_SYNCED.incr();
            let token = grant.token;
            blocking::unblock(grant.client, Some(Wake::Granted { token }));
        }
        Outcome::TimedOut { acked } => {
            stats::GRANTS_UNDONE.incr();
            let message = replica_sync::nosync_message(grant.spec, acked);
            let client = grant.client;
            undo_later(ctx, grant);
            blocking::unblock(client, Some(Wake::Refused(message)));
        }
    }
}

/// Undoes the grants waiting to be undone, unless writes are held back (then
/// they stay for a later tick). Returns whether it wrote anything.
///
/// Undoing is releasing one hold of the owner, as `LOCK.RELEASE` would: a
/// grant of a free lock frees it again and hands it to the next waiter; a
/// re-entry's count goes back down (its lease stays as the re-entry set it).
/// When the owner no longer holds the lock (released, forced, expired
/// meanwhile), there is nothing to undo. The token stays used.
fn undo_grants(ctx: Ctx) -> bool {
    if UNDO.with(|undo| undo.borrow().is_empty()) || !ctx.is_master() || writes_held_back(ctx) {
        return false;
    }
    let undos = UNDO.with(|undo| std::mem::take(&mut *undo.borrow_mut()));
    for Undo { db, key, owner } in undos {
        if !ctx.select_db(db) {
            continue;
        }
        let name = OwnedStr::new(&key);
        let Ok(lock) = LockKey::open_write(ctx, name.borrow()) else {
            continue;
        };
        let owner = OwnedStr::new(&owner);
        let Ok(view) = lock.view(owner.borrow()) else {
            continue;
        };
        let decision = lock::release(owner.borrow(), view, None);
        lock.apply(decision.write);
        if let Some(event) = decision.event {
            events::notify(ctx, lock.name(), event);
            if event.frees_lock() {
                grant_or_announce(ctx, &lock);
            }
        }
    }
    true
}

// ---- notifications and server events ----------------------------------------

/// Hears what others do to keys and to the server.
struct Listener;

impl KeyspaceListener for Listener {
    /// Generic, expired and evicted events on any key: a lock with waiters
    /// may have been deleted by someone else.
    fn notified(ctx: Ctx, event: &[u8], key: RStr) {
        if waiting_clients() == 0 || event.starts_with(b"lock.") {
            return; // nobody waits, or our own announcement
        }
        // Look at it on the next turn of the event loop (a no-op when nobody
        // waits for this key).
        look_at(ctx, ctx.selected_db(), key.as_bytes(), ctx.now_ms());
    }
}

impl ServerEventListener for Listener {
    fn on_server_event(ctx: Ctx, event: ServerEvent) {
        match event {
            // FLUSHDB / FLUSHALL: every lock with waiters in the flushed db(s) is free.
            ServerEvent::Flushed { db } => {
                let now = ctx.now_ms();
                for (db, key) in queues(|q| q.keys(db)) {
                    look_at(ctx, db, &key, now);
                }
            }
            // The server became a replica: it must not hand out locks any more.
            ServerEvent::BecameReplica => {
                counter_key::forget_node_id();
                for waiter in queues_then_stop_timers(ctx, |q| q.drain_all()) {
                    blocking::unblock(waiter.client, Some(Wake::Demoted));
                }
                // Grants not acknowledged yet: the new master's data decides.
                UNDO.with(|undo| undo.borrow_mut().clear());
                for grant in syncs(|t| t.drain_all()) {
                    stats::GRANTS_UNDONE.incr();
                    let message = format!(
                        "{} (this server became a replica)",
                        replica_sync::nosync_message(grant.spec, 0)
                    );
                    blocking::unblock(grant.client, Some(Wake::Refused(message)));
                }
            }
            // A replica swapped in a dataset loaded on the side. A replica
            // has no waiters (it never blocks clients and drains them when
            // demoted), but should one ever be queued, its lock is looked at
            // again in the new data rather than trusted from the old.
            ServerEvent::SwappedIn => {
                stats::SWAPDB_LOADS.incr();
                let now = ctx.now_ms();
                for (db, key) in queues(|q| q.keys(None)) {
                    look_at(ctx, db, &key, now);
                }
            }
            ServerEvent::BecameMaster => counter_key::forget_node_id(),
            ServerEvent::ConfigChanged { .. } => {}
        }
    }
}

/// Subscribes to the notifications and server events above.
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    let classes = NotifyClass::GENERIC
        .or(NotifyClass::EXPIRED)
        .or(NotifyClass::EVICTED);
    crate::ffi::events::subscribe_keyspace::<Listener>(ctx, classes)?;
    for kind in [
        ServerEventKind::Flush,
        ServerEventKind::RoleChange,
        ServerEventKind::AsyncLoad,
    ] {
        crate::ffi::events::subscribe_server_event::<Listener>(ctx, kind)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;

    #[test]
    fn nothing_is_opened_or_handed_on_while_writes_are_paused() {
        for found in [None, Some(Found::Free), Some(Found::Held(Some(900)))] {
            assert_eq!(
                next_step(true, true, true, NOW, found),
                Step::LookAgainAt(NOW + PAUSE_POLL_MS),
                "{found:?}"
            );
        }
    }

    #[test]
    fn a_free_lock_is_handed_on_and_a_held_one_waited_for() {
        assert_eq!(next_step(true, true, false, NOW, None), Step::Open);
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Free)),
            Step::HandOn
        );
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Held(Some(5_000)))),
            Step::LookAgainAt(5_001),
            "just after the deadline, when Redis counts the key expired"
        );
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Held(None))),
            Step::Nothing,
            "without expiry, only a release or a delete frees it"
        );
    }

    #[test]
    fn without_waiters_or_as_a_replica_nothing_happens() {
        for (waiters, master) in [(false, true), (true, false), (false, false)] {
            for paused in [false, true] {
                assert_eq!(
                    next_step(waiters, master, paused, NOW, Some(Found::Free)),
                    Step::Nothing
                );
            }
        }
    }

    #[test]
    fn deadlines_count_from_the_first_expired_millisecond() {
        assert_eq!(after(10), 11);
        assert_eq!(after(i64::MAX), i64::MAX);
    }
}
