//! `xlfs tls ca` and `xlfs tls issue`: the files, their modes, a CA never replaced, and
//! certificates openssl verifies against the CA.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::bin;

fn xlfs(args: &[&str]) -> (bool, String) {
    let out = Command::new(bin("xlfs"))
        .args(args)
        .output()
        .expect("run xlfs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_ca_and_its_certificates_with_private_keys() {
    let d = tempfile::tempdir().expect("dir");
    let ca = d.path().join("gv0");
    let ca_s = ca.to_str().expect("utf-8");
    let (ok, out) = xlfs(&["tls", "ca", ca_s]);
    assert!(ok, "{out}");
    let (ok, out) = xlfs(&["tls", "issue", ca_s, "brick1.gv0", "client.gv0"]);
    assert!(ok, "{out}");
    let mode = |n: &str| {
        std::fs::metadata(ca.join(n))
            .unwrap_or_else(|e| panic!("{n}: {e}"))
            .permissions()
            .mode()
            & 0o777
    };
    for key in ["ca.key", "brick1.gv0.key", "client.gv0.key"] {
        assert_eq!(mode(key), 0o600, "{key}");
    }
    assert_eq!(mode("ca.pem"), 0o644);
    // Replacing the CA would orphan every certificate it signed.
    let (ok, out) = xlfs(&["tls", "ca", ca_s]);
    assert!(!ok && out.contains("already holds a CA"), "{out}");
    let (ok, out) = xlfs(&["tls", "issue", ca_s, "no/slash"]);
    assert!(!ok && out.contains("not a certificate name"), "{out}");
    let (ok, out) = xlfs(&[
        "tls",
        "issue",
        d.path().join("nope").to_str().expect("s"),
        "x",
    ]);
    assert!(!ok && out.contains("xlfs tls ca"), "{out}");
    // Where openssl is installed, it agrees.
    if let Ok(v) = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(ca.join("ca.pem"))
        .arg(ca.join("brick1.gv0.pem"))
        .arg(ca.join("client.gv0.pem"))
        .output()
    {
        let text = String::from_utf8_lossy(&v.stdout);
        assert!(
            v.status.success() && text.matches(": OK").count() == 2,
            "{text}"
        );
    }
}
