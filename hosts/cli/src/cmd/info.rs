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
struct Subvolume {
    name: String,
    bricks: Vec<String>,
}

#[derive(Serialize)]
struct Info {
    name: String,
    layout: String,
    bricks: Vec<String>,
    /// Each brick's id (names its volfile, log and port), in brick order.
    brick_ids: Vec<usize>,
    /// The children of the distribute layer and their bricks.
    subvolumes: Vec<Subvolume>,
    replica: u32,
    stripe: u32,
    /// Arbiter bricks per replica set (0 or 1: the last brick of each set).
    arbiter: u32,
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
        brick_ids: (0..spec.bricks.len()).map(|p| spec.brick_id(p)).collect(),
        subvolumes: spec
            .subvolumes()
            .into_iter()
            .map(|s| Subvolume {
                bricks: spec.bricks[s.bricks]
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                name: s.name,
            })
            .collect(),
        replica: spec.replica,
        stripe: spec.stripe,
        arbiter: spec.arbiter,
        base_port: spec.transport.base_port,
        auth_allow: spec.auth_allow.clone(),
        secret: spec.secret.is_some() || spec.secret_file.is_some(),
        options: spec.options.clone(),
        state_dir: vd.dir.display().to_string(),
    };
    if a.json {
        return print_json(&info).map(|_| 0);
    }
    println!("Volume {} ({})", info.name, info.layout);
    for (i, b) in info.bricks.iter().enumerate() {
        println!(
            "  brick {}  {b}  port {}{}",
            spec.brick_id(i),
            spec.brick_port(i),
            if spec.is_arbiter(i) {
                "  (arbiter)"
            } else {
                ""
            }
        );
    }
    if info.subvolumes.len() > 1 {
        let names: Vec<&str> = info.subvolumes.iter().map(|s| s.name.as_str()).collect();
        println!("  distribute over  {}", names.join(", "));
    }
    if !info.auth_allow.is_empty() {
        println!("  auth.allow  {}", info.auth_allow.join(","));
    }
    match (&spec.secret_file, info.secret) {
        (Some(f), _) => println!("  secret      in {}", f.display()),
        (None, true) => println!("  secret      (set, inline in the volfiles)"),
        (None, false) => println!("  secret      none: any peer that reaches a brick is let in"),
    }
    for (k, v) in &info.options {
        println!("  {k} = {v}");
    }
    println!("  state       {}", info.state_dir);
    Ok(0)
}
