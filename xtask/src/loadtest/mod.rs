//! `cargo xtask loadtest`: fill N objects, sync an informer, churn while
//! readers query the cache, then compare the cache with the source of truth.

mod admin;
pub(crate) mod client_go;
mod cluster;
pub(crate) mod host;
pub(crate) mod http_source;
pub(crate) mod measure;
pub(crate) mod pods;
pub(crate) mod process;
pub(crate) mod progress;
mod report;
mod sharded;
mod sim_process;
mod synthetic;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::ValueEnum;

pub use report::Report;

/// Where the objects come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Source {
    /// An in-process generator feeding the core directly (no HTTP).
    Synthetic,
    /// The kinformer-sim API server, over HTTP.
    Sim,
    /// A real cluster named by `--kubeconfig`.
    Kubeconfig,
}

/// The informer implementation under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Impl {
    /// kinformer's shared informer.
    Kinformer,
    /// kube-runtime's watcher + reflector Store, for comparison.
    KubeRs,
    /// client-go's shared informer factory (typed, or metadatainformer for
    /// `--metadata-only`) in a Go child process (`xtask/clientgo/`).
    ClientGo,
}

impl Impl {
    /// Its name on the command line and in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Kinformer => "kinformer",
            Self::KubeRs => "kube-rs",
            Self::ClientGo => "client-go",
        }
    }
}

/// Object transforms selectable from the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransformArg {
    /// Keep objects as received.
    None,
    /// Drop `metadata.managedFields` before caching.
    StripManagedFields,
    /// Never decode `metadata.managedFields` (kinformer's decode-time
    /// pruning; kube-rs falls back to stripping after decoding).
    SkipManagedFields,
}

/// How the simulator cuts watch events into HTTP chunks (its
/// `--watch-chunks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimWatchChunks {
    /// As kube-apiserver writes them: an event of 2 KiB or more is a chunk
    /// of its own.
    Apiserver,
    /// The events queued together in one chunk of up to 64 KiB.
    Batched,
}

impl SimWatchChunks {
    /// The simulator's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Apiserver => "apiserver",
            Self::Batched => "batched",
        }
    }
}

/// How kinformer's watches reach the server (`--watch-transport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WatchTransport {
    /// `kinformer::DirectWatch`: a connection per watch, read directly.
    Direct,
    /// kube's `Client`, as LISTs and kube-rs go.
    Client,
}

impl WatchTransport {
    /// Its name in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Client => "client",
        }
    }
}

/// Options of `cargo xtask loadtest`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadtestArgs {
    /// Where objects come from.
    #[arg(long, value_enum, default_value = "sim")]
    pub source: Source,
    /// Implementation under test (sim source).
    #[arg(long = "impl", value_enum, default_value = "kinformer")]
    pub implementation: Impl,
    /// Objects to fill before the initial sync.
    #[arg(long, default_value_t = 100_000)]
    pub objects: usize,
    /// Resource kind (pods).
    #[arg(long, default_value = "pods")]
    pub kind: String,
    /// Churn rate in changes per second; 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub churn: u64,
    /// Churn duration in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Independent informers fed by the same source.
    #[arg(long, default_value_t = 1)]
    pub informers: usize,
    /// Event handlers per informer.
    #[arg(long, default_value_t = 1)]
    pub handlers: usize,
    /// Instead of a live churn: hold the watches, commit this many updates
    /// (each to another object while it does not exceed `--objects`), then
    /// release them and time how fast the handler gets through the backlog
    /// (sim source). Takes the simulator's own cost out of the figure, as an
    /// in-memory feed would; the lag then includes the hold and is not
    /// reported.
    #[arg(long)]
    pub burst: Option<u64>,
    /// Seconds to wait at most, before the informers start, for the
    /// hypervisor to finish taking back memory freed earlier (a previous
    /// run's exit) and to stop stealing CPU time; 0 starts at once. On
    /// this project's VMs that takes ~20 s after a large run exits.
    #[arg(long, default_value_t = 60.0)]
    pub settle: f64,
    /// Reader threads querying the lister during churn.
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// Seconds at the start of the churn whose changes are left out of the
    /// lag percentiles (they still count in updates/s). On this project's
    /// VMs the first changes after a sync wait for memory touched for the
    /// first time; 0 records every change.
    #[arg(long, default_value_t = 0.0)]
    pub lag_warmup: f64,
    /// Watch events the simulator keeps for watches that resume (sim
    /// source). kube-apiserver 1.37 keeps at most 102,400 per resource in
    /// its watch cache; the default keeps a whole 1M burst. Every kept event
    /// is memory the simulator touches for the first time, on the same
    /// cores as the informer.
    #[arg(long, default_value_t = 1_000_000)]
    pub sim_history: usize,
    /// How the simulator cuts watch events into HTTP chunks. A hyper client
    /// hands each chunk from its connection task to the body's reader, so
    /// fewer chunks cost the client less.
    #[arg(long, value_enum, default_value_t = SimWatchChunks::Apiserver)]
    pub sim_watch_chunks: SimWatchChunks,
    /// Worker threads of a tokio runtime of their own for kinformer's
    /// reflectors (`Tuning::runtime`); 0, the library's default,
    /// runs them on the load test's two-worker runtime, where kube-rs runs.
    #[arg(long, default_value_t = 0)]
    pub reflector_workers: usize,
    /// Processor threads per informer (default: available cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// How kinformer's watches reach the server: `direct` on connections of
    /// their own, their bodies read without hyper's client
    /// (`FactoryBuilder::direct_watches`), or through kube's `client`.
    #[arg(long, value_enum, default_value_t = WatchTransport::Direct)]
    pub watch_transport: WatchTransport,
    /// Do not register the built-in namespace, label and owner indexes
    /// (kube-rs's Store has none).
    #[arg(long)]
    pub no_builtin_indexes: bool,
    /// Cache whole objects packed (`SharedInformerFactory::compact_informer`:
    /// metadata decoded, the rest compressed, decoded on demand); not with
    /// `--metadata-only`.
    #[arg(long)]
    pub compact: bool,
    /// With `--object-arenas`: release each replaced object's chunk at once
    /// when it holds the whole object (`FactoryBuilder::release_objects_whole`,
    /// off by default), instead of freeing it part by part.
    #[arg(long)]
    pub whole_release: bool,
    /// After the churn, force one relist (every watch answered 410) and
    /// report its peak RSS against the RSS before it (sim source).
    #[arg(long)]
    pub relist: bool,
    /// Decode threads shared by the reflectors (default: available cores;
    /// 0 decodes on the reflector's task).
    #[arg(long)]
    pub decode_threads: Option<usize>,
    /// Decode each object into a chunk of its own (`kinformer_alloc`'s
    /// object arenas, which xtask's global allocator wraps mimalloc in;
    /// a library user opts in with `#[global_allocator]`). Off by default:
    /// objects are allocated by mimalloc alone.
    #[arg(long)]
    pub object_arenas: bool,
    /// Cache metadata only (PartialObjectMeta).
    #[arg(long)]
    pub metadata_only: bool,
    /// With `--metadata-only`: list and watch in JSON instead of
    /// Kubernetes' protobuf encoding, which kinformer's metadata informers
    /// ask for by default, as client-go's do (`ReflectorConfig::protobuf`;
    /// kube-rs lists and watches in JSON).
    #[arg(long)]
    pub no_protobuf: bool,
    /// Transform applied before caching.
    #[arg(long, value_enum, default_value = "none")]
    pub transform: TransformArg,
    /// A named fault schedule (sim source).
    #[arg(long)]
    pub faults: Option<String>,
    /// A real cluster instead of the simulator.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Initial lists by paged LIST instead of WatchList streaming (kinformer).
    #[arg(long)]
    pub no_watch_list: bool,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Instead of one informer: one unsharded informer, then N informers of
    /// `ShardSelector::uid_shard(i, N)`, each in a process of its own, one
    /// after the other on the same simulator (each as if on a machine of
    /// its own); their peak RSS, sync and CPU against the unsharded one's,
    /// and whether the shards' union equals the source (sim source,
    /// kinformer, no churn).
    #[arg(long)]
    pub shards: Option<u32>,
    /// With `--shards`: the simulator ignores `shardSelector`, as a server
    /// without the `ShardedListAndWatch` gate does, so the informers filter
    /// on their side.
    #[arg(long)]
    pub sim_ignores_shards: bool,
    /// A replica of `--shards`: the informer caches shard I of N (`I/N`).
    #[arg(long, hide = true)]
    pub shard_of: Option<String>,
    /// A replica of `--shards`: the running simulator to use (not filled,
    /// not owned).
    #[arg(long, hide = true)]
    pub sim_url: Option<String>,
    /// A replica of `--shards`: write the cache's keys and versions to this
    /// file instead of comparing them with the source.
    #[arg(long, hide = true)]
    pub keys_out: Option<PathBuf>,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
}

impl LoadtestArgs {
    /// Whether the informer under test lists and watches in protobuf:
    /// kinformer's metadata informers unless `--no-protobuf`, client-go's
    /// always (its metadata client asks for it; its typed Pods are JSON).
    pub(crate) fn protobuf(&self) -> bool {
        self.metadata_only
            && match self.implementation {
                Impl::Kinformer => !self.no_protobuf,
                Impl::ClientGo => true,
                Impl::KubeRs => false,
            }
    }

    pub(crate) fn churn_duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration.max(0.0))
    }

    pub(crate) fn settle_max(&self) -> Duration {
        Duration::try_from_secs_f64(self.settle.max(0.0)).unwrap_or(Duration::MAX)
    }

    fn lag_warmup(&self) -> Duration {
        Duration::try_from_secs_f64(self.lag_warmup.max(0.0)).unwrap_or(Duration::MAX)
    }
}

/// Runs the load test and prints (and optionally writes) the report.
pub fn run(args: &LoadtestArgs) -> anyhow::Result<()> {
    if args.shards.is_some() {
        return sharded::run(args);
    }
    run_report(args).map(drop)
}

/// Runs the load test given its command-line arguments (without the
/// program name), as [`run`]; returns the report.
pub fn run_with(args: &[&str]) -> anyhow::Result<report::Report> {
    run_report(&parse_args(args)?)
}

/// The load test's options given on a command line (without the program
/// name); the defaults for those not given.
pub(crate) fn parse_args(args: &[&str]) -> anyhow::Result<LoadtestArgs> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: LoadtestArgs,
    }
    let parsed = <Wrapper as clap::Parser>::try_parse_from(
        std::iter::once("loadtest").chain(args.iter().copied()),
    )?;
    Ok(parsed.args)
}

/// As [`run`], returning the report (once it was printed and written).
fn run_report(args: &LoadtestArgs) -> anyhow::Result<report::Report> {
    if args.kind != "pods" {
        bail!("--kind {}: only pods are supported so far", args.kind);
    }
    if args.whole_release && !args.object_arenas {
        bail!("--whole-release needs --object-arenas");
    }
    kinformer_alloc::set_enabled(args.object_arenas);
    if args.no_protobuf && (!args.metadata_only || args.implementation != Impl::Kinformer) {
        bail!("--no-protobuf needs --metadata-only and --impl kinformer");
    }
    // `--kubeconfig FILE` alone selects a real cluster as the source.
    let source = if args.kubeconfig.is_some() {
        Source::Kubeconfig
    } else {
        args.source
    };
    let report = match source {
        Source::Synthetic => {
            if args.implementation != Impl::Kinformer {
                bail!("--impl {} needs --source sim", args.implementation.as_str());
            }
            if args.metadata_only {
                bail!("--metadata-only needs --source sim or kubeconfig");
            }
            if args.burst.is_some() {
                bail!("--burst needs --source sim");
            }
            synthetic::run(args)?
        }
        Source::Kubeconfig if args.kubeconfig.is_none() => {
            bail!("--source kubeconfig needs --kubeconfig FILE")
        }
        Source::Sim | Source::Kubeconfig => http_source::run(args)?,
    };
    if args.keys_out.is_none() {
        report.print_table();
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
        eprintln!("figures written to {}", path.display());
    }
    // A replica's cache is one shard: the parent compares their union.
    if !report.cache_matches_source && args.keys_out.is_none() {
        bail!("the cache does not match the source");
    }
    Ok(report)
}
