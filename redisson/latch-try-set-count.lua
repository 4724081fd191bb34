-- RedissonCountDownLatch.trySetCountAsync(long count), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the latch <name>; KEYS[2] its channel
-- redisson_countdownlatch__channel__{<name>} (always braced: the latch builds
-- it by hand, not with prefixName).
-- ARGV[1] CountDownLatchPubSub.NEW_COUNT_MESSAGE, "1"; ARGV[2] count; ARGV[3] the
-- publish command "PUBLISH".
-- Reply: 1 set (and "1" published), 0 the key exists.
if redis.call('exists', KEYS[1]) == 0 then
redis.call('set', KEYS[1], ARGV[2]);
redis.call(ARGV[3], KEYS[2], ARGV[1]);
return 1
else
return 0
end
