//! kinformer-compact: a cache that holds whole objects at close to their
//! wire size.
//!
//! ```text
//!  decoder ──► Compact<K> (fresh) ──transform: user's, then pack──► Indexer<Compact<K>>
//!                                       │ keeps the decoded object            │
//!                                       ▼                                     ▼
//!                                    HotSet<K> ◄── decode on a miss ── CompactLister<K>, DecodingHandler<K, H>
//! ```
//!
//! | module | concept |
//! | --- | --- |
//! | `compact` | [`Compact`]: one object, metadata decoded, the rest packed |
//! | `codec` | the packed bytes: length prefix and zstd frame |
//! | `hot` | [`HotSet`]: the bounded set of recently decoded objects |
//! | `lister` | [`CompactLister`], [`Decoded`]: reads that decode on demand |
//! | `handler` | [`DecodingHandler`]: handlers of whole objects |
//! | `informer` | [`CompactInformer`]: the informer, its packing transform |
//! | `error` | [`CompactError`] |
//!
//! The factory of the `kinformer` crate builds compact informers
//! (`SharedInformerFactory::compact_informer`).

pub mod codec;
mod compact;
mod error;
mod handler;
mod hot;
mod informer;
mod lister;

pub use compact::Compact;
pub use error::CompactError;
pub use handler::DecodingHandler;
pub use hot::{DEFAULT_HOT_CAPACITY, HotSet, HotStats};
pub use informer::CompactInformer;
pub use lister::{CompactLister, Decoded};
