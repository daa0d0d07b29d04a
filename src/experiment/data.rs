//! The data sets a manifest can name: which `repro data fetch` knows,
//! where each goes by default, the generated ones (made from their
//! parameters where missing), and which data paths a run may read.

use std::path::{Path, PathBuf};

/// The data sets `repro data fetch` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dataset {
    /// CIFAR-10, binary version (for the paper-scale experiments).
    Cifar10,
    /// Fashion-MNIST (the CPU-scale experiments; Debian also ships it as
    /// the package `dataset-fashion-mnist`).
    FashionMnist,
    /// LIBSVM's epsilon (normalized), training and test sets: 400,000 and
    /// 100,000 dense samples of 2,000 features, bzip2 (about 12 GB as text).
    Epsilon,
    /// A generated stand-in of epsilon's width, written here: 20,000 unit
    /// samples of 2,000 dense features, labels from a planted model with
    /// noise (the CPU-scale convex benchmark).
    EpsilonLike,
    /// A generated stand-in in CIFAR-10's binary format, written here: the
    /// official six batches of 10,000 records (a label byte, then 3x32x32
    /// pixels), each image its class's fixed pattern plus noise. For
    /// rehearsing the paper-scale runs where CIFAR-10 cannot be fetched:
    /// their accuracy means nothing.
    Cifar10Like,
    /// Any LIBSVM file: `--url` and its `--sha256`.
    Libsvm,
}

impl Dataset {
    /// Every data set `repro data fetch` knows.
    pub(crate) const ALL: [Dataset; 6] = [
        Dataset::Cifar10,
        Dataset::FashionMnist,
        Dataset::Epsilon,
        Dataset::EpsilonLike,
        Dataset::Cifar10Like,
        Dataset::Libsvm,
    ];

    /// The data set as the command line spells it (`repro data fetch
    /// NAME`): its one spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dataset::Cifar10 => "cifar10",
            Dataset::FashionMnist => "fashion-mnist",
            Dataset::Epsilon => "epsilon",
            Dataset::EpsilonLike => "epsilon-like",
            Dataset::Cifar10Like => "cifar10-like",
            Dataset::Libsvm => "libsvm",
        }
    }
}

/// Where a data set goes unless `--dir` says otherwise.
pub(crate) fn default_dir(dataset: Dataset) -> PathBuf {
    PathBuf::from(match dataset {
        Dataset::Cifar10 => "data/cifar10",
        Dataset::FashionMnist => "data/fashion-mnist",
        Dataset::Epsilon => "data/epsilon",
        Dataset::EpsilonLike => "data/epsilon-like",
        Dataset::Cifar10Like => "data/cifar10-like",
        Dataset::Libsvm => "data/libsvm",
    })
}

/// epsilon's training file, as LIBSVM names it.
pub(crate) const EPSILON_TRAIN_FILE: &str = "epsilon_normalized.bz2";

/// A data file `repro data fetch` writes where it is by default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Known {
    /// Generated here.
    Generated(Generated),
    /// Downloaded by `repro data fetch <this>`.
    Fetched(Dataset),
}

/// What `path` is when it is where `repro data fetch` puts a data file
/// (relative to the working directory).
pub(crate) fn known(path: &Path) -> Option<Known> {
    if let Some(g) = generated_at(path) {
        return Some(Known::Generated(g));
    }
    (path == default_dir(Dataset::Epsilon).join(EPSILON_TRAIN_FILE))
        .then_some(Known::Fetched(Dataset::Epsilon))
}

/// The generated stand-in for epsilon: its shape, its generator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Generated {
    pub samples: usize,
    pub dim: usize,
    /// Label noise: `sign(x.w + noise N(0, 1))` before normalizing.
    pub noise: f32,
    pub seed: u64,
}

/// epsilon's width and a CPU-sized number of samples.
pub(crate) const EPSILON_LIKE: Generated = Generated {
    samples: 20_000,
    dim: 2_000,
    noise: 0.5,
    seed: 2019,
};
pub(crate) const EPSILON_LIKE_FILE: &str = "epsilon_like.libsvm.gz";

/// The generated set `path` names when it is where `repro data fetch
/// epsilon-like` writes (relative to the working directory): what `repro
/// run` generates when a manifest names it and it is missing.
fn generated_at(path: &Path) -> Option<Generated> {
    (path == default_dir(Dataset::EpsilonLike).join(EPSILON_LIKE_FILE)).then_some(EPSILON_LIKE)
}

/// Refuses a data path a run should not read: one that is not a regular
/// file (or, with `dir`, a directory of regular files), such as a FIFO or
/// a device that would block or never end; or a file over 64 GiB. The
/// message says what the path is.
pub(crate) fn check_data_path(path: &Path, dir: bool) -> std::result::Result<(), String> {
    const MAX_BYTES: u64 = 64 << 30;
    crate::util::sudo::check_readable(path)?;
    let meta = std::fs::metadata(path).map_err(|e| format!("`{}`: {e}", path.display()))?;
    let kind = |m: &std::fs::Metadata| {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            "a FIFO"
        } else if t.is_block_device() || t.is_char_device() {
            "a device"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_dir() {
            "a directory"
        } else {
            "a file"
        }
    };
    let check_file = |p: &Path, m: &std::fs::Metadata| {
        if !m.is_file() {
            return Err(format!(
                "`{}` is {}, not a regular file",
                p.display(),
                kind(m)
            ));
        }
        if m.len() > MAX_BYTES {
            return Err(format!(
                "`{}` has {} bytes, more than the {MAX_BYTES} a data file may have",
                p.display(),
                m.len()
            ));
        }
        Ok(())
    };
    if !dir {
        return check_file(path, &meta);
    }
    if !meta.is_dir() {
        return Err(format!(
            "`{}` is {}, not a directory of data files",
            path.display(),
            kind(&meta)
        ));
    }
    let entries = std::fs::read_dir(path).map_err(|e| format!("`{}`: {e}", path.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        let m = std::fs::metadata(&p).map_err(|e| format!("`{}`: {e}", p.display()))?;
        if !m.is_dir() {
            check_file(&p, &m)?;
        }
    }
    Ok(())
}
