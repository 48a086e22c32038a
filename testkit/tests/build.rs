//! `xlfs_testkit::build`: schema defaults, checked overrides, and the messages of refusals.

use xlator_api::Gfid;
use xlfs_testkit::MemLeaf;
use xlfs_testkit::build::{options_for, try_build, try_options_for};

#[test]
fn fills_every_default_then_applies_overrides() {
    let o = options_for::<MemLeaf>(&[("capacity", "1MiB")]);
    assert_eq!(o.get("capacity"), Some("1MiB"));
    assert_eq!(o.get("max-inodes"), Some("16777216"));
}

#[test]
fn refusals_name_the_type_or_the_option() {
    let e = try_options_for::<MemLeaf>(&[("capacty", "1MiB")]).expect_err("unknown key");
    assert_eq!(e, "storage/memory has no option \"capacty\"");
    let e = try_options_for::<MemLeaf>(&[("max-inodes", "0")]).expect_err("below the range");
    assert!(e.starts_with("option \"max-inodes\": "), "{e}");
}

#[test]
#[should_panic(expected = "storage/memory has no option \"capacty\"")]
fn options_for_panics_on_an_unknown_key() {
    let _ = options_for::<MemLeaf>(&[("capacty", "1MiB")]);
}

#[tokio::test]
async fn try_build_names_the_instance() {
    let leaf = try_build::<MemLeaf>("mem0", &[], Vec::new()).expect("builds");
    assert_eq!(leaf.name(), "mem0");
    leaf.stat(&xlator_api::Ctx::root(), Gfid::ROOT)
        .await
        .expect("root exists");
}
