//! Many xattrs on one file through the mount (generic/020's MAX_ATTRS case), on a brick
//! whose file system holds them all (tmpfs).

use super::*;

/// A tmpfs mounted on a directory of the test, unmounted (lazily) when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Tmpfs {
        fs::create_dir_all(dir).expect("mkdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "xlfs-test", path_str(dir)])
            .output()
            .expect("mount");
        assert!(out.status.success(), "mount tmpfs: {out:?}");
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn setxattr(p: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let (c, n) = (cstr(p), std::ffi::CString::new(name).expect("name"));
    // SAFETY: NUL-terminated path and name; `value` is valid for its length.
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// getxattr(2) into a buffer of `size` bytes (0: the size probe); the length it answered.
fn getxattr(p: &Path, name: &str, buf: &mut Vec<u8>, size: usize) -> std::io::Result<usize> {
    let (c, n) = (cstr(p), std::ffi::CString::new(name).expect("name"));
    buf.resize(size, 0);
    let ptr = if size == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    // SAFETY: `ptr` is null with size 0, or `buf` with room for `size` bytes.
    let r = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), ptr, size) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// listxattr(2) into a buffer of `size` bytes (0: the size probe).
fn listxattr(p: &Path, buf: &mut Vec<u8>, size: usize) -> std::io::Result<usize> {
    let c = cstr(p);
    buf.resize(size, 0);
    let ptr = if size == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    // SAFETY: as in getxattr.
    let r = unsafe { libc::listxattr(c.as_ptr(), ptr, size) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// 1000 user xattrs on one file: each set, read back, listed (size probe, then the list;
/// ERANGE for a buffer one byte short), and removed; a value of the largest size (64 KiB).
#[test]
fn a_thousand_xattrs_and_a_largest_value_on_one_file() {
    require_fuse!();
    let tmp = tempdir();
    chmod(tmp.path(), 0o755);
    let vol = tmp.path().join("vol");
    let _brick_fs = Tmpfs::mount(&vol);
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).expect("mkdir mnt");
    let m = Mounted::start(&vol, &mnt, &[]);
    let f = mnt.join("f");
    fs::write(&f, b"").expect("create");
    const N: usize = 1000;
    let name = |i: usize| format!("user.attribute_{i}");
    for i in 0..N {
        setxattr(&f, &name(i), format!("value_{i}").as_bytes())
            .unwrap_or_else(|e| panic!("setxattr {}: {e}\n{}", name(i), m.log_text()));
    }
    let mut buf = Vec::new();
    for i in [0, 1, N / 2, N - 1] {
        let want = format!("value_{i}");
        assert_eq!(
            getxattr(&f, &name(i), &mut buf, 0).expect("probe"),
            want.len()
        );
        let e = getxattr(&f, &name(i), &mut buf, want.len() - 1).expect_err("short buffer");
        assert_eq!(e.raw_os_error(), Some(libc::ERANGE), "{e}");
        let n = getxattr(&f, &name(i), &mut buf, want.len()).expect("getxattr");
        assert_eq!(&buf[..n], want.as_bytes());
    }
    let len = listxattr(&f, &mut buf, 0).expect("list probe");
    let e = listxattr(&f, &mut buf, len - 1).expect_err("short list buffer");
    assert_eq!(e.raw_os_error(), Some(libc::ERANGE), "{e}");
    let n = listxattr(&f, &mut buf, len).expect("listxattr");
    assert_eq!(n, len);
    let names: Vec<&[u8]> = buf[..n]
        .split(|b| *b == 0)
        .filter(|s| s.starts_with(b"user."))
        .collect();
    assert_eq!(names.len(), N, "user xattrs listed");

    // getfattr, as the suite does.
    let out = Command::new("getfattr")
        .args(["--absolute-names", "-d", path_str(&f)])
        .output()
        .expect("getfattr");
    assert!(out.status.success(), "getfattr: {out:?}");
    let dump = String::from_utf8_lossy(&out.stdout);
    assert_eq!(dump.matches("user.attribute_").count(), N);
    assert!(dump.contains("user.attribute_999=\"value_999\""));

    for i in 0..N {
        let (c, n) = (cstr(&f), std::ffi::CString::new(name(i)).expect("name"));
        // SAFETY: NUL-terminated path and name.
        let r = unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) };
        assert_eq!(
            r,
            0,
            "removexattr {}: {}",
            name(i),
            std::io::Error::last_os_error()
        );
    }
    let n = listxattr(&f, &mut buf, 0).expect("list probe");
    let n = listxattr(&f, &mut buf, n).expect("listxattr");
    assert!(!buf[..n].starts_with(b"user."), "left after removal");

    // The largest value the xattr calls allow.
    const XATTR_SIZE_MAX: usize = 65536;
    let big = pattern(XATTR_SIZE_MAX, 20);
    setxattr(&f, "user.big", &big).expect("set a 64 KiB value");
    assert_eq!(
        getxattr(&f, "user.big", &mut buf, 0).expect("probe"),
        big.len()
    );
    let n = getxattr(&f, "user.big", &mut buf, big.len()).expect("get a 64 KiB value");
    assert!(buf[..n] == big[..], "64 KiB value read back");
    drop(m);
}
