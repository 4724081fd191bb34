"""Semaphores (``LOCK.SEM*``) and leased permits (``LOCK.PERMIT*``) through
the client: counts, FIFO waiting server-side, hand-over on release, the
watchdog renewing permits past their lease, the lost signal when a permit
goes behind the guard's back, and the asyncio forms."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from harness import Proxy, Server, wait_until
from redis_lock_client import (
    AsyncLockClient,
    ConnectionLost,
    LockClient,
    LostReason,
    OutcomeUnknown,
    Permits,
    PermitsNotHeld,
    ServerError,
)


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[aredis.Redis]:
    c = aredis.Redis(port=server.port)
    yield c
    await c.aclose()


def waiters(r: redis.Redis, name: str) -> int:
    info = LockClient(r).semaphore(name).info()
    return 0 if info is None else len(info["waiters"])


def member(pid: str) -> bytes:
    return bytes.fromhex(pid)


# ---------------------------------------------------------------------------
# RSemaphore
# ---------------------------------------------------------------------------


def test_set_add_available_and_drain(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:counts")
    assert sem.available_permits() == 0
    assert sem.try_set_permits(3)
    assert not sem.try_set_permits(5)  # exists: unchanged
    assert r.get("sem:counts") == b"3"
    assert sem.add_permits(2) == 5
    assert sem.add_permits(-1) == 4
    assert sem.available_permits() == 4
    assert sem.drain_permits() == 4
    assert sem.available_permits() == 0
    assert sem.drain_permits() == 0
    info = sem.info()
    assert info is not None and info["available"] == 0 and info["waiters"] == []


def test_set_with_a_ttl_expires(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:ttl")
    assert sem.try_set_permits(2, ttl=0.3)
    ttl = r.pttl("sem:ttl")
    assert 0 < ttl <= 300
    assert wait_until(lambda: not r.exists("sem:ttl"), 3.0)
    assert sem.available_permits() == 0


def test_try_acquire_and_release(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:try")
    sem.try_set_permits(2)
    assert sem.try_acquire()
    assert not sem.try_acquire(2)  # one free: not taken, nothing taken
    assert sem.available_permits() == 1
    assert sem.try_acquire(1, wait=0.1)
    started = time.monotonic()
    assert not sem.try_acquire(1, wait=0.2)
    assert time.monotonic() - started >= 0.19
    assert sem.release(2) == 2
    sem.acquire(2)
    assert sem.available_permits() == 0
    assert sem.release() == 1


def test_bad_arguments_never_reach_the_server(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:bad")
    with pytest.raises(ValueError):
        sem.try_acquire(0)
    with pytest.raises(ValueError):
        sem.release(-1)
    with pytest.raises(ValueError):
        sem.try_set_permits(-1)
    r.hset("sem:wrongtype", "f", "v")
    with pytest.raises(ServerError, match="WRONGTYPE"):
        LockClient(r).semaphore("sem:wrongtype").try_acquire()


def test_acquire_waits_and_release_hands_over(r: redis.Redis) -> None:
    locks = LockClient(r)
    sem = locks.semaphore("sem:handover")
    sem.try_set_permits(0)
    got = threading.Event()
    t = threading.Thread(target=lambda: (sem.acquire(), got.set()))
    t.start()
    assert wait_until(lambda: waiters(r, "sem:handover") == 1)
    assert not got.is_set()
    released = time.monotonic()
    sem.release()
    assert got.wait(2.0)
    assert time.monotonic() - released < 1.0
    t.join(2.0)
    # Handed over: the waiter has it, nothing is left free.
    assert sem.available_permits() == 0
    assert waiters(r, "sem:handover") == 0


def test_fifo_a_newcomer_never_overtakes_a_larger_request(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:fifo")
    sem.try_set_permits(0)
    order: list[str] = []
    lock = threading.Lock()

    def take(who: str, n: int) -> None:
        sem.acquire(n)
        with lock:
            order.append(who)

    big = threading.Thread(target=take, args=("big", 2))
    big.start()
    assert wait_until(lambda: waiters(r, "sem:fifo") == 1)
    small = threading.Thread(target=take, args=("small", 1))
    small.start()
    assert wait_until(lambda: waiters(r, "sem:fifo") == 2)
    # One free: enough for the newcomer, but the head wants two.
    sem.release()
    assert not sem.try_acquire()  # nor does a try overtake the queue
    time.sleep(0.2)
    assert order == []
    assert sem.available_permits() == 1
    sem.release()
    big.join(2.0)
    assert order == ["big"]
    sem.release()
    small.join(2.0)
    assert order == ["big", "small"]
    assert sem.available_permits() == 0


def test_many_waiters_are_served_in_arrival_order(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:order")
    sem.try_set_permits(0)
    order: list[int] = []
    threads = []
    for i in range(5):
        t = threading.Thread(target=lambda i=i: (sem.acquire(), order.append(i)))
        t.start()
        threads.append(t)
        assert wait_until(lambda i=i: waiters(r, "sem:order") == i + 1)
    for i in range(5):
        sem.release()
        assert wait_until(lambda i=i: len(order) == i + 1, 2.0)
    for t in threads:
        t.join(2.0)
    assert order == [0, 1, 2, 3, 4]


def test_a_timed_out_wait_leaves_the_queue(r: redis.Redis) -> None:
    sem = LockClient(r).semaphore("sem:timeout")
    sem.try_set_permits(0)
    assert not sem.try_acquire(1, wait=0.15)
    assert waiters(r, "sem:timeout") == 0
    assert sem.release() == 1


# ---------------------------------------------------------------------------
# RPermitExpirableSemaphore
# ---------------------------------------------------------------------------


def test_permits_have_ids_and_are_released(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:ids")
    assert sem.try_set_permits(3)
    with sem.acquire(2) as permits:
        assert isinstance(permits, Permits)
        assert len(permits.ids) == 2 and all(len(i) == 32 for i in permits.ids)
        stored = r.zrange("{pm:ids}:timeout", 0, -1, withscores=True)
        assert sorted(m for m, _ in stored) == sorted(member(i) for i in permits.ids)
        assert sem.available_permits() == 1
        info = sem.info()
        assert info is not None
        assert sorted(i for i, _ in info["permits"]) == sorted(permits.ids)
        assert not permits.lost.is_set()
    assert r.zcard("{pm:ids}:timeout") == 0
    assert sem.available_permits() == 3
    with pytest.raises(PermitsNotHeld):
        permits.release()


def test_try_acquire_permits(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:try")
    sem.try_set_permits(1)
    held = sem.try_acquire()
    assert held is not None
    assert sem.try_acquire() is None
    started = time.monotonic()
    assert sem.try_acquire(wait=0.2) is None
    assert time.monotonic() - started >= 0.19
    held.release()
    again = sem.try_acquire(1, lease=5, wait=0.1)
    assert again is not None
    (score,) = [s for _, s in r.zrange("{pm:try}:timeout", 0, -1, withscores=True)]
    now_ms = r.time()[0] * 1000
    assert now_ms + 3000 < score <= now_ms + 6000
    again.release()


def test_release_of_a_permit_hands_it_to_the_waiter(r: redis.Redis) -> None:
    locks = LockClient(r)
    sem = locks.permit_semaphore("pm:handover")
    sem.try_set_permits(1)
    first = sem.acquire()
    got: list[Permits] = []
    t = threading.Thread(target=lambda: got.append(sem.acquire()))
    t.start()
    assert wait_until(lambda: waiters(r, "pm:handover") == 1)
    first.release()
    t.join(2.0)
    assert len(got) == 1 and got[0].ids != first.ids
    assert sem.available_permits() == 0
    assert r.zrange("{pm:handover}:timeout", 0, -1) == [member(got[0].ids[0])]
    got[0].release()
    assert sem.available_permits() == 1


def test_watchdog_keeps_a_permit_past_its_lease(r: redis.Redis) -> None:
    # 0.6 s: a 2-core machine under load can stall a process for 0.2 s.
    locks = LockClient(r, watchdog_lease=0.6)
    sem = locks.permit_semaphore("pm:dog")
    sem.try_set_permits(1)
    with sem.acquire() as permits:
        (pid,) = permits.ids
        time.sleep(1.8)  # three leases
        assert not permits.lost.is_set(), permits.lost_reason
        score = r.zscore("{pm:dog}:timeout", member(pid))
        assert score is not None
        sec, usec = r.time()
        assert score > sec * 1000 + usec // 1000
        assert sem.available_permits() == 0
    assert sem.available_permits() == 1


def test_a_lease_granted_after_a_long_wait_runs_from_the_grant(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:late")
    sem.try_set_permits(1)
    first = sem.acquire()
    threading.Timer(1.0, first.release).start()
    started = time.monotonic()
    # Granted after ~1 s, longer than its lease: measured on the server,
    # not counted from the request (which would call it lost at once).
    late = sem.try_acquire(lease=0.6, wait=5)
    granted = time.monotonic()
    assert late is not None
    assert granted - started >= 0.9
    assert not late.lost.is_set(), late.lost_reason
    assert late.lost.wait(3.0)
    assert time.monotonic() - granted >= 0.4
    assert late.lost_reason == LostReason(LostReason.LEASE_EXPIRED)


def test_a_watchdog_permit_granted_after_a_long_wait_is_kept(r: redis.Redis) -> None:
    locks = LockClient(r, watchdog_lease=0.6)
    sem = locks.permit_semaphore("pm:latedog")
    sem.try_set_permits(1)
    first = sem.acquire()
    threading.Timer(1.0, first.release).start()
    with sem.acquire() as late:
        time.sleep(1.2)  # two leases
        assert not late.lost.is_set(), late.lost_reason
        assert r.zscore("{pm:latedog}:timeout", member(late.ids[0])) is not None


def test_a_failed_lease_measurement_keeps_the_permit_releasable(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A grant later than a third of the lease is measured (TIME, ZMSCORE);
    # when that fails the permit is not called lost at once (it was
    # granted), and the release gives it back.
    locks = LockClient(r, watchdog_lease=3.0)
    sem = locks.permit_semaphore("pm:unmeasured")
    sem.try_set_permits(1)
    first = sem.acquire()
    measured = []
    counted = locks._engine.counted
    simple = counted.simple

    def no_time(name: str, args: list[Any], *rest: Any, **kw: Any) -> Any:
        if args[0] == "TIME":
            measured.append(name)
            raise ConnectionLost("TIME failed (test)")
        return simple(name, args, *rest, **kw)

    monkeypatch.setattr(counted, "simple", no_time)
    threading.Timer(1.5, first.release).start()
    started = time.monotonic()
    late = sem.try_acquire(wait=5)
    assert late is not None
    assert time.monotonic() - started >= 1.0  # later than a third of the lease
    assert measured
    assert not late.lost.is_set(), late.lost_reason
    assert sem.available_permits() == 0
    late.release()
    assert sem.available_permits() == 1


def test_permits_granted_to_an_interrupted_acquire_are_given_back(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = LockClient(r)
    sem = locks.permit_semaphore("pm:interrupted")
    sem.try_set_permits(2)
    engine = locks._engine
    hold = engine.hold

    def interrupted(*args: Any, **kw: Any) -> Any:
        # Interrupted once a permit is recorded, before the guard has them.
        monkeypatch.setattr(engine, "hold", hold)
        hold(*args, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "hold", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sem.try_acquire(2)
    assert sem.available_permits() == 2
    assert not engine.registry.entries()
    with sem.acquire(2):  # the next acquire works as usual
        assert sem.available_permits() == 0
    assert sem.available_permits() == 2


def test_a_caller_lease_ends_and_lost_is_set(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:lease")
    sem.try_set_permits(1)
    permits = sem.try_acquire(lease=0.3)
    assert permits is not None
    assert permits.lost.wait(3.0)
    assert permits.lost_reason == LostReason(LostReason.LEASE_EXPIRED)
    # The server reclaims it at its deadline (LOCK.SEMAVAILABLE counts it
    # from the deadline on; the timer removes the member a moment later).
    assert wait_until(lambda: sem.available_permits() == 1)
    assert wait_until(lambda: r.zcard("{pm:lease}:timeout") == 0, 2.0)
    with pytest.raises(PermitsNotHeld):
        permits.release()


def test_lost_when_the_member_is_removed_behind_the_guard(r: redis.Redis) -> None:
    locks = LockClient(r, watchdog_lease=0.6)
    sem = locks.permit_semaphore("pm:zrem")
    sem.try_set_permits(2)
    told: list[LostReason] = []
    permits = sem.acquire(2, on_lost=told.append)
    gone = permits.ids[0]
    assert r.zrem("{pm:zrem}:timeout", member(gone)) == 1
    # Told at the next renewal (every lease/3).
    assert permits.lost.wait(2.0)
    assert permits.lost_reason == LostReason(LostReason.NOT_HELD)
    assert permits.lost_ids == [gone]
    assert told == [LostReason(LostReason.NOT_HELD)]
    # The other permit is still released; the gone one is named.
    with pytest.raises(PermitsNotHeld) as e:
        permits.release()
    assert e.value.ids == [gone]
    assert r.zcard("{pm:zrem}:timeout") == 0
    assert sem.available_permits() == 1  # the removed one never came back


def test_lost_when_released_by_id_from_another_connection(r: redis.Redis, server: Server) -> None:
    locks = LockClient(r, watchdog_lease=0.6)
    sem = locks.permit_semaphore("pm:byid")
    sem.try_set_permits(2)
    permits = sem.acquire(2)
    # A callback may read the guard (it is not called under its mutex).
    seen: list[LostReason | None] = []
    permits.add_lost_callback(lambda why: seen.append(permits.lost_reason))
    other = server.client()
    try:
        assert LockClient(other).permit_semaphore("pm:byid").release(permits.ids[1]) == 1
        assert permits.lost.wait(2.0)
        assert wait_until(lambda: seen == [LostReason(LostReason.NOT_HELD)], 1.0)
        assert permits.lost_ids == [permits.ids[1]]
        with pytest.raises(PermitsNotHeld) as e:
            permits.release()
        assert e.value.ids == [permits.ids[1]]
        assert sem.available_permits() == 2
    finally:
        other.close()


def test_release_finds_a_permit_gone_before_the_watchdog_does(r: redis.Redis) -> None:
    # A long watchdog lease: the release is the first to learn.
    sem = LockClient(r, watchdog_lease=30).permit_semaphore("pm:found")
    sem.try_set_permits(3)
    permits = sem.acquire(3)
    r.execute_command("LOCK.PERMITRELEASE", "pm:found", permits.ids[2])
    assert not permits.lost.is_set()
    with pytest.raises(PermitsNotHeld) as e:
        permits.release()
    assert e.value.ids == [permits.ids[2]]
    assert permits.lost.is_set()
    assert sem.available_permits() == 3
    assert r.zcard("{pm:found}:timeout") == 0


def test_release_by_unknown_id_is_refused(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:unknown")
    sem.try_set_permits(1)
    with pytest.raises(ServerError, match="is not held"):
        sem.release("0" * 32)
    with pytest.raises(ServerError, match="32 hex"):
        sem.release("xyz")
    assert sem.available_permits() == 1


def test_a_guard_leaving_with_an_exception_releases_quietly(r: redis.Redis) -> None:
    sem = LockClient(r).permit_semaphore("pm:exc")
    sem.try_set_permits(1)
    with pytest.raises(KeyError):
        with sem.acquire() as permits:
            r.zrem("{pm:exc}:timeout", member(permits.ids[0]))
            raise KeyError("boom")


def test_seminfo_in_resp3(server: Server) -> None:
    c = server.client(protocol=3)
    try:
        sem = LockClient(c).permit_semaphore("pm:resp3")
        sem.try_set_permits(2)
        with sem.acquire() as permits:
            info = sem.info()
            assert info is not None
            assert info["available"] == 1
            assert [i for i, _ in info["permits"]] == list(permits.ids)
    finally:
        c.close()


def test_a_failed_release_is_not_resent_blindly(r: redis.Redis, server: Server) -> None:
    proxy = Proxy(server.port)
    c = redis.Redis(port=proxy.port)
    try:
        sem = LockClient(c).semaphore("sem:cut")
        sem.try_set_permits(0)
        proxy.cut_after("LOCK.SEMRELEASE")
        with pytest.raises(OutcomeUnknown):
            sem.release()
        # It ran once (the reply was lost), and was not sent again.
        assert LockClient(r).semaphore("sem:cut").available_permits() == 1
    finally:
        c.close()
        proxy.close()


# ---------------------------------------------------------------------------
# asyncio
# ---------------------------------------------------------------------------


async def test_async_semaphore_waits_and_hands_over(ar: aredis.Redis, r: redis.Redis) -> None:
    sem = AsyncLockClient(ar).semaphore("asem:handover")
    assert await sem.try_set_permits(1)
    await sem.acquire()
    assert not await sem.try_acquire()
    waiter = asyncio.create_task(sem.acquire())
    for _ in range(400):
        if waiters(r, "asem:handover") == 1:
            break
        await asyncio.sleep(0.005)
    assert not waiter.done()
    assert await sem.release() == 1
    await asyncio.wait_for(waiter, 2.0)
    assert await sem.available_permits() == 0
    assert await sem.add_permits(2) == 2
    assert await sem.drain_permits() == 2


async def test_async_cancelled_wait_leaves_the_queue(ar: aredis.Redis, r: redis.Redis) -> None:
    sem = AsyncLockClient(ar).semaphore("asem:cancel")
    await sem.try_set_permits(0)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(sem.acquire(), 0.2)
    assert wait_until(lambda: waiters(r, "asem:cancel") == 0, 2.0)
    assert await sem.release() == 1
    assert await sem.available_permits() == 1


async def test_async_permits_watchdog_and_lost(ar: aredis.Redis, r: redis.Redis) -> None:
    locks = AsyncLockClient(ar, watchdog_lease=0.6)
    sem = locks.permit_semaphore("apm:dog")
    await sem.try_set_permits(2)
    async with await sem.acquire() as permits:
        await asyncio.sleep(1.8)  # three leases
        assert not permits.lost.is_set(), (permits.lost_reason, permits.lost_ids)
        assert r.zscore("{apm:dog}:timeout", member(permits.ids[0])) is not None
    assert await sem.available_permits() == 2
    permits2 = await sem.acquire(2)
    r.zrem("{apm:dog}:timeout", member(permits2.ids[0]))
    await asyncio.wait_for(permits2.lost.wait(), 2.0)
    assert permits2.lost_reason == LostReason(LostReason.NOT_HELD)
    with pytest.raises(PermitsNotHeld):
        await permits2.release()
    assert await sem.available_permits() == 1


async def test_async_permit_try_and_handover(ar: aredis.Redis, r: redis.Redis) -> None:
    sem = AsyncLockClient(ar).permit_semaphore("apm:try")
    await sem.try_set_permits(1)
    first = await sem.try_acquire(lease=5)
    assert first is not None
    assert await sem.try_acquire(wait=0.1) is None
    waiter = asyncio.create_task(sem.acquire())
    for _ in range(400):
        if waiters(r, "apm:try") == 1:
            break
        await asyncio.sleep(0.005)
    await first.release()
    second = await asyncio.wait_for(waiter, 2.0)
    assert second.ids != first.ids
    info = await sem.info()
    assert info is not None and [i for i, _ in info["permits"]] == list(second.ids)
    await second.release()
    assert await sem.available_permits() == 1


async def test_async_lease_ends_and_lost_is_set(ar: aredis.Redis) -> None:
    sem = AsyncLockClient(ar).permit_semaphore("apm:lease")
    await sem.try_set_permits(1)
    permits = await sem.try_acquire(lease=0.3)
    assert permits is not None
    await asyncio.wait_for(permits.lost.wait(), 3.0)
    assert permits.lost_reason == LostReason(LostReason.LEASE_EXPIRED)
    for _ in range(200):
        if await sem.available_permits() == 1:
            break
        await asyncio.sleep(0.01)
    assert await sem.available_permits() == 1


async def test_async_a_failed_lease_measurement_keeps_the_permit_releasable(
    ar: aredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = AsyncLockClient(ar, watchdog_lease=3.0)
    sem = locks.permit_semaphore("apm:unmeasured")
    await sem.try_set_permits(1)
    first = await sem.acquire()
    measured = []
    counted = locks._engine.counted
    simple = counted.simple

    async def no_time(name: str, args: list[Any], *rest: Any, **kw: Any) -> Any:
        if args[0] == "TIME":
            measured.append(name)
            raise ConnectionLost("TIME failed (test)")
        return await simple(name, args, *rest, **kw)

    monkeypatch.setattr(counted, "simple", no_time)

    async def release_later() -> None:
        await asyncio.sleep(1.5)
        await first.release()

    releaser = asyncio.create_task(release_later())
    started = time.monotonic()
    late = await sem.try_acquire(wait=5)
    await releaser
    assert late is not None
    assert time.monotonic() - started >= 1.0  # later than a third of the lease
    assert measured
    assert not late.lost.is_set(), late.lost_reason
    assert await sem.available_permits() == 0
    await late.release()
    assert await sem.available_permits() == 1


async def test_async_permits_dropped_on_another_thread_are_given_back(ar: aredis.Redis) -> None:
    # Garbage collection may run on any thread: the guard's release is
    # handed to its loop, so the permits are not renewed for ever.
    sem = AsyncLockClient(ar).permit_semaphore("apm:dropped")
    await sem.try_set_permits(2)
    guard = await sem.acquire(2)
    assert await sem.available_permits() == 0
    holder = [guard]
    del guard
    dropper = threading.Thread(target=holder.clear)
    dropper.start()
    dropper.join()
    for _ in range(200):
        if await sem.available_permits() == 2:
            break
        await asyncio.sleep(0.01)
    assert await sem.available_permits() == 2


async def test_async_permits_granted_to_a_cancelled_acquire_are_given_back(
    ar: aredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = AsyncLockClient(ar)
    sem = locks.permit_semaphore("apm:cancelled")
    await sem.try_set_permits(2)
    engine = locks._engine
    hold = engine.hold

    def cancelled(*args: Any, **kw: Any) -> Any:
        # Interrupted once a permit is recorded, before the guard has them.
        monkeypatch.setattr(engine, "hold", hold)
        hold(*args, **kw)
        raise asyncio.CancelledError

    monkeypatch.setattr(engine, "hold", cancelled)
    with pytest.raises(asyncio.CancelledError):
        await sem.try_acquire(2)
    assert not engine.registry.entries()
    for _ in range(200):
        if await sem.available_permits() == 2:
            break
        await asyncio.sleep(0.01)
    assert await sem.available_permits() == 2
