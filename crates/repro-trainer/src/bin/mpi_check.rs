//! `repro-mpi-check`: a self-test of the MPI transport with real ranks.
//!
//!     mpirun --allow-run-as-root --oversubscribe -np 4 repro-mpi-check
//!
//! Every rank builds a model close to its neighbours', sends its Moniqua frame
//! around a ring, recovers the neighbours' models and checks them against
//! Lemma 2's bound and the hash; then checks all-reduce and all-gather.
//! `REPRO_MPI_CHECK_PANIC_RANK=r` makes rank `r` panic first, to check that
//! the whole job aborts instead of hanging.
//!
//!     mpirun ... -np 4 repro-mpi-check --gpus 2
//!
//! checks the rank-to-GPU mapping instead, as if each node had that many
//! GPUs: every rank's local rank from the launcher's variables agrees with
//! MPI's own count of the ranks sharing its node, the local ranks on a
//! node are 0..k, and each rank would train on CUDA device `local % gpus`.

use std::process::ExitCode;

use repro_codec::{MoniquaCodec, MoniquaConfig, Verification};
use repro_trainer::transport::{MpiTransport, Transport, abort_on_panic};

fn model(rank: usize, d: usize) -> Vec<f32> {
    (0..d)
        .map(|i| ((i as f32) * 0.01).sin() + 0.05 * rank as f32)
        .collect()
}

// Long on purpose: a check binary: the sequence of MPI checks, read top to bottom.
fn main() -> ExitCode {
    let mut t = match MpiTransport::init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("repro-mpi-check: {e}");
            return ExitCode::from(1);
        }
    };
    abort_on_panic();
    let args: Vec<String> = std::env::args().collect();
    if let Some(gpus) = args
        .iter()
        .position(|a| a == "--gpus")
        .and_then(|i| args.get(i + 1)?.parse::<usize>().ok())
    {
        return gpu_map(&mut t, gpus);
    }
    let (rank, size) = (t.rank(), t.size());
    if std::env::var("REPRO_MPI_CHECK_PANIC_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        == Some(rank)
    {
        panic!("injected panic on rank {rank}");
    }
    let d = 10_000;
    let x = model(rank, d);
    let codec = MoniquaCodec::new(
        &MoniquaConfig {
            bits: 8,
            theta: 1.0,
            ..MoniquaConfig::default()
        },
        7,
    )
    .expect("codec");
    let mut frame = Vec::new();
    codec
        .encode(&x, 0, rank as u32, None, &mut frame)
        .expect("encode");
    let mut neighbours: Vec<usize> = [(rank + size - 1) % size, (rank + 1) % size]
        .into_iter()
        .filter(|&r| r != rank)
        .collect();
    neighbours.sort_unstable();
    neighbours.dedup();
    let frames = t
        .exchange(&neighbours, &frame, &neighbours)
        .expect("exchange");
    let mut recovered = vec![0f32; d];
    for (&j, f) in neighbours.iter().zip(&frames) {
        let dec = codec
            .decode(f, &x, repro_codec::DecodeTarget::Out(&mut recovered))
            .expect("decode");
        assert_eq!(dec.header.sender as usize, j, "frame from the wrong rank");
        assert_eq!(
            dec.verification,
            Verification::Verified,
            "rank {rank}: recovery of {j} failed the hash"
        );
        let truth = model(j, d);
        let worst = truth
            .iter()
            .zip(&recovered)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            f64::from(worst) <= codec.error_bound() + 1e-6,
            "rank {rank}: error {worst} from {j}"
        );
    }
    let mut sum = vec![rank as f32; 5];
    t.all_reduce_sum(&mut sum).expect("all-reduce");
    let want = (size * (size - 1) / 2) as f32;
    assert!(
        sum.iter().all(|&v| v == want),
        "all-reduce gave {sum:?}, expected {want}"
    );
    let gathered = t
        .all_gather(&vec![rank as u8; rank + 1])
        .expect("all-gather");
    for (r, g) in gathered.iter().enumerate() {
        assert_eq!(g, &vec![r as u8; r + 1], "all-gather from {r}");
    }
    println!(
        "rank {rank}/{size}: ok ({} neighbours, {} bytes per frame)",
        neighbours.len(),
        frame.len()
    );
    ExitCode::SUCCESS
}

/// The `--gpus` check (see the module docs).
fn gpu_map(t: &mut MpiTransport, gpus: usize) -> ExitCode {
    let (launcher, node) = t.local_ranks();
    let (rank, local) = (t.rank(), t.local_rank());
    let from = match launcher {
        Some((l, var)) => {
            assert_eq!(
                l, node,
                "rank {rank}: {var} says local rank {l}, MPI counts {node} on this node"
            );
            var
        }
        None => "no launcher variable; MPI's count",
    };
    assert_eq!(local, node, "rank {rank}: the transport's local rank");
    let plan = repro_trainer::plan_device(local, gpus, repro_runlog::DeviceChoice::Cuda)
        .expect("a device with GPUs");
    let device = repro_trainer::device_name(plan.device);
    assert_eq!(device, format!("cuda:{}", local % gpus.max(1)));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mine = format!("{}\t{local}", host.trim());
    let all = t.all_gather(mine.as_bytes()).expect("all-gather");
    let mut by_host: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for f in &all {
        let text = String::from_utf8_lossy(f);
        let (h, l) = text.split_once('\t').expect("host and local rank");
        by_host
            .entry(h.into())
            .or_default()
            .push(l.parse().expect("a number"));
    }
    for (h, mut locals) in by_host {
        locals.sort_unstable();
        assert_eq!(
            locals,
            (0..locals.len()).collect::<Vec<_>>(),
            "the local ranks on {h} are not 0..k"
        );
    }
    println!(
        "rank {rank}/{}: local rank {local} ({from}) -> {device}",
        t.size()
    );
    ExitCode::SUCCESS
}
