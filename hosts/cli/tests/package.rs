//! The Debian package (`packaging/deb/build.sh`), built from this build's binaries
//! (`--no-build`, the profile the tests run with): its control fields and contents, then the
//! package unpacked into a scratch root (`dpkg -x`) and run from there — `xlfs translator
//! list` finds the plugins in `usr/lib/xlfs/xlators` (where an installed package puts them),
//! a volume made, started and mounted with the packaged binaries stores and reads a file, and
//! the packaged mount helper `sbin/mount.xlfs` mounts it as mount(8) would call it. Needs
//! root, /dev/fuse, the binaries and dpkg-deb; skips otherwise (fails under
//! XLFS_E2E_REQUIRE=1).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{Cleanup, bin, free_port, mounted, ok, skip};

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_debian_package_holds_everything_and_runs_from_where_it_installs() {
    if skip("the_debian_package_holds_everything_and_runs_from_where_it_installs") {
        return;
    }
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        if std::env::var_os("XLFS_E2E_REQUIRE").is_some_and(|v| v == "1") {
            panic!("dpkg-deb is missing");
        }
        eprintln!("SKIPPED: no dpkg-deb");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // target/<profile>/xlfs: the profile and the target directory this build used.
    let dir = bin("xlfs").parent().expect("bin dir").to_path_buf();
    let profile = dir
        .file_name()
        .expect("profile")
        .to_string_lossy()
        .into_owned();
    let target = dir.parent().expect("target dir").to_path_buf();
    let tmp = tempfile::tempdir().expect("tempdir");
    let o = Command::new("bash")
        .arg(repo.join("packaging/deb/build.sh"))
        .args(["--no-build", "--profile", &profile, "--out"])
        .arg(tmp.path())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run build.sh");
    assert!(o.status.success(), "build.sh failed: {}", text(&o));
    let deb = PathBuf::from(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .expect("path")
            .trim(),
    );
    assert!(deb.is_file(), "no package at {}", deb.display());

    let field = |f: &str| {
        let o = Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb)
            .arg(f)
            .output()
            .expect("dpkg-deb -f");
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    };
    assert_eq!(field("Package"), "xlfs");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    // The glibc the binaries were linked against, at least (they do not run on an older one).
    let depends = field("Depends");
    assert!(
        depends.starts_with("libc6 (>= 2.") && depends.contains("libgcc-s1"),
        "{depends}"
    );
    let o = Command::new("dpkg-deb")
        .arg("-c")
        .arg(&deb)
        .output()
        .expect("dpkg-deb -c");
    let contents = String::from_utf8_lossy(&o.stdout).into_owned();
    for want in [
        "./usr/bin/xlfs\n",
        "./usr/bin/xlfsd\n",
        "./usr/bin/xlfs-mount\n",
        "./usr/bin/xlfs-nfsd\n",
        "./usr/bin/xlfs-rebalance\n",
        "./usr/bin/xlfs-mgmtd\n",
        "./etc/default/xlfs-mgmtd\n",
        "./lib/systemd/system/xlfs-mgmtd.service\n",
        "./usr/lib/xlfs/xlators/libxlfs_afr.so\n",
        "./usr/lib/xlfs/xlators/libxlfs_arbiter.so\n",
        "./usr/lib/xlfs/xlators/libxlfs_dht.so\n",
        // Absolute: /sbin is a link to usr/sbin on merged-/usr systems.
        "./sbin/mount.xlfs -> /usr/bin/xlfs-mount\n",
        "./sbin/mount.fuse.xlfs -> /usr/bin/xlfs-mount\n",
        "./lib/systemd/system/xlfs-volume@.service\n",
        "./usr/share/doc/xlfs/README.md\n",
    ] {
        assert!(
            contents.contains(want),
            "{want:?} not in the package:\n{contents}"
        );
    }
    assert!(
        !contents.contains("libxlfs_abi_"),
        "test plugins packaged:\n{contents}"
    );

    // Unpacked as dpkg would install it, under a scratch root.
    let root = tmp.path().join("root");
    let o = Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .output()
        .expect("dpkg -x");
    assert!(o.status.success(), "{}", text(&o));
    let xlfs = root.join("usr/bin/xlfs");
    let run = |args: &[&str]| {
        Command::new(&xlfs)
            .env_remove("XLFS_XLATOR_PATH")
            .args(args)
            .output()
            .expect("run the packaged xlfs")
    };
    let o = run(&["translator", "list"]);
    ok(&o);
    for t in [
        "cluster/replicate",
        "cluster/distribute",
        "features/arbiter",
        "performance/write-behind",
    ] {
        assert!(
            text(&o).contains(t),
            "{t} not found from the package's plugin directory:\n{}",
            text(&o)
        );
    }

    let state = tmp.path().join("state");
    let (brick, mnt, mnt2) = (
        tmp.path().join("b"),
        tmp.path().join("m"),
        tmp.path().join("m2"),
    );
    for m in [&mnt, &mnt2] {
        std::fs::create_dir(m).expect("mkdir");
    }
    let _guard = Cleanup {
        state: state.clone(),
        volume: "pkg".into(),
        mountpoints: vec![mnt.clone(), mnt2.clone()],
        children: Vec::new(),
    };
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let st = s(&state);
    let port = free_port().to_string();
    ok(&run(&[
        "--state-dir",
        &st,
        "volume",
        "create",
        "pkg",
        &s(&brick),
        "--port",
        &port,
    ]));
    ok(&run(&["--state-dir", &st, "volume", "start", "pkg"]));
    ok(&run(&["--state-dir", &st, "mount", "pkg", &s(&mnt)]));
    assert!(mounted(&mnt));
    std::fs::write(mnt.join("hello"), b"from the package").expect("write");
    assert_eq!(
        std::fs::read(brick.join("hello")).expect("on the brick"),
        b"from the package"
    );

    // The mount helper, called as mount(8) calls /sbin/mount.xlfs for `mount -t xlfs` (the
    // link's absolute target is outside the scratch root: the binary it names, by that name).
    let secret = state.join("volumes/pkg/secret");
    let o = Command::new(root.join("usr/bin/xlfs-mount"))
        .arg0("/sbin/mount.xlfs")
        .arg(format!("127.0.0.1:{port}:/pkg"))
        .arg(&mnt2)
        .args([
            "-o",
            &format!(
                "_netdev,secret-file={},log-file={}",
                s(&secret),
                s(&tmp.path().join("m2.log"))
            ),
        ])
        .output()
        .expect("run mount.xlfs");
    assert!(o.status.success(), "mount.xlfs: {}", text(&o));
    assert!(mounted(&mnt2));
    assert_eq!(
        std::fs::read(mnt2.join("hello")).expect("read"),
        b"from the package"
    );
    let o = Command::new("umount").arg(&mnt2).output().expect("umount");
    assert!(o.status.success(), "{}", text(&o));
    ok(&run(&["--state-dir", &st, "umount", &s(&mnt)]));
    ok(&run(&["--state-dir", &st, "volume", "stop", "pkg"]));
}
