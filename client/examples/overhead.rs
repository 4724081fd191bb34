//! What the library costs over raw `LOCK.*` commands, measured side by side
//! in one run: `make bench` runs it after the contention benchmark.
//!
//!     cargo run --release -p redis-lock-client --example overhead -- \
//!         --server /usr/bin/redis-server --module target/release/libredis_lock.so
//!
//! It starts its own server with the module on a free loopback port (no
//! persistence) and, for 1 and 8 concurrent tasks each on its own lock
//! (uncontended: the cost of the path, not of waiting), counts lock+unlock
//! cycles per second of:
//!
//! * raw: `LOCK.ACQUIRE` then `LOCK.RELEASE` on one multiplexed connection;
//! * `try_lock(name, 0, Some(lease))` + `unlock()`: the library, no watchdog;
//! * `lock(name)` + `unlock()`: the library with the watchdog registration.
//!
//! The three run interleaved, round after round (`--rounds`, default 5, of
//! `--seconds` each, default 1), and the table shows each one's median rate
//! and its ratio to raw in the same round (median over rounds), so a machine
//! that slows down mid-run moves all three alike. `--out FILE` also writes
//! the table there.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lock_client::LockClient;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    server: String,
    module: String,
    rounds: usize,
    seconds: f64,
    tasks: Vec<usize>,
    out: Option<String>,
}

fn parse_args() -> Result<Args, Error> {
    let mut args = Args {
        server: "redis-server".into(),
        module: "target/release/libredis_lock.so".into(),
        rounds: 5,
        seconds: 1.0,
        tasks: vec![1, 8],
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => args.server = value()?,
            "--module" => args.module = value()?,
            "--rounds" => args.rounds = value()?.parse()?,
            "--seconds" => args.seconds = value()?.parse()?,
            "--tasks" => {
                args.tasks = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--out" => args.out = Some(value()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(args)
}

/// The server, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(args: &Args) -> Result<(Server, u16), Error> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let module = std::fs::canonicalize(&args.module)
        .map_err(|e| format!("module {}: {e} (make build)", args.module))?;
    let child = Command::new(&args.server)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--loadmodule"])
        .arg(module)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", args.server))?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    loop {
        if let Ok(mut con) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                return Ok((server, port));
            }
        }
        if Instant::now() > deadline {
            return Err("the server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Raw,
    TryLock,
    Lock,
}

const WAYS: [(Way, &str); 3] = [
    (Way::Raw, "raw `LOCK.ACQUIRE` + `LOCK.RELEASE`"),
    (
        Way::TryLock,
        "`try_lock(name, 0, Some(lease))` + `unlock()`",
    ),
    (Way::Lock, "`lock(name)` (watchdog) + `unlock()`"),
];

/// Lock+unlock cycles per second with `tasks` tasks for `seconds`.
async fn measure(
    way: Way,
    tasks: usize,
    seconds: f64,
    raw: &redis::aio::MultiplexedConnection,
    locks: &LockClient,
) -> Result<f64, Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (stop, done, mut raw, locks) = (stop.clone(), done.clone(), raw.clone(), locks.clone());
        handles.push(tokio::spawn(async move {
            let name = format!("bench:{t}");
            let owner = format!("bench-owner-{t}");
            while !stop.load(Ordering::Relaxed) {
                match way {
                    Way::Raw => {
                        let _: redis::Value = redis::cmd("LOCK.ACQUIRE")
                            .arg(&name)
                            .arg(&owner)
                            .arg(30_000)
                            .query_async(&mut raw)
                            .await?;
                        let _: redis::Value = redis::cmd("LOCK.RELEASE")
                            .arg(&name)
                            .arg(&owner)
                            .query_async(&mut raw)
                            .await?;
                    }
                    Way::TryLock => {
                        let guard = locks
                            .try_lock(&name, Duration::ZERO, Some(Duration::from_secs(30)))
                            .await?
                            .ok_or("an uncontended lock was busy")?;
                        guard.unlock().await?;
                    }
                    Way::Lock => locks.lock(&name).await?.unlock().await?,
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), Error>(())
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let count = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for h in handles {
        h.await??;
    }
    Ok(count as f64 / elapsed)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Error> {
    let args = parse_args()?;
    let (_server, port) = start_server(&args)?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    // No response timeout, as the library's own connections (redis 1.x's
    // default is 500 ms): the raw path pays for no timer the library skips.
    let raw = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    let locks = LockClient::new(client)?;

    let mut table = String::from(
        "| tasks | path | lock+unlock/s (median) | vs raw, same round (median) |\n|---:|---|---:|---:|\n",
    );
    for &tasks in &args.tasks {
        // Warm-up: connections, the watchdog task.
        for (way, _) in WAYS {
            measure(way, tasks, 0.2, &raw, &locks).await?;
        }
        let mut rates = vec![Vec::new(); WAYS.len()];
        let mut ratios = vec![Vec::new(); WAYS.len()];
        for _ in 0..args.rounds {
            let mut round = Vec::new();
            for (way, _) in WAYS {
                round.push(measure(way, tasks, args.seconds, &raw, &locks).await?);
            }
            for (i, rate) in round.iter().enumerate() {
                rates[i].push(*rate);
                ratios[i].push(rate / round[0]);
            }
        }
        for (i, (_, label)) in WAYS.iter().enumerate() {
            table.push_str(&format!(
                "| {tasks} | {label} | {:.0} | {:.2}x |\n",
                median(rates[i].clone()),
                median(ratios[i].clone())
            ));
        }
    }
    println!(
        "\nThe client library's overhead over raw commands (uncontended, {} rounds of {} s, {}):\n",
        args.rounds, args.seconds, args.server
    );
    print!("{table}");
    if let Some(out) = &args.out {
        std::fs::write(out, &table)?;
        println!("\nwritten to {out}");
    }
    Ok(())
}
