//! The replicas, as the module needs to know them: whether Redis would
//! refuse a write for want of good replicas (`min-replicas-to-write`), and how
//! far each replica has acknowledged the replication stream (for grants that
//! wait for replicas, `replica_sync.rs`).
//!
//! Both come from `INFO replication` (`RedisModule_GetServerInfo`, no
//! command call): `min_slaves_good_slaves` is the very count Redis compares
//! with `min-replicas-to-write` before it runs a write command, and each
//! `slave<i>:...,state=online,offset=<n>,...` line the offset that replica
//! last acknowledged. The two settings are read with `CONFIG GET` at load and
//! again whenever `CONFIG SET` changes them (the config-change server event).

use std::cell::Cell;

use crate::args::strict_i64;
use crate::ffi::server::{self, ServerInfo};
use crate::ffi::Ctx;
use crate::replica_sync::Acks;

/// `min-replicas-to-write` and `min-replicas-max-lag`: Redis refuses writes
/// while fewer than `to_write` replicas lag at most `max_lag` seconds, when
/// both are set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinReplicas {
    pub to_write: i64,
    pub max_lag: i64,
}

impl MinReplicas {
    /// Whether Redis refuses writes with `good` good replicas.
    pub fn refuses_writes(self, good: Option<i64>) -> bool {
        if self.to_write <= 0 || self.max_lag <= 0 {
            return false;
        }
        // Redis shows the count whenever both are set; without it, trust
        // the settings rather than write past a refusal.
        good.is_none_or(|good| good < self.to_write)
    }
}

thread_local! {
    static SETTINGS: Cell<MinReplicas> = const { Cell::new(MinReplicas { to_write: 0, max_lag: 0 }) };
}

/// Reads the two settings again (at load, and after `CONFIG SET`). A
/// setting that cannot be read (`CONFIG` renamed) counts as unset, and the
/// log says so.
pub fn refresh_settings(ctx: Ctx) {
    let read =
        |name: &std::ffi::CStr| server::config_get(ctx, name).and_then(|value| strict_i64(&value));
    let (to_write, max_lag) = (
        read(c"min-replicas-to-write"),
        read(c"min-replicas-max-lag"),
    );
    if to_write.is_none() || max_lag.is_none() {
        ctx.log_warning(
            "lock module: cannot read min-replicas-to-write / min-replicas-max-lag with CONFIG \
             GET; hand-offs the module makes on its own will not wait for good replicas",
        );
    }
    SETTINGS.with(|settings| {
        settings.set(MinReplicas {
            to_write: to_write.unwrap_or(0),
            max_lag: max_lag.unwrap_or(0),
        })
    });
}

/// Whether a changed config is one of the two.
pub fn is_setting(name: &[u8]) -> bool {
    [
        &b"min-replicas-to-write"[..],
        b"min-replicas-max-lag",
        b"min-slaves-to-write",
        b"min-slaves-max-lag",
    ]
    .iter()
    .any(|known| known.eq_ignore_ascii_case(name))
}

/// Whether Redis would refuse a write command right now with `NOREPLICAS`.
/// Free when `min-replicas-to-write` is not set; otherwise one read of
/// `INFO replication`.
pub fn too_few_good(ctx: Ctx) -> bool {
    let settings = SETTINGS.with(Cell::get);
    if !settings.refuses_writes(Some(0)) {
        return false;
    }
    let good = server::info_field(ctx, c"replication", c"min_slaves_good_slaves")
        .and_then(|good| strict_i64(good.as_bytes()));
    settings.refuses_writes(good)
}

/// Reads [`Acks`] from `INFO replication`.
pub fn acks(ctx: Ctx) -> Option<Acks> {
    let info = ServerInfo::read(ctx, c"replication")?;
    let number = |name: &std::ffi::CStr| {
        info.field(name)
            .and_then(|value| strict_i64(value.as_bytes()))
    };
    let offset = number(c"master_repl_offset")?;
    let connected = number(c"connected_slaves").unwrap_or(0).max(0);
    let replicas = (0..connected)
        .filter_map(|i| {
            let name = std::ffi::CString::new(format!("slave{i}")).ok()?;
            online_offset(&info.field(&name)?)
        })
        .collect();
    Some(Acks { offset, replicas })
}

/// Asks every replica to acknowledge its offset now (`REPLCONF GETACK`).
pub fn ask_for_acks(ctx: Ctx) {
    server::request_replica_acks(ctx);
}

/// The acknowledged offset in one replica's line of `INFO replication`
/// (`ip=...,port=...,state=online,offset=123,lag=0`), if it is online.
pub fn online_offset(line: &str) -> Option<i64> {
    let mut online = false;
    let mut offset = None;
    for part in line.split(',') {
        match part.split_once('=') {
            Some(("state", state)) => online = state == "online",
            Some(("offset", value)) => offset = strict_i64(value.as_bytes()),
            _ => {}
        }
    }
    offset.filter(|_| online)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_refused_only_with_both_settings_and_too_few_good_replicas() {
        let min = |to_write, max_lag| MinReplicas { to_write, max_lag };
        assert!(!min(0, 10).refuses_writes(Some(0)), "unset");
        assert!(
            !min(1, 0).refuses_writes(Some(0)),
            "no lag bound: Redis ignores it"
        );
        assert!(min(2, 10).refuses_writes(Some(1)));
        assert!(!min(2, 10).refuses_writes(Some(2)));
        assert!(min(1, 10).refuses_writes(None), "count unknown: hold back");
    }

    #[test]
    fn replica_lines_give_the_offset_of_online_replicas() {
        assert_eq!(
            online_offset("ip=127.0.0.1,port=6380,state=online,offset=4242,lag=0"),
            Some(4242)
        );
        assert_eq!(
            online_offset("ip=127.0.0.1,port=6380,state=wait_bgsave,offset=0,lag=0"),
            None
        );
        assert_eq!(online_offset("garbage"), None);
    }

    #[test]
    fn both_spellings_of_the_settings_are_followed() {
        assert!(is_setting(b"min-replicas-to-write"));
        assert!(is_setting(b"MIN-SLAVES-MAX-LAG"));
        assert!(!is_setting(b"maxmemory"));
    }
}
