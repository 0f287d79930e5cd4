//! Finding a top-level member of an encoded JSON object without parsing it
//! ([`kinformer_json_scan::member`], shared with the reflector). It answers
//! `None` on anything it does not expect, and the caller falls back to
//! `serde_json`. The tests hold it to `serde_json`'s answers on the
//! documents the store encodes.

pub use kinformer_json_scan::member;

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
