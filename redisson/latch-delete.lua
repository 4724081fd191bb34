-- RedissonCountDownLatch.deleteAsync(), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the latch <name>; KEYS[2] its channel
-- redisson_countdownlatch__channel__{<name>}.
-- ARGV[1] CountDownLatchPubSub.NEW_COUNT_MESSAGE, "1" (sic: not the zero
-- message); ARGV[2] the publish command "PUBLISH".
-- Reply: 1 deleted (and "1" published), 0 no latch.
if redis.call('del', KEYS[1]) == 1 then
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1
else
return 0
end
