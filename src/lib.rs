//! Redisson-compatible distributed locks, native in Redis.
//!
//! Where to look (`ls src/`):
//! * `lock.rs`: the state machine: every acquire / renew / release / force /
//!   hand-off decision, pure and unit-tested;
//! * `commands/`: one file per `LOCK.*` command: its reply contract, its typed
//!   argument parser, its spec (flags, ACL categories, key spec, docs), and
//!   what it does;
//! * `lock_key.rs`: reading a lock hash and applying + replicating writes;
//!   `restore_payload.rs`: a hash as `RESTORE` takes it (`DUMP` format), pure;
//! * `rwlock.rs`, `semaphore.rs`, `latch.rs`: the same for the read-write
//!   lock, the semaphores and the count-down latch; `rwlock_key.rs`,
//!   `semaphore_key.rs`, `value_key.rs`: their keys;
//! * `fencing.rs`: fencing tokens (why they never go backwards) and the
//!   fence check, pure; `counter_key.rs`: their integer keys, read, written
//!   and replicated;
//! * `wait_queue.rs`: who waits for which lock (pure FIFO queues, one timer
//!   each); `kept_places.rs`: what a queue keeps for waiters that left
//!   (places, remembered grants); `grant_policy.rs`: who a pass grants, per
//!   kind of object (pure);
//! * `decision.rs`: what every kind's decision says besides its reply and
//!   writes (what it counts, whether it serves the queue, when it
//!   publishes), pure;
//! * `waiting/`: the one wing every kind waits through: the queues and
//!   their timers, the one carry-out of every decision, one room per kind
//!   (what its waiters get when it frees), blocked clients, grants that
//!   wait for replicas, keyspace and server events;
//! * `replies.rs`: reply shapes a command and its waiters share;
//! * `replica_sync.rs`: grants answered only once replicas acknowledged
//!   them (`SYNC`), the decisions, pure;
//! * `replicas.rs`: replica health (`min-replicas-to-write`) and replica
//!   acknowledgements, read from `INFO replication`;
//! * `events.rs`: unlock messages and keyspace notifications;
//! * `config.rs`: the `lock.*` configs and module arguments; `stats.rs`:
//!   `INFO lock`; `eviction.rs`: warning about evicting `maxmemory-policy`s;
//!   `server_version.rs`: which servers it loads on (checked first at load);
//! * `args.rs`: argument validation; `errors.rs`: every error reply's text;
//! * `ffi/`: every call into Redis, behind wrappers with lifetimes: the only
//!   place with raw pointers.

// The modules are private, so the compiler reports any item the module does
// not use. Unit-test builds leave out the Redis entry point (`module` below),
// which uses everything, so dead code is only checked in the real build.
#![cfg_attr(test, allow(dead_code))]

mod args;
mod commands;
mod config;
mod counter_key;
mod decision;
mod errors;
mod events;
mod eviction;
mod fencing;
mod ffi;
mod grant_policy;
mod histogram;
mod hot_keys;
mod kept_places;
mod latch;
mod listing;
mod lock;
mod lock_key;
mod replica_sync;
mod replicas;
mod replies;
mod resets;
mod restore_payload;
mod rwlock;
mod rwlock_key;
mod scan_cursors;
mod semaphore;
mod semaphore_key;
mod server_version;
mod stats;
mod stats_reset;
mod timings;
mod value_key;
mod wait_queue;
mod waiting;

/// The module's version as `MODULE LIST` shows it, from Cargo's:
/// `major * 10000 + minor * 100 + patch` (0.2.0 -> 200), the encoding Redis
/// modules use.
pub const MODULE_VERSION: i32 = {
    const fn number(digits: &str) -> i32 {
        let bytes = digits.as_bytes();
        let mut value = 0;
        let mut i = 0;
        while i < bytes.len() {
            value = value * 10 + (bytes[i] - b'0') as i32;
            i += 1;
        }
        value
    }
    number(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + number(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + number(env!("CARGO_PKG_VERSION_PATCH"))
};

/// The git commit the module was built from (`build.rs`: `unknown` for a
/// build outside a git checkout), for the line it logs at load.
pub const GIT_COMMIT: &str = env!("LOCK_GIT_COMMIT");

#[cfg(not(test))]
mod module {
    use redis_module::{Context, RedisString, Status};

    use crate::ffi::events::{self, ServerEvent, ServerEventKind, ServerEventListener};
    use crate::ffi::server::{self, InfoProvider, InfoWriter, ModuleOptions};
    use crate::ffi::Ctx;
    use crate::{
        commands, config, eviction, ffi, hot_keys, replicas, resets, server_version, stats,
        timings, waiting,
    };

    crate::ffi::load::entry_points!(version: crate::MODULE_VERSION, admit: admit, init: init);

    /// Runs first in `RedisModule_OnLoad`, before anything needs the Redis 7
    /// module API: refuses a server older than the oldest supported (one
    /// warning naming the minimum), else logs the module's version and
    /// commit and the server's (`server_version.rs`).
    fn admit(context: &Context) -> Status {
        let Some(ctx) = Ctx::of(context) else {
            return Status::Err;
        };
        let probe = server::probe_version(ctx);
        match server_version::admit(&probe, env!("CARGO_PKG_VERSION"), crate::GIT_COMMIT) {
            Ok(line) => {
                ctx.log_notice(&line);
                crate::ffi::blocking::defer_wakes_near_timeouts(
                    server_version::loses_wakes_at_timeouts(&probe),
                );
                Status::Ok
            }
            Err(refusal) => {
                ctx.log_warning(&refusal);
                Status::Err
            }
        }
    }

    /// Runs last in `RedisModule_OnLoad` (`ffi/load.rs`, which initialises
    /// the module API first): the configs, the commands, the event
    /// subscriptions.
    ///
    /// Module arguments are checked first: when they are refused, nothing may
    /// have been subscribed yet, because Redis undoes a failed load's commands
    /// and configs but not its event subscriptions, which would then call
    /// into an unloaded library.
    pub(crate) fn init(context: &Context, args: &[RedisString]) -> Status {
        let Some(ctx) = Ctx::of(context) else {
            return Status::Err;
        };
        let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
        let loaded = config::parse_module_args(&args)
            .and_then(|defaults| config::register(context, &defaults))
            .and_then(|()| commands::register(ctx))
            .and_then(|()| waiting::subscribe(ctx));
        if let Err(message) = loaded {
            ctx.log_warning(&message);
            return Status::Err;
        }
        eviction::watch(ctx);
        replicas::refresh_settings(ctx);
        // Not being able to follow config changes does not stop the module
        // from loading: the log says what it costs.
        if events::subscribe_server_event::<ConfigWatcher>(ctx, ServerEventKind::ConfigChange)
            .is_err()
        {
            ctx.log_warning(
                "lock module: cannot follow config changes; a later maxmemory-policy or \
                 min-replicas-* change will not be seen",
            );
        }
        // * Keys are signalled as modified only when a lock is really written
        //   (LockKey::apply), not whenever one is opened for writing.
        // * The module keeps nothing about the dataset that a replica's
        //   asynchronous load (`repl-diskless-load swapdb`) could leave stale:
        //   a replica has no waiters and hands nothing on (see waiting/).
        //   Without this flag Redis falls back to a disk-based full sync,
        //   answers -LOADING instead of serving the old data meanwhile, and
        //   logs a line per socket read.
        server::set_module_options(
            ctx,
            ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED.and(ModuleOptions::HANDLE_REPL_ASYNC_LOAD),
        );
        // The module's INFO callback (`INFO lock`), and the context it calls
        // Redis with.
        server::keep_detached_context(ctx);
        server::register_info::<Info>(ctx);
        Status::Ok
    }

    /// Follows `CONFIG SET` of the server configs the module depends on.
    struct ConfigWatcher;

    impl ServerEventListener for ConfigWatcher {
        fn on_server_event(ctx: Ctx, event: ServerEvent) {
            if let ServerEvent::ConfigChanged { names } = event {
                eviction::config_changed(ctx, names);
                if names.iter().any(|name| replicas::is_setting(name)) {
                    replicas::refresh_settings(ctx);
                }
            }
        }
    }

    /// `INFO lock`: the `lock_stats`, `lock_times`, `lock_hot_keys` and
    /// `lock_eviction` sections.
    struct Info;

    impl InfoProvider for Info {
        fn write_info(info: &mut InfoWriter, for_crash_report: bool) {
            if !for_crash_report {
                server::with_detached(resets::notice);
            }
            info.section("stats");
            for (name, counter) in stats::all() {
                info.field_u64(name, counter.get());
            }
            info.field_u64("waiting_clients", waiting::waiting_clients() as u64);
            info.field_u64("handoff_timers", waiting::live_timers() as u64);
            let (kept, remembered) = waiting::absent_counts();
            info.field_u64("kept_places", kept as u64);
            info.field_u64("remembered_grants", remembered as u64);
            info.field_u64(
                "grants_awaiting_replicas",
                waiting::grants_awaiting_replicas() as u64,
            );
            // The keyspace event classes heard now (`g$hzxe` letters; `none`
            // while nothing needs them), and whether this server lets the
            // module stop hearing one.
            info.field_str("keyspace_events", &waiting::heard());
            info.field_u64(
                "keyspace_unsubscribe",
                u64::from(ffi::events::can_unsubscribe_keyspace()),
            );
            let (listings, bytes) = commands::scan::walks_usage();
            info.field_u64("scan_listings", listings as u64);
            info.field_u64("scan_listing_bytes", bytes as u64);
            if let Some(report) = timings::report() {
                write_times(info, &report);
            }
            let (policy, evicts) = eviction::current();
            info.section("eviction");
            info.field_str("maxmemory_policy", &policy);
            info.field_u64("evicts_locks", u64::from(evicts));
        }
    }

    /// `lock_times`: count and percentiles (microseconds) of the wait
    /// times per kind and the hold times of locks and read-write locks;
    /// `lock_hot_keys`: the most waited-for keys.
    fn write_times(info: &mut InfoWriter, report: &timings::Report) {
        info.section("times");
        for (measure, rows) in [("wait", &report.waits), ("hold", &report.holds)] {
            for (kind, summary) in rows.iter() {
                let prefix = format!("{measure}_{}", kind.name());
                info.field_u64(&format!("{prefix}_count"), summary.count);
                for (name, value) in summary.percentiles {
                    info.field_u64(&format!("{prefix}_{name}_us"), value);
                }
            }
        }
        info.section("hot_keys");
        for (table, unit, keys) in [
            ("most_waiters", "waiters", &report.by_waiters),
            ("longest_waits", "waited_us", &report.by_wait_time),
        ] {
            for (rank, key) in keys.iter().enumerate() {
                let value = format!(
                    "db={},key={},{unit}={},error={}",
                    key.db,
                    hot_keys::info_text(key),
                    key.weight,
                    key.error
                );
                info.field_str(&format!("{table}_{}", rank + 1), &value);
            }
        }
    }

    /// Every allocation of the module goes through Redis's allocator, so
    /// `INFO memory` and `maxmemory` count it.
    #[global_allocator]
    static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_module_version_encodes_cargos() {
        assert_eq!(super::MODULE_VERSION, 200, "0.2.0");
    }

    /// The Python package's version is the workspace's (Cargo.toml's
    /// `[workspace.package]`, which the module and the Rust client inherit).
    #[test]
    fn the_python_package_has_the_workspace_version() {
        let pyproject = include_str!("../python/pyproject.toml");
        let line = format!("\nversion = \"{}\"\n", env!("CARGO_PKG_VERSION"));
        assert!(
            pyproject.contains(&line),
            "python/pyproject.toml's version is not {}",
            env!("CARGO_PKG_VERSION")
        );
    }

    /// So is the Java library's: its parent POM and both Redisson lines'
    /// modules (`java/`), which name it as their parent's version.
    #[test]
    fn the_java_library_has_the_workspace_version() {
        let version = format!("<version>{}</version>", env!("CARGO_PKG_VERSION"));
        for (path, pom) in [
            ("java/pom.xml", include_str!("../java/pom.xml")),
            (
                "java/redisson-3/pom.xml",
                include_str!("../java/redisson-3/pom.xml"),
            ),
            (
                "java/redisson-4/pom.xml",
                include_str!("../java/redisson-4/pom.xml"),
            ),
        ] {
            assert!(pom.contains(&version), "{path}'s version is not {version}");
        }
    }
}
