//! POSIX behaviours through a real mount that the Linux file-system suite (xfstests) found
//! broken: writers who do not own a file, objects replaced while open, file handles of
//! evicted inodes, device nodes. Needs /dev/fuse and root, like tests/mount.rs.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

#[path = "posix/acl.rs"]
mod acl;
#[path = "posix/atime.rs"]
mod atime;
#[path = "posix/dio.rs"]
mod dio;
#[path = "posix/locks.rs"]
mod locks;
#[path = "posix/readonly.rs"]
mod readonly;
#[path = "posix/xattrs.rs"]
mod xattrs;

/// Runs `cmd` as `uid`/`gid` with exactly the supplementary `groups`.
fn run_as(uid: u32, gid: u32, groups: &[u32], mut cmd: Command) -> Output {
    let groups = groups.to_vec();
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run command")
}

fn sh(script: &str, dir: &Path) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).current_dir(dir);
    c
}

fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).expect("chown");
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mounted(tmp: &tempfile::TempDir, extra: &[&str]) -> (Mounted, std::path::PathBuf) {
    chmod(tmp.path(), 0o755);
    let (vol, mnt) = (tmp.path().join("vol"), tmp.path().join("mnt"));
    fs::create_dir(&mnt).expect("mkdir mnt");
    (Mounted::start(&vol, &mnt, extra), mnt)
}

/// A user allowed to write a file it does not own, through its supplementary group or the
/// "other" bits, may truncate it (`O_TRUNC`, `ftruncate`) and close it after writing
/// (generic/087, 126; the world-writable file in a sticky directory of issue 28). With the
/// writeback cache the kernel sends the truncate's mtime, and at close the times it kept for
/// the writes, as explicit times, which only the owner may set: both failed with EPERM.
#[test]
fn writers_who_do_not_own_a_file_may_truncate_and_close_it() {
    require_fuse!();
    let tmp = tempdir();
    let (mut m, mnt) = mounted(&tmp, &[]);
    let d = mnt.join("d");
    fs::create_dir(&d).expect("mkdir");
    chown(&d, 99, 99);
    chmod(&d, 0o770);
    let f = d.join("f");
    fs::write(&f, b"old data").expect("write");
    chown(&f, 99, 99);
    chmod(&f, 0o660);

    // The group is what grants access: without it, refused.
    let out = run_as(100, 100, &[], sh("cat d/f", &mnt));
    assert!(!out.status.success(), "read without the group: {out:?}");
    let out = run_as(100, 100, &[99], sh("cat d/f", &mnt));
    assert!(out.status.success(), "read through the group: {out:?}");
    assert_eq!(out.stdout, b"old data");

    let out = run_as(100, 100, &[99], sh("echo new > d/f", &mnt));
    assert!(
        out.status.success(),
        "O_TRUNC through the group: {out:?}\n{}",
        m.log_text()
    );
    assert_eq!(fs::read(&f).expect("read"), b"new\n");
    let out = run_as(100, 100, &[99], sh("truncate -s 2 d/f", &mnt));
    assert!(out.status.success(), "ftruncate through the group: {out:?}");
    assert_eq!(fs::read(&f).expect("read"), b"ne");

    // Root's world-writable setuid file in a sticky directory, written in place by nobody.
    let s = mnt.join("sticky");
    fs::create_dir(&s).expect("mkdir");
    chmod(&s, 0o1777);
    let t = s.join("tool");
    fs::write(&t, b"ab").expect("write");
    chmod(&t, 0o4777);
    let out = run_as(
        65534,
        65534,
        &[],
        sh(
            "printf X | dd of=sticky/tool conv=notrunc status=none",
            &mnt,
        ),
    );
    assert!(out.status.success(), "write and close by nobody: {out:?}");
    assert_eq!(fs::read(&t).expect("read"), b"Xb");
    let out = run_as(65534, 65534, &[], sh("echo y > sticky/tool", &mnt));
    assert!(out.status.success(), "O_TRUNC by nobody: {out:?}");
    let mode = fs::metadata(&t).expect("stat").mode();
    assert_eq!(mode & 0o6000, 0, "setuid left after writes: {mode:o}");

    m.signal(libc::SIGTERM);
    let (status, _) = m.wait();
    assert!(status.success(), "exit status {status}:\n{}", m.log_text());
}

/// `fstat` on an open file or directory that a rename just replaced answers with the
/// replaced object (link count 0), as on a local file system (generic/035). The kernel asks
/// by node id without the fd, and the object has no name left; a directory used to be
/// ESTALE.
#[test]
fn fstat_of_an_open_object_replaced_by_a_rename() {
    require_fuse!();
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    fs::write(mnt.join("a"), b"new").expect("write a");
    fs::write(mnt.join("b"), b"old!").expect("write b");
    let file = File::open(mnt.join("b")).expect("open b");
    let ino = file.metadata().expect("fstat").ino();
    fs::rename(mnt.join("a"), mnt.join("b")).expect("rename file");
    let st = file.metadata().expect("fstat of the replaced file");
    assert_eq!((st.ino(), st.nlink(), st.len()), (ino, 0, 4));

    fs::create_dir(mnt.join("da")).expect("mkdir da");
    fs::create_dir(mnt.join("db")).expect("mkdir db");
    let dir = File::open(mnt.join("db")).expect("open db");
    let ino = dir.metadata().expect("fstat").ino();
    fs::rename(mnt.join("da"), mnt.join("db")).expect("rename dir");
    let st = dir.metadata().expect("fstat of the replaced directory");
    assert!(st.is_dir());
    assert_eq!((st.ino(), st.nlink()), (ino, 0));
    drop(m);
}

/// A handle from `name_to_handle_at`.
struct Handle {
    buf: Vec<u8>,
}

const MAX_HANDLE: usize = 128;

fn handle_of(p: &Path) -> Handle {
    let mut buf = vec![0u8; std::mem::size_of::<libc::file_handle>() + MAX_HANDLE];
    let fh = buf.as_mut_ptr().cast::<libc::file_handle>();
    let mut mount_id = 0;
    let c = cstr(p);
    // SAFETY: `buf` holds a file_handle header plus MAX_HANDLE bytes, as handle_bytes says.
    let r = unsafe {
        (*fh).handle_bytes = MAX_HANDLE as u32;
        libc::name_to_handle_at(libc::AT_FDCWD, c.as_ptr(), fh, &mut mount_id, 0)
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    Handle { buf }
}

fn open_by_handle(mnt: &File, h: &mut Handle, flags: i32) -> std::io::Result<File> {
    let fh = h.buf.as_mut_ptr().cast::<libc::file_handle>();
    // SAFETY: a handle filled by name_to_handle_at; the fd it returns is ours to own.
    let fd = unsafe { libc::open_by_handle_at(mnt.as_raw_fd(), fh, flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The kernel forgets every unused inode and dentry.
fn drop_inodes() {
    fs::write("/proc/sys/vm/drop_caches", b"2").expect("drop dentries and inodes");
}

/// File handles stay valid after the kernel evicted their inodes: it then asks
/// `lookup(node, ".")` (FUSE_EXPORT_SUPPORT) with a node id the mount had been told to
/// forget (generic/426, 467, 477, 756, 777; re-exporting a mount over kernel NFS). A file
/// with no name left is stale.
#[test]
fn file_handles_outlive_the_kernels_inodes() {
    require_fuse!();
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    fs::write(mnt.join("f"), b"linked").expect("write");
    fs::hard_link(mnt.join("f"), mnt.join("f2")).expect("link");
    fs::create_dir_all(mnt.join("d/e")).expect("mkdir");
    fs::write(mnt.join("gone"), b"x").expect("write");
    let mut hf = handle_of(&mnt.join("f"));
    let mut hd = handle_of(&mnt.join("d/e"));
    let mut hg = handle_of(&mnt.join("gone"));
    fs::remove_file(mnt.join("f")).expect("unlink one name");
    fs::remove_file(mnt.join("gone")).expect("unlink the only name");
    let root = File::open(&mnt).expect("open mount");
    drop_inodes();

    let mut f = open_by_handle(&root, &mut hf, libc::O_RDWR).expect("handle of a linked file");
    assert_eq!(std::io::read_to_string(&mut f).expect("read"), "linked");
    f.write_all(b"!").expect("write through the handle");
    drop(f);
    assert_eq!(fs::read(mnt.join("f2")).expect("read f2"), b"linked!");
    let d = open_by_handle(&root, &mut hd, libc::O_RDONLY | libc::O_DIRECTORY)
        .expect("handle of a directory");
    assert!(d.metadata().expect("fstat").is_dir());
    drop(d);
    let e = open_by_handle(&root, &mut hg, libc::O_RDONLY).expect_err("unlinked file");
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}");
    // Again once evicted a second time (the node was looked up and forgotten again).
    drop_inodes();
    open_by_handle(&root, &mut hf, libc::O_RDONLY).expect("handle after a second eviction");
    drop(root);
    drop(m);
}

/// The mount is `nodev` unless `--dev` asks otherwise: device nodes can be made either way,
/// opened only with `--dev` (generic/184, 306, 434).
#[test]
fn device_nodes_open_only_with_dev() {
    require_fuse!();
    let opts = |mnt: &Path| {
        let info = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let want = mnt.to_str().expect("utf-8 path").to_owned();
        info.lines()
            .find(|l| l.split(' ').nth(4) == Some(want.as_str()))
            .and_then(|l| l.split(' ').nth(5))
            .expect("mount listed")
            .to_owned()
    };
    let mknod_null = |p: &Path| {
        let c = cstr(p);
        // SAFETY: a NUL-terminated path; mknod reads it only.
        let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        assert_eq!(r, 0, "mknod: {}", std::io::Error::last_os_error());
    };
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, &[]);
    assert!(
        opts(&mnt).split(',').any(|o| o == "nodev"),
        "{}",
        opts(&mnt)
    );
    mknod_null(&mnt.join("null"));
    let e = fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("null"))
        .expect_err("nodev");
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    drop(m);

    let (m, mnt2) = {
        let mnt2 = tmp.path().join("mnt2");
        fs::create_dir(&mnt2).expect("mkdir mnt2");
        (
            Mounted::start(&tmp.path().join("vol"), &mnt2, &["--dev"]),
            mnt2,
        )
    };
    assert!(
        !opts(&mnt2).split(',').any(|o| o == "nodev"),
        "{}",
        opts(&mnt2)
    );
    let mut null = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt2.join("null"))
        .expect("open a device with --dev");
    null.write_all(b"discarded")
        .expect("write to /dev/null's twin");
    drop(null);
    drop(m);
}
