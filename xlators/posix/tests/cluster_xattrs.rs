//! What cluster translators need of xattr and data fops: `getxattrs`/`setxattrs` (several at
//! once, all or none), xattrop that reads without writing for a zero delta and is all or
//! nothing over its keys, and `rchecksum`.

mod common;

use common::*;
use sha2::Digest as _;
use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Buf, ClientId, Errno, Fd, FdId, Gfid, Iatt, Subvol, Xattr, XattropOp, Xattrs};

fn xa(name: &str, v: &[u8]) -> Xattr {
    Xattr {
        name: name.into(),
        value: Buf::copy_from_slice(v),
    }
}

fn xs(list: &[(&str, &[u8])]) -> Xattrs {
    list.iter().map(|(n, v)| xa(n, v)).collect()
}

async fn value(top: &Subvol, g: Gfid, name: &str) -> Option<Vec<u8>> {
    match top.getxattr(&root(), g, name.into()).await {
        Ok(v) => Some(v.as_slice().to_vec()),
        Err(Errno::ENODATA) => None,
        Err(e) => panic!("getxattr {name}: {e:?}"),
    }
}

async fn listed(top: &Subvol, g: Gfid) -> Vec<String> {
    let mut v: Vec<String> = top
        .listxattr(&root(), g)
        .await
        .expect("listxattr")
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getxattrs_leaves_out_missing_and_hidden_names() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    top.setxattrs(&cx, g, xs(&[("user.a", b"1"), ("trusted.b", b"2")]), 0)
        .await
        .expect("setxattrs");
    let names: RVec<_> = [
        "user.a",
        "user.missing",
        "trusted.b",
        "trusted.gfid",
        "user.xlfs.gfid",
    ]
    .into_iter()
    .map(Into::into)
    .collect();
    let got = top
        .getxattrs(&cx, g, names.clone())
        .await
        .expect("getxattrs");
    let got: Vec<(String, Vec<u8>)> = got
        .iter()
        .map(|x| (x.name.to_string(), x.value.as_slice().to_vec()))
        .collect();
    assert_eq!(
        got,
        [
            ("user.a".to_string(), b"1".to_vec()),
            ("trusted.b".to_string(), b"2".to_vec()),
            ("trusted.gfid".to_string(), g.0.to_vec()),
        ]
    );
    // trusted.* is root's, as for getxattr.
    let got = top
        .getxattrs(&user(1000), g, names)
        .await
        .expect("as a user");
    let got: Vec<String> = got.iter().map(|x| x.name.to_string()).collect();
    assert_eq!(got, ["user.a", "trusted.gfid"]);
    assert_eq!(
        top.getxattrs(&cx, Gfid::random(), RVec::new()).await.err(),
        Some(Errno::ESTALE)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setxattrs_sets_all_or_none() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    top.setxattr(&cx, g, xa("user.old", b"before"), 0)
        .await
        .expect("setxattr");
    let before = listed(&top, g).await;
    // A failure part way (the third value is beyond XATTR_SIZE_MAX): the first two are back
    // as they were, one changed, one absent again.
    let huge = vec![1u8; 70 * 1024];
    let r = top
        .setxattrs(
            &cx,
            g,
            xs(&[
                ("user.old", b"after"),
                ("user.new", b"n"),
                ("user.huge", &huge),
            ]),
            0,
        )
        .await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(
        value(&top, g, "user.old").await.as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(value(&top, g, "user.new").await, None);
    assert_eq!(listed(&top, g).await, before);
    // XATTR_CREATE on a name that exists, after one that did not.
    let r = top
        .setxattrs(
            &cx,
            g,
            xs(&[("user.fresh", b"f"), ("user.old", b"x")]),
            libc::XATTR_CREATE,
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EEXIST));
    assert_eq!(listed(&top, g).await, before);
    assert_eq!(top.dump().find_u64("xattr-rollbacks"), Some(2));
    // A name that may not be set is refused before anything is written.
    let r = top
        .setxattrs(
            &user(1000),
            g,
            xs(&[("user.a", b"1"), ("trusted.b", b"2")]),
            0,
        )
        .await;
    assert_eq!(r.err(), Some(Errno::EPERM));
    let r = top
        .setxattrs(&cx, g, xs(&[("user.a", b"1"), ("user.xlfs.gfid", b"2")]), 0)
        .await;
    assert_eq!(r.err(), Some(Errno::EPERM));
    assert_eq!(listed(&top, g).await, before);
    // And when everything can be set, everything is.
    top.setxattrs(&cx, g, xs(&[("user.old", b"after"), ("user.new", b"n")]), 0)
        .await
        .expect("setxattrs");
    assert_eq!(
        value(&top, g, "user.old").await.as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(value(&top, g, "user.new").await.as_deref(), Some(&b"n"[..]));
}

async fn stat(top: &Subvol, g: Gfid) -> Iatt {
    top.stat(&root(), g).await.expect("stat")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_delta_xattrop_reads_without_writing() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    top.setxattr(&cx, g, xa("trusted.afr.c0", &[0, 0, 0, 5, 0, 0, 0, 6]), 0)
        .await
        .expect("setxattr");
    let names = listed(&top, g).await;
    let ctime = stat(&top, g).await.ctime;
    let zero = xs(&[("trusted.afr.c0", &[0; 8]), ("trusted.afr.c1", &[0; 12])]);
    let r = top
        .xattrop(&cx, g, XattropOp::AddArray32, zero)
        .await
        .expect("xattrop");
    assert_eq!(r[0].value.as_slice(), &[0, 0, 0, 5, 0, 0, 0, 6]);
    assert_eq!(
        r[1].value.as_slice(),
        &[0; 12],
        "zeros of the operand's length"
    );
    let f = fd(g, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let zero64 = xs(&[("trusted.afr.c0", &[0; 8]), ("trusted.afr.c1", &[0; 16])]);
    let r = top
        .fxattrop(&cx, f, XattropOp::AddArray64, zero64)
        .await
        .expect("fxattrop");
    assert_eq!(r[0].value.as_slice(), &[0, 0, 0, 5, 0, 0, 0, 6]);
    assert_eq!(r[1].value.as_slice(), &[0; 16]);
    top.release(&cx, f).await.expect("release");
    assert_eq!(listed(&top, g).await, names, "no key made");
    assert_eq!(stat(&top, g).await.ctime, ctime, "nothing written");
    assert_eq!(top.dump().find_u64("xattrop-zero-reads"), Some(4));
    // A non-zero delta does write (and so changes the ctime).
    top.xattrop(
        &cx,
        g,
        XattropOp::AddArray32,
        xs(&[("trusted.afr.c1", &[0, 0, 0, 1])]),
    )
    .await
    .expect("xattrop");
    assert_eq!(
        value(&top, g, "trusted.afr.c1").await.as_deref(),
        Some(&[0, 0, 0, 1][..])
    );
    assert_ne!(stat(&top, g).await.ctime, ctime);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_key_xattrop_with_one_bad_key_changes_nothing() {
    let (_d, top) = new_brick();
    let cx = root();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await.attr.gfid;
    top.setxattr(&cx, g, xa("trusted.a", &[0, 0, 0, 1]), 0)
        .await
        .expect("setxattr");
    // Stored as 3 bytes: not a whole number of lanes.
    top.setxattr(&cx, g, xa("trusted.bad", &[1, 2, 3]), 0)
        .await
        .expect("setxattr");
    let names = listed(&top, g).await;
    let one = [0u8, 0, 0, 1];
    for keys in [
        // The bad key last: nothing before it may have been written.
        xs(&[
            ("trusted.a", &one),
            ("trusted.new", &one),
            ("trusted.bad", &one),
        ]),
        // An operand that is not whole lanes.
        xs(&[("trusted.a", &one), ("trusted.new", &[0, 1])]),
        // One key twice.
        xs(&[("trusted.a", &one), ("trusted.a", &one)]),
        // One key the caller may not change.
        xs(&[("trusted.a", &one), ("trusted.gfid", &[0; 16])]),
    ] {
        let r = top.xattrop(&cx, g, XattropOp::AddArray32, keys).await;
        assert!(matches!(r, Err(Errno::EINVAL | Errno::EPERM)), "{r:?}");
        assert_eq!(value(&top, g, "trusted.a").await.as_deref(), Some(&one[..]));
        assert_eq!(listed(&top, g).await, names);
    }
    // A write failing part way (a value larger than the file system takes, where it refuses
    // one) puts back what was written before it.
    let big = vec![1u8; 64 * 1024];
    let r = top
        .xattrop(
            &cx,
            g,
            XattropOp::AddArray32,
            xs(&[("trusted.a", &one), ("trusted.big", &big)]),
        )
        .await;
    if r.is_err() {
        assert_eq!(value(&top, g, "trusted.a").await.as_deref(), Some(&one[..]));
        assert_eq!(listed(&top, g).await, names);
    }
}

/// Adler-32 as RFC 1950 defines it.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

fn sha256(data: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(data).into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rchecksum_matches_adler32_and_sha256_and_is_short_at_eof() {
    assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    assert_eq!(
        sha256(b"abc")[..4],
        [0xba, 0x78, 0x16, 0xbf],
        "the FIPS 180-2 example"
    );
    let (_d, top) = new_brick();
    let cx = root();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let g = mkfile(&top, &cx, Gfid::ROOT, "f", &data).await.attr.gfid;
    let f = fd(g, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let anon = Fd {
        id: FdId::ANONYMOUS,
        gfid: g,
        flags: libc::O_RDONLY,
    };
    for fd in [f, anon] {
        for (off, len, want) in [
            (0u64, 4096u32, &data[..4096]),
            (100, 1000, &data[100..1100]),
            (9000, 4096, &data[9000..]), // short at end of file
            (10_000, 16, &data[..0]),
            (20_000, 16, &data[..0]),
        ] {
            let c = top.rchecksum(&cx, fd, off, len).await.expect("rchecksum");
            assert_eq!(c.len as usize, want.len(), "{off}+{len}");
            assert_eq!(c.weak, adler32(want), "{off}+{len}");
            assert_eq!(c.strong, sha256(want), "{off}+{len}");
        }
    }
    top.release(&cx, f).await.expect("release");
    // Read with readv's rights: a file the caller may not read is refused.
    let anon_user = Fd { gfid: g, ..anon };
    let private = xlator_api::SetAttr {
        perm: xlator_api::abi_stable::std_types::ROption::RSome(0o600),
        ..Default::default()
    };
    top.setattr(&cx, g, private).await.expect("chmod");
    assert_eq!(
        top.rchecksum(&user(1000), anon_user, 0, 10).await.err(),
        Some(Errno::EACCES)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_client_is_accepted() {
    let (_d, top) = new_brick();
    top.forget_client(&root(), ClientId(7))
        .await
        .expect("forget_client");
}
