//! The hash space of sharding, exactly as the API server computes it (KEP-5866,
//! `k8s.io/apimachinery/pkg/sharding`): 64-bit FNV-1a of the field's value, ranges `[lo, hi)` over
//! `[0, 2^64)`; and how live members split it — sorted by name, member `i` of `n` owns the
//! `i`-th of `n` contiguous ranges: equal parts by uid, equal counts of namespaces by namespace.

use std::fmt;

/// 64-bit FNV-1a, as Go's `hash/fnv.New64a` (the API server's shard hash). Written out rather
/// than taken from a crate: five lines, and the exact constants are the contract.
pub fn fnv1a64(value: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in value.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The end of the hash space (exclusive): 2^64.
pub const END: u128 = 1 << 64;

/// A range `[lo, hi)` of the hash space (`hi` up to 2^64, hence `u128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Range {
    /// Inclusive lower bound.
    pub lo: u128,
    /// Exclusive upper bound.
    pub hi: u128,
}

impl Range {
    /// Whether `h` is in it.
    pub fn contains(&self, h: u64) -> bool {
        self.lo <= u128::from(h) && u128::from(h) < self.hi
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.lo >= self.hi
    }
}

fn hex(v: u128) -> String {
    // The API server's normal form: 16 hex digits, or 2^64 written out.
    if v >= END {
        "0x10000000000000000".into()
    } else {
        format!("0x{v:016x}")
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", hex(self.lo), hex(self.hi))
    }
}

/// A set of disjoint ranges, sorted (what a replica holds, or should).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ranges(Vec<Range>);

impl Ranges {
    /// Nothing.
    pub fn empty() -> Self {
        Ranges(Vec::new())
    }

    /// The whole hash space.
    pub fn all() -> Self {
        Ranges(vec![Range { lo: 0, hi: END }])
    }

    /// From any ranges: sorted, empty ones dropped, overlapping or touching ones merged.
    pub fn from(mut v: Vec<Range>) -> Self {
        v.retain(|r| !r.is_empty());
        v.sort();
        let mut out: Vec<Range> = Vec::with_capacity(v.len());
        for r in v {
            match out.last_mut() {
                Some(last) if r.lo <= last.hi => last.hi = last.hi.max(r.hi),
                _ => out.push(r),
            }
        }
        Ranges(out)
    }

    /// The ranges.
    pub fn ranges(&self) -> &[Range] {
        &self.0
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `h` is in it.
    pub fn contains(&self, h: u64) -> bool {
        self.0.iter().any(|r| r.contains(h))
    }

    /// What both hold.
    pub fn intersect(&self, other: &Ranges) -> Ranges {
        let mut out = Vec::new();
        for a in &self.0 {
            for b in &other.0 {
                let r = Range { lo: a.lo.max(b.lo), hi: a.hi.min(b.hi) };
                if !r.is_empty() {
                    out.push(r);
                }
            }
        }
        Ranges::from(out)
    }

    /// What `self` holds and `other` does not.
    pub fn minus(&self, other: &Ranges) -> Ranges {
        let mut out = Vec::new();
        for a in &self.0 {
            let mut rest = vec![*a];
            for b in &other.0 {
                rest = rest
                    .into_iter()
                    .flat_map(|r| [Range { lo: r.lo, hi: r.hi.min(b.lo) }, Range { lo: r.lo.max(b.hi), hi: r.hi }])
                    .filter(|r| !r.is_empty())
                    .collect();
            }
            out.extend(rest);
        }
        Ranges::from(out)
    }

    /// Both together.
    pub fn union(&self, other: &Ranges) -> Ranges {
        Ranges::from(self.0.iter().chain(&other.0).copied().collect())
    }

    /// The part of the hash space it covers, in parts per million (for metrics).
    pub fn ppm(&self) -> u64 {
        let covered: u128 = self.0.iter().map(|r| r.hi - r.lo).sum();
        (covered * 1_000_000 / END) as u64
    }

    /// As the API server's shard selector over `field` (`object.metadata.namespace` or
    /// `object.metadata.uid`): `shardRange(field, 'lo', 'hi') || ...`. `None` when empty (an
    /// empty selector would mean everything).
    pub fn selector(&self, field: &str) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let parts: Vec<String> =
            self.0.iter().map(|r| format!("shardRange({field}, '{}', '{}')", hex(r.lo), hex(r.hi))).collect();
        Some(parts.join(" || "))
    }

    /// The annotation form (`lo-hi,lo-hi`, empty for nothing), parsed back by [`Ranges::parse`].
    pub fn to_annotation(&self) -> String {
        self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
    }

    /// Parses [`Ranges::to_annotation`]'s form.
    pub fn parse(s: &str) -> Result<Ranges, String> {
        let num = |x: &str| {
            let digits = x.trim().strip_prefix("0x").ok_or_else(|| format!("{x:?} is not 0x-prefixed"))?;
            let v = u128::from_str_radix(digits, 16).map_err(|e| format!("{x:?}: {e}"))?;
            if v > END {
                return Err(format!("{x:?} is beyond 2^64"));
            }
            Ok(v)
        };
        let mut v = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = part.split_once('-').ok_or_else(|| format!("{part:?} is not lo-hi"))?;
            v.push(Range { lo: num(lo)?, hi: num(hi)? });
        }
        Ok(Ranges::from(v))
    }
}

/// The range member `i` of `n` owns: the `i`-th of `n` equal parts (the last ends at 2^64).
pub fn part(i: usize, n: usize) -> Range {
    let n = n.max(1) as u128;
    let i = i as u128;
    Range { lo: END * i / n, hi: END * (i + 1) / n }
}

/// The range `me` owns among the live `members` (sorted by name); nothing if it is not one.
pub fn target(members: &[String], me: &str) -> Ranges {
    let mut sorted: Vec<&String> = members.iter().collect();
    sorted.sort();
    sorted.dedup();
    match sorted.iter().position(|m| *m == me) {
        Some(i) => Ranges::from(vec![part(i, sorted.len())]),
        None => Ranges::empty(),
    }
}

/// The range `me` owns among the live `members` when what is shared hashes to `points` (the
/// namespaces): cut so that each member gets as many of them, since the hash of similar names
/// is far from uniform — FNV-1a moves little of a last character into the high bits, so
/// `team-1` … `team-9` all fall into one equal part. Fewer points than members: equal parts.
pub fn split(members: &[String], me: &str, points: &[u64]) -> Ranges {
    let mut sorted: Vec<&String> = members.iter().collect();
    sorted.sort();
    sorted.dedup();
    let n = sorted.len();
    if points.len() < n {
        return target(members, me);
    }
    let Some(i) = sorted.iter().position(|m| *m == me) else { return Ranges::empty() };
    let mut p = points.to_vec();
    p.sort_unstable();
    let cut = |k: usize| -> u128 {
        match k {
            0 => 0,
            k if k >= n => END,
            k => u128::from(p[k * p.len() / n]),
        }
    };
    Ranges::from(vec![Range { lo: cut(i), hi: cut(i + 1) }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_go_fnv64a() {
        // Go: fmt.Sprintf("%016x", fnv.New64a() of "") and of "a", "default".
        assert_eq!(format!("{:016x}", fnv1a64("")), "cbf29ce484222325");
        assert_eq!(format!("{:016x}", fnv1a64("a")), "af63dc4c8601ec8c");
        assert_eq!(format!("{:016x}", fnv1a64("foobar")), "85944171f73967e8");
    }

    #[test]
    fn members_split_the_space_into_contiguous_equal_parts() {
        let m: Vec<String> = ["b", "a", "c"].iter().map(|s| s.to_string()).collect();
        let (a, b, c) = (target(&m, "a"), target(&m, "b"), target(&m, "c"));
        assert_eq!(a.union(&b).union(&c), Ranges::all(), "everything is someone's");
        assert!(a.intersect(&b).is_empty() && b.intersect(&c).is_empty() && a.intersect(&c).is_empty());
        assert_eq!(c.ranges()[0].hi, END);
        assert!(target(&m, "d").is_empty());
        assert_eq!(target(&["solo".to_string()], "solo"), Ranges::all());
        assert!((333_000..=334_000).contains(&a.ppm()));
    }

    #[test]
    fn similar_names_are_split_by_count_not_by_equal_parts() {
        let names: Vec<String> = (0..60).map(|i| format!("shard-{i}")).collect();
        let points: Vec<u64> = names.iter().map(|n| fnv1a64(n)).collect();
        let m: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let count = |r: &Ranges| points.iter().filter(|p| r.contains(**p)).count();
        // Equal parts: nearly all in one.
        let equal: Vec<usize> = m.iter().map(|x| count(&target(&m, x))).collect();
        assert!(equal.iter().any(|c| *c >= 50), "{equal:?}");
        // Split by count: 20 each, everything covered, nothing twice.
        let parts: Vec<Ranges> = m.iter().map(|x| split(&m, x, &points)).collect();
        assert_eq!(parts.iter().map(count).collect::<Vec<_>>(), [20, 20, 20]);
        assert_eq!(parts[0].union(&parts[1]).union(&parts[2]), Ranges::all());
        assert!(parts[0].intersect(&parts[1]).is_empty() && parts[1].intersect(&parts[2]).is_empty());
        assert_eq!(split(&m, "a", &points[..2]), target(&m, "a"), "too few: equal parts");
    }

    #[test]
    fn range_sets_compose_and_round_trip() {
        let r = |lo: u128, hi: u128| Range { lo, hi };
        let x = Ranges::from(vec![r(0, 10), r(5, 20), r(30, 40), r(40, 50)]);
        assert_eq!(x.ranges(), [r(0, 20), r(30, 50)]);
        assert_eq!(x.minus(&Ranges::from(vec![r(10, 35)])).ranges(), [r(0, 10), r(35, 50)]);
        assert_eq!(x.intersect(&Ranges::from(vec![r(15, 32)])).ranges(), [r(15, 20), r(30, 32)]);
        let all = Ranges::all();
        assert_eq!(Ranges::parse(&all.to_annotation()), Ok(all.clone()));
        assert_eq!(Ranges::parse(""), Ok(Ranges::empty()));
        assert!(Ranges::parse("0x1-").is_err() && Ranges::parse("1-2").is_err());
        assert_eq!(
            Ranges::from(vec![part(1, 2)]).selector("object.metadata.namespace").as_deref(),
            Some("shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')")
        );
        assert!(Ranges::empty().selector("object.metadata.uid").is_none());
        assert!(
            Ranges::from(vec![part(0, 2)]).contains(0x7fff_ffff_ffff_ffff)
                && !Ranges::from(vec![part(0, 2)]).contains(1 << 63)
        );
    }
}
