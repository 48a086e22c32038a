//! The shipped binaries load distribute from its `.so` (volgen names the type
//! `cluster/distribute`; GlusterFS volfiles may say `cluster/dht`): resolve both names through
//! the core's registry with no built-in types and check the schema. (`cargo build -p
//! xlfs-dht` puts the library next to the test binaries.)

use xlfs_testkit::plugin::load_from_so;

#[test]
fn loads_from_its_shared_library_under_both_names() {
    for ty in ["cluster/distribute", "cluster/dht"] {
        let plugin = load_from_so(ty);
        let library = plugin.library();
        let file_name = library
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert_eq!(file_name, "libxlfs_dht.so", "{ty}: {}", library.display());
        let keys = plugin.option_keys();
        for k in ["min-free-disk", "lookup-unhashed", "statfs-interval"] {
            assert!(keys.contains(&k), "{ty}: {keys:?}");
        }
    }
}
