//! Stamps the build id: compiler version, target and a hash of the fop table source, so a
//! translator built by another compiler or against another fop table is refused at load time.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(&rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "rustc unknown".into());
    println!("cargo:rustc-env=XLFS_RUSTC_VERSION={version}");
    println!(
        "cargo:rustc-env=XLFS_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    // FNV-1a of the sources that define the ABI.
    let mut h: u64 = 0xcbf29ce484222325;
    for f in [
        "src/fops.rs",
        "src/abi.rs",
        "src/types.rs",
        "src/ctx.rs",
        "src/buf.rs",
        "src/services.rs",
        "src/options.rs",
        "src/dump.rs",
        "src/backing.rs",
    ] {
        println!("cargo:rerun-if-changed={f}");
        for b in std::fs::read(f).unwrap_or_default() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
    }
    println!("cargo:rustc-env=XLFS_FOP_TABLE_HASH={h:016x}");
    println!("cargo:rerun-if-changed=build.rs");
}
