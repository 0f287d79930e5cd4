//! kinformer-sim: a simulated Kubernetes API server, in memory, for scale and fault tests.
//!
//! It speaks the kube-apiserver HTTP/JSON protocol well enough for `kube::Client` and the informer:
//! LIST with paging and resourceVersion semantics, WATCH with history resumption, bookmarks and
//! streaming lists, metadata-only representations, writes, `Status` errors — and injects faults on
//! command. Start one with [`Sim::builder`], fill it in process, then [`Sim::serve`] it.
//!
//! Module map:
//! - [`server`]: builder, serving, handles, background start, fault driver;
//! - [`store`], [`history`], [`object`]: objects as pre-encoded bytes, the event ring, one RV counter;
//! - [`restamp`], [`json_scan`]: new versions and metadata cut from the stored bytes, unparsed;
//! - [`encode`]: objects written with their members in the apiserver's order;
//! - [`routes`], [`params`], [`list`], [`watch`], [`metadata`], [`discovery`]: the API surface;
//! - [`protobuf`]: metadata-only watches in Kubernetes' protobuf encoding;
//! - [`selector`]: label and field selectors; [`status`]: `Status` errors;
//! - [`faults`], [`stats`], [`admin`]: faults, counters and the `/__sim/` admin API;
//! - [`template`], [`churn`]: realistic objects, fill and churn load.
//!
//! The `kinformer-sim` binary fills `--objects` objects, prints exactly one line
//! `LISTENING http://127.0.0.1:PORT` to stdout, and serves until SIGTERM or ctrl-c.
//!
//! Admin API (never touched by kube, exempt from injected faults):
//! - `GET /__sim/stats` — [`Stats`] counters, including [`FaultCounts`];
//! - `GET /__sim/faults`, `PUT /__sim/faults` — the standing [`FaultConfig`];
//! - `PUT /__sim/faults/{schedule}` — one of [`FaultSchedule::NAMES`];
//! - `POST /__sim/faults/actions` — a one-shot [`FaultAction`], e.g. `{"action":"restart"}` or
//!   `{"action":"hold_watches"}` / `{"action":"release_watches"}`;
//! - `POST /__sim/fill` — `{"kind":"pods","objects":N,"namespaces":K}`, answers when done;
//! - `POST /__sim/churn` — a [`ChurnConfig`] (`duration_ms`), answers with the [`ChurnReport`].

pub mod admin;
pub mod churn;
pub mod discovery;
pub mod encode;
pub mod faults;
pub mod history;
pub mod json_scan;
pub mod list;
pub mod metadata;
pub mod object;
pub mod params;
pub mod protobuf;
pub mod resource;
pub mod restamp;
pub mod routes;
pub mod selector;
pub mod server;
pub mod state;
pub mod stats;
pub mod status;
pub mod store;
pub mod template;
pub mod watch;

pub use churn::{ChurnConfig, ChurnReport, ChurnTask};
pub use faults::{FaultAction, FaultConfig, FaultCounts, FaultSchedule};
pub use resource::ResourceDef;
pub use server::{BackgroundSim, RunningSim, Sim, SimBuilder, SimConfig, SimHandle};
pub use state::WatchChunks;
pub use stats::Stats;
pub use status::ApiError;
pub use store::COMMIT_ANNOTATION;
