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
    // User translators (`user.NAME`, `user.NAME.OPTION`): their stored values.
    let users: Vec<Value> = spec
        .options
        .iter()
        .filter(|(k, _)| xlfs_volgen::user::split_key(k).is_some())
        .filter(|(k, _)| {
            a.key
                .as_deref()
                .is_none_or(|want| want.trim() == k.as_str())
        })
        .map(|(k, v)| Value {
            key: k.clone(),
            value: v.clone(),
            default: false,
        })
        .collect();
    let keys = match &a.key {
        Some(k) if xlfs_volgen::user::split_key(k).is_some() => Vec::new(),
        Some(k) => vec![catalog.resolve(k)?.clone()],
        None => catalog.keys().to_vec(),
    };
    let mut values: Vec<Value> = keys
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
    values.extend(users);
    if let Some(k) = &a.key
        && values.is_empty()
    {
        return Err(crate::error::CliError::Rejected(format!(
            "{k} is not set on volume {}",
            spec.name
        )));
    }
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
