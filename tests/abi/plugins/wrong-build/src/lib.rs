//! A library as a translator built by the release before the cluster-foundations bump looks to
//! the loader: its build id names xlator-api 0.1.0 (the fop table without attributes, Entry
//! without xattrs, dump() returning text), built by this very compiler for this target. The
//! loader must refuse it on that line alone, before reading anything else from the library.

#[unsafe(export_name = "xlfs_xlator_build_id_xlfs_abi_wrong_build")]
pub extern "C" fn build_id() -> *const std::ffi::c_char {
    c"xlator-api 0.1.0 (rustc 1.95.0 (59807616e 2026-04-14), x86_64-unknown-linux-gnu, fops 5c0e7b1d2f3a4b6c)"
        .as_ptr()
}
