//! `xlfs volume heal` on a real replica 2 volume (two xlfsd bricks on this host, a FUSE
//! mount): one brick killed with SIGKILL, writes through the mount, `heal info` lists them by
//! path on the brick that saw them, `heal` with the brick down leaves them pending (exit 8),
//! and after the brick is started again `heal` makes it equal (the mount is gone by then, so
//! nothing but the heal command can have healed it). Then a split-brain made by hand is
//! listed by `heal info split-brain` and left alone by `heal`. Needs root, /dev/fuse and the
//! binaries (`cargo build --workspace --bins`); skips otherwise, as tests/e2e.rs.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{Cleanup, brick_pid, free_port, mounted, ok, skip, xlfs_raw};

/// A test volume's places under `tmp`: the state directory, `bricks` brick directories and a
/// mount point (made), with the guard that stops, kills and unmounts what the test started.
fn scratch(tmp: &Path, vol: &str, bricks: usize) -> (PathBuf, Vec<PathBuf>, PathBuf, Cleanup) {
    let state = tmp.join("state");
    let b: Vec<PathBuf> = (0..bricks).map(|i| tmp.join(format!("b{i}"))).collect();
    let mnt = tmp.join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir mnt");
    let guard = Cleanup {
        state: state.clone(),
        volume: vol.into(),
        mountpoints: vec![mnt.clone()],
        children: Vec::new(),
    };
    (state, b, mnt, guard)
}

/// `xlfs volume create VOL B0 B1 --replica 2` on a free port range.
fn create_replica2(state: &Path, vol: &str, b: &[PathBuf]) {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let port = free_port().to_string();
    ok(&xlfs_raw(
        state,
        &[
            "volume",
            "create",
            vol,
            &s(&b[0]),
            &s(&b[1]),
            "--replica",
            "2",
            "--port",
            &port,
        ],
    ));
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// The paths `heal info --json` lists for brick `i`.
fn listed(info: &serde_json::Value, i: usize) -> Vec<String> {
    let b = info["bricks"]
        .as_array()
        .expect("bricks")
        .iter()
        .find(|b| b["index"] == i)
        .expect("brick listed");
    let mut v: Vec<String> = b["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["path"].as_str().unwrap_or("<none>").to_owned())
        .collect();
    v.sort();
    assert_eq!(b["count"].as_u64(), Some(v.len() as u64));
    v
}

fn set_raw_xattr(p: &Path, name: &str, v: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    let cn = std::ffi::CString::new(name).expect("name");
    // SAFETY: NUL-terminated strings and a buffer of `v.len()` readable bytes.
    let r = unsafe { libc::lsetxattr(cp.as_ptr(), cn.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    assert_eq!(r, 0, "setxattr {name} on {p:?}");
}

fn gfid_of(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    let mut buf = [0u8; 16];
    // SAFETY: NUL-terminated strings and a 16-byte writable buffer.
    let n = unsafe {
        libc::lgetxattr(
            cp.as_ptr(),
            c"trusted.gfid".as_ptr(),
            buf.as_mut_ptr().cast(),
            16,
        )
    };
    assert_eq!(n, 16, "trusted.gfid of {p:?}");
    let h: String = buf.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The entries of a brick's heal index (its base files, which every entry links to, left
/// out).
fn index_entries(brick: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(brick.join(".xlfs/indices/xattrop"))
        .map(|d| {
            d.map(|e| e.expect("index entry"))
                .filter(|e| !e.file_name().to_string_lossy().starts_with("base-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn heal_info_lists_what_a_killed_brick_missed_and_heal_repairs_it_after_restart() {
    if skip("heal_info_lists_what_a_killed_brick_missed_and_heal_repairs_it_after_restart") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let vol = "healtest";
    let (state, b, mnt, _guard) = scratch(tmp.path(), vol, 2);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let x = |args: &[&str]| xlfs_raw(&state, args);
    create_replica2(&state, vol, &b);
    // Nothing but the heal command may heal here.
    ok(&x(&[
        "volume",
        "set",
        vol,
        "cluster.replicate.self-heal-daemon",
        "off",
    ]));
    ok(&x(&["volume", "start", vol]));
    ok(&x(&["mount", vol, &s(&mnt)]));
    assert!(mounted(&mnt));
    std::fs::write(mnt.join("old"), b"before").expect("write old");
    std::fs::create_dir(mnt.join("d")).expect("mkdir d");
    std::fs::write(mnt.join("d/kept"), b"kept").expect("write d/kept");

    // Nothing to heal once the mount's eager holds ended (`post-op-delay`, 3 s: until then
    // the files and directories it wrote are marked dirty, and listed).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let info = loop {
        let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
        if (listed(&info, 0).is_empty() && listed(&info, 1).is_empty())
            || std::time::Instant::now() > deadline
        {
            break info;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(listed(&info, 0).is_empty() && listed(&info, 1).is_empty());

    // Brick 1 dies; the writes go to brick 0 alone, which blames brick 1.
    kill_brick(&state, vol, 1);
    std::fs::write(mnt.join("old"), b"after the kill").expect("rewrite old");
    std::fs::create_dir(mnt.join("d/new")).expect("mkdir d/new");
    std::fs::write(mnt.join("d/new/f"), b"new file").expect("write d/new/f");

    let o = x(&["volume", "heal", vol, "info"]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("Brick {}", s(&b[0])))
            && text.contains("Number of entries: 4")
            && text.contains("/d/new/f"),
        "{text}"
    );
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    assert_eq!(listed(&info, 0), ["/d", "/d/new", "/d/new/f", "/old"]);
    assert!(listed(&info, 1).is_empty());
    assert_eq!(info["bricks"][1]["online"], false);

    // With brick 1 down nothing can heal: exit 8, everything still listed.
    let o = x(&["volume", "heal", vol, "--connect-timeout", "2s"]);
    assert_eq!(o.status.code(), Some(8), "heal with a brick down");
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    assert_eq!(listed(&info, 0).len(), 4);

    // No client left that could heal on its own; brick 1 returns, still stale.
    ok(&x(&["umount", &s(&mnt)]));
    ok(&x(&["volume", "start", vol]));
    assert_eq!(
        std::fs::read(b[1].join("old")).expect("old on b1"),
        b"before"
    );
    assert!(!b[1].join("d/new").exists());

    let o = x(&["volume", "heal", vol, "--json"]);
    ok(&o);
    let report = json(&o);
    assert!(report["looked_up"].as_u64().unwrap_or(0) >= 4, "{report}");
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    assert!(listed(&info, 0).is_empty() && listed(&info, 1).is_empty());
    assert_eq!(
        std::fs::read(b[1].join("old")).expect("old on b1"),
        b"after the kill"
    );
    assert_eq!(
        std::fs::read(b[1].join("d/new/f")).expect("d/new/f on b1"),
        b"new file"
    );
    assert_eq!(
        gfid_of(&b[0].join("d/new/f")),
        gfid_of(&b[1].join("d/new/f"))
    );
    for (i, brick) in b.iter().enumerate() {
        // Entries left all zero go once they settled (storage/posix `index::SETTLE`).
        let count = || index_entries(brick).len();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while count() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(count(), 0, "index of brick {i} empty after the heal");
    }

    // A data split-brain, made by hand: each copy of /d/kept blames the other.
    let g = gfid_of(&b[0].join("d/kept"));
    for (i, blamed) in [(0usize, 1usize), (1, 0)] {
        let mut v = vec![0u8; 12];
        v[3] = 1;
        set_raw_xattr(
            &b[i].join("d/kept"),
            &format!("trusted.afr.{vol}-client-{blamed}"),
            &v,
        );
        std::fs::write(b[i].join(".xlfs/indices/xattrop").join(&g), b"").expect("entry");
    }
    let o = x(&["volume", "heal", vol, "info", "split-brain", "--json"]);
    ok(&o);
    let sb = json(&o);
    assert_eq!(listed(&sb, 0), ["/d/kept"]);
    assert_eq!(listed(&sb, 1), ["/d/kept"]);
    let o = x(&["volume", "heal", vol, "info", "split-brain"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("/d/kept - Is in split-brain (data"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Not resolved by heal: still there, exit 8.
    let o = x(&["volume", "heal", vol]);
    assert_eq!(o.status.code(), Some(8));
    let sb = json(&x(&[
        "volume",
        "heal",
        vol,
        "info",
        "split-brain",
        "--json",
    ]));
    assert_eq!(listed(&sb, 0), ["/d/kept"]);
}

#[test]
fn heal_full_crawls_and_heals_what_the_index_does_not_list() {
    if skip("heal_full_crawls_and_heals_what_the_index_does_not_list") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let vol = "healfull";
    let (state, b, mnt, _guard) = scratch(tmp.path(), vol, 2);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let x = |args: &[&str]| xlfs_raw(&state, args);
    create_replica2(&state, vol, &b);
    // Nothing but the heal command may heal here.
    ok(&x(&[
        "volume",
        "set",
        vol,
        "cluster.replicate.self-heal-daemon",
        "off",
    ]));
    ok(&x(&["volume", "start", vol]));
    ok(&x(&["mount", vol, &s(&mnt)]));
    std::fs::create_dir_all(mnt.join("a/b")).expect("mkdir");
    std::fs::write(mnt.join("a/b/f"), b"payload").expect("write");
    ok(&x(&["umount", &s(&mnt)]));
    // The blame is there but the index entries were lost (say, removed by hand): the index
    // heal sees nothing, the full crawl finds the counters by lookup.
    // Gone before `volume start` looks: a brick still dying counts as running, and would
    // not be started again.
    kill_brick(&state, vol, 1);
    let g = gfid_of(&b[1].join("a/b/f"));
    std::fs::remove_file(b[1].join("a/b/f")).expect("lose f on b1");
    std::fs::remove_file(b[1].join(".xlfs/gfid").join(&g[..2]).join(&g)).expect("and its handle");
    let mut v = vec![0u8; 12];
    v[11] = 1;
    set_raw_xattr(
        &b[0].join("a/b"),
        &format!("trusted.afr.{vol}-client-1"),
        &v,
    );
    // Lost by hand: brick 0 may still hold the entries of the mkdirs and the create (they
    // go only once they settled, storage/posix `index::SETTLE`).
    for e in index_entries(&b[0]) {
        std::fs::remove_file(e).expect("remove an index entry");
    }
    ok(&x(&["volume", "start", vol]));
    let o = x(&["volume", "heal", vol]);
    ok(&o);
    assert!(
        !b[1].join("a/b/f").exists(),
        "not indexed: the index heal skips it"
    );
    let o = x(&["volume", "heal", vol, "full", "--json"]);
    ok(&o);
    let report = json(&o);
    assert!(report["looked_up"].as_u64().unwrap_or(0) >= 3, "{report}");
    assert_eq!(
        std::fs::read(b[1].join("a/b/f")).expect("f made on b1 by the crawl"),
        b"payload"
    );
}

#[test]
fn heal_every_heals_a_brick_that_returns_while_it_runs() {
    if skip("heal_every_heals_a_brick_that_returns_while_it_runs") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let vol = "healevery";
    let (state, b, mnt, mut guard) = scratch(tmp.path(), vol, 2);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let x = |args: &[&str]| xlfs_raw(&state, args);
    create_replica2(&state, vol, &b);
    // Nothing but the heal command may heal here.
    ok(&x(&[
        "volume",
        "set",
        vol,
        "cluster.replicate.self-heal-daemon",
        "off",
    ]));
    ok(&x(&["volume", "start", vol]));
    ok(&x(&["mount", vol, &s(&mnt)]));
    kill_brick(&state, vol, 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(mnt.join("late"), b"written while b1 was down").expect("write");
    ok(&x(&["umount", &s(&mnt)]));

    let child = std::process::Command::new(common::bin("xlfs"))
        .arg("--state-dir")
        .arg(&state)
        .args(["volume", "heal", vol, "--every", "500ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn heal --every");
    guard.children.push(child);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        !b[1].join("late").exists(),
        "brick 1 is down: nothing healed"
    );
    ok(&x(&["volume", "start", vol]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read(b[1].join("late")).ok().as_deref()
        != Some(&b"written while b1 was down"[..])
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read(b[1].join("late")).expect("late healed onto b1 by the loop"),
        b"written while b1 was down"
    );
    // The root's entry lane (`late` was made in it) and the file heal too: both indexes empty.
    let empty = |i: usize| index_entries(&b[i]).is_empty();
    while !(empty(0) && empty(1)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(empty(0) && empty(1), "indexes empty after the loop healed");
    let child = &mut guard.children[0];
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the loop keeps running"
    );
}

/// Kills brick `i`'s xlfsd with SIGKILL and waits for it to be gone.
fn kill_brick(state: &Path, vol: &str, i: u64) {
    let pid = brick_pid(state, vol, i);
    // SAFETY: kill(2) of the brick process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `replica 3 arbiter 1` over three xlfsd bricks: the arbiter brick holds every file at its
/// size with no data in it; a data brick and then the arbiter killed with SIGKILL in the
/// middle of a stream of fsynced writes stop nothing; after each restart `heal` makes the
/// bricks agree (data bricks byte for byte and GFID for GFID, the arbiter in names, GFIDs,
/// sizes and modes) and leaves nothing pending.
#[test]
fn replica_3_arbiter_1_stores_two_copies_and_heals_after_kills() {
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::MetadataExt as _;
    if skip("replica_3_arbiter_1_stores_two_copies_and_heals_after_kills") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let vol = "arbtest";
    let (state, b, mnt, _guard) = scratch(tmp.path(), vol, 3);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let x = |args: &[&str]| xlfs_raw(&state, args);
    let port = free_port().to_string();
    let o = x(&[
        "volume",
        "create",
        vol,
        &s(&b[0]),
        &s(&b[1]),
        &s(&b[2]),
        "--replica",
        "3",
        "--arbiter",
        "1",
        "--port",
        &port,
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("replica 3 arbiter 1") && text.contains("(arbiter)"),
        "{text}"
    );
    let info = json(&x(&["volume", "info", vol, "--json"]));
    assert_eq!(info["arbiter"], 1, "{info}");
    ok(&x(&["volume", "start", vol]));
    ok(&x(&["mount", vol, &s(&mnt)]));
    assert!(mounted(&mnt));
    std::fs::create_dir(mnt.join("d")).expect("mkdir d");

    let content = |k: usize, round: u8| -> Vec<u8> {
        (0..(k * 4099 + 100))
            .map(|j| (j as u8).wrapping_mul(31).wrapping_add(round))
            .collect()
    };
    let put = |k: usize, round: u8| {
        let mut f = std::fs::File::create(mnt.join(format!("d/f{k}")))
            .unwrap_or_else(|e| panic!("create d/f{k} (round {round}): {e}"));
        f.write_all(&content(k, round)).expect("write");
        f.sync_all().expect("fsync");
    };
    // Every file's last fsynced content.
    let mut want: Vec<u8> = vec![0; 30];
    for k in 0..10 {
        put(k, 0);
    }
    // A data brick dies in the middle of the stream; the writes go on.
    kill_brick(&state, vol, 0);
    for (k, w) in want.iter_mut().enumerate().take(20).skip(5) {
        put(k, 1);
        *w = 1;
    }
    ok(&x(&["volume", "start", vol]));
    // Let the mount reconnect to brick 0 (protocol/client's backoff is at most 3 s), and
    // heal what it missed: a file only one brick up holds cannot be written without quorum
    // (as on any replica 3), so the next brick may die only once brick 0 caught up.
    std::thread::sleep(std::time::Duration::from_secs(4));
    ok(&x(&["volume", "heal", vol]));
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    for i in 0..3 {
        assert!(
            listed(&info, i).is_empty(),
            "brick {i} after the first heal: {info}"
        );
    }
    // The arbiter dies next; the two data bricks take the writes.
    kill_brick(&state, vol, 2);
    for (k, w) in want.iter_mut().enumerate().take(30).skip(15) {
        put(k, 2);
        *w = 2;
    }
    ok(&x(&["umount", &s(&mnt)]));
    ok(&x(&["volume", "start", vol]));
    let o = x(&["volume", "heal", vol, "--json"]);
    ok(&o);
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    for i in 0..3 {
        assert!(listed(&info, i).is_empty(), "brick {i}: {info}");
    }
    for (k, round) in want.iter().enumerate() {
        let name = format!("d/f{k}");
        let data = content(k, *round);
        for (i, brick) in b.iter().enumerate() {
            let p = brick.join(&name);
            let m = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{name} on brick {i}: {e}"));
            assert_eq!(m.len(), data.len() as u64, "{name} size on brick {i}");
            assert_eq!(m.mode() & 0o7777, 0o644, "{name} mode on brick {i}");
            assert_eq!(
                gfid_of(&p),
                gfid_of(&b[0].join(&name)),
                "{name} GFID on brick {i}"
            );
            if i == 2 {
                // No data extent anywhere in the file (its blocks, if any, hold xattrs).
                let f = std::fs::File::open(&p).expect("open on the arbiter");
                // SAFETY: lseek(2) on a descriptor this test owns.
                let at = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_DATA) };
                let err = std::io::Error::last_os_error().raw_os_error();
                assert!(
                    at == -1 && err == Some(libc::ENXIO),
                    "{name}: data on the arbiter at {at} ({err:?}), {} blocks",
                    m.blocks()
                );
            } else {
                assert_eq!(
                    std::fs::read(&p).expect("read"),
                    data,
                    "{name} content on brick {i}"
                );
            }
        }
    }
    // Mounted again, every file reads back its last fsynced content.
    ok(&x(&["mount", vol, &s(&mnt)]));
    for (k, round) in want.iter().enumerate() {
        assert_eq!(
            std::fs::read(mnt.join(format!("d/f{k}"))).expect("read"),
            content(k, *round),
            "d/f{k} through the mount"
        );
    }
}

/// The self-heal daemon `volume start` runs for a replicated volume heals a brick that
/// missed writes once it is back, with no client left that could have healed it; `volume
/// status` shows it, a second `start` keeps it, `self-heal-daemon off` ends it, and `volume
/// stop` ends the one the next start runs.
#[test]
fn the_self_heal_daemon_heals_a_returning_brick_with_no_client_left() {
    if skip("the_self_heal_daemon_heals_a_returning_brick_with_no_client_left") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let vol = "shdtest";
    let (state, b, mnt, _guard) = scratch(tmp.path(), vol, 2);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let x = |args: &[&str]| xlfs_raw(&state, args);
    create_replica2(&state, vol, &b);
    let o = x(&["volume", "start", vol]);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("self-heal daemon"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let st = json(&x(&["volume", "status", vol, "--json"]));
    let pid = st["shd"]["pid"].as_u64().expect("shd pid") as libc::pid_t;
    assert_eq!(st["shd"]["running"], true, "{st}");
    // A second start keeps the same daemon.
    ok(&x(&["volume", "start", vol]));
    let st = json(&x(&["volume", "status", vol, "--json"]));
    assert_eq!(st["shd"]["pid"].as_u64(), Some(pid as u64), "{st}");

    ok(&x(&["mount", vol, &s(&mnt)]));
    std::fs::write(mnt.join("old"), b"before").expect("write");
    kill_brick(&state, vol, 1);
    std::fs::write(mnt.join("old"), b"after the kill").expect("rewrite");
    std::fs::create_dir(mnt.join("d")).expect("mkdir");
    std::fs::write(mnt.join("d/new"), b"new file").expect("write new");
    // volume status counts the entries brick 0's index holds for brick 1.
    let st = json(&x(&["volume", "status", vol, "--json"]));
    let pending0 = st["heal_index"][0]["entries"].as_u64().unwrap_or(0);
    assert!(pending0 >= 3, "heal index counts in status: {st}");
    // No client is left to heal on lookup; brick 1 comes back stale.
    ok(&x(&["umount", &s(&mnt)]));
    ok(&x(&["volume", "start", vol]));
    let healed = || {
        std::fs::read(b[1].join("old")).is_ok_and(|d| d == b"after the kill")
            && std::fs::read(b[1].join("d/new")).is_ok_and(|d| d == b"new file")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !healed() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(state.join(format!("volumes/{vol}/log/shd.log")))
        .unwrap_or_default();
    assert!(
        healed(),
        "brick 1 not healed by the daemon; its log:\n{log}"
    );
    assert_eq!(gfid_of(&b[0].join("d/new")), gfid_of(&b[1].join("d/new")));
    let info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut info = info;
    while !(listed(&info, 0).is_empty() && listed(&info, 1).is_empty())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
        info = json(&x(&["volume", "heal", vol, "info", "--json"]));
    }
    assert!(
        listed(&info, 0).is_empty() && listed(&info, 1).is_empty(),
        "{info}"
    );
    // The index entries settle and go; status counts none then.
    let zero = |st: &serde_json::Value| {
        st["heal_index"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|h| h["entries"] == 0))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut st = json(&x(&["volume", "status", vol, "--json"]));
    while !zero(&st) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        st = json(&x(&["volume", "status", vol, "--json"]));
    }
    assert!(zero(&st), "{st}");
    // Switched off, it ends by itself; switched on again, the next start runs a new one.
    let daemon_alive = |pid: libc::pid_t| {
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
            .contains("--daemon")
    };
    ok(&x(&[
        "volume",
        "set",
        vol,
        "cluster.replicate.self-heal-daemon",
        "off",
    ]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while daemon_alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        !daemon_alive(pid),
        "the daemon runs on with self-heal-daemon off"
    );
    let st = json(&x(&["volume", "status", vol, "--json"]));
    assert!(st["shd"].is_null(), "{st}");
    ok(&x(&[
        "volume",
        "set",
        vol,
        "cluster.replicate.self-heal-daemon",
        "on",
    ]));
    ok(&x(&["volume", "start", vol]));
    let st = json(&x(&["volume", "status", vol, "--json"]));
    assert_eq!(st["shd"]["running"], true, "{st}");
    let pid = st["shd"]["pid"].as_u64().expect("shd pid") as libc::pid_t;
    // Stop ends it.
    let o = x(&["volume", "stop", vol]);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("stopped the self-heal daemon"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!daemon_alive(pid), "the daemon outlived volume stop");
}
