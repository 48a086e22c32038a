//! A library as a translator built by another xlfs release looks to the loader: its build id
//! names another xlator-api version and compiler. The loader must refuse it on that line alone,
//! before reading anything else from the library.

#[unsafe(export_name = "xlfs_xlator_build_id_xlfs_abi_wrong_build")]
pub extern "C" fn build_id() -> *const std::ffi::c_char {
    c"xlator-api 0.0.9 (rustc 1.80.0 (051478957 2024-07-21), x86_64-unknown-linux-gnu, fops 0123456789abcdef)"
        .as_ptr()
}
