//! `mount -t xlfs` and an /etc/fstab line, through mount(8) itself: util-linux's mount finds
//! the helper `/sbin/mount.xlfs` (this build's xlfs-mount, linked there for the test when no
//! other is installed) and calls it as it calls every `mount.TYPE`. The fstab line is read
//! from another file with `mount --fstab FILE`, so the machine's own /etc/fstab is not
//! touched. Needs root, /dev/fuse and util-linux's mount; skips otherwise (fails under
//! XLFS_E2E_REQUIRE=1).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{Cleanup, bin, free_port, mounted, ok, scratch, skip};

const HELPER: &str = "/sbin/mount.xlfs";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `/sbin/mount.xlfs` pointing at this build's xlfs-mount while the test runs; removed after
/// if the test made it. An existing helper that is not this build's is left alone and the
/// test is skipped (it would test another build).
struct Helper {
    made: bool,
}

impl Helper {
    fn install() -> Option<Helper> {
        let ours = bin("xlfs-mount");
        match std::fs::read_link(HELPER) {
            Ok(target) if target == ours => return Some(Helper { made: false }),
            Ok(_) => {}
            Err(_) if !Path::new(HELPER).exists() => {
                std::os::unix::fs::symlink(&ours, HELPER).expect("link /sbin/mount.xlfs");
                return Some(Helper { made: true });
            }
            Err(_) => {}
        }
        let why = format!("{HELPER} is another build's (an installed package?)");
        if std::env::var_os("XLFS_E2E_REQUIRE").is_some_and(|v| v == "1") {
            panic!("cannot run: {why}");
        }
        eprintln!("SKIPPED: {why}");
        None
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_file(HELPER);
        }
    }
}

fn umount(mp: &Path) {
    let o = Command::new("umount").arg(mp).output().expect("umount");
    assert!(o.status.success(), "umount {}: {}", mp.display(), text(&o));
}

#[test]
fn mount_t_xlfs_and_an_fstab_line_mount_through_the_helper() {
    if skip("mount_t_xlfs_and_an_fstab_line_mount_through_the_helper") {
        return;
    }
    let Some(_helper) = Helper::install() else {
        return;
    };
    let s = scratch();
    let mnt2: PathBuf = s.tmp.path().join("mnt2");
    std::fs::create_dir(&mnt2).expect("mkdir");
    let _guard = Cleanup {
        state: s.state.clone(),
        volume: "mh".into(),
        mountpoints: vec![s.mnt.clone(), mnt2.clone()],
        children: Vec::new(),
    };
    let st = s.state.to_string_lossy().into_owned();
    let port = free_port().to_string();
    let brick = s.brick.to_string_lossy().into_owned();
    let xlfs = |args: &[&str]| {
        Command::new(bin("xlfs"))
            .arg("--state-dir")
            .arg(&st)
            .args(args)
            .output()
            .expect("xlfs")
    };
    ok(&xlfs(&["volume", "create", "mh", &brick, "--port", &port]));
    ok(&xlfs(&["volume", "start", "mh"]));
    let secret = s.state.join("volumes/mh/secret");
    let source = format!("127.0.0.1:{port}:/mh");

    // mount -t xlfs SOURCE DIR -o OPTIONS
    let o = Command::new("mount")
        .args(["-t", "xlfs", &source])
        .arg(&s.mnt)
        .arg("-o")
        .arg(format!("secret-file={}", secret.display()))
        .output()
        .expect("mount");
    assert!(o.status.success(), "mount -t xlfs: {}", text(&o));
    assert!(mounted(&s.mnt));
    std::fs::write(s.mnt.join("f"), b"through mount -t xlfs").expect("write");
    // Its log goes to a file named after the mount point, which outlives mount(8). It once
    // went to a pipe that closed when mount(8) returned: the daemon's next log line failed
    // with EPIPE and it aborted, leaving "Transport endpoint is not connected".
    let log_of = |mp: &Path| {
        Path::new("/var/log/xlfs").join(format!(
            "{}.log",
            mp.to_string_lossy().trim_matches('/').replace('/', "-")
        ))
    };
    struct Remove(Vec<PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let log = log_of(&s.mnt);
    let _logs = Remove(vec![log.clone(), log_of(&mnt2)]);
    let before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    ok(&xlfs(&[
        "volume",
        "set",
        "mh",
        "performance.write-behind.window-size",
        "2MiB",
    ]));
    // The mount logs taking the change (its volfile watch sees it within a second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing logged to {} after a volume set",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        std::fs::read(s.mnt.join("f")).expect("the mount works after logging"),
        b"through mount -t xlfs"
    );

    // An fstab line, as the docs give it (_netdev: mounted once the network is up).
    let fstab = s.tmp.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# xlfs\n{source}  {}  xlfs  defaults,_netdev,secret-file={}  0 0\n",
            mnt2.display(),
            secret.display()
        ),
    )
    .expect("fstab");
    let o = Command::new("mount")
        .arg("--fstab")
        .arg(&fstab)
        .arg(&mnt2)
        .output()
        .expect("mount --fstab");
    assert!(o.status.success(), "mount of the fstab line: {}", text(&o));
    assert!(mounted(&mnt2));
    assert_eq!(
        std::fs::read(mnt2.join("f")).expect("read through the fstab mount"),
        b"through mount -t xlfs"
    );
    // mount(8) shows it as the type it was asked for.
    let o = Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE,SOURCE"])
        .arg(&mnt2)
        .output()
        .expect("findmnt");
    let shown = text(&o);
    assert!(shown.contains("xlfs"), "{shown}");

    // `mount -a -O _netdev` (what the network-online boot step runs) finds the line mounted
    // and leaves it; both unmount with umount(8).
    let o = Command::new("mount")
        .args(["-a", "-O", "_netdev", "--fstab"])
        .arg(&fstab)
        .output()
        .expect("mount -a");
    assert!(o.status.success(), "mount -a -O _netdev: {}", text(&o));
    umount(&mnt2);
    umount(&s.mnt);
    assert!(!mounted(&mnt2) && !mounted(&s.mnt));
    ok(&xlfs(&["volume", "stop", "mh"]));
}
