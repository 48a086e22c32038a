//! The shipped binaries load write-behind from its `.so`: resolve it through the core's
//! registry with no built-in types, instantiate it from the library, and move data through it.
//! (`cargo build -p xlfs-write-behind` puts the library next to the test binaries.)

use xlator_api::abi_stable::std_types::RStr;
use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, InitArgs, Loc, Options};
use xlfs_core::registry::Registry;
use xlfs_core::services::host_services;
use xlfs_testkit::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_its_shared_library_and_works() {
    let registry = Registry::with_search_path(Registry::default_search_path(), false);
    let resolved = registry
        .resolve("performance/write-behind")
        .unwrap_or_else(|e| {
            panic!("build the plugin first (cargo build -p xlfs-write-behind): {e}")
        });
    let library = resolved
        .library
        .clone()
        .expect("resolved from a library, not built in");
    let file_name = library
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert_eq!(
        file_name,
        "libxlfs_write_behind.so",
        "{}",
        library.display()
    );

    let keys: Vec<&str> = resolved
        .info
        .options
        .iter()
        .map(|o| o.key.as_str())
        .collect();
    for key in [
        "window-size",
        "aggregate-size",
        "flush-behind",
        "trickling-writes",
        "strict-o-direct",
    ] {
        assert!(
            keys.contains(&key),
            "{key} missing from the schema: {keys:?}"
        );
    }
    let mut options = Options::new();
    for o in resolved.info.options.iter() {
        options.set(&o.key, &o.default);
    }
    let wb = (resolved.module.new_xlator())(
        RStr::from("performance/write-behind"),
        InitArgs {
            name: "wb".into(),
            options,
            children: vec![MemLeaf::new()].into(),
            services: host_services(),
        },
    )
    .into_result()
    .unwrap_or_else(|e| panic!("instantiating from the library: {e}"));

    let cx = Ctx::root();
    let fd = Fd {
        id: FdId(1),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR | libc::O_CREAT,
    };
    let e = wb
        .create(&cx, Loc::new(Gfid::ROOT, "f"), fd, 0o644, 0)
        .await
        .expect("create");
    let fd = Fd {
        gfid: e.attr.gfid,
        ..fd
    };
    for i in 0..64u64 {
        let n = wb
            .writev(&cx, fd, i * 1000, Buf::from_vec(vec![i as u8; 1000]), 0)
            .await;
        assert_eq!(n, Ok(1000));
    }
    assert_eq!(wb.fstat(&cx, fd).await.expect("fstat").size, 64_000);
    let back = wb.readv(&cx, fd, 5_000, 1000).await.expect("readv");
    assert_eq!(back.as_slice(), &[5u8; 1000][..]);
    wb.fsync(&cx, fd, false).await.expect("fsync");
    wb.flush(&cx, fd).await.expect("flush");
    wb.release(&cx, fd).await.expect("release");
}
