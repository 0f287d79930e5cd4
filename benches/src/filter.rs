//! The benchmark filter given on a bench binary's command line, so that a
//! bench can skip setting up what the filter leaves out (criterion only
//! skips the measurement, not the set-up before it).

/// Criterion's options that take a value (the value is not the filter).
const TAKES_VALUE: &[&str] = &[
    "-c",
    "--color",
    "-s",
    "--save-baseline",
    "-b",
    "--baseline",
    "--baseline-lenient",
    "--format",
    "--profile-time",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--plotting-backend",
    "--output-format",
];

/// Whether criterion, run with `args` (the binary's arguments after its
/// name), would run the benchmark `id` (`group/function/parameter`): the
/// filter is a regular expression (a plain string with `--exact`); no
/// filter, or one that is not a valid expression, selects everything.
///
/// ```
/// use kinformer_benches::filter::selected_by;
/// let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
/// assert!(selected_by(&args("--bench core/1_h/100000$"), "core/1_h/100000"));
/// assert!(!selected_by(&args("--bench core/1_h/100000$"), "core/1_h/1000000"));
/// assert!(!selected_by(&args("--sample-size 10 core/x"), "core/y"));
/// assert!(selected_by(&args("--bench"), "anything"));
/// ```
pub fn selected_by(args: &[String], id: &str) -> bool {
    let mut filter = None;
    let mut exact = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--exact" {
            exact = true;
        } else if TAKES_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') && filter.is_none() {
            filter = Some(arg.as_str());
        }
    }
    match filter {
        None => true,
        Some(f) if exact => f == id,
        Some(f) => regex::Regex::new(f).map_or(true, |re| re.is_match(id)),
    }
}

/// [`selected_by`] with this process's arguments.
pub fn selected(id: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    selected_by(&args, id)
}
