"""The count-down latch (``LOCK.LATCHSET`` / ``COUNTDOWN`` / ``LATCHCOUNT`` /
``AWAIT`` / ``LATCHINFO``) through the client: counting, waits that end
reached, timed out or expired, a delete that opens it, and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aredis

from harness import Server, wait_until
from redis_lock_client import AsyncLockClient, LatchResult, LockClient, ServerError


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[aredis.Redis]:
    c = aredis.Redis(port=server.port)
    yield c
    await c.aclose()


def latch_waiters(r: redis.Redis, name: str) -> int:
    return len(LockClient(r).count_down_latch(name).info()["waiters"])


def test_set_count_and_count_down(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:count")
    assert latch.count() == 0
    assert latch.try_set_count(2)
    assert not latch.try_set_count(5)  # exists: unchanged
    assert r.get("latch:count") == b"2"
    assert latch.count() == 2
    info = latch.info()
    assert info["count"] == 2 and info["ttl_ms"] == -1 and info["waiters"] == []
    assert latch.count_down() == 1
    assert latch.count_down() == 0
    assert not r.exists("latch:count")  # deleted at zero
    assert latch.count_down() == 0  # missing: stays 0
    assert latch.count() == 0


def test_bad_arguments(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:bad")
    with pytest.raises(ValueError):
        latch.try_set_count(0)
    r.hset("latch:wrongtype", "f", "v")
    with pytest.raises(ServerError, match="WRONGTYPE"):
        LockClient(r).count_down_latch("latch:wrongtype").count_down()


def test_wait_on_a_missing_latch_is_reached_at_once(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:missing")
    started = time.monotonic()
    assert latch.wait_zero(5) is LatchResult.REACHED
    assert latch.wait_zero() is LatchResult.REACHED
    assert time.monotonic() - started < 1.0


def test_wait_reached_when_counted_down_elsewhere(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:reached")
    latch.try_set_count(2)
    results: list[LatchResult] = []
    threads = [threading.Thread(target=lambda: results.append(latch.wait_zero())) for _ in range(3)]
    for t in threads:
        t.start()
    assert wait_until(lambda: latch_waiters(r, "latch:reached") == 3)
    assert latch.count_down() == 1
    time.sleep(0.1)
    assert results == []
    assert latch.count_down() == 0
    for t in threads:
        t.join(2.0)
    assert results == [LatchResult.REACHED] * 3
    assert bool(results[0])


def test_wait_times_out(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:timeout")
    latch.try_set_count(1)
    started = time.monotonic()
    result = latch.wait_zero(0.2)
    assert result is LatchResult.TIMED_OUT
    assert not result
    assert time.monotonic() - started >= 0.19
    assert latch_waiters(r, "latch:timeout") == 0
    assert latch.count() == 1


def test_wait_ends_expired_when_the_latch_expires(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:expired")
    assert latch.try_set_count(3, ttl=0.3)
    assert 0 < r.pttl("latch:expired") <= 300
    started = time.monotonic()
    result = latch.wait_zero(5)
    assert result is LatchResult.EXPIRED
    assert time.monotonic() - started < 3.0
    assert latch.count() == 0
    assert latch.wait_zero(1) is LatchResult.REACHED  # gone: open


def test_a_delete_opens_the_latch(r: redis.Redis) -> None:
    latch = LockClient(r).count_down_latch("latch:del")
    latch.try_set_count(5)
    results: list[LatchResult] = []
    t = threading.Thread(target=lambda: results.append(latch.wait_zero(5)))
    t.start()
    assert wait_until(lambda: latch_waiters(r, "latch:del") == 1)
    r.delete("latch:del")
    t.join(3.0)
    assert results == [LatchResult.REACHED]


def test_result_values() -> None:
    assert LatchResult.REACHED == "reached"
    assert LatchResult.TIMED_OUT == "timed_out"
    assert LatchResult.EXPIRED == "expired"


async def test_async_latch_reached_timed_out_expired(ar: aredis.Redis, r: redis.Redis) -> None:
    latch = AsyncLockClient(ar).count_down_latch("alatch:all")
    assert await latch.try_set_count(2)
    assert await latch.count() == 2
    assert await latch.wait_zero(0.1) is LatchResult.TIMED_OUT
    waiter = asyncio.create_task(latch.wait_zero())
    for _ in range(400):
        if latch_waiters(r, "alatch:all") == 1:
            break
        await asyncio.sleep(0.005)
    assert await latch.count_down() == 1
    assert not waiter.done()
    assert await latch.count_down() == 0
    assert await asyncio.wait_for(waiter, 2.0) is LatchResult.REACHED
    assert await latch.try_set_count(1, ttl=0.3)
    result = await latch.wait_zero(5)
    assert result is LatchResult.EXPIRED
    info = await latch.info()
    assert info["count"] == 0


async def test_async_cancelled_wait_leaves_the_latch(ar: aredis.Redis, r: redis.Redis) -> None:
    latch = AsyncLockClient(ar).count_down_latch("alatch:cancel")
    await latch.try_set_count(1)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(latch.wait_zero(), 0.2)
    assert wait_until(lambda: latch_waiters(r, "alatch:cancel") == 0, 2.0)
    assert await latch.count() == 1
