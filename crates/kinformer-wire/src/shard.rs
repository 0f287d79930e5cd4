//! Shard selectors of server-side sharded LIST and WATCH (KEP-5866, alpha
//! in Kubernetes 1.36, gate `ShardedListAndWatch`): the `shardSelector`
//! parameter, `shardRange(object.metadata.uid, '0x…', '0x…')` ranges of
//! the field's 64-bit FNV-1a hash, `[start, end)`, joined with `||`.
//!
//! The same rules as kube-apiserver's parser: the field is
//! `object.metadata.uid` or `object.metadata.namespace` (one field for all
//! ranges), bounds are `0x` and exactly 16 lowercase hex digits, or
//! `0x10000000000000000` (2^64) as an end, and each start is below its end.
//!
//! ```
//! use kinformer_wire::shard::ShardSelector;
//!
//! let halves = [ShardSelector::uid_shard(0, 2), ShardSelector::uid_shard(1, 2)];
//! assert_eq!(
//!     halves[1].to_string(),
//!     "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
//! );
//! let parsed: ShardSelector = halves[0].to_string().parse().unwrap();
//! assert_eq!(parsed, halves[0]);
//! // Every UID is in exactly one half.
//! let uid = "5f1c3a0e-0c6f-4d6a-9a43-1f6c2b7d9e10";
//! assert_eq!(halves.iter().filter(|s| s.matches(uid)).count(), 1);
//! ```

use std::fmt;
use std::str::FromStr;

use crate::error::WireError;

/// The field a shard selector hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace`.
    Namespace,
}

impl ShardField {
    /// The field's path in a selector.
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }
}

/// One `[start, end)` range of hashes (`end` up to 2^64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShardRange {
    /// Inclusive start.
    pub start: u64,
    /// Exclusive end, at most 2^64.
    pub end: u128,
}

impl ShardRange {
    /// Whether `hash` falls in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }
}

/// A parsed `shardSelector`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    ranges: Vec<ShardRange>,
}

/// 2^64, the exclusive end of the hash space.
const END: u128 = 1 << 64;

impl ShardSelector {
    /// Shard `index` of `count` equal shards of the UID hash space (`count`
    /// at least 1; `index` taken modulo `count`).
    pub fn uid_shard(index: u32, count: u32) -> Self {
        let count = u128::from(count.max(1));
        let index = u128::from(index) % count;
        let bound = |i: u128| i * END / count;
        let range = ShardRange {
            start: u64::try_from(bound(index)).unwrap_or(u64::MAX),
            end: bound(index + 1),
        };
        Self {
            field: ShardField::Uid,
            ranges: vec![range],
        }
    }

    /// A selector of `ranges` of `field`; fails on an empty list or a range
    /// whose start is not below its end or whose end is above 2^64.
    pub fn new(
        field: ShardField,
        ranges: impl IntoIterator<Item = ShardRange>,
    ) -> Result<Self, WireError> {
        let ranges: Vec<ShardRange> = ranges.into_iter().collect();
        if ranges.is_empty() {
            return Err(WireError::ShardSelector("empty shard selector".into()));
        }
        for r in &ranges {
            if u128::from(r.start) >= r.end || r.end > END {
                return Err(WireError::ShardSelector(format!(
                    "shard range start {} must be less than end {}",
                    hex(u128::from(r.start)),
                    hex(r.end)
                )));
            }
        }
        Ok(Self { field, ranges })
    }

    /// The hashed field.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// The objects of this shard and of `other`: their ranges, sorted, with
    /// overlapping and adjacent ones merged. Fails when the two hash
    /// different fields.
    ///
    /// ```
    /// use kinformer_wire::shard::ShardSelector;
    ///
    /// let two_of_four = ShardSelector::uid_shard(1, 4).union(&ShardSelector::uid_shard(2, 4)).unwrap();
    /// assert_eq!(
    ///     two_of_four.to_string(),
    ///     "shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')"
    /// );
    /// ```
    pub fn union(&self, other: &ShardSelector) -> Result<Self, WireError> {
        if self.field != other.field {
            return Err(WireError::ShardSelector(format!(
                "a union of shards of {} and {}",
                self.field.path(),
                other.field.path()
            )));
        }
        let mut ranges: Vec<ShardRange> =
            self.ranges.iter().chain(&other.ranges).copied().collect();
        ranges.sort_by_key(|r| (r.start, r.end));
        let mut merged: Vec<ShardRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if u128::from(r.start) <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        Ok(Self {
            field: self.field,
            ranges: merged,
        })
    }

    /// Whether an object whose field has `value` is in the shard.
    pub fn matches(&self, value: &str) -> bool {
        self.matches_bytes(value.as_bytes())
    }

    /// Whether an object whose field's value has these bytes is in the
    /// shard.
    pub fn matches_bytes(&self, value: &[u8]) -> bool {
        let hash = fnv1a64(value);
        self.ranges.iter().any(|r| r.contains(hash))
    }
}

/// 64-bit FNV-1a, the hash shard ranges are over.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A bound as the wire writes it.
fn hex(v: u128) -> String {
    if v >= END {
        "0x10000000000000000".into()
    } else {
        format!("0x{v:016x}")
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                hex(u128::from(r.start)),
                hex(r.end)
            )?;
        }
        Ok(())
    }
}

impl FromStr for ShardSelector {
    type Err = WireError;

    fn from_str(s: &str) -> Result<Self, WireError> {
        let err = WireError::ShardSelector;
        let s = s.trim();
        if s.is_empty() {
            return Err(err(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            ));
        }
        let mut field = None;
        let mut ranges = Vec::new();
        for call in s.split("||") {
            let call = call.trim();
            let Some(args) = call
                .strip_prefix("shardRange")
                .map(str::trim_start)
                .and_then(|a| a.strip_prefix('('))
                .and_then(|a| a.strip_suffix(')'))
            else {
                return Err(err(format!(
                    "unsupported expression {call:?}; only shardRange() and || are allowed"
                )));
            };
            let args: Vec<&str> = args.split(',').map(str::trim).collect();
            let [path, start, end] = args[..] else {
                return Err(err(format!(
                    "shardRange() requires exactly 3 arguments, got {}",
                    args.len()
                )));
            };
            let this = match path {
                "object.metadata.uid" => ShardField::Uid,
                "object.metadata.namespace" => ShardField::Namespace,
                other => {
                    return Err(err(format!(
                        "unsupported field path {other:?}; supported: object.metadata.uid, object.metadata.namespace"
                    )));
                }
            };
            if *field.get_or_insert(this) != this {
                return Err(err(format!(
                    "all shard ranges must use the same field, got {:?} and {:?}",
                    field.map_or("", ShardField::path),
                    this.path()
                )));
            }
            let start = bound(start, "hexStart")?;
            let end = bound(end, "hexEnd")?;
            if start >= end || start >= END {
                return Err(err(format!(
                    "shard range start {} must be less than end {}",
                    hex(start),
                    hex(end)
                )));
            }
            ranges.push(ShardRange {
                start: u64::try_from(start).unwrap_or(u64::MAX),
                end,
            });
        }
        Self::new(field.unwrap_or(ShardField::Uid), ranges)
    }
}

/// One quoted bound: `'0x'` and 16 lowercase hex digits, or 2^64.
fn bound(literal: &str, name: &str) -> Result<u128, WireError> {
    let err = WireError::ShardSelector;
    let quoted = literal
        .strip_prefix('\'')
        .and_then(|l| l.strip_suffix('\''))
        .or_else(|| literal.strip_prefix('"').and_then(|l| l.strip_suffix('"')));
    let Some(s) = quoted else {
        return Err(err(format!(
            "{name} must be a string literal (e.g. '0xff')"
        )));
    };
    let Some(digits) = s.strip_prefix("0x") else {
        return Err(err(format!("{name} must have '0x' prefix, got {s:?}")));
    };
    if digits.is_empty() {
        return Err(err(format!("{name}: hex value is required after '0x'")));
    }
    if let Some(c) = digits.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(err(format!("{name}: invalid hex character {c:?} in {s:?}")));
    }
    match digits.len() {
        16 => u128::from_str_radix(digits, 16).map_err(|e| err(e.to_string())),
        17 if s == "0x10000000000000000" => Ok(END),
        17 => Err(err(format!(
            "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
        ))),
        n if n > 17 => Err(err(format!(
            "{name}: hex value too long ({n} chars, max 17): {digits:?}"
        ))),
        n => Err(err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean \"0x{}{digits}\"?)",
            "0".repeat(16 - n)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn equal_shards_cover_the_hash_space_once() {
        for count in [1u32, 2, 3, 7, 16] {
            let shards: Vec<_> = (0..count)
                .map(|i| ShardSelector::uid_shard(i, count))
                .collect();
            assert_eq!(shards[0].ranges()[0].start, 0);
            assert_eq!(shards[count as usize - 1].ranges()[0].end, END);
            for w in shards.windows(2) {
                assert_eq!(u128::from(w[1].ranges()[0].start), w[0].ranges()[0].end);
            }
            for i in 0..1000 {
                let uid = format!("uid-{i}");
                assert_eq!(shards.iter().filter(|s| s.matches(&uid)).count(), 1);
            }
        }
    }

    #[test]
    fn round_trips_and_joined_ranges() {
        let s: ShardSelector = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, \"0xc000000000000000\", '0x10000000000000000')"
            .parse()
            .unwrap();
        assert_eq!(s.field(), ShardField::Namespace);
        assert_eq!(s.ranges().len(), 2);
        assert_eq!(s.to_string().parse::<ShardSelector>().unwrap(), s);
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_apiservers_reasons() {
        let cases = [
            ("", "empty shard selector"),
            ("labels(x)", "only shardRange() and ||"),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000')",
                "exactly 3 arguments",
            ),
            (
                "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
                "unsupported field path",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
                "16-digit hex value",
            ),
            (
                "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
                "'0x' prefix",
            ),
            (
                "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
                "must be less than end",
            ),
            (
                "shardRange(object.metadata.uid, '0x000000000000000G', '0x8000000000000000')",
                "invalid hex character",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
                "17-digit",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
                "same field",
            ),
        ];
        for (input, reason) in cases {
            match input.parse::<ShardSelector>() {
                Err(WireError::ShardSelector(m)) => assert!(m.contains(reason), "{input:?}: {m}"),
                other => panic!("{input:?}: {other:?}"),
            }
        }
    }
}
