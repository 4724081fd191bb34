//! Redisson-compatible distributed locks, native in Redis.
//!
//! Where to look:
//! * `lock.rs`: the state machine: every acquire / renew / release / force /
//!   hand-off decision, pure and unit-tested;
//! * `commands/`: one file per `LOCK.*` command, with its reply contract;
//! * `lock_key.rs`: reading a lock hash and applying + replicating writes;
//! * `wait_queue.rs`: who waits for which lock (pure FIFO queues);
//! * `handoff.rs`: blocking waiters and granting a freed lock to the first;
//! * `events.rs`: unlock messages and keyspace notifications;
//! * `config.rs`: the `lock.*` configs and module arguments; `stats.rs`:
//!   `INFO lock`; `eviction.rs`: warning about evicting `maxmemory-policy`s;
//! * `command_docs.rs`: COMMAND DOCS and ACL categories;
//! * `args.rs`: argument validation; `ffi.rs`: the unsafe edge to Redis.

pub mod args;
pub mod command_docs;
pub mod commands;
pub mod config;
pub mod events;
pub mod eviction;
pub mod ffi;
pub mod handoff;
pub mod lock;
pub mod lock_key;
pub mod stats;
pub mod wait_queue;

#[cfg(not(test))]
mod module {
    use std::os::raw::c_int;

    use redis_module::{raw, redis_module, Context, RedisString, Status};

    use crate::{commands, config, eviction, handoff, stats};

    /// Runs last in `RedisModule_OnLoad`: the configs, the commands, the
    /// event subscriptions.
    ///
    /// Module arguments are checked first: when they are refused, nothing may
    /// have been subscribed yet, because Redis undoes a failed load's commands
    /// and configs but not its event subscriptions, which would then call
    /// into an unloaded library.
    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
        let loaded = config::parse_module_args(&args)
            .and_then(|defaults| config::register(ctx, &defaults))
            .and_then(|()| commands::register(ctx.ctx))
            .and_then(|()| handoff::subscribe(ctx.ctx));
        if let Err(message) = loaded {
            ctx.log_warning(&message);
            return Status::Err;
        }
        eviction::watch(ctx);
        // * Keys are signalled as modified only when a lock is really written
        //   (LockKey::apply), not whenever one is opened for writing.
        // * The module keeps nothing about the dataset that a replica's
        //   asynchronous load (`repl-diskless-load swapdb`) could leave stale:
        //   a replica has no waiters and hands nothing on (see handoff.rs).
        //   Without this flag Redis falls back to a disk-based full sync,
        //   answers -LOADING instead of serving the old data meanwhile, and
        //   logs a line per socket read.
        let options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED
            | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD;
        unsafe {
            if let Some(set_options) = raw::RedisModule_SetModuleOptions {
                set_options(ctx.ctx, options as c_int);
            }
        }
        // Replaces the crate's default INFO callback (registered just before).
        raw::register_info_function(ctx.ctx, Some(info));
        Status::Ok
    }

    /// `INFO lock`: the `lock_stats` and `lock_eviction` sections.
    extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
        raw::add_info_section(ctx, Some("stats"));
        for (name, counter) in stats::all() {
            raw::add_info_field_unsigned_long_long(ctx, name, counter.get());
        }
        raw::add_info_field_unsigned_long_long(
            ctx,
            "waiting_clients",
            handoff::waiting_clients() as u64,
        );
        let (policy, evicts) = eviction::current();
        raw::add_info_section(ctx, Some("eviction"));
        raw::add_info_field_str(ctx, "maxmemory_policy", &policy);
        raw::add_info_field_unsigned_long_long(ctx, "evicts_locks", u64::from(evicts));
    }

    redis_module! {
        name: "lock",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: init,
        // The configs are registered by `init` (config::register), which
        // checks the module arguments first.
        commands: [],
    }
}
