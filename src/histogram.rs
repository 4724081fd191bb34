//! A log-bucketed histogram of durations, in fixed memory. Pure.
//!
//! Wait and hold times span from a microsecond (a hand-off in the same
//! event) to days (a lease a watchdog keeps renewing), so the buckets grow
//! with the value: below 8 µs one bucket per microsecond, above it eight
//! buckets per power of two. A bucket is then at most 1/8 of its values
//! wide, so a percentile read from the buckets is within 12.5% of the true
//! one, whatever the scale, in [`BUCKETS`] counters (2.6 KB) per histogram.
//! The largest value is also kept exactly (`max`), and percentiles never
//! answer more than it.
//!
//! The same layout as HdrHistogram's with three significant bits, or
//! Redis's own latency histograms (`latency-tracking`), which answer
//! percentiles from buckets the same way.

/// Sub-buckets per power of two, as a power of two: 2^3 = 8, so a bucket
/// spans at most 1/8 of its values.
const SUB_BITS: u32 = 3;
const SUB_BUCKETS: usize = 1 << SUB_BITS;
/// The largest power of two tracked: values from 2^TOP_BIT µs (about 51
/// days) up land in the last bucket (their exact maximum is still kept).
const TOP_BIT: u32 = 42;
/// Buckets per histogram: one per microsecond below 2^SUB_BITS, then
/// SUB_BUCKETS per power of two from 2^SUB_BITS to 2^TOP_BIT, then one for
/// everything above.
pub const BUCKETS: usize = SUB_BUCKETS + (TOP_BIT - SUB_BITS) as usize * SUB_BUCKETS + 1;

/// Durations in microseconds, bucketed.
#[derive(Clone)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    count: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

/// The bucket of a value.
fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS as u64 {
        return value as usize;
    }
    let top = 63 - value.leading_zeros(); // the highest set bit, >= SUB_BITS
    if top >= TOP_BIT {
        return BUCKETS - 1;
    }
    // The SUB_BITS bits below the highest one say where in its power of two.
    let sub = ((value >> (top - SUB_BITS)) as usize) & (SUB_BUCKETS - 1);
    SUB_BUCKETS + (top - SUB_BITS) as usize * SUB_BUCKETS + sub
}

/// The largest value a bucket holds (the last one holds everything above).
fn bucket_top(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    if bucket == BUCKETS - 1 {
        return u64::MAX;
    }
    let octave = ((bucket - SUB_BUCKETS) / SUB_BUCKETS) as u32 + SUB_BITS;
    let sub = ((bucket - SUB_BUCKETS) % SUB_BUCKETS) as u64;
    let width = 1u64 << (octave - SUB_BITS);
    (1u64 << octave) + (sub + 1) * width - 1
}

impl Histogram {
    pub const fn new() -> Histogram {
        Histogram {
            counts: [0; BUCKETS],
            count: 0,
            max: 0,
        }
    }

    /// Counts one duration.
    pub fn record(&mut self, micros: u64) {
        self.counts[bucket_of(micros)] += 1;
        self.count += 1;
        self.max = self.max.max(micros);
    }

    /// How many durations were counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest duration counted (0 when none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The duration below or at which `permille` thousandths of the counted
    /// ones are (500 = p50, 999 = p99.9): the top of the bucket holding
    /// that rank, so at most one bucket above the true value, and never
    /// above the largest one counted. 0 when nothing was counted.
    pub fn percentile(&self, permille: u32) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let permille = u64::from(permille.min(1000));
        // The rank, 1-based, of the value asked for (p50 of 10 values is
        // the 5th), computed without overflow for any count.
        let rank =
            (self.count / 1000 * permille + (self.count % 1000 * permille).div_ceil(1000)).max(1);
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_top(bucket).min(self.max);
            }
        }
        self.max
    }

    /// Forgets everything (`CONFIG RESETSTAT`).
    pub fn reset(&mut self) {
        *self = Histogram::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_whose_range_holds_it() {
        let mut previous_top = None;
        for bucket in 0..BUCKETS - 1 {
            let top = bucket_top(bucket);
            if let Some(previous) = previous_top {
                assert!(top > previous, "bucket {bucket}");
                assert_eq!(bucket_of(previous + 1), bucket, "first of {bucket}");
            }
            assert_eq!(bucket_of(top), bucket, "top of {bucket}");
            previous_top = Some(top);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(1 << TOP_BIT), BUCKETS - 1);
        assert_eq!(bucket_of((1 << TOP_BIT) - 1), BUCKETS - 2);
    }

    #[test]
    fn a_bucket_is_at_most_an_eighth_of_its_values_wide() {
        for bucket in SUB_BUCKETS..BUCKETS - 1 {
            let low = bucket_top(bucket - 1) + 1;
            let width = bucket_top(bucket) - low + 1;
            assert!(width * 8 <= low, "bucket {bucket}: [{low}, +{width})");
        }
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in [0, 1, 2, 3, 7] {
            h.record(v);
        }
        assert_eq!(h.percentile(0), 0);
        assert_eq!(h.percentile(500), 2);
        assert_eq!(h.percentile(1000), 7);
        assert_eq!(h.max(), 7);
    }

    /// Ten waits of 50, 100, ... 500 ms (a holder holding 50 ms, ten
    /// waiters served in turn): every percentile is within one bucket of
    /// the true one, and never below it.
    #[test]
    fn percentiles_are_within_a_bucket_of_the_truth() {
        let mut h = Histogram::new();
        let waits: Vec<u64> = (1..=10).map(|n| n * 50_000).collect();
        for &w in &waits {
            h.record(w);
        }
        assert_eq!(h.count(), 10);
        for (permille, truth) in [
            (500, 250_000),
            (900, 450_000),
            (990, 500_000),
            (999, 500_000),
        ] {
            let got = h.percentile(permille);
            assert!(got >= truth, "p{permille}: {got} < {truth}");
            assert_eq!(
                bucket_of(got),
                bucket_of(truth),
                "p{permille}: {got} vs {truth}"
            );
            assert!(got - truth <= truth / 8, "p{permille}: {got} vs {truth}");
        }
        assert_eq!(h.percentile(1000), 500_000, "p100 is the exact max");
        assert_eq!(h.max(), 500_000);
    }

    #[test]
    fn ranks_follow_the_nearest_rank_rule() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v);
        }
        // p50 of 1..=1000 is the 500th value, 500: its bucket is [480, 511].
        assert_eq!(bucket_of(h.percentile(500)), bucket_of(500));
        assert_eq!(bucket_of(h.percentile(999)), bucket_of(999));
        assert_eq!(h.percentile(1000), 1000);
        // One value: every percentile is it.
        let mut one = Histogram::new();
        one.record(12_345);
        for permille in [0, 500, 999, 1000] {
            assert_eq!(one.percentile(permille), 12_345);
        }
    }

    #[test]
    fn huge_values_are_counted_in_the_last_bucket_with_an_exact_max() {
        let mut h = Histogram::new();
        h.record(u64::MAX);
        h.record(1 << 50);
        assert_eq!(h.count(), 2);
        assert_eq!(h.max(), u64::MAX);
        assert_eq!(h.percentile(500), u64::MAX);
        // Counting stays correct past the rank formula's split point.
        let mut many = Histogram::new();
        for _ in 0..2_500 {
            many.record(10);
        }
        many.record(1_000_000);
        assert_eq!(many.percentile(999), 10);
        assert_eq!(many.percentile(1000), 1_000_000);
    }

    #[test]
    fn reset_forgets_everything() {
        let mut h = Histogram::new();
        h.record(5_000);
        h.reset();
        assert_eq!((h.count(), h.max(), h.percentile(500)), (0, 0, 0));
    }
}
