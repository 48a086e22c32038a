//! Stamps the target and compiler into the build. The target is part of the ABI id (see
//! `src/abi_id.rs`, which derives the id from the type layouts themselves, not from source
//! text); the compiler version is shown to people beside it but not compared: every type
//! that crosses the boundary is `#[repr(C)]` with an abi_stable layout.
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
    println!("cargo:rerun-if-changed=build.rs");
}
