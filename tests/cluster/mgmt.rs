//! Three hosts managed by xlfs-mgmtd, each a network namespace with its own daemon and state
//! directory, and a client namespace: probe, create a replica 3 volume across them from one
//! peer, start it from another, mount it from the client and write; kill -9 one host's daemon
//! and brick: I/O goes on and `volume set` still works on the majority; the host restarts and
//! catches up (its daemon also starts its brick again), heal converges; cut one host off: it
//! refuses changes while the other two make them; mend: it catches up and all three hold the
//! same log; then add-brick from one peer grows it to 2 x 3 and a rebalance spreads the files;
//! last, remove-brick from another peer moves the files off the first set and takes it out of
//! every peer's description, each daemon stopping its host's removed brick.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use xlfs_integration_tests::bin;

use crate::Mount;
use crate::netns::{Killed, Net};

const HOSTS: usize = 3;
const VOLUME: &str = "gv0";
const BASE_PORT: u16 = 24600;

struct Hosts {
    mount: Option<Mount>,
    daemons: Vec<Option<Killed>>,
    net: Net,
    dir: tempfile::TempDir,
}

impl Hosts {
    fn state(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("h{i}/state"))
    }

    fn brick(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("h{i}/brick"))
    }

    fn start_daemon(&mut self, i: usize) {
        let log = self.dir.path().join(format!("h{i}/mgmtd.log"));
        fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
        let child = self
            .net
            .command(i, &bin("xlfs-mgmtd"))
            .args(["--listen", &self.net.addr(i)])
            .arg("--state-dir")
            .arg(self.state(i))
            .arg("--secret-file")
            .arg(self.dir.path().join("cluster.secret"))
            .args(["--tick-ms", "300", "--peer-timeout-ms", "1000"])
            // Compacted every few entries: the hosts that were away catch up from snapshots.
            .args(["--compact-after", "4"])
            .stdout(Stdio::null())
            .stderr(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .expect("log"),
            )
            .spawn()
            .expect("xlfs-mgmtd");
        self.daemons[i] = Some(Killed(child));
        let file = self.state(i).join("mgmt/daemon.json");
        wait(&format!("daemon {i} up"), Duration::from_secs(20), || {
            fs::read_to_string(&file).is_ok_and(|t| t.contains(&format!("\"pid\":{}", self.pid(i))))
        });
    }

    fn pid(&self, i: usize) -> u32 {
        self.daemons[i].as_ref().map_or(0, |k| k.0.id())
    }

    /// `xlfs ARGS` on host `i` (its namespace and state directory).
    fn xlfs_raw(&self, i: usize, args: &[&str]) -> Output {
        self.net
            .command(i, &bin("xlfs"))
            .args(args)
            .env("XLFS_STATE_DIR", self.state(i))
            .env_remove("XLFS_MGMT_LOCAL")
            .output()
            .expect("xlfs")
    }

    fn xlfs(&self, i: usize, args: &[&str]) -> String {
        let o = self.xlfs_raw(i, args);
        assert!(
            o.status.success(),
            "host {i}: xlfs {args:?}: {}{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            self.logs()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn logs(&self) -> String {
        (0..HOSTS)
            .map(|i| {
                let t = fs::read_to_string(self.dir.path().join(format!("h{i}/mgmtd.log")))
                    .unwrap_or_default();
                format!("--- mgmtd {i} ---\n{t}")
            })
            .collect()
    }

    /// Pids of the processes host `i`'s daemon started for the volume (bricks, heal daemon).
    fn volume_pids(&self, i: usize) -> Vec<u32> {
        let run = self.state(i).join("volumes").join(VOLUME).join("run.json");
        let Ok(text) = fs::read_to_string(run) else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let mut pids: Vec<u32> = v["bricks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["pid"].as_u64())
            .map(|p| p as u32)
            .collect();
        pids.extend(v["shd"]["pid"].as_u64().map(|p| p as u32));
        // A rebalance or remove-brick runner started on this host.
        let status = self
            .state(i)
            .join("volumes")
            .join(VOLUME)
            .join("rebalance.json");
        let status: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(status).unwrap_or_default())
                .unwrap_or_default();
        // Only while it runs: a finished runner's pid may belong to another process now.
        pids.extend(
            status["pid"]
                .as_u64()
                .filter(|p| {
                    fs::read_to_string(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.contains("xlfs-rebalance"))
                })
                .map(|p| p as u32),
        );
        pids
    }

    fn brick_alive(&self, i: usize) -> bool {
        self.bricks_alive(i) > 0
    }

    /// How many bricks host `i`'s daemon started are running.
    fn bricks_alive(&self, i: usize) -> usize {
        let run = self.state(i).join("volumes").join(VOLUME).join("run.json");
        let text = fs::read_to_string(run).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        v["bricks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| {
                b["pid"].as_u64().is_some_and(|p| {
                    fs::read_to_string(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.contains("xlfsd"))
                })
            })
            .count()
    }

    /// Host `i`'s brick of the replica set added by add-brick.
    fn brick2(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("h{i}/brick2"))
    }

    /// How far host `i` applied the log (Raft: the same index, the same entries). The
    /// applied changes themselves differ in form across hosts once compacted (each squashes
    /// at its own point).
    fn log_of(&self, i: usize) -> serde_json::Value {
        let text = fs::read_to_string(self.state(i).join("mgmt/node.json")).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        v["raft"]["applied"].clone()
    }

    /// Kills host `i`'s daemon and the processes it started, with SIGKILL.
    fn kill_host(&mut self, i: usize) {
        self.daemons[i] = None;
        for p in self.volume_pids(i) {
            // SAFETY: kill(2) of a process this test's daemons started.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }

    fn cut_off(&self, i: usize) {
        for j in (0..=HOSTS).filter(|j| *j != i) {
            self.net.cut(i, j);
            self.net.cut(j, i);
        }
    }

    fn mend(&self, i: usize) {
        for j in (0..=HOSTS).filter(|j| *j != i) {
            self.net.mend(i, j);
            self.net.mend(j, i);
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.mount = None;
        for i in 0..HOSTS {
            self.kill_host(i);
        }
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
            let m = fs::read_to_string(self.dir.path().join("mount.log")).unwrap_or_default();
            eprintln!("--- mount ---\n{m}");
            for i in 0..HOSTS {
                let logs = self.state(i).join("volumes").join(VOLUME).join("log");
                for e in fs::read_dir(&logs).into_iter().flatten().flatten() {
                    let t = fs::read_to_string(e.path()).unwrap_or_default();
                    let lines: Vec<&str> = t.lines().filter(|l| l.contains("volfile")).collect();
                    eprintln!(
                        "--- host {i} {} ---\n{}",
                        e.path().display(),
                        lines.join("\n")
                    );
                }
            }
        }
    }
}

fn wait(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write_synced(path: &Path, data: &[u8]) {
    let mut f = File::create(path).expect("create");
    f.write_all(data).expect("write");
    f.sync_all().expect("fsync");
}

#[test]
fn three_hosts_keep_one_configuration_through_a_dead_host_and_a_partition() {
    xlfs_integration_tests::require_e2e!();
    if let Err(why) = crate::netns::available() {
        if std::env::var("XLFS_E2E_REQUIRE").as_deref() == Ok("1") {
            panic!("cannot make network namespaces: {why}");
        }
        println!("SKIPPED: {why}");
        return;
    }
    let net = Net::new("mg", HOSTS + 1, 77);
    let mut h = Hosts {
        mount: None,
        daemons: (0..HOSTS).map(|_| None).collect(),
        net,
        dir: tempfile::tempdir().expect("tempdir"),
    };
    let client = HOSTS;
    for i in 0..HOSTS {
        h.start_daemon(i);
    }

    // Probe the others from host 0.
    for i in 1..HOSTS {
        let out = h.xlfs(0, &["peer", "probe", &h.net.addr(i)]);
        assert!(out.contains("success"), "{out}");
    }
    let pool = h.xlfs(2, &["pool", "list"]);
    assert_eq!(pool.matches("Connected").count(), HOSTS, "{pool}");
    let again = h.xlfs(1, &["peer", "probe", &h.net.addr(2)]);
    assert!(again.contains("already in the pool"), "{again}");

    // Create on host 0, start from host 1.
    let mut create = vec!["volume".to_owned(), "create".into(), VOLUME.into()];
    create.extend(["--replica".into(), "3".into()]);
    create.extend(["--port".into(), BASE_PORT.to_string()]);
    for i in 0..HOSTS {
        create.push(format!("{}:{}", h.net.addr(i), h.brick(i).display()));
    }
    let refs: Vec<&str> = create.iter().map(String::as_str).collect();
    h.xlfs(0, &refs);
    h.xlfs(
        2,
        &[
            "volume",
            "set",
            VOLUME,
            "protocol.client.ping-timeout",
            "2s",
        ],
    );
    h.xlfs(1, &["volume", "start", VOLUME]);
    for i in 0..HOSTS {
        wait(
            &format!("host {i}'s brick started by its daemon"),
            Duration::from_secs(30),
            || h.brick_alive(i),
        );
        let info = h.xlfs(i, &["volume", "info", VOLUME]);
        assert!(info.contains("ping-timeout"), "host {i}: {info}");
    }

    // Mount from the client, fetching from the first host that answers: hosts without
    // ports, so each is asked at its daemon (the bricks listen elsewhere), which serves the
    // client volfile of every volume of the cluster.
    let mnt = h.dir.path().join("mnt");
    fs::create_dir_all(&mnt).expect("mkdir");
    let servers: Vec<String> = (0..HOSTS).map(|i| h.net.addr(i)).collect();
    let mut cmd = h.net.command(client, &bin("xlfs-mount"));
    cmd.arg(format!("{}:/{VOLUME}", servers.join(",")))
        .arg("--secret-file")
        .arg(h.state(0).join("volumes").join(VOLUME).join("secret"));
    h.mount = Some(Mount::start(cmd, &mnt, &h.dir.path().join("mount.log")));
    write_synced(&mnt.join("before"), b"written with three hosts up");

    // Host 2 dies (daemon and brick, kill -9): I/O goes on, the majority changes the volume.
    h.kill_host(2);
    write_synced(&mnt.join("during"), &vec![7u8; 256 * 1024]);
    let f = File::open(mnt.join("before")).expect("open");
    let mut buf = vec![0u8; 27];
    f.read_exact_at(&mut buf, 0).expect("read");
    assert_eq!(&buf, b"written with three hosts up");
    let set = h.xlfs(
        1,
        &[
            "volume",
            "set",
            VOLUME,
            "performance.write-behind.window-size",
            "2MiB",
        ],
    );
    assert!(set.contains("window-size"), "{set}");

    // One `heal info` lists every brick: host 1's from its daemon, host 2's as not reached;
    // both live copies list what host 2 missed.
    let info: serde_json::Value =
        serde_json::from_str(&h.xlfs(0, &["volume", "heal", VOLUME, "info", "--json"]))
            .expect("heal info json");
    let bricks = info["bricks"].as_array().expect("bricks");
    assert_eq!(bricks.len(), HOSTS, "{info}");
    for b in &bricks[..2] {
        let listed = b["entries"].as_array().expect("entries");
        assert!(
            b["reached"] == true && listed.iter().any(|e| e["path"] == "/during"),
            "{info}"
        );
    }
    assert!(
        bricks[2]["reached"] == false && bricks[2]["count"].is_null(),
        "{info}"
    );
    assert!(
        info["unreached_peers"][0]
            .as_str()
            .is_some_and(|a| a.starts_with(&format!("{}:", h.net.addr(2)))),
        "{info}"
    );

    // It comes back: catches up with the change and starts its brick again; heal converges.
    h.start_daemon(2);
    // Host 1 made the change, so its log has it (host 0 may learn of the commit a heartbeat
    // later); host 2 applies it to its state directory a moment after its log has it.
    wait("host 2 catches up", Duration::from_secs(30), || {
        h.log_of(2) == h.log_of(1) && h.log_of(0) == h.log_of(1)
    });
    wait("host 2's brick restarted", Duration::from_secs(30), || {
        h.brick_alive(2)
    });
    wait("host 2 applies the change", Duration::from_secs(10), || {
        h.xlfs(2, &["volume", "info", VOLUME]).contains("2MiB")
    });
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !{
        // Any host's heal info lists every brick's heal index (its peers report theirs).
        let out =
            String::from_utf8_lossy(&h.xlfs_raw(2, &["volume", "heal", VOLUME, "info"]).stdout)
                .into_owned();
        let counts: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("Number of entries"))
            .collect();
        h.brick(2)
            .join("during")
            .metadata()
            .is_ok_and(|m| m.len() == 256 * 1024)
            && counts.len() == HOSTS
            && counts.iter().all(|l| l.ends_with(": 0"))
            || {
                last = out.clone();
                false
            }
    } {
        assert!(
            Instant::now() < deadline,
            "heal does not converge within 60 s: {last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Host 1 is cut off: it refuses changes; the other two make them.
    h.cut_off(1);
    let refused = h.xlfs_raw(
        1,
        &[
            "volume",
            "set",
            VOLUME,
            "performance.write-behind.window-size",
            "4MiB",
        ],
    );
    assert!(!refused.status.success(), "a cut-off host made a change");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("majority"), "{why}");
    // More changes than the logs keep (--compact-after 4): what host 1 lacks is compacted
    // away on the others, so it catches up from a snapshot.
    for size in ["3MiB", "5MiB", "6MiB", "7MiB", "9MiB", "8MiB"] {
        h.xlfs(
            0,
            &[
                "volume",
                "set",
                VOLUME,
                "performance.write-behind.window-size",
                size,
            ],
        );
    }
    write_synced(&mnt.join("cut"), b"written with host 1 cut off");
    let status = h.xlfs_raw(2, &["peer", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("Disconnected"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );

    // Mended: it catches up, and all three hold the same log and description.
    h.mend(1);
    wait("host 1 catches up", Duration::from_secs(30), || {
        h.log_of(1) == h.log_of(0) && h.log_of(2) == h.log_of(0)
    });
    let log1 = fs::read_to_string(h.dir.path().join("h1/mgmtd.log")).unwrap_or_default();
    assert!(
        log1.contains("caught up from a snapshot"),
        "host 1 did not catch up from a snapshot:\n{log1}"
    );
    for i in 0..HOSTS {
        // The daemon applies what it caught up with on its next pass.
        wait(
            &format!("host {i} applies the change"),
            Duration::from_secs(10),
            || h.xlfs(i, &["volume", "info", VOLUME]).contains("8MiB"),
        );
        let info = h.xlfs(i, &["volume", "info", VOLUME]);
        assert!(!info.contains("4MiB"), "host {i}: {info}");
    }
    let pool = h.xlfs(1, &["pool", "list"]);
    assert_eq!(pool.matches("Connected").count(), HOSTS, "{pool}");

    // Grown from any peer: add-brick of a second replica set (a brick on each host) is a
    // cluster change. Each daemon starts its host's new brick; the mount switches to the
    // grown graph with no remount; a rebalance started on one host spreads the files.
    let mut add = vec!["volume".to_owned(), "add-brick".into(), VOLUME.into()];
    for i in 0..HOSTS {
        add.push(format!("{}:{}", h.net.addr(i), h.brick2(i).display()));
    }
    let refs: Vec<&str> = add.iter().map(String::as_str).collect();
    let grown = h.xlfs(2, &refs);
    assert!(grown.contains("decided by a majority"), "{grown}");
    for i in 0..HOSTS {
        wait(
            &format!("host {i}'s new brick started by its daemon"),
            Duration::from_secs(30),
            || h.bricks_alive(i) == 2,
        );
        wait(
            &format!("host {i} describes the grown volume"),
            Duration::from_secs(10),
            || {
                h.xlfs(i, &["volume", "info", VOLUME])
                    .contains(&h.brick2(i).display().to_string())
            },
        );
    }
    let names: Vec<String> = (0..40).map(|n| format!("g{n}")).collect();
    for n in &names {
        write_synced(&mnt.join(n), n.repeat(100).as_bytes());
    }
    h.xlfs(0, &["volume", "rebalance", VOLUME, "start"]);
    // While it runs (held with SIGSTOP), no other host starts a second one, nor grows the
    // volume under it.
    let st: serde_json::Value =
        serde_json::from_str(&h.xlfs(0, &["volume", "rebalance", VOLUME, "status", "--json"]))
            .expect("status json");
    let runner = st["pid"].as_u64().expect("runner pid") as libc::pid_t;
    // SAFETY: plain signals to the runner this test started.
    let held = unsafe { libc::kill(runner, libc::SIGSTOP) } == 0;
    assert!(
        held,
        "the rebalance runner (pid {runner}) ended before it could be held"
    );
    let refused: Vec<(usize, bool, String)> = [
        (2, vec!["volume", "rebalance", VOLUME, "start"]),
        (1, vec!["volume", "add-brick", VOLUME, "10.0.0.1:/nowhere"]),
    ]
    .into_iter()
    .map(|(i, args)| {
        let o = h.xlfs_raw(i, &args);
        let why = String::from_utf8_lossy(&o.stderr).into_owned();
        (
            i,
            !o.status.success() && why.contains("a rebalance on"),
            why,
        )
    })
    .collect();
    // SAFETY: as above. Resumed before any assertion, so a failure leaves no stopped runner.
    unsafe { libc::kill(runner, libc::SIGCONT) };
    for (i, ok, why) in refused {
        assert!(ok, "host {i}: refused while host 0 rebalances? {why}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let st = loop {
        let o = h.xlfs(0, &["volume", "rebalance", VOLUME, "status", "--json"]);
        let st: serde_json::Value = serde_json::from_str(&o).expect("status json");
        if st["state"] != "running" {
            break st;
        }
        assert!(Instant::now() < deadline, "rebalance did not finish: {st}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(st["state"], "completed", "{st}");
    for n in &names {
        assert_eq!(
            fs::read(mnt.join(n)).expect("read after rebalance"),
            n.repeat(100).as_bytes(),
            "{n}"
        );
    }
    // The new set holds files now, the same on its three bricks.
    let listing = |i: usize| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(h.brick2(i))
            .expect("brick2")
            .flatten()
            .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.len() > 0))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let on_new = listing(0);
    assert!(!on_new.is_empty(), "no file moved to the new replica set");
    assert_eq!(listing(1), on_new);
    assert_eq!(listing(2), on_new);
    // The change host 1 asked for while cut off was refused, and stays so: it never lands
    // later (it once did, undoing the add-brick, when its proposal waited in a queue).
    for i in 0..HOSTS {
        let info = h.xlfs(i, &["volume", "info", VOLUME]);
        assert!(!info.contains("4MiB"), "host {i}: {info}");
        assert!(
            info.contains(&h.brick2(i).display().to_string()),
            "host {i}: {info}"
        );
    }
    // One status of the whole cluster, from any peer: every brick's pid, reported by the
    // daemon of the host it runs on.
    let st: serde_json::Value =
        serde_json::from_str(&h.xlfs(1, &["volume", "status", VOLUME, "--json"])).expect("json");
    let bricks = st["bricks"].as_array().expect("bricks");
    assert_eq!(bricks.len(), 2 * HOSTS, "{st}");
    assert!(
        bricks
            .iter()
            .all(|b| b["online"] == true && b["pid"].as_u64().is_some()),
        "{st}"
    );
    let peers = st["peers"].as_array().expect("peers");
    assert_eq!(peers.len(), HOSTS - 1, "{st}");
    assert!(peers.iter().all(|p| p["reached"] == true), "{st}");

    // Shrunk from another peer: remove-brick of the first set. Its start and commit are
    // cluster changes; the runner moves the files on the host it was started on; each
    // daemon stops its own removed brick.
    let mut remove = vec!["volume".to_owned(), "remove-brick".into(), VOLUME.into()];
    for i in 0..HOSTS {
        remove.push(format!("{}:{}", h.net.addr(i), h.brick(i).display()));
    }
    let start: Vec<&str> = remove.iter().map(String::as_str).chain(["start"]).collect();
    let o = h.xlfs(1, &start);
    assert!(o.contains("decided by a majority"), "{o}");
    for i in 0..HOSTS {
        let info = h.xlfs(i, &["volume", "info", VOLUME]);
        assert!(info.contains("decommissioned"), "host {i}: {info}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let st = loop {
        let o = h.xlfs(1, &["volume", "remove-brick", VOLUME, "status", "--json"]);
        let st: serde_json::Value = serde_json::from_str(&o).expect("status json");
        if st["state"] != "running" {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "remove-brick did not finish: {st}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(st["state"], "completed", "{st}");
    let commit: Vec<&str> = remove
        .iter()
        .map(String::as_str)
        .chain(["commit"])
        .collect();
    let o = h.xlfs(1, &commit);
    assert!(o.contains("each peer stops its removed bricks"), "{o}");
    let old_brick = |i: usize, info: &str| {
        let p = h.brick(i).display().to_string();
        info.lines().any(|l| l.trim_end().ends_with(&p))
    };
    for i in 0..HOSTS {
        wait(
            &format!("host {i}'s daemon stops its removed brick"),
            Duration::from_secs(30),
            || h.bricks_alive(i) == 1,
        );
        let info = h.xlfs(i, &["volume", "info", VOLUME]);
        assert!(!old_brick(i, &info), "host {i}: {info}");
        assert!(!info.contains("decommissioned"), "host {i}: {info}");
    }
    for n in &names {
        assert_eq!(
            fs::read(mnt.join(n)).expect("read after remove-brick"),
            n.repeat(100).as_bytes(),
            "{n}"
        );
    }
    let all: Vec<String> = fs::read_dir(&mnt)
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for n in &names {
        assert!(all.contains(n), "{n} not listed: {all:?}");
    }
}
