//! `LOCK.RELEASE key owner [lease-ms]`
//!
//! Releases one hold of `owner` (Redisson's `unlockInnerAsync` script).
//!
//! Reply:
//! * nil: `owner` does not hold the lock; nothing changed;
//! * integer 0: the hold count was decremented and is still positive (the
//!   lease is reset to `lease-ms` when given, kept otherwise);
//! * integer 1: the count reached 0: the key is deleted and the lock is
//!   handed to the first waiter, or, with none, the unlock message is published.
//!
//! `lock.max-lease-ms` never makes a release fail: a `lease-ms` above it is
//! clamped to it. Redisson sends its lease with every unlock, and a refused
//! release would leave the lock held until the lease ran out. (Acquire and
//! renew refuse leases above the cap.)
//!
//! Errors: wrong arity; `lease-ms` (when given) not a positive integer, or
//! longer than 100 years; empty `owner`; `WRONGTYPE`; a hold count that is not
//! an integer.
//!
//! Effects (replicated): `HSET key owner <count>` [+ `PEXPIREAT key <deadline>`],
//! or `DEL key`.

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEY, LEASE, OWNER};
use crate::config;
use crate::errors::Refusal;
use crate::ffi::command::{Access, ArgDoc, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock::{self, Released};
use crate::lock_key::LockKey;
use crate::waiting::carry_out;

/// `LOCK.RELEASE`, as registered.
pub struct LockRelease;

/// A parsed `LOCK.RELEASE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release<A> {
    pub key: A,
    pub owner: A,
    /// The lease to reset a still-held lock to, before clamping to the cap.
    pub lease_ms: Option<i64>,
}

impl<'a, A: Arg<'a>> Release<A> {
    pub fn parse(argv: &[A]) -> Result<Self, Refusal> {
        Self::parse_for(LockRelease::SPEC.name(), argv)
    }

    /// `command key owner [lease-ms]`, for any release command (the
    /// read-write lock's too); arity errors name `command`.
    pub fn parse_for(command: &str, argv: &[A]) -> Result<Self, Refusal> {
        let (key, owner, lease) = match *argv {
            [_, key, owner] => (key, owner, None),
            [_, key, owner, lease] => (key, owner, Some(lease)),
            _ => return Err(args::arity_error(command)),
        };
        args::owner(owner.bytes())?;
        let lease_ms = lease.map(|l| args::lease_ms(l.bytes())).transpose()?;
        Ok(Release {
            key,
            owner,
            lease_ms,
        })
    }
}

impl<A> Release<A> {
    /// The deadline a still-held lock's lease is reset to, when a lease was
    /// given: clamped to `lock.max-lease-ms`, never refused for it.
    pub fn deadline(&self, ctx: Ctx) -> Result<Option<i64>, Refusal> {
        let Some(lease_ms) = self.lease_ms else {
            return Ok(None);
        };
        let cap = config::max_lease_ms();
        let lease_ms = args::release_lease_ms(lease_ms, cap);
        args::deadline(ctx.now_ms(), lease_ms, cap).map(Some)
    }
}

/// `key owner lease-ms` (optional): shared with the read-write lock's command.
pub const ARGS: &[ArgDoc] = &[KEY, OWNER, LEASE.optional()];

impl Command for LockRelease {
    /// No `deny-oom`: a lock can always be released. Key `RW delete`: it
    /// removes one hold and, with the last, the key (as `HDEL`); its nil/0/1
    /// reveals no content.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.release",
        access: Access::WriteFast,
        key: KeyFlags::REMOVE_PART,
        summary:
            c"Releases one hold of a lock; the last hold frees it and hands it to the next waiter",
        complexity: c"O(1)",
        arity: -3,
        args: ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Release::parse(argv)?;
        let expire_at = cmd.deadline(ctx)?;
        let key = LockKey::open_write(ctx, cmd.key)?;
        let decision = lock::release(cmd.owner, key.view(cmd.owner)?, expire_at);
        match carry_out(ctx, &key, decision) {
            Released::NotHeld => ctx.reply_null(),
            Released::StillHeld => ctx.reply_integer(0),
            Released::Freed => ctx.reply_integer(1),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn parses_with_and_without_a_lease() {
        assert_eq!(
            Release::parse(&argv(&["LOCK.RELEASE", "k", "o"]))
                .unwrap()
                .lease_ms,
            None
        );
        assert_eq!(
            Release::parse(&argv(&["LOCK.RELEASE", "k", "o", "60000"]))
                .unwrap()
                .lease_ms,
            Some(60_000),
            "clamped to the cap later, never refused for it"
        );
    }

    #[test]
    fn refuses_bad_arguments_naming_them() {
        assert_refused(
            Release::parse,
            &[
                (&["LOCK.RELEASE", "k"][..], "'lock.release'"),
                (&["LOCK.RELEASE", "k", "o", "1", "2"], "'lock.release'"),
                (&["LOCK.RELEASE", "k", ""], "owner"),
                (&["LOCK.RELEASE", "k", "o", "0"], "lease-ms"),
            ],
        );
    }
}
