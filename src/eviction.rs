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

use std::sync::Mutex;

use crate::ffi::{server, Ctx};

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

/// Reads the policy again and stores it; warns when it newly evicts, and
/// notes when it stopped evicting.
fn refresh(ctx: Ctx) {
    let Some(policy) =
        server::info_field(ctx, c"memory", c"maxmemory_policy").filter(|policy| !policy.is_empty())
    else {
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
        ctx.log_warning(&warning(&policy));
    } else if was_evicting && !evicts(&policy) {
        ctx.log_notice(
            "lock module: maxmemory-policy is noeviction again: held locks are no longer evicted",
        );
    }
}

/// Follows `CONFIG SET maxmemory-policy` (called for every config change).
pub fn config_changed(ctx: Ctx, names: &[&[u8]]) {
    if names
        .iter()
        .any(|name| name.eq_ignore_ascii_case(b"maxmemory-policy"))
    {
        refresh(ctx);
    }
}

/// Reads the policy at load, warning if it evicts.
pub fn watch(ctx: Ctx) {
    refresh(ctx);
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
