//! Parsing and validating client arguments, with no FFI.
//!
//! Every error names the argument it is about, and parsing happens before any
//! key is touched, so bad input changes nothing.

/// A command argument: anything that reads as bytes. Commands parse
/// `&[A]` for any `A: Arg`, so their parsers are unit-tested on `&[u8]`
/// while the module hands them Redis's own strings (no copy).
pub trait Arg<'a>: Copy {
    fn bytes(self) -> &'a [u8];
}

impl<'a> Arg<'a> for &'a [u8] {
    fn bytes(self) -> &'a [u8] {
        self
    }
}

/// Strict decimal `i64`, as Redis parses integers (`string2ll`): an optional
/// `-`, then `0` alone or digits without a leading zero; no `+`, no spaces,
/// no `-0`. Client arguments and hold counts read from a lock hash both go
/// through this one rule.
pub fn strict_i64(raw: &[u8]) -> Option<i64> {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    let canonical = match digits {
        [b'0'] => digits.len() == raw.len(), // "0", but not "-0"
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    // All ASCII digits now: accumulate towards the negative side, which also
    // holds i64::MIN, with checked arithmetic for overflow.
    let mut value: i64 = 0;
    for &d in digits {
        value = value.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if digits.len() == raw.len() {
        value.checked_neg()
    } else {
        Some(value)
    }
}

/// A lease length in milliseconds: a positive integer.
pub fn lease_ms(raw: &[u8]) -> Result<i64, String> {
    match strict_i64(raw) {
        Some(ms) if ms > 0 => Ok(ms),
        _ => Err("ERR lease-ms must be a positive integer (milliseconds)".to_string()),
    }
}

/// The absolute deadline (unix ms) of a lease starting `now`.
///
/// Refuses leases above `max_lease_ms` (0 = no limit) and ones whose deadline
/// would not fit an absolute millisecond timestamp.
pub fn deadline(now_ms: i64, lease_ms: i64, max_lease_ms: i64) -> Result<i64, String> {
    if max_lease_ms > 0 && lease_ms > max_lease_ms {
        return Err(format!(
            "ERR lease-ms {lease_ms} exceeds lock.max-lease-ms ({max_lease_ms})"
        ));
    }
    now_ms
        .checked_add(lease_ms)
        .ok_or_else(|| "ERR lease-ms is too large: the deadline would overflow".to_string())
}

/// The lease a release resets a still-held lock to: `lease_ms`, but never
/// more than `max_lease_ms` (0 = no limit).
///
/// Redisson sends its lease with every unlock, whatever the server's cap, so a
/// release clamps instead of refusing: refusing would leave the lock held until
/// its lease ran out. Taking and renewing keep refusing leases above the cap.
pub fn release_lease_ms(lease_ms: i64, max_lease_ms: i64) -> i64 {
    if max_lease_ms > 0 {
        lease_ms.min(max_lease_ms)
    } else {
        lease_ms
    }
}

/// An owner id: opaque bytes, not empty.
pub fn owner(raw: &[u8]) -> Result<&[u8], String> {
    if raw.is_empty() {
        Err("ERR owner must not be empty".to_string())
    } else {
        Ok(raw)
    }
}

/// How long `WAIT` may block, in ms; 0 means forever.
pub fn wait_timeout_ms(raw: &[u8]) -> Result<i64, String> {
    match strict_i64(raw) {
        Some(ms) if ms >= 0 => Ok(ms),
        _ => Err(
            "ERR WAIT timeout-ms must be a non-negative integer (milliseconds, 0 = forever)"
                .to_string(),
        ),
    }
}

/// Checks that a `WAIT` of `timeout_ms` (0 = forever) ends at a representable
/// unix-ms time: Redis adds it to the current time, as for `BLPOP`.
pub fn wait_fits(now_ms: i64, timeout_ms: i64) -> Result<(), String> {
    match now_ms.checked_add(timeout_ms) {
        Some(_) => Ok(()),
        None => Err("ERR WAIT timeout-ms is out of range".to_string()),
    }
}

/// `SYNC numreplicas timeout-ms`: how many replicas must acknowledge a
/// grant (0 = none), and within how long (a positive number of ms, at most
/// a day, when `numreplicas` > 0).
pub fn sync_spec(replicas: &[u8], timeout: &[u8]) -> Result<(i64, i64), String> {
    const MAX_SYNC_MS: i64 = 86_400_000;
    let replicas = match strict_i64(replicas) {
        Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => n,
        _ => {
            return Err("ERR SYNC numreplicas must be a non-negative integer".to_string());
        }
    };
    match strict_i64(timeout) {
        Some(ms) if ms > 0 && ms <= MAX_SYNC_MS => Ok((replicas, ms)),
        Some(0) if replicas == 0 => Ok((0, 0)),
        _ => Err(format!(
            "ERR SYNC timeout-ms must be a positive integer of at most {MAX_SYNC_MS} (milliseconds)"
        )),
    }
}

/// The standard arity error, worded as Redis words it.
pub fn arity_error(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

/// Helpers for the command parsers' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    /// `args` as the byte arguments a parser sees.
    pub fn argv(args: &[&'static str]) -> Vec<&'static [u8]> {
        args.iter().map(|a| a.as_bytes()).collect()
    }

    /// Each argument list must be refused with an `ERR ...` that contains
    /// its needle (the argument's name, or the command's for arity).
    pub fn assert_refused<T: std::fmt::Debug>(
        parse: impl Fn(&[&'static [u8]]) -> Result<T, String>,
        cases: &[(&[&'static str], &str)],
    ) {
        for (args, needle) in cases {
            let err = parse(&argv(args)).expect_err(&format!("{args:?} is refused"));
            assert!(
                err.starts_with("ERR ") && err.contains(needle),
                "{args:?}: {err}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_positive_strict_integers() {
        assert_eq!(lease_ms(b"30000"), Ok(30000));
        assert_eq!(lease_ms(b"1"), Ok(1));
        assert_eq!(lease_ms(b"9223372036854775807"), Ok(i64::MAX));
        for bad in [
            &b"0"[..],
            b"-1",
            b"",
            b"+5",
            b" 5",
            b"5 ",
            b"05",
            b"1.5",
            b"1e3",
            b"abc",
            b"9223372036854775808",
            b"-",
            b"\xff\xfe",
        ] {
            let err = lease_ms(bad).unwrap_err();
            assert!(
                err.starts_with("ERR ") && err.contains("lease-ms"),
                "{bad:?} -> {err}"
            );
        }
    }

    #[test]
    fn deadlines_are_absolute_and_bounded() {
        assert_eq!(deadline(1_000, 500, 0), Ok(1_500));
        assert_eq!(deadline(1_000, 500, 500), Ok(1_500));
        let err = deadline(1_000, 501, 500).unwrap_err();
        assert!(
            err.contains("lock.max-lease-ms") && err.contains("lease-ms"),
            "{err}"
        );
        let err = deadline(1_700_000_000_000, i64::MAX, 0).unwrap_err();
        assert!(
            err.contains("lease-ms") && err.contains("overflow"),
            "{err}"
        );
    }

    #[test]
    fn releases_clamp_their_lease_to_the_cap() {
        assert_eq!(release_lease_ms(60_000, 10_000), 10_000);
        assert_eq!(release_lease_ms(10_000, 10_000), 10_000);
        assert_eq!(release_lease_ms(5_000, 10_000), 5_000);
        assert_eq!(release_lease_ms(60_000, 0), 60_000, "0 = no limit");
        let capped = release_lease_ms(i64::MAX, 10_000);
        assert_eq!(
            deadline(1_700_000_000_000, capped, 10_000),
            Ok(1_700_000_010_000)
        );
    }

    #[test]
    fn owners_are_opaque_but_not_empty() {
        assert_eq!(owner(b"8e0c:1"), Ok(&b"8e0c:1"[..]));
        assert_eq!(owner(b"\0\xff binary"), Ok(&b"\0\xff binary"[..]));
        assert!(owner(b"").unwrap_err().contains("owner"));
    }

    #[test]
    fn wait_timeouts_allow_zero_for_forever() {
        assert_eq!(wait_timeout_ms(b"0"), Ok(0));
        assert_eq!(wait_timeout_ms(b"250"), Ok(250));
        for bad in [&b"-1"[..], b"x", b"", b"1.5"] {
            assert!(wait_timeout_ms(bad)
                .unwrap_err()
                .contains("WAIT timeout-ms"));
        }
    }

    #[test]
    fn wait_timeouts_must_end_at_a_representable_time() {
        assert_eq!(wait_fits(1_700_000_000_000, 0), Ok(()));
        assert_eq!(wait_fits(1_700_000_000_000, 86_400_000), Ok(()));
        let err = wait_fits(1_700_000_000_000, i64::MAX).unwrap_err();
        assert!(err.contains("WAIT timeout-ms"), "{err}");
    }

    #[test]
    fn arity_errors_name_the_command() {
        assert_eq!(
            arity_error("lock.renew"),
            "ERR wrong number of arguments for 'lock.renew' command"
        );
    }
}
