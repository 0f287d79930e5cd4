//! A 64-byte block's bytes as bit masks, one per class the container
//! skip needs (bit `i` for byte `i`), computed by a [`Kernel`].
//!
//! The [`Portable`] kernel compares the block 16 bytes at a time with SSE2
//! on x86-64 (part of every x86-64 CPU) through `safe_arch`, whose wrappers
//! need no `unsafe` here; elsewhere a byte loop gives the same masks.
//! Property tests hold the kernel to the byte loop's answers.

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

/// How a block's masks are computed. The scans are generic over it and
/// inlined into each kernel's entry point, so that a kernel's instructions
/// run in a function compiled for them.
pub(crate) trait Kernel: Copy {
    /// The masks of `block`.
    fn masks(self, block: &[u8; BLOCK]) -> Masks;

    /// The bytes of `block` that JSON does not allow outside strings (a
    /// dozen compares per byte, so asked for only when a block holds more
    /// than punctuation there).
    fn other(self, block: &[u8; BLOCK]) -> u64;

    /// Bit `i` of the result is the XOR of bits `0..=i` of `x`: set between
    /// an opening quote (included) and its closing one (excluded).
    fn prefix_xor(self, x: u64) -> u64;
}

/// The kernel every CPU runs: SSE2 on x86-64, a byte loop elsewhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable;

impl Kernel for Portable {
    #[inline(always)]
    fn masks(self, block: &[u8; BLOCK]) -> Masks {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            sse2::masks(block)
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            bytewise(block)
        }
    }

    #[inline(always)]
    fn other(self, block: &[u8; BLOCK]) -> u64 {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            sse2::other(block)
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            other_bytewise(block)
        }
    }

    #[inline(always)]
    fn prefix_xor(self, mut x: u64) -> u64 {
        let mut shift = 1;
        while shift < BLOCK {
            x ^= x << shift;
            shift *= 2;
        }
        x
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

/// [`Kernel::other`] one byte at a time.
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

    /// [`super::Kernel::other`] 16 bytes at a time.
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

    /// The kernel's answers for `block` checked against the byte loop's.
    fn check_kernels(block: &[u8; BLOCK], what: &str) {
        check_kernel(Portable, block, what);
    }

    fn check_kernel(k: impl Kernel + std::fmt::Debug, block: &[u8; BLOCK], what: &str) {
        assert_eq!(k.masks(block), bytewise(block), "{k:?}: {what}");
        assert_eq!(k.other(block), other_bytewise(block), "{k:?}: {what}");
    }

    #[test]
    fn every_byte_value_lands_in_its_masks() {
        // Each byte value once, at every position of the block.
        for shift in 0..BLOCK {
            let mut block = [b' '; BLOCK];
            for b in 0..=255u8 {
                block[shift] = b;
                check_kernels(&block, &format!("byte {b:#04x} at {shift}"));
            }
        }
    }

    #[test]
    fn the_prefix_xor_is_the_same_whatever_the_kernel() {
        let slow = |x: u64| {
            (0..64).fold(0u64, |acc, i| {
                acc | (((x & ((2u128 << i) - 1) as u64).count_ones() as u64 & 1) << i)
            })
        };
        for x in [
            0,
            1,
            u64::MAX,
            1 << 63,
            0x8000_0000_0000_0001,
            0x0123_4567_89ab_cdef,
        ] {
            assert_eq!(Portable.prefix_xor(x), slow(x), "{x:#x}");
        }
    }

    proptest! {
        #[test]
        fn the_masks_of_a_random_block_are_the_byte_loops(block in prop::array::uniform32(any::<u8>()), rest in prop::array::uniform32(any::<u8>())) {
            let mut whole = [0u8; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&rest);
            check_kernels(&whole, "random block");
        }
    }
}
