//! A 64-byte block's bytes as bit masks, one per class the container
//! skip needs (bit `i` for byte `i`).
//!
//! On x86-64 the block is compared 16 bytes at a time with SSE2 (part of
//! every x86-64 CPU) through `safe_arch`, whose wrappers need no `unsafe`
//! here; elsewhere a byte loop gives the same masks, and a property test
//! holds the two to the same answers.

use crate::scanner;

/// Bytes per block: one bit each in a `u64`.
pub(crate) const BLOCK: usize = 64;

/// A block's bytes by class, one bit per byte.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Masks {
    /// `"`.
    pub(crate) quote: u64,
    /// `\`.
    pub(crate) backslash: u64,
    /// `{` and `[`.
    pub(crate) open: u64,
    /// `}` and `]`.
    pub(crate) close: u64,
    /// `{` and `}`: which brackets belong to objects.
    pub(crate) object: u64,
    /// `:` and `,`.
    pub(crate) punct: u64,
}

impl Masks {
    /// The masks of `block`.
    pub(crate) fn of(block: &[u8; BLOCK]) -> Self {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            sse2::masks(block)
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            bytewise(block)
        }
    }
}

/// The bytes of `block` that JSON does not allow outside strings (a
/// dozen compares per byte, so asked for only when a block holds more
/// than punctuation there).
pub(crate) fn other(block: &[u8; BLOCK]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::other(block)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        other_bytewise(block)
    }
}

/// Bit `i` set where `test(block[i])`.
fn bits(block: &[u8; BLOCK], test: impl Fn(u8) -> bool) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0u64, |mask, (i, &b)| mask | u64::from(test(b)) << i)
}

/// The masks one byte at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn bytewise(block: &[u8; BLOCK]) -> Masks {
    Masks {
        quote: bits(block, |b| b == b'"'),
        backslash: bits(block, |b| b == b'\\'),
        open: bits(block, |b| b == b'{' || b == b'['),
        close: bits(block, |b| b == b'}' || b == b']'),
        object: bits(block, |b| b == b'{' || b == b'}'),
        punct: bits(block, |b| b == b':' || b == b','),
    }
}

/// [`other`] one byte at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn other_bytewise(block: &[u8; BLOCK]) -> u64 {
    bits(block, |b| !scanner::allowed_outside_strings(b))
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use safe_arch::{
        bitor_m128i as or, cmp_eq_mask_i8_m128i, load_unaligned_m128i, m128i, min_u8_m128i,
        move_mask_i8_m128i, set_splat_i8_m128i, sub_i8_m128i,
    };

    use super::{BLOCK, Masks};

    /// The masks 16 bytes at a time.
    pub(super) fn masks(block: &[u8; BLOCK]) -> Masks {
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
            object: 0,
            punct: 0,
        };
        for (shift, v) in lanes(block) {
            let bits = |mask: m128i| u64::from(move_mask_i8_m128i(mask) as u16) << shift;
            m.quote |= bits(eq(v, b'"'));
            m.backslash |= bits(eq(v, b'\\'));
            m.open |= bits(or(eq(v, b'{'), eq(v, b'[')));
            m.close |= bits(or(eq(v, b'}'), eq(v, b']')));
            m.object |= bits(or(eq(v, b'{'), eq(v, b'}')));
            m.punct |= bits(or(eq(v, b':'), eq(v, b',')));
        }
        m
    }

    /// [`super::other`] 16 bytes at a time.
    pub(super) fn other(block: &[u8; BLOCK]) -> u64 {
        let mut other = 0;
        for (shift, v) in lanes(block) {
            let runs = or(
                or(within(v, b'+', b'.'), within(v, b'0', b':')),
                or(within(v, b'e', b'f'), within(v, b'r', b'u')),
            );
            let letters = or(or(eq(v, b'a'), eq(v, b'l')), or(eq(v, b'n'), eq(v, b'E')));
            let space = or(
                or(eq(v, b' '), eq(v, b'\n')),
                or(eq(v, b'\r'), eq(v, b'\t')),
            );
            let marks = or(
                or(eq(v, b'"'), eq(v, b',')),
                or(or(eq(v, b'{'), eq(v, b'[')), or(eq(v, b'}'), eq(v, b']'))),
            );
            let allowed = or(or(runs, letters), or(space, marks));
            other |= u64::from(!(move_mask_i8_m128i(allowed) as u16)) << shift;
        }
        other
    }

    /// The block's four 16-byte lanes, each with its first bit's place.
    fn lanes(block: &[u8; BLOCK]) -> impl Iterator<Item = (usize, m128i)> + '_ {
        block
            .chunks_exact(16)
            .filter_map(|bytes| <&[u8; 16]>::try_from(bytes).ok())
            .enumerate()
            .map(|(lane, bytes)| (16 * lane, load_unaligned_m128i(bytes)))
    }

    /// Bytes equal to `byte`: all ones, else zero.
    fn eq(v: m128i, byte: u8) -> m128i {
        cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(byte as i8))
    }

    /// Bytes in `lo..=hi`: `v - lo` is at most `hi - lo` when read
    /// unsigned, which is when the smaller of the two is `v - lo`.
    fn within(v: m128i, lo: u8, hi: u8) -> m128i {
        let off = sub_i8_m128i(v, set_splat_i8_m128i(lo as i8));
        cmp_eq_mask_i8_m128i(min_u8_m128i(off, set_splat_i8_m128i((hi - lo) as i8)), off)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_byte_value_lands_in_its_masks() {
        // Each byte value once, at every position of the block.
        for shift in 0..BLOCK {
            let mut block = [b' '; BLOCK];
            for b in 0..=255u8 {
                block[shift] = b;
                assert_eq!(
                    Masks::of(&block),
                    bytewise(&block),
                    "byte {b:#04x} at {shift}"
                );
                // The SSE2 check against the scanner's own byte classes.
                assert_eq!(
                    other(&block),
                    other_bytewise(&block),
                    "byte {b:#04x} at {shift}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn the_masks_do_not_depend_on_how_they_are_computed(block in prop::array::uniform32(any::<u8>()), rest in prop::array::uniform32(any::<u8>())) {
            let mut whole = [0u8; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&rest);
            prop_assert_eq!(Masks::of(&whole), bytewise(&whole));
            prop_assert_eq!(other(&whole), other_bytewise(&whole));
        }
    }
}
