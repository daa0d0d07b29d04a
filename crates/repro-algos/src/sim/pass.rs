//! A pass over the model in blocks: each worker's lane of frames, the
//! inbox a block decodes, and the thread pool the passes run on.

use super::*;

/// Coordinates per block when workers run their iteration a block at a
/// time: the block's step and two dither tables (96 KiB) stay in the core's
/// L2 cache while every worker of a thread takes its turn (measured at
/// n = 1024, d = 100k: 1024 to 16384 within 10%, larger faster: fewer calls).
pub(super) const BLOCK: usize = 8192;

/// What one fused pass over the workers shares.
pub(super) struct Pass<'a> {
    pub(super) k: u64,
    pub(super) objective: &'a dyn Objective,
    /// Set where the workers may run a block at a time.
    pub(super) separable: Option<&'a dyn Separable>,
    /// Coordinates per block (a multiple of 64).
    pub(super) block: usize,
    pub(super) lr: f32,
    pub(super) sgd: Sgd,
    pub(super) topology: &'a Topology,
    pub(super) frames: &'a [Vec<u8>],
    /// Every worker's model, as a prefetch hint.
    pub(super) models: &'a [Prefetch],
    pub(super) presend: bool,
}

impl Pass<'_> {
    /// Workers `base..base + group.len()`, in order: those that can a
    /// block at a time, interleaved block by block (one dither table per
    /// block for all of them), the others each in one pass. The sampled
    /// losses and counts, in worker order.
    pub(super) fn group(
        &self,
        base: usize,
        group: &mut [Lane],
    ) -> Result<Vec<(f64, Received)>, AlgoError> {
        let inboxes: Vec<Vec<(usize, &[u8])>> = group
            .iter()
            .enumerate()
            .map(|(li, lane)| inbox(lane.worker.pattern(), base + li, self.topology, self.frames))
            .collect();
        let mut on = vec![false; group.len()];
        let mut out = vec![None; group.len()];
        if let Some(sep) = self.separable {
            for ((lane, inbox), on) in group.iter_mut().zip(&inboxes).zip(&mut on) {
                if let Some(b) = lane.worker.blockwise() {
                    *on = b.begin(self.k, inbox, self.presend.then_some(&mut lane.next))?;
                }
            }
            if on.contains(&true) {
                self.blocks(base, group, &inboxes, &on, sep, &mut out)?;
            }
        }
        for (li, lane) in group.iter_mut().enumerate() {
            if !on[li] {
                out[li] = Some(self.whole(base + li, lane, &inboxes[li])?);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The workers marked `on`, block by block.
    // Long on purpose: the block-major interleave: the loops over blocks and workers
    // share the dither tables and the prefetch state.
    pub(super) fn blocks(
        &self,
        base: usize,
        group: &mut [Lane],
        inboxes: &[Vec<(usize, &[u8])>],
        on: &[bool],
        sep: &dyn Separable,
        out: &mut [Option<(f64, Received)>],
    ) -> Result<(), AlgoError> {
        let d = self.objective.dim();
        let (k, lr, sgd) = (self.k, self.lr, self.sgd);
        let mut losses = vec![[0.0f32; LOSS_LANES]; group.len()];
        let mut tables = [DitherTable::default(), DitherTable::default()];
        let block = self.block;
        let mut scratch = vec![0.0f32; block];
        let first = on.iter().position(|&o| o).unwrap_or(0);
        let plain = sgd.momentum == 0.0 && sgd.weight_decay == 0.0;
        for at in (0..d).step_by(block) {
            let m = block.min(d - at);
            if let Some(b) = group[first].worker.blockwise() {
                b.fill_dither(k, at, m, &mut tables);
            }
            for (li, lane) in group.iter_mut().enumerate() {
                if !on[li] {
                    continue;
                }
                let i = base + li;
                // what this thread reads next: the next worker's block, or
                // after the last one, the first one's next block
                let hint = match self.models.get(i + 1).filter(|_| li + 1 < on.len()) {
                    Some(next) => next.skip(4 * at),
                    None => self.models[base].skip(4 * (at + m)),
                };
                let Lane {
                    worker,
                    rng,
                    momentum,
                    next,
                    ..
                } = lane;
                let lanes = &mut losses[li];
                let mut local_step = |x: &[f32], delta: &mut [f32]| {
                    if plain {
                        return sep.step_block(i, at, x, rng, lr, delta, lanes);
                    }
                    sep.gradient_block(i, at, x, rng, delta, lanes);
                    let m: &mut [f32] = if momentum.is_empty() {
                        &mut []
                    } else {
                        &mut momentum[at..at + x.len()]
                    };
                    sgd.step_in_place(lr, x, delta, m);
                };
                if let Some(b) = worker.blockwise() {
                    let next = self.presend.then_some(next);
                    b.block(
                        k,
                        &inboxes[li],
                        at,
                        m,
                        &mut local_step,
                        &mut scratch,
                        &tables,
                        next,
                        hint,
                    )?;
                }
            }
        }
        for (li, lane) in group.iter_mut().enumerate() {
            if !on[li] {
                continue;
            }
            let Some(b) = lane.worker.blockwise() else {
                continue;
            };
            let (received, sent) = b.finish(k, self.presend.then_some(&mut lane.next))?;
            lane.next_sent = self.presend && sent;
            out[li] = Some((sep.block_loss(&losses[li]), received));
        }
        Ok(())
    }

    /// Worker `i` in one pass: gradient, step, receive, and the next frame.
    pub(super) fn whole(
        &self,
        i: usize,
        lane: &mut Lane,
        inbox: &[(usize, &[u8])],
    ) -> Result<(f64, Received), AlgoError> {
        let (k, lr, sgd) = (self.k, self.lr, self.sgd);
        if let Some(&next) = self.models.get(i + 1) {
            lane.worker.prefetch_next(next);
        }
        scratch::with_vectors(self.objective.dim(), |[delta]| {
            let x = lane.worker.model();
            let loss = self.objective.gradient(i, x, &mut lane.rng, delta);
            sgd.step_in_place(lr, x, delta, &mut lane.momentum);
            let received = lane.worker.receive(k, delta, inbox)?;
            // a failure here (a diverged model) is reported by the
            // next step, which sends again
            lane.next_sent = self.presend && lane.worker.send(k + 1, &[], &mut lane.next).is_ok();
            Ok((loss, received))
        })
    }
}

/// One worker and what the simulator keeps for it.
pub(super) struct Lane {
    pub(super) worker: Box<dyn Worker>,
    pub(super) rng: Rng,
    pub(super) momentum: Vec<f32>,
    /// The gradient, turned into the step in place (unfused mode).
    pub(super) delta: Vec<f32>,
    /// Fused mode: the next iteration's frame, sent early.
    pub(super) next: Vec<u8>,
    pub(super) next_sent: bool,
}

/// The frames worker `i` receives: its neighbours', or every other worker's
/// for a collective.
pub(super) fn inbox<'f>(
    pattern: Pattern,
    i: usize,
    topology: &Topology,
    frames: &'f [Vec<u8>],
) -> Vec<(usize, &'f [u8])> {
    match pattern {
        Pattern::Gossip => topology
            .neighbours(i)
            .iter()
            .map(|&(j, _)| (j, frames[j].as_slice()))
            .collect(),
        Pattern::AllReduce | Pattern::AllGather => (0..frames.len())
            .filter(|&j| j != i)
            .map(|j| (j, frames[j].as_slice()))
            .collect(),
    }
}

/// A pool of `threads` threads, or none for one thread. One pool per
/// thread count for the whole process, started the first time it is asked
/// for and shared by every simulator after it: starting threads is a fixed
/// cost a short run notices, and simulators running at once (`--jobs`,
/// tests) share the cores anyway. Results never depend on the pool.
pub(super) fn thread_pool(threads: usize) -> Result<Option<Arc<rayon::ThreadPool>>, AlgoError> {
    static POOLS: Mutex<Vec<Arc<rayon::ThreadPool>>> = Mutex::new(Vec::new());
    if threads <= 1 {
        return Ok(None);
    }
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pool) = pools.iter().find(|p| p.current_num_threads() == threads) {
        return Ok(Some(Arc::clone(pool)));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("repro-sim-{i}"))
        .build()
        .map_err(|e| AlgoError::Invalid(format!("could not start the simulator's threads: {e}")))?;
    let pool = Arc::new(pool);
    pools.push(Arc::clone(&pool));
    Ok(Some(pool))
}

/// `f(i, &mut items[i])` for every item, on the pool's threads if there is
/// one, results in item order; the first error (in item order) wins.
pub(super) fn par_map<T: Send, R: Send>(
    pool: Option<&rayon::ThreadPool>,
    items: &mut [T],
    f: impl Fn(usize, &mut T) -> Result<R, AlgoError> + Sync,
) -> Result<Vec<R>, AlgoError> {
    use rayon::prelude::*;
    match pool {
        Some(pool) if items.len() > 1 => {
            let results: Vec<Result<R, AlgoError>> = pool.install(|| {
                items
                    .par_iter_mut()
                    .enumerate()
                    .map(|(i, t)| f(i, t))
                    .collect()
            });
            results.into_iter().collect()
        }
        _ => items.iter_mut().enumerate().map(|(i, t)| f(i, t)).collect(),
    }
}
