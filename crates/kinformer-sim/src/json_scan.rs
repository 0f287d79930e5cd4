//! Finding a top-level member of an encoded JSON object without parsing it: a scan that skips
//! strings with `memchr` and counts brackets, and stops right after the member. For documents the
//! store encoded itself (valid JSON); it answers `None` on anything it does not expect, and the
//! caller falls back to `serde_json`.

/// The raw bytes of the value of the top-level member `name` of the JSON object `obj`.
pub fn member<'a>(obj: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut i = skip_ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(obj, i);
        if obj.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(obj, i)?;
        let key = &obj[i + 1..key_end - 1];
        i = skip_ws(obj, key_end);
        if obj.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(obj, i + 1);
        let end = value_end(obj, start)?;
        if key == name {
            return Some(&obj[start..end]);
        }
        i = skip_ws(obj, end);
        match obj.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index after the closing quote of the string whose opening quote is at `open`.
fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[i] == b'\\' {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

/// The index after the value that starts at `start`.
fn value_end(b: &[u8], start: usize) -> Option<usize> {
    match *b.get(start)? {
        b'"' => string_end(b, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while let Some(&c) = b.get(i) {
                match c {
                    b'"' => {
                        i = string_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = b[start..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
                .unwrap_or(b.len() - start);
            (len > 0).then_some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;
    use serde_json::value::RawValue;

    use super::*;

    fn by_serde<'a>(obj: &'a [u8], name: &str) -> Option<&'a str> {
        #[derive(Deserialize)]
        struct Any<'a>(#[serde(borrow)] std::collections::HashMap<String, &'a RawValue>);
        let Any(m) = serde_json::from_slice(obj).ok()?;
        m.get(name).map(|r| r.get())
    }

    #[test]
    fn finds_members_as_serde_json_does() {
        let docs: [&[u8]; 6] = [
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","annotations":{"q":"say \"}\" \\","b":"[{"}},"spec":{"x":[1,{"y":"}"}]}}"#,
            br#" { "spec" : [ 1 , 2 ] , "metadata" : { "name" : "a\\" } , "n" : -1.5e3 } "#,
            br#"{"kind":"X","n":12,"t":true,"z":null,"metadata":{}}"#,
            br#"{"metadata":"just a string","x":{}}"#,
            br#"{"a\"metadata":1,"metadata":{"k":"\u00e9"}}"#,
            br#"{"metadata":[[],{},[{}]]}"#,
        ];
        for doc in docs {
            for name in ["metadata", "spec", "kind", "n", "x", "z", "missing"] {
                let ours = member(doc, name.as_bytes()).map(|b| std::str::from_utf8(b).unwrap());
                assert_eq!(
                    ours,
                    by_serde(doc, name),
                    "{name} in {}",
                    String::from_utf8_lossy(doc)
                );
            }
        }
    }

    #[test]
    fn unexpected_input_is_none_not_a_panic() {
        for doc in [
            &b""[..],
            b"[1]",
            b"{",
            br#"{"metadata":{"a":"#,
            br#"{"metadata""#,
            br#"{"metadata":}"#,
            br#"{"x":1 "metadata":{}}"#,
            br#"{"x":"\"#,
        ] {
            assert_eq!(
                member(doc, b"metadata"),
                None,
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }
}
