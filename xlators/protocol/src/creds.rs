//! What a client presents to a brick, and how both sides prove it without sending it.
//!
//! Two kinds of credential, usable together:
//!
//! - A **shared secret** (per volume; `xlfs volume create` generates one). It never crosses the
//!   wire: the handshake is a challenge-response in both directions. The client's hello
//!   carries a fresh random nonce; the server answers with its own nonce and an HMAC-SHA256 of
//!   both nonces under the secret (so the client knows the brick holds the secret before it
//!   sends a single call); the client answers with its own HMAC over the nonces the other way
//!   round. A recorded handshake is useless later (the other side's nonce differs), and an
//!   impostor brick learns nothing it could replay.
//! - A **TLS identity** (`tls`, `tls-cert`, `tls-key`, `tls-ca`): every TCP connection is
//!   TLS 1.3 (or 1.2) with certificates checked both ways against the volume's CA, and the
//!   server admits only the certificate names in `tls-allow`. See [`crate::tls`].
//!
//! A client that proved either is *trusted*: its calls run with the ids it sends (root
//! included). Others are root-squashed unless `root-squash off` (see
//! [`crate::server::identity`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of a handshake nonce.
pub const NONCE_LEN: usize = 32;

/// TLS files of one side of a connection (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This side's certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA certificates the other side's certificate must chain to.
    pub ca: PathBuf,
}

/// What a client presents to a brick: a shared secret, a TLS identity, or both (or neither:
/// a brick that asks for nothing, or a local Unix-socket peer, which the kernel vouches for).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    pub secret: Option<String>,
    pub tls: Option<TlsFiles>,
    /// The certificate name the brick must have (any name the CA signed when `None`).
    pub tls_server_name: Option<String>,
}

impl Credentials {
    /// Only a secret (`None` or empty: none).
    pub fn secret(secret: Option<&str>) -> Credentials {
        Credentials {
            secret: secret.filter(|s| !s.is_empty()).map(str::to_owned),
            ..Credentials::default()
        }
    }
}

/// Reads a secret file: its first line, without surrounding white space. Refused if it is
/// empty, or if others than its owner may read or change it (the secret is as good as
/// published then; `chmod 600 FILE`).
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the secret file {} has mode {:o}: others may read it; chmod 600 it",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let secret = text.lines().next().unwrap_or("").trim();
    if secret.is_empty() {
        return Err(format!("the secret file {} is empty", path.display()));
    }
    Ok(secret.to_owned())
}

/// The secret of a translator's `secret` and `secret-file` options (both set: an error).
pub fn secret_of(inline: &str, file: &str) -> Result<Option<String>, String> {
    match (inline.is_empty(), file.is_empty()) {
        (true, true) => Ok(None),
        (false, true) => Ok(Some(inline.to_owned())),
        (true, false) => read_secret_file(Path::new(file)).map(Some),
        (false, false) => Err("set secret or secret-file, not both".into()),
    }
}

/// A fresh random nonce.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    // The system's random source does not fail on Linux once booted; if it ever did, a zero
    // nonce would only make this handshake replayable, so fail loudly instead.
    SystemRandom::new()
        .fill(&mut n)
        .expect("the system random source failed");
    n
}

/// A random secret for a new volume: 32 random bytes as 64 hex digits.
pub fn generate_secret() -> String {
    nonce().iter().map(|b| format!("{b:02x}")).collect()
}

/// Who computes a proof: the two directions are keyed apart so that one side's proof can never
/// be reflected back as the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

/// The proof that `role` holds `secret`, bound to both nonces and the volume name.
pub fn proof(
    secret: &str,
    role: Role,
    volume: &str,
    client_nonce: &[u8],
    server_nonce: &[u8],
) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(match role {
        Role::Server => b"xlfs-brick-proof\0",
        Role::Client => b"xlfs-client-proof",
    });
    for part in [volume.as_bytes(), client_nonce, server_nonce] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    ctx.sign().as_ref().to_vec()
}

/// Whether `given` is `role`'s proof (compared in constant time).
pub fn verify(
    secret: &str,
    role: Role,
    volume: &str,
    client_nonce: &[u8],
    server_nonce: &[u8],
    given: &[u8],
) -> bool {
    let want = proof(secret, role, volume, client_nonce, server_nonce);
    want.len() == given.len()
        && want
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The files of a translator's `tls`, `tls-cert`, `tls-key`, `tls-ca` options (`None`: TLS
/// off); all three files are required with `tls on`.
pub fn tls_files_of(on: bool, cert: &str, key: &str, ca: &str) -> Result<Option<TlsFiles>, String> {
    if !on {
        return Ok(None);
    }
    let missing: Vec<&str> = [("tls-cert", cert), ("tls-key", key), ("tls-ca", ca)]
        .iter()
        .filter(|(_, v)| v.trim().is_empty())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "tls is on but {} not set: give the PEM files (`xlfs tls` makes them)",
            missing.join(", ")
        ));
    }
    Ok(Some(TlsFiles {
        cert: cert.into(),
        key: key.into(),
        ca: ca.into(),
    }))
}

fn load_identity(
    f: &TlsFiles,
) -> Result<
    (
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
        rustls::RootCertStore,
    ),
    String,
> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&f.cert)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("tls-cert {}: {e}", f.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls-cert {}: no certificate in it",
            f.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&f.key)
        .map_err(|e| format!("tls-key {}: {e}", f.key.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    let cas: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&f.ca)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("tls-ca {}: {e}", f.ca.display()))?;
    for ca in cas {
        roots
            .add(ca)
            .map_err(|e| format!("tls-ca {}: {e}", f.ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "tls-ca {}: no CA certificate in it",
            f.ca.display()
        ));
    }
    Ok((certs, key, roots))
}

/// The server side of TLS: mutual authentication against `tls-ca`, then the certificate-name
/// allow-list `tls-allow` (GlusterFS's `auth.ssl-allow`).
pub struct ServerTls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// DNS names one of which the client's certificate must carry; empty: any the CA signed.
    allow: Vec<String>,
}

impl ServerTls {
    pub fn new(f: &TlsFiles, allow: &str) -> Result<ServerTls, String> {
        let (certs, key, roots) = load_identity(f)?;
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| format!("tls-ca {}: {e}", f.ca.display()))?;
        let config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|e| format!("tls-cert/tls-key: {e}"))?;
        let allow = allow
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*")
            .map(str::to_owned)
            .collect::<Vec<_>>();
        for a in &allow {
            ServerName::try_from(a.as_str())
                .map_err(|_| format!("tls-allow: {a:?} is not a certificate (DNS) name"))?;
        }
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            allow,
        })
    }

    /// Whether the verified client certificate `cert` is allowed; the refusal names it.
    pub fn allows(&self, cert: Option<&CertificateDer<'_>>) -> Result<(), String> {
        if self.allow.is_empty() {
            return Ok(());
        }
        let Some(cert) = cert else {
            return Err("the client sent no certificate".into());
        };
        let ee = webpki::EndEntityCert::try_from(cert)
            .map_err(|e| format!("the client's certificate cannot be read: {e:?}"))?;
        let ok = self.allow.iter().any(|a| {
            ServerName::try_from(a.as_str())
                .is_ok_and(|n| ee.verify_is_valid_for_subject_name(&n).is_ok())
        });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the client's certificate carries none of the names in tls-allow ({})",
                self.allow.join(", ")
            ))
        }
    }
}

/// The client side of TLS: its certificate for the brick, and the brick's checked against
/// `tls-ca` (and `tls-server-name` when set).
#[derive(Clone)]
pub struct ClientTls {
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: ServerName<'static>,
    files: TlsFiles,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientTls({:?}, {:?})", self.files, self.server_name)
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, o: &ClientTls) -> bool {
        self.files == o.files && self.server_name == o.server_name
    }
}

impl Eq for ClientTls {}

/// What a client connects to when `tls-server-name` is empty: any name the CA signed passes.
const ANY_BRICK: &str = "xlfs-brick";

impl ClientTls {
    pub fn new(f: &TlsFiles, server_name: &str) -> Result<ClientTls, String> {
        let (certs, key, roots) = load_identity(f)?;
        let webpki = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| format!("tls-ca {}: {e}", f.ca.display()))?;
        let any_name = server_name.trim().is_empty();
        let name = if any_name {
            ANY_BRICK
        } else {
            server_name.trim()
        };
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|_| format!("tls-server-name {name:?} is not a certificate (DNS) name"))?;
        let config = rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(BrickVerifier { webpki, any_name }))
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("tls-cert/tls-key: {e}"))?;
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            files: f.clone(),
        })
    }
}

/// webpki's check of the brick's certificate against the CA; with no `tls-server-name`, any
/// name the CA signed is accepted (the CA is the volume's own).
#[derive(Debug)]
struct BrickVerifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    any_name: bool,
}

impl rustls::client::danger::ServerCertVerifier for BrickVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.any_name => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Writes `bytes` to `path` with mode `mode`, atomically (a temporary file renamed over it).
fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `xlfs tls ca DIR`: makes a CA, `DIR/ca.pem` (0644) and its key `DIR/ca.key` (0600).
/// Refuses to replace an existing one (every certificate it signed would stop working).
pub fn make_ca(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let (pem, key) = (dir.join("ca.pem"), dir.join("ca.key"));
    if pem.exists() || key.exists() {
        return Err(format!(
            "{} already holds a CA (ca.pem, ca.key): certificates it signed would stop \
             working if it were replaced; remove them first to start over",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let k = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("xlfs CA {name}"));
    p.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let cert = p.self_signed(&k).map_err(|e| e.to_string())?;
    write_private(&key, k.serialize_pem().as_bytes(), 0o600)?;
    write_private(&pem, cert.pem().as_bytes(), 0o644)?;
    Ok(pem)
}

/// `xlfs tls issue DIR NAME`: a certificate for `NAME` (its common name and DNS name: what
/// `tls-allow` and `tls-server-name` match) signed by the CA in `DIR`, written to
/// `DIR/NAME.pem` (0644) and `DIR/NAME.key` (0600). Good for client and server use.
pub fn issue(dir: &Path, name: &str) -> Result<TlsFiles, String> {
    if ServerName::try_from(name).is_err() || name.contains('/') {
        return Err(format!(
            "{name:?} is not a certificate name: use letters, digits, dots and dashes \
             (brick1.gv0, client.gv0)"
        ));
    }
    let (ca_pem, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| {
            format!(
                "{}: {e} (make the CA first: xlfs tls ca {})",
                p.display(),
                dir.display()
            )
        })
    };
    let ca_k = rcgen::KeyPair::from_pem(&read(&ca_key)?).map_err(|e| e.to_string())?;
    let ca_params = rcgen::CertificateParams::from_ca_cert_pem(&read(&ca_pem)?)
        .map_err(|e| format!("{}: {e}", ca_pem.display()))?;
    let ca = ca_params.self_signed(&ca_k).map_err(|e| e.to_string())?;
    let k = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut p = rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(|e| e.to_string())?;
    p.distinguished_name.push(rcgen::DnType::CommonName, name);
    p.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let cert = p.signed_by(&k, &ca, &ca_k).map_err(|e| e.to_string())?;
    let (pem, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    write_private(&key, k.serialize_pem().as_bytes(), 0o600)?;
    write_private(&pem, cert.pem().as_bytes(), 0o644)?;
    Ok(TlsFiles {
        cert: pem,
        key,
        ca: ca_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_the_secret_the_role_the_volume_and_both_nonces() {
        let (c, s) = (nonce(), nonce());
        assert_ne!(c, s);
        let p = proof("k", Role::Client, "v", &c, &s);
        assert!(verify("k", Role::Client, "v", &c, &s, &p));
        assert!(!verify("k2", Role::Client, "v", &c, &s, &p), "secret");
        assert!(!verify("k", Role::Server, "v", &c, &s, &p), "reflected");
        assert!(!verify("k", Role::Client, "w", &c, &s, &p), "volume");
        assert!(
            !verify("k", Role::Client, "v", &s, &c, &p),
            "nonces swapped"
        );
        assert!(
            !verify("k", Role::Client, "v", &c, &nonce(), &p),
            "replayed"
        );
        assert!(!verify("k", Role::Client, "v", &c, &s, &p[..31]), "short");
    }

    #[test]
    fn a_made_ca_signs_identities_that_load_and_never_is_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("dir");
        make_ca(d.path(), "gv0").expect("ca");
        assert!(
            make_ca(d.path(), "gv0")
                .expect_err("again")
                .contains("already")
        );
        let f = issue(d.path(), "brick.gv0").expect("issue");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&f.key), 0o600);
        assert_eq!(mode(&d.path().join("ca.key")), 0o600);
        ServerTls::new(&f, "client.gv0").expect("server config loads");
        ClientTls::new(&f, "brick.gv0").expect("client config loads");
        assert!(issue(d.path(), "a/b").is_err());
        let e = issue(&d.path().join("none"), "x").expect_err("no ca");
        assert!(e.contains("xlfs tls ca"), "{e}");
    }

    #[test]
    fn secret_files_must_be_private_and_not_empty() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("dir");
        let f = d.path().join("secret");
        std::fs::write(&f, "  s3cret \nignored\n").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_secret_file(&f).expect("read"), "s3cret");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = read_secret_file(&f).expect_err("readable by others");
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::write(&f, "\n").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(read_secret_file(&f).expect_err("empty").contains("empty"));
        assert!(secret_of("a", "b").is_err());
        assert_eq!(secret_of("", "").expect("none"), None);
        let g = generate_secret();
        assert_eq!(g.len(), 64);
        assert_ne!(g, generate_secret());
    }
}
