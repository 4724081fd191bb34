//! `LOCK.RACQUIRE key owner lease-ms [WAIT timeout-ms] [KEEP grace-ms]`
//! `LOCK.WACQUIRE key owner lease-ms [WAIT timeout-ms] [KEEP grace-ms] [TOKEN]`
//!
//! Take a read hold or the write hold of the read-write lock `key` for
//! `owner`, on Redisson `RReadWriteLock`'s layout (`rwlock.rs`), with a
//! lease of `lease-ms`. Redisson's read and write `tryLockInnerAsync`
//! scripts, as commands, made fair.
//!
//! Reply:
//! * nil: granted (a fresh hold, a re-entry, or a writer taking read);
//! * integer: not grantable now; the lock's remaining lease in ms (-1 no
//!   expiry). Nothing changed.
//!
//! Read: granted when the lock is free, or held for reading and nobody
//! queues, or when `owner` already holds it (re-entry in either mode: a
//! writer may take read). A new reader never overtakes a queued client.
//! Write: granted when the lock is free, or re-entered by its writer (the
//! lease is then extended by `lease-ms`, Redisson's rule); refused with an
//! error when `owner` holds read (an upgrade would wait for itself).
//!
//! With `WAIT timeout-ms`, a lock not grantable blocks the client in the
//! key's FIFO queue (readers and writers in one queue): nil once granted,
//! the integer above when `timeout-ms` passes (0 = never). When a write
//! ends, every reader at the head of the queue up to the next writer is
//! granted in one pass. With `TOKEN` (write only), the reply is the pair
//! `[-1, token]` / `[remaining-lease, -1]`, as `LOCK.ACQUIRE ... TOKEN`.
//!
//! Errors: wrong arity; bad `lease-ms`, `owner`, `WAIT`; an unknown or
//! repeated option (`TOKEN` on a read); (read) a key whose hold keys would
//! be in another cluster slot (braces that are not a valid hash tag);
//! `WRONGTYPE` for a key that is not a hash; a hold count that is not an
//! integer or would overflow; a reader asking to write. Nothing changes.
//!
//! Effects (replicated): read: `HSET key mode read`, `HSET key owner <n>`,
//! `SET <hold n> 1 PXAT <deadline>`, `PEXPIREAT key <deadline>`; write:
//! `HSET key mode write`, `HSET key owner:write <n>`, `PEXPIREAT key ...`.

use crate::args::Arg;
use crate::commands::acquire::{self, Acquire};
use crate::counter_key::NextToken;
use crate::errors::{self, Refusal};
use crate::ffi::command::{Access, ArgDoc, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::grant_policy::{Ask, Mode};
use crate::lock_key::LockKey;
use crate::rwlock::{self, RwAcquired};
use crate::rwlock_key::RwLockKey;
use crate::waiting::lock::RwCaller;
use crate::waiting::{self, carry_out};
use crate::{fencing, replies};

/// `LOCK.RACQUIRE`, as registered.
pub struct LockRAcquire;
/// `LOCK.WACQUIRE`, as registered.
pub struct LockWAcquire;

/// Parses `LOCK.RACQUIRE` / `LOCK.WACQUIRE`: `LOCK.ACQUIRE`'s grammar with
/// `WAIT` and `KEEP`, and `TOKEN` for writes; never `SYNC`.
pub fn parse<'a, A: Arg<'a>>(mode: Mode, argv: &[A]) -> Result<Acquire<A>, Refusal> {
    let options = acquire::Options {
        command: match mode {
            Mode::Read => LockRAcquire::SPEC.name(),
            Mode::Write => LockWAcquire::SPEC.name(),
        },
        token: mode == Mode::Write,
        sync: false,
        syntax: errors::SYNTAX_RW_ACQUIRE,
    };
    Acquire::parse_with(options, argv)
}

/// `LOCK.WACQUIRE`'s arguments: `LOCK.ACQUIRE`'s without `SYNC`;
/// `LOCK.RACQUIRE` takes all but `TOKEN`.
const ARGS: &[ArgDoc] = acquire::ARGS.split_at(6).0;

impl Command for LockRAcquire {
    /// As `LOCK.ACQUIRE`: `write deny-oom fast`, key `RW access update`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.racquire",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Takes a read hold of a fair, Redisson-compatible read-write lock",
        complexity: c"O(1)",
        arity: -4,
        args: ARGS.split_at(5).0,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        run(ctx, parse(Mode::Read, argv)?, Mode::Read)
    }
}

impl Command for LockWAcquire {
    /// As `LOCK.ACQUIRE`: `write deny-oom fast`, key `RW access update`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.wacquire",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Takes the write hold of a fair, Redisson-compatible read-write lock",
        complexity: c"O(1)",
        arity: -4,
        args: ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        run(ctx, parse(Mode::Write, argv)?, Mode::Write)
    }
}

fn run(ctx: Ctx, cmd: Acquire<RStr>, mode: Mode) -> CommandResult {
    let now = ctx.now_ms();
    let acquire::Checked { expire_at, counter } =
        acquire::check_before_opening(now, cmd.key, cmd.lease_ms, cmd.wait_ms, cmd.token)?;
    if mode == Mode::Read {
        // Each read hold is a key named by Redisson's `suffixName`: in the
        // lock's slot only for a name without braces or with a valid tag.
        fencing::hash_tag_kept(cmd.key.as_bytes())
            .map_err(|why| errors::read_holds_elsewhere(cmd.key.as_bytes(), why))?;
    }
    let lock = LockKey::open_write(ctx, cmd.key)?;
    // The queue first: a lock freed behind its back goes to the head, and
    // a newcomer that holds nothing queues behind whoever still waits.
    let queued = waiting::lock::settle_rw(ctx, &lock)?;
    let view = RwLockKey::of(&lock).view(cmd.owner)?;
    let decision = match mode {
        Mode::Read => rwlock::read_acquire(view, queued, now, expire_at),
        Mode::Write => match view.shape {
            // Free but queued for: the head's, not this caller's.
            rwlock::Shape::Free if queued => Ok(rwlock::RwDecision::busy(view.ttl_ms)),
            _ => rwlock::write_acquire(view, now, cmd.lease_ms),
        },
    }
    .map_err(|e| e.refusal())?;
    let granted = !matches!(decision.reply, RwAcquired::Busy(_));
    let next_token = NextToken::prepare_if(ctx, counter.as_ref().filter(|_| granted))?;
    let caller = RwCaller {
        lock: &lock,
        owner: cmd.owner,
    };
    match carry_out(ctx, &caller, decision) {
        RwAcquired::Taken | RwAcquired::Reentered => {
            let token = next_token.map(|next| next.issue(lock.deadline_ms().unwrap_or(expire_at)));
            replies::granted(ctx, token);
        }
        RwAcquired::Busy(ttl) => match cmd.wait_ms {
            Some(timeout_ms) if ctx.can_block() => {
                waiting::lock::wait(ctx, &lock, cmd.waiter(timeout_ms, None, Ask::Rw(mode)));
            }
            _ => replies::busy(ctx, ttl, cmd.token),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::argv;

    #[test]
    fn parses_options_in_any_order_and_token_for_writes_only() {
        let w = parse(
            Mode::Write,
            &argv(&["LOCK.WACQUIRE", "k", "o", "100", "TOKEN", "WAIT", "5"]),
        )
        .unwrap();
        assert_eq!((w.lease_ms, w.wait_ms, w.token), (100, Some(5), true));
        let r = parse(Mode::Read, &argv(&["LOCK.RACQUIRE", "k", "o", "100"])).unwrap();
        assert_eq!((r.wait_ms, r.token), (None, false));
        let refused = |mode, args: &[&'static str]| parse(mode, &argv(args)).unwrap_err();
        assert!(
            refused(Mode::Read, &["LOCK.RACQUIRE", "k", "o", "1", "TOKEN"])
                .starts_with("ERR syntax error")
        );
        assert!(refused(
            Mode::Write,
            &["LOCK.WACQUIRE", "k", "o", "1", "WAIT", "1", "WAIT", "1"]
        )
        .starts_with("ERR syntax error"));
        assert!(refused(Mode::Read, &["LOCK.RACQUIRE", "k", "o"]).contains("'lock.racquire'"));
        assert!(
            refused(Mode::Write, &["LOCK.WACQUIRE", "k", "o", "1", "WAIT"])
                .starts_with("ERR syntax error")
        );
        assert!(refused(
            Mode::Write,
            &["LOCK.WACQUIRE", "k", "o", "1", "SYNC", "1", "1"]
        )
        .contains("SYNC is not offered for read-write locks"));
        assert!(refused(Mode::Read, &["LOCK.RACQUIRE", "k", "", "1"]).contains("owner"));
        assert!(refused(Mode::Read, &["LOCK.RACQUIRE", "k", "o", "0"]).contains("lease-ms"));
        assert!(
            refused(Mode::Read, &["LOCK.RACQUIRE", "k", "o", "1", "WAIT", "-1"]).contains("WAIT")
        );
    }
}
