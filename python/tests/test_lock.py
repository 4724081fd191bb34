"""Guards, re-entry, owners, waiting, the watchdog and the lost signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

from harness import ROOT, Server, wait_until
from redis_lock_client import LockClient, LostReason, NotHeld


def test_three_lines_and_context_manager(r: redis.Redis) -> None:
    locks = LockClient(r)
    with locks.lock("t:three") as guard:
        assert r.hget("t:three", guard.owner) == b"1"
        assert guard.owner == f"{locks.id}:{guard.owner.rsplit(':', 1)[1]}"
        assert guard.is_held()
        assert 29 < (guard.remaining_lease() or 0) <= 30
    assert not r.exists("t:three")
    with pytest.raises(NotHeld):
        guard.unlock()


def test_reentry_per_thread_and_exclusion_between_threads(r: redis.Redis) -> None:
    locks = LockClient(r)
    outer = locks.lock("t:re")
    inner = locks.lock("t:re")
    assert r.hget("t:re", outer.owner) == b"2"
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(locks.try_lock("t:re", 0.1)))
    t.start()
    t.join()
    assert other == [None]
    inner.unlock()
    assert r.hget("t:re", outer.owner) == b"1"
    outer.unlock()
    assert not r.exists("t:re")


def test_explicit_owner_shared_with_raw_commands(r: redis.Redis) -> None:
    locks = LockClient(r)
    worker = locks.as_owner("worker-7")
    with worker.lock("t:own") as g:
        assert g.owner == "worker-7"
        # A Redisson application with the same id re-enters what we hold.
        assert r.execute_command("LOCK.ACQUIRE", "t:own", "worker-7", 30000) is None
        assert r.hget("t:own", "worker-7") == b"2"
        assert r.execute_command("LOCK.RELEASE", "t:own", "worker-7") == 0
    assert not r.exists("t:own")


def test_try_lock_with_lease_expires_and_is_reported(r: redis.Redis) -> None:
    locks = LockClient(r)
    g = locks.try_lock("t:lease", 0, lease=0.3)
    assert g is not None
    assert 0 < r.pttl("t:lease") <= 300
    assert g.lost.wait(2.0)
    assert g.lost_reason == LostReason(LostReason.LEASE_EXPIRED)
    # Told no later than the server frees it (the client counts from the
    # request, the server from its execution).
    assert wait_until(lambda: not r.exists("t:lease"), 0.5)
    with pytest.raises(NotHeld):
        g.unlock()


def test_waiter_gets_the_lock_when_released(r: redis.Redis) -> None:
    locks = LockClient(r)
    first = locks.as_owner("a").lock("t:wait")
    got: list[float] = []

    def waiter() -> None:
        g = locks.as_owner("b").try_lock("t:wait", 5.0)
        assert g is not None
        got.append(time.monotonic())
        g.unlock()

    t = threading.Thread(target=waiter)
    t.start()
    assert wait_until(lambda: len(locks.info("t:wait")["waiters"]) == 1)
    released = time.monotonic()
    first.unlock()
    t.join()
    assert got and got[0] - released < 1.0
    assert locks.try_lock("t:busy-none", 0) is not None


def test_try_lock_times_out_and_leaves_nothing(r: redis.Redis) -> None:
    locks = LockClient(r)
    holder = locks.as_owner("h").lock("t:to")
    started = time.monotonic()
    assert locks.as_owner("w").try_lock("t:to", 0.2) is None
    assert 0.19 <= time.monotonic() - started < 2.0
    assert r.hget("t:to", "w") is None
    assert locks.info("t:to")["waiters"] == []
    holder.unlock()


def test_watchdog_keeps_a_lock_for_three_leases(r: redis.Redis) -> None:
    # 0.6 s: a 2-core machine under load can stall a process for 0.2 s.
    locks = LockClient(r, watchdog_lease=0.6)
    g = locks.lock("t:dog")
    time.sleep(1.8)  # three leases
    assert not g.lost.is_set()
    assert g.is_held()
    assert r.pttl("t:dog") > 0
    g.unlock()
    assert not r.exists("t:dog")


def test_force_unlock_is_told_within_a_third_of_the_lease(r: redis.Redis) -> None:
    locks = LockClient(r, watchdog_lease=1.5)
    told: list[LostReason] = []
    g = locks.lock("t:force", on_lost=told.append)
    forced = time.monotonic()
    assert locks.force_unlock("t:force")
    assert g.lost.wait(2.0)
    # lease/3 (the next renewal), plus slack for a loaded 2-core machine
    assert time.monotonic() - forced <= 0.5 + 0.3
    assert g.lost_reason == LostReason(LostReason.NOT_HELD)
    assert told == [LostReason(LostReason.NOT_HELD)]
    with pytest.raises(NotHeld):
        g.unlock()


def test_renewals_failing_for_a_lease_mark_the_lock_lost(fresh_server: Server) -> None:
    locks = LockClient(fresh_server.client(), watchdog_lease=0.6, command_timeout=0.1)
    g = locks.lock("t:frozen")
    fresh_server.signal(signal.SIGSTOP)
    try:
        assert g.lost.wait(2.0)
        assert g.lost_reason == LostReason(LostReason.RENEWAL_FAILED)
    finally:
        fresh_server.signal(signal.SIGCONT)


def test_killed_holder_frees_the_lock_after_its_lease(server: Server, r: redis.Redis) -> None:
    code = (
        "import redis, sys, time\n"
        "from redis_lock_client import LockClient\n"
        f"locks = LockClient(redis.Redis(port={server.port}), watchdog_lease=0.5)\n"
        "g = locks.lock('t:killed')\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"held"
    locks = LockClient(r)
    try:
        time.sleep(0.6)  # renewed past its first lease
        assert r.exists("t:killed")
        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        g = locks.try_lock("t:killed", 5.0)
        waited = time.monotonic() - killed
        assert g is not None
        assert waited <= 0.5 + 0.4
        g.unlock()
    finally:
        holder.kill()
        holder.wait()


def test_hundred_threads_sell_a_stock_of_ninety(r: redis.Redis) -> None:
    locks = LockClient(r)
    r.set("t:stock", 90)
    sold: list[int] = []
    inside = [0]
    overlap = [False]

    def buyer() -> None:
        with locks.lock("t:stock-lock"):
            inside[0] += 1
            overlap[0] |= inside[0] > 1
            left = int(r.get("t:stock") or 0)
            if left > 0:
                r.set("t:stock", left - 1)
                sold.append(1)
            inside[0] -= 1

    threads = [threading.Thread(target=buyer) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sold) == 90
    assert r.get("t:stock") == b"0"
    assert not overlap[0]
    assert not r.exists("t:stock-lock")


def test_is_locked_remaining_lease_and_force(r: redis.Redis) -> None:
    locks = LockClient(r)
    assert not locks.is_locked("t:q")
    assert locks.remaining_lease("t:q") is None
    g = locks.try_lock("t:q", 0, lease=10)
    assert g is not None
    assert locks.is_locked("t:q")
    assert 9 < (locks.remaining_lease("t:q") or 0) <= 10
    assert locks.force_unlock("t:q")
    assert not locks.force_unlock("t:q")


def test_pip_path_root_is_the_repository() -> None:
    assert (ROOT / "python" / "pyproject.toml").exists()


def test_a_dropped_guard_is_released_in_the_background(r: redis.Redis) -> None:
    import gc

    locks = LockClient(r)
    g = locks.lock("t:dropped")
    assert r.exists("t:dropped")
    del g
    gc.collect()
    assert wait_until(lambda: not r.exists("t:dropped"), 2.0)


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def assert_given_back(r: redis.Redis, locks: LockClient, name: str, take: Any) -> None:
    """``take(name)`` is interrupted: no hold is left on the server (the
    key is gone) nor in the client's registry."""
    with pytest.raises(KeyboardInterrupt):
        take(name)
    assert not r.exists(name)
    assert not locks._engine.registry.entries()


def test_interrupted_after_the_grant_was_recorded_gives_it_back(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # KeyboardInterrupt between recording a grant and returning its guard
    # (here: raised by the watchdog's start, the last step before the
    # return): the caller has no guard, so the hold must not stay behind.
    locks = LockClient(r)
    monkeypatch.setattr(locks._engine.watchdog, "due", interrupt)
    assert_given_back(r, locks, "t:ki", locks.lock)
    assert_given_back(r, locks, "t:ki-rw", locks.read_lock)
    monkeypatch.undo()

    # Interrupted as the guard is made: before this client recorded the
    # grant (the server has it), which the read-back finds and gives back.
    monkeypatch.setattr(LockClient, "_Guard", interrupt)
    assert_given_back(r, locks, "t:ki", locks.lock)
    monkeypatch.undo()
    # The owner's count is clean: a new grant is a first hold.
    with locks.lock("t:ki") as g:
        assert r.hget("t:ki", g.owner) == b"1"


def test_interrupted_with_the_guard_made_but_the_grant_not_recorded_gives_it_back(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # KeyboardInterrupt after the (disarmed) guard was handed to the
    # clean-up but before the grant was counted: the guard's hold is not
    # this client's to release, the server's grant is found and given back.
    locks = LockClient(r)
    monkeypatch.setattr(locks._engine, "hold", interrupt)
    assert_given_back(r, locks, "t:ki-hold", locks.lock)
