-- RedissonSemaphore.tryAcquireAsync0(int permits) (behind tryAcquire(permits),
-- and each try of acquire / tryAcquire(permits, waitTime)), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the semaphore <name>. ARGV[1] permits (>= 1; 0 never reaches Redis).
-- Reply: 1 taken (DECRBY), 0 not enough.
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
local val = redis.call('decrby', KEYS[1], ARGV[1]);
return 1;
end;
return 0;
