//! Grants that wait for replicas: the decisions, with no FFI.
//!
//! `LOCK.ACQUIRE ... SYNC numreplicas timeout-ms` (or `lock.sync-replicas`)
//! makes a grant, as always, in the command or in the hand-off that grants
//! it, and then holds the reply back: the client stays blocked until
//! `numreplicas` replicas have acknowledged a replication offset that covers
//! the grant, or `timeout-ms` passes. Then:
//! * acknowledged: the usual reply (nil, or `[-1, token]`);
//! * not acknowledged in time: the grant is undone (one hold released, the
//!   next waiter considered; a token stays used) and the reply is an error
//!   starting with `NOSYNC`, so no client ever believes it holds a lock that a
//!   failover to any of those replicas would lose. Fail-closed.
//!
//! How it works on every server, Redis 7.0 included (which has no blocking
//! `RM_Call`): the grant's writes are propagated when its command or callback
//! ends; the first look after that records `master_repl_offset` as the
//! offset to reach (at least the grant's, so never too early), and asks the
//! replicas to acknowledge at once (`REPLCONF GETACK *`, as `WAIT` does). One
//! timer for all pending grants looks every [`LOOK_EVERY_MS`] at the offsets
//! the replicas acknowledged (`INFO replication`), and stops when none is
//! pending. The glue is in `waiting/synced.rs`; replica offsets in `replicas.rs`.

use crate::errors::{self, Refusal};
/// How often pending grants look at the replicas' acknowledgements.
pub const LOOK_EVERY_MS: i64 = 1;

/// How often replicas are asked again while grants are pending (a replica
/// that reconnected has not seen the first request).
pub const ASK_AGAIN_MS: i64 = 100;

/// What a grant must wait for: `replicas` acknowledgements within
/// `timeout_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSpec {
    pub replicas: i64,
    pub timeout_ms: i64,
}

impl SyncSpec {
    /// The spec a command asked for, else the configured default; `None`
    /// when the grant need not wait (`SYNC 0 ...`, or nothing configured).
    pub fn effective(asked: Option<SyncSpec>, default: Option<SyncSpec>) -> Option<SyncSpec> {
        asked.or(default).filter(|spec| spec.replicas > 0)
    }
}

/// How far the replication stream has gone, and how far each online replica
/// has acknowledged it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acks {
    /// `master_repl_offset`: everything propagated so far.
    pub offset: i64,
    /// The acknowledged offset of each online replica.
    pub replicas: Vec<i64>,
}

impl Acks {
    /// How many replicas have acknowledged at least `offset`.
    pub fn reached(&self, offset: i64) -> i64 {
        self.replicas
            .iter()
            .filter(|&&acked| acked >= offset)
            .count() as i64
    }
}

/// A grant made and not answered yet; `C` is its blocked-client handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingGrant<C> {
    pub client: C,
    pub db: i32,
    pub key: Vec<u8>,
    pub owner: Vec<u8>,
    /// Its fencing token, if it asked for one: the reply once acknowledged.
    pub token: Option<i64>,
    pub spec: SyncSpec,
    /// When it gives up (unix ms).
    pub deadline_ms: i64,
    /// The offset that covers the grant, once known.
    pub offset: Option<i64>,
}

/// How a pending grant ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Enough replicas have it: answer the grant.
    Acknowledged,
    /// The timeout passed with `acked` of the replicas needed: undo it.
    TimedOut { acked: i64 },
}

/// The `NOSYNC` error of a grant that was undone; `why` (may be empty) says
/// what ended the wait early.
pub fn nosync(spec: SyncSpec, acked: i64, why: &str) -> Refusal {
    errors::nosync(acked, spec.replicas, spec.timeout_ms, why)
}

/// What one look decided.
pub struct Look<C> {
    /// Grants that ended, with how.
    pub ended: Vec<(PendingGrant<C>, Outcome)>,
    /// Whether to ask the replicas for their offsets now.
    pub ask_replicas: bool,
}

/// Every grant waiting for replicas, in the order they were made.
pub struct SyncTable<C> {
    pending: Vec<PendingGrant<C>>,
    /// When replicas were last asked (unix ms).
    asked_at: i64,
}

impl<C> Default for SyncTable<C> {
    fn default() -> Self {
        SyncTable {
            pending: Vec::new(),
            asked_at: i64::MIN,
        }
    }
}

impl<C: Copy + Eq> SyncTable<C> {
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn push(&mut self, grant: PendingGrant<C>) {
        self.pending.push(grant);
    }

    /// Takes a client's pending grant out (timeout, disconnect).
    pub fn remove_client(&mut self, client: C) -> Option<PendingGrant<C>> {
        let position = self.pending.iter().position(|g| g.client == client)?;
        Some(self.pending.remove(position))
    }

    /// Takes every pending grant out (the server became a replica).
    pub fn drain_all(&mut self) -> Vec<PendingGrant<C>> {
        std::mem::take(&mut self.pending)
    }

    /// Looks at the replicas' acknowledgements at `now_ms`: records the
    /// offset new grants must reach (all of their writes are in `acks.offset`
    /// by now), and takes out the grants that are acknowledged or out of
    /// time. An acknowledgement seen at the deadline still counts.
    pub fn look(&mut self, acks: &Acks, now_ms: i64) -> Look<C> {
        let mut ask_replicas = false;
        for grant in &mut self.pending {
            if grant.offset.is_none() {
                grant.offset = Some(acks.offset);
                ask_replicas = true;
            }
        }
        let mut ended = Vec::new();
        let mut kept = Vec::with_capacity(self.pending.len());
        for grant in self.pending.drain(..) {
            let acked = grant.offset.map_or(0, |offset| acks.reached(offset));
            if acked >= grant.spec.replicas {
                ended.push((grant, Outcome::Acknowledged));
            } else if now_ms >= grant.deadline_ms {
                ended.push((grant, Outcome::TimedOut { acked }));
            } else {
                kept.push(grant);
            }
        }
        self.pending = kept;
        if !self.pending.is_empty() && now_ms.saturating_sub(self.asked_at) >= ASK_AGAIN_MS {
            ask_replicas = true;
        }
        if ask_replicas {
            self.asked_at = now_ms;
        }
        Look {
            ended,
            ask_replicas,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn grant(client: usize, replicas: i64, timeout_ms: i64) -> PendingGrant<usize> {
        PendingGrant {
            client,
            db: 0,
            key: b"k".to_vec(),
            owner: b"o".to_vec(),
            token: None,
            spec: SyncSpec {
                replicas,
                timeout_ms,
            },
            deadline_ms: NOW + timeout_ms,
            offset: None,
        }
    }

    fn acks(offset: i64, replicas: &[i64]) -> Acks {
        Acks {
            offset,
            replicas: replicas.to_vec(),
        }
    }

    #[test]
    fn a_grant_waits_for_the_offset_seen_at_its_first_look() {
        let mut table = SyncTable::default();
        table.push(grant(1, 1, 100));
        // Replicas were already at 500 before the grant's writes: not enough.
        let look = table.look(&acks(700, &[500]), NOW);
        assert!(look.ended.is_empty());
        assert!(look.ask_replicas, "asked at once");
        let look = table.look(&acks(750, &[699]), NOW + 1);
        assert!(look.ended.is_empty(), "699 < 700");
        assert!(!look.ask_replicas, "not again so soon");
        let look = table.look(&acks(750, &[700]), NOW + 2);
        assert_eq!(look.ended[0].1, Outcome::Acknowledged);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn a_grant_needs_as_many_replicas_as_it_asked_for() {
        let mut table = SyncTable::default();
        table.push(grant(1, 2, 100));
        table.look(&acks(10, &[]), NOW);
        assert!(table.look(&acks(10, &[10, 9]), NOW + 1).ended.is_empty());
        let look = table.look(&acks(10, &[10, 11, 3]), NOW + 2);
        assert_eq!(look.ended[0].1, Outcome::Acknowledged);
    }

    #[test]
    fn a_grant_out_of_time_is_undone_with_what_it_got() {
        let mut table = SyncTable::default();
        table.push(grant(1, 2, 100));
        table.look(&acks(10, &[]), NOW);
        assert!(table.look(&acks(10, &[10]), NOW + 99).ended.is_empty());
        let look = table.look(&acks(10, &[10]), NOW + 100);
        assert_eq!(look.ended[0].1, Outcome::TimedOut { acked: 1 });
        assert_eq!(
            nosync(look.ended[0].0.spec, 1, "").text(),
            "NOSYNC the grant was undone: 1 of 2 replicas acknowledged it within 100 ms"
        );
    }

    #[test]
    fn an_acknowledgement_at_the_deadline_counts() {
        let mut table = SyncTable::default();
        table.push(grant(1, 1, 5));
        table.look(&acks(10, &[]), NOW);
        let look = table.look(&acks(10, &[10]), NOW + 50);
        assert_eq!(look.ended[0].1, Outcome::Acknowledged);
    }

    #[test]
    fn replicas_are_asked_again_while_grants_wait() {
        let mut table = SyncTable::default();
        table.push(grant(1, 1, 10_000));
        assert!(table.look(&acks(10, &[]), NOW).ask_replicas);
        assert!(
            !table
                .look(&acks(10, &[]), NOW + ASK_AGAIN_MS - 1)
                .ask_replicas
        );
        assert!(table.look(&acks(10, &[]), NOW + ASK_AGAIN_MS).ask_replicas);
    }

    #[test]
    fn clients_leave_by_handle() {
        let mut table = SyncTable::default();
        table.push(grant(1, 1, 10));
        table.push(grant(2, 1, 10));
        assert_eq!(table.remove_client(1).map(|g| g.client), Some(1));
        assert_eq!(table.remove_client(1), None);
        assert_eq!(table.drain_all().len(), 1);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn sync_zero_or_nothing_configured_means_no_wait() {
        let spec = |replicas| SyncSpec {
            replicas,
            timeout_ms: 5,
        };
        assert_eq!(SyncSpec::effective(None, None), None);
        assert_eq!(SyncSpec::effective(Some(spec(0)), Some(spec(2))), None);
        assert_eq!(SyncSpec::effective(None, Some(spec(2))), Some(spec(2)));
        assert_eq!(
            SyncSpec::effective(Some(spec(1)), Some(spec(2))),
            Some(spec(1))
        );
    }
}
