//! Options of storage/posix.

use xlator_api::{FromOption, OptionSpec, Options};

xlator_api::options! {
    /// Options of a storage/posix brick.
    pub struct PosixOptions {
        /// The brick directory (must exist, on a file system with extended attributes).
        pub directory: std::path::PathBuf = OptionSpec::path("directory", ""),
        /// Where GFIDs are stored: `trusted` (`trusted.gfid`, needs root), `user`
        /// (`user.xlfs.gfid`, for bricks run without root) or `auto` (what the brick root
        /// already uses, else `trusted` when running as root, else `user`).
        pub gfid_xattr: GfidXattrMode =
            OptionSpec::enumeration("gfid-xattr", "auto", &["auto", "trusted", "user"]),
        /// Remove an unlinked file's GFID handle after replying (a reaper thread; the object
        /// is gone for GFID lookups at once either way). off: before replying.
        pub background_unlink: bool = OptionSpec::bool("background-unlink", "on"),
    }
}

/// Value of the `gfid-xattr` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GfidXattrMode {
    Auto,
    Trusted,
    User,
}

impl FromOption for GfidXattrMode {
    fn from_option(o: &Options, s: &OptionSpec) -> Result<Self, String> {
        match o.get(&s.key).unwrap_or("auto") {
            "auto" => Ok(GfidXattrMode::Auto),
            "trusted" => Ok(GfidXattrMode::Trusted),
            "user" => Ok(GfidXattrMode::User),
            v => Err(format!(
                "option \"gfid-xattr\": {v:?} is not one of auto, trusted, user"
            )),
        }
    }
}
