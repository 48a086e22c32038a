//! protocol/server tells the translators below which connection each request came from
//! ([`xlator_api::ClientId`]): the same number for every request of a connection, a different
//! one for each connection.

mod common;

use std::sync::Mutex;

use xlator_api::{
    Buf, ClientId, Ctx, Errno, Fd, FdId, Gfid, Init, Loc, ReadReply, Subvol, Translator,
};
use xlfs_testkit::build::try_build;
use xlfs_testkit::memfs::MemLeaf;

/// The client ids reads came with, in order.
static SEEN: Mutex<Vec<Option<u64>>> = Mutex::new(Vec::new());

/// Over an in-memory leaf: notes the `ClientId` of every read.
struct Recorder {
    children: Vec<Subvol>,
}

impl Translator for Recorder {
    const TYPE: &'static str = "test/client-id-recorder";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Recorder {
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        SEEN.lock()
            .expect("lock")
            .push(cx.ext::<ClientId>().map(|c| c.0));
        self.children[0].readv(cx, fd, offset, size).await
    }
}

fn fd(id: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDWR,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_its_connections_client_id() {
    let leaf = try_build::<Recorder>("rec", &[], vec![MemLeaf::new()]).expect("leaf");
    let (_server, addr) = common::server(&leaf, &[("unix-socket-dir", "")]);
    let a = common::client(
        addr,
        &[("unix-socket-dir", ""), ("remote-subvolume", "rec")],
    );
    let b = common::client(
        addr,
        &[("unix-socket-dir", ""), ("remote-subvolume", "rec")],
    );
    common::wait_up(&a).await;
    common::wait_up(&b).await;
    let cx = Ctx::root();
    let e = a
        .create(&cx, Loc::new(Gfid::ROOT, "f"), fd(1, Gfid::NULL), 0o644, 0)
        .await
        .expect("create");
    let g = e.attr.gfid;
    a.writev(&cx, fd(1, g), 0, Buf::copy_from_slice(b"data"), 0)
        .await
        .expect("write");
    b.open(&cx, fd(2, g)).await.expect("open");
    for (c, f) in [(&a, 1), (&b, 2), (&a, 1), (&b, 2)] {
        let r = c.readv(&cx, fd(f, g), 0, 4).await.expect("read");
        assert_eq!(&*r.data, b"data");
    }
    let seen = SEEN.lock().expect("lock").clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(
        seen.iter().all(Option::is_some),
        "a read without a client id: {seen:?}"
    );
    assert_eq!(seen[0], seen[2], "one connection, one id: {seen:?}");
    assert_eq!(seen[1], seen[3], "one connection, one id: {seen:?}");
    assert_ne!(seen[0], seen[1], "two connections, one id: {seen:?}");
}
