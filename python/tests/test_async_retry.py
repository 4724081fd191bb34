"""The asyncio client's retries never count twice: the threaded client's
retry tests (test_retry.py), through the same cutting proxy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aredis

from harness import Proxy, Server
from redis_lock_client import AsyncLockClient, OutcomeUnknown


@pytest.fixture
async def via(proxy: Proxy) -> AsyncIterator[AsyncLockClient]:
    c = aredis.Redis(port=proxy.port)
    yield AsyncLockClient(c, retry_interval=0.01)
    await c.aclose()


@pytest.fixture
async def direct(server: Server) -> AsyncIterator[AsyncLockClient]:
    c = aredis.Redis(port=server.port)
    yield AsyncLockClient(c)
    await c.aclose()


async def waiters(locks: AsyncLockClient, name: str, n: int) -> None:
    for _ in range(1000):
        if len((await locks.info(name))["waiters"]) == n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{name}: never {n} waiters")


@pytest.mark.parametrize("cut", ["after", "before"])
async def test_an_acquire_cut_in_transit_is_held_once(
    r: redis.Redis, proxy: Proxy, via: AsyncLockClient, cut: str
) -> None:
    getattr(proxy, f"cut_{cut}")("LOCK.ACQUIRE")
    g = await via.lock(f"art:acq-{cut}")
    assert proxy.fired.is_set()
    assert r.hget(f"art:acq-{cut}", g.owner) == b"1"
    await g.unlock()
    assert not r.exists(f"art:acq-{cut}")


@pytest.mark.parametrize("cut", ["after", "before"])
async def test_a_release_cut_in_transit_releases_once(
    r: redis.Redis, proxy: Proxy, via: AsyncLockClient, cut: str
) -> None:
    name = f"art:rel-{cut}"
    outer = await via.lock(name)
    inner = await via.lock(name)
    getattr(proxy, f"cut_{cut}")("LOCK.RELEASE")
    await inner.unlock()
    assert proxy.fired.is_set()
    assert r.hget(name, outer.owner) == b"1"  # one hold left, not zero
    await outer.unlock()
    assert not r.exists(name)


async def test_a_write_acquire_and_a_read_release_cut_after_they_ran(
    r: redis.Redis, proxy: Proxy, via: AsyncLockClient
) -> None:
    locks = via.as_owner("o")
    proxy.cut_after("LOCK.WACQUIRE")
    g = await locks.write_lock("art:rw")
    assert proxy.fired.is_set() and r.hget("art:rw", "o:write") == b"1"
    await g.unlock()
    outer, inner = await locks.read_lock("art:rw"), await locks.read_lock("art:rw")
    proxy.cut_after("LOCK.RRELEASE")
    await inner.unlock()
    assert proxy.fired.is_set() and r.hget("art:rw", "o") == b"1"
    await outer.unlock()
    assert not r.exists("art:rw")


@pytest.mark.parametrize("cut", ["after", "before"])
async def test_a_wait_cut_adopts_a_grant_or_queues_again(
    r: redis.Redis, proxy: Proxy, via: AsyncLockClient, direct: AsyncLockClient, cut: str
) -> None:
    name = f"art:wait-{cut}"
    h = await direct.as_owner("holder").lock(name)
    getattr(proxy, f"cut_{cut}")("WAIT")
    task = asyncio.create_task(via.as_owner("waiter").try_lock(name, 10.0))
    if cut == "before":
        for _ in range(1000):
            if proxy.fired.is_set():
                break
            await asyncio.sleep(0.005)
    await waiters(direct, name, 1)
    await h.unlock()  # granted to the waiter (after: the proxy drops the reply)
    g = await asyncio.wait_for(task, 10)
    assert proxy.fired.is_set()
    assert g is not None and r.hget(name, "waiter") == b"1"
    await g.unlock()
    assert not r.exists(name)


async def test_without_client_kill_the_wait_is_dequeued_before_the_read_back(
    r: redis.Redis, proxy: Proxy, direct: AsyncLockClient
) -> None:
    r.acl_setuser(
        "nokill", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-client|kill"]
    )
    c = aredis.Redis(port=proxy.port, username="nokill", password="pw")
    waiter = AsyncLockClient(c, retry_interval=0.01).as_owner("waiter")
    h = await direct.as_owner("holder").lock("art:acl")
    proxy.cut_after("WAIT")
    task = asyncio.create_task(waiter.try_lock("art:acl", 10.0))
    await waiters(direct, "art:acl", 1)
    await h.unlock()
    g = await asyncio.wait_for(task, 10)
    assert g is not None and r.hget("art:acl", "waiter") == b"1"
    await g.unlock()
    assert not r.exists("art:acl")
    await c.aclose()


async def test_a_semaphore_release_cut_after_it_ran_is_not_resent(
    r: redis.Redis, proxy: Proxy, via: AsyncLockClient
) -> None:
    sem = via.semaphore("asem:cut")
    await sem.try_set_permits(0)
    proxy.cut_after("LOCK.SEMRELEASE")
    with pytest.raises(OutcomeUnknown):
        await sem.release()
    assert r.get("asem:cut") == b"1"  # ran once, not sent again
