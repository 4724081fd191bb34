"""Waits in pieces that keep their place, given up by ``LOCK.CANCEL``
(docs/waiting.md): a wait longer than ``wait_piece`` is never overtaken by
a newcomer and no command of it outlives the driver's ``socket_timeout``;
a wait given up (a cancelled task, ``KeyboardInterrupt``) leaves nothing
held and no place kept; a cancel racing a grant leaves one outcome, and a
grant it finds is given back."""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from harness import Server, wait_until
from redis_lock_client import AsyncLockClient, LockClient

PIECE = 0.2  # s: a wait of a second is five pieces


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[aredis.Redis]:
    c = aredis.Redis(port=server.port)
    yield c
    await c.aclose()


def stat(r: redis.Redis, field: str) -> int:
    return int(r.info("lock")[field])


def lock_owners_waiting(r: redis.Redis, name: str) -> list[str]:
    info = LockClient(r).info(name)
    return [w[b"owner"].decode() if b"owner" in w else w["owner"] for w in info["waiters"]]


def nothing_left(r: redis.Redis, name: str, info: str = "LOCK.INFO") -> bool:
    """No waiter and no kept place on ``name``."""
    reply = r.execute_command(info, name)
    if reply is None:
        return True
    fields = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else reply
    return not fields.get(b"waiters") and not fields.get(b"kept")


def test_a_sliced_wait_keeps_its_place_against_newcomers(server: Server, r: redis.Redis) -> None:
    holder = LockClient(r).as_owner("holder").lock("w:fifo")
    # No command of the slicer may wait longer than its driver allows.
    slicer = LockClient(server.client(socket_timeout=0.5), wait_piece=PIECE)
    order: list[str] = []

    def wait_as(client: LockClient, who: str) -> None:
        guard = client.as_owner(who).try_lock("w:fifo", wait=10)
        assert guard is not None
        order.append(who)
        guard.unlock()

    continued = stat(r, "lock_waits_continued")
    threads = [threading.Thread(target=wait_as, args=(slicer, "slicer"))]
    threads[0].start()
    assert wait_until(lambda: lock_owners_waiting(r, "w:fifo") == ["slicer"])
    for i in range(4):  # newcomers keep arriving, between the slicer's pieces too
        time.sleep(0.25)
        threads.append(threading.Thread(target=wait_as, args=(LockClient(r), f"new{i}")))
        threads[-1].start()
        assert wait_until(lambda i=i: f"new{i}" in lock_owners_waiting(r, "w:fifo"))
    time.sleep(0.3)
    holder.unlock()
    for t in threads:
        t.join(10)
    assert order == ["slicer", "new0", "new1", "new2", "new3"]
    assert stat(r, "lock_waits_continued") - continued >= 4  # it went in pieces
    assert nothing_left(r, "w:fifo")


async def test_asyncio_semaphore_and_latch_waits_go_in_pieces(
    server: Server, r: redis.Redis, ar: aredis.Redis
) -> None:
    locks = AsyncLockClient(ar, wait_piece=PIECE)
    sem = locks.semaphore("w:sem")
    await sem.try_set_permits(0)
    first = asyncio.create_task(sem.try_acquire(2, wait=5))
    await asyncio.sleep(0.1)
    other = LockClient(r).semaphore("w:sem")
    second = asyncio.ensure_future(asyncio.to_thread(other.try_acquire, 1, 5))
    await asyncio.sleep(0.8)
    assert not first.done()
    assert await sem.add_permits(2) == 2  # the first in line takes both
    assert await first is True
    await sem.release(1)
    assert await second is True
    latch = locks.count_down_latch("w:latch")
    await latch.try_set_count(1)
    waiting = asyncio.create_task(latch.wait_zero(timeout=5))
    await asyncio.sleep(0.7)
    await latch.count_down()
    assert bool(await waiting)
    permits = locks.permit_semaphore("w:permits")
    await permits.try_set_permits(0)
    taking = asyncio.create_task(permits.try_acquire(1, lease=5, wait=5))
    await asyncio.sleep(0.7)
    await permits.add_permits(1)
    got = await taking
    assert got is not None
    await got.release()
    assert stat(r, "lock_waits_continued") >= 6


async def give_up_async(start: Callable[[], Awaitable[Any]], after: float) -> None:
    task = asyncio.ensure_future(start())
    await asyncio.sleep(after)
    task.cancel()
    # Bounded: a cancellation that does not end the call fails here rather
    # than hanging the suite (seen once in a full run on 8.2).
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:
        task.print_stack()  # where the call went on
    assert done, "the cancelled call did not end"
    with pytest.raises(asyncio.CancelledError):
        task.result()


async def test_a_cancelled_task_leaves_no_waiter_no_place_and_no_hold(
    r: redis.Redis, ar: aredis.Redis
) -> None:
    locks = AsyncLockClient(ar, wait_piece=PIECE)
    held = LockClient(r).as_owner("holder").lock("w:cancel")
    cancelled = stat(r, "lock_waits_cancelled")
    await give_up_async(lambda: locks.lock("w:cancel"), 0.5)
    assert await asyncio.to_thread(wait_until, lambda: nothing_left(r, "w:cancel"))
    assert stat(r, "lock_waits_cancelled") > cancelled
    held.unlock()
    assert not r.exists("w:cancel")  # nobody was left to be granted it
    sem = locks.semaphore("w:sem-cancel")
    await sem.try_set_permits(0)
    await give_up_async(lambda: sem.acquire(1), 0.5)
    latch = locks.count_down_latch("w:latch-cancel")
    await latch.try_set_count(1)
    await give_up_async(lambda: latch.wait_zero(), 0.5)
    permits = locks.permit_semaphore("w:permits-cancel")
    await permits.try_set_permits(0)
    await give_up_async(lambda: permits.acquire(1), 0.5)
    for name, info in [
        ("w:sem-cancel", "LOCK.SEMINFO"),
        ("w:latch-cancel", "LOCK.LATCHINFO"),
        ("w:permits-cancel", "LOCK.SEMINFO"),
    ]:
        gone = await asyncio.to_thread(wait_until, lambda n=name, i=info: nothing_left(r, n, i))
        assert gone, name
    assert await sem.add_permits(1) == 1  # nobody took it
    assert await permits.add_permits(1) == 1


def test_keyboard_interrupt_cancels_a_threaded_wait(server: Server, r: redis.Redis) -> None:
    locks = LockClient(server.client(), wait_piece=PIECE)
    held = LockClient(r).as_owner("holder").lock("w:interrupt")
    sem = locks.semaphore("w:sem-interrupt")
    sem.try_set_permits(0)

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for wait in (lambda: locks.lock("w:interrupt"), lambda: sem.acquire(1)):
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            with pytest.raises(KeyboardInterrupt):
                wait()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert nothing_left(r, "w:interrupt")
    assert nothing_left(r, "w:sem-interrupt", "LOCK.SEMINFO")
    held.unlock()
    assert not r.exists("w:interrupt")
    assert sem.add_permits(1) == 1


async def test_a_cancel_racing_a_grant_leaves_nothing_held(
    r: redis.Redis, ar: aredis.Redis
) -> None:
    # The holder lets go while the waiter's task is cancelled: whichever
    # comes first, the waiter ends with its guard (and gives it back) or
    # with nothing held, never with a grant nobody holds.
    locks = AsyncLockClient(ar, wait_piece=PIECE)
    sync = LockClient(r)
    outcomes = {"granted": 0, "cancelled": 0}
    rng = random.Random(24)
    for i in range(40):
        name = f"w:race:{i}"
        held = sync.as_owner("holder").lock(name)
        task = asyncio.ensure_future(locks.lock(name))
        assert await asyncio.to_thread(wait_until, lambda n=name: len(sync.info(n)["waiters"]) == 1)
        sem = locks.semaphore(f"w:sem-race:{i}")
        await sem.try_set_permits(0)
        sem_task = asyncio.ensure_future(sem.acquire(1))
        await asyncio.sleep(0.01)
        delay = rng.uniform(0, 0.004)
        threading.Timer(delay, held.unlock).start()
        threading.Timer(delay, sync.semaphore(sem.name).release, (1,)).start()
        await asyncio.sleep(rng.uniform(0, 0.004))
        task.cancel()
        sem_task.cancel()
        try:
            guard = await task
            outcomes["granted"] += 1
            await guard.unlock()
        except asyncio.CancelledError:
            outcomes["cancelled"] += 1
        try:
            await sem_task
            await sem.release(1)
        except asyncio.CancelledError:
            pass
        # Whatever happened, nothing is held and nothing waits, soon.
        assert await asyncio.to_thread(
            wait_until, lambda n=name: not r.exists(n) and nothing_left(r, n)
        ), (name, r.hgetall(name))
        assert await asyncio.to_thread(
            wait_until,
            lambda s=sem.name: sync.semaphore(s).available_permits() == 1,
        ), i
    assert sum(outcomes.values()) == 40, outcomes


@pytest.mark.skipif(not hasattr(asyncio.Task, "cancelling"), reason="Python 3.11+")
async def test_a_cancel_the_driver_drops_still_ends_the_wait(
    r: redis.Redis, ar: aredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncio.wait_for before 3.12 (redis-py sends under one when the
    # connection has a socket_timeout) drops a cancel that comes as the send
    # ends: seen once as a wait without end going on after its task was
    # cancelled. Here every send drops the cancel that comes in its wake.
    from redis.asyncio.connection import AbstractConnection

    send = AbstractConnection.send_command

    async def dropping(conn: Any, *args: Any, **kw: Any) -> None:
        await send(conn, *args, **kw)
        if args[0] == "LOCK.AWAIT":  # a piece of the wait
            try:
                await asyncio.sleep(0.3)
            except asyncio.CancelledError:
                pass

    monkeypatch.setattr(AbstractConnection, "send_command", dropping)
    latch = AsyncLockClient(ar, wait_piece=PIECE).count_down_latch("w:latch-lost-cancel")
    await latch.try_set_count(1)
    await give_up_async(lambda: latch.wait_zero(), 0.5)
    gone = await asyncio.to_thread(
        wait_until, lambda: nothing_left(r, "w:latch-lost-cancel", "LOCK.LATCHINFO")
    )
    assert gone
