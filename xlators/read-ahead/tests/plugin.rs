//! performance/read-ahead loaded from its real `.so` by the core's registry, as the shipped
//! binaries load it. Build the library first: `cargo build -p xlfs-read-ahead`.

use xlator_api::{Buf, Ctx, DumpFormat, Fd, FdId, Gfid, InitArgs, Loc, Options};
use xlfs_core::registry::Registry;
use xlfs_core::services::host_services;
use xlfs_testkit::memfs::MemLeaf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_the_shared_library_and_reads_ahead() {
    let registry = Registry::with_search_path(Registry::default_search_path(), false);
    let r = registry
        .resolve("performance/read-ahead")
        .unwrap_or_else(|e| panic!("{e} (run `cargo build -p xlfs-read-ahead` first)"));
    let lib = r
        .library
        .clone()
        .expect("resolved from a library, not built in");
    assert!(
        lib.extension().is_some_and(|e| e == "so"),
        "{}",
        lib.display()
    );
    let keys: Vec<&str> = r.info.options.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["page-size", "page-count"]);
    let mut options = Options::new();
    for o in r.info.options.iter() {
        options.set(&o.key, &o.default);
    }
    let args = InitArgs {
        name: "ra".into(),
        options: options.clone(),
        children: vec![MemLeaf::new()].into(),
        services: host_services(),
    };
    let top = (r.module.new_xlator())("performance/read-ahead".into(), args)
        .into_result()
        .expect("the plugin builds an instance");
    assert_eq!(top.type_name(), "performance/read-ahead");

    let cx = Ctx::root();
    let fd = Fd {
        id: FdId(1),
        gfid: Gfid::NULL,
        flags: libc::O_RDWR | libc::O_CREAT,
    };
    let e = top
        .create(&cx, Loc::new(Gfid::ROOT, "f"), fd, 0o644, 0)
        .await
        .expect("create");
    let fd = Fd {
        gfid: e.attr.gfid,
        ..fd
    };
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 253) as u8).collect();
    top.writev(&cx, fd, 0, Buf::from_vec(data.clone()), 0)
        .await
        .expect("writev");
    let mut off = 0usize;
    while off < data.len() {
        let b = top
            .readv(&cx, fd, off as u64, 64 << 10)
            .await
            .expect("readv");
        assert_eq!(&*b, &data[off..off + b.len()]);
        off += b.len();
    }
    let dump = top.dump(DumpFormat::Json);
    assert!(
        !dump.contains("\"prefetched\": 0,"),
        "sequential reads prefetched: {dump}"
    );

    options.set("page-count", "1");
    top.reconfigure(options)
        .expect("reconfigure through the library's vtable");
    assert!(top.dump(DumpFormat::Text).contains("page_count   1"));
}
