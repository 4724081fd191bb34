package io.github.redislock.redisson;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redislock.redisson.support.Clients;
import io.github.redislock.redisson.support.RedisServer;
import io.github.redislock.redisson.support.Smoke;
import org.junit.jupiter.api.Test;
import org.redisson.api.RedissonClient;

/** {@code ModuleLocks.wrap} refuses a server without the module, with a message that says so. */
class WrapTest {

    @Test
    @Smoke
    void aServerWithoutTheModuleIsRefusedByName() {
        try (RedisServer bare = RedisServer.startWithoutModule()) {
            RedissonClient redisson = Clients.single(bare);
            try {
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> ModuleLocks.wrap(redisson));
                assertTrue(e.getMessage().contains("127.0.0.1") && e.getMessage().contains(String.valueOf(bare.port)),
                        e.getMessage());
                assertTrue(e.getMessage().contains("redis-lock module is not loaded"), e.getMessage());
                // A caller that knows better may skip the check.
                ModuleLocks.wrap(redisson, ModuleLocks.Options.defaults().checkModule(false));
            } finally {
                redisson.shutdown();
            }
        }
    }

    @Test
    void onlyRedissonsOwnClientCanBeWrapped() {
        assertThrows(IllegalArgumentException.class, () -> ModuleLocks.wrap(null));
    }
}
