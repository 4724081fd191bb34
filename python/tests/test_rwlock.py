"""The read-write lock (``LOCK.RACQUIRE`` / ``WACQUIRE`` / ``RRELEASE`` /
``WRELEASE`` / ``RWRENEW``): sharing, exclusion, the queue, downgrade and the
refused upgrade, the watchdog, fencing, retries, asyncio, and Redisson's
read-write scripts both ways."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aredis

from harness import REDISSON, Proxy, Server, wait_until
from redis_lock_client import (
    AsyncLockClient,
    LockClient,
    LockGuard,
    LostReason,
    NotHeld,
    ServerError,
    UpgradeRefused,
)
from redis_lock_client._protocol import pairs

READ_LOCK = (REDISSON / "rw-read-lock.lua").read_text()
READ_UNLOCK = (REDISSON / "rw-read-unlock.lua").read_text()
WRITE_LOCK = (REDISSON / "rw-write-lock.lua").read_text()
WRITE_UNLOCK = (REDISSON / "rw-write-unlock.lua").read_text()


def test_readers_share_and_a_writer_is_excluded(r: redis.Redis) -> None:
    locks = LockClient(r)
    a, b, w = locks.as_owner("a"), locks.as_owner("b"), locks.as_owner("w")
    with a.read_lock("rw:share") as ga, b.read_lock("rw:share") as gb:
        assert (ga.kind, gb.kind) == ("read", "read")
        assert r.hget("rw:share", "mode") == b"read"
        assert r.hget("rw:share", "a") == b"1" and r.hget("rw:share", "b") == b"1"
        assert ga.is_held() and gb.is_held()
        assert w.try_write_lock("rw:share", 0) is None
        assert w.try_write_lock("rw:share", 0.1) is None
        assert r.hget("rw:share", "w:write") is None
    assert not r.exists("rw:share")


def test_a_writer_excludes_readers_and_writers_and_reenters(r: redis.Redis) -> None:
    locks = LockClient(r)
    w, o = locks.as_owner("w"), locks.as_owner("o")
    outer = w.write_lock("rw:excl")
    inner = w.write_lock("rw:excl")
    assert outer.kind == "write"
    assert r.hget("rw:excl", "mode") == b"write"
    assert r.hget("rw:excl", "w:write") == b"2"
    assert o.try_read_lock("rw:excl", 0) is None
    assert o.try_write_lock("rw:excl", 0.1) is None
    inner.unlock()
    assert r.hget("rw:excl", "w:write") == b"1"
    assert outer.is_held()
    outer.unlock()
    assert not r.exists("rw:excl")
    with pytest.raises(NotHeld):
        outer.unlock()


def test_reentry_is_per_thread_and_per_kind_of_hold(r: redis.Redis) -> None:
    locks = LockClient(r)
    g1 = locks.read_lock("rw:thread")
    g2 = locks.read_lock("rw:thread")
    assert r.hget("rw:thread", g1.owner) == b"2"
    other: list[LockGuard | None] = []
    t = threading.Thread(target=lambda: other.append(locks.try_write_lock("rw:thread", 0)))
    t.start()
    t.join()
    assert other == [None]
    g2.unlock()
    g1.unlock()
    assert not r.exists("rw:thread")


def test_a_waiting_writer_is_granted_when_the_readers_release(r: redis.Redis) -> None:
    locks = LockClient(r)
    ra, rb = locks.as_owner("ra").read_lock("rw:wait"), locks.as_owner("rb").read_lock("rw:wait")
    got: list[float] = []

    def writer() -> None:
        g = locks.as_owner("w").try_write_lock("rw:wait", 10.0)
        assert g is not None
        got.append(time.monotonic())
        g.unlock()

    t = threading.Thread(target=writer)
    t.start()
    assert wait_until(lambda: len(locks.info("rw:wait")["waiters"]) == 1)
    # A new reader queues behind the waiting writer (fair).
    assert locks.as_owner("late").try_read_lock("rw:wait", 0) is None
    ra.unlock()
    time.sleep(0.05)
    assert not got  # one reader still holds
    released = time.monotonic()
    rb.unlock()
    t.join()
    assert got and got[0] - released < 1.0
    assert not r.exists("rw:wait")


def test_downgrade_is_granted_and_upgrade_refused(r: redis.Redis) -> None:
    locks = LockClient(r).as_owner("o")
    w = locks.write_lock("rw:down")
    rd = locks.read_lock("rw:down")  # a writer may take read
    assert r.hget("rw:down", "o") == b"1" and r.hget("rw:down", "o:write") == b"1"
    w.unlock()
    assert r.hget("rw:down", "mode") == b"read"
    assert r.hget("rw:down", "o") == b"1"
    # Now a reader only: asking to write is refused, and changes nothing.
    with pytest.raises(UpgradeRefused) as e:
        locks.write_lock("rw:down")
    assert isinstance(e.value, ServerError)
    assert e.value.name == "rw:down"
    with pytest.raises(UpgradeRefused):
        locks.try_write_lock("rw:down", 1.0)
    assert r.hget("rw:down", "o") == b"1" and r.hget("rw:down", "o:write") is None
    assert rd.is_held()
    rd.unlock()
    assert not r.exists("rw:down")
    # Released, the same owner may write.
    with locks.write_lock("rw:down"):
        assert r.hget("rw:down", "o:write") == b"1"
    assert not r.exists("rw:down")


def test_try_with_lease_ends_and_is_reported(r: redis.Redis) -> None:
    locks = LockClient(r)
    g = locks.try_read_lock("rw:lease", 0, lease=0.3)
    assert g is not None
    assert 0 < r.pttl("rw:lease") <= 300
    assert g.lost.wait(2.0)
    assert g.lost_reason == LostReason(LostReason.LEASE_EXPIRED)
    assert wait_until(lambda: not r.exists("rw:lease"), 0.5)
    w = locks.try_write_lock("rw:lease", 0, lease=10)
    assert w is not None
    assert 9000 < r.pttl("rw:lease") <= 10000
    w.unlock()


def test_watchdog_keeps_read_and_write_holds_for_three_leases(r: redis.Redis) -> None:
    # 0.6 s: a 2-core machine under load can stall a process for 0.2 s.
    locks = LockClient(r, watchdog_lease=0.6)
    readers = [locks.as_owner(o).read_lock("rw:dog-r") for o in ("a", "b")]
    writer = locks.as_owner("w").write_lock("rw:dog-w")
    time.sleep(1.8)  # three leases
    for g in [*readers, writer]:
        assert not g.lost.is_set(), g.lost_reason
        assert g.is_held()
    assert r.pttl("rw:dog-r") > 0 and r.pttl("rw:dog-w") > 0
    for g in [*readers, writer]:
        g.unlock()
    assert not r.exists("rw:dog-r") and not r.exists("rw:dog-w")


def test_force_marks_read_and_write_guards_lost_within_a_third_of_the_lease(
    r: redis.Redis,
) -> None:
    locks = LockClient(r, watchdog_lease=1.5)
    told: list[LostReason] = []
    gr = locks.as_owner("a").read_lock("rw:force-r", on_lost=told.append)
    gw = locks.as_owner("w").write_lock("rw:force-w", on_lost=told.append)
    forced = time.monotonic()
    assert locks.force_unlock("rw:force-r") and locks.force_unlock("rw:force-w")
    assert gr.lost.wait(2.0) and gw.lost.wait(2.0)
    # lease/3 (the next renewal), plus slack for a loaded 2-core machine
    assert time.monotonic() - forced <= 0.5 + 0.3
    assert gr.lost_reason == gw.lost_reason == LostReason(LostReason.NOT_HELD)
    assert told == [LostReason(LostReason.NOT_HELD)] * 2
    for g in (gr, gw):
        with pytest.raises(NotHeld):
            g.unlock()


def test_fenced_write_tokens_grow(r: redis.Redis) -> None:
    locks = LockClient(r)
    g1 = locks.write_lock_fenced("rw:fence")
    assert isinstance(g1.token, int)
    g1.unlock()
    g2 = locks.try_write_lock_fenced("rw:fence", 0, lease=10)
    assert g2 is not None and isinstance(g2.token, int)
    assert g2.token > g1.token
    # A fenced write excluded by a reader: no guard, no token.
    g2.unlock()
    rd = locks.as_owner("reader").read_lock("rw:fence")
    assert locks.as_owner("w").try_write_lock_fenced("rw:fence", 0) is None
    rd.unlock()
    g3 = locks.write_lock_fenced("rw:fence")
    assert g3.token is not None and g3.token > g2.token
    g3.unlock()


def test_a_write_acquire_cut_after_it_ran_is_not_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = LockClient(redis.Redis(port=proxy.port), retry_interval=0.01).as_owner("o")
    proxy.cut_after("LOCK.WACQUIRE")
    g = locks.write_lock("rw:cut")
    assert proxy.fired.is_set()
    assert r.hget("rw:cut", "o:write") == b"1"  # read back from the writer's field
    g.unlock()
    assert not r.exists("rw:cut")


def test_a_read_release_cut_after_it_ran_is_not_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = LockClient(redis.Redis(port=proxy.port), retry_interval=0.01).as_owner("o")
    outer = locks.read_lock("rw:cutrel")
    inner = locks.read_lock("rw:cutrel")
    proxy.cut_after("LOCK.RRELEASE")
    inner.unlock()
    assert proxy.fired.is_set()
    assert r.hget("rw:cutrel", "o") == b"1"  # one hold left, not zero
    outer.unlock()
    assert not r.exists("rw:cutrel")


def test_redisson_readers_and_writers_exclude_this_client_both_ways(r: redis.Redis) -> None:
    locks = LockClient(r).as_owner("py:1")
    name, channel = "rw:redisson", "redisson_rwlock:{rw:redisson}"
    prefix = "{rw:redisson}:rs:1:rwlock_timeout"

    # A Redisson reader: this client's reader shares, its writer is excluded.
    assert r.eval(READ_LOCK, 2, name, prefix, 30000, "rs:1", "rs:1:write") is None
    rd = locks.try_read_lock(name, 0)
    assert rd is not None
    rd.unlock()
    assert r.exists(name)  # the Redisson reader's hold remains
    assert locks.try_write_lock(name, 0) is None
    assert r.eval(READ_UNLOCK, 4, name, channel, prefix, "{rw:redisson}", 0, "rs:1") == 1
    assert not r.exists(name)

    # A Redisson writer: this client can neither read nor write.
    assert r.eval(WRITE_LOCK, 1, name, 30000, "rs:1:write") is None
    assert locks.try_read_lock(name, 0) is None
    assert locks.try_write_lock(name, 0) is None
    assert r.eval(WRITE_UNLOCK, 2, name, channel, 1, 30000, "rs:1:write") == 1
    assert not r.exists(name)

    # This client's writer: Redisson's read and write scripts answer the lease.
    with locks.write_lock(name):
        assert (r.eval(READ_LOCK, 2, name, prefix, 30000, "rs:1", "rs:1:write") or 0) > 0
        assert (r.eval(WRITE_LOCK, 1, name, 30000, "rs:1:write") or 0) > 0
    # This client's reader: Redisson's writer is excluded, its reader shares.
    with locks.read_lock(name):
        assert (r.eval(WRITE_LOCK, 1, name, 30000, "rs:1:write") or 0) > 0
        assert r.eval(READ_LOCK, 2, name, prefix, 30000, "rs:1", "rs:1:write") is None
        # Redisson's reader leaves; this client's still holds.
        assert r.eval(READ_UNLOCK, 4, name, channel, prefix, "{rw:redisson}", 0, "rs:1") == 0
    assert not r.exists(name)


# -- asyncio -----------------------------------------------------------------


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[aredis.Redis]:
    c = aredis.Redis(port=server.port)
    yield c
    await c.aclose()


async def test_async_share_exclude_queue_and_upgrade(ar: aredis.Redis, r: redis.Redis) -> None:
    locks = AsyncLockClient(ar)
    a, b, w = locks.as_owner("a"), locks.as_owner("b"), locks.as_owner("w")
    ga = await a.read_lock("arw:q")
    gb = await b.read_lock("arw:q")
    assert ga.kind == "read" and r.hget("arw:q", "a") == b"1" and r.hget("arw:q", "b") == b"1"
    assert await w.try_write_lock("arw:q", 0) is None
    with pytest.raises(UpgradeRefused):
        await a.write_lock("arw:q")
    waiter = asyncio.create_task(w.try_write_lock("arw:q", 10.0))
    assert await wait_async(
        lambda: len(pairs(r.execute_command("LOCK.INFO", "arw:q"))["waiters"]) == 1
    )
    await ga.unlock()
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await gb.unlock()
    gw = await asyncio.wait_for(waiter, 2.0)
    assert gw is not None and gw.kind == "write"
    assert r.hget("arw:q", "w:write") == b"1"
    down = await w.read_lock("arw:q")  # downgrade
    await gw.unlock()
    assert r.hget("arw:q", "mode") == b"read"
    async with down:
        pass
    assert not r.exists("arw:q")


async def test_async_fenced_write_and_watchdog_and_force(ar: aredis.Redis, r: redis.Redis) -> None:
    locks = AsyncLockClient(ar, watchdog_lease=0.6)
    g1 = await locks.write_lock_fenced("arw:f")
    await g1.unlock()
    g2 = await locks.try_write_lock_fenced("arw:f", 0)
    assert g2 is not None and g1.token is not None and g2.token is not None
    assert g2.token > g1.token
    rd = await locks.as_owner("r").try_read_lock("arw:dog", 0)
    assert rd is not None
    await asyncio.sleep(1.8)  # three leases
    assert not g2.lost.is_set() and not rd.lost.is_set()
    assert await g2.is_held() and await rd.is_held()
    forced = asyncio.get_running_loop().time()
    assert await locks.force_unlock("arw:f") and await locks.force_unlock("arw:dog")
    await asyncio.wait_for(asyncio.gather(g2.lost.wait(), rd.lost.wait()), 2.0)
    assert asyncio.get_running_loop().time() - forced <= 0.2 + 0.3
    assert g2.lost_reason == rd.lost_reason == LostReason(LostReason.NOT_HELD)


async def wait_async(cond: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return False
