//! performance/read-ahead loaded from its real `.so` by the core's registry, as the shipped
//! binaries load it. Build the library first: `cargo build -p xlfs-read-ahead`.

use xlator_api::{Buf, Ctx};
use xlfs_testkit::fixtures::create_file;
use xlfs_testkit::memfs::MemLeaf;
use xlfs_testkit::plugin::load_from_so;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_the_shared_library_and_reads_ahead() {
    let plugin = load_from_so("performance/read-ahead");
    assert_eq!(plugin.option_keys(), ["page-size", "page-count"]);
    let mut options = plugin.default_options();
    let top = plugin
        .instantiate("ra", options.clone(), vec![MemLeaf::new()])
        .expect("the plugin builds an instance");
    assert_eq!(top.type_name(), "performance/read-ahead");

    let cx = Ctx::root();
    let fd = create_file(&top, "f").await;
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 253) as u8).collect();
    top.writev(&cx, fd, 0, Buf::from_vec(data.clone()), 0)
        .await
        .expect("writev");
    let mut off = 0usize;
    while off < data.len() {
        let b = top
            .readv(&cx, fd, off as u64, 64 << 10)
            .await
            .expect("readv")
            .data;
        assert_eq!(&*b, &data[off..off + b.len()]);
        off += b.len();
    }
    let dump = top.dump().to_json();
    assert!(
        !dump.contains("\"prefetched\": 0,"),
        "sequential reads prefetched: {dump}"
    );

    options.set("page-count", "1");
    top.reconfigure(options)
        .expect("reconfigure through the library's vtable");
    assert_eq!(top.dump().find_u64("page_count"), Some(1));
}
