package io.github.redislock.redisson.support;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.junit.jupiter.api.Tag;

/**
 * A test of the smoke subset: what {@code make test} runs on the Redisson line that is not
 * tested in full there (every kind once, and each place where the two lines' internal APIs
 * differ or are reached: the release hooks, the executor copies, the pool's connections, the
 * watchdog, the Reactive and Rx proxies, RedissonMultiLock). {@code make test-matrix} runs
 * every test on both lines.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@Tag("smoke")
public @interface Smoke {
}
