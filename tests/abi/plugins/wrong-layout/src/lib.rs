//! A library with the right build id whose root module has another layout (as if built from a
//! patched xlator-api): `new_xlator` takes a `u32` where the core passes `InitArgs`. abi_stable's
//! layout check must refuse it before any of its code runs.
#![allow(non_local_definitions)]

use abi_stable::{StableAbi, library::RootModule, sabi_types::VersionStrings};
use xlator_api::__private::{
    __call_root_module_loader, CheckTypeLayout, LibHeader, PrefixTypeTrait, RResult, RString, RVec,
    RootModuleResult,
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = XlatorModuleRef)))]
#[sabi(missing_field(panic))]
pub struct XlatorModule {
    pub types: extern "C" fn() -> RVec<RString>,
    pub install_log_bridge: extern "C" fn(u8),
    #[sabi(last_prefix_field)]
    pub new_xlator: extern "C" fn(u32) -> RResult<u64, RString>,
}

impl RootModule for XlatorModuleRef {
    abi_stable::declare_root_module_statics! {XlatorModuleRef}
    const BASE_NAME: &'static str = "xlfs_xlator";
    const NAME: &'static str = "xlfs translator";
    const VERSION_STRINGS: VersionStrings = abi_stable::package_version_strings!();
}

extern "C" fn types() -> RVec<RString> {
    RVec::new()
}
extern "C" fn install_log_bridge(_: u8) {}
extern "C" fn new_xlator(_: u32) -> RResult<u64, RString> {
    RResult::RErr("never called".into())
}

fn module() -> XlatorModuleRef {
    XlatorModule {
        types,
        install_log_bridge,
        new_xlator,
    }
    .leak_into_prefix()
}

#[unsafe(export_name = "xlfs_xlator_module_xlfs_abi_wrong_layout")]
pub static HEADER: LibHeader = {
    extern "C" fn erased() -> RootModuleResult {
        __call_root_module_loader(module)
    }
    // SAFETY: `erased` returns this crate's XlatorModuleRef (which is the point of the test).
    unsafe { LibHeader::from_constructor::<XlatorModuleRef>(erased, CheckTypeLayout::Yes) }
};

#[unsafe(export_name = "xlfs_xlator_build_id_xlfs_abi_wrong_layout")]
pub extern "C" fn build_id() -> *const std::ffi::c_char {
    xlator_api::abi_internals::build_id_c()
}
