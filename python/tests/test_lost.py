"""The lost signal within milliseconds: a held lock or permit forced,
deleted or taken away on the server is told within 50 ms (client-side
tracking, one connection pair per client), far before the next renewal of
a 30 s lease; the client's own renewals, re-entries and releases raise no
false alarm; renewals stay the fallback.

What delays the signal on a loaded machine is not the protocol: on the
shared 2-core machine (load average 13-15), 40 rounds of ``LOCK.FORCE``
measured a median of 0.5-0.7 ms and a tail of 83-176 ms on all three
servers, spent before the listener thread even ran (the invalidation was
queued on its socket) and in the round trip of its re-read. So each round
is judged against a **baseline** measured in the same round: a bare
redis-py thread subscribed to a channel that the take publishes to in the
same ``MULTI`` (the server writes both at once), which then makes one
round trip, as the listener re-reads the key before it tells. Every round
must tell within 50 ms of that baseline (and within ``LATE`` at worst)."""

from __future__ import annotations

import asyncio
import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from harness import Server, wait_until
from redis_lock_client import AsyncLockClient, LockClient, LostReason

SOON = 0.05  # seconds: the promise, beyond the machine's own delay (the baseline)
LATE = 1.0  # every round: a renewal of the default lease comes after 10 s
ROUNDS = 5


def assert_soon(rounds: list[tuple[float, float]]) -> None:
    """Each round (told after, baseline): within ``SOON`` of the baseline."""
    ms = ", ".join(f"{t * 1000:.1f} (baseline {b * 1000:.1f})" for t, b in rounds)
    assert all(t <= SOON + max(b, 0.0) and t <= LATE for t, b in rounds), f"told after {ms} ms"


class Baseline:
    """A bare listener woken by the same server write as the client's
    tracking listener (see the module's docstring)."""

    CHANNEL = "lost:baseline"

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.pinger = redis.Redis(connection_pool=r.connection_pool)
        self.pubsub = r.pubsub()
        self.pubsub.subscribe(self.CHANNEL)
        assert self.pubsub.get_message(timeout=2.0) is not None  # subscribed
        self.heard: queue.Queue[float] = queue.Queue()
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        while True:
            try:
                msg = self.pubsub.get_message(timeout=5.0)
            except Exception:
                return
            if msg is not None and msg["type"] == "message":
                self.pinger.ping()
                self.heard.put(time.monotonic())

    def take(self, *args: Any) -> float:
        """Runs the take with the publish in one transaction: when it was sent."""
        pipe = self.r.pipeline(transaction=True)
        pipe.execute_command(*args)
        pipe.publish(self.CHANNEL, "taken")
        taken = time.monotonic()
        pipe.execute()
        return taken

    def since(self, taken: float) -> float:
        return self.heard.get(timeout=2.0) - taken

    def close(self) -> None:
        self.pubsub.close()


@pytest.fixture
def baseline(r: redis.Redis) -> Iterator[Baseline]:
    b = Baseline(r)
    yield b
    b.close()


def tracking_connections(r: redis.Redis) -> int:
    return sum("t" in c.get("flags", "") for c in r.client_list())


def warm_up(lock: Callable[[str], object], r: redis.Redis) -> object:
    """The client's tracking pair connects at its first grant (a one-time
    cost, tens of ms on a loaded machine): held, until it is up."""
    held = lock(f"lost:warm:{time.monotonic()}")
    assert wait_until(lambda: tracking_connections(r) > 0, 2.0)
    return held


def told_within(event_is_set: Callable[[], bool], since: float) -> float:
    assert wait_until(event_is_set, 2.0, 0.001), "never told"
    return time.monotonic() - since


@pytest.mark.parametrize(
    "take",
    [["LOCK.FORCE", "{k}"], ["DEL", "{k}"], ["LOCK.RELEASE", "{k}", "{owner}"]],
    ids=["force", "del", "released-elsewhere"],
)
def test_a_lock_taken_away_is_told_within_50_ms(
    r: redis.Redis, baseline: Baseline, take: list[str]
) -> None:
    locks = LockClient(r)
    warm_up(locks.lock, r)
    times = []
    for round in range(ROUNDS):
        name = f"lost:{take[0]}:{round}"
        told: list[LostReason] = []
        g = locks.lock(name, on_lost=told.append)
        time.sleep(0.017 * round)  # at different points after the grant
        taken = baseline.take(*[a.format(k=name, owner=g.owner) for a in take])
        times.append((told_within(g.lost.is_set, taken), baseline.since(taken)))
        assert g.lost_reason == LostReason(LostReason.NOT_HELD)
        assert told == [LostReason(LostReason.NOT_HELD)]
    assert_soon(times)


def test_read_write_holds_and_permits_are_told_within_50_ms(
    r: redis.Redis, baseline: Baseline
) -> None:
    locks = LockClient(r)
    gr = locks.as_owner("a").read_lock("lost:rw-r")
    gw = locks.as_owner("w").write_lock("lost:rw-w")
    sem = locks.permit_semaphore("lost:sem")
    sem.try_set_permits(2)
    permits = sem.acquire(2)
    time.sleep(0.05)
    times = []
    for take, is_set in [
        (["LOCK.FORCE", "lost:rw-r"], gr.lost.is_set),
        (["LOCK.FORCE", "lost:rw-w"], gw.lost.is_set),
        (["ZREM", "{lost:sem}:timeout", bytes.fromhex(permits.ids[0])], permits.lost.is_set),
    ]:
        taken = baseline.take(*take)
        times.append((told_within(is_set, taken), baseline.since(taken)))
    assert_soon(times)
    assert permits.lost_ids == [permits.ids[0]]


def test_a_callers_lease_ending_is_told_within_50_ms(r: redis.Redis) -> None:
    locks = LockClient(r)
    guards = [locks.try_lock(f"lost:lease-{i}", 0, lease=0.2 + 0.05 * i) for i in range(3)]
    times = []
    for i, g in enumerate(guards):
        assert g is not None
        assert wait_until(lambda i=i: not r.exists(f"lost:lease-{i}"), 2.0, 0.001)
        times.append(told_within(g.lost.is_set, time.monotonic()))
        assert g.lost_reason == LostReason(LostReason.LEASE_EXPIRED)
    # No write to share with a baseline (the server's timer ends the lease):
    # the median of the rounds, every one within LATE.
    assert statistics.median(times) <= SOON and max(times) <= LATE, times


def test_renewals_re_entries_and_releases_raise_no_false_alarm(r: redis.Redis) -> None:
    # Renewed every 0.5 s: a lease of 0.6 s could really end while a loaded
    # machine starves the renewal threads for 0.4 s (seen on Valkey).
    locks = LockClient(r, watchdog_lease=1.5)
    g = locks.lock("lost:job")
    started = time.monotonic()
    while time.monotonic() - started < 2.0:
        time.sleep(0.3)
        again = locks.lock("lost:job")
        time.sleep(0.05)
        again.unlock()
        assert not g.is_lost(), g.lost_reason
    for i in range(20):
        with locks.lock(f"lost:short-{i}"), locks.lock("lost:kept"):
            pass
    assert not g.is_lost()
    g.unlock()


def test_one_tracking_pair_per_client_which_comes_back(server: Server, r: redis.Redis) -> None:
    before = tracking_connections(r)
    locks = LockClient(server.client())
    guards = [locks.lock(f"lost:many-{i}") for i in range(5)]
    assert wait_until(lambda: tracking_connections(r) == before + 1, 2.0)
    time.sleep(0.1)
    assert tracking_connections(r) == before + 1
    # Cut the pair: it comes back, and a loss in the gap is still told.
    for c in r.client_list():
        if "t" in c.get("flags", "") or "P" in c.get("flags", ""):
            r.client_kill_filter(_id=c["id"])
    r.execute_command("LOCK.FORCE", "lost:many-3")
    assert guards[3].lost.wait(2.0)
    taken = time.monotonic()
    r.execute_command("LOCK.FORCE", "lost:many-1")
    assert told_within(guards[1].lost.is_set, taken) <= LATE
    assert [g.is_lost() for g in guards] == [False, True, False, True, False]


def test_without_tracking_a_force_waits_for_the_renewal(r: redis.Redis) -> None:
    locks = LockClient(r, track_locks=False)
    g = locks.lock("lost:untracked")
    r.execute_command("LOCK.FORCE", "lost:untracked")
    assert not g.lost.wait(0.3)


def test_a_user_denied_client_tracking_falls_back_to_renewals(
    r: redis.Redis, server: Server
) -> None:
    r.acl_setuser(
        "notrack",
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-client|tracking"],
    )
    locks = LockClient(server.client(username="notrack", password="pw"), watchdog_lease=0.9)
    g = locks.lock("lost:denied")
    time.sleep(0.2)
    r.execute_command("LOCK.FORCE", "lost:denied")
    assert g.lost.wait(1.0)  # the next renewal (every 0.3 s)
    assert g.lost_reason == LostReason(LostReason.NOT_HELD)


async def test_asyncio_is_told_within_50_ms(
    server: Server, r: redis.Redis, baseline: Baseline
) -> None:
    ar = aredis.Redis(port=server.port)
    locks = AsyncLockClient(ar)
    try:
        # The client's tracking pair connects at its first grant: up first.
        held = await locks.lock("alost:warm")
        for _ in range(400):
            if tracking_connections(r):
                break
            await asyncio.sleep(0.005)
        assert held is not None and tracking_connections(r)
        times = []
        for round in range(ROUNDS):
            g = await locks.lock(f"alost:{round}")
            await asyncio.sleep(0.017 * round)
            taken = baseline.take("LOCK.FORCE", f"alost:{round}")
            await asyncio.wait_for(g.lost.wait(), 2.0)
            times.append((time.monotonic() - taken, baseline.since(taken)))
        sem = locks.permit_semaphore("alost:sem")
        await sem.try_set_permits(1)
        permits = await sem.acquire()
        await asyncio.sleep(0.05)
        taken = baseline.take("DEL", "alost:sem", "{alost:sem}:timeout")
        await asyncio.wait_for(permits.lost.wait(), 2.0)
        times.append((time.monotonic() - taken, baseline.since(taken)))
        assert_soon(times)
    finally:
        await ar.aclose()
