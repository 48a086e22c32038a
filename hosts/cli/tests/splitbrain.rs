//! `xlfs volume heal VOL split-brain ...` on a real replica 2 volume (two xlfsd bricks on this
//! host, a FUSE mount). Split-brain is made the way it happens: brick 1 killed, writes; brick
//! 1 back and brick 0 killed before anything healed, other writes; brick 0 back. Each copy
//! then accuses the other, `heal info split-brain` lists the files and reads through the
//! mount fail with EIO. The commands resolve them by policy, the bricks end equal with zero
//! counters and the mount reads the chosen version. Needs root, /dev/fuse and the binaries
//! (`cargo build --workspace --bins`); skips otherwise, as tests/heal.rs.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{Cleanup, brick_pid, free_port, mounted, ok, skip, xlfs_raw};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn kill_brick(state: &Path, vol: &str, i: u64) {
    let pid = brick_pid(state, vol, i);
    // SAFETY: kill(2) of the brick process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The mount's client notices the connection is gone.
    std::thread::sleep(Duration::from_millis(500));
}

fn raw_xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    let cn = std::ffi::CString::new(name).expect("name");
    let mut buf = [0u8; 64];
    // SAFETY: NUL-terminated strings and a 64-byte writable buffer.
    let n = unsafe { libc::lgetxattr(cp.as_ptr(), cn.as_ptr(), buf.as_mut_ptr().cast(), 64) };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

/// Every pending counter of both keys on both copies of `name` is zero (or absent).
fn counters_zero(b: &[PathBuf], vol: &str, name: &str) -> bool {
    b.iter().all(|brick| {
        (0..2).all(|k| {
            raw_xattr(&brick.join(name), &format!("trusted.afr.{vol}-client-{k}"))
                .is_none_or(|v| v.iter().all(|x| *x == 0))
        })
    })
}

/// Same mtime on both copies (for the tie case).
fn set_mtime(p: &Path, secs: i64) {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    let ts = [t, t];
    // SAFETY: a NUL-terminated path and two timespecs.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, cp.as_ptr(), ts.as_ptr(), 0) };
    assert_eq!(r, 0, "utimensat {p:?}");
}

struct Vol {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    b: Vec<PathBuf>,
    mnt: PathBuf,
    name: &'static str,
    _guard: Cleanup,
}

impl Vol {
    fn x(&self, args: &[&str]) -> Output {
        xlfs_raw(&self.state, args)
    }

    fn heal(&self, words: &[&str]) -> Output {
        let mut a = vec!["volume", "heal", self.name];
        a.extend_from_slice(words);
        self.x(&a)
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A started replica 2 volume, mounted.
fn volume(name: &'static str) -> Vol {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let b: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("b{i}"))).collect();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir mnt");
    let guard = Cleanup {
        state: state.clone(),
        volume: name.into(),
        mountpoints: vec![mnt.clone()],
        children: Vec::new(),
    };
    let v = Vol {
        _tmp: tmp,
        state,
        b,
        mnt,
        name,
        _guard: guard,
    };
    let port = free_port().to_string();
    ok(&v.x(&[
        "volume",
        "create",
        name,
        &s(&v.b[0]),
        &s(&v.b[1]),
        "--replica",
        "2",
        "--port",
        &port,
    ]));
    // The split-brains are made by letting each brick miss what the other took: a
    // self-heal daemon would heal the first brick before the second goes.
    ok(&v.x(&[
        "volume",
        "set",
        name,
        "cluster.replicate.self-heal-daemon",
        "off",
    ]));
    ok(&v.x(&["volume", "start", name]));
    ok(&v.x(&["mount", name, &s(&v.mnt)]));
    assert!(mounted(&v.mnt));
    v
}

/// Writes `before` to every file, then `while_b1_down` with brick 1 killed, then (brick 1
/// back, brick 0 killed, nothing read in between) `while_b0_down`; then brick 0 returns.
fn make_split_brain(
    v: &Vol,
    before: &[(&str, Vec<u8>)],
    while_b1_down: &[(&str, Vec<u8>)],
    while_b0_down: &[(&str, Vec<u8>)],
) {
    for (n, d) in before {
        std::fs::write(v.mnt.join(n), d).expect("write before");
    }
    kill_brick(&v.state, v.name, 1);
    for (n, d) in while_b1_down {
        std::fs::write(v.mnt.join(n), d).expect("write with brick 1 down");
    }
    ok(&v.x(&["volume", "start", v.name]));
    // Let the mount reconnect to brick 1 before brick 0 goes.
    std::thread::sleep(Duration::from_secs(3));
    kill_brick(&v.state, v.name, 0);
    for (n, d) in while_b0_down {
        std::fs::write(v.mnt.join(n), d)
            .unwrap_or_else(|e| panic!("write {n} with brick 0 down: {e}"));
    }
    ok(&v.x(&["volume", "start", v.name]));
    std::thread::sleep(Duration::from_secs(3));
}

fn assert_eio(p: &Path) {
    let r = std::fs::read(p);
    assert_eq!(
        r.as_ref().err().and_then(|e| e.raw_os_error()),
        Some(libc::EIO),
        "read of {p:?} in split-brain: {:?}",
        r.map(|d| d.len())
    );
}

fn assert_resolved(v: &Vol, name: &str, want: &[u8]) {
    for (i, brick) in v.b.iter().enumerate() {
        let got = std::fs::read(brick.join(name)).expect("copy on brick");
        assert!(
            got == want,
            "brick {i}'s {name}: {} bytes, want {}",
            got.len(),
            want.len()
        );
    }
    assert!(counters_zero(&v.b, v.name, name), "{name}: counters zero");
    let got = std::fs::read(v.mnt.join(name)).expect("read through the mount");
    assert!(got == want, "mount read {} bytes", got.len());
}

#[test]
fn split_brain_bigger_file_and_latest_mtime_resolve_a_real_split_brain() {
    if skip("split_brain_bigger_file_and_latest_mtime_resolve_a_real_split_brain") {
        return;
    }
    let v = volume("sbpolicy");
    let (a5, b3) = (vec![b'a'; 5000], vec![b'b'; 3000]);
    let (c4, d4) = (vec![b'c'; 4000], vec![b'd'; 4000]);
    make_split_brain(
        &v,
        &[
            ("f", vec![b'0'; 1000]),
            ("g", vec![b'0'; 1000]),
            ("t", vec![b'0'; 1000]),
            ("n", vec![b'n'; 1000]),
        ],
        &[("f", a5.clone()), ("g", a5.clone()), ("t", c4.clone())],
        &[("f", b3.clone()), ("g", b3.clone()), ("t", d4.clone())],
    );
    let o = v.heal(&["info", "split-brain"]);
    ok(&o);
    let t = text(&o);
    for f in ["/f", "/g", "/t"] {
        assert!(t.contains(&format!("{f} - Is in split-brain (data")), "{t}");
    }
    assert!(!t.contains("/n "), "{t}");
    assert_eio(&v.mnt.join("f"));

    // Not in split-brain, and no such file: one-line errors, nothing changed.
    let o = v.heal(&["split-brain", "bigger-file", "/n"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        text(&o).contains("/n is not in split-brain"),
        "{}",
        text(&o)
    );
    let o = v.heal(&["split-brain", "bigger-file", "/nothing"]);
    assert_ne!(o.status.code(), Some(0));

    // bigger-file: the 5000-byte copy (brick 0's) wins.
    let o = v.heal(&["split-brain", "bigger-file", "/f"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!("Healed /f from brick {}", s(&v.b[0]))),
        "{}",
        text(&o)
    );
    assert_resolved(&v, "f", &a5);

    // latest-mtime: the 3000-byte copy written last (brick 1's) wins.
    let o = v.heal(&["split-brain", "latest-mtime", "/g"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!("Healed /g from brick {}", s(&v.b[1]))),
        "{}",
        text(&o)
    );
    assert_resolved(&v, "g", &b3);

    // Ties: same size; then the same mtime too. Refused, still split.
    let o = v.heal(&["split-brain", "bigger-file", "/t"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o).contains("same size"), "{}", text(&o));
    for b in &v.b {
        set_mtime(&b.join("t"), 1_700_000_000);
    }
    let o = v.heal(&["split-brain", "latest-mtime", "/t"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o).contains("same mtime"), "{}", text(&o));
    let o = v.heal(&["info", "split-brain"]);
    assert!(text(&o).contains("/t - Is in split-brain"), "{}", text(&o));
    assert_eio(&v.mnt.join("t"));
    // A resolved file is no longer in split-brain.
    let o = v.heal(&["split-brain", "bigger-file", "/f"]);
    assert!(
        text(&o).contains("/f is not in split-brain"),
        "{}",
        text(&o)
    );
}

#[test]
fn split_brain_source_brick_resolves_one_path_or_every_entry_of_the_set() {
    if skip("split_brain_source_brick_resolves_one_path_or_every_entry_of_the_set") {
        return;
    }
    let v = volume("sbsource");
    let (a, b) = (vec![b'a'; 2000], vec![b'b'; 2500]);
    make_split_brain(
        &v,
        &[
            ("h", vec![b'0'; 1000]),
            ("i", vec![b'0'; 1000]),
            ("j", vec![b'0'; 1000]),
        ],
        &[("h", a.clone()), ("i", a.clone()), ("j", a.clone())],
        &[("h", b.clone()), ("i", b.clone()), ("j", b.clone())],
    );
    assert_eio(&v.mnt.join("h"));
    // A brick of another host is refused.
    let o = v.heal(&["split-brain", "source-brick", "elsewhere.invalid:/x", "/h"]);
    assert_ne!(o.status.code(), Some(0));
    // One path: brick 0's (smaller, older) copy of /h.
    let src0 = s(&v.b[0]);
    let o = v.heal(&["split-brain", "source-brick", &src0, "/h"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!("Healed /h from brick {src0}")),
        "{}",
        text(&o)
    );
    assert_resolved(&v, "h", &a);
    // No path: every split-brain entry of the set (i and j), from brick 1.
    let src1 = format!("localhost:{}", s(&v.b[1]));
    let o = v.heal(&["split-brain", "source-brick", &src1]);
    ok(&o);
    let t = text(&o);
    assert!(
        t.contains("Healed /i from brick") && t.contains("Healed /j from brick"),
        "{t}"
    );
    assert!(!t.contains("/h"), "{t}");
    assert_resolved(&v, "i", &b);
    assert_resolved(&v, "j", &b);
    let o = v.heal(&["info", "split-brain"]);
    assert!(
        text(&o).contains("Number of entries in split-brain: 0"),
        "{}",
        text(&o)
    );
}

fn gfid_of(p: &Path) -> Vec<u8> {
    raw_xattr(p, "trusted.gfid").expect("trusted.gfid")
}

#[test]
fn split_brain_source_brick_resolves_a_gfid_split_brain() {
    if skip("split_brain_source_brick_resolves_a_gfid_split_brain") {
        return;
    }
    let v = volume("sbgfid");
    std::fs::create_dir(v.mnt.join("d")).expect("mkdir d");
    // `gs` made twice: on brick 0 alone, then on brick 1 alone: one name, two GFIDs. And
    // `d` gets a new name on each side: an entry split-brain of a directory.
    let (a, b) = (vec![b'a'; 1500], vec![b'b'; 700]);
    make_split_brain(
        &v,
        &[],
        &[("gs", a.clone()), ("d/x", a.clone())],
        &[("gs", b.clone()), ("d/y", b.clone())],
    );
    let sink_gfid = gfid_of(&v.b[1].join("gs"));
    assert_ne!(gfid_of(&v.b[0].join("gs")), sink_gfid);
    let h: String = sink_gfid.iter().map(|x| format!("{x:02x}")).collect();
    let sink_handle = v.b[1].join(".xlfs/gfid").join(&h[..2]).join(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ));
    assert!(sink_handle.exists(), "{sink_handle:?}");
    let o = v.heal(&["split-brain", "bigger-file", "/gs"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o).contains("GFID split-brain"), "{}", text(&o));
    assert_eq!(std::fs::read(v.b[1].join("gs")).expect("kept"), b);

    let src0 = s(&v.b[0]);
    let o = v.heal(&["split-brain", "source-brick", &src0, "/gs"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!("Healed /gs from brick {src0}")),
        "{}",
        text(&o)
    );
    assert_eq!(gfid_of(&v.b[0].join("gs")), gfid_of(&v.b[1].join("gs")));
    // The brick removes the unlinked copy's handle after its `unlinked-grace` (5 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sink_handle.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!sink_handle.exists(), "the sink's old handle is gone");
    assert_resolved(&v, "gs", &a);

    // The directory: bigger-file refuses, source-brick makes brick 1's names the only ones.
    let o = v.heal(&["info", "split-brain"]);
    assert!(
        text(&o).contains("/d - Is in split-brain (entry"),
        "{}",
        text(&o)
    );
    let o = v.heal(&["split-brain", "bigger-file", "/d"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("not a regular file"), "{}", text(&o));
    let src1 = s(&v.b[1]);
    let o = v.heal(&["split-brain", "source-brick", &src1, "/d"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!("Healed /d from brick {src1}")),
        "{}",
        text(&o)
    );
    for brick in &v.b {
        assert!(!brick.join("d/x").exists(), "d/x gone from {brick:?}");
    }
    assert_resolved(&v, "d/y", &b);
    let o = v.heal(&["info", "split-brain"]);
    assert_eq!(
        text(&o)
            .matches("Number of entries in split-brain: 0")
            .count(),
        2,
        "{}",
        text(&o)
    );
}

/// A file made on each side (one name, two GFIDs) through real bricks: with
/// `favorite-child-policy size` set afterwards, reading it through the mount resolves it to
/// the larger copy on both bricks, with no command.
#[test]
fn favorite_child_policy_resolves_a_gfid_split_brain_of_a_file() {
    if skip("favorite_child_policy_resolves_a_gfid_split_brain_of_a_file") {
        return;
    }
    let v = volume("sbfav");
    let (a, b) = (vec![b'a'; 1500], vec![b'b'; 700]);
    make_split_brain(&v, &[], &[("gs", a.clone())], &[("gs", b.clone())]);
    assert_ne!(gfid_of(&v.b[0].join("gs")), gfid_of(&v.b[1].join("gs")));
    assert_eio(&v.mnt.join("gs"));
    ok(&v.x(&[
        "volume",
        "set",
        v.name,
        "cluster.replicate.favorite-child-policy",
        "size",
    ]));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read(v.mnt.join("gs")).ok().as_deref() != Some(&a[..]) {
        assert!(
            Instant::now() < deadline,
            "gs not resolved to the larger copy"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(gfid_of(&v.b[0].join("gs")), gfid_of(&v.b[1].join("gs")));
    assert_resolved(&v, "gs", &a);
}

#[test]
fn split_brain_refuses_when_a_brick_of_the_set_does_not_answer() {
    // No brick runs (one is on a host that does not exist): every copy is read through its
    // brick, so the commands refuse before anything is written.
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let b0 = tmp.path().join("b0");
    let x = |args: &[&str]| xlfs_raw(&state, args);
    let port = free_port().to_string();
    ok(&x(&[
        "volume",
        "create",
        "sbremote",
        &s(&b0),
        "elsewhere.invalid:/b1",
        "--replica",
        "2",
        "--port",
        &port,
    ]));
    std::fs::create_dir_all(&b0).expect("mkdir b0");
    std::fs::write(b0.join("f"), b"local copy").expect("write f");
    for (words, why) in [
        (&["split-brain", "bigger-file", "/f"][..], "does not answer"),
        (
            &["split-brain", "source-brick", "elsewhere.invalid:/b1", "/f"],
            "does not answer",
        ),
        // Its heal index is on its host, and no daemon here can ask for it.
        (
            &["split-brain", "source-brick", "elsewhere.invalid:/b1"],
            "is on another host",
        ),
    ] {
        let mut a = vec!["volume", "heal", "sbremote"];
        a.extend_from_slice(words);
        let o = x(&a);
        assert_eq!(o.status.code(), Some(5), "{words:?}: {}", text(&o));
        assert!(text(&o).contains(why), "{words:?}: {}", text(&o));
    }
    let o = x(&["volume", "heal", "sbremote", "split-brain", "latest"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(std::fs::read(b0.join("f")).expect("f"), b"local copy");
}
