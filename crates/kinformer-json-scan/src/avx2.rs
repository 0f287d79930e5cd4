//! The AVX2 kernel: a block's masks 32 bytes at a time, and the strings'
//! prefix XOR in one carry-less multiply (PCLMULQDQ), for CPUs that have
//! both (checked once at run time; x86-64 builds do not assume them).
//!
//! The scans are generic over [`Kernel`] and inlined into the entry points
//! here, which are compiled with these features enabled: only calling an
//! entry point needs `unsafe`, and only an [`Avx2`] value, which exists
//! once the CPU is known to have the features, can do it.
#![allow(unsafe_code)] // calling functions compiled for AVX2 once the CPU is known to have it

use std::arch::x86_64::{
    __m256i, _mm_clmulepi64_si128, _mm_cvtsi64_si128, _mm_cvtsi128_si64, _mm_set1_epi8,
    _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8, _mm256_or_si256,
    _mm256_set1_epi8, _mm256_sub_epi8,
};

use crate::classify::{BLOCK, Kernel, Masks};
use crate::{block, depth::NestingCheck};

/// Proof that the CPU has AVX2 and PCLMULQDQ: the only way to run this
/// kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The kernel, if the CPU has the features (the answer is cached by
    /// the standard library after the first check).
    #[inline]
    pub(crate) fn detect() -> Option<Self> {
        (std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Self(()))
    }

    /// [`block::skip_container`] with this kernel.
    pub(crate) fn skip_container(self, json: &[u8], at: usize, depth: usize) -> Option<usize> {
        // SAFETY: `self` exists only on a CPU with both features.
        unsafe { skip_container(self, json, at, depth) }
    }

    /// [`NestingCheck::feed`] with this kernel.
    pub(crate) fn feed(self, check: &mut NestingCheck, json: &[u8]) {
        // SAFETY: as above.
        unsafe { feed(self, check, json) }
    }
}

#[target_feature(enable = "avx2,pclmulqdq")]
fn skip_container(k: Avx2, json: &[u8], at: usize, depth: usize) -> Option<usize> {
    block::skip_container_with(k, json, at, depth)
}

#[target_feature(enable = "avx2,pclmulqdq")]
fn feed(k: Avx2, check: &mut NestingCheck, json: &[u8]) {
    check.feed_with(k, json);
}

impl Kernel for Avx2 {
    #[inline(always)]
    fn masks(self, block: &[u8; BLOCK]) -> Masks {
        // SAFETY: `self` exists only on a CPU with AVX2.
        unsafe { masks(block) }
    }

    #[inline(always)]
    fn other(self, block: &[u8; BLOCK]) -> u64 {
        // SAFETY: as above.
        unsafe { other(block) }
    }

    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        // SAFETY: `self` exists only on a CPU with PCLMULQDQ.
        unsafe { prefix_xor(x) }
    }
}

/// The block's two 32-byte halves.
#[target_feature(enable = "avx2")]
#[inline]
fn halves(block: &[u8; BLOCK]) -> [__m256i; 2] {
    let (lo, hi) = block.split_at(BLOCK / 2);
    // SAFETY: each half holds 32 bytes; the loads are unaligned ones.
    unsafe {
        [
            _mm256_loadu_si256(lo.as_ptr().cast()),
            _mm256_loadu_si256(hi.as_ptr().cast()),
        ]
    }
}

/// One bit per byte of the two halves' comparison results.
#[target_feature(enable = "avx2")]
#[inline]
fn bits(lo: __m256i, hi: __m256i) -> u64 {
    u64::from(_mm256_movemask_epi8(lo) as u32) | u64::from(_mm256_movemask_epi8(hi) as u32) << 32
}

/// Bytes equal to `byte`: all ones, else zero.
#[target_feature(enable = "avx2")]
#[inline]
fn eq(v: __m256i, byte: u8) -> __m256i {
    _mm256_cmpeq_epi8(v, _mm256_set1_epi8(byte as i8))
}

/// Bytes equal to `a` or `b`.
#[target_feature(enable = "avx2")]
#[inline]
fn either(v: __m256i, a: u8, b: u8) -> __m256i {
    _mm256_or_si256(eq(v, a), eq(v, b))
}

/// Bytes in `lo..=hi` (see the SSE2 kernel's `within`).
#[target_feature(enable = "avx2")]
#[inline]
fn within(v: __m256i, lo: u8, hi: u8) -> __m256i {
    let off = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
    _mm256_cmpeq_epi8(_mm256_min_epu8(off, _mm256_set1_epi8((hi - lo) as i8)), off)
}

#[target_feature(enable = "avx2")]
#[inline]
fn masks(block: &[u8; BLOCK]) -> Masks {
    let [lo, hi] = halves(block);
    Masks {
        quote: bits(eq(lo, b'"'), eq(hi, b'"')),
        backslash: bits(eq(lo, b'\\'), eq(hi, b'\\')),
        open: bits(either(lo, b'{', b'['), either(hi, b'{', b'[')),
        close: bits(either(lo, b'}', b']'), either(hi, b'}', b']')),
        object: bits(either(lo, b'{', b'}'), either(hi, b'{', b'}')),
        punct: bits(either(lo, b':', b','), either(hi, b':', b',')),
    }
}

/// Which bytes JSON allows outside strings, as in the SSE2 kernel.
#[target_feature(enable = "avx2")]
#[inline]
fn allowed(v: __m256i) -> __m256i {
    let or = |a, b| _mm256_or_si256(a, b);
    let runs = or(
        or(within(v, b'+', b'.'), within(v, b'0', b':')),
        or(within(v, b'e', b'f'), within(v, b'r', b'u')),
    );
    let letters = or(either(v, b'a', b'l'), either(v, b'n', b'E'));
    let space = or(either(v, b' ', b'\n'), either(v, b'\r', b'\t'));
    let marks = or(
        either(v, b'"', b','),
        or(either(v, b'{', b'['), either(v, b'}', b']')),
    );
    or(or(runs, letters), or(space, marks))
}

#[target_feature(enable = "avx2")]
#[inline]
fn other(block: &[u8; BLOCK]) -> u64 {
    let [lo, hi] = halves(block);
    !bits(allowed(lo), allowed(hi))
}

/// The carry-less product of `x` and a word of ones: bit `i` is the XOR
/// of bits `0..=i` of `x`.
#[target_feature(enable = "pclmulqdq")]
#[inline]
fn prefix_xor(x: u64) -> u64 {
    let product = _mm_clmulepi64_si128::<0>(_mm_cvtsi64_si128(x as i64), _mm_set1_epi8(-1));
    _mm_cvtsi128_si64(product) as u64
}
