//! `xlfs volume get NAME [KEY]`: option values (set or default).

use serde::Serialize;
use xlfs_volgen::Catalog;

use super::{Ctx, print_json, registry};
use crate::error::Result;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  xlfs volume get gv0
  xlfs volume get gv0 window-size --json")]
pub struct Args {
    pub name: String,
    /// One key (full or bare); default: every key.
    pub key: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Value {
    key: String,
    value: String,
    default: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (_, spec) = ctx.state().load(&a.name)?;
    let catalog = Catalog::new(&registry());
    let keys = match &a.key {
        Some(k) => vec![catalog.resolve(k)?.clone()],
        None => catalog.keys().to_vec(),
    };
    let values: Vec<Value> = keys
        .iter()
        .map(|k| {
            let (value, default) = catalog.value(&spec, k);
            Value {
                key: k.key.clone(),
                value,
                default,
            }
        })
        .collect();
    if a.json {
        print_json(&values)?;
        return Ok(0);
    }
    let width = values.iter().map(|v| v.key.len()).max().unwrap_or(0);
    for v in values {
        let mark = if v.default { "  (default)" } else { "" };
        println!("{:width$}  {}{mark}", v.key, v.value);
    }
    Ok(0)
}
