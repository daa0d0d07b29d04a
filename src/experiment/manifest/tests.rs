use super::*;

/// `extends` merges mappings key by key (a key keeps its place),
/// replaces sequences and scalars whole, and removes a key set to null.
#[test]
fn a_manifest_merges_over_the_one_it_extends() {
    let yaml = |t: &str| -> Value { yaml_serde::from_str(t).unwrap() };
    let merged = merge_over(
        yaml("{a: 1, m: {x: 1, y: [1, 2], z: 3}, s: [1], gone: {k: 1}}"),
        yaml("{m: {y: [9], w: 4, z: null}, s: [2, 3], gone: null, new: 5}"),
    );
    assert_eq!(
        merged,
        yaml("{a: 1, m: {x: 1, y: [9], w: 4}, s: [2, 3], new: 5}")
    );
    let keys: Vec<&str> = match &merged {
        Value::Mapping(m) => m.keys().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    assert_eq!(keys, ["a", "m", "s", "new"]);
}

/// `extends` names a manifest beside this one; a missing one, a path
/// and a cycle are errors naming the key.
#[test]
fn extends_names_a_manifest_beside_it_and_never_goes_round() {
    let dir = std::env::temp_dir().join(format!("repro-extends-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(format!("{name}.yaml"));
        std::fs::write(&p, text).unwrap();
        p
    };
    write("base", GOOD);
    let child = write(
        "child",
        "extends: base\nname: child\nparams: { workers: 2 }\n",
    );
    let m = load(&child, &[]).unwrap();
    assert_eq!(m.name, "child");
    assert_eq!(m.title, "A demo");
    assert_eq!(m.params.get("workers"), Some(&Value::from(2)));
    let message = |path: &Path| match load(path, &[]) {
        Err(DriverError::Manifest { key, message, .. }) => format!("{key}: {message}"),
        other => panic!("{other:?}"),
    };
    let missing = write("lost", "extends: nowhere\nname: lost\n");
    assert!(message(&missing).starts_with("extends: `nowhere` has no manifest"));
    let path = write("path", "extends: ../etc/base\nname: path\n");
    assert!(message(&path).contains("e.g. `extends: table2`"));
    write("a", "extends: b\nname: a\n");
    let b = write("b", "extends: a\nname: b\n");
    assert!(message(&b).contains("b -> a -> b"), "{}", message(&b));
    // a link beside it, and a file that is not a mapping, are named
    std::os::unix::fs::symlink(dir.join("base.yaml"), dir.join("linked.yaml")).unwrap();
    let via = write("via", "extends: linked\nname: via\n");
    assert!(
        message(&via).contains("is a symbolic link"),
        "{}",
        message(&via)
    );
    write("blank", "");
    let on_blank = write("onblank", "extends: blank\nname: onblank\n");
    assert!(
        message(&on_blank).contains("is empty or not a mapping of keys"),
        "{}",
        message(&on_blank)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The quickstart extends table2 and, as its comment says, keeps every
/// parameter of table2's but the timeout.
#[test]
fn the_quickstart_is_table2_with_what_differs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let text = std::fs::read_to_string(root.join("quickstart.yaml")).unwrap();
    assert!(text.lines().any(|l| l == "extends: table2"));
    let quick = load(&root.join("quickstart.yaml"), &[]).unwrap();
    let table2 = load(&root.join("table2.yaml"), &[]).unwrap();
    let mut params = quick.params.clone();
    params.insert("timeout_s".into(), table2.params["timeout_s"].clone());
    assert_eq!(params, table2.params);
    assert_eq!(quick.tune, None);
    assert!(!quick.scales.contains_key("paper"));
    assert_eq!(quick.table.paper, table2.table.paper);
}

const GOOD: &str = "
name: demo
title: A demo
source: nowhere
scales:
  smoke: { iterations: 10 }
grid:
  algorithm: [d-psgd, moniqua]
params:
  workers: 4
table: { rows: [algorithm], value: final_loss }
";

/// `text` in a file of its own (tests run side by side).
fn write(text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "repro-manifest-{}-{}.yaml",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn parses_and_overrides() {
    let p = write(GOOD);
    let m = load(&p, &["params.lr=0.05".into(), "grid.seed=[1, 2]".into()]).unwrap();
    assert_eq!(m.name, "demo");
    assert_eq!(m.backend, Backend::Sim);
    assert_eq!(m.params.get("lr"), Some(&Value::from(0.05)));
    assert_eq!(m.grid["seed"].len(), 2);
    assert_eq!(m.grid["algorithm"].len(), 2);
}

#[test]
fn unknown_keys_are_errors_that_name_the_path() {
    let p = write(&GOOD.replace("table: { rows", "table: { colour: red, rows"));
    let err = load(&p, &[]).unwrap_err().to_string();
    assert!(err.contains("table") && err.contains("colour"), "{err}");
    let p = write(&GOOD.replace("name: demo", "name: demo\nbogus: 1"));
    assert!(load(&p, &[]).unwrap_err().to_string().contains("bogus"));
    let err = load(&p, &["noequals".into()]).unwrap_err().to_string();
    assert!(err.contains("key=value"), "{err}");
}

/// A new claim, table column or title leaves the runs current; a new
/// parameter does not.
#[test]
fn only_what_decides_the_runs_is_hashed() {
    let hash = |overrides: &[&str]| {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        load(&write(GOOD), &o).unwrap().hash("smoke", Backend::Sim)
    };
    let base = hash(&[]);
    assert_eq!(hash(&["title=Another"]), base);
    assert_eq!(hash(&["table.value=local_loss"]), base);
    assert_eq!(
        hash(&["claims=[{better: moniqua, than: d-psgd, metric: final_loss}]"]),
        base
    );
    assert_ne!(hash(&["params.workers=8"]), base);
    assert_ne!(hash(&["scales.smoke.iterations=11"]), base);
}
