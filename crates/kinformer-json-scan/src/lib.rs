//! Finding members of an encoded JSON object without parsing it: a scan
//! that skips values by their brackets and stops as soon as it has what it
//! was asked for.
//!
//! Used where parsing a whole document would be wasted: the simulator
//! reads an object's `metadata` out of the bytes it stores, and the
//! reflector cuts `metadata.managedFields` out of a watch line before
//! simd-json parses it.
//!
//! What the scan skips is checked less than a parse would check it: its
//! brackets must match by kind, its strings end, and no byte outside
//! strings may be other than JSON's punctuation, digits, whitespace and the
//! letters of literals and exponents. Anything the scan does not expect
//! (another shape, nesting deeper than [`MAX_DEPTH`]) is `None`, and the
//! caller parses the document instead.

use std::ops::Range;

/// Deepest nesting of arrays and objects the scan goes through
/// (`serde_json`'s limit).
pub const MAX_DEPTH: usize = 128;

/// The raw bytes of the value of the top-level member `name` (the raw
/// bytes between its quotes) of the JSON object `obj`.
///
/// ```
/// let obj = br#"{"kind":"Pod","metadata":{"name":"a"},"spec":{}}"#;
/// assert_eq!(kinformer_json_scan::member(obj, b"metadata"), Some(&br#"{"name":"a"}"#[..]));
/// assert_eq!(kinformer_json_scan::member(obj, b"status"), None);
/// ```
pub fn member<'a>(obj: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut s = Scanner { json: obj, at: 0 };
    s.open(b'{')?;
    s.find_member(name, 1)?;
    s.skip_ws();
    let start = s.at;
    s.skip_value(1)?;
    obj.get(start..s.at)
}

/// The bytes to remove so that the member at `path` is gone: the member
/// with one comma that separates it from its neighbours. Every name but
/// the last is an object member whose value is an object, starting from
/// the top-level object `json`. The removed bytes are also checked to be
/// UTF-8. `None` when there is no such member or the scan met something
/// it does not expect.
///
/// ```
/// let json = br#"{"metadata":{"name":"a","managedFields":[{}],"uid":"u"}}"#;
/// let cut = kinformer_json_scan::member_span(json, &[b"metadata", b"managedFields"]).unwrap();
/// let rest = [&json[..cut.start], &json[cut.end..]].concat();
/// assert_eq!(rest, br#"{"metadata":{"name":"a","uid":"u"}}"#);
/// ```
pub fn member_span(json: &[u8], path: &[&[u8]]) -> Option<Range<usize>> {
    let (last, parents) = path.split_last()?;
    let mut s = Scanner { json, at: 0 };
    s.open(b'{')?;
    let mut depth = 1;
    for name in parents {
        s.find_member(name, depth)?;
        s.open(b'{')?;
        depth += 1;
    }
    s.member_range(last, depth)
}

/// A position in the bytes being scanned.
struct Scanner<'a> {
    json: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.json.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.at += 1;
        }
    }

    /// Skips whitespace and then `byte`.
    fn open(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Moves to the value of the member called `name` (the raw bytes
    /// between its quotes), from just inside an object's `{`, skipping the
    /// members before it. `depth` is the object's own nesting depth.
    fn find_member(&mut self, name: &[u8], depth: usize) -> Option<()> {
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
    fn member_range(&mut self, name: &[u8], depth: usize) -> Option<Range<usize>> {
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
    fn skip_value(&mut self, depth: usize) -> Option<()> {
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
    /// position, checking that brackets match by kind.
    fn skip_container(&mut self, depth: usize) -> Option<()> {
        // One bit per open container: 1 for an object, 0 for an array.
        let mut kinds: u128 = 0;
        let mut open = 0usize;
        while let Some(b) = self.peek() {
            match CLASS[b as usize] {
                SCALAR | PUNCT | SPACE => self.at += 1,
                QUOTE => self.skip_string()?,
                OPEN => {
                    if depth + open + 1 > MAX_DEPTH {
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
mod tests {
    use super::*;

    const OBJECT: &[&[u8]] = &[b"metadata", b"managedFields"];
    const LINE: &[&[u8]] = &[b"object", b"metadata", b"managedFields"];

    fn cut(json: &str, path: &[&[u8]]) -> Option<String> {
        let r = member_span(json.as_bytes(), path)?;
        Some(format!("{}{}", &json[..r.start], &json[r.end..]))
    }

    #[test]
    fn the_member_and_one_comma_are_cut_wherever_it_stands() {
        let obj = OBJECT;
        assert_eq!(
            cut(
                r#"{"metadata":{"name":"a","managedFields":[{"m":1}],"uid":"u"}}"#,
                obj
            )
            .unwrap(),
            r#"{"metadata":{"name":"a","uid":"u"}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"managedFields":[],"name":"a"}}"#, obj).unwrap(),
            r#"{"metadata":{"name":"a"}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"name":"a" , "managedFields" : [ ] }}"#, obj).unwrap(),
            r#"{"metadata":{"name":"a"  }}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"managedFields":null}}"#, obj).unwrap(),
            r#"{"metadata":{}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"a":1,"managedFields":false,"b":2}}"#, obj).unwrap(),
            r#"{"metadata":{"a":1,"b":2}}"#
        );
        assert_eq!(
            cut(
                r#"{"kind":"Pod","spec":{"metadata":{"managedFields":1}},"metadata":{"managedFields":[{"fieldsV1":{"k:{\"name\":\"a]\"}":{}}}]},"status":{}}"#,
                obj
            )
            .unwrap(),
            r#"{"kind":"Pod","spec":{"metadata":{"managedFields":1}},"metadata":{},"status":{}}"#
        );
    }

    #[test]
    fn a_path_reaches_only_the_member_it_names() {
        let line = r#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#;
        assert_eq!(
            cut(line, LINE).unwrap(),
            r#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a"}}}"#
        );
        // From the top, the line's own `metadata` is the one.
        assert_eq!(
            cut(line, OBJECT).unwrap(),
            r#"{"type":"MODIFIED","metadata":{},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#
        );
    }

    #[test]
    fn nothing_is_cut_from_what_the_scan_does_not_expect() {
        let none = [
            r#"{"metadata":{"name":"a"}}"#,
            r#"{"metadata":{"name":"a","m\u0061nagedFields":[]}}"#,
            r#"{"spec":{"managedFields":[]}}"#,
            r#"{"metadata":{"managedFields":[{]}}"#,
            r#"{"metadata":{"managedFields":[}]}}"#,
            r#"{"metadata":{"managedFields":[1,2,3]]]"#,
            r#"{"metadata":{"managedFields":[xyz]}}"#,
            r#"{"metadata":{"managedFields":["unterminated]}}"#,
            r#"{"metadata":{"managedFields":}}"#,
            r#"{"metadata":{"managedFields":[] "name":"a"}}"#,
            r#"{"metadata":[{"managedFields":[]}]}"#,
            r#"["metadata",{"managedFields":[]}]"#,
            "",
            "{",
        ];
        for json in none {
            assert_eq!(cut(json, OBJECT), None, "{json}");
        }
        let bad_utf8 = b"{\"metadata\":{\"managedFields\":[\"\xff\"]}}";
        assert_eq!(member_span(bad_utf8, OBJECT), None);
    }

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

    #[test]
    fn member_gives_the_raw_value_of_a_top_level_member() {
        let obj = br#" { "a" : [1,{"b":"]"}] , "b\"" :"x","c":-1.5e3 } "#;
        assert_eq!(member(obj, b"a"), Some(&br#"[1,{"b":"]"}]"#[..]));
        assert_eq!(member(obj, b"b\\\""), Some(&br#""x""#[..]));
        assert_eq!(member(obj, b"c"), Some(&b"-1.5e3"[..]));
        assert_eq!(member(obj, b"b"), None);
        assert_eq!(member(br#"{"a":[}"#, b"a"), None);
        assert_eq!(member(b"[1]", b"a"), None);
    }

    #[test]
    fn nesting_past_the_limit_is_not_cut() {
        let nested = |n: usize| {
            format!(
                r#"{{"metadata":{{"managedFields":{}{}}}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        // The object and metadata take two levels.
        assert!(cut(&nested(MAX_DEPTH - 2), OBJECT).is_some());
        assert_eq!(cut(&nested(MAX_DEPTH - 1), OBJECT), None);
        assert_eq!(cut(&nested(10_000), OBJECT), None);
    }
}
