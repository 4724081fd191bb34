//! A lock's hash: the one place that reads and writes lock keys.
//!
//! Reads produce the [`LockView`] the state machine decides on;
//! [`LockKey::apply`] carries out its [`Write`] on the key **and replicates it
//! as plain commands**:
//!
//! | write                                 | replicated as                               |
//! |---------------------------------------|---------------------------------------------|
//! | `SetCount { owner, count, Some(at) }` | `RESTORE key at <hash> REPLACE ABSTTL`      |
//! | ... the same deadline as before       | `HSET key owner count`                      |
//! | ... a hash with other fields too      | `HSET key owner count` + `PEXPIREAT key at` |
//! | `SetCount { owner, count, None }`     | `HSET key owner count`                      |
//! | `ExpireAt(at)`                        | `PEXPIREAT key at`                          |
//! | `Delete`                              | `DEL key`                                   |
//!
//! Counts are absolute and deadlines are absolute unix milliseconds, so a
//! replica (with or without this module) or an AOF reload ends with exactly the
//! master's hash and deadline and never re-runs lock logic or re-bases a lease.
//! Redis wraps several propagated commands of one command call in MULTI/EXEC.
//!
//! Why `RESTORE` (see `restore_payload.rs`): each propagated command costs
//! the master a command lookup by name and an argument vector, and more than
//! one costs the replica a transaction; `RESTORE ... ABSTTL` is the one
//! command every supported server has that writes a hash and its absolute
//! deadline together. It replaces the whole key on the replica, which is why
//! it is only used when the owner's field is the whole hash.
//!
//! The key API itself propagates nothing and fires no keyspace events, which is
//! why both are done explicitly here and in `events.rs`. Likewise the module
//! signals a key as modified itself, and only when it writes (see `apply`).

use crate::errors::{self, Refusal};
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::{with_decimal, Ctx, RStr};
use crate::lock::{parse_hold_count, LockView, Write};
use crate::restore_payload;

thread_local! {
    // The RESTORE payload of the last write, its buffer reused (main thread
    // only, like every command).
    static PAYLOAD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An open lock key (a hash, or no key); closed on drop.
pub struct LockKey<'a> {
    ctx: Ctx<'a>,
    key: Key<'a>,
}

impl<'a> LockKey<'a> {
    /// Opens `name` for writing. Refuses a key that exists and is not a hash.
    pub fn open_write(ctx: Ctx<'a>, name: RStr<'a>) -> Result<LockKey<'a>, Refusal> {
        Self::open(ctx, name, OpenMode::Write)
    }

    /// Opens `name` for reading only.
    pub fn open_read(ctx: Ctx<'a>, name: RStr<'a>) -> Result<LockKey<'a>, Refusal> {
        Self::open(ctx, name, OpenMode::Read)
    }

    fn open(ctx: Ctx<'a>, name: RStr<'a>, mode: OpenMode) -> Result<LockKey<'a>, Refusal> {
        let key = Key::open(ctx, name, mode);
        match key.kind() {
            KeyKind::Empty | KeyKind::Hash => Ok(LockKey { ctx, key }),
            KeyKind::String | KeyKind::SortedSet | KeyKind::Other => Err(errors::WRONGTYPE),
        }
    }

    pub fn name(&self) -> RStr<'a> {
        self.key.name()
    }

    /// The open key, for the read-write lock's view of the same hash
    /// (`rwlock_key.rs`).
    pub fn key(&self) -> &Key<'a> {
        &self.key
    }

    pub fn ctx(&self) -> Ctx<'a> {
        self.ctx
    }

    /// Whether the lock hash exists (expired keys were already removed on open).
    pub fn exists(&self) -> bool {
        self.key.kind() == KeyKind::Hash
    }

    /// Whether the lock is held, without looking at any owner (for `force`).
    pub fn presence(&self) -> LockView {
        if self.exists() {
            LockView::Held
        } else {
            LockView::Free
        }
    }

    /// What the state machine needs to decide for `owner`.
    pub fn view(&self, owner: RStr) -> Result<LockView, Refusal> {
        if !self.exists() {
            return Ok(LockView::Free);
        }
        match self.key.hash_get(owner, parse_hold_count) {
            None => Ok(LockView::Held),
            Some(Ok(count)) => Ok(LockView::Mine(count)),
            Some(Err(e)) => Err(e.refusal()),
        }
    }

    /// Remaining lease in ms, as `PTTL` answers: -1 without expiry, -2 if absent.
    pub fn ttl_ms(&self) -> i64 {
        self.key.pttl()
    }

    /// Absolute deadline in unix ms (what `PEXPIRETIME` answers), or `None`
    /// without expiry or lock.
    pub fn deadline_ms(&self) -> Option<i64> {
        self.key.abs_expire_ms()
    }

    /// All fields and values, in hash order (for `LOCK.INFO`).
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.key.hash_entries()
    }

    /// Carries out `write` on the key and replicates its effect.
    ///
    /// Only a real write signals the key as modified (WATCH, client-side
    /// caching): the module opts out of Redis's implicit signal on closing a
    /// key opened for writing, so a refused acquire or a release by a
    /// non-holder leaves other clients' transactions alone.
    pub fn apply(&self, write: Write<RStr>) {
        let (ctx, name) = (self.ctx, self.name());
        match write {
            Write::None => return,
            Write::SetCount {
                owner,
                count,
                expire_at,
            } => {
                // Read before the write: a lock that was there may already
                // end at `at` (a re-entry in the millisecond of the grant
                // before it, with the same lease), and then its deadline is
                // neither rewritten nor replicated again. A fresh one has none.
                let unchanged =
                    expire_at.is_some() && self.exists() && self.deadline_ms() == expire_at;
                // One string for the write and its replication: Redis copies
                // it into the hash and only takes a reference to replicate it.
                with_decimal(count, |value| {
                    self.key.hash_set(owner, value);
                    match expire_at {
                        // The owner's field is the whole hash (always, unless
                        // something else wrote fields into a lock): the hash
                        // and its deadline travel as one RESTORE.
                        Some(at) if !unchanged && self.key.len() == 1 => {
                            PAYLOAD.with(|payload| {
                                let mut payload = payload.borrow_mut();
                                restore_payload::hash(
                                    &[(owner.as_bytes(), value.as_bytes())],
                                    &mut payload,
                                );
                                self.key.set_abs_expire_ms(at);
                                ctx.replicate_restore(name, at, &payload);
                            });
                        }
                        Some(at) if !unchanged => {
                            ctx.replicate_hset(name, owner, value);
                            self.expire_at(at);
                        }
                        _ => ctx.replicate_hset(name, owner, value),
                    }
                });
            }
            Write::ExpireAt(at) => self.expire_at(at),
            Write::Delete => {
                self.key.delete();
                ctx.replicate_del(name);
            }
        }
        ctx.signal_modified(name);
    }

    fn expire_at(&self, at: i64) {
        // An absolute deadline keeps master and replica on the very same one.
        self.key.set_abs_expire_ms(at);
        self.ctx.replicate_pexpireat(self.name(), at);
    }
}
