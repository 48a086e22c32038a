//! Read-only remount (generic/294): `mount -o remount,ro` runs the `mount.fuse.xlfs` helper,
//! which must change the existing mount, not start another.

use super::*;

/// A mount made through the helper (its daemon runs detached), unmounted when dropped; the
/// daemon then exits by itself.
struct HelperMount(std::path::PathBuf);

impl Drop for HelperMount {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

fn helper(bin: &Path, args: &[&Path], opts: &str) -> Output {
    Command::new(bin)
        .args(args)
        .args(["-o", opts])
        .output()
        .expect("run the helper")
}

fn mount_opts(mnt: &Path) -> String {
    let info = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let want = mnt.to_str().expect("utf-8 path");
    info.lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(want))
        .map(|l| l.to_owned())
        .expect("mount listed")
}

/// Mounted through the helper, remounted read-only (writes and creates refused with EROFS,
/// the mount's nodev/nosuid kept), then read-write again.
#[test]
fn the_mount_helper_remounts_read_only_and_back() {
    require_fuse!();
    let tmp = tempdir();
    chmod(tmp.path(), 0o755);
    let (vol, mnt) = (tmp.path().join("vol"), tmp.path().join("mnt"));
    fs::create_dir(&vol).expect("mkdir vol");
    fs::create_dir(&mnt).expect("mkdir mnt");
    let bin = tmp.path().join("mount.fuse.xlfs");
    std::os::unix::fs::symlink(BIN, &bin).expect("link the helper");
    let log = tmp.path().join("daemon.log");
    let opts = format!("rw,log-file={}", log.display());
    let out = helper(&bin, &[&vol, &mnt], &opts);
    let _guard = HelperMount(mnt.clone());
    assert!(out.status.success(), "mount: {out:?}");
    assert!(is_mounted(&mnt), "listed once the helper returned");
    fs::write(mnt.join("f"), b"before").expect("write while rw");

    let out = helper(&bin, &[&vol, &mnt], "remount,ro");
    assert!(out.status.success(), "remount,ro: {out:?}");
    let info = mount_opts(&mnt);
    assert!(info.contains(" ro,"), "{info}");
    assert!(info.contains("nodev") && info.contains("nosuid"), "{info}");
    let e = fs::write(mnt.join("f"), b"after").expect_err("write while ro");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = fs::write(mnt.join("g"), b"new").expect_err("create while ro");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(fs::read(mnt.join("f")).expect("read while ro"), b"before");

    let out = helper(&bin, &[&vol, &mnt], "remount,rw");
    assert!(out.status.success(), "remount,rw: {out:?}");
    fs::write(mnt.join("f"), b"again").expect("write after remount,rw");
    assert_eq!(fs::read(mnt.join("f")).expect("read"), b"again");

    // A helper mount that cannot be made says why (what the daemon logged before it exited).
    let out = helper(&bin, &[&vol, &mnt], &opts);
    assert_eq!(out.status.code(), Some(32), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("busy"),
        "{out:?}"
    );
    let _ = fs::read_to_string(&log);
}
