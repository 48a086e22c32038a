//! performance/md-cache loaded from its real `.so` by the core's registry, as the shipped
//! binaries load it. Build the library first: `cargo build -p xlfs-md-cache`.

use xlator_api::{Ctx, Gfid, Upcall};
use xlfs_testkit::fixtures::create_file;
use xlfs_testkit::memfs::MemLeaf;
use xlfs_testkit::plugin::load_from_so;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_the_shared_library_caches_and_takes_upcalls() {
    let plugin = load_from_so("performance/md-cache");
    assert_eq!(
        plugin.option_keys(),
        ["md-cache-timeout", "negative-timeout", "max-entries"]
    );
    let top = plugin
        .instantiate("md", plugin.default_options(), vec![MemLeaf::new()])
        .expect("the plugin builds an instance");
    assert_eq!(top.type_name(), "performance/md-cache");
    let cx = Ctx::root();
    let fd = create_file(&top, "f").await;
    top.stat(&cx, fd.gfid).await.expect("stat");
    top.stat(&cx, fd.gfid).await.expect("stat");
    assert_eq!(top.dump().find_u64("attr_hits"), Some(1));
    // An upcall crosses the library's vtable too.
    top.upcall(0, &Upcall::entry(Gfid::ROOT, "f"));
    assert_eq!(top.dump().find_u64("upcalls"), Some(1));
}
