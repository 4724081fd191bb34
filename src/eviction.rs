//! Eviction: the way Redis itself can drop a held lock behind everyone's back.
//!
//! A lock is a key with a TTL (its lease). Under `maxmemory` pressure every
//! policy but `noeviction` may evict it: `allkeys-*` any key, `volatile-*`
//! any key with a TTL, which every lock has (`volatile-ttl` even picks the
//! shortest leases first). The lock is then free and a second owner can take
//! it while the first still believes it holds it. The module cannot prevent
//! that, so it says so: a warning in the log at load and whenever
//! `maxmemory-policy` is changed to an evicting policy, and the policy in
//! `INFO lock` (`lock_maxmemory_policy`, `lock_evicts_locks`).
//!
//! The policy is read with `RedisModule_GetServerInfo` (the `maxmemory_policy`
//! field of `INFO memory`), not `CONFIG GET` through `RedisModule_Call`: it does
//! not go through the command table, so it also works where `CONFIG` is
//! renamed or disabled, as production setups often do. It is read at load and
//! after every `CONFIG SET` that names `maxmemory-policy` (the config-change
//! server event, Redis 7.0+), the only way it changes at run time.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use redis_module::Context;

use crate::ffi::{api, raw, Ctx};

/// The policy that never evicts.
const NOEVICTION: &str = "noeviction";

/// The policy last read; `None` until read, or if the server did not say.
static POLICY: Mutex<Option<String>> = Mutex::new(None);

/// Whether `policy` lets Redis evict lock keys: every policy but `noeviction`.
pub fn evicts(policy: &str) -> bool {
    !policy.eq_ignore_ascii_case(NOEVICTION)
}

/// The warning logged for an evicting `policy`.
pub fn warning(policy: &str) -> String {
    format!(
        "lock module: maxmemory-policy {policy} can evict held locks: a lock is a \
         key with a TTL, and once maxmemory is reached Redis may delete it, silently \
         letting a second owner take it. Use maxmemory-policy noeviction on servers \
         that hold locks."
    )
}

/// `(policy, evicts)` for `INFO lock`; `("unknown", false)` if it could not
/// be read. Never blocks: INFO also runs for crash reports.
pub fn current() -> (String, bool) {
    match POLICY.try_lock().ok().and_then(|policy| policy.clone()) {
        Some(policy) => {
            let evicting = evicts(&policy);
            (policy, evicting)
        }
        None => ("unknown".to_string(), false),
    }
}

/// `maxmemory-policy` as the server reports it.
fn read_policy(ctx: *mut raw::RedisModuleCtx) -> Option<String> {
    // SAFETY: present since Redis 6.0; looked up as optional all the same.
    let (get, field, free) = unsafe {
        (
            raw::RedisModule_GetServerInfo?,
            raw::RedisModule_ServerInfoGetFieldC?,
            raw::RedisModule_FreeServerInfo?,
        )
    };
    let info = unsafe { get(ctx, c"memory".as_ptr()) };
    if info.is_null() {
        return None;
    }
    let value = unsafe { field(info, c"maxmemory_policy".as_ptr()) };
    let policy = (!value.is_null()).then(|| {
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned()
    });
    unsafe { free(ctx, info) };
    policy.filter(|policy| !policy.is_empty())
}

/// Reads the policy again and stores it; warns when it newly evicts, and
/// notes when it stopped evicting.
fn refresh(ctx: *mut raw::RedisModuleCtx) {
    let Some(policy) = read_policy(ctx) else {
        return;
    };
    let previous = {
        let mut stored = POLICY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        stored.replace(policy.clone())
    };
    let was_evicting = previous.as_deref().is_some_and(evicts);
    if evicts(&policy) && previous.as_deref() != Some(policy.as_str()) {
        Ctx(ctx).log_warning(&warning(&policy));
    } else if was_evicting && !evicts(&policy) {
        log_notice(
            ctx,
            "lock module: maxmemory-policy is noeviction again: held locks are no longer evicted",
        );
    }
}

fn log_notice(ctx: *mut raw::RedisModuleCtx, message: &str) {
    let Ok(text) = CString::new(message) else {
        return;
    };
    unsafe { api!(RedisModule_Log)(ctx, c"notice".as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
}

/// Whether a config-change event names `maxmemory-policy`.
fn names_policy(data: *mut c_void) -> bool {
    if data.is_null() {
        return false;
    }
    // SAFETY: Redis passes a RedisModuleConfigChangeV1 for this event.
    let change = unsafe { &*(data as *const raw::RedisModuleConfigChangeV1) };
    if change.config_names.is_null() {
        return false;
    }
    let names: &[*const c_char] =
        unsafe { std::slice::from_raw_parts(change.config_names, change.num_changes as usize) };
    names.iter().any(|&name| {
        !name.is_null()
            && unsafe { CStr::from_ptr(name) }
                .to_bytes()
                .eq_ignore_ascii_case(b"maxmemory-policy")
    })
}

/// `CONFIG SET` changed configs: re-read the policy if it was one of them.
extern "C" fn on_config_change(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    sub: u64,
    data: *mut c_void,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if sub == raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE && names_policy(data) {
            refresh(ctx);
        }
    }));
    if outcome.is_err() {
        Ctx(ctx).log_warning("lock module: panic in a config change event; ignored");
    }
}

/// Reads the policy (warning if it evicts) and follows its changes.
///
/// Not being able to follow changes does not stop the module from loading:
/// it only costs the warning for a later change, which the log says.
pub fn watch(ctx: &Context) {
    let ctx = ctx.ctx;
    refresh(ctx);
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_CONFIG,
        dataver: 1,
    };
    let subscribed = match unsafe { raw::RedisModule_SubscribeToServerEvent } {
        Some(subscribe) => {
            (unsafe { subscribe(ctx, event, Some(on_config_change)) })
                == raw::REDISMODULE_OK as std::os::raw::c_int
        }
        None => false,
    };
    if !subscribed {
        Ctx(ctx).log_warning(
            "lock module: cannot follow config changes; a later switch to an evicting \
             maxmemory-policy will not be logged",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_but_noeviction_evicts_locks() {
        for policy in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            assert!(evicts(policy), "{policy}");
            let warning = warning(policy);
            assert!(
                warning.contains(policy) && warning.contains("noeviction"),
                "{warning}"
            );
        }
        assert!(!evicts("noeviction"));
    }

    #[test]
    fn an_unread_policy_is_unknown() {
        assert_eq!(current(), ("unknown".to_string(), false));
    }
}
