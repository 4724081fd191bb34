//! Noticing `CONFIG RESETSTAT`, which no server tells modules about. Pure.
//!
//! Redis 7.0, Redis 8.2 and Valkey 9.1 fire no server event for
//! `CONFIG RESETSTAT` (their events: role, persistence, flush, loading,
//! client, shutdown, replica, master link, cron, module, swapdb, fork,
//! async load, event loop, config, key). A command filter would see the
//! command, but it runs for every command of the server, which is the tax
//! a lock module must not lay on the rest (issue 28). What `CONFIG
//! RESETSTAT` does do on every server is zero the command statistics,
//! the module's commands' too. So the module counts its own `LOCK.INFO`
//! calls and compares, when it reports its statistics (`INFO lock`), with
//! `INFO commandstats`' `cmdstat_lock.info` calls:
//!
//! * both count every run of the command, and only those (a call refused
//!   before it runs, for arity or ACL, is a `rejected_call`, not a call;
//!   one that answers an error is a call);
//! * so without a reset the server's count is the count at the last check
//!   plus the runs since; after one it is only the runs since the reset,
//!   which is less as long as the count at the check was not 0. So a check
//!   that finds 0 makes it 1 by running `LOCK.INFO` once itself.
//!
//! The reset is noticed at the next `INFO lock`, not at the moment it
//! happened: what was recorded in between is forgotten with the rest.

/// What [`ResetWatch::check`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Statistics were reset since the last check: forget ours.
    pub reset: bool,
    /// The server's count is 0, which a later reset could not lower: run
    /// `LOCK.INFO` once (its run is counted by [`ResetWatch::ran`]).
    pub run_once: bool,
}

/// The module's count of `LOCK.INFO` runs against the server's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResetWatch {
    /// The server's count at the last check.
    server_at_check: u64,
    /// Runs since the last check.
    runs_since: u64,
}

impl ResetWatch {
    pub const fn new() -> ResetWatch {
        ResetWatch {
            server_at_check: 0,
            runs_since: 0,
        }
    }

    /// `LOCK.INFO` ran (counted on entry, before anything can fail).
    pub fn ran(&mut self) {
        self.runs_since += 1;
    }

    /// Compares with the server's count of `LOCK.INFO` calls now, and
    /// starts counting afresh from it.
    pub fn check(&mut self, server_calls: u64) -> Checked {
        let expected = self.server_at_check + self.runs_since;
        let reset = server_calls < expected;
        self.server_at_check = server_calls;
        self.runs_since = 0;
        Checked {
            reset,
            run_once: server_calls == 0,
        }
    }
}

/// The `calls` of a `cmdstat_<command>` value (`calls=3,usec=85,...`); 0
/// for a command not listed (never called since the last reset).
pub fn calls_of(cmdstat: Option<&str>) -> u64 {
    cmdstat
        .and_then(|value| {
            value
                .split(',')
                .find_map(|part| part.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's view, as Redis keeps it: calls since its last reset.
    struct Server {
        calls: u64,
    }

    #[test]
    fn runs_without_a_reset_are_not_taken_for_one() {
        let (mut watch, mut server) = (ResetWatch::new(), Server { calls: 0 });
        let first = watch.check(server.calls);
        assert_eq!(
            first,
            Checked {
                reset: false,
                run_once: true
            }
        );
        watch.ran(); // the run the check asked for
        server.calls += 1;
        for _ in 0..5 {
            watch.ran();
            server.calls += 1;
        }
        assert_eq!(
            watch.check(server.calls),
            Checked {
                reset: false,
                run_once: false
            }
        );
        assert!(!watch.check(server.calls).reset, "nothing since");
    }

    #[test]
    fn a_reset_is_noticed_however_many_runs_follow_it() {
        for runs_before in [0u64, 1, 7] {
            for runs_after in [0u64, 1, 3, 100] {
                let (mut watch, mut server) = (ResetWatch::new(), Server { calls: 0 });
                if watch.check(server.calls).run_once {
                    watch.ran();
                    server.calls += 1;
                }
                for _ in 0..runs_before {
                    watch.ran();
                    server.calls += 1;
                }
                server.calls = 0; // CONFIG RESETSTAT
                for _ in 0..runs_after {
                    watch.ran();
                    server.calls += 1;
                }
                let checked = watch.check(server.calls);
                assert!(
                    checked.reset,
                    "{runs_before} runs before, {runs_after} after"
                );
                assert_eq!(checked.run_once, runs_after == 0);
            }
        }
    }

    #[test]
    fn calls_are_read_from_a_cmdstat_value() {
        assert_eq!(
            calls_of(Some(
                "calls=3,usec=85,usec_per_call=28.33,rejected_calls=1,failed_calls=1"
            )),
            3
        );
        assert_eq!(calls_of(Some("usec=1,calls=12")), 12);
        assert_eq!(calls_of(None), 0);
        assert_eq!(calls_of(Some("garbage")), 0);
    }
}
