//! The byte format of a packed object: a length prefix and a zstd frame.
//!
//! ```text
//!  body = u32 little-endian: length of the encoded object  ‖  zstd frame of it
//! ```
//!
//! The encoded object is its JSON (written by `serde_json`, read by the
//! reflector's simd-json decoder) with `metadata` cut down to
//! `managedFields` (the rest of the metadata stays decoded beside the
//! body). The prefix lets the decoder allocate the output once and bounds
//! it before anything is decompressed: a corrupt prefix cannot make it
//! allocate more than [`MAX_ENCODED_LEN`].
//!
//! Compression and decompression contexts are kept per thread: making a
//! zstd context costs more than compressing a 4 KB object with it.

use std::cell::RefCell;

use crate::error::CompactError;

/// zstd's level for packing: level 1 decompresses as fast as the higher
/// ones, compresses several times faster, and keeps a Pod within a few
/// percent of level 3's size.
pub const LEVEL: i32 = 1;

/// The largest encoded object a body may announce (64 MiB: etcd refuses
/// objects above 1.5 MiB by default, and JSON of a stored object is of the
/// same order).
pub const MAX_ENCODED_LEN: usize = 64 << 20;

const PREFIX: usize = 4;

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Compresses `encoded` into a body.
pub fn pack(encoded: &[u8]) -> Result<Box<[u8]>, CompactError> {
    if encoded.len() > MAX_ENCODED_LEN {
        return Err(CompactError::Encode(format!(
            "{} bytes encoded, above the limit of {MAX_ENCODED_LEN}",
            encoded.len()
        )));
    }
    let len = u32::try_from(encoded.len()).map_err(|e| CompactError::Encode(e.to_string()))?;
    COMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let compressor = match &mut *slot {
            Some(c) => c,
            None => slot.insert(
                zstd::bulk::Compressor::new(LEVEL)
                    .map_err(|e| CompactError::Encode(e.to_string()))?,
            ),
        };
        let mut body = vec![0u8; PREFIX + zstd::zstd_safe::compress_bound(encoded.len())];
        body[..PREFIX].copy_from_slice(&len.to_le_bytes());
        let n = compressor
            .compress_to_buffer(encoded, &mut body[PREFIX..])
            .map_err(|e| CompactError::Encode(e.to_string()))?;
        body.truncate(PREFIX + n);
        Ok(body.into_boxed_slice())
    })
}

/// Decompresses a body into the encoded object, appended to `out` (cleared
/// first).
pub fn unpack(body: &[u8], out: &mut Vec<u8>) -> Result<(), CompactError> {
    let (prefix, frame) = body.split_first_chunk::<PREFIX>().ok_or_else(|| {
        CompactError::Corrupt(format!("{} bytes, shorter than the prefix", body.len()))
    })?;
    let len = u32::from_le_bytes(*prefix) as usize;
    if len > MAX_ENCODED_LEN {
        return Err(CompactError::Corrupt(format!(
            "announces {len} bytes, above the limit of {MAX_ENCODED_LEN}"
        )));
    }
    out.clear();
    out.reserve_exact(len);
    DECOMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let decompressor = match &mut *slot {
            Some(d) => d,
            None => slot.insert(
                zstd::bulk::Decompressor::new()
                    .map_err(|e| CompactError::Corrupt(e.to_string()))?,
            ),
        };
        let n = decompressor
            .decompress_to_buffer(frame, out)
            .map_err(|e| CompactError::Corrupt(e.to_string()))?;
        if n != len {
            return Err(CompactError::Corrupt(format!(
                "decompressed to {n} bytes, {len} announced"
            )));
        }
        Ok(())
    })
}
