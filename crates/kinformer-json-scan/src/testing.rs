//! Generated JSON for the property tests.

use proptest::prelude::*;

/// JSON values up to `depth` levels deep: arrays and objects of up to
/// `branch` members over `leaves`, with strings (also the keys) made of
/// up to five `pieces` (raw string content: escapes written out), and
/// spaces around colons and commas.
pub(crate) fn json_value(
    pieces: Vec<&'static str>,
    leaves: Vec<&'static str>,
    depth: u32,
    size: u32,
    branch: usize,
) -> impl Strategy<Value = String> {
    let piece = prop::sample::select(pieces);
    let string = prop::collection::vec(piece, 0..6).prop_map(|p| format!("\"{}\"", p.concat()));
    let leaf = prop_oneof![
        prop::sample::select(leaves).prop_map(str::to_owned),
        string.clone(),
    ];
    leaf.prop_recursive(depth, size, branch as u32, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..branch)
                .prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((string.clone(), inner), 0..branch).prop_map(|m| {
                let members: Vec<String> = m.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", members.join(" ,"))
            }),
        ]
    })
}
