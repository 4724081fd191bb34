//! Which servers the module loads on: the version check at load, pure.
//!
//! The module needs the Redis 7.0 module API (module configs, command info
//! and key specs, the config-change event). On an older server those
//! functions are missing from the API table, and the first call through one
//! of them would crash the server (Redis 6.2 did, before this check). So the
//! module reads the server's version first, before it registers anything,
//! and refuses an older server with one log line naming the minimum; on a
//! good one it logs its own version and commit and the server's.
//!
//! What each server offers to tell its version (`ffi::server::probe`):
//! * `RedisModule_GetServerVersion` (Redis 6.0.9+, Valkey): `0x00MMmmpp`.
//!   Valkey answers its own version there (9.1.2 on Valkey 9.1.2).
//! * `INFO server` through `RedisModule_GetServerInfo` (Redis 6.0+):
//!   `redis_version`; on Valkey that is its Redis compatibility version
//!   (7.2.4, the Redis it forked from), next to `server_name:valkey` and
//!   `valkey_version`.
//! * Neither (Redis before 6.0): the server is older than 7.0 for sure.
//!
//! The number compared is the API's, else `redis_version`. Every Valkey
//! passes either way (it began as Redis 7.2.4, and its own numbering starts
//! at 7.2), so the check is really about Redis; the log line names Valkey
//! by its own version and shows the compatibility version beside it.

use std::fmt;

/// A server version: major, minor, patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// The oldest server the module supports: Redis 7.0.
pub const OLDEST: Version = Version {
    major: 7,
    minor: 0,
    patch: 0,
};

impl Version {
    /// From `RedisModule_GetServerVersion`'s `0x00MMmmpp`.
    pub fn from_number(number: i32) -> Version {
        let number = number as u32;
        Version {
            major: (number >> 16) & 0xff,
            minor: (number >> 8) & 0xff,
            patch: number & 0xff,
        }
    }

    /// From `INFO`'s `7.0.15` (a missing patch or minor is 0; anything after
    /// the numbers, such as `-rc1`, is ignored). `None` if it does not start
    /// with a number.
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.').map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        let major = parts.next().flatten()?;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Version {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What the server said about itself at load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// `RedisModule_GetServerVersion`, where the server has it.
    pub api_version: Option<i32>,
    /// `INFO server`'s `redis_version`, where the server has `GetServerInfo`.
    pub redis_version: Option<String>,
    /// `INFO server`'s `server_name` (`valkey`; Redis has no such field).
    pub server_name: Option<String>,
    /// `INFO server`'s `valkey_version`.
    pub valkey_version: Option<String>,
}

/// The first server measured not to lose a wake at a timeout
/// ([`loses_wakes_at_timeouts`]).
const KEEPS_WAKES_AT_TIMEOUTS: Version = Version {
    major: 8,
    minor: 0,
    patch: 0,
};

/// The server's version: the API's number, else `redis_version`.
fn version_of(probe: &Probe) -> Option<Version> {
    probe
        .api_version
        .map(Version::from_number)
        .or_else(|| probe.redis_version.as_deref().and_then(Version::parse))
}

/// Whether the server may lose the reply of a waiter the module wakes in the
/// event-loop turn in which the waiter's own timeout fires
/// (`ffi/blocking.rs` says how, and how the module avoids it). Measured on
/// Redis 7.0.15 (it does), Redis 8.2.3 and Valkey 9.1.2 (they do not);
/// Redis 7.2 and 7.4 were not measured, so everything before 8.0 is treated
/// as 7.0 (the cure only delays a few replies).
pub fn loses_wakes_at_timeouts(probe: &Probe) -> bool {
    version_of(probe).is_none_or(|version| version < KEEPS_WAKES_AT_TIMEOUTS)
}

/// The load decision: `Ok` with the line to log, or `Err` with the reason to
/// refuse (one line, naming the minimum).
pub fn admit(probe: &Probe, module_version: &str, commit: &str) -> Result<String, String> {
    let Some(version) = version_of(probe) else {
        return Err(format!(
            "lock module: not loaded: this server does not say its version (it has neither \
             RedisModule_GetServerVersion nor RedisModule_GetServerInfo), so it is older than \
             Redis 6; the oldest server this module supports is Redis {}",
            short(OLDEST)
        ));
    };
    let server = describe(probe, version);
    if version < OLDEST {
        return Err(format!(
            "lock module: not loaded: {server} is older than Redis {}, the oldest server this \
             module supports",
            short(OLDEST)
        ));
    }
    Ok(format!(
        "lock module: version {module_version} (commit {commit}) loaded on {server}"
    ))
}

/// `Redis 7.0.15`, or `Valkey 9.1.2 (redis_version 7.2.4)`.
fn describe(probe: &Probe, version: Version) -> String {
    let valkey = probe
        .server_name
        .as_deref()
        .is_some_and(|name| name.eq_ignore_ascii_case("valkey"));
    if !valkey {
        return format!("Redis {version}");
    }
    let own = probe
        .valkey_version
        .clone()
        .unwrap_or_else(|| version.to_string());
    match probe.redis_version.as_deref() {
        Some(compatible) => format!("Valkey {own} (redis_version {compatible})"),
        None => format!("Valkey {own}"),
    }
}

/// `7.0`: the minimum as people say it.
fn short(version: Version) -> String {
    format!("{}.{}", version.major, version.minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis(number: i32, info: &str) -> Probe {
        Probe {
            api_version: Some(number),
            redis_version: Some(info.to_string()),
            ..Probe::default()
        }
    }

    #[test]
    fn versions_decode_from_the_api_number_and_from_info() {
        assert_eq!(
            Version::from_number(0x0007_000f),
            Version::parse("7.0.15").unwrap()
        );
        assert_eq!(Version::from_number(0x0008_0203).to_string(), "8.2.3");
        assert_eq!(Version::parse("9.1.0-rc1").unwrap().to_string(), "9.1.0");
        assert_eq!(Version::parse("7").unwrap().to_string(), "7.0.0");
        assert_eq!(Version::parse("unstable"), None);
        assert_eq!(Version::parse(""), None);
    }

    #[test]
    fn redis_7_0_and_later_load_with_a_line_naming_module_and_server() {
        let line = admit(&redis(0x0007_000f, "7.0.15"), "0.2.0", "abc123").unwrap();
        assert_eq!(
            line,
            "lock module: version 0.2.0 (commit abc123) loaded on Redis 7.0.15"
        );
        assert!(admit(&redis(0x0007_0000, "7.0.0"), "0.2.0", "x").is_ok());
        assert!(admit(&redis(0x0008_0203, "8.2.3"), "0.2.0", "x").is_ok());
    }

    #[test]
    fn servers_before_8_0_are_taken_to_lose_wakes_at_timeouts() {
        assert!(loses_wakes_at_timeouts(&redis(0x0007_000f, "7.0.15")));
        assert!(loses_wakes_at_timeouts(&redis(0x0007_0409, "7.4.9")));
        assert!(!loses_wakes_at_timeouts(&redis(0x0008_0000, "8.0.0")));
        assert!(!loses_wakes_at_timeouts(&redis(0x0008_0203, "8.2.3")));
        let valkey = Probe {
            api_version: Some(0x0009_0102),
            redis_version: Some("7.2.4".into()),
            server_name: Some("valkey".into()),
            valkey_version: Some("9.1.2".into()),
        };
        assert!(!loses_wakes_at_timeouts(&valkey));
        assert!(loses_wakes_at_timeouts(&Probe::default()));
    }

    #[test]
    fn an_older_server_is_refused_with_the_minimum_named() {
        let refusal = admit(&redis(0x0006_020e, "6.2.14"), "0.2.0", "x").unwrap_err();
        assert_eq!(
            refusal,
            "lock module: not loaded: Redis 6.2.14 is older than Redis 7.0, the oldest server \
             this module supports"
        );
        assert!(admit(&redis(0x0006_ffff, "6.255.255"), "0.2.0", "x").is_err());
    }

    #[test]
    fn info_decides_where_the_api_number_is_missing() {
        // Redis 6.0.0 to 6.0.8: GetServerInfo but no GetServerVersion.
        let old = Probe {
            redis_version: Some("6.0.5".to_string()),
            ..Probe::default()
        };
        assert!(admit(&old, "0.2.0", "x")
            .unwrap_err()
            .contains("Redis 6.0.5 is older"));
        let good = Probe {
            redis_version: Some("7.2.4".to_string()),
            ..Probe::default()
        };
        assert!(admit(&good, "0.2.0", "x").is_ok());
    }

    #[test]
    fn a_server_that_cannot_say_its_version_is_refused() {
        let refusal = admit(&Probe::default(), "0.2.0", "x").unwrap_err();
        assert!(refusal.contains("older than Redis 6"), "{refusal}");
        assert!(refusal.contains("Redis 7.0"), "{refusal}");
        let garbled = Probe {
            redis_version: Some("unstable".to_string()),
            ..Probe::default()
        };
        assert!(admit(&garbled, "0.2.0", "x").is_err());
    }

    /// Valkey 9.1.2 answers 9.1.2 through the API and 7.2.4 in
    /// `redis_version`: the log line names it by its own version and shows
    /// the compatibility version beside it.
    #[test]
    fn valkey_is_named_by_its_own_version_with_its_redis_version_beside() {
        let valkey = Probe {
            api_version: Some(0x0009_0102),
            redis_version: Some("7.2.4".to_string()),
            server_name: Some("valkey".to_string()),
            valkey_version: Some("9.1.2".to_string()),
        };
        assert_eq!(
            admit(&valkey, "0.2.0", "abc").unwrap(),
            "lock module: version 0.2.0 (commit abc) loaded on Valkey 9.1.2 (redis_version 7.2.4)"
        );
        // Without the API number, redis_version (7.2.4) decides: loaded.
        let older_valkey = Probe {
            api_version: None,
            ..valkey
        };
        assert!(admit(&older_valkey, "0.2.0", "abc").is_ok());
    }
}
