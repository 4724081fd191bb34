-- RedissonSemaphore.releaseAsync(int permits), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the semaphore <name>; KEYS[2] its channel redisson_sc:{<name>}.
-- ARGV[1] permits (>= 1); ARGV[2] the publish command "PUBLISH".
-- Reply: nil (EVAL_VOID); publishes the new count.
local value = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], value);
