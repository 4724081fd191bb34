//! The semaphores', permits' and latches' commands and replies (issue 18),
//! on the names and layouts of Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` and `RCountDownLatch`, which the module
//! keeps; the locks' are in the parent module, with what both share.

use std::time::Duration;

use redis::{Cmd, Value};

use super::{on_hold, on_key, on_key_arg, optional, unexpected};
use crate::error::{LockError, Result};

/// A time-to-live (`PX`) in whole milliseconds: at least 1 ms, rounded
/// up, at most what an `i64` holds.
pub(crate) fn ttl_ms(ttl: Duration) -> Result<u64> {
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    if ms == 0 || ms > i64::MAX as u128 {
        return Err(LockError::InvalidArgument(format!(
            "a ttl must be at least 1 ms and fit in i64 milliseconds: {ttl:?}"
        )));
    }
    Ok(ms as u64)
}

/// A number of permits to take or give back: at least 1 (the module's
/// `ERR permits must be a positive integer`, checked before sending).
pub(crate) fn permits(n: u64) -> Result<u64> {
    if n == 0 || n > i64::MAX as u64 {
        return Err(LockError::InvalidArgument(format!(
            "permits must be a positive integer: {n}"
        )));
    }
    Ok(n)
}

/// `LOCK.SEMSET name permits [PX ttl-ms]`.
pub(crate) fn sem_set(name: &str, permits: u64, ttl_ms: Option<u64>) -> Cmd {
    optional(on_key_arg("LOCK.SEMSET", name, permits), "PX", ttl_ms)
}

/// `LOCK.SEMADD name delta`.
pub(crate) fn sem_add(name: &str, delta: i64) -> Cmd {
    on_key_arg("LOCK.SEMADD", name, delta)
}

/// `LOCK.SEMACQUIRE name permits [WAIT timeout-ms]` (`WAIT 0`: forever).
pub(crate) fn sem_acquire(name: &str, permits: u64, wait_ms: Option<u64>) -> Cmd {
    optional(
        on_key_arg("LOCK.SEMACQUIRE", name, permits),
        "WAIT",
        wait_ms,
    )
}

/// `LOCK.SEMRELEASE name permits`.
pub(crate) fn sem_release(name: &str, permits: u64) -> Cmd {
    on_key_arg("LOCK.SEMRELEASE", name, permits)
}

/// `LOCK.SEMAVAILABLE name`.
pub(crate) fn sem_available(name: &str) -> Cmd {
    on_key("LOCK.SEMAVAILABLE", name)
}

/// `LOCK.SEMDRAIN name`.
pub(crate) fn sem_drain(name: &str) -> Cmd {
    on_key("LOCK.SEMDRAIN", name)
}

/// `LOCK.PERMITACQUIRE name permits [LEASE lease-ms] [WAIT timeout-ms]`.
pub(crate) fn permit_acquire(
    name: &str,
    permits: u64,
    lease_ms: Option<u64>,
    wait_ms: Option<u64>,
) -> Cmd {
    let cmd = on_key_arg("LOCK.PERMITACQUIRE", name, permits);
    optional(optional(cmd, "LEASE", lease_ms), "WAIT", wait_ms)
}

/// `LOCK.PERMITRELEASE name id [id ...]`.
pub(crate) fn permit_release(name: &str, ids: &[String]) -> Cmd {
    let mut cmd = on_key("LOCK.PERMITRELEASE", name);
    for id in ids {
        cmd.arg(id);
    }
    cmd
}

/// `LOCK.PERMITRENEW name id lease-ms`.
pub(crate) fn permit_renew(name: &str, id: &str, lease_ms: u64) -> Cmd {
    let mut cmd = on_hold("LOCK.PERMITRENEW", name, id);
    cmd.arg(lease_ms);
    cmd
}

/// `LOCK.LATCHSET name count [PX ttl-ms]`.
pub(crate) fn latch_set(name: &str, count: u64, ttl_ms: Option<u64>) -> Cmd {
    optional(on_key_arg("LOCK.LATCHSET", name, count), "PX", ttl_ms)
}

/// `LOCK.COUNTDOWN name`.
pub(crate) fn count_down(name: &str) -> Cmd {
    on_key("LOCK.COUNTDOWN", name)
}

/// `LOCK.LATCHCOUNT name`.
pub(crate) fn latch_count(name: &str) -> Cmd {
    on_key("LOCK.LATCHCOUNT", name)
}

/// `LOCK.AWAIT name timeout-ms` (0: forever).
pub(crate) fn await_zero(name: &str, timeout_ms: u64) -> Cmd {
    on_key_arg("LOCK.AWAIT", name, timeout_ms)
}

/// Decodes an integer reply (a count of permits, a latch's count).
pub(crate) fn parse_int(command: &str, reply: &Value) -> Result<i64> {
    match reply {
        Value::Int(n) => Ok(*n),
        other => Err(unexpected(command, other)),
    }
}

/// Decodes a count that cannot be negative (`LOCK.SEMDRAIN`,
/// `LOCK.COUNTDOWN`, `LOCK.LATCHCOUNT`).
pub(crate) fn parse_count(command: &str, reply: &Value) -> Result<u64> {
    match reply {
        Value::Int(n) if *n >= 0 => Ok(*n as u64),
        other => Err(unexpected(command, other)),
    }
}

/// Whether a permit id is as the module writes it: 32 lowercase hex chars.
fn is_permit_id(id: &[u8]) -> bool {
    id.len() == 32 && id.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Decodes `LOCK.PERMITACQUIRE`: the ids (`permits` of them) when
/// acquired, None (nil) when not.
pub(crate) fn parse_permit_ids(reply: &Value, permits: u64) -> Result<Option<Vec<String>>> {
    let command = "LOCK.PERMITACQUIRE";
    match reply {
        Value::Nil => Ok(None),
        Value::Array(items) if items.len() as u64 == permits => items
            .iter()
            .map(|item| match item {
                Value::BulkString(b) if is_permit_id(b) => {
                    Ok(String::from_utf8_lossy(b).into_owned())
                }
                Value::SimpleString(s) if is_permit_id(s.as_bytes()) => Ok(s.clone()),
                other => Err(unexpected(command, other)),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        other => Err(unexpected(command, other)),
    }
}

/// Whether the module refused a `LOCK.PERMITRELEASE` because a permit is
/// not held (`ERR permit <hex> is not held (unknown, released or expired)`).
pub(crate) fn is_permit_not_held(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("permit ") && d.contains("is not held"))
}

/// What a `LOCK.AWAIT` on a count-down latch came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Awaited {
    /// The count is zero (or the latch was missing, or deleted): `1`.
    Reached,
    /// The timeout passed with the count above zero: `0`.
    TimedOut,
    /// The latch's time-to-live (`try_set_count(.., Some(ttl))`) ended
    /// while waiting: it is gone without having reached zero: `-1`.
    Expired,
}

/// Decodes `LOCK.AWAIT`: `1`, `0` or `-1`.
pub(crate) fn parse_await(reply: &Value) -> Result<Awaited> {
    match reply {
        Value::Int(1) => Ok(Awaited::Reached),
        Value::Int(0) => Ok(Awaited::TimedOut),
        Value::Int(-1) => Ok(Awaited::Expired),
        other => Err(unexpected("LOCK.AWAIT", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tests::{text, words};

    #[test]
    fn semaphore_and_latch_commands_follow_spec_18() {
        assert_eq!(words(&sem_set("s", 3, None)), ["LOCK.SEMSET", "s", "3"]);
        assert_eq!(
            words(&sem_set("s", 0, Some(500))),
            ["LOCK.SEMSET", "s", "0", "PX", "500"]
        );
        assert_eq!(words(&sem_add("s", -2)), ["LOCK.SEMADD", "s", "-2"]);
        assert_eq!(
            words(&sem_acquire("s", 2, None)),
            ["LOCK.SEMACQUIRE", "s", "2"]
        );
        assert_eq!(
            words(&sem_acquire("s", 1, Some(0))),
            ["LOCK.SEMACQUIRE", "s", "1", "WAIT", "0"]
        );
        assert_eq!(words(&sem_release("s", 4)), ["LOCK.SEMRELEASE", "s", "4"]);
        assert_eq!(words(&sem_available("s")), ["LOCK.SEMAVAILABLE", "s"]);
        assert_eq!(words(&sem_drain("s")), ["LOCK.SEMDRAIN", "s"]);
        assert_eq!(
            words(&permit_acquire("p", 2, Some(30_000), Some(250))),
            [
                "LOCK.PERMITACQUIRE",
                "p",
                "2",
                "LEASE",
                "30000",
                "WAIT",
                "250"
            ]
        );
        assert_eq!(
            words(&permit_acquire("p", 1, None, None)),
            ["LOCK.PERMITACQUIRE", "p", "1"]
        );
        let ids = ["a".repeat(32), "b".repeat(32)];
        assert_eq!(
            words(&permit_release("p", &ids)),
            ["LOCK.PERMITRELEASE", "p", &ids[0], &ids[1]]
        );
        assert_eq!(
            words(&permit_renew("p", &ids[0], 900)),
            ["LOCK.PERMITRENEW", "p", &ids[0], "900"]
        );
        assert_eq!(
            words(&latch_set("l", 3, Some(10))),
            ["LOCK.LATCHSET", "l", "3", "PX", "10"]
        );
        assert_eq!(words(&count_down("l")), ["LOCK.COUNTDOWN", "l"]);
        assert_eq!(words(&latch_count("l")), ["LOCK.LATCHCOUNT", "l"]);
        assert_eq!(words(&await_zero("l", 0)), ["LOCK.AWAIT", "l", "0"]);
    }

    #[test]
    fn permits_and_ttls_are_checked_before_sending() {
        assert!(permits(0).is_err());
        assert_eq!(permits(1).ok(), Some(1));
        assert!(permits(u64::MAX).is_err());
        assert!(ttl_ms(Duration::ZERO).is_err());
        assert_eq!(ttl_ms(Duration::from_micros(1)).ok(), Some(1));
        assert_eq!(ttl_ms(Duration::from_millis(1500)).ok(), Some(1500));
        assert!(ttl_ms(Duration::MAX).is_err());
    }

    #[test]
    fn permit_ids_are_32_lowercase_hex_and_as_many_as_asked() {
        let id = "0123456789abcdef0123456789abcdef";
        let two = Value::Array(vec![text(id), text(id)]);
        assert_eq!(
            parse_permit_ids(&two, 2).ok(),
            Some(Some(vec![id.to_string(), id.to_string()]))
        );
        assert_eq!(parse_permit_ids(&Value::Nil, 2).ok(), Some(None));
        assert!(parse_permit_ids(&two, 3).is_err(), "too few ids");
        let upper = Value::Array(vec![text(&id.to_uppercase())]);
        assert!(parse_permit_ids(&upper, 1).is_err());
        let short = Value::Array(vec![text(&id[1..])]);
        assert!(parse_permit_ids(&short, 1).is_err());
        assert!(parse_permit_ids(&Value::Int(1), 1).is_err());
    }

    #[test]
    fn await_replies_are_reached_timed_out_or_expired() {
        assert_eq!(parse_await(&Value::Int(1)).ok(), Some(Awaited::Reached));
        assert_eq!(parse_await(&Value::Int(0)).ok(), Some(Awaited::TimedOut));
        assert_eq!(parse_await(&Value::Int(-1)).ok(), Some(Awaited::Expired));
        assert!(parse_await(&Value::Int(2)).is_err());
        assert!(parse_await(&Value::Nil).is_err());
        assert_eq!(parse_count("LOCK.COUNTDOWN", &Value::Int(0)).ok(), Some(0));
        assert!(parse_count("LOCK.COUNTDOWN", &Value::Int(-1)).is_err());
        assert_eq!(parse_int("LOCK.SEMADD", &Value::Int(-3)).ok(), Some(-3));
        assert!(parse_int("LOCK.SEMADD", &Value::Nil).is_err());
    }

    #[test]
    fn a_permit_release_refusal_is_told_apart() {
        let e = redis::parse_redis_value(
            b"-ERR permit 0123456789abcdef0123456789abcdef is not held (unknown, released or expired)\r\n",
        )
        .and_then(Value::extract_error)
        .expect_err("an error reply");
        assert!(is_permit_not_held(&e));
        let other = redis::parse_redis_value(b"-ERR permit id must be 32 hex characters\r\n")
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert!(!is_permit_not_held(&other));
    }
}
