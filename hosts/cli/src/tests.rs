//! Command line parsing.

use clap::{CommandFactory, Parser};

use crate::{Cli, Command, VolumeCommand};

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("xlfs").chain(args.iter().copied()))
}

#[test]
fn definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn volume_create() {
    let cli = parse(&[
        "volume",
        "create",
        "gv0",
        "h1:/b",
        "h2:/b",
        "--replica",
        "2",
        "--port",
        "24010",
    ])
    .expect("parses");
    let Command::Volume(VolumeCommand::Create(a)) = cli.command else {
        panic!("not create")
    };
    assert_eq!(a.name, "gv0");
    assert_eq!(a.bricks, ["h1:/b", "h2:/b"]);
    assert_eq!((a.replica, a.stripe, a.port), (2, 1, Some(24010)));
    let cli = parse(&[
        "volume",
        "create",
        "v",
        "/b",
        "--auth-allow",
        "10.0.0.0/8,127.0.0.1",
    ])
    .expect("parses");
    let Command::Volume(VolumeCommand::Create(a)) = cli.command else {
        panic!("not create")
    };
    assert_eq!(a.auth_allow, ["10.0.0.0/8", "127.0.0.1"]);
    // A brick is required; counts are numbers.
    assert!(parse(&["volume", "create", "gv0"]).is_err());
    assert!(parse(&["volume", "create", "gv0", "/b", "--replica", "two"]).is_err());
}

#[test]
fn state_dir_is_global() {
    let cli =
        parse(&["volume", "status", "gv0", "--json", "--state-dir", "/tmp/s"]).expect("parses");
    assert_eq!(
        cli.state_dir.as_deref(),
        Some(std::path::Path::new("/tmp/s"))
    );
    let Command::Volume(VolumeCommand::Status(a)) = cli.command else {
        panic!("not status")
    };
    assert!(a.json);
    let cli = parse(&["--state-dir", "/x", "volume", "list"]).expect("parses");
    assert_eq!(cli.state_dir.as_deref(), Some(std::path::Path::new("/x")));
}

#[test]
fn set_get_options_volfile() {
    let cli = parse(&["volume", "set", "gv0", "window-size", "4MiB"]).expect("parses");
    let Command::Volume(VolumeCommand::Set(a)) = cli.command else {
        panic!("not set")
    };
    assert_eq!(
        (a.name.as_str(), a.key.as_str(), a.value.as_str()),
        ("gv0", "window-size", "4MiB")
    );
    assert!(parse(&["volume", "set", "gv0", "window-size"]).is_err());
    assert!(parse(&["volume", "get", "gv0"]).is_ok());
    assert!(parse(&["volume", "options", "--json"]).is_ok());
    let cli = parse(&["volfile", "gv0", "--server", "1"]).expect("parses");
    let Command::Volfile(a) = cli.command else {
        panic!("not volfile")
    };
    assert_eq!(a.server.as_deref(), Some("1"));
    assert!(parse(&["volfile", "gv0", "--server", "1", "--client"]).is_err());
}

#[test]
fn mount_and_up_take_extra_options_after_dashes() {
    let cli = parse(&["mount", "gv0", "/mnt", "--", "--writeback-cache"]).expect("parses");
    let Command::Mount(a) = cli.command else {
        panic!("not mount")
    };
    assert_eq!(a.extra, ["--writeback-cache"]);
    assert!(!a.foreground);
    let cli = parse(&["up", "/srv/demo"]).expect("parses");
    let Command::Up(a) = cli.command else {
        panic!("not up")
    };
    assert_eq!(a.dir, std::path::Path::new("/srv/demo"));
    assert!(a.mountpoint.is_none());
    assert!(parse(&["up"]).is_err());
}

#[test]
fn help_has_examples_and_exit_codes() {
    let help = Cli::command().render_long_help().to_string();
    assert!(help.contains("Examples:"));
    assert!(help.contains("3 description/option rejected"));
    let mut cmd = Cli::command();
    let create = cmd
        .find_subcommand_mut("volume")
        .and_then(|v| v.find_subcommand_mut("create"))
        .expect("create");
    assert!(
        create
            .render_long_help()
            .to_string()
            .contains("--replica 2")
    );
}

#[test]
fn add_brick_rebalance_remove_brick() {
    let cli = parse(&["volume", "add-brick", "gv0", "/b2", "h3:/b"]).expect("parses");
    let Command::Volume(VolumeCommand::AddBrick(a)) = cli.command else {
        panic!("not add-brick")
    };
    assert_eq!(a.bricks, ["/b2", "h3:/b"]);
    assert!(
        parse(&["volume", "add-brick", "gv0"]).is_err(),
        "a brick is required"
    );

    let cli = parse(&["volume", "rebalance", "gv0", "status", "--json"]).expect("parses");
    let Command::Volume(VolumeCommand::Rebalance(a)) = cli.command else {
        panic!("not rebalance")
    };
    assert_eq!(a.action, crate::cmd::rebalance::Action::Status);
    assert!(a.json);
    assert!(parse(&["volume", "rebalance", "gv0", "go"]).is_err());

    let cli = parse(&[
        "volume",
        "remove-brick",
        "gv0",
        "/b2",
        "/b3",
        "commit",
        "--force",
    ])
    .expect("parses");
    let Command::Volume(VolumeCommand::RemoveBrick(a)) = cli.command else {
        panic!("not remove-brick")
    };
    assert_eq!(a.words, ["/b2", "/b3", "commit"]);
    assert!(a.force);
    assert!(parse(&["volume", "remove-brick", "gv0"]).is_err());
}
