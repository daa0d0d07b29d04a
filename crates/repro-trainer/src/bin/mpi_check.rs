//! `repro-mpi-check`: a self-test of the MPI transport with real ranks.
//!
//!     mpirun --allow-run-as-root --oversubscribe -np 4 repro-mpi-check
//!
//! Every rank builds a model close to its neighbours', sends its Moniqua frame
//! around a ring, recovers the neighbours' models and checks them against
//! Lemma 2's bound and the hash; then checks all-reduce and all-gather.
//! `REPRO_MPI_CHECK_PANIC_RANK=r` makes rank `r` panic first, to check that
//! the whole job aborts instead of hanging.

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
