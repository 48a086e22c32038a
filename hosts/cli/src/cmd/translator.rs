//! `xlfs translator list|show|new`: the translator types this xlfs can load (built in and
//! plugins on the search path, with their docs and option schemas), and a scaffold for a new
//! translator crate that builds on its own, outside any workspace.

use std::path::{Path, PathBuf};

use serde::Serialize;
use xlator_api::{OptionSpec, TypeInfo};
use xlfs_core::registry::{PATH_ENV, Registry};

use super::{Ctx, print_json, registry};
use crate::error::{CliError, Result};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// List every translator type that can go in a volfile: built in, then plugins found on
    /// the search path ($XLFS_XLATOR_PATH, then next to the xlfs binaries).
    List(ListArgs),
    /// Show one type: its documentation, children, and every option with kind, default,
    /// range and whether it changes live.
    Show(ShowArgs),
    /// Write a new translator crate (a pass-through layer that counts lookups) that builds on
    /// its own with `cargo build`, outside the xlfs source tree.
    New(NewArgs),
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs translator list
  XLFS_XLATOR_PATH=~/my-xl/target/debug xlfs translator list
  xlfs translator list --json | jq '.[].name'")]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs translator show performance/write-behind
  xlfs translator show user/counter --json")]
pub struct ShowArgs {
    /// The type, `category/name`.
    pub type_name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The crate depends on xlator-api by path (the sources this xlfs was built from, when they are
still there, or --api-path) or by git (--api-git). Build it with `cargo build`; the library
is target/debug/libxlfs_NAME.so. Load it with XLFS_XLATOR_PATH=DIR/target/debug.

Examples:
  xlfs translator new counter                 ./counter, type user/counter
  xlfs translator new audit /src/audit --type features/audit
  xlfs translator new counter --api-git https://example.invalid/xlfs --api-rev v0.2.0")]
pub struct NewArgs {
    /// The translator's name: lowercase letters, digits and '-' (the crate is xlfs-NAME).
    pub name: String,
    /// Directory to create (must not exist or be empty); default ./NAME.
    pub dir: Option<PathBuf>,
    /// The type name volfiles use, `category/name`; default user/NAME.
    #[arg(long = "type", value_name = "CATEGORY/NAME")]
    pub type_name: Option<String>,
    /// Depend on the xlator-api crate in this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "api_git")]
    pub api_path: Option<PathBuf>,
    /// Depend on xlator-api from this git repository (the xlfs repository).
    #[arg(long, value_name = "URL")]
    pub api_git: Option<String>,
    /// With --api-git: the tag, branch or commit.
    #[arg(long, value_name = "REV", requires = "api_git")]
    pub api_rev: Option<String>,
}

pub fn run(_ctx: &Ctx, c: Command) -> Result<u8> {
    match c {
        Command::List(a) => list(a),
        Command::Show(a) => show(a),
        Command::New(a) => new(a),
    }
}

/// One type as listed.
#[derive(Serialize)]
struct TypeRow {
    name: String,
    doc: String,
    /// `built-in`, or the library's path.
    source: String,
    min_children: u32,
    /// `None`: no upper bound.
    max_children: Option<u32>,
    keeps_file_data: bool,
    options: Vec<OptionRow>,
}

#[derive(Serialize)]
struct OptionRow {
    key: String,
    kind: &'static str,
    default: String,
    range: String,
    choices: Vec<String>,
    live: bool,
    doc: String,
}

fn option_row(o: &OptionSpec) -> OptionRow {
    let bound = |b: Option<i64>| b.map(|v| v.to_string()).unwrap_or_default();
    let (min, max) = (o.min.into_option(), o.max.into_option());
    let range = if min.is_none() && max.is_none() {
        String::new()
    } else {
        format!("{}..{}", bound(min), bound(max))
    };
    OptionRow {
        key: o.key.to_string(),
        kind: o.kind.name(),
        default: o.default.to_string(),
        range,
        choices: o.choices.iter().map(|c| c.to_string()).collect(),
        live: o.reconfigurable,
        doc: o.doc.to_string(),
    }
}

fn type_row(info: &TypeInfo, library: Option<&Path>) -> TypeRow {
    TypeRow {
        name: info.name.to_string(),
        doc: info.doc.to_string(),
        source: library
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "built-in".into()),
        min_children: info.min_children,
        max_children: (info.max_children != u32::MAX).then_some(info.max_children),
        keeps_file_data: info.keeps_file_data,
        options: info.options.iter().map(option_row).collect(),
    }
}

fn list(a: ListArgs) -> Result<u8> {
    let reg = registry();
    let (types, refused) = reg.load_all();
    let rows: Vec<TypeRow> = types
        .iter()
        .map(|r| type_row(&r.info, r.library.as_deref()))
        .collect();
    for e in &refused {
        eprintln!("xlfs: {e}");
    }
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in &rows {
        let doc = r.doc.lines().next().unwrap_or_default();
        println!("{:width$}  {doc}", r.name);
        if r.source != "built-in" {
            println!("{:width$}  (plugin: {})", "", r.source);
        }
    }
    println!(
        "\n{} type(s); `xlfs translator show TYPE` for options. Plugins are searched in {PATH_ENV} \
         (directories or .so files, ':'-separated), then: {}",
        rows.len(),
        search_path_text(&reg)
    );
    Ok(0)
}

fn search_path_text(reg: &Registry) -> String {
    reg.search_path()
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn show(a: ShowArgs) -> Result<u8> {
    let reg = registry();
    let r = reg
        .resolve(&a.type_name)
        .map_err(|e| CliError::Rejected(e.to_string()))?;
    let row = type_row(&r.info, r.library.as_deref());
    if a.json {
        print_json(&row)?;
        return Ok(0);
    }
    println!("{}  ({})", row.name, row.source);
    if !row.doc.is_empty() {
        println!("\n{}\n", row.doc);
    }
    let max = row
        .max_children
        .map(|m| m.to_string())
        .unwrap_or_else(|| "any number of".into());
    println!(
        "children: {} to {max}; keeps file data as stored: {}",
        row.min_children,
        if row.keeps_file_data { "yes" } else { "no" }
    );
    if row.options.is_empty() {
        println!("options: none");
        return Ok(0);
    }
    println!("options:");
    for o in &row.options {
        let mut facts = vec![o.kind.to_owned()];
        facts.push(if o.default.is_empty() {
            "no default".to_owned()
        } else {
            format!("default {}", o.default)
        });
        if !o.range.is_empty() {
            facts.push(format!("range {}", o.range));
        }
        if !o.choices.is_empty() {
            facts.push(format!("one of {}", o.choices.join("|")));
        }
        facts.push(if o.live { "live" } else { "new graph" }.to_owned());
        println!("  {}  ({})", o.key, facts.join(", "));
        for l in o.doc.lines() {
            println!("      {l}");
        }
    }
    Ok(0)
}

/// Where the generated crate gets xlator-api from.
enum Api {
    Path(PathBuf),
    Git { url: String, rev: Option<String> },
}

impl Api {
    fn dependency(&self, krate: &str) -> String {
        let quote = |s: &str| format!("{s:?}");
        match self {
            Api::Path(p) => format!("{krate} = {{ path = {} }}", quote(&p.display().to_string())),
            Api::Git { url, rev } => match rev {
                Some(r) => format!("{krate} = {{ git = {}, rev = {} }}", quote(url), quote(r)),
                None => format!("{krate} = {{ git = {} }}", quote(url)),
            },
        }
    }
}

/// The xlator-api sources this xlfs was built from, if they are still there.
fn built_from() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = dir.canonicalize().ok()?;
    (dir.join("xlator-api/Cargo.toml").is_file() && dir.join("testkit/Cargo.toml").is_file())
        .then_some(dir)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

fn new(a: NewArgs) -> Result<u8> {
    if !valid_name(&a.name) {
        return Err(CliError::Rejected(format!(
            "{:?} is not a translator name: use lowercase letters, digits and '-', starting with \
             a letter (e.g. counter, audit-log)",
            a.name
        )));
    }
    let type_name = a
        .type_name
        .clone()
        .unwrap_or_else(|| format!("user/{}", a.name));
    let Some((category, tname)) = type_name.split_once('/') else {
        return Err(CliError::Rejected(format!(
            "--type {type_name:?} is not category/name (e.g. features/{})",
            a.name
        )));
    };
    if category.is_empty() || !valid_name(tname) {
        return Err(CliError::Rejected(format!(
            "--type {type_name:?} is not category/name with a name of lowercase letters, digits \
             and '-'"
        )));
    }
    if tname != a.name {
        // The loader finds a type's library by the type's name: lib<xlfs_NAME>.so.
        return Err(CliError::Rejected(format!(
            "--type {type_name:?}: its name part must be the translator's name {:?}, which the \
             loader looks for as libxlfs_{}.so",
            a.name,
            a.name.replace('-', "_")
        )));
    }
    let (api, testkit) = match (&a.api_path, &a.api_git) {
        (Some(p), _) => {
            let p = std::path::absolute(p).map_err(CliError::io(p))?;
            if !p.join("Cargo.toml").is_file() {
                return Err(CliError::Rejected(format!(
                    "--api-path {}: no Cargo.toml there; give the xlator-api directory of an \
                     xlfs source tree",
                    p.display()
                )));
            }
            let kit = p.parent().map(|d| d.join("testkit")).filter(|d| d.is_dir());
            (Api::Path(p), kit.map(Api::Path))
        }
        (None, Some(url)) => (
            Api::Git {
                url: url.clone(),
                rev: a.api_rev.clone(),
            },
            Some(Api::Git {
                url: url.clone(),
                rev: a.api_rev.clone(),
            }),
        ),
        (None, None) => match built_from() {
            Some(root) => (
                Api::Path(root.join("xlator-api")),
                Some(Api::Path(root.join("testkit"))),
            ),
            None => {
                return Err(CliError::Rejected(
                    "the xlfs sources this binary was built from are gone: give --api-path \
                     DIR/xlator-api (an xlfs source tree of this release) or --api-git URL"
                        .into(),
                ));
            }
        },
    };
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from(&a.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map_err(CliError::io(&dir))?
            .next()
            .is_some()
    {
        return Err(CliError::State(format!(
            "{} exists and is not empty; pick another directory",
            dir.display()
        )));
    }
    let files = scaffold(&a.name, &type_name, &api, testkit.as_ref());
    for (rel, text) in &files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(CliError::io(parent))?;
        }
        std::fs::write(&path, text).map_err(CliError::io(&path))?;
    }
    let lib = format!("libxlfs_{}.so", a.name.replace('-', "_"));
    println!("created translator {type_name} in {}", dir.display());
    println!(
        "  cd {} && cargo build && cargo test\n  the library: target/debug/{lib}\n  use it: \
         {PATH_ENV}={}/target/debug xlfs translator show {type_name}",
        dir.display(),
        std::path::absolute(&dir).unwrap_or(dir.clone()).display()
    );
    Ok(0)
}

/// `PascalCase` of `a-name`.
fn pascal(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The files of a new translator crate: `(relative path, text)`.
fn scaffold(
    name: &str,
    type_name: &str,
    api: &Api,
    testkit: Option<&Api>,
) -> Vec<(String, String)> {
    let krate = format!("xlfs-{name}");
    let rust_crate = krate.replace('-', "_");
    let ty = pascal(name);
    let version = env!("CARGO_PKG_VERSION");
    let dev = match testkit {
        Some(t) => format!(
            "\n[dev-dependencies]\n{}\ntokio = {{ version = \"1\", features = [\"rt-multi-thread\", \
             \"macros\"] }}\n",
            t.dependency("xlfs-testkit")
        ),
        None => String::new(),
    };
    let cargo = format!(
        r#"[package]
name = "{krate}"
description = "{type_name}: an xlfs translator"
version = "0.1.0"
edition = "2024"
publish = false

# Stand-alone: not part of any enclosing workspace.
[workspace]

[lib]
# The .so the xlfs loader loads, and the rlib for tests and static linking.
crate-type = ["cdylib", "rlib"]

[dependencies]
# The stable translator API. The loader accepts a library whose ABI (type layouts, fop
# table, target) is this xlfs's: build against the xlator-api of the xlfs release you run
# ({version} made this crate).
{}
{dev}"#,
        api.dependency("xlator-api")
    );
    let lib = format!(
        r#"//! `{type_name}`: a pass-through layer that counts lookups. Every fop it does not override
//! goes to its first child unchanged. Change `TYPE`, declare options in `options!`, and add
//! `async fn`s for the fops you change (the fop table: xlator-api's `fops.rs`).

use std::sync::atomic::{{AtomicU64, Ordering}};

use xlator_api::{{Ctx, Dump, Entry, Errno, Init, Loc, Subvol, Translator}};

xlator_api::options! {{
    /// Options of `{type_name}`: each field's doc comment is the option's documentation.
    pub struct {ty}Options {{
        /// Count lookups (switch it off to count nothing); changes on a running graph.
        pub count: bool = OptionSpec::bool("count", "on").reconfigurable(),
    }}
}}

/// The translator's state: its children, plus whatever it needs.
pub struct {ty} {{
    children: Vec<Subvol>,
    count: std::sync::atomic::AtomicBool,
    lookups: AtomicU64,
}}

impl Translator for {ty} {{
    const TYPE: &'static str = "{type_name}";
    const DOC: &'static str = "Counts lookups and passes every fop to its child.";
    // It neither changes nor moves file data: FUSE passthrough may read around it.
    const KEEPS_FILE_DATA: bool = true;
    type Options = {ty}Options;

    fn init(init: Init<{ty}Options>) -> Result<Self, String> {{
        Ok({ty} {{
            children: init.children,
            count: init.options.count.into(),
            lookups: AtomicU64::new(0),
        }})
    }}

    fn children(&self) -> &[Subvol] {{
        &self.children
    }}

    fn reconfigure(&self, options: {ty}Options) -> Result<(), String> {{
        self.count.store(options.count, Ordering::Relaxed);
        Ok(())
    }}

    fn dump(&self) -> Dump {{
        Dump::new().with("lookups", self.lookups.load(Ordering::Relaxed))
    }}

    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {{
        if self.count.load(Ordering::Relaxed) {{
            self.lookups.fetch_add(1, Ordering::Relaxed);
        }}
        self.children[0].lookup(cx, loc).await
    }}
}}

xlator_api::export_translators!({ty});
"#
    );
    let test = format!(
        r#"//! `{type_name}` over the in-memory leaf of xlfs-testkit.

use xlator_api::{{Ctx, Gfid, Loc}};
use xlfs_testkit::build::build;
use xlfs_testkit::memfs::MemLeaf;
use {rust_crate}::{ty};

#[tokio::test]
async fn lookups_are_counted_and_answered_by_the_child() {{
    let top = build::<{ty}>(&[], vec![MemLeaf::new()]);
    let cx = Ctx::root();
    let r = top.lookup(&cx, Loc::new(Gfid::ROOT, "missing")).await;
    assert!(r.is_err(), "the leaf has no such name: {{r:?}}");
    assert!(top.dump().to_text(0).contains("lookups 1"), "{{}}", top.dump().to_text(0));
}}
"#
    );
    let readme = format!(
        r#"# {krate}

The xlfs translator `{type_name}`, made by `xlfs translator new`.

    cargo build && cargo test
    XLFS_XLATOR_PATH=$PWD/target/debug xlfs translator show {type_name}

Put it in a volume above or below a slot of the generated graph, on a running volume:

    XLFS_XLATOR_PATH=$PWD/target/debug xlfs volume set VOL user.{name} "{type_name} above performance.write-behind"

See docs/writing-a-translator.md in the xlfs sources.
"#
    );
    let mut files = vec![
        ("Cargo.toml".to_owned(), cargo),
        ("src/lib.rs".to_owned(), lib),
        ("README.md".to_owned(), readme),
        (".gitignore".to_owned(), "/target\n".to_owned()),
    ];
    if testkit.is_some() {
        files.push(("tests/basic.rs".to_owned(), test));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("counter") && valid_name("audit-log2"));
        for bad in ["", "Counter", "1x", "a_b", "x-", "a/b"] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert_eq!(pascal("audit-log"), "AuditLog");
    }

    #[test]
    fn the_manifest_stands_alone() {
        let files = scaffold(
            "counter",
            "user/counter",
            &Api::Path("/src/xlfs/xlator-api".into()),
            None,
        );
        let cargo = &files[0].1;
        assert!(cargo.contains("\n[workspace]\n"), "{cargo}");
        assert!(!cargo.contains(".workspace"), "no inheritance: {cargo}");
        assert!(
            cargo.contains(r#"xlator-api = { path = "/src/xlfs/xlator-api" }"#),
            "{cargo}"
        );
        let git = Api::Git {
            url: "https://h/x".into(),
            rev: Some("v1".into()),
        };
        assert_eq!(
            git.dependency("xlator-api"),
            r#"xlator-api = { git = "https://h/x", rev = "v1" }"#
        );
    }
}
