//! The seed corpus: inputs made of real encoded frames (the wire's own encoder), so that the
//! fuzzer starts inside the protocol, not at junk. `gen_seeds` writes them to
//! `corpus/server_frames/`; `tests/seeds.rs` runs each against a brick.
//!
//! Objects the seeds make carry fixed GFIDs (the `GfidReq` extension), and fds are the
//! client's own numbers, so later frames of an input name what earlier ones made without
//! reading a reply. The files stay in the brick across inputs: a later `create` of the same
//! name opens the file that is there.

use abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, CreateXattrs, CtxExtension, EntrylkCmd, Fd, FdId, Flock, Gfid, GfidReq, LkCmd, LkOwner,
    Loc, LockKind, SeekWhat, SetAttr, TimeSet, Xattr, XattrReq, XattropOp,
};
use xlfs_protocol::wire::{
    self, ClientMsg, HANDSHAKE_MAX_FRAME, Hello, MAGIC, PROTOCOL_VERSION, Request, SCHEMA,
    VolfileRequest, VolfileWatch, WireCtx,
};

use crate::client::{MAX_FRAME, VOLUME};
use crate::input::{Plan, Step};
use crate::tame::body;

/// GFIDs of the objects the seeds make.
pub const FILE: Gfid = Gfid([0xf1; 16]);
pub const DIR: Gfid = Gfid([0xd1; 16]);
pub const LINK: Gfid = Gfid([0x51; 16]);

fn gfid_req(g: Gfid) -> WireCtx {
    WireCtx {
        ext: vec![(GfidReq::KEY.into(), Buf::from_vec(GfidReq(g).encode()))],
        ..WireCtx::default()
    }
}

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

fn loc(parent: Gfid, name: &str) -> Loc {
    Loc::new(parent, name)
}

fn xattr(name: &str, value: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(value),
    }
}

/// Builds a plan: frames and awaits.
#[derive(Default)]
struct Seed {
    plan: Plan,
    next_id: u64,
}

impl Seed {
    fn new(handshake: bool, unix: bool) -> Seed {
        Seed {
            plan: Plan {
                handshake,
                unix,
                steps: Vec::new(),
            },
            next_id: 1,
        }
    }

    fn msg(mut self, m: &ClientMsg) -> Seed {
        let f = wire::encode(m, Vec::new(), HANDSHAKE_MAX_FRAME).expect("encode");
        self.plan.steps.push(Step::Frame(body(&f)));
        self
    }

    /// A call and an await of its reply.
    fn call(self, req: Request) -> Seed {
        self.call_as(WireCtx::default(), req)
    }

    fn call_as(self, ctx: WireCtx, req: Request) -> Seed {
        self.send_as(ctx, req).wait()
    }

    /// A call without waiting for its reply.
    fn send_as(mut self, ctx: WireCtx, req: Request) -> Seed {
        let f = wire::encode_call(self.next_id, ctx, req, MAX_FRAME as usize).expect("encode");
        self.next_id += 1;
        self.plan.steps.push(Step::Frame(body(&f)));
        self
    }

    fn wait(mut self) -> Seed {
        self.plan.steps.push(Step::Await);
        self
    }

    fn step(mut self, s: Step) -> Seed {
        self.plan.steps.push(s);
        self
    }

    fn done(self) -> Vec<u8> {
        self.plan.to_bytes()
    }
}

fn hello(volume: &str, version: u32, magic: [u8; 4]) -> ClientMsg {
    ClientMsg::Hello(Hello {
        magic,
        version,
        schema: SCHEMA,
        volume: volume.into(),
        client: "fuzz:1:seed".into(),
        nonce: vec![7; 32],
        max_frame: MAX_FRAME,
    })
}

fn volfile_request() -> VolfileRequest {
    VolfileRequest {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: VOLUME.into(),
        client: "fuzz:1:seed".into(),
        nonce: vec![7; 32],
    }
}

/// Creates (or, once it exists, opens: no O_EXCL) the seeds' file as fd 1, read-write, and
/// waits for the reply.
fn with_file(s: Seed) -> Seed {
    s.call_as(
        gfid_req(FILE),
        Request::Create {
            loc: loc(Gfid::ROOT, "seed-file"),
            fd: fd(1, Gfid::NULL, libc::O_RDWR),
            mode: 0o644,
            umask: 0o022,
        },
    )
}

fn file_fd() -> Fd {
    fd(1, FILE, libc::O_RDWR)
}

/// Every seed, by name.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    let lock = Flock {
        kind: LockKind::Write,
        start: 0,
        len: 10,
        pid: 1,
        owner: LkOwner(7),
    };
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut add = |name, bytes| out.push((name, bytes));

    // The handshake, by the input itself: valid, then each refusal.
    add(
        "hello",
        Seed::new(false, false)
            .msg(&hello(VOLUME, PROTOCOL_VERSION, MAGIC))
            .wait()
            .call(Request::Stat { gfid: Gfid::ROOT })
            .done(),
    );
    add(
        "hello-unix",
        Seed::new(false, true)
            .msg(&hello(VOLUME, PROTOCOL_VERSION, MAGIC))
            .wait()
            .call(Request::Statfs { gfid: Gfid::ROOT })
            .done(),
    );
    add(
        "hello-wrong-volume",
        Seed::new(false, false)
            .msg(&hello("other", PROTOCOL_VERSION, MAGIC))
            .wait()
            .done(),
    );
    add(
        "hello-old-version",
        Seed::new(false, false)
            .msg(&hello(VOLUME, 3, MAGIC))
            .wait()
            .done(),
    );
    add(
        "hello-bad-magic",
        Seed::new(false, false)
            .msg(&hello(VOLUME, PROTOCOL_VERSION, *b"GLFS"))
            .wait()
            .done(),
    );
    add(
        "prove-unasked",
        Seed::new(false, false)
            .msg(&ClientMsg::Prove(vec![1; 32]))
            .wait()
            .done(),
    );
    add(
        "get-volfile",
        Seed::new(false, false)
            .msg(&ClientMsg::GetVolfile(volfile_request()))
            .wait()
            .done(),
    );
    add(
        "watch-volfile",
        Seed::new(false, false)
            .msg(&ClientMsg::WatchVolfile(VolfileWatch {
                request: volfile_request(),
                known: 0,
                hold_ms: 0,
            }))
            .wait()
            .done(),
    );
    // A hello split across reads: its length, a pause, then its body in two pieces.
    add("hello-split", {
        let f = wire::encode(
            &hello(VOLUME, PROTOCOL_VERSION, MAGIC),
            Vec::new(),
            HANDSHAKE_MAX_FRAME,
        )
        .expect("encode");
        let whole = crate::client::whole(&f);
        let (len, rest) = whole.split_at(4);
        let (a, b) = rest.split_at(rest.len() / 2);
        Seed::new(false, false)
            .step(Step::Raw(len.to_vec()))
            .step(Step::Flush)
            .step(Step::Raw(a.to_vec()))
            .step(Step::Flush)
            .step(Step::Raw(b.to_vec()))
            .wait()
            .done()
    });

    // In a session.
    add(
        "ping-cancel",
        Seed::new(true, false)
            .msg(&ClientMsg::Ping(9))
            .wait()
            .msg(&ClientMsg::Cancel(42))
            .call(Request::Stat { gfid: Gfid::ROOT })
            .done(),
    );
    add(
        "second-hello",
        Seed::new(true, false)
            .msg(&hello(VOLUME, PROTOCOL_VERSION, MAGIC))
            .wait()
            .done(),
    );
    add(
        "lookup",
        Seed::new(true, false)
            .call(Request::Lookup {
                loc: loc(Gfid::ROOT, "seed-file"),
            })
            .call(Request::Lookup {
                loc: loc(Gfid::ROOT, "missing"),
            })
            .call_as(
                WireCtx {
                    ext: vec![(
                        XattrReq::KEY.into(),
                        Buf::from_vec(
                            XattrReq {
                                names: vec!["user.seed".into()],
                                prefixes: vec!["trusted.".into()],
                            }
                            .encode(),
                        ),
                    )],
                    ..WireCtx::default()
                },
                Request::Lookup {
                    loc: loc(Gfid::ROOT, "seed-dir"),
                },
            )
            .done(),
    );
    add(
        "create-write-read",
        with_file(Seed::new(true, false))
            .call(Request::Writev {
                fd: file_fd(),
                offset: 0,
                data: Buf::copy_from_slice(b"hello, brick"),
                flags: 0,
            })
            .call(Request::Readv {
                fd: file_fd(),
                offset: 0,
                size: 4096,
            })
            .call(Request::Fstat { fd: file_fd() })
            .call(Request::Fsync {
                fd: file_fd(),
                datasync: true,
            })
            .call(Request::Flush { fd: file_fd() })
            .call(Request::Release { fd: file_fd() })
            .done(),
    );
    add(
        "create-write-read-unix",
        with_file(Seed::new(true, true))
            .call(Request::Writev {
                fd: file_fd(),
                offset: 4096,
                data: Buf::from_vec(vec![0x5a; 5000]),
                flags: 0,
            })
            .call(Request::Readv {
                fd: file_fd(),
                offset: 4000,
                size: 8192,
            })
            .call(Request::Release { fd: file_fd() })
            .done(),
    );
    add(
        "open-backing-unix",
        Seed::new(true, true)
            .call_as(
                WireCtx {
                    backing_wanted: true,
                    ..WireCtx::default()
                },
                Request::Open {
                    fd: fd(2, FILE, libc::O_RDONLY),
                },
            )
            .call(Request::Readv {
                fd: fd(2, FILE, libc::O_RDONLY),
                offset: 0,
                size: 100,
            })
            .call(Request::Release {
                fd: fd(2, FILE, libc::O_RDONLY),
            })
            .done(),
    );
    add(
        "anonymous-fd",
        Seed::new(true, false)
            .call(Request::Readv {
                fd: Fd::anonymous(FILE, libc::O_RDONLY),
                offset: 0,
                size: 64,
            })
            .call(Request::Writev {
                fd: Fd::anonymous(FILE, libc::O_WRONLY),
                offset: 3,
                data: Buf::copy_from_slice(b"anon"),
                flags: 0,
            })
            .done(),
    );
    add(
        "pipelined",
        // Several calls before any reply: the server runs them side by side.
        with_file(Seed::new(true, false))
            .send_as(
                WireCtx::default(),
                Request::Writev {
                    fd: file_fd(),
                    offset: 100,
                    data: Buf::copy_from_slice(b"pipelined"),
                    flags: libc::O_SYNC,
                },
            )
            .send_as(
                WireCtx::default(),
                Request::Readv {
                    fd: file_fd(),
                    offset: 0,
                    size: 200,
                },
            )
            .send_as(WireCtx::default(), Request::Stat { gfid: FILE })
            .wait()
            .wait()
            .wait()
            .done(),
    );
    add(
        "data-fops",
        with_file(Seed::new(true, false))
            .call(Request::Fallocate {
                fd: file_fd(),
                mode: 0,
                offset: 0,
                len: 8192,
            })
            .call(Request::Discard {
                fd: file_fd(),
                offset: 0,
                len: 4096,
            })
            .call(Request::Zerofill {
                fd: file_fd(),
                offset: 4096,
                len: 4096,
            })
            .call(Request::Seek {
                fd: file_fd(),
                offset: 0,
                what: SeekWhat::Data,
            })
            .call(Request::Rchecksum {
                fd: file_fd(),
                offset: 0,
                len: 4096,
            })
            .call(Request::Release { fd: file_fd() })
            .done(),
    );
    add(
        "setattr",
        Seed::new(true, false)
            .call(Request::Setattr {
                gfid: FILE,
                attr: SetAttr {
                    perm: Some(0o600).into(),
                    size: Some(10).into(),
                    mtime: TimeSet::Now,
                    ..SetAttr::default()
                },
            })
            .call(Request::Access {
                gfid: FILE,
                mask: 6,
            })
            .call(Request::Stat { gfid: FILE })
            .done(),
    );
    add(
        "xattrs",
        Seed::new(true, false)
            .call(Request::Setxattr {
                gfid: FILE,
                xattr: xattr("user.seed", b"value"),
                flags: 0,
            })
            .call(Request::Getxattr {
                gfid: FILE,
                name: "user.seed".into(),
            })
            .call(Request::Listxattr { gfid: FILE })
            .call(Request::Getxattrs {
                gfid: FILE,
                names: RVec::from(vec![RString::from("user.seed")]),
            })
            .call(Request::Setxattrs {
                gfid: FILE,
                xattrs: RVec::from(vec![xattr("user.a", b"1"), xattr("user.b", b"2")]),
                flags: 0,
            })
            .call(Request::Removexattr {
                gfid: FILE,
                name: "user.seed".into(),
            })
            .done(),
    );
    add(
        "fd-xattrs",
        with_file(Seed::new(true, false))
            .call(Request::Fsetxattr {
                fd: file_fd(),
                xattr: xattr("user.fd", &[0; 8]),
                flags: 0,
            })
            .call(Request::Fgetxattr {
                fd: file_fd(),
                name: "user.fd".into(),
            })
            .call(Request::Fxattrop {
                fd: file_fd(),
                op: XattropOp::AddArray32,
                xattrs: RVec::from(vec![xattr("trusted.afr.seed", &[0, 0, 0, 1, 0, 0, 0, 2])]),
            })
            .call(Request::Fremovexattr {
                fd: file_fd(),
                name: "user.fd".into(),
            })
            .call(Request::Release { fd: file_fd() })
            .done(),
    );
    add(
        "xattrop",
        Seed::new(true, false)
            .call(Request::Xattrop {
                gfid: FILE,
                op: XattropOp::AddArray64,
                xattrs: RVec::from(vec![xattr("trusted.seed.count", &[0, 0, 0, 0, 0, 0, 0, 1])]),
            })
            .done(),
    );
    add(
        "dir",
        Seed::new(true, false)
            .call_as(
                gfid_req(DIR),
                Request::Mkdir {
                    loc: loc(Gfid::ROOT, "seed-dir"),
                    mode: 0o755,
                    umask: 0o022,
                },
            )
            .call(Request::Opendir {
                fd: fd(3, DIR, libc::O_RDONLY),
            })
            .call(Request::Readdirp {
                fd: fd(3, DIR, libc::O_RDONLY),
                offset: 0,
                size: 4096,
            })
            .call(Request::Fsyncdir {
                fd: fd(3, DIR, libc::O_RDONLY),
                datasync: false,
            })
            .call(Request::Releasedir {
                fd: fd(3, DIR, libc::O_RDONLY),
            })
            .done(),
    );
    add(
        "readdir-root",
        Seed::new(true, true)
            .call(Request::Opendir {
                fd: fd(4, Gfid::ROOT, libc::O_RDONLY),
            })
            .call(Request::Readdirp {
                fd: fd(4, Gfid::ROOT, libc::O_RDONLY),
                offset: 0,
                size: 65536,
            })
            .done(),
    );
    add(
        "namespace",
        Seed::new(true, false)
            .call_as(
                gfid_req(LINK),
                Request::Symlink {
                    loc: loc(DIR, "seed-symlink"),
                    target: "../seed-file".into(),
                },
            )
            .call(Request::Readlink { gfid: LINK })
            .call(Request::Link {
                gfid: FILE,
                new: loc(DIR, "seed-hardlink"),
            })
            .call(Request::Rename {
                old: loc(DIR, "seed-hardlink"),
                new: loc(DIR, "seed-renamed"),
                flags: 0,
            })
            .call(Request::Unlink {
                loc: loc(DIR, "seed-renamed"),
            })
            .call(Request::Mknod {
                loc: loc(DIR, "seed-fifo"),
                mode: libc::S_IFIFO | 0o644,
                rdev: 0,
                umask: 0,
            })
            .call(Request::Unlink {
                loc: loc(DIR, "seed-fifo"),
            })
            .done(),
    );
    add(
        "mkdir-rmdir",
        Seed::new(true, false)
            .call(Request::Mkdir {
                loc: loc(Gfid::ROOT, "seed-tmp"),
                mode: 0o700,
                umask: 0,
            })
            .call(Request::Rmdir {
                loc: loc(Gfid::ROOT, "seed-tmp"),
            })
            .done(),
    );
    add(
        "create-xattrs",
        Seed::new(true, false)
            .call_as(
                WireCtx {
                    ext: vec![(
                        CreateXattrs::KEY.into(),
                        Buf::from_vec(
                            CreateXattrs(vec![("user.made".into(), b"with".to_vec())]).encode(),
                        ),
                    )],
                    ..WireCtx::default()
                },
                Request::Create {
                    loc: loc(DIR, "seed-with-xattrs"),
                    fd: fd(5, Gfid::NULL, libc::O_WRONLY),
                    mode: 0o600,
                    umask: 0,
                },
            )
            .call(Request::Release {
                fd: fd(5, Gfid::NULL, libc::O_WRONLY),
            })
            .done(),
    );
    add(
        "posix-locks",
        with_file(Seed::new(true, false))
            .call(Request::Lk {
                fd: file_fd(),
                cmd: LkCmd::Set,
                lock,
            })
            .call(Request::Lk {
                fd: file_fd(),
                cmd: LkCmd::Get,
                lock: Flock {
                    owner: LkOwner(8),
                    ..lock
                },
            })
            // Another owner waits; the connection's end must release both.
            .send_as(
                WireCtx::default(),
                Request::Lk {
                    fd: file_fd(),
                    cmd: LkCmd::SetWait,
                    lock: Flock {
                        owner: LkOwner(8),
                        ..lock
                    },
                },
            )
            .done(),
    );
    add(
        "inodelk-entrylk",
        Seed::new(true, false)
            .call(Request::Inodelk {
                domain: "seed".into(),
                gfid: FILE,
                cmd: LkCmd::Set,
                lock,
            })
            .call(Request::Entrylk {
                domain: "seed".into(),
                loc: loc(Gfid::ROOT, "seed-file"),
                cmd: EntrylkCmd::LockNonBlocking,
            })
            .call(Request::Entrylk {
                domain: "seed".into(),
                loc: loc(Gfid::ROOT, "seed-file"),
                cmd: EntrylkCmd::Unlock,
            })
            .send_as(
                WireCtx::default(),
                Request::Inodelk {
                    domain: "seed".into(),
                    gfid: FILE,
                    cmd: LkCmd::SetWait,
                    lock: Flock {
                        owner: LkOwner(9),
                        ..lock
                    },
                },
            )
            .msg(&ClientMsg::Cancel(4))
            .wait()
            .done(),
    );
    add(
        "as-user",
        Seed::new(true, false)
            .call_as(
                WireCtx {
                    uid: 1000,
                    gid: 1000,
                    groups: vec![1000, 27],
                    pid: 4242,
                    ..WireCtx::default()
                },
                Request::Create {
                    loc: loc(Gfid::ROOT, "seed-user-file"),
                    fd: fd(6, Gfid::NULL, libc::O_RDWR),
                    mode: 0o644,
                    umask: 0o022,
                },
            )
            .call_as(
                WireCtx {
                    uid: u32::MAX,
                    ..WireCtx::default()
                },
                Request::Stat { gfid: FILE },
            )
            .done(),
    );
    add(
        "forget-client",
        // Host-only: refused from the wire with EPERM.
        Seed::new(true, false)
            .call(Request::ForgetClient {
                client: xlator_api::ClientId(1),
            })
            .done(),
    );
    add(
        "oversized-read",
        Seed::new(true, false)
            .call(Request::Readv {
                fd: Fd::anonymous(FILE, libc::O_RDONLY),
                offset: 0,
                size: u32::MAX,
            })
            .done(),
    );
    // Frame-level trouble: a body shorter than its length (the reader waits, then the end of
    // stream truncates it), and bytes after a complete frame that are not a frame.
    add("truncated", {
        let mut s = Seed::new(true, false).step(Step::Raw(vec![0, 0, 1, 0, 1, 2, 3]));
        s = s.step(Step::Flush);
        s.done()
    });
    add(
        "trailing-junk",
        Seed::new(true, false)
            .call(Request::Stat { gfid: Gfid::ROOT })
            .step(Step::Raw(vec![0xff, 0xff, 0xff, 0xff, 0]))
            .wait()
            .done(),
    );
    out
}
