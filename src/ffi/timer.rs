//! Module timers, typed by the job they carry.
//!
//! A timer owns its job: [`start`] boxes it, the timer's firing runs it
//! ([`TimerJob::fire`]) and frees it, and [`stop`] hands it back. Redis fires
//! a timer at most once and never after it was stopped, so each job is freed
//! exactly once.

use std::marker::PhantomData;
use std::os::raw::c_void;

use super::{api, in_callback, raw, Ctx, OK};

/// Work a timer does when it fires.
pub trait TimerJob: Sized + 'static {
    fn fire(self, ctx: Ctx);
}

/// A started timer carrying a `J`.
pub struct TimerId<J> {
    id: raw::RedisModuleTimerID,
    _job: PhantomData<fn(J)>,
}

impl<J> Clone for TimerId<J> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<J> Copy for TimerId<J> {}
impl<J> PartialEq for TimerId<J> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<J> Eq for TimerId<J> {}
impl<J> std::fmt::Debug for TimerId<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TimerId({})", self.id)
    }
}

/// Starts a timer that runs `job` after `delay_ms`.
pub fn start<J: TimerJob>(ctx: Ctx, delay_ms: i64, job: J) -> TimerId<J> {
    let data = Box::into_raw(Box::new(job)).cast::<c_void>();
    // SAFETY: Redis keeps `data` opaque and hands it back to `fire_timer::<J>`.
    let id = unsafe {
        api!(RedisModule_CreateTimer)(ctx.as_ptr(), delay_ms, Some(fire_timer::<J>), data)
    };
    TimerId {
        id,
        _job: PhantomData,
    }
}

/// Stops a timer that has not fired; its job, or `None` if it already fired.
pub fn stop<J: TimerJob>(ctx: Ctx, timer: TimerId<J>) -> Option<J> {
    let mut data: *mut c_void = std::ptr::null_mut();
    // SAFETY: `data` is a valid out-pointer for the call.
    let status = unsafe { api!(RedisModule_StopTimer)(ctx.as_ptr(), timer.id, &mut data) };
    if status != OK || data.is_null() {
        return None;
    }
    // SAFETY: the timer was started by `start::<J>` (TimerId<J>'s type) and,
    // stopped, never fires: the box is taken back exactly once.
    Some(*unsafe { Box::from_raw(data.cast::<J>()) })
}

extern "C" fn fire_timer<J: TimerJob>(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the box `start::<J>` made; a timer fires once.
    let job = *unsafe { Box::from_raw(data.cast::<J>()) };
    // SAFETY: Redis passes the timer callback's context.
    in_callback(unsafe { Ctx::from_raw(ctx) }, "a lock timer", |ctx| {
        job.fire(ctx)
    });
}
