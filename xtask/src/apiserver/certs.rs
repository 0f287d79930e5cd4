//! Certificates and keys for a loopback kube-apiserver, generated in Rust (rcgen): a CA, a serving
//! certificate for 127.0.0.1 signed by it, and the service-account signing key pair.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Files written by [`generate`].
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// CA certificate (PEM); clients trust it.
    pub ca_cert: PathBuf,
    /// CA certificate (DER), for the xtask's own HTTPS client.
    pub ca_der: PathBuf,
    /// Serving certificate (PEM).
    pub serving_cert: PathBuf,
    /// Serving key (PEM).
    pub serving_key: PathBuf,
    /// Service-account signing key (PKCS#8 PEM); also accepted as the verification key.
    pub sa_key: PathBuf,
    /// Service-account public key (PEM).
    pub sa_pub: PathBuf,
}

/// Generate everything into `dir` (overwriting).
pub fn generate(dir: &Path) -> anyhow::Result<CertFiles> {
    std::fs::create_dir_all(dir)?;
    let files = CertFiles {
        ca_cert: dir.join("ca.crt"),
        ca_der: dir.join("ca.der"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
    };

    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "kinformer-e2e-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).context("self-signing the CA")?;
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate().context("generating the serving key")?;
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "10.0.0.1".to_string(),
    ])?;
    serving.distinguished_name = rcgen::DistinguishedName::new();
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.use_authority_key_identifier_extension = true;
    let serving_cert = serving
        .signed_by(&serving_key, &issuer)
        .context("signing the serving certificate")?;

    let sa_key = KeyPair::generate().context("generating the service-account key")?;

    std::fs::write(&files.ca_cert, ca_cert.pem())?;
    std::fs::write(&files.ca_der, ca_cert.der().as_ref())?;
    std::fs::write(&files.serving_cert, serving_cert.pem())?;
    write_private(&files.serving_key, &serving_key.serialize_pem())?;
    write_private(&files.sa_key, &sa_key.serialize_pem())?;
    std::fs::write(&files.sa_pub, sa_key.public_key_pem())?;
    Ok(files)
}

fn write_private(path: &Path, pem: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(pem.as_bytes())?;
    Ok(())
}

/// A random hex token of 32 bytes.
pub fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}
