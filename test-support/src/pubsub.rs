//! Pub/sub: Redisson's unlock channels, and a subscriber that tells what
//! arrived (and so what did not) without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};

use redis::{Connection, Value};

use crate::reply::{as_bytes, as_string};
use crate::server::Server;

/// Redisson's unlock channel for `key` with the default prefix
/// (`RedissonLock.getChannelName`).
pub fn unlock_channel(key: impl AsRef<[u8]>) -> Vec<u8> {
    channel_with_prefix(b"redisson_lock__channel", key)
}

/// Redisson's `prefixName(prefix, key)`: `prefix:{key}`, or `prefix:key`
/// when the key already has a `{`.
pub fn channel_with_prefix(prefix: &[u8], key: impl AsRef<[u8]>) -> Vec<u8> {
    let key = key.as_ref();
    let mut c = prefix.to_vec();
    if key.contains(&b'{') {
        c.push(b':');
        c.extend_from_slice(key);
    } else {
        c.extend_from_slice(b":{");
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c
}

/// A real subscriber on its own RESP2 connection.
///
/// Negative checks need no sleeps: [`Subscriber::drain`] publishes a marker on
/// a private channel after the commands under test and returns whatever
/// arrived before it (Redis delivers one client's messages in order).
pub struct Subscriber {
    con: Connection,
    marker: Vec<u8>,
    seq: u64,
}

/// One message: (channel, payload).
pub type Message = (Vec<u8>, Vec<u8>);

impl Subscriber {
    pub fn new(server: &Server, channels: &[&[u8]]) -> Subscriber {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let marker = format!(
            "test-marker-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
        .into_bytes();
        let mut sub = Subscriber {
            con: server.connection(),
            marker,
            seq: 0,
        };
        let mut all: Vec<&[u8]> = channels.to_vec();
        let marker = sub.marker.clone();
        all.push(&marker);
        let packed = redis::cmd("SUBSCRIBE").arg(&all).get_packed_command();
        sub.con
            .send_packed_command(&packed)
            .expect("send SUBSCRIBE");
        for _ in &all {
            let reply = sub.con.recv_response().expect("SUBSCRIBE confirmation");
            match &reply {
                Value::Array(items)
                    if items.first().and_then(as_string).as_deref() == Some("subscribe") => {}
                other => panic!("unexpected reply to SUBSCRIBE: {other:?}"),
            }
        }
        sub
    }

    /// Publishes a marker through `publisher` and returns every message that
    /// arrived before it, in order.
    pub fn drain(&mut self, publisher: &mut Connection) -> Vec<Message> {
        self.seq += 1;
        let token = format!("m{}", self.seq).into_bytes();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&self.marker)
            .arg(&token)
            .query(publisher)
            .expect("PUBLISH marker");
        assert!(receivers >= 1, "the marker PUBLISH reached no subscriber");
        let mut out = Vec::new();
        loop {
            let reply = self
                .con
                .recv_response()
                .expect("a pub/sub message (read timed out?)");
            let Value::Array(items) = &reply else {
                panic!("unexpected pub/sub frame {reply:?}")
            };
            let kind = items.first().and_then(as_string).unwrap_or_default();
            let (channel, payload) = match kind.as_str() {
                "message" if items.len() == 3 => (as_bytes(&items[1]), as_bytes(&items[2])),
                "pmessage" if items.len() == 4 => (as_bytes(&items[2]), as_bytes(&items[3])),
                _ => panic!("unexpected pub/sub frame {reply:?}"),
            };
            let (channel, payload) = (
                channel.expect("channel bytes"),
                payload.expect("payload bytes"),
            );
            if channel == self.marker {
                if payload == token {
                    return out;
                }
                continue; // an older marker
            }
            out.push((channel, payload));
        }
    }
}

/// Messages rendered for assertion messages.
pub fn show(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|(c, p)| {
            (
                String::from_utf8_lossy(c).into_owned(),
                String::from_utf8_lossy(p).into_owned(),
            )
        })
        .collect()
}
