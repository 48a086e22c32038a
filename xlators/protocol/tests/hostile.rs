//! Hostile clients against one brick (issue 25 item 8): while a well-behaved protocol/client
//! keeps doing create/write/read/stat/lock/unlink on a brick (protocol/server over
//! features/locks over storage/posix), hostile peers send garbage, oversized frame lengths,
//! open thousands of idle connections against the connection bounds, and stop reading the
//! replies to large reads. The good client must see no error and no op slower than a
//! generous bound (this machine is small and shared: the bound is not a latency target),
//! the brick must close every hostile connection it should and count each, and a fresh
//! client must be served at the end.
//!
//! Hostile peers connect from other loopback addresses (127.0.0.2..) than the good client
//! (127.0.0.1), so the per-address bound they run into is theirs, as for a remote attacker.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::RString;
use common::raw::Raw;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use xlator_api::{Buf, Ctx, Fd, FdId, Flock, Gfid, LkCmd, LkOwner, Loc, LockKind, Subvol};
use xlfs_protocol::wire::{
    self, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, Hello, MAGIC, PROTOCOL_VERSION, Request,
    SCHEMA, ServerMsg, WireCtx,
};
use xlfs_testkit::build::try_build;

/// No op of the good client may take longer than this.
const OP_BOUND: Duration = Duration::from_secs(5);
const PER_ADDRESS: usize = 200;
const MAX_CONNECTIONS: usize = 400;
const PENDING: usize = 64;

fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A small deterministic generator (xorshift64*), seeded per run; the seed is printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Raises the soft fd limit to the hard one: this process holds both ends of every socket.
fn raise_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill and then pass back.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

fn hello() -> Hello {
    Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: "memory".into(),
        client: "hostile-test".into(),
        nonce: vec![0; 32],
        max_frame: 1 << 21,
    }
}

fn frame_bytes(msg: &ClientMsg) -> Vec<u8> {
    let f = wire::encode(msg, Vec::new(), HANDSHAKE_MAX_FRAME).expect("encode");
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    v
}

/// A TCP connection to `addr` from the loopback address `from`.
async fn connect_from(from: IpAddr, addr: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().expect("socket");
    s.bind(SocketAddr::new(from, 0)).expect("bind");
    s.connect(addr).await.expect("connect")
}

/// What the server said to a hello.
enum Outcome {
    Welcomed(TcpStream),
    /// Refused with a message, or closed (`None`: the socket was closed or reset before the
    /// best-effort `Refused` frame could be read).
    Refused(Option<String>),
}

async fn handshake_from(from: IpAddr, addr: SocketAddr) -> Outcome {
    let mut s = connect_from(from, addr).await;
    // The server may have closed the socket already (over a bound): the write may fail.
    if s.write_all(&frame_bytes(&ClientMsg::Hello(hello())))
        .await
        .is_err()
    {
        return Outcome::Refused(None);
    }
    let msg = {
        let mut r = FrameReader::new(&mut s, 1 << 16);
        match tokio::time::timeout(Duration::from_secs(20), r.next(Duration::from_secs(20))).await {
            Err(_) => panic!("no answer to a hello from {from} within 20 s"),
            Ok(Ok(Some(body))) => wire::decode::<ServerMsg>(body).expect("decode").0,
            Ok(Ok(None) | Err(_)) => return Outcome::Refused(None),
        }
    };
    match msg {
        ServerMsg::Welcome(_) => Outcome::Welcomed(s),
        ServerMsg::Refused(why) => Outcome::Refused(Some(why)),
        other => panic!("unexpected answer to a hello: {other:?}"),
    }
}

/// `n` handshakes from `from`, `parallel` at a time: the welcomed sockets and the refusal
/// messages.
async fn flood(
    from: IpAddr,
    addr: SocketAddr,
    n: usize,
    parallel: usize,
) -> (Vec<TcpStream>, Vec<Option<String>>) {
    let outcomes: Vec<Outcome> = futures::stream::iter(0..n)
        .map(|_| handshake_from(from, addr))
        .buffer_unordered(parallel)
        .collect()
        .await;
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    for o in outcomes {
        match o {
            Outcome::Welcomed(s) => ok.push(s),
            Outcome::Refused(why) => refused.push(why),
        }
    }
    (ok, refused)
}

/// The server closes `s` (EOF or reset) within `within`; false if it did not.
async fn closed_within(mut s: TcpStream, within: Duration) -> bool {
    let mut buf = vec![0u8; 1 << 16];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

/// Waits until the dump field `key` of `server` is `want` (at most 20 s).
async fn wait_field(server: &Subvol, key: &str, want: serde_json::Value) {
    let t0 = Instant::now();
    while common::json_field(server, key) != want {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{key} is {} after 20 s, not {want}",
            common::json_field(server, key)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts the good client did ops since `before` (its op count then): it was served during
/// the phase that just ended, not only before and after it.
fn served_during(log: &Mutex<GoodLog>, before: u64, phase: &str) -> u64 {
    let now = log.lock().expect("log").ops;
    assert!(now > before, "the good client did no op during {phase}");
    eprintln!(
        "hostile: good client did {} ops during {phase}",
        now - before
    );
    now
}

fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

/// What the good client saw.
#[derive(Default)]
struct GoodLog {
    ops: u64,
    errors: Vec<String>,
    /// Every op's duration in microseconds.
    micros: Vec<u64>,
    slowest: (Duration, String),
}

/// Times one op of the good client; an error, a hang or an op over [`OP_BOUND`] is noted.
async fn timed<T, E: std::fmt::Debug>(
    log: &Mutex<GoodLog>,
    what: &str,
    op: impl Future<Output = Result<T, E>>,
) -> Option<T> {
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(30), op).await;
    let took = t0.elapsed();
    let mut l = log.lock().expect("log");
    l.ops += 1;
    l.micros
        .push(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    if took > l.slowest.0 {
        l.slowest = (took, what.to_owned());
    }
    if took > OP_BOUND {
        l.errors.push(format!("{what} took {took:?}"));
    }
    match r {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            l.errors.push(format!("{what}: {e:?}"));
            None
        }
        Err(_) => {
            l.errors.push(format!("{what}: no answer within 30 s"));
            None
        }
    }
}

/// One round of the good client on file `name`: create, write 64 KiB, read it back, fstat,
/// inodelk and unlock it (features/locks), release, stat, unlink. False if an op failed.
async fn good_round(top: &Subvol, log: &Mutex<GoodLog>, i: u64) -> bool {
    let cx = Ctx::root();
    let name = format!("good-{i}");
    let data: Vec<u8> = (0..64 << 10).map(|j| (j as u64 * 7 + i) as u8).collect();
    let f = fd(i + 1, Gfid::NULL, libc::O_RDWR);
    let Some(e) = timed(
        log,
        "create",
        top.create(&cx, Loc::new(Gfid::ROOT, name.as_str()), f, 0o644, 0),
    )
    .await
    else {
        return false;
    };
    let g = e.attr.gfid;
    let f = fd(i + 1, g, libc::O_RDWR);
    let ok = async {
        let w = timed(
            log,
            "writev",
            top.writev(&cx, f, 0, Buf::from(data.clone()), 0),
        )
        .await?;
        if w.written as usize != data.len() {
            log.lock()
                .expect("log")
                .errors
                .push(format!("short write: {}", w.written));
            return None;
        }
        let r = timed(log, "readv", top.readv(&cx, f, 0, 64 << 10)).await?;
        if *r.data != *data {
            log.lock()
                .expect("log")
                .errors
                .push("readv: wrong bytes".into());
            return None;
        }
        let a = timed(log, "fstat", top.fstat(&cx, f)).await?;
        if a.size != data.len() as u64 {
            log.lock()
                .expect("log")
                .errors
                .push(format!("fstat: size {}", a.size));
            return None;
        }
        let lock = Flock {
            kind: LockKind::Write,
            start: 0,
            len: 0,
            pid: 1,
            owner: LkOwner(i),
        };
        let dom = RString::from("hostile-test");
        timed(
            log,
            "inodelk",
            top.inodelk(&cx, dom.clone(), g, LkCmd::Set, lock),
        )
        .await?;
        let unlock = Flock {
            kind: LockKind::Unlock,
            ..lock
        };
        timed(
            log,
            "inodelk unlock",
            top.inodelk(&cx, dom, g, LkCmd::Set, unlock),
        )
        .await?;
        Some(())
    }
    .await
    .is_some();
    let released = timed(log, "release", top.release(&cx, f)).await.is_some();
    if !(ok && released) {
        return false;
    }
    timed(log, "stat", top.stat(&cx, g)).await.is_some()
        && timed(
            log,
            "unlink",
            top.unlink(&cx, Loc::new(Gfid::ROOT, name.as_str())),
        )
        .await
        .is_some()
}

/// A client that asks for `reads` 1 MiB reads of `gfid` and never reads a reply. Returns how
/// long after its last request the server cut it off (a ping that can no longer be written:
/// the server closed the socket); panics if it is still connected after 30 s.
async fn slow_reader(addr: SocketAddr, gfid: Gfid, reads: usize) -> Duration {
    let mut raw = Raw::connect(addr, "memory").await;
    let f = fd(1, gfid, libc::O_RDONLY);
    raw.call(WireCtx::default(), Request::Open { fd: f })
        .await
        .expect("open");
    for _ in 0..reads {
        let read = Request::Readv {
            fd: f,
            offset: 0,
            size: 1 << 20,
        };
        // Once the server has given up on us it may reset the socket mid-way: stop then.
        if tokio::time::timeout(
            Duration::from_secs(5),
            raw.send_only(WireCtx::default(), read),
        )
        .await
        .is_err()
        {
            break;
        }
    }
    let t0 = Instant::now();
    for n in 0.. {
        // Writes succeed into the local buffer until the server's reset comes back.
        match tokio::time::timeout(Duration::from_secs(1), raw.ping_only(n)).await {
            Ok(Err(_)) => return t0.elapsed(),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "a client that stopped reading is still connected after {:?}",
            t0.elapsed()
        );
    }
    unreachable!()
}

/// Garbage on fresh and on handshaken connections: random bytes, a valid-looking length
/// prefix followed by junk of that length, an oversized length (2 GiB) before and after the
/// handshake (one followed by a stream of bytes the server must not take), a frame one byte
/// over the post-handshake maximum. Every one must be closed by the server; returns how many
/// there were (each counts as `dropped`).
async fn garbage(addr: SocketAddr, rng: &mut Rng) -> u64 {
    let mut conns: Vec<(String, TcpStream)> = Vec::new();
    async fn shaken(addr: SocketAddr) -> TcpStream {
        match handshake_from(loopback(6), addr).await {
            Outcome::Welcomed(s) => s,
            Outcome::Refused(why) => panic!("hostile handshake refused: {why:?}"),
        }
    }
    for i in 0..32 {
        let after_hs = i % 2 == 1;
        let mut s = if after_hs {
            shaken(addr).await
        } else {
            connect_from(loopback(6), addr).await
        };
        let bytes = if i < 16 {
            // Random bytes, 1 to 8 KiB.
            let n = 1 + rng.below(8192) as usize;
            rng.bytes(n)
        } else {
            // A plausible length (within the frame limit), then that many bytes of junk.
            let max = if after_hs {
                1 << 20
            } else {
                HANDSHAKE_MAX_FRAME
            };
            // At least 16: no short message (a ping: 1 + at most 10 bytes) can take it all.
            let n = 16 + rng.below(max as u64 - 16) as usize;
            let mut v = (n as u32).to_be_bytes().to_vec();
            v.extend(rng.bytes(n));
            v
        };
        // The server may close while we write: that is what we want.
        let _ = s.write_all(&bytes).await;
        conns.push((format!("garbage {i} (handshake: {after_hs})"), s));
    }
    for after_hs in [false, true] {
        let mut s = if after_hs {
            shaken(addr).await
        } else {
            connect_from(loopback(6), addr).await
        };
        let _ = s.write_all(&0x8000_0000u32.to_be_bytes()).await;
        conns.push((format!("2 GiB length (handshake: {after_hs})"), s));
    }
    // One over the post-handshake maximum (max-write 1 MiB + 64 KiB).
    let mut s = shaken(addr).await;
    let _ = s
        .write_all(&(((1u32 << 20) + (64 << 10)) + 1).to_be_bytes())
        .await;
    conns.push(("max frame + 1".into(), s));
    let mut n = conns.len() as u64;
    // A 2 GiB length, then bytes as fast as the server takes them: it must close the
    // connection instead of reading (and buffering) them.
    let mut s = shaken(addr).await;
    let pump = async {
        let chunk = vec![0x5a; 1 << 20];
        let _ = s.write_all(&0x8000_0000u32.to_be_bytes()).await;
        let mut sent = 0usize;
        while s.write_all(&chunk).await.is_ok() {
            sent += chunk.len();
        }
        sent
    };
    let sent = tokio::time::timeout(Duration::from_secs(10), pump)
        .await
        .expect("the server kept taking the body of a 2 GiB frame");
    assert!(
        sent < 64 << 20,
        "the server took {sent} bytes of a 2 GiB frame"
    );
    n += 1;
    let checks = conns.into_iter().map(|(what, s)| async move {
        // Incomplete frames wait for frame-receive-timeout (2 s here).
        assert!(
            closed_within(s, Duration::from_secs(15)).await,
            "{what}: the server did not close the connection"
        );
    });
    futures::future::join_all(checks).await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_do_not_stop_a_good_client_being_served() {
    let started = Instant::now();
    raise_nofile();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("hostile: random seed {seed:#x}");
    let mut rng = Rng(seed);

    // The brick: protocol/server over features/locks over storage/posix.
    let (posix, _dir) = common::posix();
    let locks = try_build::<xlfs_locks::Locks>("locks", &[], vec![posix.clone()]).expect("locks");
    let (per_address, max_conns, pending) = (
        PER_ADDRESS.to_string(),
        MAX_CONNECTIONS.to_string(),
        PENDING.to_string(),
    );
    let (server, addr) = common::server(
        &locks,
        &[
            ("volume-name", "memory"),
            ("unix-socket-dir", ""),
            ("max-connections", max_conns.as_str()),
            ("max-connections-per-address", per_address.as_str()),
            ("max-pending-handshakes", pending.as_str()),
            ("send-timeout", "3s"),
            ("handshake-timeout", "5s"),
            ("frame-receive-timeout", "2s"),
            // Longer than the test: idle hostile connections stay until they are dropped.
            ("client-idle-timeout", "300s"),
        ],
    );
    // A 1 MiB file for the slow readers.
    let big = {
        let root = Ctx::root();
        let f = fd(1_000_000, Gfid::NULL, libc::O_RDWR);
        let e = posix
            .create(&root, Loc::new(Gfid::ROOT, "big"), f, 0o644, 0)
            .await
            .expect("create big");
        let f = fd(1_000_000, e.attr.gfid, libc::O_RDWR);
        posix
            .writev(&root, f, 0, Buf::from(vec![7u8; 1 << 20]), 0)
            .await
            .expect("write big");
        posix.release(&root, f).await.expect("release big");
        e.attr.gfid
    };

    // The good client, looping until told to stop.
    let good = common::client(addr, &[("unix-socket-dir", "")]);
    common::wait_up(&good).await;
    let log = Arc::new(Mutex::new(GoodLog::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let good_task = {
        let (good, log, stop) = (good.clone(), log.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                if !good_round(&good, &log, i).await {
                    break;
                }
                i += 1;
            }
            i
        })
    };
    let mut dropped = 0u64;
    let mut over_limit = 0u64;
    let mut ops = log.lock().expect("log").ops;

    // 4. Slow readers (started first: they run while the garbage goes in). Each asks for
    // 64 MiB of replies and reads none; send-timeout (3 s) must cut each off.
    let slow: Vec<_> = (0..2)
        .map(|_| tokio::spawn(slow_reader(addr, big, 64)))
        .collect();

    // 1 and 2. Garbage and oversized frames.
    dropped += garbage(addr, &mut rng).await;
    for s in slow {
        let took = s.await.expect("slow reader");
        eprintln!("hostile: a slow reader was cut off {took:?} after its last request");
        dropped += 1;
    }
    ops = served_during(&log, ops, "the garbage and the slow readers");

    // 3. Idle connections. 1,500 handshakes from one address: exactly max-connections-per-
    // address of them are welcomed, the rest refused at once.
    let t0 = Instant::now();
    let (idle, refused) = flood(loopback(2), addr, 1500, 32).await;
    eprintln!(
        "hostile: 1500 handshakes from 127.0.0.2 in {:?}: {} welcomed",
        t0.elapsed(),
        idle.len()
    );
    assert_eq!(idle.len(), PER_ADDRESS, "welcomed from one address");
    assert!(
        refused.iter().flatten().all(|why| why.contains(&format!(
            "address 127.0.0.2 has max-connections-per-address ({PER_ADDRESS})"
        ))),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(Option::is_some),
        "no refusal said which bound"
    );
    over_limit += refused.len() as u64;
    ops = served_during(&log, ops, "1,500 handshakes from one address");

    // 300 silent connections (no hello) from another: max-pending-handshakes are held, the
    // others closed at once; the held ones are closed after handshake-timeout (5 s).
    let t0 = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..300 {
        silent.push(connect_from(loopback(3), addr).await);
    }
    wait_field(&server, "pending-handshakes", serde_json::json!(PENDING)).await;
    // The refused ones see their Refused frame and the end of the stream at once.
    let quick = futures::future::join_all(silent.into_iter().map(|mut s| async move {
        let mut buf = Vec::new();
        match tokio::time::timeout(Duration::from_secs(1), s.read_to_end(&mut buf)).await {
            Ok(_) => (None, Some(String::from_utf8_lossy(&buf).into_owned())),
            Err(_) => (Some(s), None),
        }
    }))
    .await;
    let (held, said): (Vec<_>, Vec<_>) = quick.into_iter().unzip();
    let held: Vec<TcpStream> = held.into_iter().flatten().collect();
    let said: Vec<String> = said.into_iter().flatten().collect();
    assert_eq!(held.len(), PENDING, "silent connections held");
    assert!(
        said.iter()
            .any(|s| s.contains(&format!("max-pending-handshakes ({PENDING})"))),
        "{:?}",
        said.first()
    );
    over_limit += said.len() as u64;
    // While they hold every pending slot, a new client from another address still gets in:
    // the silent address's oldest pending connection is evicted for it. Before, it was
    // refused until the handshake-timeout freed a slot.
    let mut newcomer = Raw::connect(addr, "memory").await;
    newcomer
        .call(WireCtx::default(), Request::Stat { gfid: Gfid::ROOT })
        .await
        .expect("a new client while the pending slots are held");
    drop(newcomer);
    let checks = held
        .into_iter()
        .map(|s| closed_within(s, Duration::from_secs(20)));
    assert!(
        futures::future::join_all(checks)
            .await
            .into_iter()
            .all(|c| c),
        "a silent connection outlived the handshake-timeout"
    );
    eprintln!(
        "hostile: silent connections held and dropped in {:?}",
        t0.elapsed()
    );
    dropped += PENDING as u64;
    ops = served_during(&log, ops, "the silent connections");
    wait_field(&server, "pending-handshakes", serde_json::json!(0)).await;

    // While 127.0.0.2 holds its 200, a new client from another address is served.
    let mut fresh = Raw::connect(addr, "memory").await;
    fresh
        .call(WireCtx::default(), Request::Stat { gfid: Gfid::ROOT })
        .await
        .expect("a new client's stat");
    drop(fresh);
    // The good client and the 200 idle ones.
    wait_field(&server, "connections", serde_json::json!(1 + PER_ADDRESS)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The total bound: from a third address, until the brick holds max-connections.
    let room = MAX_CONNECTIONS - 1 - PER_ADDRESS;
    let (more, refused) = flood(loopback(4), addr, 300, 32).await;
    assert_eq!(more.len(), room, "welcomed up to max-connections");
    assert!(
        refused.iter().flatten().all(|why| why.contains(&format!(
            "the brick holds max-connections ({MAX_CONNECTIONS})"
        ))),
        "{refused:?}"
    );
    over_limit += refused.len() as u64;
    // Full: a new client is refused, the good one (connected) keeps being served.
    match handshake_from(loopback(1), addr).await {
        Outcome::Welcomed(_) => panic!("welcomed over max-connections"),
        Outcome::Refused(_) => over_limit += 1,
    }
    let before = log.lock().expect("log").ops;
    let t0 = Instant::now();
    while log.lock().expect("log").ops < before + 20 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the good client made no progress while the brick was full"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    served_during(&log, ops, "the brick full at max-connections");
    drop((idle, more));
    wait_field(&server, "connections", serde_json::json!(1)).await;

    // The end: the good client stops; it never failed and no op exceeded the bound.
    stop.store(true, Ordering::Relaxed);
    let rounds = good_task.await.expect("good client");
    let log = std::mem::take(&mut *log.lock().expect("log"));
    let mut micros = log.micros.clone();
    micros.sort_unstable();
    let pct = |p: usize| micros[(micros.len() - 1) * p / 100];
    eprintln!(
        "hostile: good client: {rounds} rounds, {} ops, p50 {} us, p99 {} us, max {:?} ({})",
        log.ops,
        pct(50),
        pct(99),
        log.slowest.0,
        log.slowest.1
    );
    assert!(
        log.errors.is_empty(),
        "good client: {} errors or slow ops, the first: {:?}",
        log.errors.len(),
        &log.errors[..log.errors.len().min(20)]
    );
    assert!(rounds >= 20, "the good client did only {rounds} rounds");

    // The brick is still up and serves a new protocol/client.
    let fresh = common::client(addr, &[("unix-socket-dir", "")]);
    common::wait_up(&fresh).await;
    let fresh_log = Mutex::new(GoodLog::default());
    assert!(
        good_round(&fresh, &fresh_log, 1 << 40).await,
        "{:?}",
        fresh_log.lock().expect("log").errors
    );
    // Every hostile connection was counted; none of their fds is left open.
    assert_eq!(
        common::json_field(&server, "dropped"),
        serde_json::json!(dropped)
    );
    assert_eq!(
        common::json_field(&server, "over-limit"),
        serde_json::json!(over_limit)
    );
    assert_eq!(
        common::json_field(&server, "open-fds"),
        serde_json::json!(0)
    );
    eprintln!("hostile: whole test {:?}", started.elapsed());
}
