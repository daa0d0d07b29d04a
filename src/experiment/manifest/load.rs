//! Finding, reading and checking a manifest: its name, size and nesting,
//! `extends`, and the command line's overrides.

use super::*;

/// Whether `name` is an experiment's name, not a path: letters, digits,
/// `-` and `_` (what a manifest may name another experiment by).
pub(crate) fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Finds an experiment by name in the project's `experiments/` (see
/// [`crate::experiment::project::root`]), or takes a path to a YAML file.
pub(crate) fn locate(name: &str) -> Result<PathBuf, DriverError> {
    let direct = Path::new(name);
    if name.ends_with(".yaml") || name.ends_with(".yml") || name.contains('/') {
        return Ok(direct.to_path_buf());
    }
    let candidate = experiments_dir()?.join(format!("{name}.yaml"));
    if candidate.is_file() {
        return Ok(candidate);
    }
    Err(DriverError::UnknownExperiment {
        name: name.to_string(),
        tried: candidate.display().to_string(),
    })
}

/// The project's experiments directory.
pub(crate) fn experiments_dir() -> Result<PathBuf, DriverError> {
    Ok(crate::experiment::project::root()?.join("experiments"))
}

/// Every manifest in [`experiments_dir`], sorted by path.
pub(crate) fn all_manifests() -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context as _;
    let dir = experiments_dir()?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("could not read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// The deepest `--set` key accepted (`a.b.c` has 3 parts).
pub(crate) const MAX_KEY_DEPTH: usize = 16;
/// The largest manifest read, bytes.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// The deepest nesting of flow brackets (`[`, `{`) or indentation levels
/// accepted in a manifest or a `--set` value.
pub(crate) const MAX_NESTING: usize = 32;

/// Refuses YAML text nested deeper than [`MAX_NESTING`] before it is
/// parsed (a parser takes seconds, or its stack, on deep nesting). Counts
/// flow brackets outside quotes and comments, and block indentation.
pub(crate) fn check_nesting(text: &str, what: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
        deepest = deepest.max(indent / 2 + depth);
        let mut quote: Option<char> = None;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => {
                    depth += 1;
                    deepest = deepest.max(indent / 2 + depth);
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            if deepest > MAX_NESTING {
                return Err(format!(
                    "{what} is nested more than {MAX_NESTING} levels deep; no manifest needs that"
                ));
            }
        }
    }
    Ok(())
}

/// The manifest's text: a small regular file (not a FIFO or device that
/// would block or never end, not gigabytes; under sudo, one the invoking
/// user can read), nested no deeper than YAML parsing can take.
pub(super) fn read_manifest(path: &Path) -> Result<String, DriverError> {
    let read_error = |source| DriverError::Read {
        path: path.to_path_buf(),
        source,
    };
    crate::util::sudo::check_readable(path).map_err(|message| DriverError::Manifest {
        path: path.to_path_buf(),
        key: String::new(),
        message,
    })?;
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() || meta.len() > MAX_MANIFEST_BYTES {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: String::new(),
            message: if meta.is_file() {
                format!(
                    "{} bytes; a manifest is at most {MAX_MANIFEST_BYTES} bytes",
                    meta.len()
                )
            } else {
                "not a regular file (a manifest is a YAML file)".into()
            },
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    check_nesting(&text, "the manifest").map_err(|message| DriverError::Manifest {
        path: path.to_path_buf(),
        key: String::new(),
        message,
    })?;
    Ok(text)
}

/// The manifest's texts are one printable line, and its name, scales and
/// `then` name what they must.
/// The longest experiment name: it becomes a directory name and part of
/// temporary file names beside it (`.<name>.running`, ...).
pub(super) const MAX_NAME: usize = 100;

/// The experiment's name is plain and short: it names directories.
pub(super) fn check_name(path: &Path, name: &str) -> Result<(), DriverError> {
    if name.len() > MAX_NAME {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: "name".into(),
            message: format!(
                "{} characters: a name has at most {MAX_NAME} (it names directories, and a file name \
                 has at most 255 bytes with what is added to it)",
                name.len()
            ),
        });
    }
    if !is_plain_name(name) {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: "name".into(),
            message: format!(
                "`{}` is not a plain name: use letters, digits, `-` and `_` (it names a directory under results/)",
                name.escape_default()
            ),
        });
    }
    Ok(())
}

pub(super) fn check_names(path: &Path, manifest: &Manifest) -> Result<(), DriverError> {
    if let Some((key, text)) = manifest
        .texts()
        .into_iter()
        .find(|(k, t)| !is_printable(t) || (k != "next" && t.contains('\n')))
    {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key,
            message: format!(
                "`{}` holds a control character (a terminal escape?) or a line break; titles and labels are one line of printable text",
                text.escape_default()
            ),
        });
    }
    check_name(path, &manifest.name)?;
    for (key, scale) in [
        ("default_scale", &manifest.default_scale),
        ("committed_scale", &manifest.committed_scale),
    ] {
        let Some(scale) = scale else { continue };
        if manifest.scales.contains_key(scale) {
            continue;
        }
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: key.into(),
            message: format!(
                "`{scale}` is not one of the manifest's scales ({})",
                manifest
                    .scales
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if let Err((key, message)) = manifest.health.check() {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key,
            message,
        });
    }
    if let Some(m) = manifest.verify.margin
        && !(m.is_finite() && m >= 0.0)
    {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: "verify.margin".into(),
            message: format!("{m}: a margin in the table's units, 0 or more"),
        });
    }
    if let Some(k) = manifest.verify.spread
        && !(k.is_finite() && k > 0.0)
    {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: "verify.spread".into(),
            message: format!(
                "{k}: a multiple of the record's standard deviation across seeds, above 0"
            ),
        });
    }
    if let Some(name) = manifest.then.iter().find(|n| !is_plain_name(n)) {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: "then".into(),
            message: format!(
                "`{}` is not an experiment's name (see `repro list`)",
                name.escape_default()
            ),
        });
    }
    Ok(())
}

/// The YAML tree of the manifest at `path`.
pub(super) fn parse_tree(path: &Path) -> Result<Value, DriverError> {
    let text = read_manifest(path)?;
    yaml_serde::from_str(&text).map_err(|e| DriverError::Yaml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// How many manifests an `extends` chain may hold.
pub(super) const MAX_EXTENDS: usize = 8;

/// `tree` (the manifest at `path`) with the manifest it `extends` merged
/// under it: that manifest's tree, its own `extends` resolved first, with
/// this one's keys merged over it ([`merge_over`]). `extends: NAME` names
/// an experiment whose manifest, `NAME.yaml`, sits in the same directory.
/// `chain` holds the manifests already on the way (a cycle is an error).
pub(super) fn resolve_extends(
    path: &Path,
    tree: Value,
    chain: &mut Vec<PathBuf>,
) -> Result<Value, DriverError> {
    let Value::Mapping(mut top) = tree else {
        return Ok(tree);
    };
    let Some(base) = top.remove("extends") else {
        return Ok(Value::Mapping(top));
    };
    let error = |message: String| DriverError::Manifest {
        path: path.to_path_buf(),
        key: "extends".into(),
        message,
    };
    let name = base.as_str().filter(|n| is_plain_name(n)).ok_or_else(|| {
        error("names the experiment this manifest extends, e.g. `extends: table2`".into())
    })?;
    let base_path = path.with_file_name(format!("{name}.yaml"));
    if chain.contains(&base_path) || chain.len() >= MAX_EXTENDS {
        let names: Vec<String> = chain
            .iter()
            .chain([&base_path])
            .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
            .collect();
        return Err(error(format!(
            "`extends` goes round or too deep ({} at most): {}",
            MAX_EXTENDS,
            names.join(" -> ")
        )));
    }
    if !base_path.is_file() {
        return Err(error(format!(
            "`{name}` has no manifest beside this one ({} is missing)",
            base_path.display()
        )));
    }
    if std::fs::symlink_metadata(&base_path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(error(format!(
            "`{name}`: {} is a symbolic link; `extends` takes a manifest file beside this one, \
             never a link to elsewhere",
            base_path.display()
        )));
    }
    chain.push(base_path.clone());
    let parsed = parse_tree(&base_path)?;
    if !matches!(parsed, Value::Mapping(_)) {
        return Err(error(format!(
            "`{name}`: {} is empty or not a mapping of keys; it is not a manifest",
            base_path.display()
        )));
    }
    let base_tree = resolve_extends(&base_path, parsed, chain)?;
    Ok(merge_over(base_tree, Value::Mapping(top)))
}

/// `over` merged over `base`, as `extends` merges a manifest over the one
/// it extends: mappings key by key, recursively, a key keeping its place;
/// a sequence or a scalar replaces the base's whole; a key set to `null`
/// removes the base's key (`tune: null`, `scales: { paper: null }`).
pub(crate) fn merge_over(base: Value, over: Value) -> Value {
    match (base, over) {
        (Value::Mapping(mut b), Value::Mapping(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(&k);
                } else if let Some(slot) = b.get_mut(&k) {
                    *slot = merge_over(std::mem::take(slot), v);
                } else {
                    b.insert(k, v);
                }
            }
            Value::Mapping(b)
        }
        (_, o) => o,
    }
}

/// The tree of the manifest at `path` as a run reads it: what it
/// `extends` merged in, then the `key=value` overrides applied (`repro
/// show` prints it).
pub(crate) fn resolved_tree(path: &Path, overrides: &[String]) -> Result<Value, DriverError> {
    let mut tree = resolve_extends(path, parse_tree(path)?, &mut vec![path.to_path_buf()])?;
    for arg in overrides {
        apply_override(&mut tree, arg)?;
        command_line_wins(&mut tree, arg)?;
    }
    Ok(tree)
}

/// Reads `path` (merging what it `extends`), applies `key=value`
/// overrides, and parses the manifest.
pub(crate) fn load(path: &Path, overrides: &[String]) -> Result<Manifest, DriverError> {
    from_tree(path, resolved_tree(path, overrides)?)
}

/// The first place in `tree` where a key, or a value that decides runs,
/// holds a control character: its path, shown escaped.
pub(super) fn control_character(tree: &Value, at: &str) -> Option<String> {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match tree {
        Value::Mapping(m) => m.iter().find_map(|(k, v)| {
            let key = match k {
                Value::String(s) => s.clone(),
                other => yaml_serde::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            if crate::util::text::has_control(&key) {
                return Some(crate::util::text::shown(&join(&key)));
            }
            control_character(v, &join(&key))
        }),
        Value::Sequence(s) => s
            .iter()
            .enumerate()
            .find_map(|(i, v)| control_character(v, &format!("{at}[{i}]"))),
        // no control character in a value that decides runs (their
        // messages echo it)
        Value::String(s) => {
            let deciding = [
                "params", "grid", "scales", "cases", "exclude", "labels", "tune",
            ]
            .iter()
            .any(|k| {
                at == *k || at.starts_with(&format!("{k}.")) || at.starts_with(&format!("{k}["))
            });
            // (titles and labels: `check_names`, with its own message)
            (deciding && crate::util::text::has_control(s)).then(|| crate::util::text::shown(at))
        }
        _ => None,
    }
}

/// The manifest `tree` (a [`resolved_tree`] of `path`) parsed and checked.
pub(crate) fn from_tree(path: &Path, tree: Value) -> Result<Manifest, DriverError> {
    if let Some(at) = control_character(&tree, "") {
        return Err(DriverError::Manifest {
            path: path.to_path_buf(),
            key: at,
            message: "a key or value holds a control character; write plain text".into(),
        });
    }
    // what decides the runs: a table, figure or claim reads the runs and
    // may change without making them stale, and a limit bounds them
    let mut deciding = tree.clone();
    if let Value::Mapping(m) = &mut deciding {
        for k in PRESENTATION {
            m.remove(k);
        }
    }
    let resolved = serde_json::to_value(&deciding)
        .map(|v| sorted_json(without_limits(v)).to_string())
        .unwrap_or_default();
    let mut manifest: Manifest =
        serde_path_to_error::deserialize(tree).map_err(|e| DriverError::Manifest {
            path: path.to_path_buf(),
            key: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
    manifest.resolved = resolved;
    check_names(path, &manifest)?;
    Ok(manifest)
}

/// Makes the override `arg` (already applied to `tree`) win over the
/// layers that would otherwise shadow it, as in Hydra: a scale that sets
/// the same parameter or grid axis gets the command line's value too. A
/// value set per grid point (a case's `set`, a tuning space) cannot be
/// overridden for every run at once: that is an error naming where it is
/// set.
pub(super) fn command_line_wins(tree: &mut Value, arg: &str) -> Result<(), DriverError> {
    let Some((key, raw)) = arg.split_once('=') else {
        return Ok(());
    };
    let (layer_key, param) = if let Some(p) = key.strip_prefix("params.") {
        (p.to_string(), p.split('.').next().unwrap_or(p).to_string())
    } else if let Some(axis) = key.strip_prefix("grid.") {
        // a scale replaces an axis with its key `grid.<axis>`
        if axis.contains('.') {
            return Ok(());
        }
        (key.to_string(), key.to_string())
    } else {
        return Ok(());
    };
    let Value::Mapping(top) = tree else {
        return Ok(());
    };
    if let Some(Value::Mapping(scales)) = top.get_mut("scales") {
        for (_, scale) in scales.iter_mut() {
            let Value::Mapping(layer) = scale else {
                continue;
            };
            if layer.contains_key(param.as_str()) {
                let mut wrapped = Value::Mapping(std::mem::take(layer));
                if param == layer_key || key.starts_with("grid.") {
                    // flat scale keys: `iterations`, `grid.seed`
                    if let Value::Mapping(m) = &mut wrapped {
                        let value: Value = yaml_serde::from_str(raw).unwrap_or(Value::Null);
                        m.insert(Value::from(param.clone()), value);
                    }
                } else {
                    apply_override(&mut wrapped, &format!("{layer_key}={raw}"))?;
                }
                if let Value::Mapping(m) = wrapped {
                    *layer = m;
                }
            }
        }
    }
    if !key.starts_with("params.") {
        return Ok(());
    }
    let mut shadows = Vec::new();
    if let Some(Value::Sequence(cases)) = top.get("cases") {
        for (i, case) in cases.iter().enumerate() {
            if case
                .get("set")
                .and_then(Value::as_mapping)
                .is_some_and(|m| m.contains_key(param.as_str()))
            {
                shadows.push(format!("cases[{i}].set.{param}"));
            }
        }
    }
    if let Some(Value::Mapping(space)) = top.get("tune").and_then(|t| t.get("space")) {
        for (method, params) in space {
            if params
                .as_mapping()
                .is_some_and(|m| m.contains_key(param.as_str()))
            {
                shadows.push(format!(
                    "tune.space.{}.{param}",
                    method.as_str().unwrap_or("?")
                ));
            }
        }
    }
    if shadows.is_empty() {
        return Ok(());
    }
    Err(DriverError::Override {
        message: format!(
            "--set `{arg}`: `{param}` is also set per grid point by {}, which would win for those runs; \
             change it there in the manifest, or restrict the grid to runs it does not touch",
            shadows.join(", "),
        ),
    })
}

/// Printable text: no control characters but newlines and tabs.
pub(crate) fn is_printable(text: &str) -> bool {
    !text
        .chars()
        .any(|c| crate::util::text::is_control(c) && c != '\n' && c != '\t')
}

impl Manifest {
    /// Every text a table, figure, claim or report shows, with its key.
    pub(super) fn texts(&self) -> Vec<(String, &str)> {
        let mut out = vec![
            ("title".to_string(), self.title.as_str()),
            ("source".to_string(), self.source.as_str()),
        ];
        if let Some(n) = &self.next {
            out.push(("next".into(), n));
        }
        for (s, c) in &self.cost {
            out.push((format!("cost.{s}"), c));
        }
        for (i, e) in self.table.extra.iter().enumerate() {
            out.push((format!("table.extra[{i}].label"), &e.label));
        }
        if let Some(p) = &self.table.paper {
            out.push(("table.paper.label".into(), &p.label));
        }
        for (i, c) in self.claims.iter().enumerate() {
            for (k, v) in [("claim", &c.claim), ("source", &c.source)] {
                if let Some(v) = v {
                    out.push((format!("claims[{i}].{k}"), v));
                }
            }
        }
        for (k, values) in &self.grid {
            for v in values {
                if let Value::String(t) = v {
                    out.push((format!("grid.{k}"), t));
                }
            }
        }
        out
    }
}

/// Letters, digits, `-` and `_`, not starting with `-`: safe as a
/// directory name and on a command line.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `a.b.c=value`: sets the key, creating mappings on the way; the value is
/// parsed as YAML (`0.05`, `[1, 2]`, `ring`).
pub(crate) fn apply_override(tree: &mut Value, arg: &str) -> Result<(), DriverError> {
    let bad = || DriverError::BadOverride {
        arg: crate::util::text::shown(arg),
    };
    if crate::util::text::has_control(arg) {
        return Err(DriverError::Override {
            message: format!(
                "--set `{}` holds a control character; a key and its value are plain text",
                crate::util::text::shown(arg)
            ),
        });
    }
    let (key, raw) = arg.split_once('=').ok_or_else(bad)?;
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(bad());
    }
    if key.split('.').count() > MAX_KEY_DEPTH {
        return Err(DriverError::Override {
            message: format!(
                "--set: a key of {} parts; no manifest key is deeper than {MAX_KEY_DEPTH}",
                key.split('.').count()
            ),
        });
    }
    check_nesting(raw, "--set value").map_err(|message| DriverError::Override { message })?;
    let value: Value = yaml_serde::from_str(raw).map_err(|_| bad())?;
    let mut node = tree;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        let map = node.as_mapping_mut().ok_or_else(bad)?;
        let k = Value::String((*part).to_string());
        if i + 1 == parts.len() {
            map.insert(k, value);
            return Ok(());
        }
        node = map.entry(k).or_insert(Value::Mapping(Mapping::new()));
    }
    Ok(())
}
