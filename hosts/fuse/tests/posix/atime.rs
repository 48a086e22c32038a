//! Access times under the mount's atime options, in the steps of xfstests generic/003:
//! relatime updates atime on the first read after a change (even when every byte comes from
//! the kernel's page cache) and not on the next; nodiratime leaves directories alone;
//! noatime updates no atime while mtime and ctime still move; a read-only mount updates
//! nothing. Reads never change ctime. The mount is cycled between steps, as the suite does.

use super::*;
use std::time::Duration;

/// (atime, mtime, ctime) of `p`, in nanoseconds.
fn times(p: &Path) -> [i128; 3] {
    let m = fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    [
        ns(m.atime(), m.atime_nsec()),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ]
}

/// Records in `errors` where `after` differs from `before` against `updated` ("YNN": atime
/// updated, mtime and ctime not).
fn compare(
    errors: &mut Vec<String>,
    updated: &str,
    before: [i128; 3],
    after: [i128; 3],
    step: &str,
) {
    for (i, (name, want)) in ["access", "modify", "change"]
        .iter()
        .zip(updated.chars())
        .enumerate()
    {
        match (before[i] == after[i], want) {
            (true, 'Y') => errors.push(format!("{name} time not updated {step}")),
            (false, 'N') => errors.push(format!("{name} time changed {step}")),
            _ => {}
        }
    }
}

/// Time enough for the kernel's clock to move on.
fn tick() {
    std::thread::sleep(Duration::from_millis(50));
}

/// Unmounts (the old mount gone before the new one starts) and mounts with `opts`.
fn cycle(m: &mut Option<Mounted>, vol: &Path, mnt: &Path, opts: &[&str]) {
    if let Some(mut old) = m.take() {
        old.signal(libc::SIGTERM);
        old.wait();
    }
    *m = Some(Mounted::start(vol, mnt, opts));
}

#[test]
fn atime_follows_the_mount_options_as_xfstests_generic_003_checks() {
    require_fuse!();
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &["--atime", "relatime"]);
    let mut m = Some(m);
    let vol = tmp.path().join("vol");
    let mut errors = Vec::new();
    let (dir1, dir2) = (mnt.join("dir1"), mnt.join("dir2"));
    let (file1, file2, file3) = (dir1.join("file1"), dir2.join("file2"), dir2.join("file3"));

    fs::create_dir(&dir1).expect("mkdir dir1");
    fs::write(&file1, b"aaa\n").expect("write file1");
    let a0 = times(&file1);
    tick();
    // The data just written is in the page cache: this read never reaches the brick.
    fs::read(&file1).expect("read file1");
    let a1 = times(&file1);
    compare(
        &mut errors,
        "YNN",
        a0,
        a1,
        "after reading file1 the first time",
    );
    tick();
    fs::read(&file1).expect("read file1");
    let a2 = times(&file1);
    compare(
        &mut errors,
        "NNN",
        a1,
        a2,
        "after reading file1 a second time",
    );

    cycle(&mut m, &vol, &mnt, &["--nodiratime"]);
    compare(
        &mut errors,
        "NNN",
        a2,
        times(&file1),
        "for file1 after the remount",
    );
    fs::create_dir(&dir2).expect("mkdir dir2");
    let d0 = times(&dir2);
    tick();
    fs::write(&file2, b"bbb\n").expect("write file2");
    let d1 = times(&dir2);
    compare(&mut errors, "NYY", d0, d1, "for dir2 after creating file2");
    let b0 = times(&file2);
    tick();
    fs::read(&file2).expect("read file2");
    compare(&mut errors, "YNN", b0, times(&file2), "after reading file2");
    compare(
        &mut errors,
        "NNN",
        d1,
        times(&dir2),
        "for dir2 after reading file2",
    );
    fs::read_dir(&dir2).expect("list dir2").for_each(drop);
    compare(
        &mut errors,
        "NNN",
        d1,
        times(&dir2),
        "for dir2 after listing it (nodiratime)",
    );

    cycle(&mut m, &vol, &mnt, &["--atime", "noatime"]);
    fs::write(&file3, b"ccc\n").expect("write file3");
    let c0 = times(&file3);
    tick();
    fs::read(&file3).expect("read file3");
    let c1 = times(&file3);
    compare(&mut errors, "NNN", c0, c1, "after reading file3 (noatime)");
    let e0 = times(&file1);
    tick();
    fs::write(&file1, b"xyz\n").expect("rewrite file1");
    let e1 = times(&file1);
    compare(
        &mut errors,
        "NYY",
        e0,
        e1,
        "after modifying file1 (noatime)",
    );
    tick();
    let renamed = dir1.join("file1_renamed");
    fs::rename(&file1, &renamed).expect("rename file1");
    compare(
        &mut errors,
        "NNY",
        e1,
        times(&renamed),
        "after renaming file1",
    );

    // strictatime: file3 was never read with atime on, so its first read updates it. (A
    // second one would only on a brick file system mounted strictatime: see the README.)
    cycle(&mut m, &vol, &mnt, &["--atime", "strictatime"]);
    fs::read(&file3).expect("read file3");
    compare(
        &mut errors,
        "YNN",
        c1,
        times(&file3),
        "after reading file3 (strictatime)",
    );

    tick();
    let (d2, c2) = (times(&dir2), times(&file3));
    cycle(
        &mut m,
        &vol,
        &mnt,
        &["--read-only", "--atime", "strictatime"],
    );
    fs::read_dir(&dir2).expect("list dir2").for_each(drop);
    fs::read(&file3).expect("read file3");
    compare(
        &mut errors,
        "NNN",
        d2,
        times(&dir2),
        "for dir2 on a read-only mount",
    );
    compare(
        &mut errors,
        "NNN",
        c2,
        times(&file3),
        "for file3 on a read-only mount",
    );
    assert!(errors.is_empty(), "{errors:#?}");
}
