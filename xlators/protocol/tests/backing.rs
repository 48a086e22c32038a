//! Backing files (FUSE passthrough) cross the wire only to a client on the Unix socket: the
//! client takes its own copy of the brick's descriptor (pidfd_getfd) and gets the same file;
//! over TCP the request to the leaf does not even ask, and no backing file comes back.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicUsize, Ordering};

use xlator_api::{
    BackingFile, BackingWanted, Ctx, Errno, Fd, FdId, Gfid, Init, Loc, Opened, Subvol, Translator,
};
use xlfs_testkit::build::try_build;
use xlfs_testkit::memfs::MemLeaf;

/// Opens that asked for a backing file.
static ASKED: AtomicUsize = AtomicUsize::new(0);

/// Over an in-memory leaf: answers an open that asks with a backing file (a file in the temp directory).
struct BackingLeaf {
    children: Vec<Subvol>,
    path: std::path::PathBuf,
}

impl Translator for BackingLeaf {
    const TYPE: &'static str = "test/backing-leaf";
    const KEEPS_FILE_DATA: bool = true;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(BackingLeaf {
            children: init.children,
            path: std::env::temp_dir().join(format!("xlfs-backing-{}", std::process::id())),
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let mut o = self.children[0].open(cx, fd).await?;
        if cx.ext::<BackingWanted>().is_some() {
            ASKED.fetch_add(1, Ordering::Relaxed);
            let f = std::fs::File::open(&self.path).map_err(|_| Errno::EIO)?;
            o.backing = BackingFile::new(f.into()).ok().into();
        }
        Ok(o)
    }
}

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// Whether this kernel names a Unix socket's peer by pidfd (`SO_PEERPIDFD`, Linux 6.5), which
/// the client needs to take backing files.
fn kernel_has_peer_pidfd() -> bool {
    use std::os::fd::AsRawFd;
    let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a socket fd, an int to write and its size.
    let r = unsafe {
        libc::getsockopt(
            a.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &mut len,
        )
    };
    if r == 0 {
        // SAFETY: the pidfd the kernel just gave us.
        unsafe { libc::close(fd) };
    }
    r == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backing_file_reaches_a_unix_socket_client_only() {
    if !kernel_has_peer_pidfd() && std::env::var("XLFS_E2E_REQUIRE").as_deref() != Ok("1") {
        eprintln!("SKIPPED: the kernel has no SO_PEERPIDFD (Linux 6.5)");
        return;
    }
    let path = std::env::temp_dir().join(format!("xlfs-backing-{}", std::process::id()));
    let mut file = std::fs::File::create(&path).expect("backing file");
    file.write_all(b"the brick's own bytes").expect("write");
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8").to_string();
    let leaf = try_build::<BackingLeaf>("bk", &[], vec![MemLeaf::new()]).expect("leaf");
    let (_server, addr) = common::server(&leaf, &[("unix-socket-dir", &d)]);
    let unix = common::client(addr, &[("unix-socket-dir", &d), ("remote-subvolume", "bk")]);
    let tcp = common::client(addr, &[("unix-socket-dir", ""), ("remote-subvolume", "bk")]);
    common::wait_up(&unix).await;
    common::wait_up(&tcp).await;
    assert_eq!(common::json_field(&unix, "transport"), "unix");
    let cx = Ctx::root();
    let want = Ctx::root().to_builder().ext(&BackingWanted).build();
    let g = unix
        .create(
            &cx,
            Loc::new(Gfid::ROOT, "f"),
            fd(1, Gfid::NULL, libc::O_RDWR),
            0o644,
            0,
        )
        .await
        .expect("create")
        .attr
        .gfid;

    let o = unix
        .open(&want, fd(2, g, libc::O_RDONLY))
        .await
        .expect("open over unix");
    let b = o
        .backing
        .into_option()
        .expect("a backing file over the Unix socket");
    let st = std::fs::metadata(&path).expect("stat");
    assert_eq!((b.dev(), b.ino()), (st.dev(), st.ino()));
    let mine = std::fs::File::from(b.as_fd().try_clone_to_owned().expect("dup"));
    let mut buf = [0u8; 21];
    mine.read_exact_at(&mut buf, 0).expect("read the copy");
    assert_eq!(&buf, b"the brick's own bytes");
    assert_eq!(ASKED.load(Ordering::Relaxed), 1);

    // Not asked: the leaf is not asked either.
    let o = unix
        .open(&cx, fd(3, g, libc::O_RDONLY))
        .await
        .expect("open");
    assert!(o.backing.is_none());
    assert_eq!(ASKED.load(Ordering::Relaxed), 1);

    // Over TCP the server does not pass the wish on.
    let o = tcp
        .open(&want, fd(4, g, libc::O_RDONLY))
        .await
        .expect("open over tcp");
    assert!(o.backing.is_none(), "never over TCP");
    assert_eq!(
        ASKED.load(Ordering::Relaxed),
        1,
        "the leaf was not asked over TCP"
    );

    // The copy is independent of the server's: it survives the release.
    unix.release(&cx, fd(2, g, libc::O_RDONLY))
        .await
        .expect("release");
    file.seek(SeekFrom::Start(0)).expect("seek");
    file.write_all(b"THE").expect("rewrite");
    mine.read_exact_at(&mut buf[..3], 0)
        .expect("read after release");
    assert_eq!(&buf[..3], b"THE");
    let _ = std::fs::remove_file(&path);
}
