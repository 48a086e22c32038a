//! `xlfs volume options`: every settable key, read from the translators' schemas.

use serde::Serialize;
use xlfs_volgen::Catalog;

use super::{Ctx, print_json, registry};
use crate::error::Result;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Keys are `category.translator.option` (a bare option works when only one translator has it);
`category.translator` alone switches an optional translator on or off. `live: yes` means a
running mount or brick takes the change in place; `no` means a new graph (mounts reload it
without a remount, bricks need a restart).

Examples:
  xlfs volume options
  xlfs volume options --json | jq '.[].key'")]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    key: String,
    kind: &'static str,
    default: String,
    range: String,
    live: bool,
    graph: &'static str,
    doc: String,
}

pub fn run(_ctx: &Ctx, a: Args) -> Result<u8> {
    let catalog = Catalog::new(&registry());
    let rows: Vec<Row> = catalog
        .keys()
        .iter()
        .map(|k| Row {
            key: k.key.clone(),
            kind: k.spec.kind.name(),
            default: k.spec.default.to_string(),
            range: k.range(),
            live: k.live(),
            graph: k.side().name(),
            doc: k.spec.doc.to_string(),
        })
        .collect();
    if a.json {
        print_json(&rows)?;
        return Ok(0);
    }
    for r in &rows {
        let default = if r.default.is_empty() {
            "(none)"
        } else {
            r.default.as_str()
        };
        let range = if r.range.is_empty() {
            String::new()
        } else {
            format!("  range {}", r.range)
        };
        let live = if r.live { "yes" } else { "no" };
        println!("{}", r.key);
        println!(
            "    default {default}{range}  live {live}  graph {}",
            r.graph
        );
        for line in wrap(&r.doc, 88) {
            println!("    {line}");
        }
    }
    let missing: Vec<&str> = catalog
        .unavailable()
        .iter()
        .map(|(s, _)| s.type_name())
        .collect();
    if !missing.is_empty() {
        println!(
            "\nnot in this build (no keys until installed): {}",
            missing.join(", ")
        );
    }
    Ok(0)
}

/// `text` as lines of at most `width` characters (words are never split).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn wraps_on_words() {
        assert_eq!(super::wrap("a bb\n ccc dd", 6), ["a bb", "ccc dd"]);
        assert!(super::wrap("", 6).is_empty());
    }
}
