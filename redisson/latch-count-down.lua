-- RedissonCountDownLatch.countDownAsync(), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the latch <name>; KEYS[2] its channel
-- redisson_countdownlatch__channel__{<name>}.
-- ARGV[1] CountDownLatchPubSub.ZERO_COUNT_MESSAGE, "0"; ARGV[2] the publish
-- command "PUBLISH".
-- Reply: nil. DECR; at <= 0 the key is deleted; at exactly 0 "0" is published
-- (a countDown on a missing key makes -1, deletes it and publishes nothing).
local v = redis.call('decr', KEYS[1]);
if v <= 0 then redis.call('del', KEYS[1]) end;
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;
