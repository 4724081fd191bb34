//! Redisson RLock's Lua scripts, exactly as printed in the seeds: the
//! compatibility contract the module is tested against.

/// `tryLockInnerAsync`, HINCRBY variant (seed 001).
pub const ACQUIRE_HINCRBY: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);"
);

/// `tryLockInnerAsync`, HSET variant (seed 000, Redisson 3.14).
pub const ACQUIRE_HSET: &str = concat!(
    "if (redis.call('exists', KEYS[1]) == 0) then ",
    "redis.call('hset', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return nil; ",
    "end; ",
    "return redis.call('pttl', KEYS[1]);"
);

/// `unlockInnerAsync` (both seeds).
pub const UNLOCK: &str = concat!(
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ",
    "return nil;",
    "end; ",
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ",
    "if (counter > 0) then ",
    "redis.call('pexpire', KEYS[1], ARGV[2]); ",
    "return 0; ",
    "else ",
    "redis.call('del', KEYS[1]); ",
    "redis.call('publish', KEYS[2], ARGV[1]); ",
    "return 1; ",
    "end; ",
    "return nil;"
);

/// `renewExpirationAsync` (seed 000).
pub const RENEW: &str = concat!(
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ",
    "redis.call('pexpire', KEYS[1], ARGV[1]); ",
    "return 1; ",
    "end; ",
    "return 0;"
);

/// `forceUnlockAsync` (seed 000).
pub const FORCE_UNLOCK: &str = concat!(
    "if (redis.call('del', KEYS[1]) == 1) then ",
    "redis.call('publish', KEYS[2], ARGV[1]); ",
    "return 1 ",
    "else ",
    "return 0 ",
    "end"
);
