//! Replies: the bytes, strings and maps of a `redis::Value` from either
//! protocol, the fields of an `INFO` text, and server errors as the server
//! sent them.

use redis::{RedisError, RedisResult, Value};

/// An error as the server sent it: `CODE detail`.
pub fn err_text(e: &RedisError) -> String {
    // Since redis 1.0 a command refused inside a pipeline or MULTI comes
    // back as a pipeline error, with no detail of its own: its first
    // refusal is the text (0.27 returned that refusal itself).
    if e.detail().is_none() {
        let errors = e.clone().into_server_errors();
        if let Some((_, first)) = errors.as_deref().and_then(|errors| errors.first()) {
            return match first.details() {
                Some(detail) => format!("{} {detail}", first.code()),
                None => first.code().to_string(),
            };
        }
    }
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => format!("<not a server error: {e}>"),
    }
}

/// Asserts `result` is a server error starting with `prefix` and containing
/// `needle`; returns the error text.
pub fn expect_err<T: std::fmt::Debug>(
    result: RedisResult<T>,
    prefix: &str,
    needle: &str,
    what: &str,
) -> String {
    match result {
        Ok(v) => panic!("{what}: expected an error `{prefix} ...{needle}...`, got reply {v:?}"),
        Err(e) => {
            let text = err_text(&e);
            assert!(
                text.starts_with(prefix),
                "{what}: error should start with {prefix:?}: {text:?}"
            );
            assert!(
                text.contains(needle),
                "{what}: error should mention {needle:?}: {text:?}"
            );
            text
        }
    }
}

/// Bytes of a bulk/simple string reply.
pub fn as_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes().to_vec()),
        _ => None,
    }
}

pub fn as_string(v: &Value) -> Option<String> {
    as_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The pairs of a map reply: a RESP3 map or a RESP2 flat key/value array.
pub fn map_pairs(v: &Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(pairs) => pairs.clone(),
        Value::Array(items) => {
            assert!(
                items.len() % 2 == 0,
                "a flat map must have an even length: {v:?}"
            );
            items
                .chunks(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect()
        }
        other => panic!("expected a map or flat array, got {other:?}"),
    }
}

/// The value of `field` in a map reply (a RESP3 map or a RESP2 flat
/// array), if it has one.
pub fn find_field(v: &Value, field: &str) -> Option<Value> {
    map_pairs(v)
        .into_iter()
        .find(|(k, _)| as_string(k).as_deref() == Some(field))
        .map(|(_, v)| v)
}

/// The value of `field` in a map reply; the test fails when there is none.
pub fn field_of(v: &Value, field: &str) -> Value {
    find_field(v, field).unwrap_or_else(|| panic!("no field {field} in {v:?}"))
}

/// `field:value` out of an INFO text.
pub fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim().to_string())
    })
}
