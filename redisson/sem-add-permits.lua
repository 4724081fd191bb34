-- RedissonSemaphore.addPermitsAsync(int permits), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- (RedissonPermitExpirableSemaphore's addPermits is another script: it publishes
-- the delta, and only a positive one.)
-- KEYS[1] the semaphore <name>; KEYS[2] its channel redisson_sc:{<name>}.
-- ARGV[1] the delta (may be negative); ARGV[2] the publish command "PUBLISH".
-- Reply: nil (EVAL_VOID); publishes the new count. A missing key counts as 0.
local value = redis.call('get', KEYS[1]);
if (value == false) then
value = 0;
end;
redis.call('set', KEYS[1], value + ARGV[1]);
redis.call(ARGV[2], KEYS[2], value + ARGV[1]);
