//! `RedisModule_OnLoad` and `RedisModule_OnUnload`: the entry points Redis
//! calls when it loads and unloads the module.
//!
//! They do what the `redis-module` crate's `redis_module!` macro generates
//! for a module like ours (initialise the API, set the crate's module
//! context, run its registries, then our `init`), plus one thing: saying why
//! Redis refused a second load. `RedisModule_Init` fails when a module named
//! `lock` is already loaded; Redis 7.0 and 8.x then log only "Module ...
//! initialization failed. Module not loaded", and the macro returns before
//! any of our code runs. Here, `Init` has filled the API table before it
//! checks the name, so the refusal can be logged with the reason.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{Context, RedisString, Status};

use super::raw;

/// The module's name, as `MODULE LIST` shows it.
pub const NAME: &CStr = c"lock";

/// What the module does once the API is initialised (`lib.rs`).
pub type Init = fn(&Context, &[RedisString]) -> Status;

/// Whether this server is one the module supports (`lib.rs`): runs right
/// after the API is initialised, before anything that needs the Redis 7
/// API, whose functions an older server lacks.
pub type Admit = fn(&Context) -> Status;

const ERR: c_int = raw::Status::Err as c_int;

/// The body of `RedisModule_OnLoad`, for the module `version` (as
/// `MODULE LIST` shows it), which `admit`s the server first and whose
/// `init` runs last.
///
/// # Safety
/// `ctx`, `argv` and `argc` are what Redis passed to `RedisModule_OnLoad`.
pub unsafe fn on_load(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    version: c_int,
    admit: Admit,
    init: Init,
) -> c_int {
    // SAFETY: the load context Redis passed; the name is a NUL-terminated C
    // string, which Redis copies.
    let status = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            NAME.as_ptr(),
            version,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    if status == ERR {
        log_refused_init(ctx);
        return ERR;
    }
    let context = Context::new(ctx);
    // Set once per load; the crate's logging and configs read it.
    let _ = redis_module::MODULE_CONTEXT.set_context(&context);
    if admit(&context) == Status::Err {
        return ERR;
    }
    let args = redis_module::decode_args(ctx, argv, argc);
    // The crate's registries (commands declared with its attribute macros,
    // defrag callbacks, server events): empty for this module, run as the
    // macro runs them so that stays true if one is ever used.
    if redis_module::commands::register_commands(&context) == Status::Err {
        return ERR;
    }
    // Only when there is something to register: the crate logs "Skip
    // register defrag callbacks" at warning level on every load on a server
    // without the callback API (Redis 7.0), even with nothing to register.
    if has_defrag_functions() {
        if let Err(e) = redis_module::defrag::register_defrag_functions(&context) {
            context.log_warning(&e.to_string());
            return ERR;
        }
    }
    if let Err(e) = redis_module::server_events::register_server_events(&context) {
        context.log_warning(&e.to_string());
        return ERR;
    }
    init(&context, &args) as c_int
}

/// Whether anything was declared with the crate's defrag attribute macros
/// (nothing, in this module).
fn has_defrag_functions() -> bool {
    use redis_module::defrag::{
        DEFRAG_END_FUNCTIONS_LIST, DEFRAG_FUNCTIONS_LIST, DEFRAG_START_FUNCTIONS_LIST,
    };
    !(DEFRAG_FUNCTIONS_LIST.is_empty()
        && DEFRAG_START_FUNCTIONS_LIST.is_empty()
        && DEFRAG_END_FUNCTIONS_LIST.is_empty())
}

/// `RedisModule_Init` refused: say why when we can tell.
fn log_refused_init(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: reads function pointers of the table RedisModule_Init filled
    // before it refused (NULL if it did not get that far); nothing else
    // writes the table during a load.
    let (busy, log) = unsafe { (raw::RedisModule_IsModuleNameBusy, raw::RedisModule_Log) };
    let (Some(busy), Some(log)) = (busy, log) else {
        return;
    };
    // SAFETY: a NUL-terminated name; Redis only looks it up.
    if unsafe { busy(NAME.as_ptr()) } == 0 {
        return;
    }
    // SAFETY: the load context (Redis logs without a module name while it
    // has none), NUL-terminated level and message, and a format without
    // conversions.
    unsafe {
        log(
            ctx,
            c"warning".as_ptr(),
            c"lock module: not loaded: a module named 'lock' is already loaded \
              (MODULE LIST); to replace it, MODULE UNLOAD lock first"
                .as_ptr(),
        )
    };
}

/// Defines the entry points Redis looks for, `RedisModule_OnLoad` and
/// `RedisModule_OnUnload`, where it is invoked: in the crate's root, which
/// gives its version, its `admit` and its `init`. So this file names nothing above the
/// FFI, as the `redis_module!` macro lets a module do. (Unit-test builds
/// have no entry points.)
#[cfg(not(test))]
macro_rules! entry_points {
    (version: $version:expr, admit: $admit:path, init: $init:path) => {
        /// Redis's entry point for `MODULE LOAD` and `loadmodule`.
        ///
        /// # Safety
        /// Called by Redis only, with its load context and the module arguments.
        #[no_mangle]
        pub unsafe extern "C" fn RedisModule_OnLoad(
            ctx: *mut $crate::ffi::raw::RedisModuleCtx,
            argv: *mut *mut $crate::ffi::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            // SAFETY: Redis's own arguments to RedisModule_OnLoad, passed on as is.
            unsafe { $crate::ffi::load::on_load(ctx, argv, argc, $version, $admit, $init) }
        }

        /// Redis's entry point for `MODULE UNLOAD`: nothing to undo by hand
        /// (Redis drops the commands, configs and subscriptions), so it
        /// always agrees.
        #[no_mangle]
        pub extern "C" fn RedisModule_OnUnload(
            _ctx: *mut $crate::ffi::raw::RedisModuleCtx,
        ) -> std::os::raw::c_int {
            $crate::ffi::raw::Status::Ok as std::os::raw::c_int
        }
    };
}
#[cfg(not(test))]
pub(crate) use entry_points;
