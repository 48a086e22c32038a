//! xlfsd as a process: serve a brick directory, talk to it through protocol/client, kill -9
//! it and restart it, stop it with SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, InitArgs, Loc, Options, Subvol, XlatorOptions};
use xlfs_protocol::Client;

fn start(dir: &std::path::Path, port: u16) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlfsd"))
        .args([
            "--brick",
            &dir.display().to_string(),
            "--port",
            &port.to_string(),
        ])
        .args([
            "--volume-name",
            "vol0",
            "--print-port",
            "--log-level",
            "warn",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn xlfsd");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).expect("read port");
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("port line {line:?}"));
    (child, port)
}

fn client(port: u16) -> Subvol {
    let mut o = Options::new();
    for spec in <<Client as xlator_api::Translator>::Options as XlatorOptions>::schema() {
        o.set(&spec.key, &spec.default);
    }
    o.set("remote-host", &format!("127.0.0.1:{port}"));
    o.set("remote-subvolume", "vol0");
    o.set("ping-timeout", "2s");
    let args = InitArgs {
        name: "vol0-client".into(),
        options: o,
        children: Vec::new().into(),
        services: xlfs_core::services::host_services(),
    };
    xlator_api::sdk::instantiate::<Client>(args).expect("client")
}

async fn wait_up(top: &Subvol) {
    for _ in 0..500 {
        match top.stat(&Ctx::root(), Gfid::ROOT).await {
            Ok(_) => return,
            Err(Errno::ENOTCONN) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => panic!("stat: {e}"),
        }
    }
    panic!("xlfsd never answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_survives_kill_and_restart_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut brick, port) = start(dir.path(), 0);
    let top = client(port);
    wait_up(&top).await;
    let c = Ctx::root();
    let fd = Fd {
        id: FdId(1),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR,
    };
    let e = top
        .create(&c, Loc::new(Gfid::ROOT, "f"), fd, 0o644, 0)
        .await
        .expect("create");
    let fd = Fd {
        gfid: e.attr.gfid,
        ..fd
    };
    let data = Buf::from_vec(vec![0x5a; 1 << 20]);
    top.writev(&c, fd, 0, data.clone(), 0).await.expect("write");
    assert_eq!(
        top.readv(&c, fd, 0, 1 << 20).await.expect("read").data,
        data
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("f"))
            .expect("on disk")
            .len(),
        1 << 20
    );

    // kill -9: errors, not a hang.
    brick.kill().expect("kill");
    brick.wait().expect("reap");
    let t0 = Instant::now();
    let mut r = top.stat(&c, Gfid::ROOT).await;
    while r.is_ok() && t0.elapsed() < Duration::from_secs(3) {
        r = top.stat(&c, Gfid::ROOT).await;
    }
    assert_eq!(r, Err(Errno::ENOTCONN));
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t0.elapsed()
    );

    // Restart on the same port: the same client works again, its fd re-opened.
    let (mut brick, port2) = start(dir.path(), port);
    assert_eq!(port2, port);
    wait_up(&top).await;
    assert_eq!(
        top.readv(&c, fd, 0, 1 << 20)
            .await
            .expect("read after restart")
            .data,
        data
    );

    // SIGTERM: clean exit.
    // SAFETY: kill(2) on the pid of a child we own and have not reaped.
    let rc = unsafe { libc::kill(brick.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = brick.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}

fn write_secret(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "s3\n").expect("write the secret");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `--brick --secret-file`: a file others may read, or a secret on the command line, stops
/// the start with the reason; the generated volfile names the file, not the secret.
#[test]
fn the_secret_comes_from_a_private_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let brick = dir.path().join("brick");
    std::fs::create_dir(&brick).expect("mkdir");
    let secret = dir.path().join("secret");
    let xlfsd = |extra: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_xlfsd"))
            .arg("--brick")
            .arg(&brick)
            .args(extra)
            .output()
            .expect("run xlfsd")
    };
    write_secret(&secret, 0o644);
    let o = xlfsd(&[
        "--secret-file".as_ref(),
        secret.as_ref(),
        "--print-volfile".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("chmod 600"), "{err}");
    write_secret(&secret, 0o600);
    let o = xlfsd(&[
        "--secret-file".as_ref(),
        secret.as_ref(),
        "--print-volfile".as_ref(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains(&format!("\"secret-file\": {:?}", secret)) && !text.contains("\"s3\""),
        "{text}"
    );
    let o = xlfsd(&[
        "--secret".as_ref(),
        "s3".as_ref(),
        "--print-volfile".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--secret-file FILE"),
        "{err}"
    );
}

/// `--client-volfile`: the brick hands the file out under its top volume's name (or
/// `--client-volfile-name`), after the secret check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hands_out_the_client_volfile() {
    use xlfs_protocol::Credentials;
    use xlfs_protocol::fetch::{FetchError, VolfileServer, fetch_volfile};
    let dir = tempfile::tempdir().expect("tempdir");
    let vol = dir.path().join("client.vol");
    let text = r#"( volumes: [
        (name: "gv0-client-0", type: "protocol/client", options: {
            "remote-host": "127.0.0.1:1", "remote-subvolume": "gv0-brick-0" }),
        (name: "gv0", type: "debug/io-stats", subvolumes: ["gv0-client-0"]),
    ] )"#;
    std::fs::write(&vol, text).expect("write");
    let brick = dir.path().join("brick");
    std::fs::create_dir(&brick).expect("mkdir");
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlfsd"))
        .arg("--brick")
        .arg(&brick)
        .arg("--client-volfile")
        .arg(&vol)
        .arg("--secret-file")
        .arg(&secret)
        .args(["--print-port", "--log-level", "warn"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn xlfsd");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    let port: u16 = line.trim().parse().expect("port line");
    let at = |v: &str| VolfileServer {
        host: "127.0.0.1".into(),
        port,
        volume: v.into(),
    };
    let t = Duration::from_secs(5);
    let got = fetch_volfile(&at("gv0"), &Credentials::secret(Some("s3")), t).await;
    let wrong = fetch_volfile(&at("gv1"), &Credentials::secret(Some("s3")), t).await;
    let none = fetch_volfile(&at("gv0"), &Credentials::default(), t).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got.expect("fetch"), text);
    let e = none.expect_err("fetched without the secret").to_string();
    assert!(e.contains("requires the volume's secret"), "{e}");
    match wrong {
        Err(FetchError::Refused { reason, .. }) => assert!(
            reason.contains("volume \"gv1\" is not served by this brick; it serves: \"gv0\""),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_broken_client_volfile_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vol = dir.path().join("client.vol");
    std::fs::write(&vol, "( volumes: [ oops").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_xlfsd"))
        .arg("--brick")
        .arg(dir.path())
        .arg("--client-volfile")
        .arg(&vol)
        .output()
        .expect("run xlfsd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--client-volfile"), "{err}");
}

/// The control socket: a live statedump (text without repeated types, valid JSON), and a
/// reload that applies a live option in place, refuses a broken volfile and keeps serving.
#[test]
fn answers_statedumps_and_reloads_on_its_control_socket() {
    use xlfs_host::control::{Request, ask};
    let dir = tempfile::tempdir().expect("tempdir");
    let brick = dir.path().join("brick");
    std::fs::create_dir(&brick).expect("mkdir");
    let out = Command::new(env!("CARGO_BIN_EXE_xlfsd"))
        .arg("--brick")
        .arg(&brick)
        .arg("--print-volfile")
        .output()
        .expect("print volfile");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let vol = dir.path().join("brick.vol");
    std::fs::write(&vol, &text).expect("write");
    let sock = dir.path().join("ctl/brick.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlfsd"))
        .arg("--volfile")
        .arg(&vol)
        .arg("--control-socket")
        .arg(&sock)
        .args(["--print-port", "--log-level", "warn"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn xlfsd");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    let t = Duration::from_secs(10);
    let result = std::panic::catch_unwind(|| {
        let dump = ask(&sock, Request::StatedumpText, t).expect("text dump");
        assert!(dump.starts_with("[xlfsd]\npid: "), "{dump}");
        assert!(dump.contains("[brick-io-stats (debug/io-stats)]"), "{dump}");
        assert_eq!(dump.matches("debug/io-stats").count(), 1, "{dump}");
        let json = ask(&sock, Request::StatedumpJson, t).expect("json dump");
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(v["xlators"]["brick-io-stats"]["type"], "debug/io-stats");
        assert_eq!(v["xlators"]["brick-server"]["type"], "protocol/server");
        assert_eq!(v["graph"], 1);

        assert_eq!(
            ask(&sock, Request::Reload, t).expect("reload"),
            "unchanged\n"
        );
        let live = text.replace(
            r#"(name: "brick-io-stats", type: "debug/io-stats","#,
            r#"(name: "brick-io-stats", type: "debug/io-stats", options: { "count-fop-hits": "off" },"#,
        );
        assert_ne!(live, text, "the volfile has the io-stats line");
        std::fs::write(&vol, &live).expect("rewrite");
        let r = ask(&sock, Request::Reload, t).expect("reload");
        assert_eq!(r, "reconfigured in place: brick-io-stats\n");
        std::fs::write(&vol, "( volumes: [ (name: \"x\", type: \"no/such\") ] )").expect("w");
        let r = ask(&sock, Request::Reload, t).expect("reload");
        assert!(r.starts_with("error: volfile not applied"), "{r}");
        // Still serving the same graph.
        let json = ask(&sock, Request::StatedumpJson, t).expect("json dump");
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(v["graph"], 1);
    });
    // SAFETY: kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let _ = child.wait();
    assert!(!sock.exists(), "the socket is removed at exit");
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
