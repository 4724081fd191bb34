//! The library's one error type.
//!
//! Errors say what the caller can still rely on: a [`LockError::Server`]
//! changed nothing; a [`LockError::Connection`] left nothing behind that the
//! library knows of; only [`LockError::Uncertain`] means "the server may hold
//! a lock for you that you have no guard for" (it frees itself when its lease
//! ends, since no watchdog renews it).

use std::fmt;

/// Everything that can go wrong when taking, renewing or giving back a lock.
///
/// Where a redis-rs error is behind it (a refusal, a broken connection, a
/// `NOSYNC` reply), [`std::error::Error::source`] returns it, so its kind
/// (`is_timeout()`, `code()`...) stays at hand.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// The server refused the command (wrong type, `NOPERM`, the module is
    /// not loaded, a lease above `lock.max-lease-ms`...). Nothing changed.
    Server(redis::RedisError),
    /// The server could not be reached, and the library made sure that the
    /// command it could not deliver did not take effect (or sent nothing).
    Connection(redis::RedisError),
    /// A connection failed after a command was sent, and the library could
    /// not read back whether it took effect. The lock may be held by this
    /// owner until its lease ends (no watchdog renews it).
    #[non_exhaustive]
    Uncertain {
        /// The lock's name.
        name: String,
        /// What failed, for the log: the failure in transit, and why the
        /// hold count could not be read back.
        detail: String,
        /// The failure in transit ([`std::error::Error::source`]).
        source: redis::RedisError,
    },
    /// [`unlock`](crate::LockGuard::unlock) of a hold the server no longer
    /// has: its lease ended, or an operator forced it (`LOCK.FORCE`).
    /// Redisson throws `IllegalMonitorStateException` here.
    NotHeld {
        /// The lock's name.
        name: String,
    },
    /// The server's hold count for this owner is not the one this client
    /// counted: something else used the same owner id, which breaks the
    /// re-entry and retry accounting (see the crate docs on owner ids).
    HoldCountMismatch {
        /// The lock's name.
        name: String,
        /// The count this client expected (before or after its command).
        expected: Vec<u64>,
        /// The count the server has.
        found: u64,
    },
    /// A synced grant ([`Options::sync_replicas`](crate::Options::sync_replicas),
    /// or the module's `lock.sync-replicas`) was not acknowledged by enough
    /// replicas in time, and the module undid it: the lock is **not held**
    /// by this owner (it was given back, or handed to the next waiter).
    /// Retrying may succeed once the replicas catch up.
    #[non_exhaustive]
    NotSynced {
        /// The lock's name.
        name: String,
        /// The module's `NOSYNC` message (how many replicas acknowledged).
        detail: String,
        /// The module's `NOSYNC` reply ([`std::error::Error::source`]).
        source: redis::RedisError,
    },
    /// A write hold of a read-write lock was asked for by an owner that
    /// holds it for reading ([`LockClient::write_lock`] and the other write
    /// forms): the module refuses an upgrade, which would wait for the
    /// owner's own read holds forever. Nothing changed: the read holds are
    /// still held. Release them, then ask to write. (The opposite, taking
    /// read while writing, is a downgrade and is granted.)
    ///
    /// [`LockClient::write_lock`]: crate::LockClient::write_lock
    #[non_exhaustive]
    UpgradeRefused {
        /// The read-write lock's name.
        name: String,
        /// The module's refusal ([`std::error::Error::source`]).
        source: redis::RedisError,
    },
    /// A command that must not run twice (it takes or gives back
    /// permits, counts a latch down, sets a count) was sent, and its
    /// connection failed before the reply came: it may or may not have
    /// run, so it was not sent again. Permits taken that way have no guard:
    /// a [`Semaphore`](crate::Semaphore)'s stay taken until someone
    /// releases them, a [`Permits`](crate::Permits)' end with their lease.
    #[non_exhaustive]
    Unconfirmed {
        /// The semaphore's or latch's name.
        name: String,
        /// The command, e.g. `LOCK.SEMACQUIRE`.
        command: String,
        /// The failure in transit ([`std::error::Error::source`]).
        source: redis::RedisError,
    },
    /// Releasing (or renewing) permits of a
    /// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) that
    /// are no longer held: their lease ended, or someone removed them
    /// (Redisson throws `IllegalArgumentException` here). Those of the
    /// guard's permits still held were given back.
    #[non_exhaustive]
    PermitNotHeld {
        /// The semaphore's name.
        name: String,
        /// The module's refusal, when it is what said so
        /// ([`std::error::Error::source`]).
        source: Option<redis::RedisError>,
    },
    /// The server answered something the `LOCK.*` contract does not allow.
    Protocol(String),
    /// The blocking API could not start its runtime thread.
    Runtime(std::io::Error),
    /// An argument the library refuses before sending anything (a zero lease,
    /// a lease too long for milliseconds, an empty lock list...).
    InvalidArgument(String),
}

impl LockError {
    /// True when retrying later may succeed: the server was unreachable or
    /// the outcome is unknown, as opposed to a refusal.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LockError::Connection(_)
                | LockError::Uncertain { .. }
                | LockError::NotSynced { .. }
                | LockError::Unconfirmed { .. }
        )
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Server(e) if is_module_missing(e) => write!(
                f,
                "the server refused the lock command: {e} (is the lock module loaded? \
                 `MODULE LIST` names it `lock`)"
            ),
            LockError::Server(e) => write!(f, "the server refused the lock command: {e}"),
            LockError::Connection(e) => write!(f, "cannot reach the lock server: {e}"),
            LockError::Uncertain { name, detail, .. } => write!(
                f,
                "lock {name:?}: the connection failed after the command was sent and its \
                 outcome could not be read back ({detail}); the lock may be held until its lease ends"
            ),
            LockError::NotHeld { name } => write!(
                f,
                "lock {name:?} is no longer held by this owner (its lease ended or it was forced)"
            ),
            LockError::HoldCountMismatch {
                name,
                expected,
                found,
            } => write!(
                f,
                "lock {name:?}: the server counts {found} holds for this owner where this client \
                 expected one of {expected:?}; is the owner id used elsewhere?"
            ),
            LockError::NotSynced { name, detail, .. } => write!(
                f,
                "lock {name:?} is NOT held: the grant was undone because too few replicas \
                 acknowledged it in time ({detail})"
            ),
            LockError::UpgradeRefused { name, .. } => write!(
                f,
                "read-write lock {name:?}: this owner holds it for reading and cannot also \
                 take it for writing (an upgrade would wait for itself); release the read holds first"
            ),
            LockError::Unconfirmed { name, command, source } => write!(
                f,
                "{command} on {name:?}: the connection failed after it was sent ({source}); \
                 it may or may not have run, so it was not sent again"
            ),
            LockError::PermitNotHeld { name, .. } => write!(
                f,
                "semaphore {name:?}: a permit of this guard is no longer held (its lease ended, \
                 or it was removed); the others were given back"
            ),
            LockError::Protocol(what) => write!(f, "unexpected reply from the lock server: {what}"),
            LockError::Runtime(e) => write!(f, "cannot start the lock client's runtime: {e}"),
            LockError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Server(e)
            | LockError::Connection(e)
            | LockError::Uncertain { source: e, .. }
            | LockError::NotSynced { source: e, .. }
            | LockError::UpgradeRefused { source: e, .. }
            | LockError::Unconfirmed { source: e, .. }
            | LockError::PermitNotHeld {
                source: Some(e), ..
            } => Some(e),
            LockError::Runtime(e) => Some(e),
            LockError::NotHeld { .. }
            | LockError::PermitNotHeld { source: None, .. }
            | LockError::HoldCountMismatch { .. }
            | LockError::Protocol(_)
            | LockError::InvalidArgument(_) => None,
        }
    }
}

/// The module's refusal of a reader asking to write (its
/// `errors::RW_UPGRADE_REFUSED`, after the `ERR` code).
const UPGRADE_REFUSED: &str = "the owner holds this read-write lock for reading";

/// The error for a server's refusal of a command on lock `name`: `NOSYNC`
/// (a synced grant undone) is [`LockError::NotSynced`], a reader asking to
/// write [`LockError::UpgradeRefused`], anything else [`LockError::Server`].
pub(crate) fn refused(name: &str, e: redis::RedisError) -> LockError {
    if e.detail().is_some_and(|d| d.starts_with(UPGRADE_REFUSED)) {
        return LockError::UpgradeRefused {
            name: name.to_string(),
            source: e,
        };
    }
    if e.code() == Some("NOSYNC") {
        let detail = match e.detail() {
            Some(d) => format!("NOSYNC {d}"),
            None => "NOSYNC".to_string(),
        };
        return LockError::NotSynced {
            name: name.to_string(),
            detail,
            source: e,
        };
    }
    LockError::Server(e)
}

/// Whether a refusal is the server not knowing a `LOCK.*` command: the
/// module is not loaded there, which the bare "unknown command" hides.
fn is_module_missing(e: &redis::RedisError) -> bool {
    e.detail().is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d.starts_with("unknown command") && d.contains("'lock.")
    })
}

/// True for failures of the connection rather than a server's error reply:
/// after one of these the command may or may not have reached the server.
pub(crate) fn is_transport(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            redis::ErrorKind::Io | redis::ErrorKind::ClusterConnectionNotFound
        )
}

/// A shorthand for the library's results.
pub type Result<T, E = LockError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a reply line (`-CODE detail`) becomes.
    fn reply_error(line: &[u8]) -> redis::RedisError {
        redis::parse_redis_value(line)
            .and_then(redis::Value::extract_error)
            .expect_err("an error reply")
    }

    #[test]
    fn an_unknown_lock_command_asks_whether_the_module_is_loaded() {
        let e = reply_error(
            b"-ERR unknown command 'LOCK.ACQUIRE', with args beginning with: 'k' 'o' \r\n",
        );
        let text = refused("k", e).to_string();
        assert!(text.contains("is the lock module loaded?"), "{text}");
        let e = reply_error(b"-ERR unknown command 'FOO', with args beginning with: \r\n");
        let text = refused("k", e).to_string();
        assert!(!text.contains("module"), "{text}");
    }

    #[test]
    fn a_nosync_reply_is_its_own_error_and_says_the_lock_is_not_held() {
        let e =
            reply_error(b"-NOSYNC grant undone: 0 of 1 replicas acknowledged it within 100 ms\r\n");
        let err = refused("k", e);
        assert!(matches!(&err, LockError::NotSynced { name, .. } if name == "k"));
        let text = err.to_string();
        assert!(
            text.contains("NOT held") && text.contains("0 of 1"),
            "{text}"
        );
        let source = std::error::Error::source(&err).map(|s| s.to_string());
        assert!(
            source.as_deref().is_some_and(|s| s.contains("NOSYNC")),
            "the reply is the cause: {source:?}"
        );
        let e = reply_error(b"-ERR syntax error\r\n");
        assert!(matches!(refused("k", e), LockError::Server(_)));
    }

    #[test]
    fn a_reader_asking_to_write_is_told_so_with_the_modules_words_as_the_cause() {
        // The module's `errors::RW_UPGRADE_REFUSED`.
        let e = reply_error(
            b"-ERR the owner holds this read-write lock for reading: release its read holds \
              before asking to write (waiting would wait for itself)\r\n",
        );
        let err = refused("doc", e);
        assert!(matches!(&err, LockError::UpgradeRefused { name, .. } if name == "doc"));
        assert!(err.to_string().contains("holds it for reading"), "{err}");
        let source = std::error::Error::source(&err).map(|s| s.to_string());
        assert!(
            source.is_some_and(|s| s.contains("release its read holds")),
            "the reply is the cause"
        );
        assert!(!err.is_transient());
    }

    #[test]
    fn every_error_with_a_redis_error_behind_it_keeps_it_as_its_source() {
        use std::error::Error;
        let transit = || redis::RedisError::from(std::io::Error::other("connection reset"));
        let uncertain = LockError::Uncertain {
            name: "k".into(),
            detail: "connection reset; reading the hold count back: refused".into(),
            source: transit(),
        };
        for (err, cause) in [
            (uncertain, "connection reset"),
            (LockError::Connection(transit()), "connection reset"),
            (LockError::Server(reply_error(b"-ERR nope\r\n")), "nope"),
        ] {
            let source = err.source().map(|s| s.to_string()).unwrap_or_default();
            assert!(source.contains(cause), "{err:?}: {source:?}");
        }
        assert!(LockError::NotHeld { name: "k".into() }.source().is_none());
        let unconfirmed = LockError::Unconfirmed {
            name: "s".into(),
            command: "LOCK.SEMACQUIRE".into(),
            source: transit(),
        };
        assert!(unconfirmed.is_transient());
        assert!(unconfirmed.to_string().contains("LOCK.SEMACQUIRE"));
        let source = unconfirmed.source().map(|s| s.to_string());
        assert!(source.is_some_and(|s| s.contains("connection reset")));
        let refusal = reply_error(b"-ERR permit 0123 is not held\r\n");
        let not_held = LockError::PermitNotHeld {
            name: "p".into(),
            source: Some(refusal),
        };
        assert!(not_held.source().is_some() && !not_held.is_transient());
    }
}
