//! Image datasets as bytes (Fashion-MNIST from IDX files, CIFAR-10 from its
//! binary batches), their partition across workers, and batch assembly.

mod batch;
mod cifar;
mod idx;
mod partition;

pub use batch::Transform;
pub use cifar::Cifar10;
pub use idx::{DEFAULT_DIR as FASHION_MNIST_DIR, FashionMnist};
pub use partition::{Partition, partition};

use std::path::PathBuf;

use thiserror::Error;

/// A data set that cannot be loaded: names the path and how to get the data.
#[derive(Debug, Error)]
pub enum DataError {
    #[error("could not read {path}: {source}; {hint}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("{path} is not a valid {what}: {reason}; {hint}")]
    Corrupt {
        path: PathBuf,
        what: &'static str,
        reason: String,
        hint: &'static str,
    },
    #[error("cannot split {samples} samples over {workers} workers: {reason}")]
    Partition {
        samples: usize,
        workers: usize,
        reason: String,
    },
}

/// Images of one size as `u8` pixels, channel-major per image (C, H, W), with
/// one label each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSet {
    pub pixels: Vec<u8>,
    pub labels: Vec<u8>,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl ImageSet {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Bytes per image.
    pub fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The pixels of image `i`.
    pub fn image(&self, i: usize) -> &[u8] {
        let n = self.image_len();
        &self.pixels[i * n..(i + 1) * n]
    }
}
