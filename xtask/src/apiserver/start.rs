//! `cargo xtask apiserver start`: etcd and kube-apiserver on 127.0.0.1 with generated certificates,
//! a static bearer token with every permission, no controller-manager needed, and a kubeconfig.

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::K8S_VERSION;
use super::build::{self, BuildArgs};
use super::certs;
use super::https::{self, Endpoint};
use super::state::{Proc, State, tail};
use super::stop::{is_running, stop_proc, stop_state};

/// The user of the static token; in `system:masters`.
pub const TEST_USER: &str = "kinformer-e2e";

/// Options of `cargo xtask apiserver start`.
#[derive(clap::Args, Clone, Debug)]
pub struct StartArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub dir: super::StateDirArg,
    /// The WatchList feature gate (streaming lists, `sendInitialEvents`); on by default, as in
    /// upstream since 1.34.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_list: bool,
    /// The ShardedListAndWatch feature gate (KEP-5866: `shardSelector` on
    /// LIST and WATCH; alpha, off upstream).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub sharded_list_and_watch: bool,
    /// More feature gates, e.g. `Foo=true,Bar=false`.
    #[arg(long)]
    pub feature_gates: Option<String>,
    /// Resources served without the watch cache (`--watch-cache-sizes=<r>#0`), comma separated;
    /// their reads go to etcd, so etcd compaction gives storage-level 410s on them at once.
    /// Empty for none.
    #[arg(long, default_value = "secrets")]
    pub uncached_resources: String,
    /// kube-apiserver log verbosity (`--v`).
    #[arg(long, default_value_t = 2)]
    pub verbosity: u8,
    /// Seconds to wait for `/readyz`.
    #[arg(long, default_value_t = 180)]
    pub ready_timeout: u64,
    /// Extra kube-apiserver flags, e.g. `--apiserver-arg=--etcd-compaction-interval=1m`.
    #[arg(long = "apiserver-arg", allow_hyphen_values = true)]
    pub apiserver_args: Vec<String>,
}

impl Default for StartArgs {
    fn default() -> Self {
        Self {
            build: BuildArgs::default(),
            dir: super::StateDirArg { state_dir: None },
            watch_list: true,
            sharded_list_and_watch: false,
            feature_gates: None,
            uncached_resources: "secrets".into(),
            verbosity: 2,
            ready_timeout: 180,
            apiserver_args: Vec::new(),
        }
    }
}

/// Three distinct free loopback ports (bound together, then released).
fn free_ports() -> anyhow::Result<[u16; 3]> {
    let ls = [
        TcpListener::bind("127.0.0.1:0")?,
        TcpListener::bind("127.0.0.1:0")?,
        TcpListener::bind("127.0.0.1:0")?,
    ];
    Ok([
        ls[0].local_addr()?.port(),
        ls[1].local_addr()?.port(),
        ls[2].local_addr()?.port(),
    ])
}

fn spawn(binary: &Path, args: &[String], log: &Path) -> anyhow::Result<Proc> {
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own process group: a ctrl-c at the terminal does not hit it; `stop` ends it.
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    Ok(Proc {
        pid: child.id(),
        binary: binary.to_path_buf(),
        log: log.to_path_buf(),
        args: args.to_vec(),
    })
}

fn failure(what: &str, procs: &[&Proc]) -> anyhow::Error {
    let mut msg = format!("{what}\n");
    for p in procs {
        msg.push_str(&format!(
            "\n--- last lines of {} ---\n{}\n",
            p.log.display(),
            tail(&p.log, 25)
        ));
    }
    anyhow::anyhow!(msg)
}

/// Build (or reuse) the binaries, start etcd and kube-apiserver, wait until ready.
pub fn start(args: &StartArgs) -> anyhow::Result<State> {
    let bins = build::ensure_built(&args.build)?;
    let dir = args.dir.resolve();
    if let Ok(old) = State::load(&dir) {
        eprintln!(
            "stopping the kube-apiserver previously started in {}",
            dir.display()
        );
        stop_state(&old);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let etcd_data = dir.join("etcd-data");
    if etcd_data.exists() {
        std::fs::remove_dir_all(&etcd_data)?;
    }
    let pki = certs::generate(&dir.join("pki"))?;
    let token = certs::random_token();
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{token},{TEST_USER},{TEST_USER},\"system:masters\"\n"),
    )?;
    let [etcd_port, peer_port, apiserver_port] = free_ports()?;

    let etcd_client = format!("http://127.0.0.1:{etcd_port}");
    let etcd_peer = format!("http://127.0.0.1:{peer_port}");
    let etcd_args: Vec<String> = vec![
        "--name=kinformer-e2e".into(),
        format!("--data-dir={}", etcd_data.display()),
        format!("--listen-client-urls={etcd_client}"),
        format!("--advertise-client-urls={etcd_client}"),
        format!("--listen-peer-urls={etcd_peer}"),
        format!("--initial-advertise-peer-urls={etcd_peer}"),
        format!("--initial-cluster=kinformer-e2e={etcd_peer}"),
        // A throwaway test store: no fsync.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ];
    let etcd = spawn(&bins.etcd, &etcd_args, &dir.join("etcd.log"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match https::plain_get(etcd_port, "/health") {
            Ok(r) if r.status == 200 && r.body.contains("true") => break,
            _ if !is_running(&etcd) => return Err(failure("etcd exited during start", &[&etcd])),
            _ if Instant::now() > deadline => {
                let _ = stop_proc(&etcd);
                return Err(failure("etcd not healthy after 30 s", &[&etcd]));
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }

    let mut gates = format!(
        "WatchList={},ShardedListAndWatch={}",
        args.watch_list, args.sharded_list_and_watch
    );
    if let Some(more) = args.feature_gates.as_deref().filter(|g| !g.is_empty()) {
        gates.push(',');
        gates.push_str(more);
    }
    let p = |path: &PathBuf| path.display().to_string();
    let mut apiserver_args: Vec<String> = vec![
        format!("--etcd-servers={etcd_client}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        // The default (lease) endpoint reconciler refuses a loopback advertise address; nothing
        // here needs the `kubernetes` Service's endpoints.
        "--endpoint-reconciler-type=none".into(),
        format!("--secure-port={apiserver_port}"),
        format!("--cert-dir={}", dir.join("cert-dir").display()),
        format!("--tls-cert-file={}", p(&pki.serving_cert)),
        format!("--tls-private-key-file={}", p(&pki.serving_key)),
        format!("--token-auth-file={}", p(&tokens)),
        "--anonymous-auth=false".into(),
        "--authorization-mode=AlwaysAllow".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", p(&pki.sa_pub)),
        format!("--service-account-signing-key-file={}", p(&pki.sa_key)),
        // ServiceAccount admission waits for the `default` ServiceAccount, which only the
        // controller-manager creates.
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("--feature-gates={gates}"),
        "--profiling=false".into(),
        format!("--v={}", args.verbosity),
    ];
    let uncached: Vec<String> = args
        .uncached_resources
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| format!("{r}#0"))
        .collect();
    if !uncached.is_empty() {
        apiserver_args.push(format!("--watch-cache-sizes={}", uncached.join(",")));
    }
    apiserver_args.extend(args.apiserver_args.iter().cloned());
    std::fs::write(dir.join("kube-apiserver.args"), apiserver_args.join("\n"))?;
    let apiserver = match spawn(
        &bins.kube_apiserver,
        &apiserver_args,
        &dir.join("kube-apiserver.log"),
    ) {
        Ok(p) => p,
        Err(e) => {
            let _ = stop_proc(&etcd);
            return Err(e);
        }
    };

    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-e2e\n  cluster:\n    \
             server: https://127.0.0.1:{apiserver_port}\n    certificate-authority: {}\n\
             users:\n- name: {TEST_USER}\n  user:\n    token: {token}\n\
             contexts:\n- name: kinformer-e2e\n  context:\n    cluster: kinformer-e2e\n    \
             user: {TEST_USER}\n    namespace: default\ncurrent-context: kinformer-e2e\n",
            p(&pki.ca_cert)
        ),
    )?;
    let st = State {
        dir: dir.clone(),
        k8s_version: K8S_VERSION.into(),
        etcd,
        apiserver,
        etcd_port,
        apiserver_port,
        kubeconfig,
        token: token.clone(),
        watch_list: args.watch_list,
        sharded_list_and_watch: args.sharded_list_and_watch,
    };
    st.save()?;

    if let Err(e) = wait_ready(&st, &pki.ca_der, Duration::from_secs(args.ready_timeout)) {
        stop_state(&st);
        return Err(e);
    }
    Ok(st)
}

fn wait_ready(st: &State, ca_der: &Path, timeout: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let ep = Endpoint::new(st.apiserver_port, &std::fs::read(ca_der)?, &st.token)?;
    let procs = [&st.apiserver, &st.etcd];
    let deadline = started + timeout;
    let mut last = String::new();
    loop {
        if !is_running(&st.apiserver) || !is_running(&st.etcd) {
            return Err(failure(
                "kube-apiserver or etcd exited during start",
                &procs,
            ));
        }
        match ep.request("GET", "/readyz", None) {
            Ok(r) if r.status == 200 => break,
            Ok(r) => last = format!("/readyz {}: {}", r.status, r.body),
            Err(e) => last = format!("/readyz: {e:#}"),
        }
        if Instant::now() > deadline {
            return Err(failure(
                &format!("kube-apiserver not ready after {timeout:?}; last answer: {last}"),
                &procs,
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // The apiserver's system-namespaces controller creates `default`; make sure it exists before
    // the tests run (nothing else would create it).
    let deadline = Instant::now() + Duration::from_secs(30);
    last.clear();
    loop {
        let r = ep.request("GET", "/api/v1/namespaces/default", None)?;
        match r.status {
            200 => break,
            404 => {
                let c = ep.request(
                    "POST",
                    "/api/v1/namespaces",
                    Some(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}"#),
                )?;
                if c.status == 201 || c.status == 409 {
                    break;
                }
                last = format!("creating namespace default: {} {}", c.status, c.body);
            }
            s => last = format!("GET namespace default: {s} {}", r.body),
        }
        if Instant::now() > deadline {
            bail!("namespace `default` not available: {last}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "kube-apiserver {} ready in {:.1?} (logs: {}, {})",
        st.k8s_version,
        started.elapsed(),
        st.apiserver.log.display(),
        st.etcd.log.display()
    );
    Ok(())
}
