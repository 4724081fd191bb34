//! `LOCK.CANCEL key owner-or-waiter-id`
//!
//! Ends a wait from any connection (`docs/waiting.md`): the waiter of that
//! identity on `key` (a lock's owner; a semaphore's, permits' or latch's
//! `WAITER` id), or the place kept for it.
//!
//! Reply, an array whose first element says what happened:
//! * `["cancelled"]`: a blocked waiter was answered the error `CANCELLED
//!   ...` and left the queue (nothing kept), or a kept place was dropped;
//! * `["granted", ...]`: the identity was granted since it last asked, so
//!   the caller can give it back: for the locks, the owner holds the lock
//!   (a field `<owner>` or `<owner>:write`), `["granted"]`; for the others,
//!   the grant the module remembered for the waiter id (then forgotten):
//!   `["granted", n]` for `n` permits of a semaphore, `["granted", id...]`
//!   for leased permits, `["granted", 1]` (opened) or `["granted", -1]`
//!   (expired) for a latch. A place kept for it is dropped;
//! * `["none"]`: nothing of that identity.
//!
//! On a key that is not a lock's, the identity is a waiter id, one per
//! acquisition: it is then remembered as cancelled for
//! `lock.keep-place-ms`, and a piece of that acquisition arriving after the
//! cancel (sent before it, on another connection) is answered `CANCELLED`
//! instead of being served.
//!
//! One command runs at a time, so a cancel and a grant racing for one
//! request have exactly one outcome: granted (the waiter told, and the
//! cancel says so) or cancelled (the waiter told, nothing granted).
//!
//! Errors: wrong arity; an empty identity. A key of any type is looked at
//! (only a hash can say its owner holds it). Nothing is written to any key.

use crate::args::{self, Arg};
use crate::commands::arg_docs::KEY;
use crate::errors::{self, Refusal};
use crate::ffi::command::{Access, ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::grant_policy::Ask;
use crate::kept_places::Answer;
use crate::lock_key::LockKey;
use crate::rwlock_key::write_field;
use crate::waiting::{self, CancelReply};

/// `LOCK.CANCEL`, as registered.
pub struct LockCancel;

/// `LOCK.CANCEL key owner-or-waiter-id`.
pub fn parse<'a, A: Arg<'a>>(argv: &[A]) -> Result<(A, A), Refusal> {
    match *argv {
        [_, _, identity] if identity.bytes().is_empty() => Err(errors::IDENTITY_EMPTY),
        [_, key, identity] => Ok((key, identity)),
        _ => Err(args::arity_error(LockCancel::SPEC.name())),
    }
}

impl Command for LockCancel {
    /// `write fast`: it changes who waits, as an acquire does, so it needs
    /// the same category, and is held back with writes (`CLIENT PAUSE
    /// WRITE`). Key `RO access`: it only reads whether the owner holds the
    /// lock.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.cancel",
        access: Access::WriteFast,
        key: KeyFlags::READ,
        summary:
            c"Cancels a wait (or drops a kept place) of an owner or waiter id from any connection",
        complexity: c"O(N) where N is the number of waiters and kept places of the key",
        arity: 3,
        args: &[KEY, ArgDoc::new(c"owner-or-waiter-id", ArgKind::String)],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let (key, identity) = parse(argv)?;
        let (lock, holds) = owner_holds(ctx, key, identity);
        match waiting::cancel(ctx, key.as_bytes(), identity.as_bytes(), holds, lock) {
            CancelReply::Cancelled => reply_word(ctx, c"cancelled", 0),
            // A cancelled waiter id is never reported as granted.
            CancelReply::Nothing | CancelReply::Granted(Some((_, Answer::Cancelled))) => {
                reply_word(ctx, c"none", 0)
            }
            CancelReply::Granted(None) => reply_word(ctx, c"granted", 0),
            CancelReply::Granted(Some((ask, Answer::Integer(value)))) => {
                reply_word(ctx, c"granted", 1);
                // A semaphore's grant says how many permits; a latch's how
                // its wait ended.
                match ask {
                    Ask::Permits { n, .. } => ctx.reply_integer(n),
                    _ => ctx.reply_integer(value),
                }
            }
            CancelReply::Granted(Some((_, Answer::Ids(ids)))) => {
                reply_word(ctx, c"granted", ids.len());
                for id in &ids {
                    ctx.reply_bulk(id);
                }
            }
        }
        Ok(())
    }
}

/// An array of `word` and `more` elements the caller replies next.
fn reply_word(ctx: Ctx, word: &std::ffi::CStr, more: usize) {
    ctx.reply_array(1 + more);
    ctx.reply_simple(word);
}

/// Whether `key` is a lock (a hash), and whether `owner` holds it: a field
/// `<owner>` (a lock's or a read hold's count) or `<owner>:write`. Any
/// other type of key holds no owner.
fn owner_holds(ctx: Ctx, key: RStr, owner: RStr) -> (bool, bool) {
    let Ok(lock) = LockKey::open_read(ctx, key) else {
        return (false, false);
    };
    if !lock.exists() {
        return (false, false);
    }
    let names = |field: RStr| lock.key().hash_get(field, |_| ()).is_some();
    let write = OwnedStr::new(&write_field(owner.as_bytes()));
    (true, names(owner) || names(write.borrow()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn takes_a_key_and_an_identity() {
        let (key, who) = parse(&argv(&["LOCK.CANCEL", "k", "o"])).unwrap();
        assert_eq!((key, who), (&b"k"[..], &b"o"[..]));
        assert_refused(
            parse,
            &[
                (&["LOCK.CANCEL", "k"], "'lock.cancel'"),
                (&["LOCK.CANCEL", "k", "o", "x"], "'lock.cancel'"),
                (&["LOCK.CANCEL", "k", ""], "owner-or-waiter-id"),
            ],
        );
    }
}
