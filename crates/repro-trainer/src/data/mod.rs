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

    /// Moves about `fraction` of the images, at least one, into a returned
    /// validation set. Which images go is a fixed hash of their index, the
    /// same in every run and for every seed, so that configurations tuned
    /// on it are compared on the same images.
    pub fn hold_out(&mut self, fraction: f64) -> ImageSet {
        // splitmix64 of the index: uniform in [0, 2^64)
        let mix = |i: u64| {
            let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let cut = (fraction.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
        let mut held: Vec<bool> = (0..self.len()).map(|i| mix(i as u64) < cut).collect();
        if !held.iter().any(|h| *h) && !held.is_empty() {
            held[0] = true;
        }
        let n = self.image_len();
        let mut keep = ImageSet {
            pixels: Vec::new(),
            labels: Vec::new(),
            ..*self
        };
        let mut valid = keep.clone();
        for (i, h) in held.iter().enumerate() {
            let to = if *h { &mut valid } else { &mut keep };
            to.pixels
                .extend_from_slice(&self.pixels[i * n..(i + 1) * n]);
            to.labels.push(self.labels[i]);
        }
        *self = keep;
        valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: usize) -> ImageSet {
        ImageSet {
            pixels: (0..n * 4).map(|i| (i / 4) as u8).collect(),
            labels: (0..n).map(|i| (i % 10) as u8).collect(),
            channels: 1,
            height: 2,
            width: 2,
        }
    }

    /// The held-out images are about the fraction asked, never trained on,
    /// and the same ones every time.
    #[test]
    fn a_validation_set_is_held_out_the_same_way_every_time() {
        let mut train = set(1000);
        let valid = train.hold_out(0.1);
        assert_eq!(train.len() + valid.len(), 1000);
        assert!((70..130).contains(&valid.len()), "{}", valid.len());
        // each image (its pixels are its index) is on one side only
        let firsts = |s: &ImageSet| (0..s.len()).map(|i| s.image(i)[0]).collect::<Vec<u8>>();
        let (t, v) = (firsts(&train), firsts(&valid));
        assert!(v.iter().all(|x| !t.contains(x) || train.len() > 256));
        assert_eq!(valid.pixels.len(), valid.len() * 4);
        let mut again = set(1000);
        assert_eq!(again.hold_out(0.1), valid);
        assert_eq!(again, train);
        // a tiny set still validates on one image
        let mut tiny = set(3);
        assert_eq!(tiny.hold_out(0.01).len(), 1);
        assert_eq!(tiny.len(), 2);
    }
}
