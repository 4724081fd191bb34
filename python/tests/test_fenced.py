"""Fenced locks: a token per grant, growing, that LOCK.FENCE checks."""

from __future__ import annotations

import pytest
import redis

from redis_lock_client import LockClient

SELL = (
    "redis.call('LOCK.FENCE', KEYS[1], ARGV[1]) "
    "if tonumber(redis.call('GET', KEYS[2])) > 0 then return redis.call('DECR', KEYS[2]) end "
    "return -1"
)


def test_tokens_grow_with_every_grant_and_reentry(r: redis.Redis) -> None:
    locks = LockClient(r)
    g1 = locks.lock_fenced("f:lock")
    g2 = locks.lock_fenced("f:lock")  # re-entry: a new, greater token
    assert g1.token is not None and g2.token is not None
    assert g2.token > g1.token
    assert int(r.get("redisson_lock_token:{f:lock}") or 0) >= g2.token
    g2.unlock()
    g1.unlock()
    g3 = locks.try_lock_fenced("f:lock", 0, lease=5)
    assert g3 is not None and g3.token is not None and g3.token > g2.token
    g3.unlock()
    assert locks.lock("f:plain").token is None


def test_a_stale_token_is_refused_by_the_fence(r: redis.Redis) -> None:
    locks = LockClient(r)
    r.set("{stock}", 90)
    old = locks.try_lock_fenced("{stock}:lock", 0, lease=5)
    assert old is not None
    old_token = old.token
    old.unlock()
    new = locks.as_owner("buyer-2").lock_fenced("{stock}:lock")
    assert r.eval(SELL, 2, "{stock}:fence", "{stock}", new.token) == 89
    with pytest.raises(redis.exceptions.ResponseError, match="STALE"):
        r.eval(SELL, 2, "{stock}:fence", "{stock}", old_token)
    assert r.get("{stock}") == b"89"
    new.unlock()


def test_a_synced_grant_without_replicas_is_undone_and_not_held(r: redis.Redis) -> None:
    from redis_lock_client import NotSynced

    locks = LockClient(r, sync_replicas=(1, 0.1))
    with pytest.raises(NotSynced) as e:
        locks.lock("f:sync")
    assert e.value.transient and "NOSYNC" in str(e.value)
    assert not r.exists("f:sync")
    with pytest.raises(NotSynced):
        locks.try_lock_fenced("f:sync", 0.2)
    assert not r.exists("f:sync")
    # (0, 0) turns the module's own default off for this client.
    with LockClient(r, sync_replicas=(0, 0)).lock("f:sync") as g:
        assert r.hget("f:sync", g.owner) == b"1"
