//! `LOCK.RENEW key owner lease-ms`
//!
//! Resets the lease of a lock `owner` holds: what Redisson's watchdog does
//! every `lockWatchdogTimeout / 3` (its `renewExpirationAsync` script).
//!
//! Reply: integer 1 if `owner` holds the lock and the lease was reset to
//! `lease-ms`; 0 otherwise (nothing changed).
//!
//! Errors: as `LOCK.ACQUIRE` for arity, `lease-ms`, `owner` and `WRONGTYPE`.
//!
//! Effects (replicated): `PEXPIREAT key <deadline>`.

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEY, LEASE, OWNER};
use crate::errors::Refusal;
use crate::ffi::command::{Access, ArgDoc, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock_key::LockKey;
use crate::waiting::carry_out;
use crate::{config, lock};

/// `LOCK.RENEW`, as registered.
pub struct LockRenew;

/// A parsed `LOCK.RENEW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renew<A> {
    pub key: A,
    pub owner: A,
    pub lease_ms: i64,
}

impl<'a, A: Arg<'a>> Renew<A> {
    pub fn parse(argv: &[A]) -> Result<Self, Refusal> {
        Self::parse_for(LockRenew::SPEC.name(), argv)
    }

    /// `command key owner lease-ms`, for any renewal command (the read-write
    /// lock's `LOCK.RWRENEW` too); arity errors name `command`.
    pub fn parse_for(command: &str, argv: &[A]) -> Result<Self, Refusal> {
        let [_, key, owner, lease] = *argv else {
            return Err(args::arity_error(command));
        };
        args::owner(owner.bytes())?;
        let lease_ms = args::lease_ms(lease.bytes())?;
        Ok(Renew {
            key,
            owner,
            lease_ms,
        })
    }
}

/// `key owner lease-ms`: shared with the read-write lock's command.
pub const ARGS: &[ArgDoc] = &[KEY, OWNER, LEASE];

impl Command for LockRenew {
    /// Key `RW update`: it resets the expiry and answers 1/0 (as `PEXPIRE`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.renew",
        access: Access::WriteFast,
        key: KeyFlags::UPDATE,
        summary: c"Resets the lease of a lock the owner holds (watchdog renewal)",
        complexity: c"O(1)",
        arity: 4,
        args: ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Renew::parse(argv)?;
        let expire_at = args::deadline(ctx.now_ms(), cmd.lease_ms, config::max_lease_ms())?;
        let key = LockKey::open_write(ctx, cmd.key)?;
        let renewed = carry_out(ctx, &key, lock::renew(key.view(cmd.owner)?, expire_at));
        ctx.reply_integer(i64::from(renewed));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn parses_and_refuses_naming_the_argument() {
        assert_eq!(
            Renew::parse(&argv(&["LOCK.RENEW", "k", "o", "10000"])),
            Ok(Renew {
                key: &b"k"[..],
                owner: &b"o"[..],
                lease_ms: 10_000
            })
        );
        assert_refused(
            Renew::parse,
            &[
                (&["LOCK.RENEW", "k", "o"][..], "'lock.renew'"),
                (&["LOCK.RENEW", "k", "o", "1", "x"], "'lock.renew'"),
                (&["LOCK.RENEW", "k", "", "1"], "owner"),
                (&["LOCK.RENEW", "k", "o", "-5"], "lease-ms"),
            ],
        );
    }

    /// `LOCK.RWRENEW` shares the parser; its errors name it.
    #[test]
    fn parse_for_names_the_calling_command() {
        let parse = |args: &[&'static str]| Renew::parse_for("lock.rwrenew", &argv(args));
        let r = parse(&["LOCK.RWRENEW", "k", "o", "30000"]).unwrap();
        assert_eq!(r.lease_ms, 30_000);
        let err = parse(&["LOCK.RWRENEW", "k", "o"]).unwrap_err();
        assert!(err.contains("'lock.rwrenew'"));
        let err = parse(&["LOCK.RWRENEW", "k", "o", "-5"]).unwrap_err();
        assert!(err.contains("lease-ms"));
    }
}
