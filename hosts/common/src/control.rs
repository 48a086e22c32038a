//! The control socket of a running host: a Unix socket (`--control-socket PATH`) on which
//! `xlfs volume statedump` and `xlfs volume set` talk to a mount, an NFS server or a brick
//! while it runs.
//!
//! One request per connection: a line (`statedump text`, `statedump json`, `reload`), then
//! the answer (the dump, or one line saying what a reload did), then the host closes. The
//! socket is created mode 0600 (a statedump shows paths and counters; a reload changes the
//! graph) and removed when the [`ControlSocket`] drops. Served on a thread of its own, so it
//! answers even while every runtime worker is busy.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The host's state and every translator's dump, as text.
    StatedumpText,
    /// The same as one JSON object.
    StatedumpJson,
    /// Read the volfile again and apply it (in place, or by graph switch).
    Reload,
}

impl Request {
    fn parse(line: &str) -> Option<Request> {
        match line.trim() {
            "statedump" | "statedump text" => Some(Request::StatedumpText),
            "statedump json" => Some(Request::StatedumpJson),
            "reload" => Some(Request::Reload),
            _ => None,
        }
    }

    fn line(self) -> &'static str {
        match self {
            Request::StatedumpText => "statedump text",
            Request::StatedumpJson => "statedump json",
            Request::Reload => "reload",
        }
    }
}

/// Answers requests; called on the control thread (it may block, e.g. on a runtime handle).
pub type Handler = Arc<dyn Fn(Request) -> String + Send + Sync>;

/// A listening control socket; the file is removed when this drops.
pub struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Listens on `path` (a stale socket file there is replaced) and serves `handler` on a
    /// thread of its own.
    pub fn open(path: &Path, handler: Handler) -> std::io::Result<ControlSocket> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        std::thread::Builder::new()
            .name("xlfs-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(c) => serve_one(c, &handler),
                        Err(e) => tracing::warn!(error = %e, "control socket: accept failed"),
                    }
                }
            })?;
        tracing::info!(path = %path.display(), "control socket listening");
        Ok(ControlSocket {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(conn: UnixStream, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let mut reader = BufReader::new(&conn);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let answer = match Request::parse(&line) {
        Some(r) => handler(r),
        None => format!(
            "error: unknown request {:?}; ask `statedump text`, `statedump json` or `reload`\n",
            line.trim()
        ),
    };
    let mut w = &conn;
    let _ = w.write_all(answer.as_bytes());
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

/// Sends `req` to the host listening on `path` and returns its answer.
pub fn ask(path: &Path, req: Request, timeout: Duration) -> std::io::Result<String> {
    let mut conn = UnixStream::connect(path)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    conn.write_all(format!("{}\n", req.line()).as_bytes())?;
    conn.shutdown(std::net::Shutdown::Write)?;
    let mut out = String::new();
    std::io::Read::read_to_string(&mut conn, &mut out)?;
    Ok(out)
}

/// The answer to a statedump request of a host serving `volume`: a header (host, pid,
/// volfile origin, graph id) and `host_text` (the host's own state, text), then every
/// translator's dump, top-down. JSON: one object, `"xlators"` holding the graph's dump.
pub fn statedump(
    host: &str,
    volume: &xlfs_core::volume::Volume,
    host_text: &str,
    format: xlator_api::DumpFormat,
) -> String {
    let graph = volume.graph();
    let origin = graph.volfile().origin.clone();
    let pid = std::process::id();
    match format {
        xlator_api::DumpFormat::Text => format!(
            "[{host}]\npid: {pid}\nvolfile: {origin}\ngraph: {}\n{host_text}{}",
            graph.id(),
            graph.dump(format)
        ),
        xlator_api::DumpFormat::Json => {
            let mut out = String::from("{\"host\":");
            xlator_api::json_string(&mut out, host);
            out.push_str(&format!(
                ",\"pid\":{pid},\"graph\":{},\"volfile\":",
                graph.id()
            ));
            xlator_api::json_string(&mut out, &origin);
            out.push_str(",\"state\":");
            out.push_str(&text_to_json(host_text));
            out.push_str(",\"xlators\":");
            out.push_str(&graph.dump(format));
            out.push('}');
            out
        }
    }
}

/// A host's own state text (`[section]` lines, then `key: value` lines) as one JSON object of
/// sections; numbers stay numbers, anything else is a string. Lines outside a section go
/// under `""`.
fn text_to_json(text: &str) -> String {
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.to_owned(), Vec::new()));
            continue;
        }
        if sections.is_empty() {
            sections.push((String::new(), Vec::new()));
        }
        let (k, v) = line.split_once(": ").unwrap_or((line, ""));
        if let Some((_, fields)) = sections.last_mut() {
            fields.push((k.to_owned(), v.to_owned()));
        }
    }
    let mut out = String::from("{");
    for (i, (name, fields)) in sections.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        xlator_api::json_string(&mut out, name);
        out.push_str(":{");
        for (j, (k, v)) in fields.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            xlator_api::json_string(&mut out, k);
            out.push(':');
            match v.parse::<u64>() {
                Ok(n) => out.push_str(&n.to_string()),
                Err(_) => xlator_api::json_string(&mut out, v),
            }
        }
        out.push('}');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_answered_and_the_socket_removed() {
        let dir = std::env::temp_dir().join(format!("xlfs-ctl-{}", std::process::id()));
        let path = dir.join("c.sock");
        let sock = ControlSocket::open(
            &path,
            Arc::new(|r| match r {
                Request::StatedumpJson => "{\"a\":1}".into(),
                Request::StatedumpText => "[a]\n".into(),
                Request::Reload => "reloaded\n".into(),
            }),
        )
        .expect("open");
        let t = Duration::from_secs(5);
        assert_eq!(
            ask(&path, Request::StatedumpJson, t).expect("ask"),
            "{\"a\":1}"
        );
        assert_eq!(ask(&path, Request::Reload, t).expect("ask"), "reloaded\n");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(sock);
        assert!(!path.exists());
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn host_state_text_becomes_json_sections() {
        let j = text_to_json("[fuse]\nknown inodes: 3\npassthrough: off (x: 1)\n");
        assert_eq!(
            j,
            r#"{"fuse":{"known inodes":3,"passthrough":"off (x: 1)"}}"#
        );
        assert_eq!(text_to_json(""), "{}");
    }
}
