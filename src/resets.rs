//! Noticing `CONFIG RESETSTAT` (`stats_reset.rs` says how): the check made
//! when `INFO lock` is written, and the mark it needs.
//!
//! The mark is a `LOCK.INFO` the module runs itself, so that the server's
//! count of `LOCK.INFO` calls is not 0 (a reset could not lower it). It is
//! made only once something is recorded (wait or hold times, hot keys),
//! since before that a reset has nothing to make stale: a server that takes
//! no lock (a replica, say) never runs it. It runs from a timer, in the
//! event loop, never while a module load might still fail (a pending timer
//! keeps a module from being unloaded).

use crate::ffi::timer::{self, TimerJob};
use crate::ffi::{server, Ctx};
use crate::{stats_reset, timings};

/// Compares the server's count of `LOCK.INFO` calls with the module's and
/// forgets the times if statistics were reset; marks them when asked.
pub fn notice(ctx: Ctx) {
    let calls = server::info_field(ctx, c"commandstats", c"cmdstat_lock.info");
    if timings::check_reset(stats_reset::calls_of(calls.as_deref())).run_once {
        server::call_quietly(ctx, c"LOCK.INFO", c"lock:stats-mark");
    }
}

/// Something was just recorded for the first time since start or the last
/// reset: mark the command statistics in a moment.
pub fn mark_soon(ctx: Ctx) {
    timer::start(ctx, 0, Mark);
}

struct Mark;

impl TimerJob for Mark {
    fn fire(self, ctx: Ctx) {
        notice(ctx);
    }
}
