//! Growing and shrinking a volume (`xlfs volume add-brick` / `remove-brick commit`): the
//! bricks that stay keep their translator names, remote subvolumes and ports, removed ids
//! are not reused, and the distribute layer comes and goes with the number of subvolumes.

mod support;

use support::{Types, spec};
use xlfs_core::volfile::{Volfile, VolumeDecl};
use xlfs_volgen::{Brick, VolgenError, VolumeSpec, generate};

fn bricks(list: &[&str]) -> Vec<Brick> {
    list.iter()
        .map(|b| Brick::parse(b).expect("brick"))
        .collect()
}

fn decl<'a>(vf: &'a Volfile, name: &str) -> &'a VolumeDecl {
    vf.volumes
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no volume {name} in\n{}", vf.to_ron()))
}

fn option<'a>(d: &'a VolumeDecl, key: &str) -> &'a str {
    d.options
        .iter()
        .find(|o| o.key == key)
        .map(|o| o.value.as_str())
        .unwrap_or_else(|| panic!("{} has no {key}", d.name))
}

/// The distribute translator's children, or None when there is no distribute layer.
fn dht_children(vf: &Volfile) -> Option<Vec<String>> {
    vf.volumes
        .iter()
        .find(|v| v.type_name == "cluster/distribute")
        .map(|v| v.subvolumes.clone())
}

#[test]
fn a_plain_volume_grows_into_distribute_2_with_the_old_brick_first() {
    let mut s = spec("gv0", &["/d/b0"]);
    s.transport.base_port = 30000;
    let before = generate(&s, &Types::real_plus(&support::CLUSTER)).expect("plain");
    assert_eq!(dht_children(&before.client), None);
    s.add_bricks(bricks(&["/d/b1"]));
    assert!(s.brick_ids.is_empty(), "no renumbering: {:?}", s.brick_ids);
    let after = generate(&s, &Types::real_plus(&support::CLUSTER)).expect("distribute 2");
    assert_eq!(
        dht_children(&after.client),
        Some(vec!["gv0-client-0".into(), "gv0-client-1".into()])
    );
    let c1 = decl(&after.client, "gv0-client-1");
    assert_eq!(option(c1, "remote-port"), "30001");
    assert_eq!(option(c1, "remote-subvolume"), "gv0-brick-1");
    // The old brick's server volfile is the same text.
    assert_eq!(
        before.servers[0].volfile.to_ron(),
        after.servers[0].volfile.to_ron()
    );
    assert_eq!(s.layout().to_string(), "distribute 2");
}

#[test]
fn removing_a_middle_brick_keeps_the_other_names_and_ports() {
    let mut s = spec("v", &["/d/b0", "/d/b1", "/d/b2"]);
    s.transport.base_port = 40000;
    s.remove_bricks(&[1]);
    assert_eq!(s.brick_ids, vec![0, 2]);
    assert_eq!(s.brick_port(1), 40002);
    assert_eq!(s.position_of(2), Some(1));
    assert_eq!(s.position_of(1), None);
    let g = generate(&s, &Types::real_plus(&support::CLUSTER)).expect("generates");
    assert_eq!(
        dht_children(&g.client),
        Some(vec!["v-client-0".into(), "v-client-2".into()])
    );
    let c2 = decl(&g.client, "v-client-2");
    assert_eq!(option(c2, "remote-port"), "40002");
    assert_eq!(option(c2, "remote-subvolume"), "v-brick-2");
    let ids: Vec<usize> = g.servers.iter().map(|s| s.index).collect();
    assert_eq!(ids, [0, 2]);
    assert!(g.servers[1].volfile.to_ron().contains("v-brick-2"));
    // The description round-trips with its ids.
    let back = VolumeSpec::from_ron(&s.to_ron(), "x".as_ref()).expect("parses");
    assert_eq!(back, s);
    // A brick added later gets a fresh id (3), not the removed one's.
    s.add_bricks(bricks(&["/d/b3"]));
    assert_eq!(s.brick_ids, vec![0, 2, 3]);
    let subs: Vec<String> = s.subvolumes().into_iter().map(|v| v.name).collect();
    assert_eq!(subs, ["v-client-0", "v-client-2", "v-client-3"]);
}

#[test]
fn removing_the_last_brick_does_not_give_its_id_out_again() {
    let mut s = spec("v", &["/d/b0", "/d/b1", "/d/b2"]);
    s.remove_bricks(&[2]);
    assert!(s.brick_ids.is_empty(), "still 0..N-1");
    assert_eq!(s.next_brick_id, 3);
    assert!(s.to_ron().contains("next_brick_id: 3"), "{}", s.to_ron());
    s.add_bricks(bricks(&["/d/b9"]));
    assert_eq!(s.brick_ids, vec![0, 1, 3]);
    assert_eq!(s.brick_id(2), 3);
}

#[test]
fn replica_sets_keep_their_names_when_one_goes() {
    let mut s = spec(
        "dr",
        &["/r/a0", "/r/a1", "/r/b0", "/r/b1", "/r/c0", "/r/c1"],
    );
    s.replica = 2;
    let subs: Vec<String> = s.subvolumes().into_iter().map(|v| v.name).collect();
    assert_eq!(subs, ["dr-replicate-0", "dr-replicate-1", "dr-replicate-2"]);
    s.remove_bricks(&[0, 1]);
    assert_eq!(s.brick_ids, vec![2, 3, 4, 5]);
    let g = generate(&s, &Types::everything()).expect("generates");
    assert_eq!(
        dht_children(&g.client),
        Some(vec!["dr-replicate-1".into(), "dr-replicate-2".into()])
    );
    assert_eq!(
        decl(&g.client, "dr-replicate-1").subvolumes,
        ["dr-client-2", "dr-client-3"]
    );
    let subs = s.subvolumes();
    assert_eq!(subs[1].name, "dr-replicate-2");
    assert_eq!(subs[1].bricks, 2..4);
    // Down to one set: no distribute layer; the set keeps its name.
    s.remove_bricks(&[2, 3]);
    let g = generate(&s, &Types::everything()).expect("generates");
    assert_eq!(dht_children(&g.client), None);
    assert_eq!(
        decl(&g.client, "dr-replicate-1").subvolumes,
        ["dr-client-2", "dr-client-3"]
    );
}

#[test]
fn stripes_are_named_by_their_first_brick() {
    let list: Vec<String> = (0..8).map(|i| format!("/s/b{i}")).collect();
    let list: Vec<&str> = list.iter().map(String::as_str).collect();
    let mut s = spec("big", &list);
    s.replica = 2;
    s.stripe = 2;
    s.remove_bricks(&[0, 1, 2, 3]);
    assert_eq!(s.brick_ids, vec![4, 5, 6, 7]);
    let g = generate(&s, &Types::everything()).expect("generates");
    assert_eq!(
        decl(&g.client, "big-stripe-1").subvolumes,
        ["big-replicate-2", "big-replicate-3"]
    );
    assert_eq!(s.subvolumes()[0].name, "big-stripe-1");
}

#[test]
fn inconsistent_ids_are_rejected() {
    let cases: &[(&[u32], &str)] = &[
        (&[0], "1 ids for 2 bricks"),
        (&[1, 0], "ids must increase"),
        (&[0, 3], "consecutive ids"),
        (&[1, 2], "consecutive ids from a multiple of 2"),
    ];
    for (ids, want) in cases {
        let mut s = spec("v", &["/r/a", "/r/b"]);
        s.replica = 2;
        s.brick_ids = ids.to_vec();
        let e = s.check().expect_err("bad ids");
        assert!(matches!(e, VolgenError::BadBrickIds { .. }), "{e}");
        assert!(e.to_string().contains(want), "{ids:?}: {e}");
    }
    // The port range counts the highest id, not the number of bricks.
    let mut s = spec("v", &["/r/a", "/r/b"]);
    s.transport.base_port = 65530;
    s.brick_ids = vec![0, 9];
    assert!(matches!(s.check(), Err(VolgenError::PortRange { .. })));
}

#[test]
fn arbiters_stay_the_last_brick_of_each_set_when_sets_come_and_go() {
    let mut s = spec("arb", &["/a/0", "/a/1", "/a/arb"]);
    s.replica = 3;
    s.arbiter = 1;
    s.add_bricks(bricks(&["/b/0", "/b/1", "/b/arb"]));
    let types = Types::real_plus(&[
        "cluster/replicate",
        "cluster/distribute",
        "features/arbiter",
    ]);
    let arbiter_bricks = |s: &VolumeSpec| -> Vec<usize> {
        let g = generate(s, &types).expect("generates");
        g.servers
            .iter()
            .filter(|b| {
                b.volfile
                    .volumes
                    .iter()
                    .any(|v| v.type_name == "features/arbiter")
            })
            .map(|b| b.index)
            .collect()
    };
    assert_eq!(arbiter_bricks(&s), [2, 5]);
    let g = generate(&s, &types).expect("generates");
    for set in ["arb-replicate-0", "arb-replicate-1"] {
        assert_eq!(option(decl(&g.client, set), "arbiter-count"), "1", "{set}");
    }
    // The first set goes: the other keeps its arbiter (by brick id, not position).
    s.remove_bricks(&[0, 1, 2]);
    assert_eq!(arbiter_bricks(&s), [5]);
    assert!(s.is_arbiter(2) && !s.is_arbiter(0));
}
