"""Retries never count twice, through a proxy that cuts connections just
after (or before) a command reached the server."""

from __future__ import annotations

import threading

import redis

from harness import Proxy, wait_until
from redis_lock_client import LockClient


def client(proxy: Proxy) -> LockClient:
    return LockClient(redis.Redis(port=proxy.port), retry_interval=0.01)


def test_control_a_naive_resend_counts_twice(r: redis.Redis, proxy: Proxy) -> None:
    via = redis.Redis(port=proxy.port, retry=None)
    proxy.cut_after("LOCK.ACQUIRE")
    try:
        via.execute_command("LOCK.ACQUIRE", "rt:naive", "o", 30000)
        raise AssertionError("the proxy did not cut")
    except redis.exceptions.ConnectionError:
        pass
    assert proxy.fired.is_set()
    via.execute_command("LOCK.ACQUIRE", "rt:naive", "o", 30000)  # the naive resend
    assert r.hget("rt:naive", "o") == b"2"


def test_acquire_cut_after_it_ran_is_not_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = client(proxy)
    proxy.cut_after("LOCK.ACQUIRE")
    g = locks.lock("rt:after")
    assert proxy.fired.is_set()
    assert r.hget("rt:after", g.owner) == b"1"
    g.unlock()
    assert not r.exists("rt:after")


def test_acquire_cut_before_it_ran_is_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = client(proxy)
    proxy.cut_before("LOCK.ACQUIRE")
    g = locks.lock("rt:before")
    assert proxy.fired.is_set()
    assert r.hget("rt:before", g.owner) == b"1"
    g.unlock()
    assert not r.exists("rt:before")


def test_release_cut_after_it_ran_is_not_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = client(proxy)
    outer = locks.lock("rt:rel")
    inner = locks.lock("rt:rel")
    proxy.cut_after("LOCK.RELEASE")
    inner.unlock()
    assert proxy.fired.is_set()
    assert r.hget("rt:rel", outer.owner) == b"1"  # one hold left, not zero
    outer.unlock()
    assert not r.exists("rt:rel")


def test_release_cut_before_it_ran_is_resent(r: redis.Redis, proxy: Proxy) -> None:
    locks = client(proxy)
    g = locks.lock("rt:relb")
    proxy.cut_before("LOCK.RELEASE")
    g.unlock()
    assert proxy.fired.is_set()
    assert not r.exists("rt:relb")


def test_a_wait_cut_as_the_lock_was_granted_adopts_the_grant(r: redis.Redis, proxy: Proxy) -> None:
    holder = LockClient(r).as_owner("holder")
    h = holder.lock("rt:wait")
    waiter = client(proxy).as_owner("waiter")
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(waiter.try_lock("rt:wait", 10.0)))
    proxy.cut_after("WAIT")
    t.start()
    assert wait_until(lambda: len(holder.info("rt:wait")["waiters"]) == 1)
    h.unlock()  # granted to the waiter; the proxy drops the reply and cuts
    t.join(10)
    assert proxy.fired.is_set()
    g = got[0]
    assert g is not None
    assert r.hget("rt:wait", "waiter") == b"1"
    g.unlock()  # type: ignore[attr-defined]
    assert not r.exists("rt:wait")


def test_a_wait_cut_without_a_grant_queues_again(r: redis.Redis, proxy: Proxy) -> None:
    holder = LockClient(r).as_owner("holder")
    h = holder.lock("rt:requeue")
    waiter = client(proxy).as_owner("waiter")
    got: list[object] = []
    proxy.cut_before("WAIT")
    t = threading.Thread(target=lambda: got.append(waiter.try_lock("rt:requeue", 10.0)))
    t.start()
    assert wait_until(lambda: proxy.fired.is_set())
    assert wait_until(lambda: len(holder.info("rt:requeue")["waiters"]) == 1)
    h.unlock()
    t.join(10)
    g = got[0]
    assert g is not None
    assert r.hget("rt:requeue", "waiter") == b"1"
    g.unlock()  # type: ignore[attr-defined]


def test_without_client_kill_the_wait_is_dequeued_before_the_read_back(
    server: object, r: redis.Redis, proxy: Proxy
) -> None:
    r.acl_setuser(
        "nokill", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-client|kill"]
    )
    holder = LockClient(r).as_owner("holder")
    h = holder.lock("rt:acl")
    waiter = LockClient(
        redis.Redis(port=proxy.port, username="nokill", password="pw"), retry_interval=0.01
    ).as_owner("waiter")
    got: list[object] = []
    proxy.cut_after("WAIT")
    t = threading.Thread(target=lambda: got.append(waiter.try_lock("rt:acl", 10.0)))
    t.start()
    assert wait_until(lambda: len(holder.info("rt:acl")["waiters"]) == 1)
    h.unlock()
    t.join(10)
    g = got[0]
    assert g is not None
    assert r.hget("rt:acl", "waiter") == b"1"
    g.unlock()  # type: ignore[attr-defined]
    assert not r.exists("rt:acl")


def interrupt(thread: threading.Thread) -> None:
    """Raises KeyboardInterrupt inside ``thread`` (as Ctrl-C would in a main
    thread): delivered at its next bytecode, within the wait's 1 s poll."""
    import ctypes

    assert thread.ident is not None
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt)
    )
    assert done == 1


def test_an_interrupted_wait_gives_back_a_grant_made_at_that_instant(
    r: redis.Redis, proxy: Proxy
) -> None:
    holder = LockClient(r).as_owner("holder")
    h = holder.lock("rt:intr")
    waiter = client(proxy).as_owner("waiter")
    outcome: list[object] = []

    def wait() -> None:
        try:
            outcome.append(waiter.try_lock("rt:intr", 10.0))
        except KeyboardInterrupt:
            outcome.append("interrupted")

    proxy.hold("WAIT")  # the grant's reply is kept back by the proxy
    t = threading.Thread(target=wait)
    t.start()
    assert wait_until(lambda: len(holder.info("rt:intr")["waiters"]) == 1)
    h.unlock()  # granted to the waiter on the server
    assert proxy.held.wait(5)
    assert r.hget("rt:intr", "waiter") == b"1"
    interrupt(t)
    t.join(10)
    assert outcome == ["interrupted"]
    assert not r.exists("rt:intr")  # given back, not held until its lease ends
    proxy.release_held()
