//! Building one translator instance in a test, the way the core would: every option of the
//! schema at its default, then the test's overrides, each checked against the schema first.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlfs_testkit::MemLeaf;
//! use xlfs_testkit::build::{build, try_build, try_options_for};
//!
//! // Every option at its default but one.
//! let top = build::<MemLeaf>(&[("capacity", "1MiB")], Vec::new());
//! assert_eq!(top.type_name(), "storage/memory");
//! // Overrides are checked against the schema before `init` runs...
//! let e = try_options_for::<MemLeaf>(&[("capacity", "lots")]).unwrap_err();
//! assert!(e.starts_with("option \"capacity\": "), "{e}");
//! // ...and the fallible `try_*` forms return the reason instead of panicking.
//! let e = try_build::<MemLeaf>("m", &[("max-inodes", "0")], Vec::new()).err().unwrap();
//! assert!(e.starts_with("option \"max-inodes\": "), "{e}");
//! # }
//! ```

use xlator_api::sdk::instantiate;
use xlator_api::{InitArgs, Options, Subvol, Translator, XlatorOptions};
use xlfs_core::services::host_services;

/// The options of `T`: every key of its schema at its default, then `set`.
///
/// Errors name the problem: `"<type> has no option \"key\""` for a key outside the schema,
/// `"option \"key\": <reason>"` for a value the schema refuses. Checks that only the
/// translator's `init`/`reconfigure` makes (paths, cross-option rules...) are not made here.
pub fn try_options_for<T: Translator>(set: &[(&str, &str)]) -> Result<Options, String> {
    let schema = T::Options::schema();
    let mut o = Options::new();
    for s in &schema {
        o.set(&s.key, &s.default);
    }
    for (k, v) in set {
        let spec = schema
            .iter()
            .find(|s| s.key.as_str() == *k)
            .ok_or_else(|| format!("{} has no option {k:?}", T::TYPE))?;
        spec.check(v).map_err(|e| format!("option {k:?}: {e}"))?;
        o.set(k, v);
    }
    Ok(o)
}

/// [`try_options_for`], panicking with its message on an unknown key or a refused value.
pub fn options_for<T: Translator>(set: &[(&str, &str)]) -> Options {
    try_options_for::<T>(set).unwrap_or_else(|e| panic!("{e}"))
}

/// An instance of `T` named `name` over `children`, with options from [`try_options_for`].
///
/// Returns the option error or `init`'s refusal (which quotes `name`) as a string.
/// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
pub fn try_build<T: Translator>(
    name: &str,
    set: &[(&str, &str)],
    children: Vec<Subvol>,
) -> Result<Subvol, String> {
    init::<T>(name, try_options_for::<T>(set)?, children)
}

/// An instance of `T` over `children`, named after its type (`T::TYPE`); panics with the
/// reason if [`options_for`] or `init` refuses it.
pub fn build<T: Translator>(set: &[(&str, &str)], children: Vec<Subvol>) -> Subvol {
    init::<T>(T::TYPE, options_for::<T>(set), children)
        .unwrap_or_else(|e| panic!("{} builds: {e}", T::TYPE))
}

fn init<T: Translator>(
    name: &str,
    options: Options,
    children: Vec<Subvol>,
) -> Result<Subvol, String> {
    instantiate::<T>(InitArgs {
        name: name.into(),
        options,
        children: children.into(),
        services: host_services(),
    })
}
