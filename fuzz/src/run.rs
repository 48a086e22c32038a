//! One input against the brick, and the checks after it. Kept apart from the libFuzzer entry
//! point so that a plain test (`tests/seeds.rs`) runs the same code over the seed corpus.
//!
//! A finding is an `Err` naming what went wrong; the fuzz target aborts on it, so libFuzzer
//! keeps the input. Findings, besides a panic anywhere in the process (libFuzzer's panic hook
//! aborts on it, even inside a fop, where the SDK would turn it into EIO):
//! - the server sends a frame that does not decode, or larger than it may;
//! - the server does not close a connection within the deadline
//!   ([`DEADLINE`](crate::brick::DEADLINE), 20 s) of the client's end of stream, or does not
//!   answer a valid hello with a welcome;
//! - after the input, a good client is not served within the deadline
//!   ([`Brick::check_serving`]);
//! - something the input's connection held outlives it ([`Brick::settle`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::brick::Brick;
use crate::client::{self, Next, Reader};
use crate::input::{self, Plan, Step};
use crate::tame;
use xlator_api::Buf;
use xlfs_protocol::wire::{self, ClientMsg};

/// The longest one AWAIT waits, and one input in all its AWAITs: an await the server does not
/// answer (a lock that waits, a frame that needs no answer, half a frame) costs its wait, and
/// slow inputs slow the whole run (they are a few percent of a grown corpus, and with waits of
/// 50 ms took most of its time). A reply takes well under a millisecond here.
const AWAIT_MAX: Duration = Duration::from_millis(10);
const AWAIT_BUDGET: Duration = Duration::from_millis(30);
/// The pause after a FLUSH that wrote something (time for the server to read it), and the most
/// one input spends in them.
const FLUSH_PAUSE: Duration = Duration::from_micros(100);
const FLUSH_BUDGET: Duration = Duration::from_millis(2);
/// The brick's directory is checked every this many inputs.
const USAGE_EVERY: u64 = 16384;
/// Above this much allocated in the brick, the largest files are emptied.
const USAGE_BUDGET: u64 = 1 << 30;

/// Whether `XLFS_FUZZ_TRACE` is set: every frame sent and received is printed (decoded
/// where it decodes), to see what an input does.
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("XLFS_FUZZ_TRACE").is_some())
}

fn trace_sent(stream: &[u8]) {
    for f in input::frames(stream) {
        let what = match wire::decode::<ClientMsg>(Buf::copy_from_slice(f)) {
            Ok((m, _)) => format!("{m:?}"),
            Err(e) => format!("{} bytes that do not decode ({e})", f.len()),
        };
        eprintln!("xlfs-fuzz: -> {}", clip(&what));
    }
}

fn trace_received(body: &[u8]) {
    if let Ok(m) = client::check_server_frame(body) {
        eprintln!("xlfs-fuzz: <- {}", clip(&format!("{m:?}")));
    }
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(400) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// What became of an input.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Ran,
    /// Not run: its raw bytes hold a request the harness does not let through (see [`tame`]).
    Rejected,
}

/// Process setup before the first input: what a brick host sets up before serving.
pub fn init() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions. A brick host
    // (a Rust `main`) ignores SIGPIPE; libFuzzer's `main` does not, and a write to a
    // connection the harness closed would kill the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill and then pass back. Both ends of every connection live
    // in this process.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// The plan `data` asks for, with its frames tamed; `None` if it must not run.
pub fn plan(data: &[u8]) -> Option<Plan> {
    let mut plan = Plan::parse(data);
    for step in &mut plan.steps {
        if let Step::Frame(body) = step
            && let Some(t) = tame::tame(body)
        {
            *body = t;
        }
    }
    // With the zeros that complete an unfinished last frame over TCP (see `send`).
    let mut stream = plan.stream();
    stream.extend(input::completion(input::cut(&stream).1));
    if input::frames(&stream).into_iter().any(tame::wild) {
        return None;
    }
    Some(plan)
}

/// Runs one input on a new connection, then checks the brick.
pub fn run(brick: &Brick, data: &[u8]) -> Result<Outcome, String> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let Some(plan) = plan(data) else {
        return Ok(Outcome::Rejected);
    };
    if tracing() {
        eprintln!(
            "xlfs-fuzz: input {n}: handshake {}, unix {}",
            plan.handshake, plan.unix
        );
        trace_sent(&plan.stream());
    }
    let t0 = Instant::now();
    send(brick, &plan)?;
    let t1 = Instant::now();
    brick
        .check_serving(n % 2 == 1)
        .map_err(|e| format!("the brick stopped serving a good client: {e}"))?;
    let t2 = Instant::now();
    brick.settle()?;
    if tracing() {
        eprintln!(
            "xlfs-fuzz: input {n} took {:?} (its connection), {:?} (a good client), {:?} (settle)",
            t1 - t0,
            t2 - t1,
            t2.elapsed()
        );
    }
    if n % USAGE_EVERY == USAGE_EVERY - 1 {
        keep_small(brick);
    }
    Ok(Outcome::Ran)
}

/// The input's connection, from connect to the server's close.
fn send(brick: &Brick, plan: &Plan) -> Result<(), String> {
    let mut conn = brick
        .connect(plan.unix)
        .map_err(|e| format!("cannot connect to the brick: {e}"))?;
    let mut reader = if plan.handshake {
        let mut r = Reader::after_hello();
        client::handshake(&mut conn, &mut r, brick.deadline)?;
        r
    } else {
        Reader::default()
    };
    let start = Instant::now();
    let (mut awaited, mut paused) = (Duration::ZERO, Duration::ZERO);
    let mut queued = Vec::new();
    // False once the server has closed (it may, at any frame): the rest is not sent.
    let mut open = true;
    // Bytes were sent since the last frame came back: an AWAIT waits only then (with nothing
    // sent, nothing is owed).
    let mut owed = false;
    for step in &plan.steps {
        if !open {
            break;
        }
        match step {
            Step::Frame(body) => {
                queued.extend_from_slice(&input::frame_len(body.len()));
                queued.extend_from_slice(body);
            }
            Step::Raw(bytes) => queued.extend_from_slice(bytes),
            Step::Flush => {
                let some = !queued.is_empty();
                owed |= some;
                open = write(&mut conn, &mut queued);
                if some && paused < FLUSH_BUDGET {
                    std::thread::sleep(FLUSH_PAUSE);
                    paused += FLUSH_PAUSE;
                }
            }
            Step::Await => {
                owed |= !queued.is_empty();
                open = write(&mut conn, &mut queued);
                if open && owed && awaited < AWAIT_BUDGET {
                    let t0 = Instant::now();
                    let until = t0 + AWAIT_MAX.min(AWAIT_BUDGET - awaited);
                    match reader.next(&mut conn, until)? {
                        Next::Frame(f) => {
                            owed = false;
                            if tracing() {
                                trace_received(&f);
                            }
                        }
                        Next::Closed => open = false,
                        Next::Timeout => {}
                    }
                    awaited += t0.elapsed();
                }
            }
        }
    }
    // The end of the input, after which the server must close the connection. Over TCP, an
    // empty frame (which the server refuses, closing first; an unfinished frame before it is
    // completed with zeros) and, once the server has closed, a reset: whichever side sends the
    // first FIN keeps the connection in TIME_WAIT for a minute, and hundreds a second would
    // hold tens of thousands of the machine's ports after the run. On the Unix socket (no
    // TIME_WAIT), end of stream.
    if !plan.unix {
        queued.extend(input::completion(input::cut(&plan.stream()).1));
        queued.extend_from_slice(&input::frame_len(0));
    }
    if open {
        write(&mut conn, &mut queued);
    }
    if plan.unix {
        conn.shutdown_write();
    }
    let until = Instant::now() + brick.deadline;
    loop {
        match reader.next(&mut conn, until)? {
            Next::Frame(f) if tracing() => trace_received(&f),
            Next::Frame(_) => {}
            Next::Closed => return Ok(()),
            Next::Timeout => {
                return Err(format!(
                    "the server kept the connection open {:?} after the end of the input \
                     (input sent for {:?})",
                    brick.deadline,
                    start.elapsed()
                ));
            }
        }
    }
}

/// Writes and empties `queued`; false if the server has closed the connection.
fn write(conn: &mut client::Conn, queued: &mut Vec<u8>) -> bool {
    if queued.is_empty() {
        return true;
    }
    if tracing() {
        eprintln!("xlfs-fuzz: -> {} bytes", queued.len());
    }
    conn.send(&std::mem::take(queued)).is_ok()
}

/// Keeps the brick's disk use bounded over long runs: above [`USAGE_BUDGET`] allocated,
/// every file of over 1 MiB is emptied (behind posix's back, as another process on the
/// brick could; sizes are not what is tested here). Prints what the brick holds.
fn keep_small(brick: &Brick) {
    use std::os::unix::fs::MetadataExt;
    let mut files = Vec::new();
    let (mut entries, mut bytes) = (0u64, 0u64);
    // Each file has a second name under .xlfs/gfid: count its blocks once.
    let mut seen = std::collections::HashSet::new();
    walk(&brick.dir.join("brick"), &mut |p, m| {
        entries += 1;
        if !seen.insert((m.dev(), m.ino())) {
            return;
        }
        let used = m.blocks() * 512;
        bytes += used;
        if m.is_file() && used > 1 << 20 {
            files.push(p.to_owned());
        }
    });
    eprintln!(
        "xlfs-fuzz: the brick holds {entries} entries, {} MiB allocated",
        bytes >> 20
    );
    if bytes > USAGE_BUDGET {
        for f in &files {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .open(f)
                .and_then(|f| f.set_len(0));
        }
        eprintln!(
            "xlfs-fuzz: emptied {} files over 1 MiB (over the {} MiB budget)",
            files.len(),
            USAGE_BUDGET >> 20
        );
    }
}

fn walk(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &std::fs::Metadata)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        f(&p, &m);
        if m.is_dir() {
            walk(&p, f);
        }
    }
}
