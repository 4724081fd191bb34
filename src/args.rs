//! Parsing and validating client arguments, with no FFI.
//!
//! Every error names the argument it is about, and parsing happens before any
//! key is touched, so bad input changes nothing.

use crate::errors::{self, Refusal};

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
    let negative = digits.len() != raw.len();
    match digits {
        [b'0'] if !negative => return Some(0), // "0", but not "-0"
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    // Up to 18 digits cannot overflow (10^18 - 1 < i64::MAX): one pass that
    // checks each digit as it adds it. Every lease, timeout and hold count
    // takes this path.
    if digits.len() <= 18 {
        let mut value: i64 = 0;
        for &d in digits {
            let digit = d.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            value = value * 10 + i64::from(digit);
        }
        return Some(if negative { -value } else { value });
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // All ASCII digits now: accumulate towards the negative side, which also
    // holds i64::MIN, with checked arithmetic for overflow.
    let mut value: i64 = 0;
    for &d in digits {
        value = value.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// The longest lease any command accepts: 100 years of 365.25 days, in ms.
///
/// Longer ones are mistakes (a deadline of 285,000 years was accepted
/// before), and the bound keeps every deadline, now + lease, far inside what
/// a unix-ms time holds. `errors::LEASE_TOO_LONG` spells this number.
pub const MAX_LEASE_MS: i64 = 36_525 * 86_400_000;

/// A lease length in milliseconds: a positive integer of at most
/// [`MAX_LEASE_MS`]. Every lease too long, whether it fits an `i64` or not,
/// gets the same refusal.
pub fn lease_ms(raw: &[u8]) -> Result<i64, Refusal> {
    match strict_i64(raw) {
        Some(ms) if ms > MAX_LEASE_MS => Err(errors::LEASE_TOO_LONG),
        Some(ms) if ms > 0 => Ok(ms),
        // Decimal digits without a leading zero that overflow an i64.
        None if matches!(raw, [b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit)) => {
            Err(errors::LEASE_TOO_LONG)
        }
        _ => Err(errors::LEASE_NOT_POSITIVE),
    }
}

/// The absolute deadline (unix ms) of a lease starting `now`.
///
/// Refuses leases above `max_lease_ms` (0 = no limit). A lease from
/// [`lease_ms`] always fits (at most 100 years); one that would not fit an
/// absolute millisecond timestamp is refused as too long.
pub fn deadline(now_ms: i64, lease_ms: i64, max_lease_ms: i64) -> Result<i64, Refusal> {
    if max_lease_ms > 0 && lease_ms > max_lease_ms {
        return Err(errors::lease_above_cap(lease_ms, max_lease_ms));
    }
    now_ms.checked_add(lease_ms).ok_or(errors::LEASE_TOO_LONG)
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
pub fn owner(raw: &[u8]) -> Result<&[u8], Refusal> {
    if raw.is_empty() {
        Err(errors::OWNER_EMPTY)
    } else {
        Ok(raw)
    }
}

/// How long `WAIT` may block, in ms; 0 means forever.
pub fn wait_timeout_ms(raw: &[u8]) -> Result<i64, Refusal> {
    match strict_i64(raw) {
        Some(ms) if ms >= 0 => Ok(ms),
        _ => Err(errors::WAIT_NOT_NON_NEGATIVE),
    }
}

/// `KEEP grace-ms`: how long a waiter's place is kept, in ms, at most
/// `max_ms`; 0 keeps none.
pub fn keep_ms(raw: &[u8], max_ms: i64) -> Result<i64, Refusal> {
    match strict_i64(raw) {
        Some(ms) if (0..=max_ms).contains(&ms) => Ok(ms),
        _ => Err(errors::keep_invalid(max_ms)),
    }
}

/// `WAITER waiter-id`: an ownerless waiter's identity, opaque bytes, not
/// empty.
pub fn waiter_id(raw: &[u8]) -> Result<&[u8], Refusal> {
    if raw.is_empty() {
        Err(errors::WAITER_EMPTY)
    } else {
        Ok(raw)
    }
}

/// Checks that a `WAIT` of `timeout_ms` (0 = forever) ends at a representable
/// unix-ms time: Redis adds it to the current time, as for `BLPOP`.
pub fn wait_fits(now_ms: i64, timeout_ms: i64) -> Result<(), Refusal> {
    match now_ms.checked_add(timeout_ms) {
        Some(_) => Ok(()),
        None => Err(errors::WAIT_OUT_OF_RANGE),
    }
}

/// `SYNC numreplicas timeout-ms`: how many replicas must acknowledge a
/// grant (0 = none), and within how long (a positive number of ms, at most
/// a day, when `numreplicas` > 0).
pub fn sync_spec(replicas: &[u8], timeout: &[u8]) -> Result<(i64, i64), Refusal> {
    const MAX_SYNC_MS: i64 = 86_400_000;
    let replicas = match strict_i64(replicas) {
        Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => n,
        _ => return Err(errors::SYNC_REPLICAS_INVALID),
    };
    match strict_i64(timeout) {
        Some(ms) if ms > 0 && ms <= MAX_SYNC_MS => Ok((replicas, ms)),
        Some(0) if replicas == 0 => Ok((0, 0)),
        _ => Err(errors::sync_timeout_invalid(MAX_SYNC_MS)),
    }
}

/// A command whose one argument is its key (`LOCK.FORCE`, `LOCK.INFO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyOnly<A> {
    pub key: A,
}

impl<A: Copy> KeyOnly<A> {
    /// `command key`; arity errors name `command`.
    pub fn parse(command: &str, argv: &[A]) -> Result<Self, Refusal> {
        match *argv {
            [_, key] => Ok(KeyOnly { key }),
            _ => Err(arity_error(command)),
        }
    }
}

/// The standard arity error, worded as Redis words it.
pub fn arity_error(command: &str) -> Refusal {
    errors::arity(command)
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
        parse: impl Fn(&[&'static [u8]]) -> Result<T, crate::errors::Refusal>,
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

    /// The rule spelled out: canonical form (what `i64` prints back), in
    /// range.
    fn strict_by_definition(raw: &[u8]) -> Option<i64> {
        let text = std::str::from_utf8(raw).ok()?;
        let value: i64 = text.parse().ok()?;
        (value.to_string() == text).then_some(value)
    }

    #[test]
    fn strict_integers_are_canonical_decimals_in_range() {
        // Cases between bars (the empty one included).
        let mut cases: Vec<Vec<u8>> = concat!(
            "0|-0|00|01|-01|1|-1|+1| 1|1 ||-|--1|1a|a1|12:3|1/2|",
            "999999999999999999|1000000000000000000|-999999999999999999|",
            "-1000000000000000000|9223372036854775807|9223372036854775808|",
            "-9223372036854775808|-9223372036854775809|18446744073709551616|",
            "99999999999999999999",
        )
        .split('|')
        .map(|case| case.as_bytes().to_vec())
        .collect();
        // Every byte in every place of short numbers, and at the 18th and
        // 19th digit, where the fast path ends.
        for byte in 0..=255u8 {
            for template in ["123", "-45", "123456789012345678", "1234567890123456789"] {
                for at in 0..template.len() {
                    let mut case = template.as_bytes().to_vec();
                    case[at] = byte;
                    cases.push(case);
                }
            }
        }
        for case in cases {
            assert_eq!(
                strict_i64(&case),
                strict_by_definition(&case),
                "{:?}",
                String::from_utf8_lossy(&case)
            );
        }
    }

    #[test]
    fn leases_are_positive_strict_integers() {
        assert_eq!(lease_ms(b"30000"), Ok(30000));
        assert_eq!(lease_ms(b"1"), Ok(1));
        assert_eq!(lease_ms(b"3155760000000"), Ok(MAX_LEASE_MS), "100 years");
        // Too long, however many digits: one refusal, which spells the bound.
        assert!(errors::LEASE_TOO_LONG.contains(&format!(" {MAX_LEASE_MS} ")));
        for too_long in [
            &b"3155760000001"[..],
            b"9000000000000000",
            b"9223372036854775807",
            b"9223372036854775808",
            b"99999999999999999999",
            b"123456789012345678901234567890",
        ] {
            assert_eq!(
                lease_ms(too_long),
                Err(errors::LEASE_TOO_LONG),
                "{too_long:?}"
            );
        }
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
            b"-9223372036854775809",
            b"012345678901234567890",
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
        assert_eq!(
            deadline(1_700_000_000_000, i64::MAX, 0),
            Err(errors::LEASE_TOO_LONG)
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
    fn graces_are_bounded_and_waiter_ids_not_empty() {
        assert_eq!(keep_ms(b"0", 100), Ok(0));
        assert_eq!(keep_ms(b"100", 100), Ok(100));
        for bad in [
            &b"101"[..],
            b"-1",
            b"x",
            b"",
            b"1.5",
            b"99999999999999999999",
        ] {
            let err = keep_ms(bad, 100).unwrap_err();
            assert!(
                err.contains("KEEP grace-ms") && err.contains("100"),
                "{err}"
            );
        }
        assert_eq!(waiter_id(b"w-1"), Ok(&b"w-1"[..]));
        assert!(waiter_id(b"").unwrap_err().contains("WAITER waiter-id"));
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
            arity_error("lock.renew").text(),
            "ERR wrong number of arguments for 'lock.renew' command"
        );
    }
}
