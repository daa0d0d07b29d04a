//! `repro submit`: the Slurm scripts a plan asks for, and values that never
//! run in them.

use super::*;

/// Paper scale on a cluster, as a dry run: the exact launch with a hostfile
/// or srun, the paper's hyper-parameters, and in hosts mode netem on every
/// node's interface applied before and removed after each run.
#[test]
fn paper_scale_dry_runs_print_the_cluster_launch() {
    let dir = temp_out("hostfile");
    std::fs::create_dir_all(&dir).unwrap();
    let hostfile = dir.join("hosts");
    std::fs::write(&hostfile, "node1 slots=1\nnode2 slots=1\n").unwrap();
    let hf = hostfile.to_str().unwrap();
    let o = repro(&[
        "run",
        "table2",
        "--scale",
        "paper",
        "--dry-run",
        "--hostfile",
        hf,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    // the tuning's first look (twelve configurations of each of eight
    // methods at two bit widths, on two seeds, as at cpu scale), then
    // three seeds of the grid
    assert!(text.contains("tuning: 384 runs"), "{text}");
    assert!(text.contains("the grid's 72 runs"), "{text}");
    for p in [
        "model=\"resnet20\"",
        "dataset=\"cifar10\"",
        "batch=128",
        "milestones=[80.0,120.0]",
        "schedule=\"step\"",
        "topology=\"ring\"",
        "workers=8",
    ] {
        assert!(text.contains(p), "{p} missing:\n{text}");
    }
    assert!(text.contains("mpirun -np 8 --hostfile"), "{text}");
    assert!(!text.contains("--oversubscribe"), "{text}");
    // figure1 shapes the network: with a cluster launcher, hosts mode
    let o = repro(&[
        "run",
        "figure1",
        "--scale",
        "paper",
        "--dry-run",
        "--launcher",
        "srun",
        "--interface",
        "eth0",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("srun --ntasks-per-node=1 --kill-on-bad-exit=1 /")
            && text.contains(
                " net node up --interface eth0 --rate-bps 1000000 --latency-us 1000 --qdisc htb-ack"
            ),
        "{text}"
    );
    assert!(text.contains(" net node probe --interface eth0"), "{text}");
    assert!(
        text.contains("srun --ntasks=8 --kill-on-bad-exit=1"),
        "{text}"
    );
    assert!(text.contains(" net node down --interface eth0"), "{text}");
    // runs at once would shape the same interfaces: refused before any run
    refused(
        &[
            "run",
            "figure1",
            "--hostfile",
            hf,
            "--interface",
            "eth0",
            "--jobs",
            "2",
        ],
        "pass --jobs 1",
    );
    // no interface: refused, saying which flag to pass
    refused(
        &[
            "run",
            "figure1",
            "--scale",
            "paper",
            "--dry-run",
            "--launcher",
            "srun",
        ],
        "--interface",
    );
    refused(
        &[
            "run",
            "table2",
            "--scale",
            "paper",
            "--dry-run",
            "--hostfile",
            "/nonexistent/h",
        ],
        "hostfile /nonexistent/h not found",
    );
}

/// What `repro submit` writes into a script cannot run anything: a line
/// break in --time, --partition, --out or --set is refused before any
/// script is written; quotes, `$(...)` and backquotes in --out and --set
/// reach the job's `repro run` whole. Each generated script (the job
/// array's and the job's) is run by bash with a recorder in place of
/// repro, and nothing else runs.
#[test]
fn hostile_values_never_run_in_a_submitted_script() {
    let dir = temp_out("submit-hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let pwned = dir.join("PWNED");
    let p = pwned.to_str().unwrap();
    for (flag, value, why) in [
        (
            "--time",
            format!("01:00:00\ntouch {p}"),
            "is not a Slurm time",
        ),
        (
            "--partition",
            format!("debug\ntouch {p} #"),
            "is not a partition's name",
        ),
        (
            "--out",
            format!("{}/x\ntouch {p}", dir.display()),
            "holds a control character",
        ),
        (
            "--set",
            format!("title=x\ntouch {p}"),
            "holds a control character",
        ),
        ("--time", format!("$(touch {p})"), "is not a Slurm time"),
    ] {
        let o = repro(&["submit", "mpi-smoke", flag, &value, "--dry-run"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flag}: {err}");
        assert!(err.contains(why), "{flag}: {err}");
        assert!(o.stdout.is_empty(), "{flag}: a script was printed");
    }
    let out = dir.join(format!("it's $(touch {p}) `touch {p}`;x"));
    let set = format!("title=it's $(touch {p}) `touch {p}`");
    let o = repro(&[
        "submit",
        "mpi-smoke",
        "--out",
        out.to_str().unwrap(),
        "--set",
        &set,
        "--time",
        "2-00:00:00",
        "--partition",
        "gpu,debug",
        "--array",
        "2",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout).to_string();
    let recorder = dir.join("recorder");
    let said = dir.join("said");
    std::fs::write(
        &recorder,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '{}'\n",
            said.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&recorder, std::fs::Permissions::from_mode(0o755)).unwrap();
    let scripts: Vec<&str> = printed.split("\n#!/bin/bash\n").collect();
    assert_eq!(scripts.len(), 2, "{printed}");
    for script in scripts {
        // the job's repro is the first word of its run line
        let line = script
            .lines()
            .find(|l| l.contains(" run mpi-smoke "))
            .unwrap_or_else(|| panic!("no run line in {script}"));
        let exe = line.split(' ').next().unwrap();
        let script = script.replace(exe, recorder.to_str().unwrap());
        std::fs::create_dir_all(out.join("chunks")).unwrap();
        let o = Command::new("bash")
            .arg("-c")
            .arg(script.trim_start_matches("#!/bin/bash\n"))
            .env("SLURM_JOB_ID", "7")
            .env("SLURM_ARRAY_JOB_ID", "6")
            .env("SLURM_ARRAY_TASK_ID", "1")
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(!pwned.exists(), "a value in the script ran");
    let args = std::fs::read_to_string(&said).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert!(args.contains(&set.as_str()), "{args:?}");
    assert!(args.contains(&out.to_str().unwrap()), "{args:?}");
    assert!(
        args.contains(&format!("{}/chunks/1", out.display()).as_str()),
        "{args:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `repro submit --dry-run` prints the batch script a cluster user would
/// submit: the tasks and the time come from the plan, tuning runs
/// included (the most workers of a run; twice the manifest's estimate
/// plus 10 minutes, at most every run's timeout added up plus a tenth and
/// 5 minutes), GPUs and partition from the command line, and the job
/// resumes into its run directory through srun (or mpirun).
#[test]
fn a_submitted_script_asks_for_what_the_plan_needs() {
    // the plan's runs, the tuning runs first, and the manifest's estimate;
    // the final runs' settings wait for the tuning, their count does not
    let plan = repro_json(&["run", "table2", "--scale", "paper", "--dry-run", "--json"]);
    let tuning = plan["tuning_runs"].as_array().unwrap();
    let runs = tuning.len() + plan["runs"].as_array().unwrap().len();
    assert!(runs > 100, "{runs}");
    let tasks = tuning
        .iter()
        .map(|r| r["params"]["workers"].as_u64().unwrap())
        .max()
        .unwrap();
    let total: u64 = tuning
        .iter()
        .map(|r| r["timeout_s"].as_u64().unwrap())
        .sum();
    let list = repro_json(&["list", "--json"]);
    let table2 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "table2")
        .unwrap();
    let estimate = table2["scales"]["paper"]["cost_s"].as_f64().unwrap();
    let seconds = (2.0 * estimate) as u64 + 600;
    // the tuning runs' timeouts alone allow more
    assert!(seconds < total + total / 10 + 300);
    let d_hms = |s: u64| {
        format!(
            "{}-{:02}:{:02}:{:02}",
            s / 86_400,
            s % 86_400 / 3600,
            s % 3600 / 60,
            s % 60
        )
    };
    let o = repro(&[
        "submit",
        "table2",
        "--scale",
        "paper",
        "--partition",
        "gpu",
        "--gpus-per-task",
        "1",
        "--dry-run",
    ]);
    let script = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = [
        format!("#SBATCH --ntasks={tasks}\n"),
        "#SBATCH --gpus-per-task=1\n".to_string(),
        "#SBATCH --partition=gpu\n".to_string(),
        format!("#SBATCH --time={}\n", d_hms(seconds)),
        "#SBATCH --export=ALL\n".to_string(),
        format!("{runs} runs' timeouts would allow "),
    ];
    for w in &want {
        assert!(script.contains(w.as_str()), "{w:?} not in:\n{script}");
    }
    assert!(script.starts_with("#!/bin/bash\n"), "{script}");
    assert!(
        script.contains(" run table2 --scale paper --launcher srun --resume --out /")
            && script.contains("Z &\n"),
        "{script}"
    );
    // repro run's exit status is kept for when Slurm forgets the job
    assert!(
        script.contains("slurm-\"$SLURM_JOB_ID\".exit\nexit \"$rc\"\n"),
        "{script}"
    );
    // a shaped experiment names the nodes' interface, at submit time
    refused(
        &["submit", "figure1", "--scale", "paper", "--dry-run"],
        "needs `--interface IFACE`",
    );
    // no total estimate: every run's timeout, and a warning past 7 days
    let o = repro(&[
        "submit",
        "figure1",
        "--scale",
        "paper",
        "--interface",
        "eth0",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan = repro_json(&["run", "figure1", "--scale", "paper", "--dry-run", "--json"]);
    let total: u64 = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["timeout_s"].as_u64().unwrap())
        .sum();
    let limit = total + total / 10 + 300;
    let script = String::from_utf8_lossy(&o.stdout);
    assert!(
        script.contains(&format!("#SBATCH --time={}\n", d_hms(limit)))
            && script.contains(" --interface eth0 --launcher srun "),
        "{script}"
    );
    assert!(limit > 7 * 86_400);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("set --time"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // mpirun inside the allocation, for a site whose MPI wants it
    let o = repro(&["submit", "mpi-smoke", "--launcher", "mpirun", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(" --launcher mpirun --resume --out /"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // a simulator experiment starts no ranks: refused
    let o = repro(&["submit", "smoke", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    // --resume needs a directory `repro submit` wrote
    refused(
        &["submit", "--resume", "/nonexistent-run-dir"],
        "has no readable submit.sbatch",
    );
}
