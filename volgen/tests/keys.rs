//! Options by name (`volume set/get/reset/options`) and which translators a build places.

mod support;

use support::{PERFORMANCE, Types, spec};
use xlfs_volgen::{Catalog, Target, generate};

fn set_err(catalog: &Catalog, key: &str, value: &str) -> String {
    let mut s = spec("v", &["/a"]);
    catalog
        .set(&mut s, key, value)
        .expect_err("rejected")
        .to_string()
}

#[test]
fn full_and_bare_keys_resolve_to_the_schema() {
    let c = Catalog::new(&Types::everything());
    let mut s = spec("v", &["/a"]);
    assert_eq!(
        c.set(&mut s, "performance.write-behind.window-size", "2MiB")
            .expect("full key"),
        "performance.write-behind.window-size"
    );
    assert_eq!(
        c.set(&mut s, "md-cache-timeout", "5s").expect("bare key"),
        "performance.md-cache.md-cache-timeout"
    );
    assert_eq!(
        c.set(&mut s, "performance/io-cache.cache-size", "64MiB")
            .expect("slash form"),
        "performance.io-cache.cache-size"
    );
    assert_eq!(s.options.len(), 3);
    let out = generate(&s, &Types::everything()).expect("generates");
    let wb = out
        .client
        .get("v-write-behind")
        .expect("write-behind placed");
    assert_eq!(wb.option("window-size"), Some("2MiB"));
}

#[test]
fn unknown_ambiguous_managed_and_bad_values() {
    let c = Catalog::new(&Types::everything());
    assert_eq!(
        set_err(&c, "performance.write-behind-window-size", "1MiB"),
        "unknown option key \"performance.write-behind-window-size\" (did you mean \
         \"performance.write-behind.window-size\"?); run `xlfs volume options` for every key"
    );
    assert_eq!(
        set_err(&c, "no-such-thing", "1"),
        "unknown option key \"no-such-thing\"; run `xlfs volume options` for every key"
    );
    assert_eq!(
        set_err(&c, "page-size", "64KiB"),
        "option key \"page-size\" is ambiguous, it is an option of several translators: \
         performance.io-cache.page-size, performance.read-ahead.page-size; give the full key"
    );
    assert_eq!(
        set_err(&c, "storage.posix.directory", "/x"),
        "option \"storage.posix.directory\" cannot be set: it is the brick directory; give the \
         bricks when creating the volume"
    );
    assert_eq!(
        set_err(&c, "remote-port", "1"),
        "option \"remote-port\" cannot be set: volgen derives it from the bricks and ports"
    );
    assert_eq!(
        set_err(&c, "performance.read-ahead.page-count", "99"),
        "option \"performance.read-ahead.page-count\": \"99\" is above the maximum 16; expected \
         an integer (1..16)"
    );
    assert_eq!(
        set_err(&c, "performance.io-cache", "maybe"),
        "option \"performance.io-cache\": \"maybe\" is not a boolean (use on/off); expected on or off"
    );
    assert_eq!(
        set_err(&c, "debug.io-stats.dump-format", "xml"),
        "option \"debug.io-stats.dump-format\": \"xml\" is not one of: json, text; expected one \
         of json, text"
    );
    assert_eq!(
        set_err(&c, "cache-timeout", "soon"),
        "option \"performance.io-cache.cache-timeout\": \"soon\" is not a duration (try 500ms, \
         10s, 5m); expected a duration such as 500ms or 10s (0ms..1m)"
    );
    assert!(
        set_err(&c, "auth.allow", "10.0.0.1, bad entry!")
            .contains("auth allow entry \"bad\" is not valid")
    );
}

#[test]
fn keys_of_missing_translators_say_so() {
    let c = Catalog::new(&Types::real());
    assert_eq!(
        set_err(&c, "performance.write-behind.window-size", "1MiB"),
        "option key \"performance.write-behind.window-size\" needs translator type \
         performance/write-behind, which is not available in this build (unknown translator type \
         \"performance/write-behind\"; searched: (test)); build or install that translator, or \
         change the volume layout"
    );
}

#[test]
fn get_reset_and_auth() {
    let c = Catalog::new(&Types::everything());
    let mut s = spec("v", &["/a"]);
    let wb = c.resolve("window-size").expect("key").clone();
    assert_eq!(c.value(&s, &wb), ("1MiB".to_owned(), true));
    c.set(&mut s, "window-size", "8MiB").expect("set");
    assert_eq!(c.value(&s, &wb), ("8MiB".to_owned(), false));
    assert_eq!(
        c.reset(&mut s, "window-size").expect("reset"),
        (wb.key.clone(), true)
    );
    assert_eq!(
        c.reset(&mut s, "window-size").expect("reset again"),
        (wb.key.clone(), false)
    );

    c.set(&mut s, "auth.allow", "10.0.0.0/8, 127.0.0.1")
        .expect("auth");
    assert_eq!(s.auth_allow, ["10.0.0.0/8", "127.0.0.1"]);
    let out = generate(&s, &Types::everything()).expect("generates");
    let server = out.servers[0].volfile.get("v-server").expect("server");
    assert_eq!(server.option("auth-allow"), Some("10.0.0.0/8,127.0.0.1"));
}

#[test]
fn listing_has_doc_default_range_and_liveness() {
    let c = Catalog::new(&Types::everything());
    let keys: Vec<&str> = c.keys().iter().map(|k| k.key.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    for managed in ["storage.posix.directory", "protocol.client.remote-host"] {
        assert!(!keys.contains(&managed), "{managed} is listed");
    }
    let wb = c
        .resolve("performance.write-behind.window-size")
        .expect("key");
    assert_eq!(wb.spec.doc.as_str(), "Bytes of writes held per file.");
    assert_eq!(wb.spec.default.as_str(), "1MiB");
    assert_eq!(wb.range(), "512KiB..1GiB");
    assert!(wb.live());
    let switch = c.resolve("performance.io-cache").expect("switch");
    assert!(matches!(switch.target, Target::Switch { .. }));
    assert!(
        switch
            .spec
            .doc
            .starts_with("Place performance/io-cache in the client graph.")
    );
    // Real schemas are listed too.
    let posix = c.resolve("storage.posix.gfid-xattr").expect("real key");
    assert_eq!(posix.range(), "auto|trusted|user");
    assert!(!posix.live());
}

/// The client performance stack: a translator is placed only when the build has its type,
/// in GlusterFS's order, and a volume can switch each one off.
#[test]
fn performance_stack_follows_the_build() {
    let names = |t: &Types, s: &xlfs_volgen::VolumeSpec| -> Vec<String> {
        let out = generate(s, t).expect("generates");
        out.client
            .volumes
            .iter()
            .map(|v| v.type_name.clone())
            .collect()
    };
    let s = spec("v", &["/a"]);
    assert_eq!(
        names(&Types::real(), &s),
        ["protocol/client", "debug/io-stats"]
    );
    // io-cache is off unless asked for (the kernel page cache does its job under FUSE).
    assert_eq!(
        names(&Types::real_plus(&["performance/io-cache"]), &s),
        ["protocol/client", "debug/io-stats"]
    );
    let mut ic = s.clone();
    ic.options
        .insert("performance.io-cache".into(), "on".into());
    assert_eq!(
        names(&Types::real_plus(&["performance/io-cache"]), &ic),
        ["protocol/client", "performance/io-cache", "debug/io-stats"]
    );
    let all = Types::real_plus(&PERFORMANCE);
    // md-cache too is off unless asked for (see volgen's stack.rs).
    assert_eq!(
        names(&all, &s),
        [
            "protocol/client",
            "performance/write-behind",
            "performance/read-ahead",
            "debug/io-stats"
        ]
    );
    ic.options
        .insert("performance.md-cache".into(), "on".into());
    assert_eq!(
        names(&all, &ic),
        [
            "protocol/client",
            "performance/write-behind",
            "performance/read-ahead",
            "performance/io-cache",
            "performance/md-cache",
            "debug/io-stats"
        ]
    );
    let mut off = ic.clone();
    off.options
        .insert("performance.read-ahead".into(), "off".into());
    off.options
        .insert("performance.write-behind".into(), "no".into());
    assert_eq!(
        names(&all, &off),
        [
            "protocol/client",
            "performance/io-cache",
            "performance/md-cache",
            "debug/io-stats"
        ]
    );
    // A key of a translator the build lacks is refused rather than silently dropped.
    assert!(generate(&off, &Types::real()).is_err());
}
