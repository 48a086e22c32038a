//! Where a host's graph comes from: a volfile on disk, or the built-in local-volume volfile of
//! `--local DIR` (storage/posix on `DIR/brick`, features/locks, debug/io-stats), shared by every
//! host so one directory can be served by any of them.

use std::path::{Path, PathBuf};

use crate::volfile::{Volfile, VolfileError};

/// Name of the top volume of a `--local` volume.
pub const LOCAL_VOLUME: &str = "local";

#[derive(thiserror::Error, Debug)]
pub enum SourceError {
    #[error("cannot read volfile {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the brick directory {path}: {source}")]
    Brick {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--local {0}: the path must be valid UTF-8 without control characters")]
    BadPath(PathBuf),
    #[error(transparent)]
    Volfile(Box<VolfileError>),
}

impl From<VolfileError> for SourceError {
    fn from(e: VolfileError) -> SourceError {
        SourceError::Volfile(Box::new(e))
    }
}

/// Where the volfile text came from, so a reload (SIGHUP) can read it again.
#[derive(Debug, Clone)]
pub enum Source {
    File(PathBuf),
    Local(PathBuf),
}

impl Source {
    /// Reads (or generates) and parses the volfile.
    pub fn load(&self) -> Result<Volfile, SourceError> {
        match self {
            Source::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| SourceError::Read {
                    path: path.clone(),
                    source,
                })?;
                Ok(Volfile::parse(&text, &path.display().to_string())?)
            }
            Source::Local(dir) => {
                let brick = dir.join("brick");
                std::fs::create_dir_all(&brick).map_err(|source| SourceError::Brick {
                    path: brick.clone(),
                    source,
                })?;
                let brick = std::path::absolute(&brick).map_err(|source| SourceError::Brick {
                    path: brick.clone(),
                    source,
                })?;
                let text = local_volfile(&brick)?;
                Ok(Volfile::parse(
                    &text,
                    &format!("<--local {}>", dir.display()),
                )?)
            }
        }
    }
}

/// The volfile of a local volume on `brick`: storage/posix, features/locks, debug/io-stats.
/// Device nodes are allowed (`allow-devices`): nothing but this machine's own mount reaches
/// the graph, whose caller could make them on the brick directory itself, and the mount is
/// `nodev` unless asked otherwise.
pub fn local_volfile(brick: &Path) -> Result<String, SourceError> {
    let dir = brick
        .to_str()
        .filter(|s| !s.chars().any(char::is_control))
        .ok_or_else(|| SourceError::BadPath(brick.to_path_buf()))?;
    let dir = ron_string(dir);
    Ok(format!(
        r#"// Generated for --local {dir}.
(
    volumes: [
        (name: "posix", type: "storage/posix", options: {{ "directory": {dir}, "allow-devices": "on" }}),
        (name: "locks", type: "features/locks", subvolumes: ["posix"]),
        (name: "{LOCAL_VOLUME}", type: "debug/io-stats", subvolumes: ["locks"]),
    ],
)
"#
    ))
}

/// A RON string literal.
fn ron_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_volfile_parses_with_quotes_in_the_path() {
        let text = local_volfile(Path::new("/tmp/a \"b\"\\c/brick")).expect("volfile");
        let vf = Volfile::parse(&text, "<test>").expect("parses");
        assert_eq!(vf.top_name(), LOCAL_VOLUME);
        let posix = vf.get("posix").expect("posix volume");
        assert_eq!(posix.type_name, "storage/posix");
        assert_eq!(posix.option("directory"), Some("/tmp/a \"b\"\\c/brick"));
        let order: Vec<&str> = vf.build_order().iter().map(|v| v.name.as_str()).collect();
        assert_eq!(order, ["posix", "locks", LOCAL_VOLUME]);
    }

    #[test]
    fn control_characters_are_refused() {
        assert!(matches!(
            local_volfile(Path::new("/tmp/a\nb")),
            Err(SourceError::BadPath(_))
        ));
    }
}
