//! [`Tuning`]: the factory's performance knobs, in one place.
//!
//! The defaults are what the load test measures and what most controllers
//! should run; each knob says when it is worth touching.

use tokio::runtime::Handle;

/// Threads, runtime and object layout of a [`SharedInformerFactory`]'s
/// informers (see [`FactoryBuilder::tuning`]).
///
/// ```
/// use kinformer::Tuning;
/// // A process with many small informers: one processor thread each.
/// let tuning = Tuning::default().threads_per_informer(1).decode_threads(2);
/// assert_eq!(tuning.threads(), 1);
/// ```
///
/// [`SharedInformerFactory`]: crate::SharedInformerFactory
/// [`FactoryBuilder::tuning`]: crate::FactoryBuilder::tuning
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Tuning {
    pub(crate) threads: usize,
    pub(crate) decode_threads: usize,
    pub(crate) runtime: Option<Handle>,
}

impl Default for Tuning {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            threads: cores,
            decode_threads: cores,
            runtime: None,
        }
    }
}

impl Tuning {
    /// Processor threads per informer (default: available cores, at least
    /// one). They apply deltas to the cache and run the handlers. Lower it
    /// in a process with many informers of few changes each, where threads
    /// per informer add up; the cache of one busy informer is written
    /// fastest with the default.
    pub fn threads_per_informer(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// Threads of the decode pool that the factory's reflectors share
    /// (default: available cores; 0 decodes on each reflector's task).
    /// Decoding is most of an update's cost; 0 suits a process that must
    /// keep to its async runtime's threads and watches little.
    pub fn decode_threads(mut self, n: usize) -> Self {
        self.decode_threads = n;
        self
    }

    /// The tokio runtime reflectors run on (default: the current one at
    /// [`SharedInformerFactory::start`](crate::SharedInformerFactory::start),
    /// else a runtime of one worker of its own).
    ///
    /// kube-apiserver writes each watch event of 2 KiB or more as an HTTP
    /// chunk of its own, and hyper's client hands each chunk from the
    /// connection's task to the body's reader: on a multi-worker runtime
    /// that is often a wake-up of another thread per event. For informers
    /// of many changes per second, a runtime of one worker for the
    /// reflectors alone took 0.6–0.8× the CPU per update on the reflector's
    /// side of the load test's two-worker runtime. Give one here when the
    /// application's runtime is busy with other work, or in tests that run
    /// their own.
    pub fn runtime(mut self, handle: Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Processor threads per informer.
    pub fn threads(&self) -> usize {
        self.threads
    }
}
