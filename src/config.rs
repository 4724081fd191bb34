//! Module configuration: `lock.*` settings.
//!
//! They are Redis 7 module configs, so each can be given on the `loadmodule`
//! line (`loadmodule libredis_lock.so channel-prefix myapp`), in redis.conf
//! after the loadmodule line (`lock.channel-prefix myapp`), with
//! `MODULE LOADEX ... CONFIG lock.channel-prefix myapp`, and changed at run time
//! with `CONFIG SET lock.channel-prefix myapp`. A bad value is refused with an
//! error and the old value stays.
//!
//! Module arguments (the loadmodule line, `MODULE LOAD path args...`,
//! `MODULE LOADEX ... ARGS ...`) are name/value pairs, checked here rather than
//! by the `redis-module` crate: its `module_args_as_configuration` looks each
//! config up by its exact bare name and ignores every other argument, so
//! `lock.publish classic` or a misspelt name loaded silently with the default.
//! [`parse_module_args`] takes a name bare or `lock.`-prefixed, in any case,
//! reads values as `CONFIG SET` does, and refuses anything else: the module
//! then fails to load, and its log line names the argument. The values become
//! the configs' defaults ([`register`]), so a `lock.*` config line or `LOADEX
//! ... CONFIG` still overrides them, as it overrides any default, and
//! `CONFIG REWRITE` keeps working across restarts.
//!
//! | config               | default                  | meaning |
//! |----------------------|--------------------------|---------|
//! | `lock.channel-prefix`| `redisson_lock__channel` | unlock messages go to `<prefix>:{<key>}` |
//! | `lock.publish`       | `auto`                   | `auto` (sharded in cluster mode, classic otherwise), `classic`, `sharded`, `off` |
//! | `lock.max-lease-ms`  | `0`                      | longest lease acquire/renew may ask for (a release's is clamped to it); 0 = no limit |
//! | `lock.notify`        | `yes`                    | emit `lock.*` keyspace notifications |
//! | `lock.token-retention-ms` | `86400000` (1 day)  | a token counter expires this long after its lock's lease (and its token's time); 0 = never (see `fencing.rs`) |
//! | `lock.node-id`       | `-1`                     | this node's number in the low 4 bits of its fencing tokens, `0..15`; -1 = derived from the replication ID (see `fencing.rs`) |
//! | `lock.sync-replicas` | `0`                      | grants are answered only once this many replicas acknowledged them (see `replica_sync.rs`); 0 = off |
//! | `lock.sync-timeout-ms` | `1000`                 | how long a grant waits for `lock.sync-replicas` before it is undone |

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex};

use redis_module::configuration::{
    register_bool_configuration, register_enum_configuration, register_i64_configuration,
    register_string_configuration, ConfigurationContext, ConfigurationFlags,
};
use redis_module::{enum_configuration, ConfigurationValue, Context, RedisError, RedisString};

use crate::args::strict_i64;
use crate::replica_sync::SyncSpec;

pub const DEFAULT_CHANNEL_PREFIX: &str = "redisson_lock__channel";

/// `lock.channel-prefix`: any non-empty bytes.
pub struct ChannelPrefix(Mutex<Vec<u8>>);

impl ChannelPrefix {
    /// Runs `read` on the current prefix.
    pub fn with<T>(&self, read: impl FnOnce(&[u8]) -> T) -> T {
        read(
            &self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }
}

impl ConfigurationValue<RedisString> for ChannelPrefix {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        self.with(|prefix| RedisString::create_from_slice(std::ptr::null_mut(), prefix))
    }

    fn set(&self, _ctx: &ConfigurationContext, value: RedisString) -> Result<(), RedisError> {
        let prefix = value.as_slice();
        if prefix.is_empty() {
            return Err(RedisError::Str("lock.channel-prefix must not be empty"));
        }
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = prefix.to_vec();
        Ok(())
    }
}

pub static CHANNEL_PREFIX: LazyLock<ChannelPrefix> =
    LazyLock::new(|| ChannelPrefix(Mutex::new(DEFAULT_CHANNEL_PREFIX.as_bytes().to_vec())));

enum_configuration! {
    /// `lock.publish`: where unlock messages go.
    #[allow(non_camel_case_types)]
    #[derive(Debug, PartialEq, Eq, Copy)]
    pub enum PublishMode {
        auto = 0,
        classic = 1,
        sharded = 2,
        off = 3,
    }
}

/// `lock.publish`, kept as its integer value so commands read it without a lock.
pub struct PublishSetting(AtomicI32);

impl PublishSetting {
    pub fn get(&self) -> PublishMode {
        PublishMode::try_from(self.0.load(Ordering::Relaxed)).unwrap_or(PublishMode::auto)
    }
}

impl ConfigurationValue<PublishMode> for PublishSetting {
    fn get(&self, _ctx: &ConfigurationContext) -> PublishMode {
        PublishSetting::get(self)
    }

    fn set(&self, _ctx: &ConfigurationContext, mode: PublishMode) -> Result<(), RedisError> {
        self.0.store(mode as i32, Ordering::Relaxed);
        Ok(())
    }
}

pub static PUBLISH: PublishSetting = PublishSetting(AtomicI32::new(PublishMode::auto as i32));

/// `lock.max-lease-ms`: 0 = no limit.
pub static MAX_LEASE_MS: AtomicI64 = AtomicI64::new(0);

/// `lock.notify`: keyspace notifications on/off.
pub static NOTIFY: AtomicBool = AtomicBool::new(true);

/// `lock.token-retention-ms`: how long a fencing-token counter outlives its
/// lock's lease; 0 = forever.
pub static TOKEN_RETENTION_MS: AtomicI64 = AtomicI64::new(DEFAULT_TOKEN_RETENTION_MS);

pub const DEFAULT_TOKEN_RETENTION_MS: i64 = 86_400_000;

/// `lock.node-id`: -1 = derived from the replication ID.
pub static NODE_ID: AtomicI64 = AtomicI64::new(-1);

/// `lock.sync-replicas`: 0 = grants do not wait for replicas.
pub static SYNC_REPLICAS: AtomicI64 = AtomicI64::new(0);

/// `lock.sync-timeout-ms`.
pub static SYNC_TIMEOUT_MS: AtomicI64 = AtomicI64::new(DEFAULT_SYNC_TIMEOUT_MS);

pub const DEFAULT_SYNC_TIMEOUT_MS: i64 = 1000;

pub fn node_id() -> i64 {
    NODE_ID.load(Ordering::Relaxed)
}

/// The replica acknowledgement every grant waits for when its command asks
/// for none; `None` when off.
pub fn sync_default() -> Option<SyncSpec> {
    let replicas = SYNC_REPLICAS.load(Ordering::Relaxed);
    (replicas > 0).then(|| SyncSpec {
        replicas,
        timeout_ms: SYNC_TIMEOUT_MS.load(Ordering::Relaxed),
    })
}

pub fn token_retention_ms() -> i64 {
    TOKEN_RETENTION_MS.load(Ordering::Relaxed)
}

pub fn max_lease_ms() -> i64 {
    MAX_LEASE_MS.load(Ordering::Relaxed)
}

pub fn notify() -> bool {
    NOTIFY.load(Ordering::Relaxed)
}

/// The configs' defaults, or the values module arguments gave them.
#[derive(Debug, PartialEq)]
pub struct Defaults {
    pub channel_prefix: String,
    pub publish: PublishMode,
    pub max_lease_ms: i64,
    pub notify: bool,
    pub token_retention_ms: i64,
    pub node_id: i64,
    pub sync_replicas: i64,
    pub sync_timeout_ms: i64,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            channel_prefix: DEFAULT_CHANNEL_PREFIX.to_string(),
            publish: PublishMode::auto,
            max_lease_ms: 0,
            notify: true,
            token_retention_ms: DEFAULT_TOKEN_RETENTION_MS,
            node_id: -1,
            sync_replicas: 0,
            sync_timeout_ms: DEFAULT_SYNC_TIMEOUT_MS,
        }
    }
}

/// Every config as a module argument takes it: its name (Redis shows it as
/// `lock.<name>`) and what its value must be. Refusals list them all.
const ARGUMENTS: [(&str, &str); 8] = [
    ("channel-prefix", "non-empty text"),
    ("publish", "auto|classic|sharded|off"),
    ("max-lease-ms", "milliseconds, 0 = no limit"),
    ("notify", "yes|no"),
    ("token-retention-ms", "milliseconds, 0 = never expire"),
    ("node-id", "0..15, or -1 = from the replication ID"),
    ("sync-replicas", "a number of replicas, 0 = off"),
    ("sync-timeout-ms", "milliseconds, at least 1"),
];

/// An argument as the log shows it: quoted, control characters escaped.
fn shown(raw: &[u8]) -> String {
    format!("'{}'", String::from_utf8_lossy(raw).escape_debug())
}

/// The log line of a refusal: what is wrong, then every valid argument.
fn refusal(problem: String) -> String {
    let valid: Vec<String> = ARGUMENTS
        .iter()
        .map(|(name, value)| format!("{name} <{value}>"))
        .collect();
    format!(
        "lock module: refusing {problem}. Module arguments are name/value pairs, \
         the name bare or prefixed with 'lock.', in any case: {}",
        valid.join(", ")
    )
}

/// Which config an argument names: `publish`, `lock.publish`, `LOCK.Publish`...
fn config_index(name: &[u8]) -> Option<usize> {
    let bare = match name.get(..5) {
        Some(prefix) if prefix.eq_ignore_ascii_case(b"lock.") => &name[5..],
        _ => name,
    };
    ARGUMENTS
        .iter()
        .position(|(known, _)| known.as_bytes().eq_ignore_ascii_case(bare))
}

/// One value, read as `CONFIG SET` reads it: yes/no and the `publish` names
/// in any case, a non-negative strict integer.
fn set_value(defaults: &mut Defaults, index: usize, value: &[u8]) -> Result<(), ()> {
    let in_range = |low: i64, high: i64| {
        strict_i64(value)
            .filter(|v| (low..=high).contains(v))
            .ok_or(())
    };
    match ARGUMENTS[index].0 {
        "channel-prefix" => {
            // Registered as a C string: no NUL, and text for the crate's API.
            let text = std::str::from_utf8(value).map_err(|_| ())?;
            if text.is_empty() || text.contains('\0') {
                return Err(());
            }
            defaults.channel_prefix = text.to_string();
        }
        "publish" => {
            defaults.publish = [
                PublishMode::auto,
                PublishMode::classic,
                PublishMode::sharded,
                PublishMode::off,
            ]
            .into_iter()
            .find(|mode| format!("{mode:?}").as_bytes().eq_ignore_ascii_case(value))
            .ok_or(())?;
        }
        "max-lease-ms" => defaults.max_lease_ms = in_range(0, i64::MAX)?,
        "token-retention-ms" => defaults.token_retention_ms = in_range(0, i64::MAX)?,
        "node-id" => defaults.node_id = in_range(-1, crate::fencing::NODES - 1)?,
        "sync-replicas" => defaults.sync_replicas = in_range(0, i64::from(i32::MAX))?,
        "sync-timeout-ms" => defaults.sync_timeout_ms = in_range(1, i64::from(i32::MAX))?,
        _ => {
            defaults.notify = if value.eq_ignore_ascii_case(b"yes") {
                true
            } else if value.eq_ignore_ascii_case(b"no") {
                false
            } else {
                return Err(());
            };
        }
    }
    Ok(())
}

/// Checks the module arguments; the error is the whole log line.
pub fn parse_module_args(args: &[&[u8]]) -> Result<Defaults, String> {
    let mut defaults = Defaults::default();
    let mut given = [false; ARGUMENTS.len()];
    for pair in args.chunks(2) {
        let name = pair[0];
        let Some(index) = config_index(name) else {
            return Err(refusal(format!(
                "module argument {}: not a lock config",
                shown(name)
            )));
        };
        let [_, value] = pair else {
            return Err(refusal(format!(
                "module argument {}: it has no value",
                shown(name)
            )));
        };
        if given[index] {
            return Err(refusal(format!(
                "module argument {}: that config is given twice",
                shown(name)
            )));
        }
        given[index] = true;
        if set_value(&mut defaults, index, value).is_err() {
            let (_, valid) = ARGUMENTS[index];
            return Err(refusal(format!(
                "module argument {} {}: the value must be {valid}",
                String::from_utf8_lossy(name).escape_debug(),
                shown(value)
            )));
        }
    }
    Ok(defaults)
}

/// Registers the configs with `defaults`, then has Redis apply the `lock.*`
/// config-file lines and `MODULE LOADEX ... CONFIG` values over them.
pub fn register(ctx: &Context, defaults: &Defaults) -> Result<(), String> {
    register_string_configuration(
        ctx,
        "channel-prefix",
        &*CHANNEL_PREFIX,
        &defaults.channel_prefix,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_enum_configuration(
        ctx,
        "publish",
        &PUBLISH,
        defaults.publish,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_i64_configuration(
        ctx,
        "max-lease-ms",
        &MAX_LEASE_MS,
        defaults.max_lease_ms,
        0,
        i64::MAX,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_i64_configuration(
        ctx,
        "token-retention-ms",
        &TOKEN_RETENTION_MS,
        defaults.token_retention_ms,
        0,
        i64::MAX,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_i64_configuration(
        ctx,
        "node-id",
        &NODE_ID,
        defaults.node_id,
        -1,
        crate::fencing::NODES - 1,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_i64_configuration(
        ctx,
        "sync-replicas",
        &SYNC_REPLICAS,
        defaults.sync_replicas,
        0,
        i64::from(i32::MAX),
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_i64_configuration(
        ctx,
        "sync-timeout-ms",
        &SYNC_TIMEOUT_MS,
        defaults.sync_timeout_ms,
        1,
        i64::from(i32::MAX),
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_bool_configuration(
        ctx,
        "notify",
        &NOTIFY,
        defaults.notify,
        ConfigurationFlags::DEFAULT,
        None,
    );
    let ctx = crate::ffi::Ctx::of(ctx).ok_or("lock module: no module context at load")?;
    crate::ffi::server::load_configs(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Defaults, String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_module_args(&args)
    }

    #[test]
    fn no_arguments_keep_the_defaults() {
        assert_eq!(parse(&[]), Ok(Defaults::default()));
    }

    #[test]
    fn names_are_bare_or_prefixed_in_any_case() {
        let got = parse(&[
            "lock.publish",
            "classic",
            "NOTIFY",
            "No",
            "Lock.Max-Lease-Ms",
            "5000",
            "channel-prefix",
            "app",
            "token-retention-ms",
            "0",
            "node-id",
            "7",
            "sync-replicas",
            "1",
            "lock.sync-timeout-ms",
            "250",
        ])
        .expect("valid arguments");
        assert_eq!(
            got,
            Defaults {
                channel_prefix: "app".to_string(),
                publish: PublishMode::classic,
                max_lease_ms: 5000,
                notify: false,
                token_retention_ms: 0,
                node_id: 7,
                sync_replicas: 1,
                sync_timeout_ms: 250,
            }
        );
        assert_eq!(
            parse(&["publish", "SHARDED"]).unwrap().publish,
            PublishMode::sharded
        );
        assert!(parse(&["notify", "YES"]).unwrap().notify);
        assert_eq!(parse(&["max-lease-ms", "0"]).unwrap().max_lease_ms, 0);
    }

    /// Every refusal names the argument and lists every valid one.
    fn refused(args: &[&str], needles: &[&str]) {
        let err = parse(args).expect_err(&format!("{args:?} must be refused"));
        assert!(
            err.starts_with("lock module: refusing module argument"),
            "{err}"
        );
        for needle in needles.iter().chain(&[
            "channel-prefix",
            "publish",
            "max-lease-ms",
            "notify",
            "token-retention-ms",
        ]) {
            assert!(err.contains(needle), "{args:?}: {needle:?} in {err}");
        }
    }

    #[test]
    fn unknown_names_are_refused() {
        refused(&["bogus", "1"], &["'bogus'", "not a lock config"]);
        refused(&["publish", "classic", "bogus", "1"], &["'bogus'"]);
        refused(&["lock.", "1"], &["'lock.'"]);
        refused(&["lock.bogus", "1"], &["'lock.bogus'"]);
        refused(&["lockpublish", "classic"], &["'lockpublish'"]);
        refused(&["redis.publish", "classic"], &["'redis.publish'"]);
        refused(&["\n\u{1b}x", "1"], &["'\\n\\u{1b}x'"]);
    }

    #[test]
    fn a_name_without_a_value_is_refused() {
        refused(&["publish"], &["'publish'", "no value"]);
        refused(&["publish", "classic", "notify"], &["'notify'", "no value"]);
    }

    #[test]
    fn a_config_given_twice_is_refused() {
        refused(
            &["publish", "classic", "LOCK.PUBLISH", "off"],
            &["'LOCK.PUBLISH'", "twice"],
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_argument() {
        refused(
            &["publish", "bogus"],
            &["publish 'bogus'", "auto|classic|sharded|off"],
        );
        refused(&["publish", ""], &["publish ''"]);
        refused(&["max-lease-ms", "-5"], &["max-lease-ms '-5'"]);
        refused(&["token-retention-ms", "-1"], &["token-retention-ms '-1'"]);
        for bad in ["1.5", "abc", "+5", "05", "", "9223372036854775808"] {
            refused(&["lock.max-lease-ms", bad], &["lock.max-lease-ms"]);
        }
        refused(&["node-id", "16"], &["node-id '16'", "0..15"]);
        refused(&["node-id", "-2"], &["node-id '-2'"]);
        refused(&["sync-replicas", "-1"], &["sync-replicas '-1'"]);
        refused(&["sync-timeout-ms", "0"], &["sync-timeout-ms '0'"]);
        refused(&["notify", "maybe"], &["notify 'maybe'", "yes|no"]);
        refused(&["notify", "1"], &["notify '1'"]);
        refused(&["channel-prefix", ""], &["channel-prefix ''"]);
        refused(&["channel-prefix", "a\0b"], &["channel-prefix 'a\\0b'"]);
        let args: [&[u8]; 2] = [b"channel-prefix", b"\xff"];
        assert!(parse_module_args(&args).is_err(), "not text");
    }
}
