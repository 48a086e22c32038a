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
