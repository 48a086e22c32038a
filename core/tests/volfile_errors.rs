//! Volfile parsing and validation: a table of malformed volfiles (each with the error kind,
//! line:column and message it must give), the positive cases, and a no-panic sweep over
//! mangled input.

use xlator_api::{OptionSpec, TypeInfo};
use xlfs_core::volfile::{
    Pos, TypeLookup, Volfile, VolfileError, VolfileErrorKind, VolumeDecl, effective_options,
    validate,
};

/// Three translator types, as the registry would describe them.
struct FakeTypes;

fn info(name: &str, options: Vec<OptionSpec>, min: u32, max: u32) -> TypeInfo {
    TypeInfo {
        announces_child_up: false,
        keeps_file_data: false,
        name: name.into(),
        doc: "test type".into(),
        options: options.into(),
        min_children: min,
        max_children: max,
    }
}

impl TypeLookup for FakeTypes {
    fn type_info(&self, type_name: &str) -> Result<TypeInfo, String> {
        match type_name {
            "storage/posix" => Ok(info(
                type_name,
                vec![
                    OptionSpec::path("directory", ""),
                    OptionSpec::string("volume-id", ""),
                ],
                0,
                0,
            )),
            "performance/write-behind" => Ok(info(
                type_name,
                vec![
                    OptionSpec::size("window-size", "1MiB")
                        .range(4096, 1 << 30)
                        .reconfigurable(),
                    OptionSpec::bool("flush-behind", "on"),
                ],
                1,
                1,
            )),
            "cluster/distribute" => Ok(info(
                type_name,
                vec![OptionSpec::enumeration(
                    "lookup-unhashed",
                    "on",
                    &["on", "off", "auto"],
                )],
                1,
                u32::MAX,
            )),
            _ => Err(format!(
                "no translator `{type_name}`\nsearched: /usr/lib/xlfs/xlators\n  ./target/debug"
            )),
        }
    }
    fn known_types(&self) -> Vec<String> {
        [
            "storage/posix",
            "performance/write-behind",
            "cluster/distribute",
        ]
        .map(String::from)
        .to_vec()
    }
}

/// Parses and validates.
#[allow(clippy::result_large_err)]
fn check(text: &str) -> Result<Volfile, VolfileError> {
    let vf = Volfile::parse(text, "test.ron")?;
    validate(&vf, &FakeTypes)?;
    Ok(vf)
}

fn label(kind: &VolfileErrorKind) -> &'static str {
    use VolfileErrorKind as K;
    match kind {
        K::Syntax(_) => "Syntax",
        K::Empty => "Empty",
        K::BadName { .. } => "BadName",
        K::DuplicateVolume { .. } => "DuplicateVolume",
        K::DuplicateOption { .. } => "DuplicateOption",
        K::DuplicateSubvolume { .. } => "DuplicateSubvolume",
        K::UnknownSubvolume { .. } => "UnknownSubvolume",
        K::UnknownTop { .. } => "UnknownTop",
        K::Cycle { .. } => "Cycle",
        K::UnknownType { .. } => "UnknownType",
        K::UnknownOption { .. } => "UnknownOption",
        K::InvalidOption { .. } => "InvalidOption",
        K::MissingOption { .. } => "MissingOption",
        K::ChildCount { .. } => "ChildCount",
        _ => "other",
    }
}

const POSIX: &str = r#"(name: "posix", type: "storage/posix", options: { "directory": "/d" }),"#;

/// (volfile, kind, "line:col" or "-" for none, message substring)
const CASES: &[(&str, &str, &str, &str)] = &[
    // ---- syntax (ron's messages, or the lexer's where ron's point at the wrong place)
    (
        "(volumes: [(name: \"a\" type: \"storage/posix\")])",
        "Syntax",
        "1:23",
        "Expected comma",
    ),
    (
        "(volumes: [\n  (name: \"a\", typ: \"storage/posix\"),\n])",
        "Syntax",
        "2:15",
        "Unexpected field named `typ` in `Volume`, expected one of `name`, `type`",
    ),
    (
        "(volumes: [\n  (name: \"a\"),\n])",
        "Syntax",
        "2:13",
        "missing field named `type`",
    ),
    (
        "(volumes: [(name: 5, type: \"storage/posix\")])",
        "Syntax",
        "1:19",
        "Expected string",
    ),
    (
        "(volumes: [\n  (name: \"a, type: \"storage/posix\"),\n])",
        "Syntax",
        "2:34",
        "string is never closed",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"storage/posix\"),\n",
        "Syntax",
        "1:11",
        "this `[` is never closed (is the file cut short?)",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"storage/posix\"],\n)",
        "Syntax",
        "2:36",
        "does not close the `(` opened at 2:3",
    ),
    (
        "(volumes: [ /* (name: \"a\", type: \"storage/posix\"), \n])",
        "Syntax",
        "1:13",
        "comment is never closed",
    ),
    (
        "{ volumes: [] }",
        "Syntax",
        "1:1",
        "a volfile is a parenthesised struct",
    ),
    (
        "(volumes: [(name: \"a\", type: \"storage/posix\")]) x",
        "Syntax",
        "1:49",
        "trailing characters",
    ),
    (
        "(volumes: [], tops: \"a\")",
        "Syntax",
        "1:15",
        "Unexpected field named `tops`",
    ),
    (
        "(volumes: [(name: \"a\", type: \"t\", options: { \"k\": [\"x\"] })])",
        "Syntax",
        "1:51",
        "an option value",
    ),
    (
        "(volumes: [(name: \"a\", type: \"t\", subvolumes: \"b\")])",
        "Syntax",
        "1:47",
        "Expected opening `[`",
    ),
    (
        "(volumes: [(name: \"a\", type: \"t\", options: { \"k\": on })])",
        "Syntax",
        "1:54",
        "Expected an option value in quotes, like \"1MB\" or \"on\"",
    ),
    (
        "(volumes: [(name: \"a\", name: \"b\", type: \"t\")])",
        "Syntax",
        "1:24",
        "duplicate field named `name`",
    ),
    (
        "Volfil(volumes: [])",
        "Syntax",
        "1:1",
        "Expected struct `Volfile` but found `Volfil`",
    ),
    (
        "(volumes: [(name: \"a\", type: \"t\")]))",
        "Syntax",
        "1:36",
        "unexpected `)`: nothing is open here",
    ),
    // ---- structure
    ("(volumes: [])", "Empty", "1:11", "declares no volumes"),
    ("// nothing yet\n", "Empty", "-", "declares no volumes"),
    (
        "(volumes: [(name: \"\", type: \"storage/posix\")])",
        "BadName",
        "1:19",
        "it is empty",
    ),
    (
        "(volumes: [(name: \"my vol\", type: \"storage/posix\")])",
        "BadName",
        "1:19",
        "' ' is not allowed",
    ),
    (
        "(volumes: [(name: \"a\", type: \"storage/posix\", options: { \"\": \"x\" })])",
        "BadName",
        "1:58",
        "option key",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"storage/posix\"),\n  (name: \"a\", type: \"storage/posix\"),\n])",
        "DuplicateVolume",
        "3:10",
        "volume `a` is declared twice (first at 2:10)",
    ),
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posix\", options: {\n    \"directory\": \"/a\",\n    \"directory\": \"/b\",\n  }),\n])",
        "DuplicateOption",
        "4:5",
        "option `directory` is given twice in volume `posix` (first at 3:5)",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"storage/posix\"),\n  (name: \"d\", type: \"cluster/distribute\", subvolumes: [\"a\", \"a\"]),\n])",
        "DuplicateSubvolume",
        "3:61",
        "lists subvolume `a` twice",
    ),
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posix\"),\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posx\"]),\n])",
        "UnknownSubvolume",
        "3:63",
        "subvolume `posx`, which is not declared; did you mean `posix`?",
    ),
    (
        "(volumes: [\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"brick0\"]),\n])",
        "UnknownSubvolume",
        "2:63",
        "declare it in `volumes` or fix the name",
    ),
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posix\"),\n],\ntop: \"psix\")",
        "UnknownTop",
        "4:6",
        "`top` names volume `psix`, which is not declared; did you mean `posix`?",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"cluster/distribute\", subvolumes: [\"b\"]),\n  (name: \"b\", type: \"cluster/distribute\", subvolumes: [\"a\"]),\n])",
        "Cycle",
        "3:56",
        "volumes form a cycle: a -> b -> a",
    ),
    (
        "(volumes: [\n  (name: \"a\", type: \"cluster/distribute\", subvolumes: [\"a\"]),\n])",
        "Cycle",
        "2:56",
        "cycle: a -> a",
    ),
    (
        "(volumes: [(name: \"..\", type: \"storage/posix\")])",
        "BadName",
        "1:19",
        "must start with a letter",
    ),
    // ---- against the translator types
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posx\"),\n])",
        "UnknownType",
        "2:10",
        "unknown type `storage/posx`; did you mean `storage/posix`? (no translator `storage/posx`; searched: /usr/lib/xlfs/xlators; ./target/debug)",
    ),
    (
        "(volumes: [\n  (name: \"x\", type: \"features/quota\"),\n])",
        "UnknownType",
        "2:10",
        "unknown type `features/quota` (no translator",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posix\"],\n   options: { \"window-sise\": \"1MB\" }),\n])",
        "UnknownOption",
        "4:15",
        "volume `wb` (performance/write-behind) has no option `window-sise`; did you mean `window-size`?",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posix\"],\n   options: { \"cache\": \"1MB\" }),\n])",
        "UnknownOption",
        "4:15",
        "its options are: window-size, flush-behind",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posix\"],\n   options: { \"window-size\": \"1K\" }),\n])",
        "InvalidOption",
        "4:15",
        "option `window-size` of volume `wb`: \"1K\" is below the minimum 4096 bytes; expected a size such as 64KiB or 1MB, from 4KiB to 1GiB",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posix\"],\n   options: { \"flush-behind\": \"maybe\" }),\n])",
        "InvalidOption",
        "4:15",
        "\"maybe\" is not a boolean (use on/off); expected on or off",
    ),
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posix\", options: { \"directory\": \"data\" }),\n])",
        "InvalidOption",
        "2:53",
        "\"data\" is not an absolute path",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"d\", type: \"cluster/distribute\", subvolumes: [\"posix\"],\n   options: { \"lookup-unhashed\": \"sometimes\" }),\n])",
        "InvalidOption",
        "4:15",
        "expected one of: on, off, auto",
    ),
    (
        "(volumes: [\n  (name: \"posix\", type: \"storage/posix\"),\n])",
        "MissingOption",
        "2:10",
        "volume `posix` (storage/posix) needs option `directory` (an absolute path); add `\"directory\": \"...\"`",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"p2\", type: \"storage/posix\", options: { \"directory\": \"/e\" }),\n  (name: \"wb\", type: \"performance/write-behind\", subvolumes: [\"posix\", \"p2\"]),\n])",
        "ChildCount",
        "4:10",
        "volume `wb` (performance/write-behind) has 2 subvolumes but performance/write-behind takes exactly 1",
    ),
    (
        "(volumes: [\n  POSIX\n  (name: \"p2\", type: \"storage/posix\", options: { \"directory\": \"/e\" }, subvolumes: [\"posix\"]),\n])",
        "ChildCount",
        "3:10",
        "has 1 subvolume but storage/posix takes none (it is a leaf)",
    ),
    (
        "(volumes: [\n  (name: \"d\", type: \"cluster/distribute\"),\n])",
        "ChildCount",
        "2:10",
        "takes at least 1",
    ),
];

#[test]
fn malformed_volfiles_give_the_expected_errors() {
    assert!(CASES.len() >= 20);
    let mut failures = Vec::new();
    for (i, (text, kind, at, needle)) in CASES.iter().enumerate() {
        let text = text.replace("POSIX", POSIX);
        let err = match check(&text) {
            Ok(_) => {
                failures.push(format!("case {i}: accepted:\n{text}"));
                continue;
            }
            Err(e) => e,
        };
        let shown = err.to_string();
        let pos = err.pos.map_or("-".to_owned(), |p| p.to_string());
        let prefix = match err.pos {
            Some(p) => format!("test.ron:{p}: "),
            None => "test.ron: ".to_owned(),
        };
        if label(&err.kind) != *kind
            || pos != *at
            || !shown.contains(needle)
            || !shown.starts_with(&prefix)
            || shown.contains('\n')
        {
            failures.push(format!(
                "case {i}: want {kind} at {at} containing {needle:?}\n  got {} at {pos}: {shown}",
                label(&err.kind)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const GOOD: &str = r#"
// A small stack. Comments may hold "quotes", (parens and [brackets.
(
    volumes: [
        /* block comments /* nest */ too ) */
        (name: "brick0", type: "storage/posix", options: { "directory": "/srv/b0", },),
        (name: "brick1", type: "storage/posix", options: { "directory": r"/srv/b(1)" }),
        (
            name: "dht",
            type: "cluster/distribute",
            subvolumes: ["brick0", "brick1",],
        ),
        (name: "wb", type: "performance/write-behind",
         options: { "window-size": 65536, "flush-behind": false },
         subvolumes: ["dht"]),
        (name: "spare", type: "storage/posix", options: { "directory": "/srv/spare" }),
    ],
    top: "wb",
)
"#;

fn names<'a>(vols: impl IntoIterator<Item = &'a VolumeDecl>) -> Vec<&'a str> {
    vols.into_iter().map(|v| v.name.as_str()).collect()
}

#[test]
fn comments_trailing_commas_and_top_selection() {
    let vf = check(GOOD).expect("valid");
    assert_eq!(vf.volumes.len(), 5);
    assert_eq!(vf.top.as_deref(), Some("wb"));
    assert_eq!(vf.top_name(), "wb");
    assert_eq!(
        vf.get("brick1").and_then(|v| v.option("directory")),
        Some("/srv/b(1)")
    );
    // numbers and booleans are taken as text
    let wb = vf.get("wb").expect("wb");
    assert_eq!(wb.option("window-size"), Some("65536"));
    assert_eq!(wb.option("flush-behind"), Some("off"));
    // positions: the volume's name value, each option key
    assert_eq!(
        vf.get("brick0").map(|v| v.pos),
        Some(Pos { line: 6, col: 16 })
    );
    assert_eq!(vf.get("dht").map(|v| v.pos), Some(Pos { line: 9, col: 19 }));
    assert_eq!(wb.options[1].pos, Pos { line: 14, col: 43 });

    // without `top`, the last volume is the top
    let text = GOOD.replace("top: \"wb\",", "");
    let vf = Volfile::parse(&text, "x").expect("valid");
    assert_eq!((vf.top.as_deref(), vf.top_name()), (None, "spare"));
    assert_eq!(names(vf.build_order()), ["spare"]);
}

#[test]
fn build_order_is_children_first_and_reachable_only() {
    let vf = check(GOOD).expect("valid");
    assert_eq!(names(vf.build_order()), ["brick0", "brick1", "dht", "wb"]);
    assert_eq!(names(vf.unreachable()), ["spare"]);

    // a volume under two parents is built once, before the first parent
    let text = r#"(volumes: [
        (name: "p", type: "storage/posix", options: { "directory": "/p" }),
        (name: "w1", type: "performance/write-behind", subvolumes: ["p"]),
        (name: "w2", type: "performance/write-behind", subvolumes: ["p"]),
        (name: "d", type: "cluster/distribute", subvolumes: ["w2", "w1"]),
    ])"#;
    let vf = check(text).expect("valid");
    assert_eq!(names(vf.build_order()), ["p", "w2", "w1", "d"]);
    assert!(vf.unreachable().is_empty());
}

#[test]
fn named_structs_and_raw_identifiers_parse() {
    let text = r#"Volfile(volumes: [Volume(name: "p", r#type: "storage/posix",
        options: { "directory": "/p" })])"#;
    let vf = check(text).expect("valid");
    assert_eq!(vf.volumes[0].type_name, "storage/posix");
    assert_eq!(vf.volumes[0].pos, Pos { line: 1, col: 32 });
}

#[test]
fn to_ron_round_trips() {
    let vf = check(GOOD).expect("valid");
    let again = Volfile::parse(&vf.to_ron(), "again").expect("to_ron output parses");
    let strip = |vf: &Volfile| {
        let mut vf = vf.clone();
        vf.origin.clear();
        for v in &mut vf.volumes {
            v.pos = Pos::default();
            for o in &mut v.options {
                o.pos = Pos::default();
            }
        }
        vf
    };
    assert_eq!(strip(&again), strip(&vf));
    assert_eq!(again.to_ron(), vf.to_ron());

    // awkward text survives too
    let mut odd = vf.clone();
    odd.volumes[0].options[0].value = "/a \"b\" \\c\nd\t\u{7f} é ) */ //".to_owned();
    odd.top = None;
    let again = Volfile::parse(&odd.to_ron(), "odd").expect("parses");
    assert_eq!(strip(&again), strip(&odd));
}

#[test]
fn effective_options_fill_defaults_in_schema_order() {
    let vf = check(GOOD).expect("valid");
    let wb_info = FakeTypes
        .type_info("performance/write-behind")
        .expect("known");
    let opts = effective_options(vf.get("wb").expect("wb"), &wb_info, "x").expect("valid");
    let got: Vec<(&str, &str)> = opts.iter().collect();
    assert_eq!(got, [("window-size", "65536"), ("flush-behind", "off")]);

    let dht_info = FakeTypes.type_info("cluster/distribute").expect("known");
    let opts = effective_options(vf.get("dht").expect("dht"), &dht_info, "x").expect("valid");
    assert_eq!(opts.get("lookup-unhashed"), Some("on"));

    // a String option with no default is present and empty
    let posix_info = FakeTypes.type_info("storage/posix").expect("known");
    let opts = effective_options(vf.get("brick0").expect("b0"), &posix_info, "x").expect("ok");
    assert_eq!(opts.get("volume-id"), Some(""));
    assert_eq!(opts.size("window-size").ok(), None);
}

#[test]
fn volfiles_built_in_code_validate_without_positions() {
    let vf = Volfile {
        origin: "generated".to_owned(),
        volumes: vec![VolumeDecl {
            name: "wb".to_owned(),
            type_name: "performance/write-behind".to_owned(),
            options: Vec::new(),
            subvolumes: vec!["nothing".to_owned()],
            pos: Pos::default(),
        }],
        top: None,
    };
    let err = validate(&vf, &FakeTypes).expect_err("unknown subvolume");
    assert_eq!(err.pos, None);
    assert!(
        err.to_string()
            .starts_with("generated: volume `wb` has subvolume `nothing`")
    );
    assert!(Volfile::parse(&vf.to_ron(), "x").is_err());
}

/// Every prefix of a valid volfile, and every position replaced by or with characters that
/// matter to RON, gives Ok or an error on one line with a position inside the text; nothing
/// panics.
#[test]
fn mangled_input_never_panics() {
    let check_one = |text: &str| {
        if let Err(e) = check(text) {
            let shown = e.to_string();
            assert!(
                !shown.contains('\n'),
                "multi-line error for {text:?}: {shown}"
            );
            if let Some(p) = e.pos {
                let lines = text.split('\n').count() as u32;
                assert!(
                    p.line >= 1 && p.line <= lines && p.col >= 1,
                    "{p} outside {text:?}"
                );
            }
        }
    };
    let text = GOOD;
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    for &i in &bounds {
        check_one(&text[..i]);
    }
    let swaps = [
        '"', '(', ')', '[', ']', '{', '}', ',', ':', '/', '*', '\\', 'r', '#', '\'', 'x',
    ];
    for w in bounds.windows(2) {
        let (at, next) = (w[0], w[1]);
        check_one(&format!("{}{}", &text[..at], &text[next..]));
        for s in swaps {
            check_one(&format!("{}{s}{}", &text[..at], &text[next..]));
        }
    }
    // byte flips, kept only where they leave valid UTF-8
    let bytes = text.as_bytes();
    for i in 0..bytes.len() {
        for bit in [0x01u8, 0x20, 0x80] {
            let mut b = bytes.to_vec();
            b[i] ^= bit;
            if let Ok(s) = String::from_utf8(b) {
                check_one(&s);
            }
        }
    }
    // deep nesting and odd input
    check_one(&"[".repeat(100_000));
    check_one(&format!("(volumes: {}", "[".repeat(10_000)));
    check_one(&"(".repeat(50_000));
    for odd in [
        "",
        " ",
        "(",
        ")",
        "\"",
        "r#",
        "b'",
        "'",
        "/*",
        "(volumes: [(name: 'a')])",
    ] {
        check_one(odd);
    }
}
