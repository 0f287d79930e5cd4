//! The byte-at-a-time scan: members, keys, strings and short values;
//! containers are skipped by [`block`].

use std::ops::Range;

use crate::block;

/// A position in the bytes being scanned.
pub(crate) struct Scanner<'a> {
    pub(crate) json: &'a [u8],
    pub(crate) at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.json.get(self.at).copied()
    }

    pub(crate) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.at += 1;
        }
    }

    /// Skips whitespace and then `byte`.
    pub(crate) fn open(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Moves to the value of the member called `name` (the raw bytes
    /// between its quotes), from just inside an object's `{`, skipping the
    /// members before it. `depth` is the object's own nesting depth.
    pub(crate) fn find_member(&mut self, name: &[u8], depth: usize) -> Option<()> {
        loop {
            let (key, _) = self.key()?;
            if key == name {
                return Some(());
            }
            self.skip_value(depth)?;
            self.next_member()?;
        }
    }

    /// Like [`find_member`](Self::find_member), but goes past the value
    /// and returns the bytes the member takes with one of its commas.
    pub(crate) fn member_range(&mut self, name: &[u8], depth: usize) -> Option<Range<usize>> {
        let mut comma_before = None;
        loop {
            let (key, key_start) = self.key()?;
            let found = key == name;
            self.skip_value(depth)?;
            if found {
                let value_end = self.at;
                if !self.cut_is_text(key_start, value_end) {
                    return None;
                }
                return match comma_before {
                    Some(comma) => Some(comma..value_end),
                    None => {
                        self.skip_ws();
                        match self.peek()? {
                            b',' => Some(key_start..self.at + 1),
                            b'}' => Some(key_start..value_end),
                            _ => None,
                        }
                    }
                };
            }
            self.skip_ws();
            comma_before = Some(self.at);
            self.next_member()?;
        }
    }

    fn cut_is_text(&self, start: usize, end: usize) -> bool {
        self.json
            .get(start..end)
            .is_some_and(|b| std::str::from_utf8(b).is_ok())
    }

    /// Reads a member's key and its colon: the key's raw bytes and where
    /// its opening quote is.
    fn key(&mut self) -> Option<(&[u8], usize)> {
        self.skip_ws();
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        self.skip_string()?;
        let key = self.json.get(start + 1..self.at - 1)?;
        self.open(b':')?;
        Some((key, start))
    }

    /// After a value: past the `,` to the next member; `None` at the
    /// object's end or on anything else.
    fn next_member(&mut self) -> Option<()> {
        self.skip_ws();
        (self.peek()? == b',').then(|| self.at += 1)
    }

    /// From an opening quote to just past the closing one.
    fn skip_string(&mut self) -> Option<()> {
        self.at = string_end(self.json, self.at + 1)?;
        Some(())
    }

    /// Skips one value inside a container nested `depth` deep.
    pub(crate) fn skip_value(&mut self, depth: usize) -> Option<()> {
        self.skip_ws();
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => self.skip_container(depth),
            _ => {
                let start = self.at;
                while let Some(b) = self.peek() {
                    match CLASS[b as usize] {
                        SCALAR => self.at += 1,
                        _ => break,
                    }
                }
                (self.at > start).then_some(())
            }
        }
    }

    /// Skips an array or object whose opening bracket is at the current
    /// position, checking that brackets match by kind
    /// ([`block::skip_container`], 64 bytes at a time).
    fn skip_container(&mut self, depth: usize) -> Option<()> {
        self.at = block::skip_container(self.json, self.at, depth)?;
        Some(())
    }
}

impl<'a> Scanner<'a> {
    /// A scanner just inside the object at `path` (object members from
    /// the top-level object of `json`, empty for that object), with that
    /// object's nesting depth.
    pub(crate) fn enter(json: &'a [u8], path: &[&[u8]]) -> Option<(Self, usize)> {
        let mut s = Scanner { json, at: 0 };
        s.open(b'{')?;
        let mut depth = 1;
        for name in path {
            s.find_member(name, depth)?;
            s.open(b'{')?;
            depth += 1;
        }
        Some((s, depth))
    }

    /// From just inside an object's `{` (nested `depth` deep): the raw
    /// bytes between the quotes of the string values of the members
    /// `names`, each `None` when the object has no such member with a
    /// string value. Stops at the last one found or at the object's end;
    /// `None` on anything the scan does not expect.
    pub(crate) fn string_members<const N: usize>(
        &mut self,
        names: [&[u8]; N],
        depth: usize,
    ) -> Option<[Option<&'a [u8]>; N]> {
        let mut found = [None; N];
        let mut left = N;
        self.skip_ws();
        if self.peek()? == b'}' {
            return Some(found);
        }
        loop {
            let (key, _) = self.key()?;
            let wanted = names.iter().position(|n| *n == key);
            self.skip_ws();
            match wanted {
                Some(i) if found[i].is_none() && self.peek()? == b'"' => {
                    let start = self.at + 1;
                    self.skip_string()?;
                    found[i] = Some(self.json.get(start..self.at - 1)?);
                    left -= 1;
                    if left == 0 {
                        return Some(found);
                    }
                }
                _ => self.skip_value(depth)?,
            }
            self.skip_ws();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => return Some(found),
                _ => return None,
            }
        }
    }
}

/// Just past the quote that ends the string whose first byte is at
/// `from`. Most strings in Kubernetes objects are short keys, so the bytes
/// are checked for `"` or `\` eight at a time, in a word (a library
/// search per string costs more than it saves on these lengths).
fn string_end(json: &[u8], mut from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    // The high bit of every byte of `word` that is zero, and maybe of some
    // bytes above the first zero one (never below it).
    let zero_bytes = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    loop {
        let Some(chunk) = json.get(from..from + 8) else {
            // The last few bytes, one at a time.
            let rest = json.get(from..)?;
            let found = from + rest.iter().position(|&b| b == b'"' || b == b'\\')?;
            if json.get(found) == Some(&b'"') {
                return Some(found + 1);
            }
            from = found + 2;
            continue;
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let hits = zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES);
        if hits == 0 {
            from += 8;
            continue;
        }
        let found = from + (hits.trailing_zeros() / 8) as usize;
        if json.get(found) == Some(&b'"') {
            return Some(found + 1);
        }
        from = found + 2;
    }
}

/// Bytes JSON does not allow outside strings.
const OTHER: u8 = 0;
/// Digits, signs, the decimal point and the letters of `true`, `false`,
/// `null` and exponents.
const SCALAR: u8 = 1;
/// `,` and `:`.
const PUNCT: u8 = 2;
const SPACE: u8 = 3;
const QUOTE: u8 = 4;
const OPEN: u8 = 5;
const CLOSE: u8 = 6;

/// Whether JSON allows `b` outside strings: punctuation, whitespace,
/// brackets, quotes, and what numbers and the literals are made of.
pub(crate) fn allowed_outside_strings(b: u8) -> bool {
    CLASS[b as usize] != OTHER
}

/// The class of every byte, outside strings.
static CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let scalar = b"0123456789+-.eEtrufalsn";
    let mut i = 0;
    while i < scalar.len() {
        t[scalar[i] as usize] = SCALAR;
        i += 1;
    }
    t[b':' as usize] = PUNCT;
    t[b',' as usize] = PUNCT;
    t[b' ' as usize] = SPACE;
    t[b'\n' as usize] = SPACE;
    t[b'\r' as usize] = SPACE;
    t[b'\t' as usize] = SPACE;
    t[b'"' as usize] = QUOTE;
    t[b'{' as usize] = OPEN;
    t[b'[' as usize] = OPEN;
    t[b'}' as usize] = CLOSE;
    t[b']' as usize] = CLOSE;
    t
};

#[cfg(test)]
impl Scanner<'_> {
    /// What [`block::skip_container`] must answer: the same skip, one
    /// byte at a time (the scan's code before blocks).
    pub(crate) fn skip_container_bytewise(&mut self, depth: usize) -> Option<()> {
        // One bit per open container: 1 for an object, 0 for an array.
        let mut kinds: u128 = 0;
        let mut open = 0usize;
        while let Some(b) = self.peek() {
            match CLASS[b as usize] {
                SCALAR | PUNCT | SPACE => self.at += 1,
                QUOTE => self.skip_string()?,
                OPEN => {
                    if depth + open + 1 > crate::MAX_DEPTH {
                        return None;
                    }
                    kinds = (kinds << 1) | u128::from(b == b'{');
                    open += 1;
                    self.at += 1;
                }
                CLOSE => {
                    let object = kinds & 1 == 1;
                    if open == 0 || object != (b == b'}') {
                        return None;
                    }
                    kinds >>= 1;
                    open -= 1;
                    self.at += 1;
                    if open == 0 {
                        return Some(());
                    }
                }
                _ => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_string_ends_at_its_first_unescaped_quote(
            body in proptest::collection::vec(proptest::sample::select(b"ab\\\"{".to_vec()), 0..40),
            at in 0usize..12,
        ) {
            let json = [vec![b'x'; at], body].concat();
            // One byte at a time.
            let mut i = at;
            let expected = loop {
                match json.get(i) {
                    None => break None,
                    Some(b'"') => break Some(i + 1),
                    Some(b'\\') => i += 2,
                    Some(_) => i += 1,
                }
            };
            proptest::prop_assert_eq!(string_end(&json, at), expected);
        }
    }
}
