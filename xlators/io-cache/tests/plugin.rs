//! performance/io-cache loaded from its real `.so` by the core's registry, as the shipped
//! binaries load it. Build the library first: `cargo build -p xlfs-io-cache`.

use xlator_api::{Buf, Ctx};
use xlfs_testkit::fixtures::create_file;
use xlfs_testkit::memfs::MemLeaf;
use xlfs_testkit::plugin::load_from_so;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_the_shared_library_and_caches() {
    let plugin = load_from_so("performance/io-cache");
    assert_eq!(
        plugin.option_keys(),
        [
            "page-size",
            "cache-size",
            "cache-timeout",
            "priority",
            "min-file-size",
            "max-file-size"
        ]
    );
    let mut options = plugin.default_options();
    let top = plugin
        .instantiate("ioc", options.clone(), vec![MemLeaf::new()])
        .expect("the plugin builds an instance");
    assert_eq!(top.type_name(), "performance/io-cache");

    let cx = Ctx::root();
    let fd = create_file(&top, "f").await;
    top.writev(&cx, fd, 0, Buf::from("hello plugin"), 0)
        .await
        .expect("writev");
    for _ in 0..2 {
        let b = top.readv(&cx, fd, 6, 100).await.expect("readv");
        assert_eq!(&*b.data, b"plugin");
    }
    let dump = top.dump().to_json();
    assert!(dump.contains("\"hits\": 1"), "{dump}");

    options.set("cache-size", "0");
    top.reconfigure(options)
        .expect("reconfigure through the library's vtable");
    assert_eq!(top.dump().find_u64("cache_used"), Some(0));
}
