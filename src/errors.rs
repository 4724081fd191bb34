//! Every error the module answers a client with, in one place: the kinds
//! (`ERR`, `WRONGTYPE`, `STALE`, `NOSYNC`) and their texts. No FFI.
//!
//! A command, a parser or a decision returns a [`Refusal`]; the command
//! trampoline (`ffi/command.rs`) sends it as the error reply, and nothing was
//! changed (the module checks everything before it writes). Texts name the
//! argument they are about. The error tables under `docs/` (each object's
//! page, and `docs/replication.md` for `SYNC` and demotion) list them; a test
//! checks that they list every one (`CATALOGUE`).

use std::borrow::Cow;

/// An error reply, its whole line: the code (`ERR`, `WRONGTYPE`...) first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(Cow<'static, str>);

impl Refusal {
    const fn fixed(text: &'static str) -> Refusal {
        Refusal(Cow::Borrowed(text))
    }

    /// The reply line.
    pub fn text(&self) -> &str {
        &self.0
    }
}

/// Read as its text (`starts_with`, `contains`...).
impl std::ops::Deref for Refusal {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A key or value as an error shows it: lossy UTF-8, control characters escaped.
fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

// ---- arguments -------------------------------------------------------------

/// Redis's own wording.
pub fn arity(command: &str) -> Refusal {
    Refusal(format!("ERR wrong number of arguments for '{command}' command").into())
}

pub const SYNTAX_ACQUIRE: Refusal = Refusal::fixed(
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms, TOKEN and SYNC \
     numreplicas timeout-ms, each at most once",
);
pub const LEASE_NOT_POSITIVE: Refusal =
    Refusal::fixed("ERR lease-ms must be a positive integer (milliseconds)");
/// Spells `args::MAX_LEASE_MS` (a unit test checks it).
pub const LEASE_TOO_LONG: Refusal =
    Refusal::fixed("ERR lease-ms must be at most 3155760000000 (milliseconds, 100 years)");
pub const OWNER_EMPTY: Refusal = Refusal::fixed("ERR owner must not be empty");
pub const WAIT_NOT_NON_NEGATIVE: Refusal = Refusal::fixed(
    "ERR WAIT timeout-ms must be a non-negative integer (milliseconds, 0 = forever)",
);
pub const WAIT_OUT_OF_RANGE: Refusal = Refusal::fixed("ERR WAIT timeout-ms is out of range");
pub const WAITER_EMPTY: Refusal = Refusal::fixed("ERR WAITER waiter-id must not be empty");
pub const IDENTITY_EMPTY: Refusal = Refusal::fixed("ERR owner-or-waiter-id must not be empty");
pub const SYNC_REPLICAS_INVALID: Refusal =
    Refusal::fixed("ERR SYNC numreplicas must be a non-negative integer");
pub const FENCE_TOKEN_INVALID: Refusal =
    Refusal::fixed("ERR token must be a positive integer (a fencing token)");

pub fn lease_above_cap(lease_ms: i64, cap_ms: i64) -> Refusal {
    Refusal(format!("ERR lease-ms {lease_ms} exceeds lock.max-lease-ms ({cap_ms})").into())
}

pub fn keep_invalid(max_ms: i64) -> Refusal {
    Refusal(
        format!(
            "ERR KEEP grace-ms must be a non-negative integer of at most {max_ms} (milliseconds, \
             0 = keep no place)"
        )
        .into(),
    )
}

pub fn sync_timeout_invalid(max_ms: i64) -> Refusal {
    Refusal(
        format!(
            "ERR SYNC timeout-ms must be a positive integer of at most {max_ms} (milliseconds)"
        )
        .into(),
    )
}

// ---- keys ------------------------------------------------------------------

/// Redis's own wording.
pub const WRONGTYPE: Refusal =
    Refusal::fixed("WRONGTYPE Operation against a key holding the wrong kind of value");
pub const COUNT_NOT_INTEGER: Refusal =
    Refusal::fixed("ERR the owner's hold count in the lock hash is not an integer");
pub const COUNT_OVERFLOWS: Refusal = Refusal::fixed("ERR the owner's hold count would overflow");
pub const TOKEN_OVERFLOWS: Refusal = Refusal::fixed("ERR the lock's token counter would overflow");

pub fn not_an_integer(key: &[u8]) -> Refusal {
    Refusal(format!("ERR key '{}' does not hold an integer", shown(key)).into())
}

/// `why` completes "key '...' ...".
pub fn counter_elsewhere(lock: &[u8], why: &str) -> Refusal {
    Refusal(
        format!(
            "ERR TOKEN needs the token counter in the lock's cluster slot, and key '{}' {why}: \
             use a key without braces or with a non-empty hash tag such as '{{orders}}:42'",
            shown(lock)
        )
        .into(),
    )
}

// ---- fencing and replicas -----------------------------------------------------

/// `LOCK.FENCE` given a lock's key where the fence key belongs.
pub fn fence_on_lock_key(key: &[u8]) -> Refusal {
    Refusal(
        format!(
            "ERR LOCK.FENCE key '{}' is a fenced lock's key (its token counter exists): \
             pass the resource's fence key, such as '{{resource}}:fence', not the lock's",
            shown(key)
        )
        .into(),
    )
}

pub fn stale(token: i64, seen: i64, fence: &[u8]) -> Refusal {
    Refusal(
        format!(
            "STALE fencing token {token} is older than {seen}, the newest '{}' has seen",
            shown(fence)
        )
        .into(),
    )
}

pub const SYNC_CANNOT_BLOCK: Refusal = Refusal::fixed(
    "ERR SYNC: a grant that waits for replicas cannot be made inside MULTI, a script or a \
     module call; use SYNC 0 0 there and WAIT after it",
);

/// A grant undone for want of replica acknowledgements; `why` (may be
/// empty) says what ended the wait early.
pub fn nosync(acked: i64, replicas: i64, timeout_ms: i64, why: &str) -> Refusal {
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    };
    Refusal(
        format!(
            "NOSYNC the grant was undone: {acked} of {replicas} replicas acknowledged it within \
             {timeout_ms} ms{why}"
        )
        .into(),
    )
}

/// A read-write lock reader asking for write (`LOCK.WACQUIRE`).
pub const RW_UPGRADE_REFUSED: Refusal = Refusal::fixed(
    "ERR the owner holds this read-write lock for reading: release its read holds before asking \
     to write (waiting would wait for itself)",
);
/// Also what `SYNC` on a read-write acquire gets: it says so, rather than
/// leave the caller wondering what is wrong with its `SYNC` arguments.
pub const SYNTAX_RW_ACQUIRE: Refusal = Refusal::fixed(
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms and, for LOCK.WACQUIRE, \
     TOKEN, each at most once (SYNC is not offered for read-write locks)",
);

// ---- semaphores and latches -------------------------------------------------

pub const PERMITS_NOT_POSITIVE: Refusal = Refusal::fixed("ERR permits must be a positive integer");
pub const PERMITS_NOT_NON_NEGATIVE: Refusal =
    Refusal::fixed("ERR permits must be a non-negative integer");
pub const DELTA_NOT_INTEGER: Refusal = Refusal::fixed("ERR delta must be an integer");
pub const PERMITS_OVERFLOW: Refusal = Refusal::fixed("ERR the semaphore's permits would overflow");
pub const SEMAPHORE_NOT_INTEGER: Refusal =
    Refusal::fixed("ERR the semaphore's value is not an integer");
pub const PERMIT_ID_INVALID: Refusal = Refusal::fixed("ERR permit id must be 32 hex characters");
pub const TOO_MANY_PERMITS: Refusal = Refusal::fixed("ERR permits must be at most 10000 per call");
pub const TTL_NOT_POSITIVE: Refusal =
    Refusal::fixed("ERR PX ttl-ms must be a positive integer (milliseconds, at most 100 years)");
pub const COUNT_NOT_POSITIVE: Refusal = Refusal::fixed("ERR count must be a positive integer");
pub const LATCH_NOT_INTEGER: Refusal = Refusal::fixed("ERR the latch's count is not an integer");
pub const AWAIT_TIMEOUT_INVALID: Refusal =
    Refusal::fixed("ERR timeout-ms must be a non-negative integer (milliseconds, 0 = forever)");
pub const SYNTAX_SEM_ACQUIRE: Refusal = Refusal::fixed(
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms and WAITER waiter-id, \
     each at most once",
);
pub const SYNTAX_PERMIT_ACQUIRE: Refusal = Refusal::fixed(
    "ERR syntax error: the options are LEASE lease-ms, WAIT timeout-ms, KEEP grace-ms and \
     WAITER waiter-id, each at most once",
);
pub const SYNTAX_AWAIT: Refusal = Refusal::fixed(
    "ERR syntax error: the options are KEEP grace-ms and WAITER waiter-id, each at most once",
);
pub const SYNTAX_SET_TTL: Refusal = Refusal::fixed("ERR syntax error: the option is PX ttl-ms");

/// A semaphore whose leased-permit set `{name}:timeout` would be in another
/// cluster slot than `name`.
pub fn permits_elsewhere(name: &[u8], why: &str) -> Refusal {
    keys_elsewhere(
        "leased permits need their set in the semaphore's",
        name,
        why,
    )
}

/// A read-write lock whose read holds' keys (`{name}:<owner>:rwlock_timeout:<n>`)
/// would be in another cluster slot than `name`.
pub fn read_holds_elsewhere(name: &[u8], why: &str) -> Refusal {
    keys_elsewhere("read holds need their keys in the lock's", name, why)
}

/// Keys Redisson names from `name` that would leave its cluster slot.
fn keys_elsewhere(needs: &str, name: &[u8], why: &str) -> Refusal {
    Refusal(
        format!(
            "ERR {needs} cluster slot, and key '{}' {why}: use a key without braces or with \
             a non-empty hash tag such as '{{pool}}:db'",
            shown(name)
        )
        .into(),
    )
}

/// `LOCK.PERMITRELEASE` of an id that is not a live permit.
pub fn permit_not_held(id_hex: &[u8]) -> Refusal {
    Refusal(
        format!(
            "ERR permit {} is not held (unknown, released or expired)",
            shown(id_hex)
        )
        .into(),
    )
}

// ---- the server ------------------------------------------------------------

/// What a waiter ended by `LOCK.CANCEL` hears: its own code, so clients
/// tell it from a timeout (which is no error) and from a server's refusal.
pub const CANCELLED: Refusal = Refusal::fixed("CANCELLED the wait was cancelled (LOCK.CANCEL)");
pub const WAIT_ABORTED_DEMOTED: Refusal =
    Refusal::fixed("ERR lock wait aborted: this server became a replica");
pub const INTERNAL: Refusal =
    Refusal::fixed("ERR internal error in the lock module (see the server log)");

/// The fixed beginning of every error, for the docs check.
#[cfg(test)]
pub const CATALOGUE: &[&str] = &[
    "ERR wrong number of arguments for '",
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms, TOKEN and SYNC",
    "ERR KEEP grace-ms must be a non-negative integer of at most ",
    "ERR WAITER waiter-id must not be empty",
    "ERR owner-or-waiter-id must not be empty",
    "ERR lease-ms must be a positive integer (milliseconds)",
    "ERR lease-ms must be at most 3155760000000 (milliseconds, 100 years)",
    "ERR lease-ms ",
    "ERR owner must not be empty",
    "ERR WAIT timeout-ms must be a non-negative integer (milliseconds, 0 = forever)",
    "ERR WAIT timeout-ms is out of range",
    "ERR SYNC numreplicas must be a non-negative integer",
    "ERR SYNC timeout-ms must be a positive integer of at most ",
    "ERR token must be a positive integer (a fencing token)",
    "WRONGTYPE",
    "ERR the owner's hold count in the lock hash is not an integer",
    "ERR the owner's hold count would overflow",
    "ERR the lock's token counter would overflow",
    "ERR key '",
    "ERR TOKEN needs the token counter in the lock's cluster slot",
    "ERR LOCK.FENCE key '",
    "STALE fencing token ",
    "ERR SYNC: a grant that waits for replicas cannot be made inside MULTI",
    "NOSYNC the grant was undone: ",
    "ERR lock wait aborted: this server became a replica",
    "CANCELLED the wait was cancelled (LOCK.CANCEL)",
    "ERR the owner holds this read-write lock for reading",
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms and, for LOCK.WACQUIRE",
    "ERR permits must be a positive integer",
    "ERR permits must be a non-negative integer",
    "ERR delta must be an integer",
    "ERR the semaphore's permits would overflow",
    "ERR the semaphore's value is not an integer",
    "ERR permit id must be 32 hex characters",
    "ERR permits must be at most 10000 per call",
    "ERR PX ttl-ms must be a positive integer",
    "ERR count must be a positive integer",
    "ERR the latch's count is not an integer",
    "ERR timeout-ms must be a non-negative integer",
    "ERR syntax error: the options are WAIT timeout-ms, KEEP grace-ms and WAITER waiter-id",
    "ERR syntax error: the options are LEASE lease-ms, WAIT timeout-ms, KEEP grace-ms",
    "ERR syntax error: the options are KEEP grace-ms and WAITER waiter-id",
    "ERR syntax error: the option is PX ttl-ms",
    "ERR permit ",
    "ERR leased permits need their set in the semaphore's cluster slot, and key '",
    "ERR read holds need their keys in the lock's cluster slot, and key '",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The pages whose error tables list the module's errors, each
    /// object's own and the operations' (`SYNC`, demotion).
    const ERROR_PAGES: [(&str, &str); 7] = [
        ("docs/lock.md", include_str!("../docs/lock.md")),
        ("docs/fenced.md", include_str!("../docs/fenced.md")),
        ("docs/rwlock.md", include_str!("../docs/rwlock.md")),
        ("docs/semaphore.md", include_str!("../docs/semaphore.md")),
        ("docs/permits.md", include_str!("../docs/permits.md")),
        ("docs/latch.md", include_str!("../docs/latch.md")),
        (
            "docs/replication.md",
            include_str!("../docs/replication.md"),
        ),
    ];

    #[test]
    fn the_docs_list_every_error() {
        for start in CATALOGUE {
            assert!(
                ERROR_PAGES
                    .iter()
                    .any(|(_, page)| page.contains(&format!("| `{start}"))),
                "no error table under docs/ lists {start:?}"
            );
        }
    }

    #[test]
    fn every_error_starts_with_its_catalogued_beginning() {
        let samples = [
            arity("lock.acquire"),
            SYNTAX_ACQUIRE,
            keep_invalid(86_400_000),
            WAITER_EMPTY,
            IDENTITY_EMPTY,
            LEASE_NOT_POSITIVE,
            LEASE_TOO_LONG,
            lease_above_cap(90_000, 60_000),
            OWNER_EMPTY,
            WAIT_NOT_NON_NEGATIVE,
            WAIT_OUT_OF_RANGE,
            SYNC_REPLICAS_INVALID,
            sync_timeout_invalid(5),
            FENCE_TOKEN_INVALID,
            WRONGTYPE,
            COUNT_NOT_INTEGER,
            COUNT_OVERFLOWS,
            TOKEN_OVERFLOWS,
            not_an_integer(b"k"),
            counter_elsewhere(b"a{b", "has a '{' without a closing '}'"),
            fence_on_lock_key(b"lk"),
            stale(1, 2, b"f"),
            SYNC_CANNOT_BLOCK,
            nosync(0, 1, 100, ""),
            WAIT_ABORTED_DEMOTED,
            CANCELLED,
            RW_UPGRADE_REFUSED,
            SYNTAX_RW_ACQUIRE,
            PERMITS_NOT_POSITIVE,
            PERMITS_NOT_NON_NEGATIVE,
            DELTA_NOT_INTEGER,
            PERMITS_OVERFLOW,
            SEMAPHORE_NOT_INTEGER,
            PERMIT_ID_INVALID,
            TOO_MANY_PERMITS,
            TTL_NOT_POSITIVE,
            COUNT_NOT_POSITIVE,
            LATCH_NOT_INTEGER,
            AWAIT_TIMEOUT_INVALID,
            SYNTAX_SEM_ACQUIRE,
            SYNTAX_PERMIT_ACQUIRE,
            SYNTAX_AWAIT,
            SYNTAX_SET_TTL,
            permit_not_held(b"00"),
            permits_elsewhere(b"a{b", "has a '{' without a closing '}'"),
            read_holds_elsewhere(b"a{}b", "has an empty hash tag '{}'"),
        ];
        assert_eq!(samples.len(), CATALOGUE.len());
        for (sample, start) in samples.iter().zip(CATALOGUE) {
            assert!(sample.text().starts_with(start), "{sample} / {start}");
        }
        assert_eq!(
            nosync(1, 2, 100, "the WAIT timeout came first").text(),
            "NOSYNC the grant was undone: 1 of 2 replicas acknowledged it within 100 ms \
             (the WAIT timeout came first)"
        );
        assert_eq!(
            not_an_integer(b"a\nb").text(),
            "ERR key 'a\\nb' does not hold an integer"
        );
    }
}
