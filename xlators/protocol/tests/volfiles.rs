//! The volfile server of xlfs-mgmtd (`server::volfiles`): one port, any volume a lookup
//! finds, each with its own secret and allow-list; what a client is told when it is refused;
//! a watch answered when the volume's volfile changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xlfs_protocol::Credentials;
use xlfs_protocol::fetch::{fetch_volfile, volfile_version, watch_volfile};
use xlfs_protocol::server::AllowList;
use xlfs_protocol::server::volfiles::{Lookup, Served, serve};

mod common;
use common::fetching::{at, refusal};

const T: Duration = Duration::from_secs(5);

/// Volumes by name: (text, secret, allow-list).
type Volumes = Arc<Mutex<HashMap<String, (String, Option<String>, Option<String>)>>>;

async fn start(volumes: Volumes) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let lookup: Arc<Lookup> = Arc::new(move |name: &str| {
        let v = volumes.lock().expect("lock");
        let (text, secret, allow) = v.get(name).ok_or(format!("no volume {name:?}"))?;
        Ok(Served {
            text: text.clone(),
            secret: secret.clone(),
            allow: allow.as_deref().map(AllowList::parse).transpose()?,
        })
    });
    tokio::spawn(serve(l, lookup));
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_each_volume_with_its_own_checks() {
    let volumes: Volumes = Arc::default();
    {
        let mut v = volumes.lock().expect("lock");
        v.insert("open".into(), ("// open\n".into(), None, None));
        v.insert(
            "locked".into(),
            ("// locked\n".into(), Some("s3".into()), None),
        );
        v.insert(
            "elsewhere".into(),
            ("// elsewhere\n".into(), None, Some("10.9.9.9".into())),
        );
    }
    let addr = start(volumes).await;
    let none = Credentials::secret(None);
    assert_eq!(
        fetch_volfile(&at(addr, "open"), &none, T)
            .await
            .expect("open"),
        "// open\n"
    );
    assert_eq!(
        fetch_volfile(&at(addr, "locked"), &Credentials::secret(Some("s3")), T)
            .await
            .expect("with the secret"),
        "// locked\n"
    );
    let r = refusal(&at(addr, "locked"), Some("other")).await;
    assert!(r.contains("secret"), "{r}");
    let r = refusal(&at(addr, "locked"), None).await;
    assert!(r.contains("secret"), "{r}");
    let r = refusal(&at(addr, "elsewhere"), None).await;
    assert!(
        r.contains("127.0.0.1 is not allowed by volume \"elsewhere\""),
        "{r}"
    );
    let r = refusal(&at(addr, "nope"), None).await;
    assert!(r.contains("no volume \"nope\""), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_answered_when_the_volfile_changes() {
    let volumes: Volumes = Arc::default();
    volumes
        .lock()
        .expect("lock")
        .insert("gv0".into(), ("// v1\n".into(), Some("s".into()), None));
    let addr = start(volumes.clone()).await;
    let creds = Credentials::secret(Some("s"));
    let known = volfile_version("// v1\n");
    let s = at(addr, "gv0");
    let watch = tokio::spawn(async move {
        let t0 = Instant::now();
        let text = watch_volfile(&s, &creds, known, Duration::from_secs(20), T).await;
        (text, t0.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    volumes
        .lock()
        .expect("lock")
        .insert("gv0".into(), ("// v2\n".into(), Some("s".into()), None));
    let (text, took) = watch.await.expect("join");
    assert_eq!(text.expect("watch"), "// v2\n");
    assert!(
        took < Duration::from_secs(5),
        "held {took:?} past the change"
    );
    // Unchanged: held for the hold time, then the same text.
    let creds = Credentials::secret(Some("s"));
    let t0 = Instant::now();
    let text = watch_volfile(
        &at(addr, "gv0"),
        &creds,
        volfile_version("// v2\n"),
        Duration::from_millis(600),
        T,
    )
    .await
    .expect("renewal");
    assert_eq!(text, "// v2\n");
    assert!(
        t0.elapsed() >= Duration::from_millis(550),
        "{:?}",
        t0.elapsed()
    );
}
