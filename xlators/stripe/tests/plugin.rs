//! The shipped binaries load stripe from its `.so` (volgen's `--stripe N` names the type
//! `cluster/stripe`): resolve it through the core's registry with no built-in types and
//! check its schema. (`cargo build -p xlfs-stripe` puts the library next to the test
//! binaries.)

use xlfs_testkit::plugin::load_from_so;

#[test]
fn loads_from_its_shared_library_with_its_schema() {
    let plugin = load_from_so("cluster/stripe");
    let library = plugin.library();
    let file_name = library
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert_eq!(file_name, "libxlfs_stripe.so", "{}", library.display());
    assert!(plugin.option_keys().contains(&"block-size"));
}
