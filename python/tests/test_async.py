"""The asyncio client: guards, re-entry per task, the watchdog, the lost
signal, and cancellation that never leaks a grant."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aredis

from harness import Proxy, Server, wait_until
from redis_lock_client import AsyncLockClient, AsyncLockGuard, LostReason, NotHeld, _holds
from redis_lock_client._protocol import pairs


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[aredis.Redis]:
    c = aredis.Redis(port=server.port)
    yield c
    await c.aclose()


async def test_three_lines(ar: aredis.Redis, r: redis.Redis) -> None:
    locks = AsyncLockClient(ar)
    async with await locks.lock("at:three") as guard:
        assert r.hget("at:three", guard.owner) == b"1"
        assert ":task-" in guard.owner
        assert await guard.is_held()
    assert not r.exists("at:three")
    with pytest.raises(NotHeld):
        await guard.unlock()


async def test_reentry_per_task_and_exclusion_between_tasks(
    ar: aredis.Redis, r: redis.Redis
) -> None:
    locks = AsyncLockClient(ar)
    outer = await locks.lock("at:re")
    inner = await locks.lock("at:re")
    assert r.hget("at:re", outer.owner) == b"2"
    other = await asyncio.create_task(locks.try_lock("at:re", 0.1))
    assert other is None
    await inner.unlock()
    await outer.unlock()
    assert not r.exists("at:re")


async def test_watchdog_keeps_it_and_force_is_told(ar: aredis.Redis, r: redis.Redis) -> None:
    # 0.6 s: a 2-core machine under load can stall a process for 0.2 s.
    locks = AsyncLockClient(ar, watchdog_lease=0.6)
    told: list[LostReason] = []
    g = await locks.lock("at:dog", on_lost=told.append)
    await asyncio.sleep(1.8)  # three leases
    assert not g.lost.is_set()
    assert await g.is_held()
    forced = asyncio.get_running_loop().time()
    assert await locks.force_unlock("at:dog")
    await asyncio.wait_for(g.lost.wait(), 2.0)
    assert asyncio.get_running_loop().time() - forced <= 0.2 + 0.3  # lease/3 plus slack
    assert g.lost_reason == LostReason(LostReason.NOT_HELD)
    assert told == [LostReason(LostReason.NOT_HELD)]
    with pytest.raises(NotHeld):
        await g.unlock()


@pytest.mark.parametrize("first_ends", ["holding", "idle"])
def test_one_client_in_one_event_loop_after_another(
    server: Server, r: redis.Redis, first_ends: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client used by one ``asyncio.run`` after another: its watchdog and
    tracking listener end with the first loop (or before it, idle), and the
    second loop starts its own, which renew both loops' holds and tell a
    loss at once."""
    monkeypatch.setattr(_holds, "WATCHDOG_IDLE", 0.3)
    ar = aredis.Redis(port=server.port)
    locks = AsyncLockClient(ar, watchdog_lease=0.6)

    async def first() -> AsyncLockGuard | None:
        g = await locks.lock("at:loop-1")
        await asyncio.sleep(0.1)  # the watchdog runs, and tracking is armed
        if first_ends == "holding":
            return g
        await g.unlock()
        await asyncio.sleep(1.5)  # both end, idle: the listener after a quiet second
        return None

    async def second(g1: AsyncLockGuard | None) -> None:
        g2 = await locks.lock("at:loop-2")
        leased = await locks.try_lock("at:loop-2-leased", 0, lease=30)
        assert leased is not None
        cpu = time.process_time()
        await asyncio.sleep(1.8)  # three watchdog leases
        # A watchdog sleeping on an Event of the first loop returned at once, for ever.
        assert time.process_time() - cpu < 0.9, "the watchdog sleeps between rounds"
        assert r.exists("at:loop-2") and r.exists("at:loop-1") == (g1 is not None), "renewed"
        assert not g2.lost.is_set() and not (g1 and g1.lost.is_set())
        # No renewal for 30 s: only the tracking listener can tell it.
        assert await locks.force_unlock("at:loop-2-leased")
        await asyncio.wait_for(leased.lost.wait(), 2.0)
        for g in (g1, g2):
            if g is not None:
                await g.unlock()
        await ar.aclose()

    asyncio.run(second(asyncio.run(first())))
    assert not r.exists("at:loop-1") and not r.exists("at:loop-2")


async def test_caller_given_lease_ends_and_is_reported(ar: aredis.Redis) -> None:
    locks = AsyncLockClient(ar)
    g = await locks.try_lock("at:lease", 0, lease=0.2)
    assert g is not None
    await asyncio.wait_for(g.lost.wait(), 1.0)
    assert g.lost_reason == LostReason(LostReason.LEASE_EXPIRED)


async def test_a_cancelled_wait_gives_its_connections_back(ar: aredis.Redis) -> None:
    """The clean-up after a cancelled wait (``abandon``) cancels it in the
    server, then gives the wait's connections back to the pool: four
    cancelled waits leave none in use."""
    locks = AsyncLockClient(ar)
    holder = await locks.as_owner("holder").lock("at:cancelled")
    in_use = ar.connection_pool._in_use_connections
    for _ in range(4):
        task = asyncio.create_task(locks.lock("at:cancelled"))
        while not (await locks.info("at:cancelled"))["waiters"]:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 5
        while (await locks.info("at:cancelled"))["waiters"] or in_use:
            assert time.monotonic() < deadline, f"{len(in_use)} connections still in use"
            await asyncio.sleep(0.005)
    await holder.unlock()


async def test_fifo_waiters_get_it_in_order(ar: aredis.Redis) -> None:
    locks = AsyncLockClient(ar)
    first = await locks.as_owner("a").lock("at:fifo")
    order: list[str] = []

    async def waiter(name: str) -> None:
        g = await locks.as_owner(name).lock("at:fifo")
        order.append(name)
        await g.unlock()

    tasks = []
    for i, name in enumerate(["b", "c", "d"]):
        tasks.append(asyncio.create_task(waiter(name)))
        while len((await locks.info("at:fifo"))["waiters"]) < i + 1:
            await asyncio.sleep(0.005)
    await first.unlock()
    await asyncio.gather(*tasks)
    assert order == ["b", "c", "d"]


async def test_cancelled_wait_leaves_the_queue_and_holds_nothing(
    ar: aredis.Redis, r: redis.Redis
) -> None:
    locks = AsyncLockClient(ar)
    holder = await locks.as_owner("h").lock("at:cancel")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(locks.as_owner("w").lock("at:cancel"), 0.2)
    assert wait_until(lambda: locks_waiters(r, "at:cancel") == 0, 2.0)
    await holder.unlock()
    await asyncio.sleep(0.05)
    assert not r.exists("at:cancel")


def locks_waiters(r: redis.Redis, name: str) -> int:
    return len(pairs(r.execute_command("LOCK.INFO", name))["waiters"])


async def test_cancelled_just_as_the_server_granted_gives_it_back(
    server: Server, r: redis.Redis
) -> None:
    proxy = Proxy(server.port)
    try:
        via = aredis.Redis(port=proxy.port)
        holder = AsyncLockClient(aredis.Redis(port=server.port)).as_owner("h")
        h = await holder.lock("at:granted")
        waiter = AsyncLockClient(via).as_owner("w")
        proxy.hold("WAIT")  # the grant's reply is kept back by the proxy
        task = asyncio.create_task(waiter.lock("at:granted"))
        while len((await holder.info("at:granted"))["waiters"]) < 1:
            await asyncio.sleep(0.005)
        await h.unlock()  # granted to the waiter on the server
        assert await asyncio.to_thread(proxy.held.wait, 5.0)
        assert r.hget("at:granted", "w") == b"1"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The clean-up task finds the grant and gives it back.
        for _ in range(400):
            if not r.exists("at:granted"):
                break
            await asyncio.sleep(0.005)
        assert not r.exists("at:granted")
        proxy.release_held()
    finally:
        proxy.close()


async def test_async_retry_cut_after_acquire_is_not_resent(server: Server, r: redis.Redis) -> None:
    proxy = Proxy(server.port)
    try:
        locks = AsyncLockClient(aredis.Redis(port=proxy.port), retry_interval=0.01)
        proxy.cut_after("LOCK.ACQUIRE")
        g = await locks.lock("at:cut")
        assert proxy.fired.is_set()
        assert r.hget("at:cut", g.owner) == b"1"
        proxy.cut_after("LOCK.RELEASE")
        await g.unlock()
        assert proxy.fired.is_set()
        assert not r.exists("at:cut")
    finally:
        proxy.close()


async def test_fenced_tokens_grow(ar: aredis.Redis) -> None:
    locks = AsyncLockClient(ar)
    g1 = await locks.lock_fenced("at:fenced")
    await g1.unlock()
    g2 = await locks.try_lock_fenced("at:fenced", 1.0)
    assert g2 is not None
    assert g1.token is not None and g2.token is not None and g2.token > g1.token
    await g2.unlock()


async def test_a_dropped_guard_is_released_in_the_background(
    ar: aredis.Redis, r: redis.Redis
) -> None:
    import gc

    locks = AsyncLockClient(ar)
    g = await locks.lock("at:dropped")
    assert r.exists("at:dropped")
    del g
    gc.collect()
    for _ in range(400):
        if not r.exists("at:dropped"):
            break
        await asyncio.sleep(0.005)
    assert not r.exists("at:dropped")


async def test_cancelled_after_the_reply_but_before_recording_gives_it_back(
    ar: aredis.Redis, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The grant arrived; the client is measuring its lease (as after a long
    # wait) when the caller gives up: nothing records it, so it goes back.
    stuck = asyncio.Event()

    async def measuring(*_: object) -> tuple[float, bool, bool]:
        stuck.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    import redis_lock_client._async.acquire as acquire_module

    locks = AsyncLockClient(ar)
    monkeypatch.setattr(acquire_module, "measured_expiry", measuring)
    # Every reply looks late (as after a long wait): its lease is measured.
    monkeypatch.setattr(acquire_module, "monotonic", lambda: time.monotonic() + 3600)
    task = asyncio.create_task(locks.as_owner("w").lock("at:measuring"))
    await asyncio.wait_for(stuck.wait(), 5)
    assert r.hget("at:measuring", "w") == b"1"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(400):
        if not r.exists("at:measuring"):
            break
        await asyncio.sleep(0.005)
    assert not r.exists("at:measuring")
