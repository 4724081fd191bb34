//! `LOCK.RRELEASE key owner`
//! `LOCK.WRELEASE key owner [lease-ms]`
//!
//! Release one read hold / one write hold of `owner` on the read-write lock
//! `key`: Redisson's read and write `unlockInnerAsync` scripts, as commands.
//!
//! Reply:
//! * nil: `owner` holds no such hold; nothing changes;
//! * 0: one hold released, the lock is still held (for a write: the lease is
//!   reset to `lease-ms` when given, at most `lock.max-lease-ms`);
//! * 1: `owner`'s last hold of this kind released.
//!
//! A read release deletes that hold's key and leaves the hash to the latest
//! live hold of anyone (holds whose deadline passed keep nothing alive); with
//! none left the lock is deleted. A write release at 0 deletes the lock, or,
//! when the writer still holds read (it downgraded), leaves it in read mode.
//! Whenever holders leave, the queue is served (readers at the head as one
//! batch, or the next writer); a lock left free with nobody waiting publishes
//! Redisson's message on `redisson_rwlock:{key}`: `0` after a read release,
//! `1` after a write release.
//!
//! Errors: wrong arity; empty `owner`; bad `lease-ms`; `WRONGTYPE`; a hold
//! count that is not an integer. Nothing changes.

use crate::args::{self, Arg};
use crate::errors::Refusal;
use crate::ffi::command::{ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock_key::LockKey;
use crate::rwlock::{self, RwReleased};
use crate::rwlock_key::RwLockKey;
use crate::{config, handoff};

/// `LOCK.RRELEASE`, as registered.
pub struct LockRRelease;
/// `LOCK.WRELEASE`, as registered.
pub struct LockWRelease;

/// A parsed `LOCK.RRELEASE` / `LOCK.WRELEASE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwRelease<A> {
    pub key: A,
    pub owner: A,
    /// Write only: the lease to reset a still-held write lock to.
    pub lease_ms: Option<i64>,
}

impl<'a, A: Arg<'a>> RwRelease<A> {
    pub fn parse(write: bool, argv: &[A]) -> Result<Self, Refusal> {
        let name = match write {
            true => LockWRelease::SPEC.name(),
            false => LockRRelease::SPEC.name(),
        };
        let (key, owner, lease) = match *argv {
            [_, key, owner] => (key, owner, None),
            [_, key, owner, lease] if write => (key, owner, Some(lease)),
            _ => return Err(args::arity_error(name)),
        };
        args::owner(owner.bytes())?;
        let lease_ms = lease.map(|l| args::lease_ms(l.bytes())).transpose()?;
        Ok(RwRelease {
            key,
            owner,
            lease_ms,
        })
    }
}

impl Command for LockRRelease {
    /// As `LOCK.RELEASE`: `write fast`, key `RW delete`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.rrelease",
        flags: c"write fast",
        acl_categories: c"write fast",
        key: KeyFlags::REMOVE_PART,
        summary:
            c"Releases one read hold of a read-write lock; waiting writers or readers are served",
        complexity: c"O(N) where N is the number of read holds of the lock",
        arity: 3,
        args: &[
            ArgDoc::new(c"key", ArgKind::Key),
            ArgDoc::new(c"owner", ArgKind::String),
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = RwRelease::parse(false, argv)?;
        let lock = LockKey::open_write(ctx, cmd.key)?;
        let rw = RwLockKey::of(&lock);
        let view = rw.view(cmd.owner)?;
        let (others, own_latest) = match view.reads {
            0 => Default::default(),
            reads => rw.others(cmd.owner.as_bytes(), reads - 1),
        };
        let decision = rwlock::read_release(view, &others, own_latest, ctx.now_ms());
        reply(ctx, handoff::carry_out_rw(ctx, &lock, cmd.owner, decision));
        Ok(())
    }
}

impl Command for LockWRelease {
    /// As `LOCK.RELEASE`: `write fast`, key `RW delete`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.wrelease",
        flags: c"write fast",
        acl_categories: c"write fast",
        key: KeyFlags::REMOVE_PART,
        summary:
            c"Releases one write hold of a read-write lock; waiting readers or a writer are served",
        complexity: c"O(1)",
        arity: -3,
        args: &[
            ArgDoc::new(c"key", ArgKind::Key),
            ArgDoc::new(c"owner", ArgKind::String),
            ArgDoc::new(c"lease-ms", ArgKind::Integer).optional(),
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = RwRelease::parse(true, argv)?;
        let expire_at = match cmd.lease_ms {
            None => None,
            Some(lease_ms) => {
                let cap = config::max_lease_ms();
                let lease_ms = args::release_lease_ms(lease_ms, cap);
                Some(args::deadline(ctx.now_ms(), lease_ms, cap)?)
            }
        };
        let lock = LockKey::open_write(ctx, cmd.key)?;
        let view = RwLockKey::of(&lock).view(cmd.owner)?;
        let decision = rwlock::write_release(view, expire_at);
        reply(ctx, handoff::carry_out_rw(ctx, &lock, cmd.owner, decision));
        Ok(())
    }
}

fn reply(ctx: Ctx, released: RwReleased) {
    match released {
        RwReleased::NotHeld => ctx.reply_null(),
        RwReleased::StillHeld => ctx.reply_integer(0),
        RwReleased::Done => ctx.reply_integer(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::argv;

    #[test]
    fn a_lease_is_for_write_releases_only() {
        let w = RwRelease::parse(true, &argv(&["LOCK.WRELEASE", "k", "o", "5"])).unwrap();
        assert_eq!(w.lease_ms, Some(5));
        let err = RwRelease::parse(false, &argv(&["LOCK.RRELEASE", "k", "o", "5"])).unwrap_err();
        assert!(err.contains("'lock.rrelease'"), "{err}");
        let err = RwRelease::parse(true, &argv(&["LOCK.WRELEASE", "k", ""])).unwrap_err();
        assert!(err.contains("owner"), "{err}");
        let err = RwRelease::parse(true, &argv(&["LOCK.WRELEASE", "k", "o", "x"])).unwrap_err();
        assert!(err.contains("lease-ms"), "{err}");
    }
}
