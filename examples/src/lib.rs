//! Shared helpers of the kinformer examples (they need a cluster to run:
//! the current kubeconfig context is used).

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

pub mod namespace_settings;
pub mod probes;
pub mod settings_scenario;
