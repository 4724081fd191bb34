//! The wire contract: every command this crate sends, built in one place,
//! and every reply it reads, decoded in one place.
//!
//! The module's side of the contract is `src/commands/` (the reply shapes
//! are in the command tables of `docs/`). Two of its argument rules are
//! checked here too, with the module's wording, so a caller learns of them
//! before anything is sent: the longest lease ([`MAX_LEASE_MS`], the
//! module's `args::MAX_LEASE_MS`) and which lock names can have a fencing
//! token counter ([`token_key`], the module's `fencing::counter_key`).
//! Their unit tests below pin the texts; `client/tests/it/fenced.rs` compares
//! the counter-key refusal with the module's own.

use std::borrow::Cow;
use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{LockError, Result};

/// The longest lease the module accepts: 100 years of 365.25 days, in ms
/// (the module's `args::MAX_LEASE_MS`).
pub(crate) const MAX_LEASE_MS: u64 = 36_525 * 86_400_000;

/// A lease in whole milliseconds, as every `LOCK.*` command takes it:
/// at least 1 ms, at most [`MAX_LEASE_MS`] (longer ones are mistakes, and
/// the module refuses them).
pub(crate) fn lease_ms(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(LockError::InvalidArgument(format!(
            "a lease must be at least 1 ms: {lease:?}"
        )));
    }
    if ms > u128::from(MAX_LEASE_MS) {
        return Err(LockError::InvalidArgument(format!(
            "lease-ms must be at most {MAX_LEASE_MS} (milliseconds, 100 years): {lease:?}"
        )));
    }
    Ok(ms as u64)
}

/// A wait in whole milliseconds, rounded up so it never ends early; at least 1
/// (the module reads 0 as "forever").
pub(crate) fn wait_ms(wait: Duration) -> u64 {
    let ms = wait.as_nanos().div_ceil(1_000_000);
    ms.clamp(1, i64::MAX as u128) as u64
}

/// What a hold is a hold of: a lock ([`LockClient::lock`]), or a read-write
/// lock held for reading ([`LockClient::read_lock`]) or for writing
/// ([`LockClient::write_lock`]). It selects the commands a hold is taken,
/// renewed and given back with, and the hash field that counts it.
///
/// [`LockClient::lock`]: crate::LockClient::lock
/// [`LockClient::read_lock`]: crate::LockClient::read_lock
/// [`LockClient::write_lock`]: crate::LockClient::write_lock
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A re-entrant lock (Redisson's `RLock`): `LOCK.ACQUIRE`,
    /// `LOCK.RELEASE`, `LOCK.RENEW`; counted in the field `<owner>`.
    Lock,
    /// A read hold of a read-write lock (Redisson's `RReadWriteLock`):
    /// `LOCK.RACQUIRE`, `LOCK.RRELEASE`, `LOCK.RWRENEW`; counted in the
    /// field `<owner>`.
    Read,
    /// The write hold of a read-write lock: `LOCK.WACQUIRE`,
    /// `LOCK.WRELEASE`, `LOCK.RWRENEW`; counted in the field
    /// `<owner>:write`.
    Write,
}

impl LockKind {
    /// The hash field that counts `owner`'s holds of this kind: Redisson's
    /// `<owner>`, or `<owner>:write` for a write hold.
    pub(crate) fn field(self, owner: &str) -> String {
        match self {
            LockKind::Lock | LockKind::Read => owner.to_string(),
            LockKind::Write => format!("{owner}:write"),
        }
    }

    /// A hold of a read-write lock.
    pub(crate) fn is_rw(self) -> bool {
        matches!(self, LockKind::Read | LockKind::Write)
    }
}

/// One hold's coordinates on the server: the lock's key, the owner id (as
/// commands and the wait queue name it) and the hash field that counts its
/// holds (what a read-back reads).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Holder<'a> {
    pub(crate) kind: LockKind,
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) field: &'a str,
}

impl<'a> Holder<'a> {
    /// A plain lock's: its field is the owner id.
    pub(crate) fn lock(name: &'a str, owner: &'a str) -> Holder<'a> {
        Holder {
            kind: LockKind::Lock,
            name,
            owner,
            field: owner,
        }
    }
}

/// `LOCK.ACQUIRE name owner lease-ms [WAIT wait-ms] [TOKEN] [SYNC n ms]`,
/// or for a read-write lock `LOCK.RACQUIRE name owner lease-ms [WAIT
/// wait-ms]` / `LOCK.WACQUIRE name owner lease-ms [WAIT wait-ms] [TOKEN]`
/// (the module offers neither `SYNC` nor a fenced read: `acquire.rs`
/// refuses them before this is built). `wait_ms: Some(0)` waits forever,
/// as `BLPOP`.
pub(crate) fn acquire(
    who: Holder<'_>,
    lease_ms: u64,
    wait_ms: Option<u64>,
    fenced: bool,
    sync: Option<(u32, u64)>,
) -> Cmd {
    let command = match who.kind {
        LockKind::Lock => "LOCK.ACQUIRE",
        LockKind::Read => "LOCK.RACQUIRE",
        LockKind::Write => "LOCK.WACQUIRE",
    };
    let mut cmd = on_hold(command, who.name, who.owner);
    cmd.arg(lease_ms);
    if let Some(wait) = wait_ms {
        cmd.arg("WAIT").arg(wait);
    }
    if fenced && who.kind != LockKind::Read {
        cmd.arg("TOKEN");
    }
    if let Some((replicas, timeout_ms)) = sync.filter(|_| who.kind == LockKind::Lock) {
        cmd.arg("SYNC").arg(replicas).arg(timeout_ms);
    }
    cmd
}

/// The command's name, its first word (`LOCK.SEMDRAIN`), for errors:
/// borrowed from the command, so a reply parsed without error costs no
/// allocation for it.
pub(crate) fn command_name(cmd: &Cmd) -> Cow<'_, str> {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(word)) => String::from_utf8_lossy(word),
        _ => Cow::Borrowed(""),
    }
}

/// `command key`: the commands on a lock's key alone.
pub(super) fn on_key(command: &str, key: &str) -> Cmd {
    let mut cmd = redis::cmd(command);
    cmd.arg(key);
    cmd
}

/// `command key arg`: the commands on a key with one argument.
pub(super) fn on_key_arg(command: &str, key: &str, arg: impl redis::ToRedisArgs) -> Cmd {
    let mut cmd = on_key(command, key);
    cmd.arg(arg);
    cmd
}

/// `cmd` followed by `word value` when there is a value: an optional
/// argument (`PX ttl-ms`, `WAIT wait-ms`, `LEASE lease-ms`).
pub(super) fn optional(mut cmd: Cmd, word: &str, value: Option<u64>) -> Cmd {
    if let Some(value) = value {
        cmd.arg(word).arg(value);
    }
    cmd
}

/// `command name owner`: the commands on one owner's hold.
pub(super) fn on_hold(command: &str, name: &str, owner: &str) -> Cmd {
    let mut cmd = on_key(command, name);
    cmd.arg(owner);
    cmd
}

/// `LOCK.RELEASE name owner [lease-ms]`: with a lease, holds that remain
/// restart it (Redisson sends its watchdog lease with every unlock). A
/// write hold: `LOCK.WRELEASE`, the same arguments; a read hold:
/// `LOCK.RRELEASE name owner` (each read hold has its own lease, so there
/// is none to restart).
pub(crate) fn release(who: Holder<'_>, lease_ms: Option<u64>) -> Cmd {
    let command = match who.kind {
        LockKind::Lock => "LOCK.RELEASE",
        LockKind::Read => "LOCK.RRELEASE",
        LockKind::Write => "LOCK.WRELEASE",
    };
    let mut cmd = on_hold(command, who.name, who.owner);
    if let Some(ms) = lease_ms.filter(|_| who.kind != LockKind::Read) {
        cmd.arg(ms);
    }
    cmd
}

/// `LOCK.RENEW name owner lease-ms`; for a read-write lock `LOCK.RWRENEW
/// name owner lease-ms`, which renews every hold `owner` has on it (read
/// and write), and answers 0 once its read holds all passed their
/// deadlines.
pub(crate) fn renew(who: Holder<'_>, lease_ms: u64) -> Cmd {
    let mut cmd = on_hold(renew_command(who.kind), who.name, who.owner);
    cmd.arg(lease_ms);
    cmd
}

/// The renewal command of a kind of hold, for replies and messages.
pub(crate) fn renew_command(kind: LockKind) -> &'static str {
    if kind.is_rw() {
        "LOCK.RWRENEW"
    } else {
        "LOCK.RENEW"
    }
}

/// `LOCK.FORCE name`.
pub(crate) fn force(name: &str) -> Cmd {
    on_key("LOCK.FORCE", name)
}

/// `LOCK.INFO name`.
pub(crate) fn info(name: &str) -> Cmd {
    on_key("LOCK.INFO", name)
}

/// `HGET name field`: a hold count in Redisson's lock hash (`field`:
/// [`LockKind::field`]).
pub(crate) fn hold_count(name: &str, field: &str) -> Cmd {
    on_hold("HGET", name, field)
}

/// `HEXISTS name field`: whether the owner whose field it is holds the lock.
pub(crate) fn is_held(name: &str, field: &str) -> Cmd {
    on_hold("HEXISTS", name, field)
}

/// `EXISTS name`: whether anyone holds the lock.
pub(crate) fn is_locked(name: &str) -> Cmd {
    on_key("EXISTS", name)
}

/// `PTTL name`: the lock's lease left.
pub(crate) fn lease_left(name: &str) -> Cmd {
    on_key("PTTL", name)
}

/// `GET <counter>`: the lock's fencing token counter.
pub(crate) fn token(name: &str) -> Result<Cmd> {
    Ok(on_key("GET", &token_key(name)?))
}

/// A decoded `LOCK.ACQUIRE` reply.
#[derive(Debug)]
pub(crate) enum Acquired {
    /// Granted (or re-entered), with the token when `TOKEN` was sent.
    Granted(Option<i64>),
    /// Held by another owner (or the wait timed out).
    Busy,
}

/// Decodes `LOCK.ACQUIRE`: nil / integer, or with `TOKEN` the pair
/// `[-1, token]` / `[remaining-lease, -1]`.
pub(crate) fn parse_acquire(reply: Value, fenced: bool) -> Result<Acquired> {
    match (reply, fenced) {
        (Value::Nil, false) => Ok(Acquired::Granted(None)),
        (Value::Int(_), false) => Ok(Acquired::Busy),
        (Value::Array(pair), true) if pair.len() == 2 => match (&pair[0], &pair[1]) {
            (Value::Int(-1), Value::Int(token)) if *token >= 0 => {
                Ok(Acquired::Granted(Some(*token)))
            }
            (Value::Int(_), Value::Int(-1)) => Ok(Acquired::Busy),
            _ => Err(unexpected("LOCK.ACQUIRE ... TOKEN", &Value::Array(pair))),
        },
        (other, _) => Err(unexpected("LOCK.ACQUIRE", &other)),
    }
}

/// Decodes `LOCK.RELEASE`: true when a hold was given back (the lock
/// freed, or still held by this owner's other holds), false when the owner
/// held nothing (nil).
pub(crate) fn parse_release(reply: &Value) -> Result<bool> {
    match reply {
        Value::Nil => Ok(false),
        Value::Int(0 | 1) => Ok(true),
        other => Err(unexpected("LOCK.RELEASE", other)),
    }
}

/// Decodes an integer reply that answers yes (`1`) or no (`0`):
/// `LOCK.RENEW`, `LOCK.FORCE`, `HEXISTS`, and `EXISTS` of one key.
pub(crate) fn parse_flag(command: &str, reply: &Value) -> Result<bool> {
    match reply {
        Value::Int(0) => Ok(false),
        Value::Int(1) => Ok(true),
        other => Err(unexpected(command, other)),
    }
}

/// Decodes `PTTL`: the lease left, `None` for no key (or no expiry).
pub(crate) fn parse_pttl(reply: &Value) -> Result<Option<Duration>> {
    match reply {
        Value::Int(ms) if *ms >= 0 => Ok(Some(Duration::from_millis(*ms as u64))),
        Value::Int(_) => Ok(None),
        other => Err(unexpected("PTTL", other)),
    }
}

/// Decodes the token counter's `GET`: `None` when there is no counter.
pub(crate) fn parse_token(reply: &Value) -> Result<Option<i64>> {
    match reply {
        Value::Nil => Ok(None),
        v => redis::from_redis_value::<i64>(v.clone())
            .map(Some)
            .map_err(|e| LockError::Protocol(format!("the token counter: {e}"))),
    }
}

pub(super) fn unexpected(command: &str, reply: &Value) -> LockError {
    LockError::Protocol(format!("{command} answered {reply:?}"))
}

/// A hold count as `HGET lock owner` answers it: nil is 0.
pub(crate) fn parse_hold_count(reply: &Value) -> Result<u64, String> {
    match reply {
        Value::Nil => Ok(0),
        v => redis::from_redis_value::<u64>(v.clone())
            .map_err(|e| format!("the hold count is not a number: {e}")),
    }
}

/// Whether an `HGET lock owner` reply says the owner holds nothing.
pub(crate) fn is_hold_count_zero(reply: &Value) -> bool {
    match reply {
        Value::Nil | Value::Int(0) => true,
        Value::BulkString(b) => b == b"0",
        _ => false,
    }
}

/// The lease a hold has left, from a `LOCK.INFO` reply: None when the
/// reply is not understood, Some(None) when the owner holds nothing of
/// this kind.
///
/// A lock's or a write hold's lease is the key's (`ttl_ms`). A read hold's
/// is its own: the latest deadline among the owner's read holds
/// (`readers`, unix ms), less the server's time, which is the key's
/// `deadline_ms` less its `ttl_ms` (the hash lives as long as its longest
/// hold, which may be another reader's).
pub(crate) fn info_lease_left(info: &Value, who: Holder<'_>) -> Option<Option<Duration>> {
    let fields = pairs(info);
    let field = |name: &[u8]| {
        fields
            .iter()
            .find(|(k, _)| is_text(k, name))
            .map(|(_, v)| *v)
    };
    let holds = pairs(field(b"owners")?)
        .into_iter()
        .any(|(k, v)| is_text(k, who.field.as_bytes()) && !matches!(v, Value::Int(0)));
    if !holds {
        return Some(None);
    }
    let Value::Int(ttl) = field(b"ttl_ms")? else {
        return None;
    };
    if *ttl < 0 {
        return None;
    }
    if who.kind != LockKind::Read {
        return Some(Some(Duration::from_millis(*ttl as u64)));
    }
    let Value::Int(deadline) = field(b"deadline_ms")? else {
        return None;
    };
    let server_now = deadline - ttl;
    let latest = pairs(field(b"readers")?)
        .into_iter()
        .filter(|(k, _)| is_text(k, who.owner.as_bytes()))
        .flat_map(|(_, deadlines)| match deadlines {
            Value::Array(list) | Value::Set(list) => list.clone(),
            _ => Vec::new(),
        })
        .filter_map(|d| match d {
            Value::Int(at) => Some(at),
            _ => None,
        })
        .max()?;
    Some((latest > server_now).then(|| Duration::from_millis((latest - server_now) as u64)))
}

/// Whether a `LOCK.INFO` reply lists `owner` among the waiters.
pub(crate) fn info_waiters_include(info: &Value, owner: &[u8]) -> bool {
    pairs(info)
        .into_iter()
        .filter(|(k, _)| is_text(k, b"waiters"))
        .any(|(_, waiters)| match waiters {
            Value::Array(list) | Value::Set(list) => list.iter().any(|w| {
                pairs(w)
                    .into_iter()
                    .any(|(k, v)| is_text(k, b"owner") && is_text(v, owner))
            }),
            _ => false,
        })
}

/// The pairs of a map reply: a RESP3 map or a RESP2 flat key/value array.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|c| match c {
                [k, v] => Some((k, v)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn is_text(v: &Value, text: &[u8]) -> bool {
    match v {
        Value::BulkString(b) => b == text,
        Value::SimpleString(s) => s.as_bytes() == text,
        _ => false,
    }
}

/// The token counter of lock `name`: Redisson's `prefixName`,
/// `redisson_lock_token:{name}`, or `redisson_lock_token:name` when the
/// name has a hash tag of its own.
///
/// Refused, as the module refuses `TOKEN` for them (`fencing::counter_key`,
/// the same check and text), where that rule would put the counter in
/// another cluster slot than the lock: an empty name, a `'}'` without a
/// `'{'`, a `'{'` without a closing `'}'`, an empty hash tag `'{}'`.
pub(crate) fn token_key(name: &str) -> Result<String> {
    let bytes = name.as_bytes();
    let valid_tag = match bytes.iter().position(|&b| b == b'{') {
        // `{}` would be an empty hash tag.
        None if bytes.is_empty() => return Err(counter_elsewhere(name, "is empty")),
        None if !bytes.contains(&b'}') => false,
        None => return Err(counter_elsewhere(name, "has a '}' without a '{'")),
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => true,
            Some(_) => return Err(counter_elsewhere(name, "has an empty hash tag '{}'")),
            None => return Err(counter_elsewhere(name, "has a '{' without a closing '}'")),
        },
    };
    Ok(if valid_tag {
        format!("redisson_lock_token:{name}")
    } else {
        format!("redisson_lock_token:{{{name}}}")
    })
}

/// The module's `errors::counter_elsewhere`, without its `ERR ` code.
fn counter_elsewhere(name: &str, why: &str) -> LockError {
    LockError::InvalidArgument(format!(
        "TOKEN needs the token counter in the lock's cluster slot, and key '{}' {why}: \
         use a key without braces or with a non-empty hash tag such as '{{orders}}:42'",
        name.escape_debug()
    ))
}

mod counting;
mod waiting;

pub use counting::Awaited;
pub(crate) use counting::*;
pub(crate) use waiting::*;

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) fn text(t: &str) -> Value {
        Value::BulkString(t.as_bytes().to_vec())
    }

    #[test]
    fn waits_round_up_and_never_mean_forever() {
        assert_eq!(wait_ms(Duration::from_micros(1)), 1);
        assert_eq!(wait_ms(Duration::from_micros(1500)), 2);
        assert_eq!(wait_ms(Duration::from_millis(7)), 7);
        assert_eq!(wait_ms(Duration::ZERO), 1);
    }

    #[test]
    fn leases_must_be_whole_positive_milliseconds_of_at_most_100_years() {
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_secs(30)).ok(), Some(30_000));
        let century = Duration::from_millis(MAX_LEASE_MS);
        assert_eq!(lease_ms(century).ok(), Some(3_155_760_000_000));
        for too_long in [
            century + Duration::from_millis(1),
            Duration::from_millis(i64::MAX as u64),
            Duration::MAX,
        ] {
            let err = lease_ms(too_long).expect_err("over 100 years");
            // The module's words (`errors::LEASE_TOO_LONG`).
            assert!(
                err.to_string()
                    .contains("lease-ms must be at most 3155760000000 (milliseconds, 100 years)"),
                "{err}"
            );
        }
    }

    #[test]
    fn acquire_replies_decode_both_contracts() {
        assert!(matches!(
            parse_acquire(Value::Nil, false),
            Ok(Acquired::Granted(None))
        ));
        assert!(matches!(
            parse_acquire(Value::Int(2900), false),
            Ok(Acquired::Busy)
        ));
        let granted = Value::Array(vec![Value::Int(-1), Value::Int(17)]);
        assert!(matches!(
            parse_acquire(granted, true),
            Ok(Acquired::Granted(Some(17)))
        ));
        let busy = Value::Array(vec![Value::Int(2900), Value::Int(-1)]);
        assert!(matches!(parse_acquire(busy, true), Ok(Acquired::Busy)));
        assert!(parse_acquire(Value::Nil, true).is_err());
        assert!(parse_acquire(Value::Okay, false).is_err());
    }

    #[test]
    fn other_replies_decode() {
        assert_eq!(parse_release(&Value::Nil).ok(), Some(false));
        assert_eq!(parse_release(&Value::Int(1)).ok(), Some(true));
        assert_eq!(parse_release(&Value::Int(0)).ok(), Some(true));
        assert!(parse_release(&Value::Int(2)).is_err());
        assert_eq!(parse_flag("EXISTS", &Value::Int(1)).ok(), Some(true));
        assert!(parse_flag("LOCK.FORCE", &Value::Int(2)).is_err());
        assert_eq!(parse_flag("LOCK.RENEW", &Value::Int(0)).ok(), Some(false));
        assert!(parse_flag("LOCK.RENEW", &Value::Nil).is_err());
        assert_eq!(
            parse_pttl(&Value::Int(5)).ok(),
            Some(Some(Duration::from_millis(5)))
        );
        assert_eq!(parse_pttl(&Value::Int(-2)).ok(), Some(None));
        assert_eq!(parse_token(&text("42")).ok(), Some(Some(42)));
        assert_eq!(parse_token(&Value::Nil).ok(), Some(None));
        assert!(parse_token(&text("x")).is_err());
        assert_eq!(parse_hold_count(&text("3")), Ok(3));
        assert_eq!(parse_hold_count(&Value::Nil), Ok(0));
        assert!(is_hold_count_zero(&Value::Nil) && is_hold_count_zero(&text("0")));
        assert!(!is_hold_count_zero(&text("2")));
    }

    #[test]
    fn waiters_are_found_in_both_protocols() {
        let waiter = Value::Array(vec![
            text("owner"),
            text("w1"),
            text("waited_ms"),
            Value::Int(3),
        ]);
        let resp2 = Value::Array(vec![
            text("state"),
            text("held"),
            text("waiters"),
            Value::Array(vec![waiter]),
        ]);
        assert!(info_waiters_include(&resp2, b"w1"));
        assert!(!info_waiters_include(&resp2, b"w2"));
        let resp3 = Value::Map(vec![(
            text("waiters"),
            Value::Array(vec![Value::Map(vec![(text("owner"), text("w2"))])]),
        )]);
        assert!(info_waiters_include(&resp3, b"w2"));
        assert!(!info_waiters_include(&Value::Nil, b"w2"));
    }

    fn lock(owner: &str) -> Holder<'_> {
        Holder {
            kind: LockKind::Lock,
            name: "k",
            owner,
            field: owner,
        }
    }

    #[test]
    fn the_lease_left_is_read_for_the_owner_only() {
        let resp2 = Value::Array(vec![
            text("state"),
            text("held"),
            text("owners"),
            Value::Array(vec![text("b"), Value::Int(1)]),
            text("ttl_ms"),
            Value::Int(987),
        ]);
        assert_eq!(
            info_lease_left(&resp2, lock("b")),
            Some(Some(Duration::from_millis(987)))
        );
        assert_eq!(info_lease_left(&resp2, lock("a")), Some(None));
        let resp3 = Value::Map(vec![
            (text("owners"), Value::Map(vec![(text("b"), Value::Int(2))])),
            (text("ttl_ms"), Value::Int(5)),
        ]);
        assert_eq!(
            info_lease_left(&resp3, lock("b")),
            Some(Some(Duration::from_millis(5)))
        );
        assert_eq!(info_lease_left(&Value::Nil, lock("b")), None);
    }

    #[test]
    fn token_keys_follow_redissons_prefix_rule() {
        for (name, counter) in [
            ("stock", "redisson_lock_token:{stock}"),
            ("{o}:s", "redisson_lock_token:{o}:s"),
            ("a:{b}:c", "redisson_lock_token:a:{b}:c"),
            // Accepted by the module too: the first tag is the one hashed.
            ("x{y}z{w}", "redisson_lock_token:x{y}z{w}"),
            ("a{b}}", "redisson_lock_token:a{b}}"),
        ] {
            assert_eq!(token_key(name).ok().as_deref(), Some(counter), "{name}");
        }
    }

    /// The module's cases (`fencing.rs`: `keys_whose_braces_would_move_the_counter_are_refused`).
    #[test]
    fn names_whose_braces_would_move_the_counter_are_refused_as_the_module_does() {
        for (name, why) in [
            ("a{b", "has a '{' without a closing '}'"),
            ("{}x", "has an empty hash tag '{}'"),
            ("a}b", "has a '}' without a '{'"),
            ("", "is empty"),
        ] {
            let err = token_key(name).expect_err(name);
            let LockError::InvalidArgument(text) = &err else {
                panic!("{err:?}");
            };
            assert_eq!(
                *text,
                format!(
                    "TOKEN needs the token counter in the lock's cluster slot, and key '{name}' \
                     {why}: use a key without braces or with a non-empty hash tag such as \
                     '{{orders}}:42'"
                )
            );
            assert!(token(name).is_err());
        }
    }

    pub(super) fn words(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                redis::Arg::Cursor => String::new(),
                // `Arg` is `#[non_exhaustive]` since redis 1.0.
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn commands_put_wait_before_token() {
        let cmd = acquire(lock("o"), 100, Some(5), true, Some((1, 250)));
        assert_eq!(
            words(&cmd),
            [
                "LOCK.ACQUIRE",
                "k",
                "o",
                "100",
                "WAIT",
                "5",
                "TOKEN",
                "SYNC",
                "1",
                "250"
            ]
        );
        assert_eq!(
            words(&acquire(lock("o"), 100, None, false, None)),
            ["LOCK.ACQUIRE", "k", "o", "100"]
        );
    }

    #[test]
    fn every_command_names_its_key_first() {
        assert_eq!(
            words(&release(lock("o"), Some(30))),
            ["LOCK.RELEASE", "k", "o", "30"]
        );
        assert_eq!(words(&release(lock("o"), None)), ["LOCK.RELEASE", "k", "o"]);
        assert_eq!(words(&renew(lock("o"), 30)), ["LOCK.RENEW", "k", "o", "30"]);
        assert_eq!(words(&hold_count("k", "o")), ["HGET", "k", "o"]);
        assert_eq!(words(&force("k")), ["LOCK.FORCE", "k"]);
        let get = token("k").map(|cmd| words(&cmd)).ok();
        assert_eq!(
            get,
            Some(vec![
                "GET".to_string(),
                "redisson_lock_token:{k}".to_string()
            ])
        );
    }

    #[test]
    fn each_kind_of_hold_has_its_commands_and_its_field() {
        let read = Holder {
            kind: LockKind::Read,
            name: "doc",
            owner: "o",
            field: "o",
        };
        let write = Holder {
            kind: LockKind::Write,
            field: "o:write",
            ..read
        };
        assert_eq!(LockKind::Read.field("o"), "o");
        assert_eq!(LockKind::Write.field("o"), "o:write");
        assert_eq!(LockKind::Lock.field("o"), "o");
        assert_eq!(
            words(&acquire(read, 100, Some(0), false, None)),
            ["LOCK.RACQUIRE", "doc", "o", "100", "WAIT", "0"]
        );
        assert_eq!(
            words(&acquire(write, 100, None, true, None)),
            ["LOCK.WACQUIRE", "doc", "o", "100", "TOKEN"]
        );
        assert_eq!(
            words(&release(read, Some(30))),
            ["LOCK.RRELEASE", "doc", "o"]
        );
        assert_eq!(
            words(&release(write, Some(30))),
            ["LOCK.WRELEASE", "doc", "o", "30"]
        );
        assert_eq!(words(&release(lock("o"), None)), ["LOCK.RELEASE", "k", "o"]);
        assert_eq!(words(&renew(read, 9)), ["LOCK.RWRENEW", "doc", "o", "9"]);
        assert_eq!(words(&renew(write, 9)), ["LOCK.RWRENEW", "doc", "o", "9"]);
        assert_eq!(words(&renew(lock("o"), 9)), ["LOCK.RENEW", "k", "o", "9"]);
    }

    #[test]
    fn a_read_holds_lease_is_its_own_latest_deadline_not_the_keys() {
        let read = Holder {
            kind: LockKind::Read,
            name: "doc",
            owner: "r1",
            field: "r1",
        };
        // Server time 1_000_000: the key lives 9 s (another reader's hold),
        // r1's holds end 2 s and 3 s from now.
        let info = Value::Array(vec![
            text("owners"),
            Value::Array(vec![text("r1"), Value::Int(2), text("r2"), Value::Int(1)]),
            text("ttl_ms"),
            Value::Int(9_000),
            text("deadline_ms"),
            Value::Int(1_009_000),
            text("mode"),
            text("read"),
            text("readers"),
            Value::Array(vec![
                text("r1"),
                Value::Array(vec![Value::Int(1_002_000), Value::Int(1_003_000)]),
                text("r2"),
                Value::Array(vec![Value::Int(1_009_000)]),
            ]),
        ]);
        assert_eq!(
            info_lease_left(&info, read),
            Some(Some(Duration::from_millis(3_000)))
        );
        let gone = Holder {
            owner: "r3",
            field: "r3",
            ..read
        };
        assert_eq!(info_lease_left(&info, gone), Some(None));
        // A write hold's lease is the key's.
        let write = Holder {
            kind: LockKind::Write,
            owner: "r2",
            field: "r2",
            ..read
        };
        assert_eq!(
            info_lease_left(&info, write),
            Some(Some(Duration::from_millis(9_000)))
        );
    }
}
