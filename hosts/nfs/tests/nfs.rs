//! xlfs-nfsd end to end: the built binary over `--local <tempdir>`, driven by the nfs3_client
//! crate (a real user-space NFSv3 client; the kernel here cannot mount NFS).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;

use common::*;
use nfs3_client::nfs3_types::nfs3::*;
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use tempfile::TempDir;

fn guarded() -> createhow3 {
    createhow3::GUARDED(mode(0o644))
}

fn mode(m: u32) -> sattr3 {
    sattr3 {
        mode: set_mode3::Some(m),
        ..sattr3::default()
    }
}

async fn create(
    c: &mut Conn,
    dir: &nfs_fh3,
    name: &str,
    how: createhow3,
) -> Result<nfs_fh3, nfsstat3> {
    match c
        .create(&CREATE3args {
            where_: dirop(dir, name),
            how,
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok(r.obj.unwrap()),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

async fn mkdir(c: &mut Conn, dir: &nfs_fh3, name: &str, m: u32) -> Result<nfs_fh3, nfsstat3> {
    match c
        .mkdir(&MKDIR3args {
            where_: dirop(dir, name),
            attributes: mode(m),
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok(r.obj.unwrap()),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

async fn write(
    c: &mut Conn,
    fh: &nfs_fh3,
    offset: u64,
    data: &[u8],
    stable: stable_how,
) -> WRITE3resok {
    ok(c.write(&WRITE3args {
        file: fh.clone(),
        offset,
        count: data.len() as u32,
        stable,
        data: Opaque::owned(data.to_vec()),
    })
    .await)
}

async fn read(
    c: &mut Conn,
    fh: &nfs_fh3,
    offset: u64,
    count: u32,
) -> Result<(Vec<u8>, bool), nfsstat3> {
    match c
        .read(&READ3args {
            file: fh.clone(),
            offset,
            count,
        })
        .await
        .expect("rpc")
    {
        Nfs3Result::Ok(r) => Ok((r.data.to_vec(), r.eof)),
        Nfs3Result::Err((s, _)) => Err(s),
    }
}

/// Every name in `dir` through READDIRPLUS pages of `maxcount` bytes; also the page count.
async fn list_plus(c: &mut Conn, dir: &nfs_fh3, maxcount: u32) -> (Vec<String>, usize) {
    let (mut cookie, mut verf, mut names, mut pages) = (0, cookieverf3::default(), Vec::new(), 0);
    loop {
        let r = ok(c
            .readdirplus(&READDIRPLUS3args {
                dir: dir.clone(),
                cookie,
                cookieverf: verf,
                dircount: maxcount / 4,
                maxcount,
            })
            .await);
        pages += 1;
        verf = r.cookieverf;
        for e in r.reply.entries.0 {
            assert!(e.name_attributes.is_some() && e.name_handle.is_some());
            cookie = e.cookie;
            names.push(String::from_utf8(e.name.0.to_vec()).unwrap());
        }
        if r.reply.eof {
            return (names, pages);
        }
        assert!(pages < 100_000, "listing does not end");
    }
}

fn start(tmp: &TempDir, extra: &[&str]) -> Server {
    Server::start(&tmp.path().join("state"), extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_links_symlinks_and_every_procedure() {
    let tmp = TempDir::new().unwrap();
    let srv = start(&tmp, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let root = c.root_nfs_fh3();
    c.null().await.unwrap();

    // CREATE: guarded, unchecked over an existing file, exclusive with its retransmission.
    let f = create(&mut c, &root, "a.txt", createhow3::GUARDED(mode(0o640)))
        .await
        .unwrap();
    assert_eq!(
        create(&mut c, &root, "a.txt", createhow3::GUARDED(mode(0o640))).await,
        Err(nfsstat3::NFS3ERR_EXIST)
    );
    assert_eq!(getattr(&mut c, &f).await.unwrap().mode, 0o640);
    let verf = createverf3([1, 2, 3, 4, 5, 6, 7, 8]);
    let x = create(&mut c, &root, "excl", createhow3::EXCLUSIVE(verf))
        .await
        .unwrap();
    assert_eq!(
        create(&mut c, &root, "excl", createhow3::EXCLUSIVE(verf)).await,
        Ok(x.clone())
    );
    assert_eq!(
        create(
            &mut c,
            &root,
            "excl",
            createhow3::EXCLUSIVE(createverf3([9; 8]))
        )
        .await,
        Err(nfsstat3::NFS3ERR_EXIST)
    );

    // WRITE (unstable, then file-sync), COMMIT, READ back.
    let w1 = write(&mut c, &f, 0, b"hello ", stable_how::UNSTABLE).await;
    assert_eq!((w1.count, w1.committed), (6, stable_how::UNSTABLE));
    let w2 = write(&mut c, &f, 6, b"world", stable_how::FILE_SYNC).await;
    assert_eq!(w2.committed, stable_how::FILE_SYNC);
    assert_eq!(w1.verf, w2.verf, "one verifier per server instance");
    let commit = ok(c
        .commit(&COMMIT3args {
            file: f.clone(),
            offset: 0,
            count: 0,
        })
        .await);
    assert_eq!(commit.verf, w1.verf);
    assert_eq!(
        read(&mut c, &f, 0, 100).await.unwrap(),
        (b"hello world".to_vec(), true)
    );
    assert_eq!(
        read(&mut c, &f, 6, 3).await.unwrap(),
        (b"wor".to_vec(), false)
    );
    assert_eq!(getattr(&mut c, &f).await.unwrap().size, 11);
    let unchecked = create(
        &mut c,
        &root,
        "a.txt",
        createhow3::UNCHECKED(sattr3::default()),
    )
    .await;
    assert_eq!(unchecked, Ok(f.clone()));
    assert_eq!(
        getattr(&mut c, &f).await.unwrap().size,
        11,
        "UNCHECKED keeps the data"
    );

    // SETATTR with a stale guard fails; with the current ctime it truncates.
    let a = getattr(&mut c, &f).await.unwrap();
    let trunc = sattr3 {
        size: set_size3::Some(5),
        ..sattr3::default()
    };
    let stale_guard = nfstime3 {
        seconds: a.ctime.seconds.wrapping_sub(100),
        nseconds: 0,
    };
    let s = err(c
        .setattr(&SETATTR3args {
            object: f.clone(),
            new_attributes: trunc.clone(),
            guard: sattrguard3::Some(stale_guard),
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_NOT_SYNC);
    ok(c.setattr(&SETATTR3args {
        object: f.clone(),
        new_attributes: trunc,
        guard: sattrguard3::Some(a.ctime),
    })
    .await);
    assert_eq!(read(&mut c, &f, 0, 100).await.unwrap().0, b"hello");

    // RENAME, LINK, SYMLINK + READLINK.
    ok(c.rename(&RENAME3args {
        from: dirop(&root, "a.txt"),
        to: dirop(&root, "b.txt"),
    })
    .await);
    assert_eq!(
        lookup(&mut c, &root, "a.txt").await,
        Err(nfsstat3::NFS3ERR_NOENT)
    );
    assert_eq!(
        lookup(&mut c, &root, "b.txt").await,
        Ok(f.clone()),
        "a handle survives a rename"
    );
    let l = ok(c
        .link(&LINK3args {
            file: f.clone(),
            link: dirop(&root, "hard"),
        })
        .await);
    let Nfs3Option::Some(la) = l.file_attributes else {
        panic!("link attributes")
    };
    assert_eq!(la.nlink, 2);
    assert_eq!(
        lookup(&mut c, &root, "hard").await,
        Ok(f.clone()),
        "hard links share the handle"
    );
    let s = ok(c
        .symlink(&SYMLINK3args {
            where_: dirop(&root, "sym"),
            symlink: symlinkdata3 {
                symlink_attributes: sattr3::default(),
                symlink_data: nfspath3::from(b"b.txt".to_vec()),
            },
        })
        .await);
    let sym = s.obj.unwrap();
    let rl = ok(c
        .readlink(&READLINK3args {
            symlink: sym.clone(),
        })
        .await);
    assert_eq!(&rl.data.0[..], b"b.txt");
    assert_eq!(getattr(&mut c, &sym).await.unwrap().type_, ftype3::NF3LNK);

    // MKDIR, MKNOD, REMOVE vs RMDIR.
    let d = mkdir(&mut c, &root, "dir", 0o750).await.unwrap();
    assert_eq!(getattr(&mut c, &d).await.unwrap().type_, ftype3::NF3DIR);
    assert_eq!(
        mkdir(&mut c, &root, "dir", 0o750).await,
        Err(nfsstat3::NFS3ERR_EXIST)
    );
    let n = ok(c
        .mknod(&MKNOD3args {
            where_: dirop(&d, "fifo"),
            what: mknoddata3::NF3FIFO(mode(0o600)),
        })
        .await);
    assert_eq!(n.obj_attributes.unwrap().type_, ftype3::NF3FIFO);
    assert_eq!(
        err(c
            .rmdir(&RMDIR3args {
                object: dirop(&root, "dir")
            })
            .await),
        nfsstat3::NFS3ERR_NOTEMPTY
    );
    assert_eq!(
        err(c
            .remove(&REMOVE3args {
                object: dirop(&root, "dir")
            })
            .await),
        nfsstat3::NFS3ERR_ISDIR
    );
    assert_eq!(
        err(c
            .rmdir(&RMDIR3args {
                object: dirop(&root, "hard")
            })
            .await),
        nfsstat3::NFS3ERR_NOTDIR
    );
    ok(c.remove(&REMOVE3args {
        object: dirop(&d, "fifo"),
    })
    .await);
    ok(c.rmdir(&RMDIR3args {
        object: dirop(&root, "dir"),
    })
    .await);
    ok(c.remove(&REMOVE3args {
        object: dirop(&root, "hard"),
    })
    .await);
    assert_eq!(getattr(&mut c, &f).await.unwrap().nlink, 1);

    // ACCESS, FSSTAT, FSINFO, PATHCONF, READDIR.
    let acc = ok(c
        .access(&ACCESS3args {
            object: f.clone(),
            access: ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXECUTE,
        })
        .await);
    assert_eq!(
        acc.access,
        ACCESS3_READ | ACCESS3_MODIFY,
        "root: rw on a 0640 file, no x"
    );
    let st = ok(c
        .fsstat(&FSSTAT3args {
            fsroot: root.clone(),
        })
        .await);
    assert!(st.tbytes > 0 && st.tbytes >= st.fbytes);
    let info = ok(c
        .fsinfo(&FSINFO3args {
            fsroot: root.clone(),
        })
        .await);
    assert!(info.rtmax >= 65536 && info.wtmax >= 65536);
    assert_ne!(info.properties & FSF3_LINK, 0);
    let pc = ok(c
        .pathconf(&PATHCONF3args {
            object: root.clone(),
        })
        .await);
    assert_eq!(pc.name_max, 255);
    let rd = ok(c
        .readdir(&READDIR3args {
            dir: root.clone(),
            cookie: 0,
            cookieverf: cookieverf3::default(),
            count: 4096,
        })
        .await);
    let mut names: Vec<String> = rd
        .reply
        .entries
        .0
        .iter()
        .map(|e| String::from_utf8(e.name.0.to_vec()).unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [".", "..", "b.txt", "excl", "sym"]);
    assert!(rd.reply.eof);
    let s = err(c
        .readdir(&READDIR3args {
            dir: f.clone(),
            cookie: 0,
            cookieverf: cookieverf3::default(),
            count: 4096,
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_NOTDIR);
    let s = err(c
        .readdirplus(&READDIRPLUS3args {
            dir: root.clone(),
            cookie: 5,
            cookieverf: cookieverf3([7; 8]),
            dircount: 512,
            maxcount: 4096,
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_BAD_COOKIE);
    let s = err(c
        .readdirplus(&READDIRPLUS3args {
            dir: root.clone(),
            cookie: 0,
            cookieverf: cookieverf3::default(),
            dircount: 10,
            maxcount: 120,
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_TOOSMALL);
    drop(c);
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readdirplus_pages_through_10000_entries() {
    const N: usize = 10_000;
    const CLIENTS: usize = 8;
    let tmp = TempDir::new().unwrap();
    let srv = start(&tmp, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let top = c.root_nfs_fh3();
    let big = mkdir(&mut c, &top, "big", 0o755).await.unwrap();
    let mut tasks = Vec::new();
    for k in 0..CLIENTS {
        let (port, big) = (srv.port, big.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = connect(port, 0, 0, &[]).await;
            for i in (k..N).step_by(CLIENTS) {
                let how = createhow3::GUARDED(mode(0o644));
                create(&mut c, &big, &format!("file-{i:05}"), how)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for maxcount in [8192, 65536] {
        let (names, pages) = list_plus(&mut c, &big, maxcount).await;
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "no name twice");
        assert_eq!(names.len(), N + 2, "all entries plus . and ..");
        assert!(unique.contains(&"file-09999".to_string()) && unique.contains(&"..".to_string()));
        assert!(pages > N / 1000, "paged: {pages} pages of {maxcount} bytes");
    }
    // Plain READDIR pages too.
    let (mut cookie, mut count) = (0, 0);
    loop {
        let r = ok(c
            .readdir(&READDIR3args {
                dir: big.clone(),
                cookie,
                cookieverf: cookieverf3::default(),
                count: 4096,
            })
            .await);
        for e in &r.reply.entries.0 {
            cookie = e.cookie;
            count += 1;
        }
        if r.reply.eof {
            break;
        }
    }
    assert_eq!(count, N + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permissions_follow_the_auth_unix_caller() {
    if !is_root() {
        eprintln!("skipped: the brick switches credentials only when run as root");
        return;
    }
    let tmp = TempDir::new().unwrap();
    let srv = start(&tmp, &["--no-root-squash"]);
    let mut root = connect(srv.port, 0, 0, &[]).await;
    let top = root.root_nfs_fh3();
    let private = mkdir(&mut root, &top, "private", 0o700).await.unwrap();
    create(
        &mut root,
        &private,
        "secret",
        createhow3::GUARDED(mode(0o600)),
    )
    .await
    .unwrap();
    let open = mkdir(&mut root, &top, "open", 0o777).await.unwrap();
    let team = mkdir(&mut root, &top, "team", 0o770).await.unwrap();
    let chgrp = sattr3 {
        gid: set_gid3::Some(500),
        ..sattr3::default()
    };
    ok(root
        .setattr(&SETATTR3args {
            object: team.clone(),
            new_attributes: chgrp,
            guard: sattrguard3::None,
        })
        .await);
    let f = create(
        &mut root,
        &top,
        "root-only",
        createhow3::GUARDED(mode(0o600)),
    )
    .await
    .unwrap();

    let mut user = connect(srv.port, 1000, 1000, &[]).await;
    assert_eq!(
        lookup(&mut user, &private, "secret").await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );
    assert_eq!(
        create(&mut user, &private, "mine", guarded()).await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );
    let s = err(user
        .readdirplus(&READDIRPLUS3args {
            dir: private.clone(),
            cookie: 0,
            cookieverf: cookieverf3::default(),
            dircount: 1024,
            maxcount: 8192,
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_ACCES);
    assert_eq!(
        read(&mut user, &f, 0, 10).await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );
    let acc = ok(user
        .access(&ACCESS3args {
            object: f.clone(),
            access: ACCESS3_READ | ACCESS3_MODIFY,
        })
        .await);
    assert_eq!(acc.access, 0);
    // Objects the caller makes are its own.
    let mine = create(&mut user, &open, "mine", guarded()).await.unwrap();
    let a = getattr(&mut user, &mine).await.unwrap();
    assert_eq!((a.uid, a.gid), (1000, 1000));
    // Supplementary groups count.
    let mut member = connect(srv.port, 1001, 1001, &[500]).await;
    create(&mut member, &team, "ok", guarded()).await.unwrap();
    let mut outsider = connect(srv.port, 1002, 1002, &[]).await;
    assert_eq!(
        create(&mut outsider, &team, "no", guarded()).await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );

    // The volume root itself at 0700: a non-root caller cannot look anything up in it.
    ok(root
        .setattr(&SETATTR3args {
            object: top.clone(),
            new_attributes: mode(0o700),
            guard: sattrguard3::None,
        })
        .await);
    assert_eq!(
        lookup(&mut user, &top, "open").await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );
    assert!(lookup(&mut root, &top, "open").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn root_is_squashed_by_default() {
    if !is_root() {
        eprintln!("skipped: the brick switches credentials only when run as root");
        return;
    }
    let tmp = TempDir::new().unwrap();
    let brick = tmp.path().join("state").join("brick");
    std::fs::create_dir_all(brick.join("shared")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(brick.join("shared"), std::fs::Permissions::from_mode(0o777)).unwrap();

    let srv = start(&tmp, &[]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let top = c.root_nfs_fh3();
    assert_eq!(
        create(&mut c, &top, "as-root", guarded()).await,
        Err(nfsstat3::NFS3ERR_ACCES)
    );
    let shared = lookup(&mut c, &top, "shared").await.unwrap();
    let f = create(&mut c, &shared, "squashed", guarded())
        .await
        .unwrap();
    let a = getattr(&mut c, &f).await.unwrap();
    assert_eq!((a.uid, a.gid), (65534, 65534));
    drop(c);
    drop(srv);

    let srv = start(&tmp, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let top = c.root_nfs_fh3();
    let f = create(&mut c, &top, "as-root", guarded()).await.unwrap();
    assert_eq!(getattr(&mut c, &f).await.unwrap().uid, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handles_survive_a_restart_and_deleted_objects_are_stale() {
    let tmp = TempDir::new().unwrap();
    let mut srv = start(&tmp, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let top = c.root_nfs_fh3();
    let keep = create(&mut c, &top, "keep", createhow3::GUARDED(mode(0o644)))
        .await
        .unwrap();
    write(&mut c, &keep, 0, b"persistent", stable_how::FILE_SYNC).await;
    let dir = mkdir(&mut c, &top, "d", 0o755).await.unwrap();
    let inner = create(&mut c, &dir, "inner", createhow3::GUARDED(mode(0o644)))
        .await
        .unwrap();
    let gone = create(&mut c, &top, "gone", createhow3::GUARDED(mode(0o644)))
        .await
        .unwrap();
    let verf = write(&mut c, &gone, 0, b"x", stable_how::UNSTABLE)
        .await
        .verf;
    drop(c);
    let (status, out) = srv.stop();
    assert!(
        status.success(),
        "clean exit on SIGTERM: {status:?}\n{}",
        srv.log()
    );
    assert!(out.contains("stopped"), "{out}");
    drop(srv);

    let srv = start(&tmp, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    assert_eq!(c.root_nfs_fh3(), top, "the root handle is stable");
    assert_eq!(
        read(&mut c, &keep, 0, 100).await.unwrap(),
        (b"persistent".to_vec(), true)
    );
    assert_eq!(lookup(&mut c, &dir, "inner").await, Ok(inner.clone()));
    assert_eq!(getattr(&mut c, &inner).await.unwrap().type_, ftype3::NF3REG);
    let w = write(&mut c, &keep, 10, b"!", stable_how::UNSTABLE).await;
    assert_ne!(w.verf, verf, "a new instance has a new write verifier");

    ok(c.remove(&REMOVE3args {
        object: dirop(&top, "gone"),
    })
    .await);
    assert_eq!(
        getattr(&mut c, &gone).await.err(),
        Some(nfsstat3::NFS3ERR_STALE)
    );
    assert_eq!(
        read(&mut c, &gone, 0, 1).await,
        Err(nfsstat3::NFS3ERR_STALE)
    );
    let s = err(c
        .write(&WRITE3args {
            file: gone.clone(),
            offset: 0,
            count: 1,
            stable: stable_how::FILE_SYNC,
            data: Opaque::owned(vec![1]),
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_STALE);
    ok(c.remove(&REMOVE3args {
        object: dirop(&dir, "inner"),
    })
    .await);
    ok(c.rmdir(&RMDIR3args {
        object: dirop(&top, "d"),
    })
    .await);
    assert_eq!(
        getattr(&mut c, &dir).await.err(),
        Some(nfsstat3::NFS3ERR_STALE)
    );
    let s = err(c
        .readdirplus(&READDIRPLUS3args {
            dir: dir.clone(),
            cookie: 0,
            cookieverf: cookieverf3::default(),
            dircount: 1024,
            maxcount: 8192,
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_STALE);
    assert_eq!(
        lookup(&mut c, &dir, "x").await,
        Err(nfsstat3::NFS3ERR_STALE)
    );
    let s = err(c
        .create(&CREATE3args {
            where_: dirop(&dir, "x"),
            how: createhow3::UNCHECKED(sattr3::default()),
        })
        .await);
    assert_eq!(s, nfsstat3::NFS3ERR_STALE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_handles_are_bad_and_garbage_does_not_hurt() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let tmp = TempDir::new().unwrap();
    let other = TempDir::new().unwrap();
    let srv = start(&tmp, &["--no-root-squash"]);
    let foreign = start(&other, &["--no-root-squash"]);
    let mut c = connect(srv.port, 0, 0, &[]).await;
    let f = connect(foreign.port, 0, 0, &[]).await;
    let root = c.root_nfs_fh3();
    let good = root.data.to_vec();
    let fh = |b: Vec<u8>| nfs_fh3 {
        data: Opaque::owned(b),
    };
    let mut flipped = good.clone();
    flipped[0] ^= 0x80;
    let mut null_gfid = good.clone();
    for b in &mut null_gfid[9..] {
        *b = 0;
    }
    for bad in [
        fh(Vec::new()),
        fh(good[..good.len() - 1].to_vec()),
        fh(vec![0xff; 64]),
        fh(flipped),
        fh(null_gfid),
        f.root_nfs_fh3(),
    ] {
        assert_eq!(
            getattr(&mut c, &bad).await.err(),
            Some(nfsstat3::NFS3ERR_BADHANDLE),
            "{bad:?}"
        );
        assert_eq!(
            read(&mut c, &bad, 0, 1).await,
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
        assert_eq!(
            lookup(&mut c, &bad, "x").await,
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
    }
    drop(f);

    // Raw garbage on the wire: a record that is no RPC call, a call whose handle claims
    // 4 GiB, and a record mark announcing 2 GiB. The server stays up.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", srv.port))
        .await
        .unwrap();
    let mut junk = (0x8000_0008u32).to_be_bytes().to_vec();
    junk.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
    s.write_all(&junk).await.unwrap();
    let mut call = Vec::new();
    for w in [7u32, 0, 2, 100_003, 3, 1, 0, 0, 0, 0, 0xffff_fff0] {
        call.extend_from_slice(&w.to_be_bytes());
    }
    let mut rec = (0x8000_0000u32 | call.len() as u32).to_be_bytes().to_vec();
    rec.extend_from_slice(&call);
    s.write_all(&rec).await.unwrap();
    let mut mark = [0u8; 4];
    s.read_exact(&mut mark).await.unwrap();
    let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
    let mut reply = vec![0u8; len];
    s.read_exact(&mut reply).await.unwrap();
    // xid 7, REPLY, MSG_ACCEPTED, AUTH_NULL verifier, GARBAGE_ARGS.
    assert_eq!(&reply[..4], &7u32.to_be_bytes());
    assert_eq!(&reply[reply.len() - 4..], &4u32.to_be_bytes());
    s.write_all(&0xffff_fff0u32.to_be_bytes()).await.unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(
        matches!(n, Ok(Ok(0)) | Ok(Err(_))),
        "oversized record closes the connection"
    );

    c.null().await.unwrap();
    assert!(getattr(&mut c, &root).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_allow_list_refuses_other_clients() {
    let tmp = TempDir::new().unwrap();
    let srv = start(&tmp, &["--allow", "10.0.0.0/8"]);
    let r = connect_path(srv.port, "/", cred(1000, 1000, &[])).await;
    assert!(r.is_err(), "mount from 127.0.0.1 must be refused");
    drop(srv);
    let srv = start(&tmp, &["--allow", "10.0.0.0/8,127.0.0.1"]);
    connect(srv.port, 1000, 1000, &[]).await;
}
