//! Golden tests: sample volume descriptions and the volfiles generated from them, in
//! `tests/golden/<case>.{spec,client,brick-N}.ron`. `UPDATE_GOLDEN=1 cargo test -p xlfs-volgen
//! --test golden` rewrites the files; review the diff before committing it.

mod support;

use std::path::PathBuf;

use support::{CLUSTER, PERFORMANCE, Types, spec};
use xlfs_core::volfile::{TypeLookup, Volfile, validate};
use xlfs_volgen::{VolumeSpec, generate};

struct Case {
    name: &'static str,
    spec: VolumeSpec,
    types: Types,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // The one-command local volume: one brick, the types this build has.
    out.push(Case {
        name: "plain",
        spec: spec("gv0", &["/srv/xlfs/gv0/brick"]),
        types: Types::real(),
    });

    // Every performance translator available, one switched off, options set by key.
    let mut s = spec("fast", &["/data/fast"]);
    s.options
        .insert("performance.write-behind.window-size".into(), "4MiB".into());
    s.options
        .insert("performance.io-cache".into(), "off".into());
    s.options.insert("performance.md-cache".into(), "on".into());
    s.options
        .insert("performance.md-cache.md-cache-timeout".into(), "10s".into());
    s.options
        .insert("protocol.client.ping-timeout".into(), "5s".into());
    s.options
        .insert("debug.io-stats.dump-interval".into(), "30s".into());
    s.options
        .insert("storage.posix.gfid-xattr".into(), "user".into());
    out.push(Case {
        name: "plain-perf",
        spec: s,
        types: Types::real_plus(&PERFORMANCE),
    });

    // Distribute over three hosts, with access control and an inline secret (volumes made
    // before secret files).
    let mut s = spec(
        "dist",
        &[
            "server1:/export/b1",
            "server2:/export/b1",
            "server3:/export/b1",
        ],
    );
    s.auth_allow = vec!["10.0.0.0/8".into(), "192.168.1.7".into()];
    s.secret = Some("correct-horse".into());
    s.transport.base_port = 24010;
    out.push(Case {
        name: "distribute-3",
        spec: s,
        types: Types::real_plus(&CLUSTER),
    });

    // Two copies, the secret in a file the volfiles name.
    let mut s = spec("mirror", &["server1:/export/m", "server2:/export/m"]);
    s.replica = 2;
    s.secret_file = Some("/var/lib/xlfs/volumes/mirror/secret".into());
    s.options
        .insert("cluster.replicate.quorum-type".into(), "fixed".into());
    out.push(Case {
        name: "replica-2",
        spec: s,
        types: Types::real_plus(&CLUSTER),
    });

    // Replica 3 arbiter 1, twice: bricks 2 and 5 are the arbiters.
    let mut s = spec(
        "arb",
        &[
            "h1:/b/1", "h2:/b/1", "h3:/b/a", "h4:/b/1", "h5:/b/1", "h6:/b/a",
        ],
    );
    s.replica = 3;
    s.arbiter = 1;
    out.push(Case {
        name: "distribute-replica-3-arbiter-1",
        spec: s,
        types: Types::real_plus(&[
            "cluster/replicate",
            "cluster/distribute",
            "features/arbiter",
        ]),
    });

    // Distributed-replicated, 2 x 2, with the full performance stack.
    let mut s = spec("dr", &["h1:/b/1", "h2:/b/1", "h3:/b/1", "h4:/b/1"]);
    s.replica = 2;
    out.push(Case {
        name: "distribute-replica-2x2",
        spec: s,
        types: Types::everything(),
    });

    // Striped over two bricks on one host (local paths).
    let mut s = spec("striped", &["/data/s0", "/data/s1"]);
    s.stripe = 2;
    s.options
        .insert("cluster.stripe.block-size".into(), "1MiB".into());
    out.push(Case {
        name: "stripe-2",
        spec: s,
        types: Types::real_plus(&CLUSTER),
    });

    // Every layer: distribute 2 x stripe 2 x replica 2.
    let bricks: Vec<String> = (0..8)
        .map(|i| format!("node{}:/bricks/big", i % 4 + 1))
        .collect();
    let bricks: Vec<String> = bricks
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{b}{}", i / 4))
        .collect();
    let bricks: Vec<&str> = bricks.iter().map(String::as_str).collect();
    let mut s = spec("big", &bricks);
    s.replica = 2;
    s.stripe = 2;
    out.push(Case {
        name: "distribute-stripe-replica",
        spec: s,
        types: Types::everything(),
    });

    // Optional debug/feature translators switched on; own listen address and port.
    let mut s = spec("archive", &["/mnt/archive"]);
    s.options.insert("features.read-only".into(), "on".into());
    s.options.insert("debug.trace".into(), "on".into());
    s.options
        .insert("debug.trace.log-level".into(), "debug".into());
    s.transport.listen_host = Some("0.0.0.0".into());
    s.transport.base_port = 30000;
    out.push(Case {
        name: "read-only-traced",
        spec: s,
        types: Types::real(),
    });

    out
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Compares `text` with the golden file (or rewrites it under UPDATE_GOLDEN=1); returns a
/// description of the mismatch.
fn compare(file: &str, text: &str) -> Option<String> {
    let path = golden_dir().join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, text).expect("write golden");
        return None;
    }
    let want = match std::fs::read_to_string(&path) {
        Ok(w) => w,
        Err(e) => {
            return Some(format!(
                "{}: {e} (run with UPDATE_GOLDEN=1)",
                path.display()
            ));
        }
    };
    if want == text {
        return None;
    }
    let line = want
        .lines()
        .zip(text.lines())
        .position(|(a, b)| a != b)
        .map_or_else(
            || want.lines().count().min(text.lines().count()) + 1,
            |i| i + 1,
        );
    Some(format!(
        "{} differs from the generated text at line {line}:\n--- golden\n{want}\n--- generated\n{text}",
        path.display()
    ))
}

/// The volfile as written loads again: parses to the same volumes and validates.
fn reloads(vf: &Volfile, text: &str, types: &dyn TypeLookup) {
    let parsed = Volfile::parse(text, &vf.origin).expect("generated RON parses");
    assert_eq!(parsed.volumes.len(), vf.volumes.len());
    for (a, b) in parsed.volumes.iter().zip(&vf.volumes) {
        assert_eq!(
            (&a.name, &a.type_name, &a.subvolumes),
            (&b.name, &b.type_name, &b.subvolumes)
        );
        let opts = |v: &xlfs_core::volfile::VolumeDecl| -> Vec<(String, String)> {
            v.options
                .iter()
                .map(|o| (o.key.clone(), o.value.clone()))
                .collect()
        };
        assert_eq!(opts(a), opts(b));
    }
    validate(&parsed, types).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn generated_volfiles_match_goldens_and_load() {
    let mut failures = Vec::new();
    for case in cases() {
        let out =
            generate(&case.spec, &case.types).unwrap_or_else(|e| panic!("case {}: {e}", case.name));
        let spec_text = case.spec.to_ron();
        let reread = VolumeSpec::from_ron(&spec_text, "golden".as_ref()).expect("spec parses");
        assert_eq!(reread, case.spec, "case {}: spec round trip", case.name);
        failures.extend(compare(&format!("{}.spec.ron", case.name), &spec_text));

        let client = out.client.to_ron();
        reloads(&out.client, &client, &case.types);
        failures.extend(compare(&format!("{}.client.ron", case.name), &client));
        for s in &out.servers {
            let text = s.volfile.to_ron();
            reloads(&s.volfile, &text, &case.types);
            failures.extend(compare(
                &format!("{}.brick-{}.ron", case.name, s.index),
                &text,
            ));
        }
        // Deterministic: a second run gives the same bytes.
        let again = generate(&case.spec, &case.types).expect("second run");
        assert_eq!(again.client.to_ron(), client, "case {}", case.name);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn at_least_six_golden_cases() {
    assert!(cases().len() >= 6);
}

/// The goldens are validated against the real schemas of every translator that exists
/// (test schemas stand in only for cluster and performance translators).
#[test]
fn real_registry_has_the_brick_stack() {
    let types = Types::real();
    let real = [
        "storage/posix",
        "features/locks",
        "features/read-only",
        "debug/io-stats",
        "debug/trace",
        "protocol/client",
        "protocol/server",
    ];
    for t in real {
        let registry = xlfs_core::registry::Registry::with_search_path(vec![], true);
        assert!(registry.type_info(t).is_ok(), "{t} is not built in");
        assert!(types.type_info(t).is_ok());
    }
}
