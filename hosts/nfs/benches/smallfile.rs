//! Small-file random I/O over NFSv3 (the W3 workload of `shared/bench`): thousands of 64 KiB
//! files, 60% reads / 40% writes of 4 KiB at random aligned offsets, 16 concurrent clients,
//! each a user-space nfs3_client connection with one call outstanding.
//!
//! ```text
//! cargo bench -p xlfs-nfsd --bench smallfile -- [--files 4000] [--secs 20] [--clients 16]
//!     [--rounds 3] [--stable unstable|data|file] [--dir DIR]
//!     [--target NAME=NFSPORT:MOUNTPORT:/EXPORT ...] [--no-xlfs]
//! ```
//!
//! By default it starts the release `xlfs-nfsd --local DIR` (a temporary directory unless
//! `--dir`) on a free port; `--target` adds other servers (e.g. NFS-Ganesha with FSAL_VFS:
//! `ganesha=2049:20048:/vfs`). Targets run in interleaved rounds; each prints
//! `RESULT workload=nfs-smallfile target=NAME round=R ops_per_s=...` and a median line.
#![allow(clippy::unwrap_used)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nfs3_client::nfs3_types::nfs3::{
    CREATE3args, LOOKUP3args, MKDIR3args, Nfs3Result, READ3args, WRITE3args, createhow3,
    diropargs3, filename3, nfs_fh3, sattr3, set_mode3, stable_how,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::tokio::{TokioConnector, TokioIo};
use nfs3_client::{Nfs3Connection, Nfs3ConnectionBuilder};
use tokio::net::TcpStream;

type Conn = Nfs3Connection<TokioIo<TcpStream>>;

const FILE_SIZE: u64 = 64 << 10;
const IO: u32 = 4096;

#[derive(Clone)]
struct Target {
    name: String,
    nfs_port: u16,
    mount_port: u16,
    export: String,
}

struct Opts {
    files: usize,
    secs: u64,
    clients: usize,
    rounds: usize,
    stable: stable_how,
    dir: Option<String>,
    targets: Vec<Target>,
    xlfs: bool,
}

fn parse() -> Opts {
    let mut o = Opts {
        files: 4000,
        secs: 20,
        clients: 16,
        rounds: 3,
        stable: stable_how::UNSTABLE,
        dir: None,
        targets: Vec::new(),
        xlfs: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--files" => o.files = val().parse().unwrap(),
            "--secs" => o.secs = val().parse().unwrap(),
            "--clients" => o.clients = val().parse().unwrap(),
            "--rounds" => o.rounds = val().parse().unwrap(),
            "--dir" => o.dir = Some(val()),
            "--no-xlfs" => o.xlfs = false,
            "--stable" => {
                o.stable = match val().as_str() {
                    "unstable" => stable_how::UNSTABLE,
                    "data" => stable_how::DATA_SYNC,
                    "file" => stable_how::FILE_SYNC,
                    s => panic!("--stable {s}: unstable, data or file"),
                }
            }
            "--target" => {
                let v = val();
                let (name, rest) = v.split_once('=').expect("NAME=NFSPORT:MOUNTPORT:/EXPORT");
                let mut p = rest.splitn(3, ':');
                o.targets.push(Target {
                    name: name.to_string(),
                    nfs_port: p.next().unwrap().parse().unwrap(),
                    mount_port: p.next().unwrap().parse().unwrap(),
                    export: p.next().unwrap_or("/").to_string(),
                });
            }
            // cargo bench passes --bench.
            "--bench" => {}
            s => panic!("unknown argument {s}"),
        }
    }
    o
}

/// The server this benchmark started; killed on drop.
struct Xlfs(Child);

impl Drop for Xlfs {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_xlfs(dir: &str) -> (Xlfs, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlfs-nfsd"))
        .args([
            "--local",
            dir,
            "--port",
            "0",
            "--no-root-squash",
            "--log-level",
            "warn",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start xlfs-nfsd");
    let out = child.stdout.take().unwrap();
    let guard = Xlfs(child);
    let mut lines = std::io::BufReader::new(out).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split(" on 127.0.0.1:").nth(1) {
            let port = rest.split_whitespace().next().unwrap().parse().unwrap();
            // Keep draining its stdout.
            std::thread::spawn(move || lines.for_each(drop));
            return (guard, port);
        }
    }
    panic!("xlfs-nfsd did not start");
}

async fn connect(t: &Target) -> Conn {
    Nfs3ConnectionBuilder::new(TokioConnector, "127.0.0.1", &t.export)
        .connect_from_privileged_port(false)
        .mount_port(t.mount_port)
        .nfs3_port(t.nfs_port)
        .credential(opaque_auth::auth_unix(&auth_unix::default()))
        .mount()
        .await
        .unwrap_or_else(|e| panic!("mount {}: {e:?}", t.name))
}

fn dirop(dir: &nfs_fh3, name: &str) -> diropargs3<'static> {
    diropargs3 {
        dir: dir.clone(),
        name: filename3::from(name.as_bytes().to_vec()),
    }
}

/// Makes (or finds) the working set; returns the file handles.
async fn setup(t: &Target, o: &Opts) -> Vec<nfs_fh3> {
    let mut c = connect(t).await;
    let root = c.root_nfs_fh3();
    let dirname = "smallfile-bench";
    let dir = match c
        .lookup(&LOOKUP3args {
            what: dirop(&root, dirname),
        })
        .await
        .unwrap()
    {
        Nfs3Result::Ok(r) => r.object,
        Nfs3Result::Err(_) => {
            let args = MKDIR3args {
                where_: dirop(&root, dirname),
                attributes: sattr3 {
                    mode: set_mode3::Some(0o755),
                    ..sattr3::default()
                },
            };
            match c.mkdir(&args).await.unwrap() {
                Nfs3Result::Ok(r) => r.obj.unwrap(),
                Nfs3Result::Err((s, _)) => panic!("mkdir on {}: {s:?}", t.name),
            }
        }
    };
    let start = Instant::now();
    let mut tasks = Vec::new();
    let per = o.files.div_ceil(o.clients);
    for k in 0..o.clients {
        let (t, dir) = (t.clone(), dir.clone());
        let range = (k * per)..((k + 1) * per).min(o.files);
        tasks.push(tokio::spawn(async move {
            let mut c = connect(&t).await;
            let mut out = Vec::new();
            let block = vec![0x5a; FILE_SIZE as usize];
            for i in range {
                let name = format!("f{i:05}");
                let found = c
                    .lookup(&LOOKUP3args {
                        what: dirop(&dir, &name),
                    })
                    .await
                    .unwrap();
                let fh = match found {
                    Nfs3Result::Ok(r) => r.object,
                    Nfs3Result::Err(_) => {
                        let how = createhow3::UNCHECKED(sattr3 {
                            mode: set_mode3::Some(0o644),
                            ..sattr3::default()
                        });
                        let args = CREATE3args {
                            where_: dirop(&dir, &name),
                            how,
                        };
                        let fh = match c.create(&args).await.unwrap() {
                            Nfs3Result::Ok(r) => r.obj.unwrap(),
                            Nfs3Result::Err((s, _)) => panic!("create: {s:?}"),
                        };
                        let w = WRITE3args {
                            file: fh.clone(),
                            offset: 0,
                            count: FILE_SIZE as u32,
                            stable: stable_how::FILE_SYNC,
                            data: Opaque::owned(block.clone()),
                        };
                        if let Nfs3Result::Err((s, _)) = c.write(&w).await.unwrap() {
                            panic!("fill: {s:?}");
                        }
                        fh
                    }
                };
                out.push(fh);
            }
            out
        }));
    }
    let mut handles = Vec::new();
    for t in tasks {
        handles.extend(t.await.unwrap());
    }
    eprintln!(
        "{}: {} files ready in {:.1}s",
        t.name,
        handles.len(),
        start.elapsed().as_secs_f64()
    );
    handles
}

/// One timed run: returns ops/s.
async fn run(t: &Target, o: &Opts, files: Arc<Vec<nfs_fh3>>) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..o.clients {
        conns.push(connect(t).await);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (k, mut c) in conns.into_iter().enumerate() {
        let (stop, ops, files, stable) = (stop.clone(), ops.clone(), files.clone(), o.stable);
        tasks.push(tokio::spawn(async move {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ ((k as u64 + 1) << 32);
            let data = vec![0xa5u8; IO as usize];
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let fh = &files[(x % files.len() as u64) as usize];
                let offset = ((x >> 20) % (FILE_SIZE / u64::from(IO))) * u64::from(IO);
                if (x >> 40) % 10 < 6 {
                    let args = READ3args {
                        file: fh.clone(),
                        offset,
                        count: IO,
                    };
                    if let Nfs3Result::Err((s, _)) = c.read(&args).await.unwrap() {
                        panic!("read: {s:?}");
                    }
                } else {
                    let args = WRITE3args {
                        file: fh.clone(),
                        offset,
                        count: IO,
                        stable,
                        data: Opaque::borrowed(&data),
                    };
                    if let Nfs3Result::Err((s, _)) = c.write(&args).await.unwrap() {
                        panic!("write: {s:?}");
                    }
                }
                n += 1;
            }
            ops.fetch_add(n, Ordering::Relaxed);
        }));
    }
    tokio::time::sleep(Duration::from_secs(o.secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    ops.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let o = parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = o
        .dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_string_lossy().into_owned());
    let mut targets = Vec::new();
    let _server = o.xlfs.then(|| {
        let (guard, port) = start_xlfs(&dir);
        targets.push(Target {
            name: "xlfs-nfsd".into(),
            nfs_port: port,
            mount_port: port,
            export: "/".into(),
        });
        guard
    });
    targets.extend(o.targets.iter().cloned());
    let stable = match o.stable {
        stable_how::UNSTABLE => "unstable",
        stable_how::DATA_SYNC => "data",
        stable_how::FILE_SYNC => "file",
    };
    rt.block_on(async {
        let mut sets = Vec::new();
        for t in &targets {
            sets.push(Arc::new(setup(t, &o).await));
        }
        let mut results: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
        for round in 0..o.rounds {
            for (i, t) in targets.iter().enumerate() {
                let r = run(t, &o, sets[i].clone()).await;
                println!(
                    "RESULT workload=nfs-smallfile target={} round={round} files={} clients={} \
                     stable={stable} ops_per_s={r:.0}",
                    t.name, o.files, o.clients
                );
                results[i].push(r);
            }
        }
        for (t, mut r) in targets.iter().zip(results) {
            r.sort_by(f64::total_cmp);
            let median = r[r.len() / 2];
            println!("MEDIAN target={} ops_per_s={median:.0}", t.name);
        }
    });
}
