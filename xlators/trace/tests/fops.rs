//! debug/trace over a test leaf, with a subscriber capturing what it logs.

use std::io;
use std::sync::{Arc, Mutex};

use tracing::Level;
use xlator_api::{Buf, Ctx, Fop, Gfid, Loc, Subvol, Xattr};
use xlfs_testkit::build::{try_build, try_options_for};
use xlfs_testkit::every_fop::call_every_fop;
use xlfs_testkit::stub_leaf::{StubLeaf, rw_fd};
use xlfs_trace::Trace;

/// Everything logged while it is the thread's default subscriber.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Installs a subscriber letting `max` and more severe levels through.
    fn install(max: Level) -> (Capture, tracing::subscriber::DefaultGuard) {
        let cap = Capture::default();
        let writer = cap.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(max)
            .with_ansi(false)
            .without_time()
            .finish();
        (cap, tracing::subscriber::set_default(sub))
    }

    /// The lines logged since the last call.
    fn take(&self) -> Vec<String> {
        let bytes = std::mem::take(&mut *self.0.lock().expect("capture lock"));
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn trace_over_leaf(set: &[(&str, &str)]) -> Subvol {
    try_build::<Trace>("trace", set, vec![StubLeaf::new()]).expect("trace builds")
}

async fn lookup(sv: &Subvol, name: &str) {
    let _ = sv.lookup(&Ctx::root(), Loc::new(Gfid::ROOT, name)).await;
}

fn lines_with<'a>(lines: &'a [String], needle: &str) -> Vec<&'a String> {
    lines.iter().filter(|l| l.contains(needle)).collect()
}

#[tokio::test]
async fn every_fop_is_logged_down_and_up_and_replies_pass_unchanged() {
    let (cap, _g) = Capture::install(Level::TRACE);
    let sv = trace_over_leaf(&[("log-level", "trace")]);
    let cx = Ctx::root();
    let through = call_every_fop(&sv, &cx).await;
    let lines = cap.take();
    let direct = call_every_fop(&StubLeaf::new(), &cx).await;
    assert_eq!(through, direct, "trace must not change any reply");

    assert_eq!(lines.len(), 2 * Fop::COUNT, "{lines:#?}");
    for (i, (fop, r)) in through.iter().enumerate() {
        let (down, up) = (&lines[2 * i], &lines[2 * i + 1]);
        assert!(down.contains(&format!("xlfs::trace: {fop}(")), "{down}");
        assert!(up.contains(&format!("xlfs::trace: {fop} -> ")), "{up}");
        let call = format!("call={}", i + 1);
        assert!(down.contains(&call) && up.contains(&call), "{down}\n{up}");
        assert!(up.contains("latency_us="), "{up}");
        assert!(
            down.starts_with("TRACE") && up.starts_with("TRACE"),
            "{down}"
        );
        if let Err(e) = r {
            assert!(up.contains(&format!("-> Err({e:?})")), "{up}");
        }
    }
}

#[tokio::test]
async fn arguments_replies_and_errnos_are_shown() {
    let (cap, _g) = Capture::install(Level::TRACE);
    let sv = trace_over_leaf(&[]);
    let cx = Ctx::builder(1000, 100).pid(42).request_id(77).build();
    let _ = sv.lookup(&cx, Loc::new(Gfid::ROOT, "missing")).await;
    let lines = cap.take();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with(" INFO xlfs::trace: lookup(loc=Loc { parent: "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("name: \"missing\" })"), "{}", lines[0]);
    for field in ["xlator=trace", "req=77", "uid=1000", "gid=100", "pid=42"] {
        assert!(lines[0].contains(field), "{field} missing: {}", lines[0]);
    }
    assert!(lines[1].contains("lookup -> Err(ENOENT)"), "{}", lines[1]);

    let _ = sv.fsync(&cx, rw_fd(), true).await;
    let lines = cap.take();
    assert!(
        lines[0].contains("fsync(fd=Fd { id: FdId(7), "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("datasync=true"), "{}", lines[0]);
    assert!(lines[1].contains("fsync -> Ok(())"), "{}", lines[1]);
}

#[tokio::test]
async fn payloads_are_logged_as_lengths() {
    let (cap, _g) = Capture::install(Level::TRACE);
    let sv = trace_over_leaf(&[]);
    let cx = Ctx::root();
    let n = sv
        .writev(&cx, rw_fd(), 0, Buf::from("secret-bytes"), 0)
        .await;
    assert_eq!(n.map(|r| r.written), Ok(12));
    let _ = sv.readv(&cx, rw_fd(), 0, 4096).await;
    let x = Xattr {
        name: "user.key".into(),
        value: Buf::from("hidden"),
    };
    let _ = sv.setxattr(&cx, Gfid::ROOT, x, 0).await;
    let all = cap.take().join("\n");
    assert!(all.contains("data=<12 bytes>"), "{all}");
    assert!(
        all.contains("writev -> Ok(WriteReply { written: 12, attr: RNone })"),
        "{all}"
    );
    assert!(
        all.contains("readv -> Ok(ReadReply { data: Buf(4096 bytes), attr: RNone })"),
        "{all}"
    );
    assert!(all.contains("xattr=\"user.key\"=<6 bytes>"), "{all}");
    assert!(!all.contains("secret") && !all.contains("hidden"), "{all}");
}

#[tokio::test]
async fn log_level_is_reconfigurable() {
    let (cap, _g) = Capture::install(Level::DEBUG);
    let sv = trace_over_leaf(&[]);
    lookup(&sv, "a").await;
    let lines = cap.take();
    assert!(
        lines.len() == 2 && lines.iter().all(|l| l.starts_with(" INFO")),
        "{lines:#?}"
    );

    sv.reconfigure(try_options_for::<Trace>(&[("log-level", "debug")]).expect("options"))
        .expect("reconfigure");
    lookup(&sv, "a").await;
    let lines = cap.take();
    assert!(
        lines.len() == 2 && lines.iter().all(|l| l.starts_with("DEBUG")),
        "{lines:#?}"
    );

    // The subscriber lets only DEBUG and above through: trace-level lines are not even built.
    sv.reconfigure(try_options_for::<Trace>(&[("log-level", "trace")]).expect("options"))
        .expect("reconfigure");
    lookup(&sv, "a").await;
    assert_eq!(cap.take(), Vec::<String>::new());
}

#[tokio::test]
async fn include_and_exclude_select_fops() {
    let (cap, _g) = Capture::install(Level::TRACE);
    let sv = trace_over_leaf(&[("include", "lookup, writev"), ("exclude", "writev")]);
    let cx = Ctx::root();
    lookup(&sv, "a").await;
    let _ = sv.writev(&cx, rw_fd(), 0, Buf::from("x"), 0).await;
    let _ = sv.stat(&cx, Gfid::ROOT).await;
    let lines = cap.take();
    assert_eq!(lines_with(&lines, "lookup").len(), 2, "{lines:#?}");
    assert_eq!(lines.len(), 2, "only lookup is traced: {lines:#?}");

    let set = [("exclude", "lookup")];
    sv.reconfigure(try_options_for::<Trace>(&set).expect("options"))
        .expect("reconfigure");
    lookup(&sv, "a").await;
    let _ = sv.stat(&cx, Gfid::ROOT).await;
    let lines = cap.take();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines[0].contains("stat(gfid=") && lines[1].contains("stat -> Err(ENOSYS)"));
}

#[tokio::test]
async fn unknown_fop_names_are_refused_with_the_name() {
    let e = try_build::<Trace>(
        "trace",
        &[("include", "lookup,wrtiev")],
        vec![StubLeaf::new()],
    )
    .expect_err("typo in include");
    assert!(
        e.contains("option \"include\": unknown fop \"wrtiev\""),
        "{e}"
    );
    assert!(e.contains("did you mean \"writev\""), "{e}");
    let e = try_build::<Trace>("trace", &[("exclude", "bogus")], vec![StubLeaf::new()])
        .expect_err("unknown in exclude");
    assert!(
        e.contains("option \"exclude\": unknown fop \"bogus\"; fops are: lookup,"),
        "{e}"
    );

    // A bad reconfigure is refused and leaves the selection as it was.
    let (cap, _g) = Capture::install(Level::TRACE);
    let sv = trace_over_leaf(&[("include", "lookup")]);
    let bad =
        try_options_for::<Trace>(&[("include", "stat,nope")]).expect("schema accepts strings");
    let e = sv.reconfigure(bad).expect_err("unknown fop");
    assert!(e.contains("\"nope\""), "{e}");
    lookup(&sv, "a").await;
    assert_eq!(cap.take().len(), 2);
}

#[tokio::test]
async fn init_needs_one_child_and_a_known_level() {
    let e = try_build::<Trace>("trace", &[], Vec::new()).expect_err("no child");
    assert!(
        e.contains("debug/trace \"trace\" needs exactly one subvolume, got 0"),
        "{e}"
    );
    let e = try_options_for::<Trace>(&[("log-level", "warn")]).expect_err("not a choice");
    assert!(e.contains("not one of: trace, debug, info"), "{e}");
}
