//! The edge between Redis and the rest of the module: every call into Redis,
//! and the only `unsafe` code of the crate.
//!
//! Everything outside this folder is plain Rust over these wrappers, whose
//! lifetimes say how long Redis keeps a thing valid:
//! * [`Ctx`]: a module context, valid for the one call Redis made into us
//!   (a command, a callback, a timer, a notification);
//! * [`RStr`]: a Redis string borrowed for that call (an argument, a hash
//!   value); [`OwnedStr`]: one we created, freed when dropped;
//! * [`key::Key`]: an open key, closed when dropped;
//! * [`blocking::BlockedClient`]: a blocked client's handle, valid until it
//!   is unblocked (the wait queues hold it until then);
//! * [`timer::TimerId`]: a module timer, typed by the job it carries, so a
//!   stopped timer hands its job back and a fired one runs it, exactly once.
//!
//! Redis calls back through generic `extern "C"` trampolines over small traits
//! ([`command::Command`], [`blocking::WaitHandler`], [`timer::TimerJob`],
//! [`events::KeyspaceListener`], [`events::ServerEventListener`]); each runs
//! its body behind `catch_unwind`, because a panic unwinding into C aborts
//! the server.
//!
//! Why not the `redis-module` crate's wrappers for all of this? Its command
//! wrappers decode every argument into an owned `RedisString` vector and
//! build a `RedisValue` tree per reply (the hot path here allocates nothing),
//! its hash helpers take `&str` fields through `CString::new(..).unwrap()`
//! (owner ids are binary-safe and may contain NUL bytes), and a panic in its
//! generated handlers aborts the server. The crate still provides the raw
//! bindings, the allocator, module configs and the steps of
//! `RedisModule_OnLoad`, which [`load`] runs (the crate's macro could not
//! say why a second load is refused).
//!
//! Functions every supported server (Redis 7.0+, Valkey) provides are called
//! through [`api!`]; optional ones are looked up where used, as `Option`s.

pub mod blocking;
pub mod command;
pub mod context;
pub mod events;
pub mod key;
pub mod load;
pub mod server;
pub mod timer;

pub(crate) use context::in_callback;
pub use context::{with_decimal, Ctx, OwnedStr, RStr};

pub(crate) use redis_module::raw;

/// Calls a module API function that every supported server provides.
///
/// The function table is filled by `RedisModule_Init` before any of our code
/// runs, and never changes afterwards.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: reads a function pointer of the table RedisModule_Init
        // filled; nothing writes it afterwards.
        #[allow(unused_unsafe)]
        let function = unsafe { $crate::ffi::raw::$name };
        match function {
            Some(f) => f,
            None => $crate::ffi::missing(stringify!($name)),
        }
    }};
}
pub(crate) use api;

/// A required API function is missing: Redis is older than any supported
/// server. Never reached on a server the module loaded on (loading checks).
#[cold]
pub(crate) fn missing(name: &str) -> ! {
    panic!("{name} is missing from this server's module API")
}

/// `REDISMODULE_OK` as the API returns it.
pub(crate) const OK: std::os::raw::c_int = raw::REDISMODULE_OK as std::os::raw::c_int;

/// `N` random bytes from Redis's own generator (permit ids).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // SAFETY: writes exactly `N` bytes into the buffer we own, which is
    // alive during the call.
    unsafe { api!(RedisModule_GetRandomBytes)(bytes.as_mut_ptr(), N) };
    bytes
}
