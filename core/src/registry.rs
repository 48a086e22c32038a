//! The translator registry: built-in types (registered with `inventory` by linked translator
//! crates) and types from cdylibs found on an explicit search path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use xlator_api::{TypeInfo, XlatorModuleRef};

use crate::loader::{self, LoadError};
use crate::volfile::TypeLookup;

/// Environment variable with extra plugin locations (directories or `.so` files), `:`-separated.
pub const PATH_ENV: &str = "XLFS_XLATOR_PATH";

/// The `--help` paragraph every host prints about finding translator plugins.
pub const PATH_HELP: &str = "\
Translator plugins (types a volfile names that are not built in):
  XLFS_XLATOR_PATH   directories or .so files, ':'-separated, searched first; then next
                     to this binary, its deps/, its parent and <exe>/../lib/xlfs/xlators.
                     `xlfs translator list` shows every type found.";

/// Where a type comes from.
#[derive(Clone)]
pub struct Resolved {
    pub info: TypeInfo,
    pub module: XlatorModuleRef,
    /// `None` for a built-in type.
    pub library: Option<PathBuf>,
}

/// Why a type could not be resolved.
#[derive(thiserror::Error, Debug)]
pub enum ResolveError {
    #[error(
        "unknown translator type {type_name:?}; searched: {}{}; put its library (lib<crate>.so) \
         in one of these directories, or name the library or its directory in {PATH_ENV} \
         (entries separated by ':')",
        searched_list(.searched),
        refused_list(.refused)
    )]
    NotFound {
        type_name: String,
        searched: Vec<PathBuf>,
        /// Libraries on the search path that were refused on the way (one may be it).
        refused: Vec<String>,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
}

fn refused_list(refused: &[String]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    const SHOWN: usize = 3;
    let more = match refused.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!("; and {n} more (`xlfs translator list` shows them all)"),
    };
    format!(
        "; {} library(ies) there were refused, one may provide it: {}{more}",
        refused.len(),
        refused[..refused.len().min(SHOWN)].join("; ")
    )
}

/// What [`TypeLookup::type_info`] puts before a load error: the volfile check then says the
/// library was found and refused, not that the type is unknown.
pub const LIBRARY_REFUSED: &str = "library refused: ";

fn searched_list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "built-in types only (no plugin directories configured)".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Type name -> module. Thread-safe; libraries load lazily, once.
pub struct Registry {
    search_path: Vec<PathBuf>,
    types: Mutex<BTreeMap<String, Resolved>>,
    loaded_libs: Mutex<Vec<PathBuf>>,
}

impl Registry {
    /// Built-in types plus the default search path ([`Registry::default_search_path`]).
    pub fn new() -> Registry {
        Registry::with_search_path(Registry::default_search_path(), true)
    }

    /// A registry over `search_path`; `builtins` includes statically linked translators.
    pub fn with_search_path(search_path: Vec<PathBuf>, builtins: bool) -> Registry {
        let mut types = BTreeMap::new();
        if builtins {
            for m in xlator_api::static_modules() {
                let module = (m.module)();
                for info in (module.types())() {
                    types.insert(
                        info.name.to_string(),
                        Resolved {
                            info,
                            module,
                            library: None,
                        },
                    );
                }
            }
        }
        Registry {
            search_path,
            types: Mutex::new(types),
            loaded_libs: Mutex::new(Vec::new()),
        }
    }

    /// `$XLFS_XLATOR_PATH` entries, then next to the executable, its `deps/` (cargo test
    /// binaries), its parent (test binaries live in `target/<profile>/deps`), and the install
    /// layout `<exe>/../lib/xlfs/xlators`.
    pub fn default_search_path() -> Vec<PathBuf> {
        let mut path: Vec<PathBuf> = std::env::var_os(PATH_ENV)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            path.push(dir.join("deps"));
            path.push(dir.clone());
            if let Some(parent) = dir.parent() {
                path.push(parent.to_path_buf());
                path.push(parent.join("lib/xlfs/xlators"));
            }
        }
        path.dedup();
        path
    }

    pub fn search_path(&self) -> &[PathBuf] {
        &self.search_path
    }

    /// Loads a translator library by path and registers its types (later libraries do not
    /// replace types already known). Returns the type names it provides.
    pub fn load_library(&self, path: &Path) -> Result<Vec<String>, LoadError> {
        let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let lib = loader::load(&canon)?;
        let mut names = Vec::new();
        let mut types = lock(&self.types);
        for info in lib.types {
            names.push(info.name.to_string());
            types.entry(info.name.to_string()).or_insert(Resolved {
                info,
                module: lib.module,
                library: Some(canon.clone()),
            });
        }
        lock(&self.loaded_libs).push(canon);
        Ok(names)
    }

    /// Finds `type_name`: known types first, then the search path.
    pub fn resolve(&self, type_name: &str) -> Result<Resolved, ResolveError> {
        if let Some(r) = lock(&self.types).get(type_name) {
            return Ok(r.clone());
        }
        let mut searched = Vec::new();
        for candidate in self.candidates(type_name) {
            searched.push(candidate.clone());
            if !candidate.is_file() || self.already_loaded(&candidate) {
                continue;
            }
            self.load_library(&candidate)?;
            if let Some(r) = lock(&self.types).get(type_name) {
                return Ok(r.clone());
            }
        }
        // Last resort: any translator library in the search directories.
        let mut refused = Vec::new();
        for dir in self.search_path.iter().filter(|d| d.is_dir()) {
            for lib in scan_dir(dir) {
                if self.already_loaded(&lib) {
                    continue;
                }
                // A broken unrelated library must not hide the type we want: skip it, but
                // say so at debug level.
                if let Err(e) = self.load_library(&lib) {
                    tracing::debug!("skipping {}: {e}", lib.display());
                    if matches!(
                        e,
                        LoadError::BuildMismatch { .. } | LoadError::Layout { .. }
                    ) {
                        refused.push(e.to_string());
                    }
                }
                if let Some(r) = lock(&self.types).get(type_name) {
                    return Ok(r.clone());
                }
            }
            searched.push(dir.join("lib*.so"));
        }
        Err(ResolveError::NotFound {
            type_name: type_name.into(),
            searched,
            refused,
        })
    }

    fn already_loaded(&self, path: &Path) -> bool {
        let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        lock(&self.loaded_libs).contains(&canon)
    }

    /// Library files that may provide `category/name`, in search order. Entries of the
    /// search path that are files are candidates for every type.
    fn candidates(&self, type_name: &str) -> Vec<PathBuf> {
        let (category, name) = type_name.split_once('/').unwrap_or(("", type_name));
        let snake = name.replace('-', "_");
        let mut out = Vec::new();
        for entry in &self.search_path {
            if entry.extension().is_some_and(|e| e == "so") {
                out.push(entry.clone());
                continue;
            }
            out.push(entry.join(format!("libxlfs_{snake}.so")));
            out.push(entry.join(format!("lib{snake}.so")));
            if !category.is_empty() {
                out.push(entry.join(category).join(format!("{name}.so")));
            }
        }
        out
    }

    /// Loads every translator library on the search path (files named there, and `lib*.so`
    /// in its directories) and returns every type the registry can then resolve, by name,
    /// with the libraries that were refused and why. For listings (`xlfs translator list`).
    pub fn load_all(&self) -> (Vec<Resolved>, Vec<LoadError>) {
        let mut refused = Vec::new();
        for entry in &self.search_path {
            let libs = if entry.is_dir() {
                scan_dir(entry)
            } else if entry.is_file() {
                vec![entry.clone()]
            } else {
                Vec::new()
            };
            for lib in libs {
                if self.already_loaded(&lib) {
                    continue;
                }
                if let Err(e) = self.load_library(&lib) {
                    // A library that is not a translator at all is not worth a line.
                    if !matches!(e, LoadError::NotATranslator { .. }) {
                        refused.push(e);
                    }
                }
            }
        }
        (lock(&self.types).values().cloned().collect(), refused)
    }

    /// Every type known now (built-in and already loaded).
    pub fn known_types(&self) -> Vec<String> {
        lock(&self.types).keys().cloned().collect()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

/// `lib*.so` files in `dir` without a cargo hash suffix (those are proc macros and the like).
fn scan_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut libs: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            n.starts_with("lib") && n.ends_with(".so") && !n.contains('-')
        })
        .collect();
    libs.sort();
    libs
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain maps consistent; keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TypeLookup for Registry {
    fn type_info(&self, type_name: &str) -> Result<TypeInfo, String> {
        self.resolve(type_name)
            .map(|r| r.info)
            .map_err(|e| match e {
                ResolveError::Load(e) => format!("{LIBRARY_REFUSED}{e}"),
                e => e.to_string(),
            })
    }
    fn known_types(&self) -> Vec<String> {
        Registry::known_types(self)
    }
}
