//! Checking how deep arrays and objects nest, 64 bytes at a time.
//!
//! A block's brackets outside strings come from the same masks the
//! container skip uses ([`crate::classify`], strings found by a prefix XOR
//! of the unescaped quotes). A block whose opening brackets could not take
//! the depth past the limit, even if all of them came first, only adds its
//! opening brackets and subtracts its closing ones; only a block that
//! could cross the limit is walked bracket by bracket.

use crate::block::{Strings, block_at};
use crate::classify::{BLOCK, Kernel, Portable};

/// Whether the arrays and objects of a JSON text nest deeper than a limit,
/// for text fed in pieces (say, a document with a member cut out).
///
/// The text is expected to be JSON a parser has accepted: on anything else
/// the answer means nothing, but there is no panic. Each piece must end
/// outside strings and not inside an escape.
///
/// ```
/// use kinformer_json_scan::NestingCheck;
/// let mut check = NestingCheck::new(2);
/// check.feed(br#"{"a":[1,"[[["],"#);
/// check.feed(br#""b":{}}"#);
/// assert!(!check.exceeded());
/// check.feed(br#"[[[]]]"#);
/// assert!(check.exceeded());
/// ```
#[derive(Debug)]
pub struct NestingCheck {
    limit: usize,
    depth: usize,
    exceeded: bool,
}

impl NestingCheck {
    /// A check of nesting deeper than `limit` levels, fed nothing yet.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            depth: 0,
            exceeded: false,
        }
    }

    /// Counts the brackets of `json`, the next piece of the text.
    pub fn feed(&mut self, json: &[u8]) {
        self.feed_with(Portable, json);
    }

    /// [`NestingCheck::feed`] with the masks of kernel `k`.
    #[inline(always)]
    pub(crate) fn feed_with<K: Kernel>(&mut self, k: K, json: &[u8]) {
        let mut strings = Strings::default();
        let mut start = 0;
        // Only the last block is padded: filled once.
        let mut padded = [b' '; BLOCK];
        while start < json.len() && !self.exceeded {
            let (masks, outside) = strings.classify(k, block_at(json, start, &mut padded));
            let opens = masks.open & outside;
            let closes = masks.close & outside;
            if self.depth + opens.count_ones() as usize <= self.limit {
                self.depth = (self.depth + opens.count_ones() as usize)
                    .saturating_sub(closes.count_ones() as usize);
            } else {
                self.walk(opens, closes);
            }
            start += BLOCK;
        }
    }

    /// Counts a block's brackets in order, stopping past the limit.
    fn walk(&mut self, opens: u64, closes: u64) {
        let mut brackets = opens | closes;
        while brackets != 0 {
            let bit = brackets & brackets.wrapping_neg();
            brackets &= brackets - 1;
            if opens & bit != 0 {
                self.depth += 1;
                if self.depth > self.limit {
                    self.exceeded = true;
                    return;
                }
            } else {
                self.depth = self.depth.saturating_sub(1);
            }
        }
    }

    /// Whether the text fed so far nests deeper than the limit.
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The deepest nesting of `json`, a byte at a time.
    fn deepest_bytewise(json: &[u8]) -> usize {
        let (mut depth, mut deepest) = (0usize, 0usize);
        let (mut in_string, mut escaped) = (false, false);
        for &b in json {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }

    /// JSON values up to 40 deep, with strings full of brackets, quotes
    /// and backslashes.
    fn value() -> impl Strategy<Value = String> {
        crate::testing::json_value(
            vec!["a", "\\\"", "\\\\", "]", "{", "[", " ", "\\\\\\\""],
            vec!["1", "[]"],
            40,
            200,
            4,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn blocks_answer_as_a_bytewise_count(
            values in prop::collection::vec(value(), 1..4),
            limit in prop_oneof![0usize..6, 6usize..40],
        ) {
            // Pieces end between top-level values: outside strings. `feed`
            // takes the fastest kernel; the portable one is checked too.
            let (mut check, mut portable) = (NestingCheck::new(limit), NestingCheck::new(limit));
            let mut whole = Vec::new();
            for v in &values {
                check.feed(v.as_bytes());
                portable.feed_with(Portable, v.as_bytes());
                whole.extend_from_slice(v.as_bytes());
            }
            let expected = deepest_bytewise(&whole) > limit;
            prop_assert_eq!(check.exceeded(), expected);
            prop_assert_eq!(portable.exceeded(), expected);
        }
    }

    #[test]
    fn a_block_that_may_cross_the_limit_is_walked_in_order() {
        // 64 opens then 64 closes: the first block alone reaches 64.
        let json = [[b'['; 64], [b']'; 64]].concat();
        for (limit, exceeded) in [(63, true), (64, false)] {
            let mut check = NestingCheck::new(limit);
            check.feed(&json);
            assert_eq!(check.exceeded(), exceeded, "limit {limit}");
        }
        // Balanced pairs in one block never go past 1.
        let mut check = NestingCheck::new(1);
        check.feed(&b"[]".repeat(40));
        assert!(!check.exceeded());
    }

    #[test]
    fn brackets_in_strings_and_escaped_quotes_do_not_count() {
        let mut check = NestingCheck::new(1);
        check.feed(br#"["[[[\"[[", "\\", "{{"]"#);
        assert!(!check.exceeded());
        check.feed(br#"[["\\"]]"#);
        assert!(check.exceeded());
    }
}
