//! The binary interface between the core and translator libraries: the translator object
//! ([`Subvol`]) with its generated vtable, the root module every library exports, and the build
//! id checked before anything else is touched (derived from these layouts: `abi_id`).

use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use async_ffi::FfiFuture;

use crate::ctx::Ctx;
use crate::options::{OptionSpec, Options};
use crate::services::{HostServices, LogLevel, LogSink};
use crate::types::Errno;

/// The build id of this xlator-api, derived from the ABI (type layouts, fop table, target):
/// see [`crate::abi_id`]. The core refuses a library whose id differs, naming what differs,
/// before checking layouts.
pub fn build_id() -> &'static str {
    crate::abi_id::build_id()
}

/// Prefix of the symbol exporting a library's root module; the suffix is the crate name.
pub const MODULE_SYMBOL_PREFIX: &str = "xlfs_xlator_module_";
/// Prefix of the symbol exporting a library's build id; the suffix is the crate name.
pub const BUILD_ID_SYMBOL_PREFIX: &str = "xlfs_xlator_build_id_";

/// Graph events delivered through `notify`.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Debug)]
pub enum EventKind {
    /// Child `child` can serve fops.
    ChildUp,
    /// Child `child` stopped serving fops (brick gone, connection lost).
    ChildDown,
    /// The graph this translator belongs to is being replaced; finish background work.
    GraphSwitch,
}

/// A graph event; `child` is the index into the translator's children.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub child: u32,
}

/// Format of a statedump.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Debug)]
pub enum DumpFormat {
    Text,
    Json,
}

/// Reply future of a fop across the boundary.
pub type FfiFop<T> = FfiFuture<RResult<T, Errno>>;

macro_rules! gen_vtable {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// The translator vtable: lifecycle entries, then one entry per fop in table order.
        /// `this` is the translator's own object (an `Arc` in the SDK).
        #[repr(C)]
        #[derive(StableAbi)]
        pub struct XlatorVTable {
            pub xl_retain: unsafe extern "C" fn(this: *const c_void),
            pub xl_release: unsafe extern "C" fn(this: *const c_void),
            pub xl_notify: unsafe extern "C" fn(this: *const c_void, event: Event),
            pub xl_upcall: unsafe extern "C" fn(this: *const c_void, child: u32, up: &crate::Upcall),
            pub xl_reconfigure:
                unsafe extern "C" fn(this: *const c_void, options: Options) -> RResult<(), RString>,
            pub xl_dump: unsafe extern "C" fn(this: *const c_void) -> crate::dump::Dump,
            $( pub $name: unsafe extern "C" fn(this: *const c_void, cx: Ctx $(, $arg: $ty)*) -> FfiFop<$ret>, )*
        }

        impl Subvol {
            $(
                $(#[doc = $doc])*
                #[inline]
                pub fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> FopFuture<$ret> {
                    // SAFETY: `this` is kept alive by this Subvol's reference, and the vtable
                    // belongs to the object it was created with.
                    FopFuture(unsafe { (self.vt.$name)(self.this, cx.clone() $(, $arg)*) })
                }
            )*
        }
    };
}
crate::for_each_fop!(gen_vtable);

/// A handle on a translator instance: what a parent holds for each child, and what hosts hold
/// for the top of the graph. Cloning takes a reference; the instance is dropped (fini) with its
/// last handle.
#[repr(C)]
#[derive(StableAbi)]
pub struct Subvol {
    this: *const c_void,
    vt: &'static XlatorVTable,
    name: RString,
    type_name: RString,
}

// SAFETY: the SDK only builds Subvols from `Arc<T>` with `T: Send + Sync`.
unsafe impl Send for Subvol {}
// SAFETY: as above.
unsafe impl Sync for Subvol {}

impl Subvol {
    /// Wraps a raw object. Used by the SDK's export code.
    ///
    /// # Safety
    /// `this` must be a live object owning one reference that `vt.release` gives back, and
    /// every vtable entry must accept it.
    #[doc(hidden)]
    pub unsafe fn from_raw(
        this: *const c_void,
        vt: &'static XlatorVTable,
        name: RString,
        type_name: RString,
    ) -> Subvol {
        Subvol {
            this,
            vt,
            name,
            type_name,
        }
    }

    /// The instance name from the volfile.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The translator type (`performance/write-behind`).
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// Delivers a graph event.
    pub fn notify(&self, event: Event) {
        // SAFETY: see `Subvol::lookup`.
        unsafe { (self.vt.xl_notify)(self.this, event) }
    }

    /// Delivers an upcall from this translator's child `child` (see [`crate::Upcall`]).
    pub fn upcall(&self, child: u32, up: &crate::Upcall) {
        // SAFETY: see `Subvol::lookup`.
        unsafe { (self.vt.xl_upcall)(self.this, child, up) }
    }

    /// Applies changed options (already validated against the schema).
    pub fn reconfigure(&self, options: Options) -> Result<(), String> {
        // SAFETY: see `Subvol::lookup`.
        unsafe { (self.vt.xl_reconfigure)(self.this, options) }
            .into_result()
            .map_err(String::from)
    }

    /// The translator's counters and state (rendered by the core: `xlfs_core::render_dump`).
    pub fn dump(&self) -> crate::dump::Dump {
        // SAFETY: see `Subvol::lookup`.
        unsafe { (self.vt.xl_dump)(self.this) }
    }

    /// Whether two handles name the same instance.
    pub fn same_instance(&self, other: &Subvol) -> bool {
        std::ptr::eq(self.this, other.this)
    }
}

impl Clone for Subvol {
    fn clone(&self) -> Subvol {
        // SAFETY: `this` is live (we hold a reference); retain adds one for the clone.
        unsafe { (self.vt.xl_retain)(self.this) };
        Subvol {
            this: self.this,
            vt: self.vt,
            name: self.name.clone(),
            type_name: self.type_name.clone(),
        }
    }
}

impl Drop for Subvol {
    fn drop(&mut self) {
        // SAFETY: gives back exactly the reference this handle owns.
        unsafe { (self.vt.xl_release)(self.this) }
    }
}

impl std::fmt::Debug for Subvol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subvol({} : {})", self.name, self.type_name)
    }
}

/// The reply future of a call to a child: an FFI future mapped to `Result`.
#[must_use = "a fop does nothing unless awaited"]
pub struct FopFuture<T>(FfiFop<T>);

impl<T> Future for FopFuture<T> {
    type Output = Result<T, Errno>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(RResult::into_result)
    }
}

/// What the core passes to a translator constructor.
#[repr(C)]
#[derive(StableAbi)]
pub struct InitArgs {
    /// Instance name from the volfile.
    pub name: RString,
    /// Effective options (volfile values and defaults), validated against the schema.
    pub options: Options,
    /// The children, in volfile order, already initialised.
    pub children: RVec<Subvol>,
    pub services: HostServices,
}

/// What a library says about one translator type it provides.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct TypeInfo {
    /// `category/name`.
    pub name: RString,
    /// One paragraph for `--help`-style listings.
    pub doc: RString,
    pub options: RVec<OptionSpec>,
    pub min_children: u32,
    /// `u32::MAX`: no upper bound.
    pub max_children: u32,
    /// Raises its own `ChildUp` (see `Translator::ANNOUNCES_CHILD_UP`).
    pub announces_child_up: bool,
    /// Keeps file data as stored (see `Translator::KEEPS_FILE_DATA`).
    pub keeps_file_data: bool,
}

/// The root module of a translator library.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = XlatorModuleRef)))]
#[sabi(missing_field(panic))]
pub struct XlatorModule {
    /// The translator types this library provides.
    pub types: extern "C" fn() -> RVec<TypeInfo>,
    /// Routes this library's `tracing` events to the host (each cdylib has its own tracing
    /// dispatcher); `max_level` filters before formatting.
    pub install_log_bridge: extern "C" fn(log: LogSink, max_level: LogLevel),
    /// Builds an instance of `type_name`. Panics in the constructor become `RErr`.
    #[sabi(last_prefix_field)]
    pub new_xlator: extern "C" fn(type_name: RStr<'_>, args: InitArgs) -> RResult<Subvol, RString>,
}

impl RootModule for XlatorModuleRef {
    abi_stable::declare_root_module_statics! {XlatorModuleRef}
    const BASE_NAME: &'static str = "xlfs_xlator";
    const NAME: &'static str = "xlfs translator";
    const VERSION_STRINGS: VersionStrings = abi_stable::package_version_strings!();
}

/// A translator library linked statically into the binary (registered by
/// [`export_translators!`](crate::export_translators) through `inventory`).
pub struct StaticModule {
    pub crate_name: &'static str,
    pub module: fn() -> XlatorModuleRef,
}

inventory::collect!(StaticModule);

/// Every statically linked translator library.
pub fn static_modules() -> impl Iterator<Item = &'static StaticModule> {
    inventory::iter::<StaticModule>.into_iter()
}
