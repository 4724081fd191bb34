//! What every waiting command shares (`docs/waiting.md`): the waiter id an
//! ownerless acquisition names itself by (`WAITER`), `LOCK.CANCEL` and its
//! reply, the `CANCELLED` error a cancelled wait is answered, and how an
//! older module that has none of them says so.

use redis::{Cmd, Value};

use super::{on_hold, unexpected};
use crate::error::{LockError, Result};

/// A new waiter id: one per acquisition of a semaphore, permits or a latch
/// (`WAITER`), reused by every piece of that acquisition.
pub(crate) fn new_waiter_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// `cmd` followed by `WAITER id`.
pub(crate) fn with_waiter(mut cmd: Cmd, waiter: &str) -> Cmd {
    cmd.arg("WAITER").arg(waiter);
    cmd
}

/// `LOCK.CANCEL name owner-or-waiter-id`.
pub(crate) fn cancel(name: &str, identity: &str) -> Cmd {
    on_hold("LOCK.CANCEL", name, identity)
}

/// What `LOCK.CANCEL` answered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CancelAnswer {
    /// A waiting request was ended, or a kept place dropped.
    Cancelled,
    /// The identity was granted first: with what (a semaphore's number of
    /// permits, leased permits' ids, a latch's `1`/`-1`; nothing for a lock).
    Granted(Vec<Value>),
    /// Nothing of that identity.
    Nothing,
}

/// Decodes `LOCK.CANCEL`: `["cancelled"]`, `["granted", ...]`, `["none"]`.
pub(crate) fn parse_cancel(reply: &Value) -> Result<CancelAnswer> {
    let command = "LOCK.CANCEL";
    let Value::Array(items) = reply else {
        return Err(unexpected(command, reply));
    };
    let word = match items.first() {
        Some(Value::SimpleString(word)) => word.as_str(),
        Some(Value::BulkString(word)) => std::str::from_utf8(word).unwrap_or(""),
        _ => "",
    };
    match word {
        "cancelled" => Ok(CancelAnswer::Cancelled),
        "none" => Ok(CancelAnswer::Nothing),
        "granted" => Ok(CancelAnswer::Granted(items[1..].to_vec())),
        _ => Err(unexpected(command, reply)),
    }
}

/// Whether a wait was answered `CANCELLED` (a `LOCK.CANCEL` ended it).
pub(crate) fn is_cancelled(e: &redis::RedisError) -> bool {
    e.code() == Some("CANCELLED")
}

/// The error for a module older than this client, which refused `what`
/// (`LOCK.CANCEL`, `WAITER`): the client and the module ship together.
pub(crate) fn module_too_old(what: &str, e: &redis::RedisError) -> LockError {
    LockError::Protocol(format!(
        "the redis-lock module on the server is older than this client: it does not know {what} \
         ({e}); load the module built with this client"
    ))
}

/// Whether `e` says the server does not know a command or an option of it:
/// an older module.
pub(crate) fn is_unknown(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("unknown command") || d.starts_with("syntax error"))
        || e.to_string().contains("unknown command")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tests::{text, words};

    #[test]
    fn cancels_name_the_key_and_the_identity() {
        assert_eq!(words(&cancel("k", "w")), ["LOCK.CANCEL", "k", "w"]);
        let cmd = with_waiter(super::super::sem_acquire("s", 1, Some(5)), "w1");
        assert_eq!(
            words(&cmd),
            ["LOCK.SEMACQUIRE", "s", "1", "WAIT", "5", "WAITER", "w1"]
        );
        assert_eq!(new_waiter_id().len(), 32);
        assert_ne!(new_waiter_id(), new_waiter_id());
    }

    #[test]
    fn cancel_replies_decode_each_outcome() {
        let simple = |w: &str| Value::SimpleString(w.into());
        assert_eq!(
            parse_cancel(&Value::Array(vec![simple("cancelled")])).ok(),
            Some(CancelAnswer::Cancelled)
        );
        assert_eq!(
            parse_cancel(&Value::Array(vec![simple("none")])).ok(),
            Some(CancelAnswer::Nothing)
        );
        let ids = vec![simple("granted"), text("ab"), text("cd")];
        assert_eq!(
            parse_cancel(&Value::Array(ids)).ok(),
            Some(CancelAnswer::Granted(vec![text("ab"), text("cd")]))
        );
        assert!(parse_cancel(&Value::Int(1)).is_err());
        assert!(parse_cancel(&Value::Array(vec![simple("maybe")])).is_err());
    }
}
