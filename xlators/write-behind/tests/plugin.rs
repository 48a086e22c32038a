//! The shipped binaries load write-behind from its `.so`: resolve it through the core's
//! registry with no built-in types, instantiate it from the library, and move data through it.
//! (`cargo build -p xlfs-write-behind` puts the library next to the test binaries.)

use xlator_api::{Buf, Ctx};
use xlfs_testkit::MemLeaf;
use xlfs_testkit::fixtures::create_file;
use xlfs_testkit::plugin::load_from_so;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_from_its_shared_library_and_works() {
    let plugin = load_from_so("performance/write-behind");
    let library = plugin.library();
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

    let keys = plugin.option_keys();
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
    let wb = plugin
        .instantiate("wb", plugin.default_options(), vec![MemLeaf::new()])
        .unwrap_or_else(|e| panic!("instantiating from the library: {e}"));

    let cx = Ctx::root();
    let fd = create_file(&wb, "f").await;
    for i in 0..64u64 {
        let n = wb
            .writev(&cx, fd, i * 1000, Buf::from_vec(vec![i as u8; 1000]), 0)
            .await;
        assert_eq!(n.map(|r| r.written), Ok(1000));
    }
    assert_eq!(wb.fstat(&cx, fd).await.expect("fstat").size, 64_000);
    let back = wb.readv(&cx, fd, 5_000, 1000).await.expect("readv");
    assert_eq!(back.data.as_slice(), &[5u8; 1000][..]);
    wb.fsync(&cx, fd, false).await.expect("fsync");
    wb.flush(&cx, fd).await.expect("flush");
    wb.release(&cx, fd).await.expect("release");
}
