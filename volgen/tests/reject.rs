//! Every rejected volume description, with the message the user sees.

mod support;

use support::{CLUSTER, Types, spec};
use xlfs_volgen::{VolumeSpec, generate};

fn rejected(s: &VolumeSpec, types: &Types) -> String {
    match generate(s, types) {
        Ok(_) => panic!("{s:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_names() {
    let t = Types::everything();
    let cases = [
        (
            "",
            "volume name \"\" is not allowed: it is empty; give the volume a name such as gv0",
        ),
        (
            "-x",
            "volume name \"-x\" is not allowed: it must start with a letter or a digit",
        ),
        (
            "my vol",
            "volume name \"my vol\" is not allowed: ' ' is not allowed; use letters, digits, `-` \
             and `_`",
        ),
        (
            "a/b",
            "volume name \"a/b\" is not allowed: '/' is not allowed; use letters, digits, `-` and `_`",
        ),
        (
            "all",
            "volume name \"all\" is not allowed: `all` is reserved (it means every volume)",
        ),
    ];
    for (name, msg) in cases {
        assert_eq!(rejected(&spec(name, &["/b"]), &t), msg);
    }
    let long = "v".repeat(65);
    assert!(rejected(&spec(&long, &["/b"]), &t).ends_with("it is longer than 64 characters"));
}

#[test]
fn no_bricks() {
    assert_eq!(
        rejected(&spec("v", &[]), &Types::everything()),
        "volume \"v\" has no bricks; give at least one brick (a local path or host:/path)"
    );
}

#[test]
fn duplicate_bricks() {
    let s = spec("v", &["h1:/b", "/data/x", "localhost:/data/x/"]);
    assert_eq!(
        rejected(&s, &Types::everything()),
        "brick \"/data/x\" is given twice (bricks 1 and 2); each brick must be a different directory"
    );
    // Same path on different hosts is fine.
    let mut ok = spec("v", &["h1:/b", "h2:/b"]);
    ok.replica = 2;
    assert!(generate(&ok, &Types::everything()).is_ok());
}

#[test]
fn nested_bricks() {
    let s = spec("v", &["/data/b1/inner", "/data/b1"]);
    assert_eq!(
        rejected(&s, &Types::everything()),
        "brick \"/data/b1/inner\" is inside brick \"/data/b1\"; a brick directory must not contain \
         another brick (both would store the same files)"
    );
    // A common prefix that is not a parent directory is fine.
    let ok = spec("v", &["/data/b1", "/data/b10"]);
    assert!(generate(&ok, &Types::everything()).is_ok());
}

#[test]
fn invalid_paths_in_a_stored_description() {
    // Bricks given on the command line go through Brick::parse (tests in src/brick.rs); a
    // hand-edited description is checked when read.
    let e = VolumeSpec::from_ron(r#"(name: "v", bricks: ["data/b1"])"#, "/s/v.ron".as_ref())
        .expect_err("relative");
    assert!(
        e.to_string().contains(
            "brick \"data/b1\" is not valid: the path is relative; give an absolute path such as \
             /data/b1 (or host:/path)"
        ),
        "{e}"
    );
    let e = VolumeSpec::from_ron(r#"(name: "v", bricks: ["h:/a/../b"])"#, "/s/v.ron".as_ref())
        .expect_err("dot-dot");
    assert!(e.to_string().contains("the path contains `..`"), "{e}");
}

#[test]
fn zero_counts() {
    let mut s = spec("v", &["/a", "/b"]);
    s.replica = 0;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "replica count must be at least 1 (got 0); use 1 or leave it out"
    );
    s.replica = 1;
    s.stripe = 0;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "stripe count must be at least 1 (got 0); use 1 or leave it out"
    );
}

#[test]
fn an_arbiter_needs_replica_3() {
    let want = "an arbiter needs replica 3 and there is at most one per set (replica 3 arbiter \
                1: two data bricks and an arbiter, the last brick of each set)";
    for (replica, arbiter, n) in [(2, 1, 2), (1, 1, 1), (3, 2, 3), (4, 1, 4)] {
        let bricks: Vec<String> = (0..n).map(|i| format!("/b{i}")).collect();
        let refs: Vec<&str> = bricks.iter().map(String::as_str).collect();
        let mut s = spec("v", &refs);
        s.replica = replica;
        s.arbiter = arbiter;
        let e = rejected(&s, &Types::everything());
        assert_eq!(
            e,
            format!("arbiter {arbiter} with replica {replica}: {want}"),
            "replica {replica} arbiter {arbiter}"
        );
    }
    // The arbiter's count comes from the layout, not from `volume set`.
    let mut s = spec("v", &["/a", "/b", "/c"]);
    s.replica = 3;
    s.options
        .insert("cluster.replicate.arbiter-count".into(), "1".into());
    let e = rejected(&s, &Types::everything());
    assert!(e.contains("--arbiter 1"), "{e}");
}

#[test]
fn brick_count_not_a_multiple() {
    let mut s = spec("v", &["/a", "/b", "/c"]);
    s.replica = 2;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "3 bricks cannot be laid out as replica 2: the brick count must be a multiple of 2 \
         (replica 2 x stripe 1), e.g. 2 or 4 bricks"
    );
    let mut s = spec("v", &["/a", "/b", "/c", "/d", "/e", "/f"]);
    s.replica = 2;
    s.stripe = 2;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "6 bricks cannot be laid out as stripe 2 x replica 2: the brick count must be a multiple \
         of 4 (replica 2 x stripe 2), e.g. 4 or 8 bricks"
    );
    let mut s = spec("v", &["/a"]);
    s.replica = 3;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "1 brick cannot be laid out as replica 3: the brick count must be a multiple of 3 \
         (replica 3 x stripe 1), e.g. 3 or 6 bricks"
    );
}

#[test]
fn ports_out_of_range() {
    let mut s = spec("v", &["/a", "/b", "/c"]);
    s.transport.base_port = 65535;
    assert_eq!(
        rejected(&s, &Types::everything()),
        "ports 65535..65537 do not fit: 3 bricks need one port each from the base port 65535; \
         pick a base port between 1024 and 65533"
    );
    s.transport.base_port = 0;
    assert!(rejected(&s, &Types::everything()).starts_with("ports 0..2 do not fit"));
}

#[test]
fn bad_auth_entry() {
    let mut s = spec("v", &["/a"]);
    s.auth_allow = vec!["10.0.0.1".into(), "everyone please".into()];
    assert!(rejected(&s, &Types::everything()).contains("everyone please"));
    s.auth_allow = vec!["10.0.0.0/33".into()];
    assert!(rejected(&s, &Types::everything()).contains("10.0.0.0/33"));
    s.auth_allow = vec!["10.0.0.1".into(), "everyone please".into()];
    assert_eq!(
        rejected(&s, &Types::everything()),
        "auth allow entry \"everyone please\" is not valid: write `*`, an address such as \
         10.0.0.7 or a network such as 10.0.0.0/8"
    );
}

#[test]
fn layouts_this_build_cannot_serve() {
    let t = Types::real(); // no cluster translators
    let mut s = spec("v", &["h1:/a", "h2:/a"]);
    s.replica = 2;
    assert_eq!(
        rejected(&s, &t),
        "replica 2 needs translator type cluster/replicate, which is not available in this build \
         (unknown translator type \"cluster/replicate\"; searched: (test)); build or install that \
         translator, or change the volume layout"
    );
    let mut s = spec("v", &["h1:/a", "h2:/a"]);
    s.stripe = 2;
    assert!(rejected(&s, &t).starts_with(
        "stripe 2 needs translator type cluster/stripe, which is not available in this build"
    ));
    let s = spec("v", &["h1:/a", "h2:/a", "h3:/a"]);
    assert!(rejected(&s, &t).starts_with(
        "a volume of 3 bricks (distribute 3) needs translator type cluster/distribute, which is \
         not available in this build"
    ));
    // With only replicate available, distributed-replicate still needs distribute.
    let mut s = spec("v", &["h1:/a", "h2:/a", "h3:/a", "h4:/a"]);
    s.replica = 2;
    let only_afr = Types::real_plus(&CLUSTER[..1]);
    assert!(rejected(&s, &only_afr).starts_with(
        "a volume of 4 bricks (distribute 2 x replica 2) needs translator type cluster/distribute"
    ));
}

#[test]
fn build_without_a_required_translator() {
    let t = Types::real().without("features/locks");
    assert!(rejected(&spec("v", &["/a"]), &t).starts_with(
        "a brick needs translator type features/locks, which is not available in this build"
    ));
}

#[test]
fn bad_stored_options() {
    let t = Types::everything();
    let mut s = spec("v", &["/a"]);
    s.options
        .insert("performance.write-behind.window-size".into(), "1KiB".into());
    assert_eq!(
        rejected(&s, &t),
        "option \"performance.write-behind.window-size\": \"1KiB\" is below the minimum 524288 \
         bytes; expected a size such as 64KiB or 1MB (512KiB..1GiB)"
    );
    let mut s = spec("v", &["/a"]);
    s.options
        .insert("performance.write-behind.windowsize".into(), "1MiB".into());
    assert_eq!(
        rejected(&s, &t),
        "unknown option key \"performance.write-behind.windowsize\" (did you mean \
         \"performance.write-behind.window-size\"?); run `xlfs volume options` for every key"
    );
}
