//! The runner against a fake cluster/distribute: a translator over an in-memory leaf that
//! answers the three virtual xattrs from a script and records them. Checks the crawl order,
//! the counting, that a skipped or failed file keeps its directory uncommitted, the bound on
//! migrations in flight, stop + restart and crash + restart resuming without resending done
//! directories, loud failure against a distribute that does not know the xattrs, and a
//! restart from the root when the bricks change, and the retries of transient skips.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xlator_api::abi_stable::std_types::RString;
use xlator_api::{Buf, Ctx, Errno, Gfid, Init, Loc, Subvol, Translator};
use xlfs_rebalance::crawl::Retry;
use xlfs_rebalance::dht::{COMMIT_LAYOUT, FIX_LAYOUT, MIGRATE_LINKS_PREFIX, MIGRATE_PREFIX};
use xlfs_rebalance::status::{self, Begin, Mode, State, Status};
use xlfs_rebalance::{Config, Stop, Target, run};
use xlfs_testkit::MemLeaf;
use xlfs_testkit::fixtures::fd;

/// A virtual xattr the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Fix(String),
    Migrate {
        file: Gfid,
        parent: Gfid,
        name: String,
    },
    /// The names as `<parent GFID>/<name>`.
    MigrateLinks {
        file: Gfid,
        names: Vec<(Gfid, String)>,
    },
    Commit(String),
}

type Answer = Box<dyn Fn(&Call) -> Result<String, Errno> + Send + Sync>;

/// What the fake answers, and what it saw.
struct Script {
    /// Directory and file names by GFID, for readable calls.
    names: Mutex<BTreeMap<Gfid, String>>,
    calls: Mutex<Vec<Call>>,
    answer: Mutex<Answer>,
    delay: Duration,
    inflight: AtomicUsize,
    max_inflight: AtomicUsize,
}

impl Script {
    fn new(answer: Answer, delay: Duration) -> Arc<Script> {
        Arc::new(Script {
            names: Mutex::new(BTreeMap::new()),
            calls: Mutex::new(Vec::new()),
            answer: Mutex::new(answer),
            delay,
            inflight: AtomicUsize::new(0),
            max_inflight: AtomicUsize::new(0),
        })
    }
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("calls").clone()
    }
    /// The calls as short strings: `fix /d1`, `migrate /d1/x`, `commit /d1`.
    fn trace(&self) -> Vec<String> {
        let names = self.names.lock().expect("names");
        let n = |g: &Gfid| names.get(g).cloned().unwrap_or_else(|| g.to_string());
        self.calls()
            .iter()
            .map(|c| match c {
                Call::Fix(d) => format!("fix {d}"),
                Call::Commit(d) => format!("commit {d}"),
                Call::Migrate { parent, name, .. } => {
                    let p = n(parent);
                    format!("migrate {}{name}", if p == "/" { p } else { p + "/" })
                }
                Call::MigrateLinks { names: all, .. } => {
                    let mut paths: Vec<String> = all
                        .iter()
                        .map(|(parent, name)| {
                            let p = n(parent);
                            format!("{}{name}", if p == "/" { p } else { p + "/" })
                        })
                        .collect();
                    paths.sort();
                    format!("migrate-links {}", paths.join(" "))
                }
            })
            .collect()
    }
    fn set_answer(&self, a: Answer) {
        *self.answer.lock().expect("answer") = a;
    }
}

static SCRIPTS: Mutex<BTreeMap<String, Arc<Script>>> = Mutex::new(BTreeMap::new());

struct FakeDht {
    children: Vec<Subvol>,
    script: Arc<Script>,
}

impl Translator for FakeDht {
    const TYPE: &'static str = "test/fake-distribute";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        let script = SCRIPTS
            .lock()
            .expect("scripts")
            .get(&init.name)
            .cloned()
            .ok_or("no script")?;
        Ok(FakeDht {
            children: init.children,
            script,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn getxattr(&self, cx: &Ctx, gfid: Gfid, name: RString) -> Result<Buf, Errno> {
        let s = &self.script;
        let path = |g: Gfid| {
            s.names
                .lock()
                .expect("names")
                .get(&g)
                .cloned()
                .unwrap_or_else(|| g.to_string())
        };
        let call = if name.as_str() == FIX_LAYOUT {
            Call::Fix(path(gfid))
        } else if name.as_str() == COMMIT_LAYOUT {
            Call::Commit(path(gfid))
        } else if let Some(rest) = name.as_str().strip_prefix(MIGRATE_LINKS_PREFIX) {
            let parts: Vec<&str> = rest.split('/').collect();
            let mut names = Vec::new();
            for pair in parts.chunks(2) {
                let [p, n] = pair else {
                    return Err(Errno::EINVAL);
                };
                names.push((Gfid::parse(p).ok_or(Errno::EINVAL)?, (*n).to_owned()));
            }
            Call::MigrateLinks { file: gfid, names }
        } else if let Some(rest) = name.as_str().strip_prefix(MIGRATE_PREFIX) {
            let (p, n) = rest.split_once('/').ok_or(Errno::EINVAL)?;
            Call::Migrate {
                file: gfid,
                parent: Gfid::parse(p).ok_or(Errno::EINVAL)?,
                name: n.to_owned(),
            }
        } else {
            return self.children[0].getxattr(cx, gfid, name).await;
        };
        s.calls.lock().expect("calls").push(call.clone());
        let now = s.inflight.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_inflight.fetch_max(now, Ordering::SeqCst);
        if !s.delay.is_zero() {
            tokio::time::sleep(s.delay).await;
        }
        let r = (s.answer.lock().expect("answer"))(&call);
        s.inflight.fetch_sub(1, Ordering::SeqCst);
        r.map(|t| Buf::from_vec(t.into_bytes()))
    }
}

xlator_api::export_translators!(FakeDht);

/// A volume: the fake over a memory leaf, with the tree made through it.
struct Vol {
    top: Subvol,
    script: Arc<Script>,
    gfids: BTreeMap<String, Gfid>,
    _dir: tempfile::TempDir,
    status: PathBuf,
}

/// Builds a tree: paths ending in `/` are directories, `@` prefixes a symlink's name, and
/// `NEW=OLD` makes NEW a hard link to the file OLD.
async fn volume(test: &str, paths: &[&str], answer: Answer, delay: Duration) -> Vol {
    let script = Script::new(answer, delay);
    SCRIPTS
        .lock()
        .expect("scripts")
        .insert(test.to_owned(), script.clone());
    let leaf = MemLeaf::new();
    let top = xlfs_testkit::build::try_build::<FakeDht>(test, &[], vec![leaf]).expect("fake");
    let cx = Ctx::root();
    let mut gfids = BTreeMap::from([("/".to_owned(), Gfid::ROOT)]);
    for (i, p) in paths.iter().enumerate() {
        let is_dir = p.ends_with('/');
        let (p, link_to) = match p.split_once('=') {
            Some((new, old)) => (new, Some(gfids[old])),
            None => (p.trim_end_matches('/'), None),
        };
        let (parent, name) = p.rsplit_once('/').expect("absolute");
        let parent = if parent.is_empty() { "/" } else { parent };
        let pg = gfids[parent];
        let (name, link) = match name.strip_prefix('@') {
            Some(n) => (n, true),
            None => (name, false),
        };
        let loc = Loc::new(pg, name);
        let g = if let Some(old) = link_to {
            top.link(&cx, old, loc).await.expect("link").attr.gfid
        } else if is_dir {
            top.mkdir(&cx, loc, 0o755, 0)
                .await
                .expect("mkdir")
                .attr
                .gfid
        } else if link {
            top.symlink(&cx, loc, "target".into())
                .await
                .expect("symlink")
                .attr
                .gfid
        } else {
            let f = fd(1000 + i as u64, Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
            let e = top.create(&cx, loc, f, 0o644, 0).await.expect("create");
            top.release(
                &cx,
                xlator_api::Fd {
                    gfid: e.attr.gfid,
                    ..f
                },
            )
            .await
            .expect("release");
            e.attr.gfid
        };
        let full = if parent == "/" {
            format!("/{name}")
        } else {
            format!("{parent}/{name}")
        };
        gfids.insert(full, g);
    }
    script
        .names
        .lock()
        .expect("names")
        .extend(gfids.iter().map(|(p, g)| (*g, p.clone())));
    let dir = tempfile::tempdir().expect("tempdir");
    let status = dir.path().join("rebalance.json");
    Vol {
        top,
        script,
        gfids,
        _dir: dir,
        status,
    }
}

/// Answers by the call's trace form (`migrate /d1/x`); everything else as the contract's
/// success (fixed, in-place, trusted).
fn answers(table: &[(&str, Result<&str, Errno>)]) -> Answer {
    let table: BTreeMap<String, Result<String, Errno>> = table
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
        .collect();
    Box::new(move |c| {
        let key = match c {
            Call::Fix(d) => format!("fix {d}"),
            Call::Commit(d) => format!("commit {d}"),
            Call::Migrate { name, .. } => format!("migrate {name}"),
            Call::MigrateLinks { .. } => "migrate-links".to_owned(),
        };
        table.get(&key).cloned().unwrap_or_else(|| {
            Ok(match c {
                Call::Fix(_) => "fixed",
                Call::Migrate { .. } | Call::MigrateLinks { .. } => "in-place",
                Call::Commit(_) => "trusted",
            }
            .to_owned())
        })
    })
}

fn cfg(v: &Vol, parallel: usize) -> Config {
    Config {
        parallel,
        status_every: Duration::from_millis(20),
        retry: Retry {
            rounds: 3,
            delay: Duration::from_millis(10),
        },
        ..Config::new(v.status.clone())
    }
}

/// One start as the binary does it: the status file read, resume or fresh, then the run.
async fn start(target: Arc<dyn Target>, cfg: &Config, stop: Stop) -> (Status, Begin) {
    let prev = status::load(&cfg.status_path).expect("status file");
    let (s, how) = status::begin(
        prev,
        Mode::Rebalance,
        false,
        target.topology(),
        std::process::id(),
        status::now_s(),
    );
    let end = run(target, s, cfg, stop).await.expect("run");
    let on_disk = status::load(&cfg.status_path)
        .expect("load")
        .expect("written");
    // Floats through JSON: equal to a few ulps.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
    assert!(
        close(on_disk.rate_files_per_s, end.rate_files_per_s),
        "{on_disk:?}"
    );
    assert!(
        close(on_disk.rate_bytes_per_s, end.rate_bytes_per_s),
        "{on_disk:?}"
    );
    let strip = |s: &Status| Status {
        rate_files_per_s: 0.0,
        rate_bytes_per_s: 0.0,
        ..s.clone()
    };
    assert_eq!(
        strip(&on_disk),
        strip(&end),
        "the file holds the final status"
    );
    (end, how)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawls_breadth_first_counts_every_answer_and_commits_only_clean_directories() {
    let v = volume(
        "order",
        &[
            "/a", "/b", "/d1/", "/d2/", "/d1/x", "/d1/@s", "/d1/d3/", "/d2/y", "/d2/z",
        ],
        answers(&[
            ("migrate a", Ok("moved 100")),
            ("migrate x", Ok("moved 5")),
            ("migrate s", Ok("skipped not-a-file")),
            ("migrate y", Ok("skipped hard-links")),
            ("migrate z", Err(Errno::ENOENT)),
            ("fix /d1", Ok("unchanged")),
        ]),
        Duration::ZERO,
    )
    .await;
    let (end, how) = start(Arc::new(v.top.clone()), &cfg(&v, 1), Stop::new()).await;
    assert_eq!(how, Begin::Fresh(None));
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /",
            "migrate /a",
            "migrate /b",
            "commit /",
            "fix /d1",
            "migrate /d1/x",
            "migrate /d1/s",
            // /d1/s was skipped: no commit of /d1.
            "fix /d2",
            "migrate /d2/y",
            "migrate /d2/z",
            "fix /d1/d3",
            "commit /d1/d3",
        ])
    );
    // Each migrate names the file by its GFID and its parent's.
    for c in v.script.calls() {
        if let Call::Migrate { file, parent, name } = c {
            let path = v
                .gfids
                .iter()
                .find(|(_, g)| **g == file)
                .map(|(p, _)| p.clone());
            let pp = v
                .gfids
                .iter()
                .find(|(_, g)| **g == parent)
                .map(|(p, _)| p.clone());
            let pp = pp.expect("parent known");
            let want = if pp == "/" {
                format!("/{name}")
            } else {
                format!("{pp}/{name}")
            };
            assert_eq!(path, Some(want));
        }
    }
    assert_eq!(end.state, State::Completed);
    assert_eq!(
        (end.files_scanned, end.files_moved, end.bytes_moved),
        (6, 2, 105)
    );
    assert_eq!(
        (end.files_skipped, end.files_vanished, end.failures),
        (2, 1, 0)
    );
    assert_eq!(end.dirs_done, 4);
    // Directories with skipped files are done (skips are answers), only not committed.
    let g = |p: &str| v.gfids[p].to_string();
    assert_eq!(end.done_dirs, vec![g("/"), g("/d1"), g("/d2"), g("/d1/d3")]);
    assert_eq!(end.last_error, None);
    assert!(end.finished.is_some() && end.eta_s == Some(0.0));
    // The memory leaf's statfs: the root and the nine entries in use.
    assert_eq!(end.files_total_estimate, Some(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_bounds_the_migrations_in_flight() {
    let files: Vec<String> = (0..12).map(|i| format!("/f{i}")).collect();
    let paths: Vec<&str> = files.iter().map(String::as_str).collect();
    for parallel in [1, 3] {
        let v = volume(
            &format!("parallel{parallel}"),
            &paths,
            answers(&[]),
            Duration::from_millis(30),
        )
        .await;
        let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, parallel), Stop::new()).await;
        assert_eq!((end.state, end.files_scanned), (State::Completed, 12));
        assert_eq!(v.script.max_inflight.load(Ordering::SeqCst), parallel);
        // The commit waited for every migration.
        assert_eq!(
            v.script.trace().last().map(String::as_str),
            Some("commit /")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_then_a_start_resumes_without_resending_done_directories() {
    let stop = Stop::new();
    let on_x2 = stop.clone();
    let v = volume(
        "stop",
        &["/a", "/d1/", "/d2/", "/d1/x1", "/d1/x2", "/d1/x3", "/d2/y"],
        Box::new(move |c| {
            if matches!(c, Call::Migrate { name, .. } if name == "x2") {
                on_x2.request();
            }
            answers(&[("migrate a", Ok("moved 7"))])(c)
        }),
        Duration::ZERO,
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(v.top.clone());
    let (end, _) = start(target.clone(), &cfg(&v, 1), stop).await;
    assert_eq!(end.state, State::Stopped);
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /",
            "migrate /a",
            "commit /",
            "fix /d1",
            "migrate /d1/x1",
            "migrate /d1/x2"
        ])
    );
    assert_eq!(end.done_dirs, vec![Gfid::ROOT.to_string()]);
    assert_eq!(
        (end.files_scanned, end.files_moved, end.bytes_moved),
        (3, 1, 7)
    );
    assert!(end.finished.is_some());

    v.script.calls.lock().expect("calls").clear();
    v.script.set_answer(answers(&[]));
    let (end, how) = start(target, &cfg(&v, 1), Stop::new()).await;
    assert_eq!(
        how,
        Begin::Resumed {
            from: State::Stopped,
            done_dirs: 1
        }
    );
    // The root and its file are not sent again; /d1 is redone whole.
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /d1",
            "migrate /d1/x1",
            "migrate /d1/x2",
            "migrate /d1/x3",
            "commit /d1",
            "fix /d2",
            "migrate /d2/y",
            "commit /d2",
        ])
    );
    assert_eq!(end.state, State::Completed);
    // Counters kept (x1 and x2 answered twice: the unfinished directory is redone).
    assert_eq!(
        (end.files_scanned, end.files_moved, end.bytes_moved),
        (7, 1, 7)
    );
    assert_eq!(end.dirs_done, 3);
    assert_eq!(end.done_dirs.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_leaves_running_and_the_next_start_resumes() {
    let v = volume(
        "crash",
        &["/a", "/d1/", "/d1/x"],
        answers(&[]),
        Duration::ZERO,
    )
    .await;
    // What a kill -9 in /d1 leaves: state running, a dead pid, the root done.
    let mut dead = std::process::Command::new("true").spawn().expect("spawn");
    let pid = dead.id();
    dead.wait().expect("wait");
    let mut s0 = Status::fresh(Mode::Rebalance, pid, status::now_s() - 60, None);
    s0.files_scanned = 1;
    s0.dirs_done = 1;
    s0.done_dirs = vec![Gfid::ROOT.to_string()];
    status::store(&v.status, &s0).expect("store");
    let (end, how) = start(Arc::new(v.top.clone()), &cfg(&v, 2), Stop::new()).await;
    assert_eq!(
        how,
        Begin::Resumed {
            from: State::Running,
            done_dirs: 1
        }
    );
    assert_eq!(
        v.script.trace(),
        s(&["fix /d1", "migrate /d1/x", "commit /d1"])
    );
    assert_eq!(end.state, State::Completed);
    assert_eq!(
        (end.files_scanned, end.dirs_done, end.started),
        (2, 2, s0.started)
    );
    assert_eq!(end.pid, std::process::id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distribute_without_the_xattrs_fails_loudly() {
    let v = volume(
        "old",
        &["/a", "/d1/", "/d1/x"],
        Box::new(|_| Err(Errno::ENODATA)),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 4), Stop::new()).await;
    assert_eq!(end.state, State::Failed);
    assert_eq!(
        v.script.trace(),
        s(&["fix /"]),
        "nothing is sent after a fatal answer"
    );
    let e = end.last_error.expect("last_error");
    assert!(
        e.contains("xlfs.dht.fix-layout") && e.contains("ENODATA"),
        "{e}"
    );
    assert_eq!((end.failures, end.files_scanned, end.dirs_done), (1, 0, 0));
    assert!(end.done_dirs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_outside_the_contract_fails_the_run() {
    let v = volume(
        "unknown",
        &["/a", "/d1/", "/d1/x"],
        answers(&[("migrate a", Ok("moved quickly"))]),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 4), Stop::new()).await;
    assert_eq!(end.state, State::Failed);
    assert_eq!(v.script.trace(), s(&["fix /", "migrate /a"]));
    let e = end.last_error.expect("last_error");
    assert!(
        e.contains("xlfs.dht.migrate:") && e.contains("moved quickly"),
        "{e}"
    );
    assert!(end.done_dirs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_file_keeps_its_directory_for_the_next_start() {
    let v = volume(
        "failed",
        &["/d1/", "/d2/", "/d1/x", "/d1/w", "/d2/y"],
        answers(&[("migrate x", Err(Errno::EIO))]),
        Duration::ZERO,
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(v.top.clone());
    let (end, _) = start(target.clone(), &cfg(&v, 1), Stop::new()).await;
    // The run goes on past the failure, then ends failed.
    assert_eq!(end.state, State::Failed);
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /",
            "commit /",
            "fix /d1",
            "migrate /d1/x",
            "migrate /d1/w",
            "fix /d2",
            "migrate /d2/y",
            "commit /d2",
        ])
    );
    let e = end.last_error.clone().expect("last_error");
    assert!(
        e.contains("xlfs.dht.migrate:") && e.contains("/d1/x") && e.contains("EIO"),
        "{e}"
    );
    let g = |p: &str| v.gfids[p].to_string();
    assert_eq!(end.done_dirs, vec![g("/"), g("/d2")]);
    assert_eq!(end.failures, 1);

    v.script.calls.lock().expect("calls").clear();
    v.script.set_answer(answers(&[]));
    let (end, how) = start(target, &cfg(&v, 1), Stop::new()).await;
    assert_eq!(
        how,
        Begin::Resumed {
            from: State::Failed,
            done_dirs: 2
        }
    );
    assert_eq!(
        v.script.trace(),
        s(&["fix /d1", "migrate /d1/x", "migrate /d1/w", "commit /d1"])
    );
    // This run had no failure: completed (the counter keeps the earlier one).
    assert_eq!(
        (end.state, end.failures, end.last_error),
        (State::Completed, 1, None)
    );
}

/// A fake top whose topology the test changes.
struct Moving {
    top: Subvol,
    topology: Arc<Mutex<String>>,
}

impl Target for Moving {
    fn top(&self) -> Subvol {
        self.top.clone()
    }
    fn topology(&self) -> Option<String> {
        Some(self.topology.lock().expect("topology").clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bricks_changing_mid_run_start_the_crawl_again_from_the_root() {
    let topology = Arc::new(Mutex::new("dht=c0,c1".to_owned()));
    let t = topology.clone();
    let v = volume(
        "topology",
        &["/d1/", "/d2/", "/d1/x"],
        Box::new(move |c| {
            if matches!(c, Call::Migrate { name, .. } if name == "x") {
                // add-brick while /d1 is being done: from the next directory on.
                *t.lock().expect("t") = "dht=c0,c1,c2".to_owned();
            }
            answers(&[])(c)
        }),
        Duration::ZERO,
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(Moving {
        top: v.top.clone(),
        topology: topology.clone(),
    });
    let (end, _) = start(target, &cfg(&v, 1), Stop::new()).await;
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /",
            "commit /",
            "fix /d1",
            "migrate /d1/x",
            "commit /d1",
            // The bricks changed: everything again under the new topology.
            "fix /",
            "commit /",
            "fix /d1",
            "migrate /d1/x",
            "commit /d1",
            "fix /d2",
            "commit /d2",
        ])
    );
    assert_eq!(end.state, State::Completed);
    assert_eq!(end.topology.as_deref(), Some("dht=c0,c1,c2"));
    let g = |p: &str| v.gfids[p].to_string();
    assert_eq!(end.done_dirs, vec![g("/"), g("/d1"), g("/d2")]);
    // A later start with yet other bricks throws the record away.
    let (s1, how) = status::begin(
        Some(Status {
            state: State::Stopped,
            ..end
        }),
        Mode::Rebalance,
        false,
        Some("dht=c0,c1,c2,c3".into()),
        1,
        2,
    );
    assert!(matches!(how, Begin::Fresh(Some(_))) && s1.done_dirs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_in_the_status_file_while_the_run_goes() {
    let v = volume(
        "progress",
        &["/a", "/b", "/c"],
        answers(&[]),
        Duration::from_millis(300),
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(v.top.clone());
    let c = cfg(&v, 1);
    let path = v.status.clone();
    let runner = tokio::spawn(async move { start(target, &c, Stop::new()).await });
    // Within the second migration (fix 300 ms, a 300 ms, b...).
    tokio::time::sleep(Duration::from_millis(750)).await;
    let mid = status::load(&path).expect("load").expect("written");
    assert_eq!((mid.state, mid.pid), (State::Running, std::process::id()));
    assert!(mid.files_scanned >= 1 && mid.files_scanned < 3, "{mid:?}");
    assert!(mid.rate_files_per_s > 0.0, "{mid:?}");
    assert_eq!(mid.finished, None);
    let (end, _) = runner.await.expect("join");
    assert_eq!((end.state, end.files_scanned), (State::Completed, 3));
}

/// Answers `skipped <why>` to the migrate of `name` its first `times` times, then in-place.
fn skip_first(name: &'static str, why: &'static str, times: usize) -> Answer {
    let seen = AtomicUsize::new(0);
    Box::new(move |c| match c {
        Call::Migrate { name: n, .. }
            if n == name && seen.fetch_add(1, Ordering::SeqCst) < times =>
        {
            Ok(format!("skipped {why}"))
        }
        _ => answers(&[])(c),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_skip_is_retried_after_the_crawl_then_its_directory_committed() {
    let v = volume(
        "retry",
        &["/d1/", "/d2/", "/d1/x", "/d1/w", "/d2/y"],
        skip_first("x", "busy", 2),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 1), Stop::new()).await;
    assert_eq!(
        v.script.trace(),
        s(&[
            "fix /",
            "commit /",
            "fix /d1",
            "migrate /d1/x",
            "migrate /d1/w",
            "fix /d2",
            "migrate /d2/y",
            "commit /d2",
            // Retry rounds: busy once more, then in place, then the commit.
            "migrate /d1/x",
            "migrate /d1/x",
            "commit /d1",
        ])
    );
    assert_eq!(end.state, State::Completed);
    // Scanned once each; no longer skipped.
    assert_eq!((end.files_scanned, end.files_skipped), (3, 0));
    let g = |p: &str| v.gfids[p].to_string();
    assert_eq!(end.done_dirs, vec![g("/"), g("/d2"), g("/d1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_end_after_their_rounds_and_permanent_skips_are_not_retried() {
    let v = volume(
        "retry-rounds",
        &["/d1/", "/d1/x", "/d1/h"],
        Box::new(|c| match c {
            Call::Migrate { name, .. } if name == "x" => Ok("skipped locked".into()),
            Call::Migrate { name, .. } if name == "h" => Ok("skipped hard-links".into()),
            _ => answers(&[])(c),
        }),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 2), Stop::new()).await;
    let trace = v.script.trace();
    assert_eq!(
        trace.iter().filter(|c| *c == "migrate /d1/x").count(),
        4,
        "{trace:?}"
    );
    assert_eq!(
        trace.iter().filter(|c| *c == "migrate /d1/h").count(),
        1,
        "{trace:?}"
    );
    assert!(!trace.contains(&"commit /d1".to_owned()), "{trace:?}");
    assert_eq!(end.state, State::Completed);
    assert_eq!((end.files_scanned, end.files_skipped), (2, 2));
    // Done (uncommitted) once the rounds are over.
    assert_eq!(end.done_dirs.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_the_retries_leaves_the_directory_to_the_next_start() {
    let v = volume(
        "retry-stop",
        &["/d1/", "/d1/x"],
        skip_first("x", "busy", 1),
        Duration::ZERO,
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(v.top.clone());
    let stop = Stop::new();
    let mut c = cfg(&v, 1);
    c.retry.delay = Duration::from_secs(30);
    let s2 = stop.clone();
    let path = v.status.clone();
    // Stop once the crawl is over and the retry pause began (the status file shows x).
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if let Ok(Some(s)) = status::load(&path)
                && s.files_skipped == 1
            {
                s2.request();
                return;
            }
        }
    });
    let t = std::time::Instant::now();
    let (end, _) = start(target.clone(), &c, stop).await;
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the pause did not end on the stop"
    );
    assert_eq!(end.state, State::Stopped);
    assert_eq!(end.done_dirs, vec![Gfid::ROOT.to_string()]);

    v.script.calls.lock().expect("calls").clear();
    let (end, _) = start(target, &cfg(&v, 1), Stop::new()).await;
    assert_eq!(
        v.script.trace(),
        s(&["fix /d1", "migrate /d1/x", "commit /d1"])
    );
    assert_eq!((end.state, end.done_dirs.len()), (State::Completed, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bricks_changing_with_retries_pending_redo_the_directory_once() {
    let topology = Arc::new(Mutex::new("dht=c0,c1".to_owned()));
    let t = topology.clone();
    let busy_once = skip_first("x", "busy", 1);
    let v = volume(
        "topology-retry",
        &["/d1/", "/d2/", "/d3/", "/d1/x"],
        Box::new(move |c| {
            if matches!(c, Call::Fix(d) if d == "/d2") {
                *t.lock().expect("t") = "dht=c0,c1,c2".to_owned();
            }
            busy_once(c)
        }),
        Duration::ZERO,
    )
    .await;
    let target: Arc<dyn Target> = Arc::new(Moving {
        top: v.top.clone(),
        topology,
    });
    let (end, _) = start(target, &cfg(&v, 1), Stop::new()).await;
    let trace = v.script.trace();
    // /d1 waited for its retry when the bricks changed: redone from the root, committed once.
    assert_eq!(
        trace.iter().filter(|c| *c == "commit /d1").count(),
        1,
        "{trace:?}"
    );
    assert_eq!(end.state, State::Completed);
    assert!(
        trace.iter().filter(|c| *c == "fix /").count() == 2,
        "no restart: {trace:?}"
    );
    assert_eq!((end.done_dirs.len(), end.files_skipped), (4, 0), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_hard_links_is_sent_once_with_all_its_names_after_the_crawl() {
    let sent = AtomicUsize::new(0);
    let v = volume(
        "hard-links",
        &["/d1/", "/d2/", "/d1/h", "/d2/l=/d1/h", "/d1/x"],
        Box::new(move |c| match c {
            Call::Migrate { name, .. } if name == "h" || name == "l" => {
                Ok("skipped hard-links".into())
            }
            // Busy the first time: sent again in the retry round.
            Call::MigrateLinks { .. } if sent.fetch_add(1, Ordering::SeqCst) == 0 => {
                Ok("skipped busy".into())
            }
            Call::MigrateLinks { .. } => Ok("moved 10".into()),
            _ => answers(&[])(c),
        }),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 1), Stop::new()).await;
    let trace = v.script.trace();
    let tail = &trace[trace.len() - 4..];
    assert_eq!(
        tail,
        s(&[
            "migrate-links /d1/h /d2/l",
            "migrate-links /d1/h /d2/l",
            "commit /d1",
            "commit /d2",
        ]),
        "{trace:?}"
    );
    assert!(
        !trace[..trace.len() - 4]
            .iter()
            .any(|c| c.starts_with("commit /d")),
        "a directory committed before its file with hard links moved: {trace:?}"
    );
    let calls = v.script.calls();
    let Some(Call::MigrateLinks { file, .. }) = calls
        .iter()
        .find(|c| matches!(c, Call::MigrateLinks { .. }))
    else {
        panic!("no migrate-links")
    };
    assert_eq!(*file, v.gfids["/d1/h"]);
    assert_eq!(end.state, State::Completed);
    assert_eq!(
        (
            end.files_scanned,
            end.files_skipped,
            end.files_moved,
            end.bytes_moved
        ),
        (3, 0, 1, 10)
    );
    assert_eq!(end.done_dirs.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_names_were_not_all_found_stays_skipped() {
    let v = volume(
        "hard-links-missing",
        &["/d1/", "/d2/", "/d1/h", "/d2/l=/d1/h"],
        // Only one of the two names is refused (the other answered as if placed): the crawl
        // finds one name of a file with two.
        Box::new(|c| match c {
            Call::Migrate { name, .. } if name == "h" => Ok("skipped hard-links".into()),
            _ => answers(&[])(c),
        }),
        Duration::ZERO,
    )
    .await;
    let (end, _) = start(Arc::new(v.top.clone()), &cfg(&v, 2), Stop::new()).await;
    let trace = v.script.trace();
    assert!(
        !trace.iter().any(|c| c.starts_with("migrate-links")),
        "{trace:?}"
    );
    assert!(!trace.contains(&"commit /d1".to_owned()), "{trace:?}");
    assert!(trace.contains(&"commit /d2".to_owned()), "{trace:?}");
    assert_eq!(end.state, State::Completed);
    assert_eq!((end.files_scanned, end.files_skipped), (2, 1));
    // Done, uncommitted.
    assert_eq!(end.done_dirs.len(), 3);
}
