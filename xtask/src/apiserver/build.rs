//! Build kube-apiserver and etcd with Go, once, into a cache outside the repository.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use super::{ETCD_VERSION, K8S_VERSION};

/// Options of `cargo xtask apiserver build`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct BuildArgs {
    /// Rebuild even when cached binaries are present.
    #[arg(long)]
    pub force: bool,
    /// Binary cache (default `$KINFORMER_CACHE_DIR`, else `$XDG_CACHE_HOME/kinformer`, else
    /// `~/.cache/kinformer`); binaries go to `<cache>/<k8s-version>/`.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Run the Go build at normal priority instead of `nice -n 19`.
    #[arg(long)]
    pub no_nice: bool,
}

/// Paths of the two built binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
}

/// `xtask/apiserver/`, the Go harness module.
pub fn go_module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("apiserver")
}

pub(crate) fn cache_root(args: &BuildArgs) -> PathBuf {
    if let Some(d) = &args.cache_dir {
        return d.clone();
    }
    if let Some(d) = std::env::var_os("KINFORMER_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("kinformer");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache").join("kinformer")
}

/// The directory the binaries of [`K8S_VERSION`] are cached in.
pub fn bin_dir(args: &BuildArgs) -> PathBuf {
    cache_root(args).join(K8S_VERSION)
}

/// A stamp of the pinned module graph (FNV-1a of go.mod and go.sum): cached binaries built from
/// another graph are rebuilt.
fn module_stamp() -> anyhow::Result<String> {
    let dir = go_module_dir();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in ["go.mod", "go.sum"] {
        let bytes = std::fs::read(dir.join(f)).with_context(|| format!("reading {f}"))?;
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(format!(
        "k8s {K8S_VERSION} etcd {ETCD_VERSION} modules {h:016x}\n"
    ))
}

/// The Go toolchain: `$GO`, else `go` on PATH, else `/usr/local/go/bin/go`.
pub(crate) fn find_go() -> anyhow::Result<PathBuf> {
    if let Some(go) = std::env::var_os("GO").filter(|g| !g.is_empty()) {
        let go = PathBuf::from(go);
        if go.is_file() {
            return Ok(go);
        }
        bail!(
            "$GO is set to {}, which is not a file. {GO_HELP}",
            go.display()
        );
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("go"))
            .find(|p| p.is_file())
    });
    if let Some(go) = on_path {
        return Ok(go);
    }
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    if fallback.is_file() {
        return Ok(fallback);
    }
    bail!(
        "the Go toolchain is needed to build the Go harnesses (kube-apiserver {K8S_VERSION} and \
         etcd {ETCD_VERSION} for the end-to-end suite, client-go for `--impl client-go`), and \
         `go` was not found (not on PATH, not in /usr/local/go/bin, \
         $GO unset). {GO_HELP}"
    )
}

const GO_HELP: &str = "Install Go 1.26 or newer: the official release tarball unpacked to \
     /usr/local/go (then add /usr/local/go/bin to PATH), or your distribution's Go package if it \
     is 1.26 or newer; or point $GO at a go binary. A cold build downloads the modules through \
     the Go module proxy and takes about 15 minutes on 2 cores (see docs/testing.md); later runs \
     reuse the cached binaries.";

pub(crate) fn has_nice() -> bool {
    Command::new("nice")
        .arg("true")
        .status()
        .is_ok_and(|s| s.success())
}

/// `go build -trimpath` in the module `dir` (at `nice -n 19` when `nice`),
/// static, with the module graph read-only; the caller adds the flags,
/// output and package.
pub(crate) fn go_build(go: &Path, nice: bool, dir: &Path) -> Command {
    let mut cmd = if nice {
        let mut c = Command::new("nice");
        c.args(["-n", "19"]).arg(go);
        c
    } else {
        Command::new(go)
    };
    cmd.current_dir(dir)
        .args(["build", "-trimpath"])
        // Static binaries like upstream's releases; no C toolchain needed.
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false");
    cmd
}

/// Build both binaries unless the cache already has them; returns their paths.
pub fn ensure_built(args: &BuildArgs) -> anyhow::Result<Binaries> {
    let dir = bin_dir(args);
    let bins = Binaries {
        kube_apiserver: dir.join("kube-apiserver"),
        etcd: dir.join("etcd"),
    };
    let stamp_file = dir.join("build.stamp");
    let stamp = module_stamp()?;
    let cached = bins.kube_apiserver.is_file()
        && bins.etcd.is_file()
        && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp);
    if cached && !args.force {
        tracing::info!(dir = %dir.display(), "reusing cached kube-apiserver and etcd");
        return Ok(bins);
    }
    let go = find_go()?;
    let tmp = dir.join(format!(".build-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let nice = !args.no_nice && has_nice();
    eprintln!(
        "building kube-apiserver {K8S_VERSION} and etcd {ETCD_VERSION} with {} into {} \
         (a cold build takes a while; see docs/testing.md)",
        go.display(),
        dir.display()
    );
    let version_ldflags = {
        let minor = K8S_VERSION
            .trim_start_matches('v')
            .split('.')
            .nth(1)
            .unwrap_or("0");
        format!(
            "-s -w -X k8s.io/component-base/version.gitVersion={K8S_VERSION} \
             -X k8s.io/component-base/version.gitMajor=1 \
             -X k8s.io/component-base/version.gitMinor={minor} \
             -X k8s.io/component-base/version.gitTreeState=clean"
        )
    };
    let targets = [
        ("etcd", "go.etcd.io/etcd/server/v3", "-s -w".to_string()),
        (
            "kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-apiserver",
            version_ldflags,
        ),
    ];
    let started = Instant::now();
    for (name, pkg, ldflags) in &targets {
        let t = Instant::now();
        let mut cmd = go_build(&go, nice, &go_module_dir());
        cmd.args(["-ldflags", ldflags, "-o"])
            .arg(tmp.join(name))
            .arg(pkg);
        let status = cmd
            .status()
            .with_context(|| format!("running {} build {pkg}", go.display()))?;
        if !status.success() {
            bail!(
                "`go build {pkg}` failed ({status}) in {}",
                go_module_dir().display()
            );
        }
        eprintln!("built {name} in {:.0?}", t.elapsed());
    }
    for (name, _, _) in &targets {
        std::fs::rename(tmp.join(name), dir.join(name))
            .with_context(|| format!("moving {name} into {}", dir.display()))?;
    }
    std::fs::write(&stamp_file, stamp)?;
    let _ = std::fs::remove_dir_all(&tmp);
    eprintln!("kube-apiserver and etcd built in {:.0?}", started.elapsed());
    Ok(bins)
}
