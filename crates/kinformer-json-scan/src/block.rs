//! Skipping a large array or object 64 bytes at a time.
//!
//! Each block's bytes become bit masks (bit `i` for byte `i`): quotes,
//! backslashes, brackets and bytes JSON does not allow outside strings.
//! Which bytes are inside strings follows from the unescaped quotes by a
//! prefix XOR, so strings cost nothing per byte; only the brackets outside
//! strings are visited one by one, to match them by kind and count the
//! depth. The masks come from [`crate::classify`].
//!
//! The checks are the byte-at-a-time scan's (see the crate docs), and a
//! property test holds the two to the same answers.

use crate::MAX_DEPTH;
use crate::classify::{BLOCK, Kernel, Masks, Portable};

/// Skips the array or object whose opening bracket is at `json[at]`,
/// nested `depth` deep, and returns the position just past its closing
/// bracket. `None` on anything the byte-at-a-time scan refuses: brackets
/// that do not match by kind, nesting past [`MAX_DEPTH`], a string or the
/// container not ending, a byte outside strings that JSON does not allow
/// there.
pub(crate) fn skip_container(json: &[u8], at: usize, depth: usize) -> Option<usize> {
    skip_container_with(Portable, json, at, depth)
}

/// [`skip_container`] with the masks of kernel `k`.
#[inline(always)]
pub(crate) fn skip_container_with<K: Kernel>(
    k: K,
    json: &[u8],
    at: usize,
    depth: usize,
) -> Option<usize> {
    // One bit per open container: 1 for an object, 0 for an array.
    let mut kinds: u128 = 0;
    let mut open = 0usize;
    let mut strings = Strings::default();
    let mut start = at;
    // Only the last block is padded: filled once.
    let mut padded = [b' '; BLOCK];
    while start < json.len() {
        let block = block_at(json, start, &mut padded);
        let (masks, outside) = strings.classify(k, block);
        // Outside strings, `managedFields` holds only brackets, quotes,
        // colons and commas: the full check runs only on blocks that hold
        // anything else.
        let unusual = outside & !(masks.quote | masks.open | masks.close | masks.punct);
        let other = if unusual == 0 {
            0
        } else {
            unusual & k.other(block)
        };
        let opens = masks.open & outside;
        let closes = masks.close & outside;
        let mut brackets = opens | closes;
        // An empty `{}` or `[]` (every other bracket in `managedFields`)
        // changes neither the depth nor what the next close must match:
        // drop such pairs at once, unless their depth could pass the limit
        // or the open one is the container's own.
        if depth + open + opens.count_ones() as usize <= MAX_DEPTH {
            let same_kind = !(masks.object ^ (masks.object >> 1));
            let mut empty = opens & (closes >> 1) & same_kind;
            if start == at {
                empty &= !1;
            }
            brackets &= !(empty | (empty << 1));
        }
        while brackets != 0 {
            let i = brackets.trailing_zeros();
            let bit = 1u64 << i;
            brackets &= brackets - 1;
            if masks.open & bit != 0 {
                if depth + open + 1 > MAX_DEPTH {
                    return None;
                }
                kinds = (kinds << 1) | u128::from(masks.object & bit != 0);
                open += 1;
                continue;
            }
            let object = kinds & 1 == 1;
            if open == 0 || object != (masks.object & bit != 0) {
                return None;
            }
            kinds >>= 1;
            open -= 1;
            if open == 0 {
                // Only the bytes up to this bracket had to be JSON.
                return (other & (bit - 1) == 0).then_some(start + i as usize + 1);
            }
        }
        if other != 0 {
            return None;
        }
        start += BLOCK;
    }
    None
}

/// The 64 bytes of `json` from `start` on; near the end, the bytes left
/// copied into `padded` (a block of spaces: a space is allowed anywhere
/// outside strings and ends nothing).
#[inline(always)]
pub(crate) fn block_at<'a>(
    json: &'a [u8],
    start: usize,
    padded: &'a mut [u8; BLOCK],
) -> &'a [u8; BLOCK] {
    match json.get(start..start + BLOCK).map(<&[u8; BLOCK]>::try_from) {
        Some(Ok(block)) => block,
        _ => {
            let rest = json.get(start..).unwrap_or_default();
            let n = rest.len().min(BLOCK);
            padded[..n].copy_from_slice(&rest[..n]);
            padded
        }
    }
}

/// Where strings run, carried from one block to the next.
#[derive(Debug, Default)]
pub(crate) struct Strings {
    /// All ones while a string runs on from the block before.
    in_string: u64,
    /// Whether the block's first byte is escaped by the block before.
    escape_carry: bool,
}

impl Strings {
    /// The masks of the next block, and which of its bytes lie outside
    /// strings (quotes excluded).
    #[inline(always)]
    pub(crate) fn classify<K: Kernel>(&mut self, k: K, block: &[u8; BLOCK]) -> (Masks, u64) {
        let masks = k.masks(block);
        let (escaped, carry) = escaped(masks.backslash, self.escape_carry);
        self.escape_carry = carry;
        let quotes = masks.quote & !escaped;
        // Set from an opening quote up to (not including) its closing one.
        let inside = k.prefix_xor(quotes) ^ self.in_string;
        self.in_string = 0u64.wrapping_sub(inside >> (BLOCK - 1));
        (masks, !(inside | quotes))
    }
}

/// Which bytes follow an odd run of backslashes (are escaped), given the
/// block's backslashes and whether its first byte is escaped by the block
/// before; and whether the next block's first byte is. Backslashes are
/// rare in Kubernetes objects (`managedFields` keys of list items), so
/// they are visited one by one.
fn escaped(backslash: u64, first_escaped: bool) -> (u64, bool) {
    let mut escaped = u64::from(first_escaped);
    let mut rest = backslash;
    let mut carry = false;
    while rest != 0 {
        let i = rest.trailing_zeros();
        rest &= rest - 1;
        if escaped >> i & 1 == 1 {
            // Escaped itself: escapes nothing.
            continue;
        }
        if i as usize == BLOCK - 1 {
            carry = true;
        } else {
            escaped |= 1 << (i + 1);
        }
    }
    (escaped, carry)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::scanner::Scanner;

    /// JSON values shaped like `managedFields`: objects of short keys,
    /// strings with escapes and brackets in them, arrays, numbers and
    /// literals, with spaces here and there.
    fn value() -> impl Strategy<Value = String> {
        crate::testing::json_value(
            vec![
                "a",
                "f:spec",
                "\\\"",
                "\\\\",
                "]",
                "{",
                " ",
                "k:{\\\"name\\\":\\\"x\\\"}",
            ],
            vec!["null", "true", "-1.5e3", "{}"],
            8,
            96,
            8,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn blocks_answer_as_the_bytewise_scan(
            value in value(),
            prefix in 0usize..70,
            edit in prop::option::of((any::<prop::sample::Index>(), prop::sample::select(b"{}[]\"\\ a,:x\x01\xff".to_vec()))),
            cut in prop::option::of(any::<prop::sample::Index>()),
            depth in prop_oneof![1usize..4, 120usize..=128],
        ) {
            let mut json = [vec![b' '; prefix], format!("[{value}]").into_bytes(), b",\"rest\"".to_vec()].concat();
            if let Some((at, byte)) = edit {
                // Not the opening bracket: the scan starts at one.
                let i = prefix + 1 + at.index(json.len() - prefix - 1);
                json[i] = byte;
            }
            if let Some(at) = cut {
                json.truncate(prefix + at.index(json.len() - prefix));
            }
            let mut scan = Scanner { json: &json, at: prefix };
            let bytewise = scan.skip_container_bytewise(depth).map(|()| scan.at);
            prop_assert_eq!(skip_container_with(Portable, &json, prefix, depth), bytewise);
        }
    }

    #[test]
    fn an_empty_container_ends_at_its_own_close() {
        assert_eq!(skip_container(b"[],1", 0, 1), Some(2));
        assert_eq!(skip_container(b" {} ", 1, 1), Some(3));
        assert_eq!(skip_container(b"{]", 0, 1), None);
    }

    #[test]
    fn a_prefix_xor_marks_what_lies_between_quotes() {
        // Quotes at 1 and 4, and at 10 (a string that runs on).
        let q = (1 << 1) | (1 << 4) | (1 << 10);
        let inside = Portable.prefix_xor(q);
        assert_eq!(inside & 0x3ff, 0b0000001110);
        assert_eq!(inside >> 10, u64::MAX >> 10);
    }

    #[test]
    fn escapes_follow_odd_runs_of_backslashes_across_blocks() {
        // `\\` at 0-1 escapes nothing past it; `\` at 3 escapes 4;
        // `\\\` at 6-8 escapes 9.
        let bs = 0b1_1100_1011;
        let (e, carry) = escaped(bs, false);
        assert_eq!(e, (1 << 1) | (1 << 4) | (1 << 7) | (1 << 9));
        assert!(!carry);
        // A block that ends in one unescaped backslash escapes the next
        // block's first byte, which, being a backslash, escapes nothing.
        let (_, carry) = escaped(1 << 63, false);
        assert!(carry);
        let (e, carry) = escaped(0b11, true);
        assert_eq!(e, 0b101);
        assert!(!carry);
    }
}
