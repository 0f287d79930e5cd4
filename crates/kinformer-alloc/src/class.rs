//! Chunk size classes: eight per doubling from 512 bytes, so that a chunk
//! sized for an object wastes at most an eighth of it.

/// Number of size classes.
pub const CLASSES: usize = 64;

/// The smallest chunk.
pub const MIN_CHUNK: usize = 512;

/// Bytes of a chunk of class `class` (`class < CLASSES`): 512, 576, …,
/// 960, 1024, 1152, … up to 120 KiB. Every size is a multiple of 64.
pub const fn chunk_size(class: usize) -> usize {
    (8 + class % 8) << (6 + class / 8)
}

/// The largest chunk.
pub const MAX_CHUNK: usize = chunk_size(CLASSES - 1);

/// The smallest class whose chunks hold `bytes`, or `None` when no chunk
/// is that large.
pub fn class_for(bytes: usize) -> Option<usize> {
    if bytes <= MIN_CHUNK {
        return Some(0);
    }
    if bytes > MAX_CHUNK {
        return None;
    }
    // `bytes` is in (2^k, 2^(k+1)] with k >= 9; chunks there step by 2^(k-3).
    let k = usize::BITS as usize - 1 - (bytes - 1).leading_zeros() as usize;
    let step_shift = k - 3;
    let eighths = (bytes + (1 << step_shift) - 1) >> step_shift; // 9..=16
    let doubling = k - 9;
    Some(doubling * 8 + eighths - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_size_gets_the_smallest_class_that_holds_it() {
        // Every size natively; under Miri every 61st and each boundary.
        let step = if cfg!(miri) { 61 } else { 1 };
        let boundaries = (0..CLASSES).flat_map(|c| [chunk_size(c), chunk_size(c) + 1]);
        for bytes in (0..=MAX_CHUNK + 1).step_by(step).chain(boundaries) {
            let expected = (0..CLASSES).find(|&c| chunk_size(c) >= bytes);
            assert_eq!(class_for(bytes), expected, "{bytes}");
        }
    }

    #[test]
    fn sizes_grow_by_at_most_an_eighth_and_stay_cache_line_multiples() {
        for c in 1..CLASSES {
            let (prev, size) = (chunk_size(c - 1), chunk_size(c));
            assert!(size > prev && (size - prev) * 8 <= prev, "{c}");
            assert_eq!(size % 64, 0);
        }
        assert_eq!(chunk_size(0), MIN_CHUNK);
        assert_eq!(MAX_CHUNK, 120 * 1024);
    }
}
