"""The watchdog's schedule and the registry, without a server: when the
watchdog wakes, when it ends, and how connections are taken from redis-py.
(The rest of the suite runs them against real servers.)"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import redis

from redis_lock_client import _holds, _protocol
from redis_lock_client._holds import ARM_DELAY, WATCHDOG_IDLE, Registry, Schedule, Watchlist


class Io:
    """The flavour's primitives the schedule uses, counted."""

    def __init__(self) -> None:
        self.spawned = 0
        self.sets = 0
        io = self

        class Wakeup:
            def set(self) -> None:
                io.sets += 1

        self.Wakeup = Wakeup

    def spawn(self, fn: Any, *args: Any) -> str:
        self.spawned += 1
        return "runner"


def schedule(track: bool = True) -> tuple[Registry, Schedule, Io]:
    io = Io()
    registry = Registry(threading.Lock, threading.Event)
    return registry, Schedule(registry, Watchlist(track, io, registry), io), io


def test_holds_granted_in_a_loop_never_wake_the_watchdog_early(
    monkeypatch: Any,
) -> None:
    registry, s, io = schedule()
    now = [1000.0]
    monkeypatch.setattr(_holds, "monotonic", lambda: now[0])
    for i in range(200):  # a lock taken and given back every 0.1 ms
        entry = registry.entry("k", f"o{i}", _protocol.LOCK)
        s.due(registry.grant(entry, now[0] + 30, False, None, None, True))
        registry.released(entry, True, 1, "LOCK.RELEASE")
        now[0] += 0.0001
        if now[0] >= s.wake_at:  # the runner's timed round
            assert s.round(now[0]) is not None
    # The first grant woke it; from then on it looked every ARM_DELAY.
    assert io.sets == 1
    assert io.spawned == 1
    assert s.wake_at <= now[0] + ARM_DELAY


def test_a_grant_while_the_watchdog_plans_keeps_it_running(monkeypatch: Any) -> None:
    registry, s, _ = schedule(track=False)
    now = [1000.0]
    monkeypatch.setattr(_holds, "monotonic", lambda: now[0])
    s.due(now[0])
    assert s.round(now[0]) == now[0] + WATCHDOG_IDLE  # nothing held: idle from now
    now[0] += WATCHDOG_IDLE
    plan = registry.plan

    def granted_meanwhile(at: float) -> Any:
        planned = plan(at)  # sees nothing held...
        entry = registry.entry("k", "o", _protocol.LOCK)  # ...then a grant comes in
        s.due(registry.grant(entry, at + 30, False, None, None, False))
        return planned

    monkeypatch.setattr(registry, "plan", granted_meanwhile)
    # Idle for WATCHDOG_IDLE, but asked to look again: it must not end.
    assert s.round(now[0]) == now[0] + 30
    assert s.runner is not None
    monkeypatch.setattr(registry, "plan", plan)
    assert registry.entries()[0].is_held()


def test_the_last_release_retires_the_entry_and_a_lost_one_stays_lost() -> None:
    registry, _, _ = schedule()
    entry = registry.entry("k", "o", _protocol.LOCK)
    for _ in range(2):
        registry.grant(entry, math.inf, False, None, None, False)
    registry.released(entry, True, 1, "LOCK.RELEASE")
    assert entry.is_held() and registry.entries() == [entry]
    registry.released(entry, True, 1, "LOCK.RELEASE")
    assert entry.retired and registry.entries() == []
    # Lost while a release of a re-entered hold is under way: not revived.
    entry = registry.entry("k", "o", _protocol.LOCK)
    for _ in range(2):
        registry.grant(entry, math.inf, False, None, None, False)
    registry.mark_lost(entry, _protocol.LostReason(_protocol.LostReason.NOT_HELD))
    registry.released(entry, True, 1, "LOCK.RELEASE")
    assert entry.retired and entry.lost is not None and registry.entries() == []


def test_connections_are_taken_without_redis_pys_argument_check() -> None:
    pool = redis.ConnectionPool()
    take = _protocol.taker(pool)
    assert take is not type(pool).get_connection  # the deprecation wrapper...
    assert take is type(pool).get_connection.__wrapped__  # ...is skipped

    class Old:  # redis-py before 5.3: the command name is required
        def get_connection(self, command_name: str, *keys: Any) -> str:
            return command_name

    class Own:  # an adapter of ours
        def get_connection(self) -> str:
            return "conn"

    assert _protocol.taker(Old())(Old()) == "LOCK"
    assert _protocol.taker(Own())(Own()) == "conn"

    # Replaced on one pool (a test's mock), or wrapped by something else
    # (an instrumentation): called as it is.
    mocked = redis.ConnectionPool()
    mocked.get_connection = lambda: "mocked"  # type: ignore[method-assign]
    assert _protocol.taker(mocked)(mocked) == "mocked"

    class Traced(redis.ConnectionPool):
        get_connection = functools.wraps(redis.ConnectionPool.get_connection)(lambda self: "traced")

    assert _protocol.taker(Traced())(Traced()) == "traced"
