//! The stable translator API of xlfs: the fop table, the types that cross the plugin
//! boundary, the ABI, the option schema, host services, and the SDK for writing translators.
//!
//! A translator that counts lookups and passes everything else down:
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use xlator_api::{Ctx, Entry, Errno, Init, Loc, Subvol, Translator};
//!
//! pub struct CountLookups { children: Vec<Subvol>, n: AtomicU64 }
//!
//! impl Translator for CountLookups {
//!     const TYPE: &'static str = "example/count-lookups";
//!     type Options = ();
//!     fn init(init: Init<()>) -> Result<Self, String> {
//!         Ok(CountLookups { children: init.children, n: AtomicU64::new(0) })
//!     }
//!     fn children(&self) -> &[Subvol] { &self.children }
//!     async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
//!         self.n.fetch_add(1, Ordering::Relaxed);
//!         self.children[0].lookup(cx, loc).await
//!     }
//! }
//! xlator_api::export_translators!(CountLookups);
//! # fn main() {}
//! ```
#![allow(non_local_definitions)]

mod abi;
mod abi_id;
mod backing;
mod buf;
mod ctx;
mod dump;
mod fops;
mod logbridge;
mod options;
pub mod pages;
#[doc(hidden)]
pub mod panics;
#[doc(hidden)]
pub mod sdk;
mod services;
mod types;

pub use abi::{
    BUILD_ID_SYMBOL_PREFIX, DumpFormat, Event, EventKind, FfiFop, FopFuture, InitArgs,
    MODULE_SYMBOL_PREFIX, StaticModule, Subvol, TypeInfo, XlatorModule, XlatorModuleRef,
    XlatorVTable, build_id, static_modules,
};
/// This build's ABI manifest (one `type = shape` line per boundary type): see `abi_id`.
pub use abi_id::manifest as abi_manifest;
pub use abi_id::{ABI_ID_PREFIX, ABI_MANIFEST_SYMBOL_PREFIX, compared_part, describe_differences};
pub use backing::{BackingFile, BackingWanted, Opened};
pub use buf::{Buf, pipe_with_room};
pub use ctx::{
    AroundLock, CreateXattrs, Ctx, CtxBuilder, CtxExtension, ExtScope, GfidReq,
    LOCKS_AROUND_CREATE_XATTR, LOCKS_AROUND_XATTR, LkModeChecked, LocksAround, PipePayloadOk,
    UnlinkExact, UnlinkUnlessMarked, XattrReq,
};
pub use dump::{Dump, DumpField, DumpValue, PENDING_AT_EXIT, json_string};
pub use fops::{Fop, FopAttrs};
pub use options::{
    FromOption, OptionKind, OptionKv, OptionSpec, Options, XlatorOptions, parse_bool,
    parse_duration, parse_size,
};
pub use sdk::{ChildState, Init, Translator, listing_page, one_child, panic_message, reopen_fd};
pub use services::{BlockingJob, EventSink, HostServices, LogFn, LogLevel, LogSink};
pub use types::*;

/// Re-exports of the ABI crates, so translator crates need only `xlator-api`.
pub use abi_stable;
pub use async_ffi;

#[doc(hidden)]
pub mod abi_internals {
    pub use crate::abi_id::{build_id_c, manifest_c};
}

#[doc(hidden)]
pub mod __private {
    pub use crate::abi::{InitArgs, StaticModule, Subvol, TypeInfo, XlatorModule, XlatorModuleRef};
    pub use crate::services::{LogLevel, LogSink};
    pub use abi_stable::library::{
        __call_root_module_loader, CheckTypeLayout, LibHeader, RootModuleResult,
    };
    pub use abi_stable::prefix_type::PrefixTypeTrait;
    pub use abi_stable::std_types::{RResult, RStr, RString, RVec};
    pub use inventory;
}
