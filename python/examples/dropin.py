"""Moving redis-py Lock code to the module with one argument.

python examples/dropin.py redis://127.0.0.1:6379/
"""

import sys

import redis

from redis_lock_client import ModuleLock

url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/"
r = redis.Redis.from_url(url)

# Before: r.lock("report", timeout=10, blocking_timeout=5)
with r.lock("report", timeout=10, blocking_timeout=5, lock_class=ModuleLock) as lock:
    print(f"locked report, lease left {r.pttl('report')} ms, owned: {lock.owned()}")
print("released:", not r.exists("report"))
