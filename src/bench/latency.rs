//! A log-linear latency histogram (HDR-like) in nanoseconds.
//!
//! Values below 2^[`SUB_BITS`] get one bucket each (exact); above, every power
//! of two is split into 2^`SUB_BITS` equal buckets, so a bucket is at most
//! 1/64 (≈1.6 %) of its lower bound wide. The bucket array has a fixed size
//! covering all of `u64`, allocated once in [`Histogram::new`]: `record` is
//! O(1), never allocates and never saturates. Each writer thread keeps its
//! own histogram; [`Histogram::merge`] adds them up afterwards.

use serde::{Deserialize, Serialize};

/// Sub-bucket bits: 2^6 = 64 buckets per power of two (≈1.6 % width).
pub const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets covering 0..=u64::MAX.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Counts of nanosecond samples in log-linear buckets.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// p50 / p99 / p99.9 / max in microseconds, from one histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

/// A [`Histogram`] in transit: its non-empty `(bucket, count)` pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramParts {
    pub buckets: Vec<(u32, u64)>,
    pub min: u64,
    pub max: u64,
    pub sum: u128,
}

#[inline]
fn index_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = msb - SUB_BITS;
    let sub = (v >> shift) - SUB; // 0..SUB
    ((shift as u64 + 1) * SUB + sub) as usize
}

/// The smallest and largest value landing in bucket `i`.
fn bounds_of(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i);
    }
    let shift = i / SUB - 1;
    let sub = i % SUB;
    let low = (SUB + sub) << shift;
    let width_minus_one = (1u64 << shift) - 1;
    (low, low.saturating_add(width_minus_one))
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0u64; BUCKETS].into_boxed_slice(),
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Records one sample (nanoseconds). O(1), no allocation.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[index_of(ns)] += 1;
        self.total += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.sum += ns as u128;
    }

    /// Adds every sample of `other` (e.g. another writer thread's).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    #[cfg(test)]
    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }

    /// The `q`-quantile (0 ≤ q ≤ 1) in nanoseconds: the sample of rank
    /// ⌈q·n⌉ (at least 1), as the midpoint of its bucket clamped to the
    /// recorded min/max, so within half a bucket (≤ 0.8 %) of the exact
    /// value. `None` when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds_of(i);
                let mid = lo + (hi - lo) / 2;
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max) // unreachable: counts sum to total
    }

    fn quantile_us(&self, q: f64) -> Option<f64> {
        self.quantile(q).map(|ns| ns as f64 / 1_000.0)
    }

    pub fn p50_us(&self) -> Option<f64> {
        self.quantile_us(0.5)
    }

    pub fn p99_us(&self) -> Option<f64> {
        self.quantile_us(0.99)
    }

    pub fn p999_us(&self) -> Option<f64> {
        self.quantile_us(0.999)
    }

    /// The non-empty buckets and the exact aggregates, for sending a
    /// histogram between processes (`bench clients` workers).
    pub fn to_parts(&self) -> HistogramParts {
        let buckets = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i as u32, c))
            .collect();
        HistogramParts {
            buckets,
            min: self.min,
            max: self.max,
            sum: self.sum,
        }
    }

    /// The histogram [`Histogram::to_parts`] made; a bucket index out of
    /// range is an error naming it.
    pub fn from_parts(p: &HistogramParts) -> Result<Self, String> {
        let mut h = Histogram::new();
        for &(i, c) in &p.buckets {
            let slot = h
                .counts
                .get_mut(i as usize)
                .ok_or_else(|| format!("histogram bucket {i} out of range (< {BUCKETS})"))?;
            *slot += c;
            h.total += c;
        }
        if h.total > 0 {
            (h.min, h.max, h.sum) = (p.min, p.max, p.sum);
        }
        Ok(h)
    }

    /// The usual quantiles in µs, or `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        Some(LatencySummary {
            count: self.total,
            p50_us: self.p50_us()?,
            p99_us: self.p99_us()?,
            p999_us: self.p999_us()?,
            max_us: self.max()? as f64 / 1_000.0,
            mean_us: self.mean()? / 1_000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact(sorted: &[u64], q: f64) -> u64 {
        let n = sorted.len() as u64;
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        sorted[(rank - 1) as usize]
    }

    fn assert_close(h: &Histogram, sorted: &[u64], q: f64) {
        let want = exact(sorted, q);
        let got = h.quantile(q).unwrap();
        // Half a bucket: width ≤ lower bound / 64.
        let tol = want / (2 * SUB) + 1;
        assert!(
            got.abs_diff(want) <= tol,
            "q={q}: got {got}, exact {want}, tolerance {tol}"
        );
    }

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        let mut prev_hi = None::<u64>;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds_of(i);
            assert!(lo <= hi);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert_eq!(index_of(lo), i);
            assert_eq!(index_of(hi), i);
            // Width at most 1/64 of the lower bound above the exact range.
            if lo >= SUB {
                assert!(hi - lo < lo / SUB + 1);
            }
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn empty_histogram_has_no_quantiles() {
        let h = Histogram::new();
        assert_eq!(h.quantile(0.5), None);
        assert!(h.summary().is_none());
        assert_eq!(h.count(), 0);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=50u64 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), Some(25));
        assert_eq!(h.quantile(1.0), Some(50));
        assert_eq!(h.quantile(0.0), Some(1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn quantiles_match_sorted_array(
            mut values in prop::collection::vec(
                prop_oneof![0u64..1_000, 1_000u64..10_000_000, any::<u64>()], 1..2_000),
            split in 0usize..2_000,
        ) {
            // Recorded across two "threads" and merged.
            let split = split.min(values.len());
            let mut a = Histogram::new();
            let mut b = Histogram::new();
            for &v in &values[..split] { a.record(v); }
            for &v in &values[split..] { b.record(v); }
            a.merge(&b);
            values.sort_unstable();
            prop_assert_eq!(a.count(), values.len() as u64);
            prop_assert_eq!(a.min(), values.first().copied());
            prop_assert_eq!(a.max(), values.last().copied());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_close(&a, &values, q);
            }
        }
    }

    #[test]
    fn parts_round_trip_through_json() {
        let mut h = Histogram::new();
        for v in [3u64, 900, 45_000, 45_001, 7_000_000_000] {
            h.record(v);
        }
        let text = serde_json::to_string(&h.to_parts()).unwrap();
        let back = Histogram::from_parts(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, h);
        assert_eq!(
            Histogram::from_parts(&Histogram::new().to_parts()).unwrap(),
            Histogram::new()
        );
        let bad = HistogramParts {
            buckets: vec![(u32::MAX, 1)],
            min: 0,
            max: 0,
            sum: 0,
        };
        assert!(Histogram::from_parts(&bad)
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn summary_is_in_microseconds() {
        let mut h = Histogram::new();
        for i in 0..1000u64 {
            h.record(10_000 + i); // 10..11 µs
        }
        h.record(5_000_000); // one 5 ms outlier
        let s = h.summary().unwrap();
        assert!((9.9..11.1).contains(&s.p50_us), "{s:?}");
        assert!((9.9..11.1).contains(&s.p99_us), "{s:?}");
        assert_eq!(s.max_us, 5_000.0);
        assert_eq!(s.count, 1001);
    }
}
