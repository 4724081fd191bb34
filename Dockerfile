# The lock module added to an official server image: a build stage compiles
# it on Debian bookworm (glibc 2.36; the redis and valkey Debian images are
# bookworm or newer), the final stage is the server image with the module.
#
#   docker build -t redis-lock:redis-8.2 .                       (redis:8.2)
#   docker build --build-arg SERVER_IMAGE=redis:7.0 -t redis-lock:redis-7.0 .
#   docker build --build-arg SERVER_IMAGE=valkey/valkey:9.1 -t redis-lock:valkey-9.1 .
#   docker run -p 6379:6379 redis-lock:redis-8.2
#
# NOT BUILT HERE: our machines run no Docker engine, so this file has never
# been built or run; each line is one we are sure of. Alpine (musl) server
# images cannot load this glibc build.
ARG SERVER_IMAGE=redis:8.2

FROM rust:1.88-bookworm AS build
# bindgen (in the redis-module crate) needs libclang.
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The commit the module logs at load (else from .git, if the context has it
# and git accepts it; else "unknown").
ARG REDIS_LOCK_COMMIT=
RUN REDIS_LOCK_COMMIT="$REDIS_LOCK_COMMIT" cargo build --release --locked --lib

FROM ${SERVER_IMAGE}
# Not in /usr/local/lib/redis/modules/: the redis:8 image's entrypoint loads
# every .so there by itself, and a second load of the module is refused.
COPY --from=build /src/target/release/libredis_lock.so /usr/local/lib/redis-lock/libredis_lock.so
# Both images' entrypoints put the server binary in front of options that
# start with "-". Other options go after it: docker run IMAGE --loadmodule
# /usr/local/lib/redis-lock/libredis_lock.so --port 7000 (a command given to
# docker run replaces this one).
CMD ["--loadmodule", "/usr/local/lib/redis-lock/libredis_lock.so"]
