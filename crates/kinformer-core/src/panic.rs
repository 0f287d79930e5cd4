//! Caught panics of user code: their message, and a payload disposed of
//! without a second panic.
//!
//! Every callback kinformer runs (handlers, transforms, index functions,
//! decoders, reclaimers) runs under `catch_unwind`; what it caught goes
//! through [`caught_panic_message`], so that even a payload whose own `Drop`
//! panics cannot unwind through the thread that caught it.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The text of a caught panic's payload (`"non-string panic payload"` when
/// it is neither a `&str` nor a `String`). The payload is dropped; should
/// its `Drop` panic in turn, that second payload is leaked rather than
/// dropped, and nothing unwinds from here.
///
/// ```
/// let caught = std::panic::catch_unwind(|| panic!("poison")).unwrap_err();
/// assert_eq!(kinformer_core::panic::caught_panic_message(caught), "poison");
/// ```
pub fn caught_panic_message(payload: Box<dyn Any + Send>) -> String {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    };
    if let Err(second) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(second);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload whose drop panics.
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the payload's drop");
        }
    }

    #[test]
    fn a_payload_that_panics_when_dropped_does_not_unwind_further() {
        let caught = catch_unwind(|| std::panic::panic_any(Bomb)).unwrap_err();
        assert_eq!(caught_panic_message(caught), "non-string panic payload");
    }

    #[test]
    fn string_payloads_give_their_text() {
        let caught = catch_unwind(|| panic!("{}", String::from("owned"))).unwrap_err();
        assert_eq!(caught_panic_message(caught), "owned");
    }
}
