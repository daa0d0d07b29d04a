//! Convex objectives on data: least squares and logistic regression over a
//! sparse dataset (LIBSVM format, the format of the standard convex
//! benchmarks such as epsilon and rcv1, or generated), split across workers
//! iid or sorted by label.

use std::io::{BufRead, Read};

use thiserror::Error;

use crate::objective::Objective;
use crate::rng::Rng;

/// A dataset that could not be read.
#[derive(Debug, Error)]
pub enum DataError {
    #[error("could not read the dataset")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {reason}")]
    Parse { line: usize, reason: String },
    #[error("the dataset has no samples")]
    Empty,
    #[error("{workers} workers but only {samples} samples; every worker needs at least one")]
    TooFewSamples { workers: usize, samples: usize },
    #[error(
        "logistic regression needs two classes; the labels start {found} (a multi-class set needs a one-vs-rest file)"
    )]
    Labels { found: String },
}

/// Sparse samples in compressed-row form, with one label each.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    indptr: Vec<usize>,
    indices: Vec<u32>,
    values: Vec<f32>,
    labels: Vec<f32>,
    dim: usize,
}

/// The longest line of LIBSVM text read, bytes.
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// The most LIBSVM text read from one file (after decompression), bytes.
pub const MAX_TEXT_BYTES: u64 = 16 << 30;
/// The largest feature index accepted (a model of this many f32 is 512 MB).
pub const MAX_FEATURES: usize = 1 << 27;

/// A LIBSVM line's label: a finite number, else why not.
fn parse_label(label: &str) -> Result<f32, String> {
    match label.parse::<f32>() {
        Ok(l) if l.is_finite() => Ok(l),
        Ok(_) => Err(format!("label `{label}` is not finite")),
        Err(_) => Err(format!("label `{label}` is not a number")),
    }
}

impl Dataset {
    /// Reads LIBSVM text: `label index:value index:value ...` per line, indices
    /// starting at 1. Blank lines and `#` comments are skipped.
    ///
    /// Hostile input is an error, never an abort: a line longer than
    /// [`MAX_LINE_BYTES`] (a decompression bomb without newlines), text
    /// beyond [`MAX_TEXT_BYTES`], or an index beyond [`MAX_FEATURES`].
    pub fn read_libsvm(mut reader: impl BufRead) -> Result<Self, DataError> {
        let mut ds = Dataset {
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
            labels: Vec::new(),
            dim: 0,
        };
        let mut buf = Vec::new();
        let mut total = 0u64;
        for number in 0.. {
            buf.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            let too = |reason: String| DataError::Parse {
                line: number + 1,
                reason,
            };
            if buf.len() > MAX_LINE_BYTES {
                return Err(too(format!(
                    "longer than {MAX_LINE_BYTES} bytes; not LIBSVM text (a decompression bomb?)"
                )));
            }
            if total > MAX_TEXT_BYTES {
                return Err(too(format!(
                    "the text passes {MAX_TEXT_BYTES} bytes, the most a data file may hold"
                )));
            }
            let line = std::str::from_utf8(&buf).map_err(|_| too("not UTF-8 text".into()))?;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| DataError::Parse {
                line: number + 1,
                reason,
            };
            let mut parts = line.split_whitespace();
            let label = parse_label(parts.next().unwrap_or("")).map_err(bad)?;
            for item in parts {
                let (i, v) = item
                    .split_once(':')
                    .ok_or_else(|| bad(format!("`{item}` is not `index:value`")))?;
                let i: u32 = i
                    .parse()
                    .map_err(|_| bad(format!("index `{i}` is not a positive integer")))?;
                if i == 0 {
                    return Err(bad("indices start at 1".into()));
                }
                if i as usize > MAX_FEATURES {
                    return Err(bad(format!(
                        "index {i} is beyond the limit of {MAX_FEATURES} features"
                    )));
                }
                let value: f32 = v
                    .parse()
                    .map_err(|_| bad(format!("value `{v}` is not a number")))?;
                if !value.is_finite() {
                    return Err(bad(format!("value `{v}` is not finite")));
                }
                ds.indices.push(i - 1);
                ds.values.push(value);
                ds.dim = ds.dim.max(i as usize);
            }
            ds.labels.push(label);
            ds.indptr.push(ds.indices.len());
        }
        if ds.labels.is_empty() {
            return Err(DataError::Empty);
        }
        Ok(ds)
    }

    /// Dense samples `x ~ N(0, I)` with a planted model `w ~ N(0, I / dim)`:
    /// labels `x.w + noise` (regression) or `sign(x.w + noise)` (classification).
    pub fn generate(
        samples: usize,
        dim: usize,
        noise: f32,
        classification: bool,
        seed: u64,
    ) -> Self {
        let mut rng = Rng::new(seed, 77);
        let w: Vec<f32> = (0..dim)
            .map(|_| rng.normal() as f32 / (dim as f32).sqrt())
            .collect();
        let mut ds = Dataset {
            indptr: vec![0],
            indices: Vec::with_capacity(samples * dim),
            values: Vec::with_capacity(samples * dim),
            labels: Vec::with_capacity(samples),
            dim,
        };
        for _ in 0..samples {
            let mut dot = 0.0f32;
            for (j, &wj) in w.iter().enumerate() {
                let v = rng.normal() as f32;
                dot += v * wj;
                ds.indices.push(j as u32);
                ds.values.push(v);
            }
            let y = dot + noise * rng.normal() as f32;
            ds.labels.push(if classification {
                if y >= 0.0 { 1.0 } else { -1.0 }
            } else {
                y
            });
            ds.indptr.push(ds.indices.len());
        }
        ds
    }

    /// Writes the set as LIBSVM text, one sample per line, every stored
    /// value in the shortest form that reads back to the same f32 (so
    /// [`Dataset::read_libsvm`] returns this set exactly when its last
    /// feature is stored in some sample).
    pub fn write_libsvm(&self, mut w: impl std::io::Write) -> std::io::Result<()> {
        let mut line = String::new();
        for s in 0..self.len() {
            use std::fmt::Write as _;
            line.clear();
            let _ = write!(line, "{}", self.labels[s]);
            let (idx, val) = self.row(s);
            for (&i, &v) in idx.iter().zip(val) {
                let _ = write!(line, " {}:{v}", i + 1);
            }
            line.push('\n');
            w.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// Scales every sample to unit Euclidean norm (as LIBSVM's
    /// `epsilon_normalized` is); an all-zero sample stays zero.
    pub fn normalize_rows(&mut self) {
        for s in 0..self.len() {
            let (a, b) = (self.indptr[s], self.indptr[s + 1]);
            let norm = self.values[a..b]
                .iter()
                .map(|&v| f64::from(v).powi(2))
                .sum::<f64>()
                .sqrt();
            if norm > 0.0 {
                self.values[a..b]
                    .iter_mut()
                    .for_each(|v| *v = (f64::from(*v) / norm) as f32);
            }
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Feature dimension (largest index seen).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Label of sample `s`.
    pub fn label(&self, s: usize) -> f32 {
        self.labels[s]
    }

    /// Maps a two-class data set's labels onto {-1, +1}: the smaller label
    /// becomes -1 and the larger +1 (LIBSVM's binary sets use {-1, +1},
    /// {0, 1} or {1, 2}). Returns the two labels as they were; a set with
    /// one label or more than two is refused.
    pub fn binary_labels(&mut self) -> Result<(f32, f32), DataError> {
        let mut seen: Vec<f32> = Vec::new();
        for &l in &self.labels {
            if !seen.contains(&l) {
                seen.push(l);
                if seen.len() > 2 {
                    break;
                }
            }
        }
        seen.sort_by(f32::total_cmp);
        let [low, high] = seen[..] else {
            return Err(DataError::Labels {
                found: seen
                    .iter()
                    .map(|l| l.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        for l in &mut self.labels {
            *l = if *l == low { -1.0 } else { 1.0 };
        }
        Ok((low, high))
    }

    fn row(&self, s: usize) -> (&[u32], &[f32]) {
        let (a, b) = (self.indptr[s], self.indptr[s + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }

    fn dot(&self, s: usize, x: &[f32]) -> f32 {
        let (idx, val) = self.row(s);
        idx.iter().zip(val).map(|(&i, &v)| v * x[i as usize]).sum()
    }

    fn add_scaled(&self, s: usize, c: f32, g: &mut [f32]) {
        let (idx, val) = self.row(s);
        for (&i, &v) in idx.iter().zip(val) {
            g[i as usize] += c * v;
        }
    }
}

/// How samples are dealt to workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// A seeded shuffle, then contiguous equal shares.
    Iid,
    /// Sorted by label, then contiguous shares: workers see different labels.
    SortedByLabel,
    /// The file's order, in contiguous shares.
    FileOrder,
}

/// Sample indices of each worker.
pub fn split(
    ds: &Dataset,
    workers: usize,
    how: Split,
    seed: u64,
) -> Result<Vec<Vec<usize>>, DataError> {
    if ds.len() < workers {
        return Err(DataError::TooFewSamples {
            workers,
            samples: ds.len(),
        });
    }
    let mut order: Vec<usize> = (0..ds.len()).collect();
    match how {
        Split::Iid => {
            let mut rng = Rng::new(seed, 99);
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
        }
        Split::SortedByLabel => {
            order.sort_by(|&a, &b| ds.label(a).total_cmp(&ds.label(b)).then(a.cmp(&b)))
        }
        Split::FileOrder => {}
    }
    let per = ds.len() as f64 / workers as f64;
    Ok((0..workers)
        .map(|w| order[(w as f64 * per) as usize..((w + 1) as f64 * per) as usize].to_vec())
        .collect())
}

/// The loss of a linear model on one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// `(x.w - y)^2 / 2`
    Squares,
    /// `log(1 + exp(-y x.w))`, labels in {-1, +1} (others mapped by sign)
    Logistic,
}

/// A linear model on a dataset split across workers: worker `i` samples
/// minibatches from its shard; `l2` adds `l2 |w|^2 / 2`.
#[derive(Debug, Clone)]
pub struct LinearModel {
    data: Dataset,
    shards: Vec<Vec<usize>>,
    loss: Loss,
    batch: usize,
    l2: f32,
}

impl LinearModel {
    pub fn new(data: Dataset, shards: Vec<Vec<usize>>, loss: Loss, batch: usize, l2: f32) -> Self {
        Self {
            data,
            shards,
            loss,
            batch: batch.max(1),
            l2,
        }
    }

    fn sample_loss_grad(&self, s: usize, x: &[f32], scale: f32, g: Option<&mut [f32]>) -> f64 {
        let z = self.data.dot(s, x);
        let y = self.data.label(s);
        let (loss, slope) = match self.loss {
            Loss::Squares => (0.5 * f64::from(z - y).powi(2), z - y),
            Loss::Logistic => {
                let y = if y > 0.0 { 1.0 } else { -1.0 };
                let m = f64::from(y * z);
                // log(1 + e^-m), stable for both signs
                let loss = if m > 0.0 {
                    (-m).exp().ln_1p()
                } else {
                    -m + m.exp().ln_1p()
                };
                (loss, (-f64::from(y) / (1.0 + m.exp())) as f32)
            }
        };
        if let Some(g) = g {
            self.data.add_scaled(s, scale * slope, g);
        }
        loss
    }
}

impl LinearModel {
    /// `f(x)` and `grad f(x)` (into `g`) on the whole data set, in f64
    /// throughout: what the optimum `f*` is computed with.
    pub fn loss_grad_f64(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let l2 = f64::from(self.l2);
        let mut total = 0.0;
        for (gi, &xi) in g.iter_mut().zip(x) {
            *gi = l2 * xi;
        }
        let n = self.data.len() as f64;
        for s in 0..self.data.len() {
            let (idx, val) = self.data.row(s);
            let z: f64 = idx
                .iter()
                .zip(val)
                .map(|(&i, &v)| f64::from(v) * x[i as usize])
                .sum();
            let y = f64::from(self.data.label(s));
            let (loss, slope) = match self.loss {
                Loss::Squares => (0.5 * (z - y).powi(2), z - y),
                Loss::Logistic => {
                    let y = if y > 0.0 { 1.0 } else { -1.0 };
                    let m = y * z;
                    let loss = if m > 0.0 {
                        (-m).exp().ln_1p()
                    } else {
                        -m + m.exp().ln_1p()
                    };
                    (loss, -y / (1.0 + m.exp()))
                }
            };
            total += loss;
            for (&i, &v) in idx.iter().zip(val) {
                g[i as usize] += slope * f64::from(v) / n;
            }
        }
        total / n + 0.5 * l2 * x.iter().map(|v| v * v).sum::<f64>()
    }
}

impl Objective for LinearModel {
    fn dim(&self) -> usize {
        self.data.dim()
    }

    fn samples(&self) -> Option<usize> {
        Some(self.data.len())
    }

    fn loss_f64(&self, x: &[f32]) -> f64 {
        let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let mut g = vec![0.0; x.len()];
        self.loss_grad_f64(&x, &mut g)
    }

    fn optimum(&self) -> Option<crate::minimize::Minimum> {
        let f = |x: &[f64], g: &mut [f64]| self.loss_grad_f64(x, g);
        Some(crate::minimize::lbfgs(
            f,
            vec![0.0; self.dim()],
            1e-10,
            10_000,
        ))
    }

    fn workers(&self) -> usize {
        self.shards.len()
    }

    fn gradient(&self, worker: usize, x: &[f32], rng: &mut Rng, g: &mut [f32]) -> f64 {
        let shard = &self.shards[worker];
        for (gi, &xi) in g.iter_mut().zip(x) {
            *gi = self.l2 * xi;
        }
        let scale = 1.0 / self.batch as f32;
        let mut loss = 0.0;
        for _ in 0..self.batch {
            let s = shard[rng.below(shard.len())];
            loss += self.sample_loss_grad(s, x, scale, Some(g));
        }
        loss / self.batch as f64
    }

    fn loss(&self, x: &[f32]) -> f64 {
        let reg = 0.5 * f64::from(self.l2) * x.iter().map(|&v| f64::from(v * v)).sum::<f64>();
        (0..self.data.len())
            .map(|s| self.sample_loss_grad(s, x, 0.0, None))
            .sum::<f64>()
            / self.data.len() as f64
            + reg
    }

    fn full_gradient(&self, x: &[f32], g: &mut [f32]) {
        for (gi, &xi) in g.iter_mut().zip(x) {
            *gi = self.l2 * xi;
        }
        let scale = 1.0 / self.data.len() as f32;
        for s in 0..self.data.len() {
            self.sample_loss_grad(s, x, scale, Some(g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# a comment
+1 1:0.5 3:-1.25
-1 2:2e-1

0 3:4 # trailing comment
";

    #[test]
    fn reads_libsvm() {
        let ds = Dataset::read_libsvm(SAMPLE.as_bytes()).unwrap();
        assert_eq!(ds.len(), 3);
        assert_eq!(ds.dim(), 3);
        assert_eq!(ds.row(0), (&[0u32, 2][..], &[0.5f32, -1.25][..]));
        assert_eq!(ds.row(1), (&[1u32][..], &[0.2f32][..]));
        assert_eq!(ds.label(2), 0.0);
        assert_eq!(ds.dot(0, &[2.0, 0.0, 1.0]), -0.25);
    }

    #[test]
    fn written_libsvm_reads_back_exactly() {
        let mut ds = Dataset::generate(40, 7, 0.5, true, 3);
        ds.normalize_rows();
        for s in 0..ds.len() {
            let norm: f64 = ds.row(s).1.iter().map(|&v| f64::from(v).powi(2)).sum();
            assert!((norm - 1.0).abs() < 1e-6, "{norm}");
        }
        let mut text = Vec::new();
        ds.write_libsvm(&mut text).unwrap();
        let back = Dataset::read_libsvm(&text[..]).unwrap();
        assert_eq!(back, ds);
        let first = String::from_utf8(text).unwrap();
        let first = first.lines().next().unwrap();
        assert!(
            first.starts_with("1 1:") || first.starts_with("-1 1:"),
            "{first}"
        );
        assert_eq!(first.split(' ').count(), 8);
        let sparse = Dataset::read_libsvm(SAMPLE.as_bytes()).unwrap();
        let mut text = Vec::new();
        sparse.write_libsvm(&mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "1 1:0.5 3:-1.25\n-1 2:0.2\n0 3:4\n"
        );
    }

    #[test]
    fn libsvm_errors_name_the_line() {
        for (text, want) in [
            ("1 0:1\n", "line 1: indices start at 1"),
            ("1 1:1\nx 1:1\n", "line 2: label `x` is not a number"),
            ("1 1-1\n", "line 1: `1-1` is not `index:value`"),
            ("1 1:nan\n", "line 1: value `nan` is not finite"),
            ("1 1:1\nNaN 1:1\n", "line 2: label `NaN` is not finite"),
        ] {
            let err = Dataset::read_libsvm(text.as_bytes()).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
        assert!(matches!(
            Dataset::read_libsvm("\n# only\n".as_bytes()),
            Err(DataError::Empty)
        ));
    }

    #[test]
    fn splits_cover_every_sample_once() {
        let ds = Dataset::generate(103, 4, 0.1, true, 1);
        for how in [Split::Iid, Split::SortedByLabel, Split::FileOrder] {
            let shards = split(&ds, 5, how, 3).unwrap();
            let mut all: Vec<usize> = shards.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..103).collect::<Vec<_>>());
            assert!(shards.iter().all(|s| s.len() >= 20));
        }
        // sorted by label: the first worker sees only -1, the last only +1
        let shards = split(&ds, 5, Split::SortedByLabel, 3).unwrap();
        assert!(shards[0].iter().all(|&s| ds.label(s) < 0.0));
        assert!(shards[4].iter().all(|&s| ds.label(s) > 0.0));
        assert!(matches!(
            split(&ds, 200, Split::Iid, 0),
            Err(DataError::TooFewSamples { .. })
        ));
        // file order: contiguous shares as read
        let shards = split(&ds, 5, Split::FileOrder, 3).unwrap();
        assert_eq!(shards[0], (0..20).collect::<Vec<_>>());
    }

    /// Two labels become -1 and +1, smaller first, whatever they were.
    #[test]
    fn binary_labels_map_to_plus_minus_one() {
        let text = "2 1:1\n1 2:1\n2 1:0.5\n";
        let mut ds = Dataset::read_libsvm(text.as_bytes()).unwrap();
        assert_eq!(ds.binary_labels().unwrap(), (1.0, 2.0));
        assert_eq!(
            (0..3).map(|s| ds.label(s)).collect::<Vec<_>>(),
            [1.0, -1.0, 1.0]
        );
        let mut three = Dataset::read_libsvm("0 1:1\n1 1:1\n2 1:1\n".as_bytes()).unwrap();
        assert!(matches!(
            three.binary_labels(),
            Err(DataError::Labels { .. })
        ));
        let mut one = Dataset::read_libsvm("1 1:1\n".as_bytes()).unwrap();
        assert!(one.binary_labels().is_err());
    }

    /// The f64 objective is the f32 one, computed more precisely.
    #[test]
    fn the_f64_objective_agrees_with_the_f32_one() {
        let ds = Dataset::generate(80, 5, 0.3, true, 4);
        let shards = split(&ds, 2, Split::Iid, 0).unwrap();
        for loss in [Loss::Squares, Loss::Logistic] {
            let model = LinearModel::new(ds.clone(), shards.clone(), loss, 4, 0.05);
            let x: Vec<f32> = (0..5).map(|i| 0.3 * i as f32 - 0.5).collect();
            let (a, b) = (model.loss(&x), model.loss_f64(&x));
            assert!(
                (a - b).abs() < 1e-5 * b.abs().max(1.0),
                "{loss:?}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let ds = Dataset::generate(50, 6, 0.3, true, 2);
        let shards = split(&ds, 2, Split::Iid, 0).unwrap();
        for loss in [Loss::Squares, Loss::Logistic] {
            let model = LinearModel::new(ds.clone(), shards.clone(), loss, 4, 0.01);
            let x: Vec<f32> = (0..6).map(|i| 0.1 * i as f32 - 0.2).collect();
            let mut g = vec![0.0; 6];
            model.full_gradient(&x, &mut g);
            for j in 0..6 {
                let h = 1e-2f32;
                let mut xp = x.clone();
                xp[j] += h;
                let mut xm = x.clone();
                xm[j] -= h;
                let fd = (model.loss(&xp) - model.loss(&xm)) / (2.0 * f64::from(h));
                assert!(
                    (fd - f64::from(g[j])).abs() < 1e-3,
                    "{loss:?} coord {j}: {fd} vs {}",
                    g[j]
                );
            }
        }
    }
}
