//! Brick lifecycle: one xlfsd per brick directory (a second one exits naming the first's pid;
//! the lock goes with the process, kill -9 included), and a new brick never takes over the
//! live Unix socket of another.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Kills and reaps the child when dropped (also when a test fails).
struct Brick(Child);

impl Drop for Brick {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn xlfsd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xlfsd"));
    c.args(["--log-level", "warn"]);
    c
}

/// Starts `cmd` (with --print-port) and waits for its port line.
fn start(mut cmd: Command) -> (Brick, u16) {
    let mut child = cmd
        .arg("--print-port")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn xlfsd");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).expect("read port");
    let brick = Brick(child);
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("port line {line:?}"));
    (brick, port)
}

fn on_dir(dir: &Path) -> Command {
    let mut c = xlfsd();
    c.args(["--brick", &dir.display().to_string(), "--port", "0"]);
    c
}

/// Runs `cmd` to its end (at most 20 s: it must refuse to start, not serve).
fn run_to_end(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn xlfsd");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "xlfsd did not exit: it serves; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn a_second_xlfsd_on_one_brick_directory_exits_naming_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut first, _port) = start(on_dir(dir.path()));
    let out = run_to_end(on_dir(dir.path()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second xlfsd ran: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("pid {}", first.0.id())) && err.contains("already served"),
        "names the first xlfsd: {err}"
    );
    // The first still holds the directory; once it is killed (-9: no clean exit) the lock
    // is gone with it and a new xlfsd starts.
    assert!(
        first.0.try_wait().expect("wait").is_none(),
        "the first exited"
    );
    first.0.kill().expect("kill -9");
    first.0.wait().expect("reap");
    let (again, _) = start(on_dir(dir.path()));
    drop(again);
}

fn server_volfile(brick: &Path, host: &str, port: u16, sockets: &Path) -> String {
    format!(
        r#"(volumes: [
            (name: "posix", type: "storage/posix", options: {{ "directory": {brick:?} }}),
            (name: "srv", type: "protocol/server", subvolumes: ["posix"], options: {{
                "listen-host": {host:?}, "listen-port": "{port}",
                "unix-socket-dir": {sockets:?}, "volume-name": "vol0" }}),
        ])"#,
        brick = brick.display().to_string(),
        sockets = sockets.display().to_string(),
    )
}

/// Two bricks on one port on two loopback addresses would share `brick-<port>.sock`: the
/// second refuses to start, naming the first's pid, and the first's socket still answers.
#[test]
fn a_new_brick_never_takes_over_a_live_unix_socket() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (b1, b2, sockets) = (
        tmp.path().join("b1"),
        tmp.path().join("b2"),
        tmp.path().join("s"),
    );
    for d in [&b1, &b2, &sockets] {
        std::fs::create_dir(d).expect("mkdir");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let v1 = tmp.path().join("b1.vol");
    std::fs::write(&v1, server_volfile(&b1, "127.0.0.1", port, &sockets)).expect("write");
    let mut c = xlfsd();
    c.arg("--volfile").arg(&v1);
    let (first, got) = start(c);
    assert_eq!(got, port);
    let sock = sockets.join(format!("brick-{port}.sock"));
    assert!(sock.exists());

    let v2 = tmp.path().join("b2.vol");
    std::fs::write(&v2, server_volfile(&b2, "127.0.0.2", port, &sockets)).expect("write");
    let mut c = xlfsd();
    c.arg("--volfile").arg(&v2);
    let out = run_to_end(c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second brick ran: {err}");
    assert!(
        err.contains(&format!("another process (pid {})", first.0.id()))
            && err.contains(&sock.display().to_string()),
        "{err}"
    );
    std::os::unix::net::UnixStream::connect(&sock).expect("the first brick's socket answers");
    drop(first);
}
