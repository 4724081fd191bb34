//! The chaos test's checker: the recorded history against the definitions
//! in `tests/chaos/main.rs`'s header.

use std::collections::{BTreeMap, HashMap};

use super::worker::{Grant, History, Write};

/// How much earlier than `sent + lease` a holder stops counting on its
/// lease in check (3): slack for the server's millisecond clock and for
/// the time between the client reading its clock and the send (µs).
pub const LEASE_MARGIN_US: i64 = 100_000;

/// What a run did and what the checker found.
#[derive(Default, Debug)]
pub struct Report {
    pub attempts: usize,
    pub grants: usize,
    pub tokens: usize,
    pub busy: usize,
    pub errors: BTreeMap<String, usize>,
    pub writes_accepted: usize,
    pub writes_refused: usize,
    pub write_errors: usize,
    pub stalls: usize,
    pub releases_nil: usize,
    /// Grants' acquire round trips (acked - sent), ms: median, 99th, max.
    pub latency_ms: (f64, f64, f64),
    pub failovers: usize,
    pub actions: BTreeMap<String, usize>,
    /// (1) the same token acknowledged to two grants.
    pub duplicates: Vec<String>,
    /// (2) consecutive accepted writes out of token order (or the same
    /// token from two grants).
    pub order_violations: Vec<String>,
    /// (3) acknowledged grants another grant overlapped.
    pub lost_grants: Vec<String>,
    /// (4) crashes.
    pub crashes: Vec<String>,
}

/// A resource history entry: `token:w<worker>:<attempt>`.
fn parse_entry(entry: &str) -> (i64, &str) {
    let (token, grant) = entry
        .split_once(':')
        .unwrap_or_else(|| panic!("history entry {entry:?}"));
    (
        token
            .parse()
            .unwrap_or_else(|_| panic!("history entry {entry:?}")),
        grant,
    )
}

/// The moment (µs) a holder stops counting on grant `g`: when it sent its
/// release, or its lease measured from the acquire's send, less the margin.
pub fn claim_end(g: &Grant) -> i64 {
    let lease_end = g.sent_us + g.lease_ms * 1000 - LEASE_MARGIN_US;
    g.release_sent_us.map_or(lease_end, |r| r.min(lease_end))
}

pub fn check(histories: &[History], resource_lists: &[Vec<String>]) -> Report {
    let mut report = Report::default();
    let grants: Vec<&Grant> = histories.iter().flat_map(|h| &h.grants).collect();
    for h in histories {
        report.attempts += h.attempts;
        report.busy += h.busy;
        for (kind, n) in &h.errors {
            *report.errors.entry(kind.clone()).or_default() += n;
        }
    }
    report.grants = grants.len();
    for g in &grants {
        for w in &g.writes {
            match w {
                Write::Accepted => report.writes_accepted += 1,
                Write::Refused => report.writes_refused += 1,
                Write::Error(_) => report.write_errors += 1,
            }
        }
        report.stalls += g.stalled as usize;
        report.releases_nil += (g.release_reply == "nil") as usize;
    }

    let mut rtt: Vec<i64> = grants.iter().map(|g| g.acked_us - g.sent_us).collect();
    rtt.sort_unstable();
    if let Some(max) = rtt.last() {
        let at = |q: f64| rtt[((rtt.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
        report.latency_ms = (at(0.5), at(0.99), *max as f64 / 1000.0);
    }

    // (1) A token of a lock acknowledged to two grants (owners are unique
    // per grant). Each lock has its own counter: two locks may share one.
    let mut by_token: HashMap<(usize, i64), Vec<&Grant>> = HashMap::new();
    for g in &grants {
        by_token.entry((g.lock, g.token)).or_default().push(g);
    }
    report.tokens = by_token.len();
    let mut dups: Vec<_> = by_token.iter().filter(|(_, gs)| gs.len() > 1).collect();
    dups.sort_by_key(|(t, _)| **t);
    for ((lock, token), gs) in dups {
        report.duplicates.push(format!(
            "lock {lock}: token {token} granted to {}",
            gs.iter()
                .map(|g| format!("{} (node {}, acked at {} µs)", g.owner, g.port, g.acked_us))
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }

    // (2) The resource's accepted writes, in the order it accepted them.
    for (lock, list) in resource_lists.iter().enumerate() {
        for pair in list.windows(2) {
            let (t0, g0) = parse_entry(&pair[0]);
            let (t1, g1) = parse_entry(&pair[1]);
            if t1 < t0 || (t1 == t0 && g1 != g0) {
                report.order_violations.push(format!(
                    "lock {lock}: {} accepted after {}",
                    pair[1], pair[0]
                ));
            }
        }
    }

    // (3) Two grants of a lock whose holders counted on it at the same
    // time: claims [acked, claim_end) that intersect. The earlier-acked
    // one is the grant lost.
    let mut by_lock: BTreeMap<usize, Vec<&Grant>> = BTreeMap::new();
    for g in &grants {
        if g.acked_us < claim_end(g) {
            by_lock.entry(g.lock).or_default().push(g);
        }
    }
    for gs in by_lock.values_mut() {
        gs.sort_by_key(|g| g.acked_us);
        for (i, g) in gs.iter().enumerate() {
            let end = claim_end(g);
            let overlapping: Vec<&&Grant> = gs[i + 1..]
                .iter()
                .take_while(|h| h.acked_us < end)
                .collect();
            if let Some(h) = overlapping.first() {
                report.lost_grants.push(format!(
                    "lock {}: {} (token {}, node {}, sent {} µs, acked {}, claim until {}, \
                     release answered {}) overlapped by {} (token {}, node {}, acked {}) \
                     and {} more",
                    g.lock,
                    g.owner,
                    g.token,
                    g.port,
                    g.sent_us,
                    g.acked_us,
                    end,
                    g.release_reply,
                    h.owner,
                    h.token,
                    h.port,
                    h.acked_us,
                    overlapping.len() - 1
                ));
            }
        }
    }
    report
}

impl Report {
    pub fn summary(&self, label: &str) -> String {
        format!(
            "chaos summary [{label}]: {} attempts, {} grants, {} tokens, {} busy, errors {:?}; \
             writes {} accepted, {} refused STALE, {} failed; {} stalls, {} releases answered nil; \
             acquire ms p50/p99/max {:.1}/{:.1}/{:.1}; {} failovers; nemesis {:?}; violations: {} duplicate tokens, {} out-of-order writes, \
             {} lost acknowledged grants, {} crashes",
            self.attempts,
            self.grants,
            self.tokens,
            self.busy,
            self.errors,
            self.writes_accepted,
            self.writes_refused,
            self.write_errors,
            self.stalls,
            self.releases_nil,
            self.latency_ms.0,
            self.latency_ms.1,
            self.latency_ms.2,
            self.failovers,
            self.actions,
            self.duplicates.len(),
            self.order_violations.len(),
            self.lost_grants.len(),
            self.crashes.len()
        )
    }

    /// The violations, at most `n` of each kind, for a failure message.
    pub fn details(&self, n: usize) -> String {
        let mut out = String::new();
        for (what, list) in [
            ("duplicate tokens", &self.duplicates),
            ("out-of-order writes", &self.order_violations),
            ("lost acknowledged grants", &self.lost_grants),
            ("crashes", &self.crashes),
        ] {
            for v in list.iter().take(n) {
                out.push_str(&format!("\n  {what}: {v}"));
            }
            if list.len() > n {
                out.push_str(&format!("\n  {what}: ... {} more", list.len() - n));
            }
        }
        out
    }
}
