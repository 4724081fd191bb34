//! Grants that wait for replicas, the lock's `SYNC`: the glue (the
//! decisions are in `replica_sync.rs`). A grant's client stays blocked
//! until enough replicas acknowledged it, or the grant is undone; one timer
//! looks for all of them. The `grants_synced` and `grants_undone` counters
//! move here and nowhere else.
//!
//! An undo is a lock release carried out like any other (`lock.rs`'s
//! decision through the one carry-out), so this room needs the lock's keys
//! and decisions, not the lock's room.

use std::cell::{Cell, RefCell};

use super::carry_out::carry_out;
use super::queue::{writes_held_back, PAUSE_POLL_MS};
use crate::ffi::blocking::{self, BlockedClient, Wake};
use crate::ffi::timer::{self, TimerId, TimerJob};
use crate::ffi::{Ctx, OwnedStr};
use crate::lock;
use crate::lock_key::LockKey;
use crate::replica_sync::{self, Outcome, PendingGrant, SyncSpec, SyncTable};
use crate::{replicas, stats};

thread_local! {
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

/// Takes `client`'s grant out, if it is one waiting for replicas (its
/// WAIT timeout passed, or it left).
pub(super) fn take_grant(client: BlockedClient) -> Option<PendingGrant<BlockedClient>> {
    syncs(|t| t.remove_client(client))
}

/// Number of grants waiting for replica acknowledgements (`INFO lock`).
pub fn grants_awaiting_replicas() -> usize {
    syncs(|t| t.len())
}

/// A grant to undo: one hold of `owner` on `key` in `db`.
struct Undo {
    db: i32,
    key: Vec<u8>,
    owner: Vec<u8>,
}

/// Keeps the blocked `client`, just granted `lock`, waiting for `spec`.
pub(super) fn hold_reply_for_replicas(
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

/// Undoes `grant` now, before its client is answered, so that nobody (its
/// client reading the lock back first of all) sees it held after the
/// `NOSYNC` reply; or, while writes are held back, as soon as they are
/// allowed (on the sync timer). Returns whether it wrote.
pub(super) fn undo(ctx: Ctx, grant: PendingGrant<BlockedClient>) -> bool {
    stats::GRANTS_UNDONE.incr();
    let undo = Undo {
        db: grant.db,
        key: grant.key,
        owner: grant.owner,
    };
    if ctx.is_master() && !writes_held_back(ctx) {
        undo_one(ctx, undo);
        return true;
    }
    UNDO.with(|later| later.borrow_mut().push(undo));
    start_sync_timer(ctx, PAUSE_POLL_MS);
    false
}

/// Undoes `grant` on the sync timer, at once (or once writes are allowed):
/// for a client that disconnected, where writing from Redis's callback (the
/// client is being freed) is not worth the risk and nobody waits for a reply.
pub(super) fn undo_soon(ctx: Ctx, grant: PendingGrant<BlockedClient>) {
    stats::GRANTS_UNDONE.incr();
    UNDO.with(|later| {
        later.borrow_mut().push(Undo {
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
        let mut wrote = undo_held_back(ctx);
        if ctx.is_master() && grants_awaiting_replicas() > 0 {
            let acks = replicas::acks(ctx).unwrap_or_default();
            let look = syncs(|t| t.look(&acks, ctx.now_ms()));
            for (grant, outcome) in look.ended {
                wrote |= answer(ctx, grant, outcome);
            }
            if look.ask_replicas {
                ASK_NEXT.with(|ask| ask.set(true));
            }
        }
        // Not in the callback that wrote undos (Redis would wrap both in a
        // MULTI for the replicas), and never while writes are paused: the
        // request goes into the replication stream, which Redis asserts
        // nothing feeds during a pause (it aborted the server). It is made
        // once the pause ends.
        if !wrote
            && ctx.is_master()
            && !ctx.writes_paused()
            && ASK_NEXT.with(|ask| ask.replace(false))
        {
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

/// Answers a grant whose wait for replicas ended (undoing it first when
/// it timed out). Returns whether it wrote.
fn answer(ctx: Ctx, grant: PendingGrant<BlockedClient>, outcome: Outcome) -> bool {
    match outcome {
        Outcome::Acknowledged => {
            stats::GRANTS_SYNCED.incr();
            let token = grant.token;
            blocking::unblock(grant.client, Some(Wake::Granted { token }));
            false
        }
        Outcome::TimedOut { acked } => {
            let message = replica_sync::nosync(grant.spec, acked, "");
            let client = grant.client;
            let wrote = undo(ctx, grant);
            blocking::unblock(client, Some(Wake::Refused(message)));
            wrote
        }
    }
}

/// The server became a replica: grants not acknowledged yet are dropped,
/// with nothing undone (the new master's data decides), and their clients
/// hear why.
pub(super) fn server_demoted() {
    UNDO.with(|undo| undo.borrow_mut().clear());
    for grant in syncs(|t| t.drain_all()) {
        stats::GRANTS_UNDONE.incr();
        let message = replica_sync::nosync(grant.spec, 0, "this server became a replica");
        blocking::unblock(grant.client, Some(Wake::Refused(message)));
    }
}

/// Undoes the grants held back while writes were, unless they still are.
/// Returns whether it wrote anything.
fn undo_held_back(ctx: Ctx) -> bool {
    if UNDO.with(|undo| undo.borrow().is_empty()) || !ctx.is_master() || writes_held_back(ctx) {
        return false;
    }
    let undos = UNDO.with(|undo| std::mem::take(&mut *undo.borrow_mut()));
    for undo in undos {
        undo_one(ctx, undo);
    }
    true
}

/// Undoing is releasing one hold of the owner, as `LOCK.RELEASE` would: a
/// grant of a free lock frees it again and hands it to the next waiter; a
/// re-entry's count goes back down (its lease stays as the re-entry set it).
/// When the owner no longer holds the lock (released, forced, expired
/// meanwhile), there is nothing to undo. The token stays used.
fn undo_one(ctx: Ctx, Undo { db, key, owner }: Undo) {
    if !ctx.select_db(db) {
        return;
    }
    let name = OwnedStr::new(&key);
    let Ok(lock) = LockKey::open_write(ctx, name.borrow()) else {
        return;
    };
    let owner = OwnedStr::new(&owner);
    let Ok(view) = lock.view(owner.borrow()) else {
        return;
    };
    carry_out(ctx, &lock, lock::release(owner.borrow(), view, None));
}
