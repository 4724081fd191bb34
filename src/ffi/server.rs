//! The server as a whole: module options, `INFO` sections, reading server
//! info, applying module configs.

use std::ffi::CStr;
use std::os::raw::c_int;

use super::{api, raw, Ctx, OK};

/// Module options, set once at load.
pub struct ModuleOptions(u32);

impl ModuleOptions {
    /// Redis does not signal a key as modified just because we opened it for
    /// writing: the module signals real writes itself.
    pub const NO_IMPLICIT_SIGNAL_MODIFIED: ModuleOptions =
        ModuleOptions(raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    /// The module supports replicas loading a full sync asynchronously
    /// (`repl-diskless-load swapdb`).
    pub const HANDLE_REPL_ASYNC_LOAD: ModuleOptions =
        ModuleOptions(raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD);

    pub const fn and(self, other: ModuleOptions) -> ModuleOptions {
        ModuleOptions(self.0 | other.0)
    }
}

/// Sets the module's options (replacing any set before).
pub fn set_module_options(ctx: Ctx, options: ModuleOptions) {
    // SAFETY: a load-time context.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx.as_ptr(), options.0 as c_int) };
}

/// Applies the module configs registered so far (their defaults, then
/// redis.conf / `MODULE LOADEX` values). `Err` if Redis refused a value.
pub fn load_configs(ctx: Ctx) -> Result<(), String> {
    // SAFETY: a load-time context (Redis 7.0+).
    if unsafe { api!(RedisModule_LoadConfigs)(ctx.as_ptr()) } == OK {
        Ok(())
    } else {
        Err("lock module: a lock.* config value was refused (see the line above)".to_string())
    }
}

/// One field of `INFO <section>` as the server reports it.
pub fn info_field(ctx: Ctx, section: &CStr, field: &CStr) -> Option<String> {
    // SAFETY: a valid context; the info object is freed below.
    let info = unsafe { api!(RedisModule_GetServerInfo)(ctx.as_ptr(), section.as_ptr()) };
    if info.is_null() {
        return None;
    }
    let value = unsafe { api!(RedisModule_ServerInfoGetFieldC)(info, field.as_ptr()) };
    let text = (!value.is_null()).then(|| {
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned()
    });
    unsafe { api!(RedisModule_FreeServerInfo)(ctx.as_ptr(), info) };
    text
}

/// Writes the module's `INFO` sections.
pub struct InfoWriter {
    ctx: *mut raw::RedisModuleInfoCtx,
}

impl InfoWriter {
    /// Starts section `<module>_<name>`.
    pub fn section(&mut self, name: &str) {
        raw::add_info_section(self.ctx, Some(name));
    }

    pub fn field_u64(&mut self, name: &str, value: u64) {
        raw::add_info_field_unsigned_long_long(self.ctx, name, value);
    }

    pub fn field_str(&mut self, name: &str, value: &str) {
        raw::add_info_field_str(self.ctx, name, value);
    }
}

/// Provides the module's `INFO` sections.
pub trait InfoProvider {
    fn write_info(info: &mut InfoWriter);
}

/// Makes `P` the module's `INFO` callback (replacing the crate's default).
pub fn register_info<P: InfoProvider>(ctx: Ctx) {
    raw::register_info_function(ctx.as_ptr(), Some(info_callback::<P>));
}

extern "C" fn info_callback<P: InfoProvider>(ctx: *mut raw::RedisModuleInfoCtx, _crash: c_int) {
    if ctx.is_null() {
        return;
    }
    // INFO also runs in crash reports: never unwind from here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        P::write_info(&mut InfoWriter { ctx })
    }));
}
