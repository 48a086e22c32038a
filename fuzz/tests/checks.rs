//! The harness's checks catch what they are for: each case sets up the trouble a check is
//! meant to see and asserts that it reports it (and, where it can be undone, that it is quiet
//! again once the trouble is gone).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use abi_stable::std_types::RString;
use xlator_api::{Ctx, Fd, Flock, Gfid, LkCmd, LkOwner, LockKind};
use xlfs_fuzz::brick::Brick;
use xlfs_fuzz::client::{self, Conn, Reader};
use xlfs_fuzz::input::{Plan, Step};
use xlfs_fuzz::run::{self, Outcome};
use xlfs_fuzz::tame;
use xlfs_protocol::wire::{self, Request, WireCtx};

fn brick() -> Brick {
    run::init();
    let mut b = Brick::start().expect("brick");
    b.deadline = Duration::from_secs(1);
    b
}

#[test]
fn settle_reports_a_connection_that_is_still_open() {
    let b = brick();
    let mut c = b.connect(false).expect("connect");
    client::handshake(&mut c, &mut Reader::after_hello(), b.deadline).expect("handshake");
    // The server counts the connection just after it sent the welcome.
    let t0 = std::time::Instant::now();
    while b.server.dump().find_u64("connections") != Some(1) {
        assert!(t0.elapsed() < Duration::from_secs(5), "never counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    let e = b.settle().expect_err("a connection is open");
    assert!(e.contains("the server still has connections"), "{e}");
    drop(c);
    b.settle().expect("settled once it closed");
}

#[test]
fn settle_reports_locks_left_behind() {
    let b = brick();
    let lock = Flock {
        kind: LockKind::Write,
        start: 0,
        len: 1,
        pid: 1,
        owner: LkOwner(1),
    };
    let dom = RString::from("checks");
    let lk = |l| {
        b.block_on(
            b.locks
                .inodelk(&Ctx::root(), dom.clone(), Gfid::ROOT, LkCmd::Set, l),
        )
    };
    lk(lock).expect("lock");
    let e = b.settle().expect_err("a lock is held");
    assert!(e.contains("features/locks holds locks"), "{e}");
    lk(Flock {
        kind: LockKind::Unlock,
        ..lock
    })
    .expect("unlock");
    b.settle().expect("settled once unlocked");
}

#[test]
fn settle_reports_a_posix_fd_left_open() {
    let b = brick();
    let dir = Fd {
        id: xlator_api::FdId(1 << 40),
        gfid: Gfid::ROOT,
        flags: libc::O_RDONLY,
    };
    b.block_on(b.posix.opendir(&Ctx::root(), dir))
        .expect("opendir");
    let e = b.settle().expect_err("an fd is open");
    assert!(e.contains("storage/posix still has fds open"), "{e}");
    b.block_on(b.posix.releasedir(&Ctx::root(), dir))
        .expect("releasedir");
    b.settle().expect("settled once released");
}

#[test]
fn a_server_that_does_not_answer_is_reported() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let c = Conn::tcp(l.local_addr().expect("addr")).expect("connect");
    let (_held, _) = l.accept().expect("accept");
    let e = client::stat_root(c, Duration::from_millis(300)).expect_err("no answer");
    assert!(e.contains("no welcome"), "{e}");
}

#[test]
fn frames_the_server_must_not_send_are_findings() {
    let send = |bytes: &[u8]| {
        let (mut ours, theirs) = UnixStream::pair().expect("pair");
        ours.write_all(bytes).expect("write");
        let until = std::time::Instant::now() + Duration::from_secs(1);
        Reader::after_hello().next(&mut Conn::Unix(theirs), until)
    };
    let e = send(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).expect_err("junk");
    assert!(e.contains("does not decode"), "{e}");
    let e = send(&[0, 0x40, 0, 0]).expect_err("too large");
    assert!(
        e.contains("the server sent a frame of 4194304 bytes"),
        "{e}"
    );
    // A real frame from the server is not one.
    let pong = wire::encode(&wire::ServerMsg::Pong(1), Vec::new(), 1 << 16).expect("encode");
    assert!(send(&client::whole(&pong)).is_ok());
}

#[test]
fn a_large_allocation_is_cut_in_a_frame_and_refused_in_raw_bytes() {
    let b = brick();
    let fallocate = wire::encode_call(
        1,
        WireCtx::default(),
        Request::Fallocate {
            fd: Fd::anonymous(Gfid::ROOT, libc::O_RDWR),
            mode: 0,
            offset: 0,
            len: 1 << 40,
        },
        1 << 20,
    )
    .expect("encode");
    let framed = Plan {
        handshake: true,
        steps: vec![Step::Frame(tame::body(&fallocate))],
        ..Plan::default()
    };
    let planned = run::plan(&framed.to_bytes()).expect("runs");
    assert_ne!(planned, framed, "the length was cut");
    assert_eq!(run::run(&b, &framed.to_bytes()), Ok(Outcome::Ran));
    let raw = Plan {
        handshake: true,
        steps: vec![Step::Raw(client::whole(&fallocate))],
        ..Plan::default()
    };
    assert_eq!(run::plan(&raw.to_bytes()), None);
    assert_eq!(run::run(&b, &raw.to_bytes()), Ok(Outcome::Rejected));
}
