//! Module configuration: `lock.*` settings.
//!
//! They are Redis 7 module configs, so each can be given on the `loadmodule`
//! line (`loadmodule libredis_lock.so channel-prefix myapp`), in redis.conf
//! after the loadmodule line (`lock.channel-prefix myapp`), with
//! `MODULE LOADEX ... CONFIG lock.channel-prefix myapp`, and changed at run time
//! with `CONFIG SET lock.channel-prefix myapp`. A bad value is refused with an
//! error and the old value stays.
//!
//! | config               | default                  | meaning |
//! |----------------------|--------------------------|---------|
//! | `lock.channel-prefix`| `redisson_lock__channel` | unlock messages go to `<prefix>:{<key>}` |
//! | `lock.publish`       | `auto`                   | `auto` (sharded in cluster mode, classic otherwise), `classic`, `sharded`, `off` |
//! | `lock.max-lease-ms`  | `0`                      | longest lease acquire/renew may ask for (a release's is clamped to it); 0 = no limit |
//! | `lock.notify`        | `yes`                    | emit `lock.*` keyspace notifications |

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex};

use redis_module::configuration::ConfigurationContext;
use redis_module::{enum_configuration, ConfigurationValue, RedisError, RedisString};

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

pub fn max_lease_ms() -> i64 {
    MAX_LEASE_MS.load(Ordering::Relaxed)
}

pub fn notify() -> bool {
    NOTIFY.load(Ordering::Relaxed)
}
