//! POSIX ACLs through the mount (generic/099, 319): FUSE_POSIX_ACL makes the kernel honour
//! them in its own permission checks and pass `system.posix_acl_*` through; FUSE_DONT_MASK
//! leaves the umask to the brick, where a default ACL replaces it.

use super::*;

fn run(cmd: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run");
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn acl_tools_missing() -> Option<String> {
    let found = Command::new("setfacl").arg("--version").output();
    match found {
        Ok(o) if o.status.success() => None,
        _ => Some("setfacl is missing (package `acl`, ci/conformance/install.sh)".into()),
    }
}

/// An access ACL entry is what lets another user read; chmod narrows it through the mask.
/// Whether the kernel checks permissions (FUSE_POSIX_ACL) or leaves them to the brick.
#[test]
fn an_access_acl_is_honoured_and_chmod_sets_its_mask() {
    require_fuse!();
    skip_if!(acl_tools_missing());
    for extra in [&[][..], &["--no-default-permissions"]] {
        access_acl(extra);
    }
}

fn access_acl(extra: &[&str]) {
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, extra);
    let f = mnt.join("f");
    fs::write(&f, b"secret").expect("write");
    chmod(&f, 0o600);
    let out = run_as(100, 100, &[], sh("cat f", &mnt));
    assert!(!out.status.success(), "read without the ACL: {out:?}");

    run("setfacl", &["-m", "u:100:r", "f"], &mnt);
    let acl = run("getfacl", &["-cn", "f"], &mnt);
    assert!(acl.contains("user:100:r--"), "{acl}");
    assert!(acl.contains("mask::r--"), "{acl}");
    // setfacl set the mode's group bits to the mask.
    assert_eq!(
        fs::metadata(&f).expect("stat").mode() & 0o777,
        0o640,
        "{extra:?}"
    );
    let out = run_as(100, 100, &[], sh("cat f", &mnt));
    assert!(
        out.status.success(),
        "read granted by the ACL: {out:?}\n{}",
        m.log_text()
    );
    assert_eq!(out.stdout, b"secret");
    // Another user the ACL does not name is still refused.
    let out = run_as(101, 101, &[], sh("cat f", &mnt));
    assert!(
        !out.status.success(),
        "read by a user the ACL omits: {out:?}"
    );

    // chmod's group bits are the mask: 0600 masks the entry out.
    chmod(&f, 0o600);
    let acl = run("getfacl", &["-cn", "f"], &mnt);
    assert!(acl.contains("mask::---"), "{acl}");
    let out = run_as(100, 100, &[], sh("cat f", &mnt));
    assert!(!out.status.success(), "read with the entry masked: {out:?}");
    // Removing the ACL leaves the mode.
    run("setfacl", &["-b", "f"], &mnt);
    let acl = run("getfacl", &["-cn", "f"], &mnt);
    assert!(!acl.contains("user:100"), "{extra:?}: {acl}");
    drop(m);
}

/// A directory's default ACL is inherited by what is created in it, and replaces the umask;
/// without one the umask applies.
#[test]
fn a_default_acl_is_inherited_and_replaces_the_umask() {
    require_fuse!();
    skip_if!(acl_tools_missing());
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    fs::create_dir(mnt.join("d")).expect("mkdir");
    fs::create_dir(mnt.join("plain")).expect("mkdir");
    run(
        "setfacl",
        &["-d", "-m", "u::rwx,g::rwx,o::rwx,u:100:rx", "d"],
        &mnt,
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 022 && touch d/f plain/f && mkdir d/sub plain/sub")
        .current_dir(&mnt)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{out:?}");
    let mode = |p: &str| fs::metadata(mnt.join(p)).expect("stat").mode() & 0o7777;
    // touch asks 0666, mkdir 0777: the default ACL's entries, not the umask, narrow them.
    assert_eq!(mode("d/f"), 0o666, "file under a default ACL");
    assert_eq!(mode("d/sub"), 0o777, "directory under a default ACL");
    assert_eq!(mode("plain/f"), 0o644, "file under the umask");
    assert_eq!(mode("plain/sub"), 0o755, "directory under the umask");
    let acl = run("getfacl", &["-cn", "d/f"], &mnt);
    assert!(acl.contains("user:100:r-x"), "inherited entry: {acl}");
    let acl = run("getfacl", &["-cn", "d/sub"], &mnt);
    assert!(
        acl.contains("default:user:100:r-x"),
        "inherited default: {acl}"
    );
    // The inherited entry is honoured.
    fs::write(mnt.join("d/f"), b"shared").expect("write");
    let out = run_as(100, 100, &[], sh("cat d/f", &mnt));
    assert!(
        out.status.success(),
        "read through the inherited ACL: {out:?}"
    );
    drop(m);
}
