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
//! The configs are the rows of [`CONFIGS`]: name, what a valid value is,
//! kind, default and bounds; `docs/operations.md` ("Configuration") says
//! what each one does, and a test checks that it lists every row.

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

/// Every `PublishMode`, for parsing.
const PUBLISH_MODES: [PublishMode; 4] = [
    PublishMode::auto,
    PublishMode::classic,
    PublishMode::sharded,
    PublishMode::off,
];

static MAX_LEASE_MS: AtomicI64 = AtomicI64::new(0);
static NOTIFY: AtomicBool = AtomicBool::new(true);
static TOKEN_RETENTION_MS: AtomicI64 = AtomicI64::new(0);
static NODE_ID: AtomicI64 = AtomicI64::new(-1);
static SYNC_REPLICAS: AtomicI64 = AtomicI64::new(0);
static SYNC_TIMEOUT_MS: AtomicI64 = AtomicI64::new(0);
static KEEP_PLACE_MS: AtomicI64 = AtomicI64::new(0);
static KEEP_PLACES_MAX: AtomicI64 = AtomicI64::new(0);

/// The longest grace a place is kept (`KEEP`, `lock.keep-place-ms`): a day.
pub const MAX_KEEP_MS: i64 = 86_400_000;

/// What kind of value a config holds, where it lives, and its default.
pub enum Kind {
    /// Non-empty text without NUL bytes.
    Text {
        value: &'static LazyLock<ChannelPrefix>,
        default: &'static str,
    },
    Publish {
        value: &'static PublishSetting,
        default: PublishMode,
    },
    Bool {
        value: &'static AtomicBool,
        default: bool,
    },
    /// An integer in `min..=max`.
    Int {
        value: &'static AtomicI64,
        default: i64,
        min: i64,
        max: i64,
    },
}

/// One config: its name (Redis shows it as `lock.<name>`), what a valid
/// value is (for refusals), and its kind. Adding a config is adding a row to
/// [`CONFIGS`] (and reading it through a getter below).
pub struct Config {
    pub name: &'static str,
    pub valid: &'static str,
    pub kind: Kind,
}

/// Every config, in the order refusals list them.
pub static CONFIGS: [Config; 10] = [
    Config {
        name: "channel-prefix",
        valid: "non-empty text",
        kind: Kind::Text {
            value: &CHANNEL_PREFIX,
            default: DEFAULT_CHANNEL_PREFIX,
        },
    },
    Config {
        name: "publish",
        valid: "auto|classic|sharded|off",
        kind: Kind::Publish {
            value: &PUBLISH,
            default: PublishMode::auto,
        },
    },
    Config {
        name: "max-lease-ms",
        valid: "milliseconds, 0 = no limit",
        kind: Kind::Int {
            value: &MAX_LEASE_MS,
            default: 0,
            min: 0,
            max: i64::MAX,
        },
    },
    Config {
        name: "notify",
        valid: "yes|no",
        kind: Kind::Bool {
            value: &NOTIFY,
            default: true,
        },
    },
    Config {
        name: "token-retention-ms",
        valid: "milliseconds, 0 = never expire",
        kind: Kind::Int {
            value: &TOKEN_RETENTION_MS,
            default: 86_400_000,
            min: 0,
            max: i64::MAX,
        },
    },
    Config {
        name: "node-id",
        valid: "0..15, or -1 = from the replication ID",
        kind: Kind::Int {
            value: &NODE_ID,
            default: -1,
            min: -1,
            max: crate::fencing::NODES - 1,
        },
    },
    Config {
        name: "sync-replicas",
        valid: "a number of replicas, 0 = off",
        kind: Kind::Int {
            value: &SYNC_REPLICAS,
            default: 0,
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Config {
        name: "sync-timeout-ms",
        valid: "milliseconds, at least 1",
        kind: Kind::Int {
            value: &SYNC_TIMEOUT_MS,
            default: 1000,
            min: 1,
            max: i32::MAX as i64,
        },
    },
    Config {
        name: "keep-place-ms",
        valid: "milliseconds, at most 86400000, 0 = keep no place",
        kind: Kind::Int {
            value: &KEEP_PLACE_MS,
            default: 5000,
            min: 0,
            max: MAX_KEEP_MS,
        },
    },
    Config {
        name: "keep-places-max",
        valid: "a number of places, 0 = keep none",
        kind: Kind::Int {
            value: &KEEP_PLACES_MAX,
            default: 10_000,
            min: 0,
            max: i32::MAX as i64,
        },
    },
];

pub fn max_lease_ms() -> i64 {
    MAX_LEASE_MS.load(Ordering::Relaxed)
}

pub fn notify() -> bool {
    NOTIFY.load(Ordering::Relaxed)
}

/// How long a fencing-token counter outlives its lock's lease; 0 = forever.
pub fn token_retention_ms() -> i64 {
    TOKEN_RETENTION_MS.load(Ordering::Relaxed)
}

/// -1 = derived from the replication ID.
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

/// How long a waiter's place is kept when its command says no `KEEP`
/// (`docs/waiting.md`); 0: not kept.
pub fn keep_place_ms() -> i64 {
    KEEP_PLACE_MS.load(Ordering::Relaxed)
}

/// How much kept places and remembered grants may weigh, all together.
pub fn keep_places_max() -> usize {
    usize::try_from(KEEP_PLACES_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// A config value as a module argument gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Publish(PublishMode),
    Bool(bool),
    Int(i64),
}

impl Kind {
    /// Reads `raw` as `CONFIG SET` reads it: yes/no and the `publish` names
    /// in any case, a strict integer within the bounds.
    fn parse(&self, raw: &[u8]) -> Option<Value> {
        match *self {
            Kind::Text { .. } => std::str::from_utf8(raw)
                .ok()
                // Registered as a C string: no NUL, and text for the crate's API.
                .filter(|text| !text.is_empty() && !text.contains('\0'))
                .map(|text| Value::Text(text.to_string())),
            Kind::Publish { .. } => PUBLISH_MODES
                .into_iter()
                .find(|mode| format!("{mode:?}").as_bytes().eq_ignore_ascii_case(raw))
                .map(Value::Publish),
            Kind::Bool { .. } => {
                if raw.eq_ignore_ascii_case(b"yes") {
                    Some(Value::Bool(true))
                } else if raw.eq_ignore_ascii_case(b"no") {
                    Some(Value::Bool(false))
                } else {
                    None
                }
            }
            Kind::Int { min, max, .. } => strict_i64(raw)
                .filter(|v| (min..=max).contains(v))
                .map(Value::Int),
        }
    }

    fn default_value(&self) -> Value {
        match *self {
            Kind::Text { default, .. } => Value::Text(default.to_string()),
            Kind::Publish { default, .. } => Value::Publish(default),
            Kind::Bool { default, .. } => Value::Bool(default),
            Kind::Int { default, .. } => Value::Int(default),
        }
    }
}

/// The configs' defaults, one per row of [`CONFIGS`], or the values module
/// arguments gave them.
#[derive(Debug, PartialEq)]
pub struct Defaults(Vec<Value>);

impl Default for Defaults {
    fn default() -> Self {
        Defaults(CONFIGS.iter().map(|c| c.kind.default_value()).collect())
    }
}

impl Defaults {
    /// The value of the config `name`.
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&Value> {
        let index = CONFIGS.iter().position(|c| c.name == name)?;
        self.0.get(index)
    }
}

/// An argument as the log shows it: quoted, control characters escaped.
fn shown(raw: &[u8]) -> String {
    format!("'{}'", String::from_utf8_lossy(raw).escape_debug())
}

/// The log line of a refusal: what is wrong, then every valid argument.
fn refusal(problem: String) -> String {
    let valid: Vec<String> = CONFIGS
        .iter()
        .map(|c| format!("{} <{}>", c.name, c.valid))
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
    CONFIGS
        .iter()
        .position(|c| c.name.as_bytes().eq_ignore_ascii_case(bare))
}

/// Checks the module arguments; the error is the whole log line.
pub fn parse_module_args(args: &[&[u8]]) -> Result<Defaults, String> {
    let mut defaults = Defaults::default();
    let mut given = [false; CONFIGS.len()];
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
        let config = &CONFIGS[index];
        let Some(parsed) = config.kind.parse(value) else {
            return Err(refusal(format!(
                "module argument {} {}: the value must be {}",
                String::from_utf8_lossy(name).escape_debug(),
                shown(value),
                config.valid
            )));
        };
        defaults.0[index] = parsed;
    }
    Ok(defaults)
}

/// Registers every config with its default from `defaults`, then has Redis
/// apply the `lock.*` config-file lines and `MODULE LOADEX ... CONFIG`
/// values over them.
pub fn register(ctx: &Context, defaults: &Defaults) -> Result<(), String> {
    for (config, default) in CONFIGS.iter().zip(&defaults.0) {
        let flags = ConfigurationFlags::DEFAULT;
        match (&config.kind, default) {
            (Kind::Text { value, .. }, Value::Text(text)) => {
                register_string_configuration(ctx, config.name, &***value, text, flags, None);
            }
            (Kind::Publish { value, .. }, Value::Publish(mode)) => {
                register_enum_configuration(ctx, config.name, *value, *mode, flags, None);
            }
            (Kind::Bool { value, .. }, Value::Bool(on)) => {
                register_bool_configuration(ctx, config.name, *value, *on, flags, None);
            }
            (
                Kind::Int {
                    value, min, max, ..
                },
                Value::Int(number),
            ) => {
                register_i64_configuration(
                    ctx,
                    config.name,
                    *value,
                    *number,
                    *min,
                    *max,
                    flags,
                    None,
                );
            }
            _ => {
                return Err(format!(
                    "lock module: config {} has a value of another kind",
                    config.name
                ))
            }
        }
    }
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
            "keep-place-ms",
            "0",
            "lock.keep-places-max",
            "50",
        ])
        .expect("valid arguments");
        assert_eq!(
            got,
            Defaults(vec![
                Value::Text("app".to_string()),
                Value::Publish(PublishMode::classic),
                Value::Int(5000),
                Value::Bool(false),
                Value::Int(0),
                Value::Int(7),
                Value::Int(1),
                Value::Int(250),
                Value::Int(0),
                Value::Int(50),
            ])
        );
        let one = |args: &[&str], name| parse(args).unwrap().get(name).cloned();
        assert_eq!(
            one(&["publish", "SHARDED"], "publish"),
            Some(Value::Publish(PublishMode::sharded))
        );
        assert_eq!(one(&["notify", "YES"], "notify"), Some(Value::Bool(true)));
        assert_eq!(
            one(&["max-lease-ms", "0"], "max-lease-ms"),
            Some(Value::Int(0))
        );
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
    fn every_default_is_a_valid_value_of_its_config() {
        for config in &CONFIGS {
            let shown = match config.kind.default_value() {
                Value::Text(text) => text,
                Value::Publish(mode) => format!("{mode:?}"),
                Value::Bool(on) => if on { "yes" } else { "no" }.to_string(),
                Value::Int(n) => n.to_string(),
            };
            assert_eq!(
                config.kind.parse(shown.as_bytes()),
                Some(config.kind.default_value()),
                "{}",
                config.name
            );
        }
    }

    #[test]
    fn the_operations_page_lists_every_config() {
        let page = include_str!("../docs/operations.md");
        for config in &CONFIGS {
            let row = format!("| `lock.{}` |", config.name);
            assert!(page.contains(&row), "docs/operations.md has no row {row}");
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
        refused(&["keep-place-ms", "-1"], &["keep-place-ms '-1'"]);
        refused(
            &["keep-place-ms", "86400001"],
            &["keep-place-ms '86400001'"],
        );
        refused(&["keep-places-max", "-1"], &["keep-places-max '-1'"]);
        refused(&["notify", "maybe"], &["notify 'maybe'", "yes|no"]);
        refused(&["notify", "1"], &["notify '1'"]);
        refused(&["channel-prefix", ""], &["channel-prefix ''"]);
        refused(&["channel-prefix", "a\0b"], &["channel-prefix 'a\\0b'"]);
        let args: [&[u8]; 2] = [b"channel-prefix", b"\xff"];
        assert!(parse_module_args(&args).is_err(), "not text");
    }
}
