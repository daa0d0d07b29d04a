//! The host: completions and man pages, doctor, and running under sudo.

use super::*;

/// The conventions of a CLI: completion scripts for three shells and man
/// pages generated from the parser's own definitions, `--json` for `list`
/// and `status`, and Hydra's `KEY=VALUE` arguments as `--set`.
#[test]
fn completions_man_pages_json_and_key_value_arguments() {
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).to_string();
    for shell in ["bash", "zsh", "fish"] {
        let o = repro(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let script = text(&o);
        for word in ["run", "status", "completions", "scale", "dry-run"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
        // the project's scales, and (where the shell's generator completes
        // positionals) its experiment names
        assert!(
            script.contains("paper"),
            "{shell} completion lacks the scales"
        );
        if shell != "fish" {
            assert!(
                script.contains("table2"),
                "{shell} completion lacks the experiments"
            );
        }
    }
    assert_eq!(repro(&["completions", "tcsh"]).status.code(), Some(2));

    let o = repro(&["man"]);
    assert!(o.status.success());
    let page = text(&o);
    assert!(page.contains(".TH repro 1"), "{page}");
    assert!(
        page.contains("completions") && page.contains("status"),
        "{page}"
    );
    let dir = temp_out("man");
    let o = repro(&["man", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success());
    let run_page = std::fs::read_to_string(dir.join("repro-run.1")).unwrap();
    assert!(
        run_page.contains(".TH repro-run 1") && run_page.contains("dry\\-run"),
        "{run_page}"
    );
    assert!(dir.join("repro.1").is_file() && dir.join("repro-data.1").is_file());
    std::fs::remove_dir_all(&dir).unwrap();

    let o = repro(&["list", "--json"]);
    assert!(o.status.success());
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let convex = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "convex")
        .expect("convex listed");
    assert_eq!(convex["scales"]["cpu"]["runs"], 180);
    assert_eq!(convex["scales"]["cpu"]["tuning_runs"], 162);
    assert_eq!(convex["backend"], "sim");

    let out = temp_out("status-json");
    let o = repro(&["status", "smoke", "--out", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(status["counts"]["missing"], 14);
    assert_eq!(status["runs"][0]["state"], "missing");
    assert_eq!(status["runs"][0]["reason"], "never run");
    assert!(status["build"]["source"].is_string());
    // every shipped experiment, each read from the fixture project's results
    let project = common::fixture_project("status-all");
    let o = common::repro_in(&project, &["status", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(all["experiments"].as_array().unwrap().len() >= 8);
    let _ = std::fs::remove_dir_all(&project);

    // --quiet says nothing, --json prints only the summary on stdout,
    // --verbose adds each run's resolved parameters
    let out = temp_out("quiet");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success());
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(csv_rows(&out.join("runs.csv")).len(), 14);
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap(), "--json"]);
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["ran"], 14);
    assert_eq!(summary["runs_by_status"]["completed"], 14);
    assert_eq!(summary["failed"], 0);
    let table = summary["files"]["table"].as_str().unwrap();
    assert!(Path::new(table).is_file());
    assert_eq!(summary["files"]["figures"].as_array().unwrap().len(), 2);
    assert!(
        summary["files"]["figure_py"]
            .as_str()
            .unwrap()
            .ends_with("figure.py")
    );
    let o = repro(&["-v", "run", "smoke", "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"algorithm\":\"allreduce\""), "{err}");
    std::fs::remove_dir_all(&out).unwrap();

    // Hydra's `KEY=VALUE` is `--set KEY=VALUE`, with or without an
    // experiment named before it
    let plan = |args: &[&str]| common::unstamped(&text(&repro(args)));
    let set = plan(&["run", "smoke", "--set", "params.lr=0.123", "--dry-run"]);
    assert_ne!(set, plan(&["run", "smoke", "--dry-run"]));
    assert_eq!(set, plan(&["run", "smoke", "params.lr=0.123", "--dry-run"]));
    assert_eq!(
        plan(&["run", "quickstart", "params.lr=0.123", "--dry-run"]),
        plan(&["run", "params.lr=0.123", "--dry-run"])
    );
}

/// `repro doctor` probes the host and always reports every check.
#[test]
fn doctor_reports_what_the_host_can_do() {
    let o = repro(&["doctor"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for what in [
        "MPI (mpirun)",
        "tc rate limiting (tbf)",
        "tc delay (netem)",
        "network namespaces",
        "Fashion-MNIST",
    ] {
        assert!(text.contains(what), "{what} missing from:\n{text}");
    }
}

/// Under sudo (SUDO_UID names another user), the driver reads only what
/// that user could read, gives them the files it writes and the
/// directories it makes for them, and refuses a launch whose ranks would
/// run as root unless asked (`--allow-root-ranks`).
#[test]
fn under_sudo_repro_reads_and_writes_as_the_invoking_user() {
    if !as_root() {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let root = temp_out("sudo");
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::create_dir_all(root.join("paper")).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    // the user's own project: they may write there, as the driver does
    // for them
    std::os::unix::fs::chown(&root, Some(65534), Some(65534)).unwrap();
    let secret = root.join("paper/secret.csv");
    std::fs::write(&secret, "algorithm,acc\nd-psgd,1\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        root.join("experiments/tiny.yaml"),
        "name: tiny\ntitle: tiny\nsource: tests\nbackend: sim\nscales: { cpu: {} }\n\
         grid: { algorithm: [d-psgd] }\nparams: { workers: 2, dim: 4, iterations: 5 }\n\
         table: { rows: [algorithm], value: final_loss, paper: { file: paper/secret.csv, \
         keys: { algorithm: algorithm }, value: acc, label: p } }\n",
    )
    .unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("REPRO_TRAIN", train_binary())
            .current_dir(&root)
            .output()
            .unwrap()
    };
    let o = as_nobody(&["run", "tiny", "--scale", "cpu", "--dry-run"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not readable by uid 65534"), "{err}");
    // readable by others: the run goes, and what it made is the user's
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = as_nobody(&["run", "tiny", "--scale", "cpu"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for made in [
        "runs",
        "runs/tiny",
        "runs/tiny/cpu",
        "runs/tiny/cpu/latest",
        "runs/tiny/cpu/latest/runs.csv",
        "runs/tiny/cpu/latest/table.md",
    ] {
        let uid = std::fs::metadata(root.join(made)).unwrap().uid();
        assert_eq!(uid, 65534, "{made}");
    }
    // a hostfile launch would run the ranks as root: refused unless asked
    let hosts = root.join("hosts");
    std::fs::write(&hosts, "localhost slots=3\n").unwrap();
    let o = as_nobody(&[
        "run",
        "mpi-smoke",
        "--project",
        env!("CARGO_MANIFEST_DIR"),
        "--hostfile",
        hosts.to_str().unwrap(),
        "--dry-run",
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("would run as root") && err.contains("--allow-root-ranks"),
        "{err}"
    );
    let o = as_nobody(&[
        "run",
        "mpi-smoke",
        "--project",
        env!("CARGO_MANIFEST_DIR"),
        "--hostfile",
        hosts.to_str().unwrap(),
        "--dry-run",
        "--allow-root-ranks",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&root);
}

/// Under sudo (SUDO_UID names an unprivileged user), the driver writes as
/// that user: links the user planted where a run, an export and `data
/// fetch` write lead nowhere the user could not write themselves. Every
/// planted link's target, a root-only file or directory, stays untouched,
/// and what was written belongs to the user.
#[test]
fn under_sudo_a_planted_link_never_leads_a_write() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
    if !as_root() {
        return;
    }
    let nobody = 65534;
    let root = temp_out("planted");
    let user = root.join("user");
    let secret = root.join("secret");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret_file = secret.join("file");
    std::fs::write(&secret_file, "root's\n").unwrap();
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&user, Some(nobody), Some(nobody)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(args)
            .env("SUDO_UID", nobody.to_string())
            .env("SUDO_GID", nobody.to_string())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let plant = |at: &Path, to: &Path| {
        symlink(to, at).unwrap();
        std::os::unix::fs::lchown(at, Some(nobody), Some(nobody)).unwrap();
    };
    let untouched = |what: &str| {
        assert_eq!(
            std::fs::read_to_string(&secret_file).unwrap(),
            "root's\n",
            "{what}"
        );
        let names: Vec<_> = std::fs::read_dir(&secret).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{what} wrote into the root-only directory");
    };
    // a run: its final files are links to the root-only file, raw/ a link
    // to the root-only directory
    let out = user.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(nobody), Some(nobody)).unwrap();
    // runs.csv first: read as the user, the link reads nothing
    plant(&out.join("runs.csv"), &secret_file);
    let o = as_nobody(&["run", "smoke", "--out", out.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(said.contains("Permission denied"), "{said}");
    untouched(&format!("repro run: {said}"));
    std::fs::remove_file(out.join("runs.csv")).unwrap();
    for f in ["runs.parquet", "table.md", "provenance.json", "curves.csv"] {
        plant(&out.join(f), &secret_file);
    }
    plant(&out.join("raw"), &secret);
    let o = as_nobody(&["run", "smoke", "--out", out.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    untouched(&format!("repro run: {said}"));
    // raw/ led nowhere: the runs failed (as the user, permission
    // denied), and runs.csv says so
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("Permission denied"), "{said}");
    let m = std::fs::symlink_metadata(out.join("runs.csv")).unwrap();
    assert!(m.is_file() && m.uid() == nobody);
    // with raw/ its own: the run succeeds, every file the user's
    std::fs::remove_file(out.join("raw")).unwrap();
    let o = as_nobody(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    untouched("the second run");
    for f in ["runs.parquet", "table.md", "provenance.json", "curves.csv"] {
        let m = std::fs::symlink_metadata(out.join(f)).unwrap();
        assert!(m.is_file(), "{f} is still a link");
    }
    let mut stack = vec![out.clone()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(m.uid(), nobody, "{} is not the user's", p.display());
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        }
    }
    // an export whose target is planted as a link
    let to = user.join("export");
    std::fs::create_dir_all(&to).unwrap();
    std::os::unix::fs::chown(&to, Some(nobody), Some(nobody)).unwrap();
    plant(&to.join("0"), &secret);
    plant(&to.join("meta.yaml"), &secret_file);
    let o = as_nobody(&[
        "export",
        "mlflow",
        "smoke",
        "--out",
        out.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    untouched(&format!("repro export: {said}"));
    // a generated data set whose batch is planted as a link
    let data = user.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::chown(&data, Some(nobody), Some(nobody)).unwrap();
    plant(&data.join("data_batch_1.bin"), &secret_file);
    let o = as_nobody(&[
        "data",
        "fetch",
        "cifar10-like",
        "--dir",
        data.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{said}");
    untouched("repro data fetch");
    let batch = std::fs::symlink_metadata(data.join("data_batch_1.bin")).unwrap();
    assert!(batch.is_file() && batch.uid() == nobody);
    // a directory the user cannot write is refused, not written as root
    let o = as_nobody(&[
        "run",
        "smoke",
        "--out",
        secret.join("out").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    untouched("a run into the root-only directory");
    let _ = std::fs::remove_dir_all(&root);
}

/// A `REPRO_CODEC_SIMD` that is no level is refused before anything runs,
/// naming the levels, by the driver and by the trainer; a level is taken.
#[test]
fn an_unknown_simd_cap_is_refused_with_the_accepted_levels() {
    let o = repro_cmd(&["list"])
        .env("REPRO_CODEC_SIMD", "AVX2")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("REPRO_CODEC_SIMD=\"AVX2\"") && err.contains("baseline, avx2 or avx512"),
        "{err}"
    );
    let o = repro_cmd(&["list"])
        .env("REPRO_CODEC_SIMD", "avx2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(train_binary())
        .args(["--config", "/nonexistent.json", "--log-dir", "/nonexistent"])
        .env("REPRO_CODEC_SIMD", "sse")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("baseline, avx2 or avx512"), "{err}");
}
