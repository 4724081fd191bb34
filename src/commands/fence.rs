//! `LOCK.FENCE key token`
//!
//! The resource's side of fencing: refuses a write made with a token older
//! than one already seen. `key` is a fence, a string holding the highest
//! fencing token seen so far (e.g. `{stock}:fence` next to `{stock}`). Called
//! first in a script (`EVAL`, `FCALL`) that then writes the resource, it makes
//! the check and the write one atomic step: a holder that paused past its
//! lease, while another holder took the lock and wrote with a newer token,
//! is refused, and its script stops before writing.
//!
//! A token equal to the highest seen passes (a holder writes several times
//! with its token; Redisson's rule for resources), a higher one passes and
//! is recorded. Equal is safe without the owner: every grant gets its own
//! token, even from two masters in a split brain (`fencing.rs`), so an equal
//! token is the same grant writing again. (Tokens from Redisson's own
//! `INCR` script are not covered by that: see `docs/fenced.md`.)
//!
//! Reply: integer, `token` (now the highest the fence has seen).
//!
//! Errors: `STALE ...` when `token` is lower than the highest seen; nothing
//! changes, and in a script `redis.call` raises it, so the script writes
//! nothing after it. (In MULTI/EXEC the other commands still run: use a
//! script.) Wrong arity; `token` not a positive integer; `key` a fenced
//! lock's key (its counter `redisson_lock_token:{key}` exists: the keys were
//! swapped, and recording a token there would turn a free lock's key into a
//! string without expiry, on which every `LOCK.*` answers `WRONGTYPE`; one
//! extra key lookup per call); `WRONGTYPE` for a key that is not a string; a
//! key that does not hold an integer. A lock never taken with `TOKEN` has no
//! counter, so its key is not recognised.
//!
//! Effects (replicated): `SET key token` (with `PXAT` the key's own expiry,
//! if it has one), only when the token is higher than the fence's.

use crate::args;
use crate::commands::arg_docs::KEY;
use crate::counter_key::{self, CounterKey};
use crate::errors::{self, Refusal};
use crate::fencing::{self, Expiry, Fence};
use crate::ffi::command::{Access, ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::Mode;
use crate::ffi::{Ctx, RStr};
use crate::stats;

/// `LOCK.FENCE`, as registered.
pub struct LockFence;

/// A parsed `LOCK.FENCE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceCheck<A> {
    pub key: A,
    pub token: i64,
}

impl<'a, A: args::Arg<'a>> FenceCheck<A> {
    pub fn parse(argv: &[A]) -> Result<Self, Refusal> {
        let [_, key, token] = *argv else {
            return Err(args::arity_error(LockFence::SPEC.name()));
        };
        match args::strict_i64(token.bytes()) {
            Some(token) if token > 0 => Ok(FenceCheck { key, token }),
            _ => Err(errors::FENCE_TOKEN_INVALID),
        }
    }
}

impl Command for LockFence {
    /// `write deny-oom fast`; key `RW access update`: it reads the highest
    /// token and raises it (as `INCR`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.fence",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary:
            c"Refuses a fencing token older than the highest one the key has seen, else records it",
        complexity: c"O(1)",
        arity: 3,
        args: &[KEY, ArgDoc::new(c"token", ArgKind::Integer)],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = FenceCheck::parse(argv)?;
        if counter_key::has_counter(ctx, cmd.key) {
            return Err(errors::fence_on_lock_key(cmd.key.as_bytes()));
        }
        let mut fence = CounterKey::open(ctx, cmd.key, Mode::Write)?;
        match fencing::fence(fence.value(), cmd.token) {
            Fence::Stale { seen } => {
                stats::FENCES_REFUSED.incr();
                return Err(errors::stale(cmd.token, seen, cmd.key.as_bytes()));
            }
            Fence::Pass { record } => {
                if record {
                    // The fence keeps whatever expiry it had.
                    let at = match fence.expiry() {
                        Expiry::At(at) => Some(at),
                        Expiry::Absent | Expiry::Never => None,
                    };
                    fence.set(cmd.token, at);
                }
                stats::FENCES_PASSED.incr();
            }
        }
        ctx.reply_integer(cmd.token);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn parses_a_key_and_a_positive_token() {
        let cmd = FenceCheck::parse(&argv(&["LOCK.FENCE", "f", "1790000000000000"])).unwrap();
        assert_eq!(
            cmd,
            FenceCheck {
                key: &b"f"[..],
                token: 1_790_000_000_000_000
            }
        );
    }

    #[test]
    fn refuses_bad_arguments_naming_them() {
        assert_refused(
            FenceCheck::parse,
            &[
                (&["LOCK.FENCE", "f"][..], "'lock.fence'"),
                (&["LOCK.FENCE", "f", "1", "2"], "'lock.fence'"),
                (&["LOCK.FENCE", "f", "0"], "token"),
                (&["LOCK.FENCE", "f", "-3"], "token"),
                (&["LOCK.FENCE", "f", "x"], "token"),
                (&["LOCK.FENCE", "f", "1.5"], "token"),
            ],
        );
    }
}
