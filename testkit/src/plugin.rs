//! Translators loaded from their real shared library by the core's registry, as the shipped
//! binaries load them — to test a translator across the ABI (its exported schema, its
//! vtable), not only as a linked-in Rust type.
//!
//! `cargo test -p <crate>` builds the crate's `cdylib` next to the test binaries, where
//! [`Registry::default_search_path`] finds it; when running a test binary on its own, build
//! the library first (`cargo build -p <crate>`).
//!
//! ```no_run
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)] async fn main() {
//! use xlfs_testkit::{MemLeaf, plugin};
//!
//! let p = plugin::load_from_so("performance/write-behind");
//! let top = p.instantiate("wb", p.default_options(), vec![MemLeaf::new()]).unwrap();
//! assert_eq!(top.type_name(), "performance/write-behind");
//! # }
//! ```

use std::path::Path;

use xlator_api::abi_stable::std_types::RStr;
use xlator_api::{InitArgs, Options, Subvol};
use xlfs_core::registry::{Registry, Resolved};
use xlfs_core::services::host_services;

/// A translator type resolved from a shared library.
pub struct Plugin {
    /// The registry's answer: the type's info as the library exported it, the library's
    /// module, and the library's path (always `Some`).
    pub resolved: Resolved,
}

/// Resolves `type_name` (`category/name`) from a `.so` in the default search path, with no
/// built-in types, so the type cannot come from the test binary itself. Panics, saying
/// what to build, if no library provides it.
pub fn load_from_so(type_name: &str) -> Plugin {
    let registry = Registry::with_search_path(Registry::default_search_path(), false);
    let resolved = registry.resolve(type_name).unwrap_or_else(|e| {
        panic!("{e} (build the translator's library first: `cargo build -p <its crate>`)")
    });
    let lib = resolved
        .library
        .as_deref()
        .expect("resolved from a library, not built in");
    assert!(
        lib.extension().is_some_and(|e| e == "so"),
        "{}",
        lib.display()
    );
    // The registry may be dropped: loaded libraries stay loaded for the life of the process.
    Plugin { resolved }
}

impl Plugin {
    /// The path of the library the type came from.
    pub fn library(&self) -> &Path {
        self.resolved
            .library
            .as_deref()
            .expect("checked by load_from_so")
    }

    /// The option keys of the exported schema, in schema order.
    pub fn option_keys(&self) -> Vec<&str> {
        self.resolved
            .info
            .options
            .iter()
            .map(|o| o.key.as_str())
            .collect()
    }

    /// Every option of the exported schema at its default.
    pub fn default_options(&self) -> Options {
        let mut options = Options::new();
        for o in self.resolved.info.options.iter() {
            options.set(&o.key, &o.default);
        }
        options
    }

    /// An instance named `name` over `children`, built by the library's own constructor.
    ///
    /// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
    pub fn instantiate(
        &self,
        name: &str,
        options: Options,
        children: Vec<Subvol>,
    ) -> Result<Subvol, String> {
        let args = InitArgs {
            name: name.into(),
            options,
            children: children.into(),
            services: host_services(),
        };
        (self.resolved.module.new_xlator())(RStr::from(self.resolved.info.name.as_str()), args)
            .into_result()
            .map_err(|e| e.to_string())
    }
}
