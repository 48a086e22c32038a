//! `xlfs volume info NAME`: the volume's description.

use serde::Serialize;

use super::{Ctx, print_json};
use crate::error::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Info {
    name: String,
    layout: String,
    bricks: Vec<String>,
    replica: u32,
    stripe: u32,
    base_port: u16,
    auth_allow: Vec<String>,
    secret: bool,
    options: std::collections::BTreeMap<String, String>,
    state_dir: String,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<u8> {
    let (vd, spec) = ctx.state().load(&a.name)?;
    let info = Info {
        name: spec.name.clone(),
        layout: spec.layout().to_string(),
        bricks: spec.bricks.iter().map(ToString::to_string).collect(),
        replica: spec.replica,
        stripe: spec.stripe,
        base_port: spec.transport.base_port,
        auth_allow: spec.auth_allow.clone(),
        secret: spec.secret.is_some(),
        options: spec.options.clone(),
        state_dir: vd.dir.display().to_string(),
    };
    if a.json {
        return print_json(&info).map(|_| 0);
    }
    println!("Volume {} ({})", info.name, info.layout);
    for (i, b) in info.bricks.iter().enumerate() {
        println!("  brick {i}  {b}  port {}", spec.brick_port(i));
    }
    if !info.auth_allow.is_empty() {
        println!("  auth.allow  {}", info.auth_allow.join(","));
    }
    if info.secret {
        println!("  secret      (set)");
    }
    for (k, v) in &info.options {
        println!("  {k} = {v}");
    }
    println!("  state       {}", info.state_dir);
    Ok(0)
}
