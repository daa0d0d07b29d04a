//! CIFAR-10 from the official binary batches (`data_batch_1.bin` ..
//! `data_batch_5.bin`, `test_batch.bin`): each record is one label byte and
//! 3072 pixel bytes (the red, green and blue 32x32 planes).

use std::path::{Path, PathBuf};

use super::{DataError, ImageSet};

const HINT: &str = "download the binary version (cifar-10-binary.tar.gz) with `repro data fetch cifar10` \
    on a machine with internet, or point `data.dir` at the directory holding data_batch_1.bin .. test_batch.bin";
const RECORD: usize = 1 + 3 * 32 * 32;
/// Records in every batch of the real data set (train and test).
const RECORDS_PER_BATCH: usize = 10_000;

/// CIFAR-10: 50k training and 10k test images of 3x32x32, 10 classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cifar10 {
    pub train: ImageSet,
    pub test: ImageSet,
}

impl Cifar10 {
    /// Loads the six batches from `dir` or from `dir/cifar-10-batches-bin`.
    /// Each must hold exactly 10,000 records: a batch cut short on a
    /// record boundary is an error, not a smaller data set.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, DataError> {
        Self::load_batches_of(dir, RECORDS_PER_BATCH)
    }

    fn load_batches_of(dir: impl AsRef<Path>, records: usize) -> Result<Self, DataError> {
        let mut dir = dir.as_ref().to_path_buf();
        if !dir.join("test_batch.bin").exists() && dir.join("cifar-10-batches-bin").is_dir() {
            dir = dir.join("cifar-10-batches-bin");
        }
        let train: Vec<PathBuf> = (1..=5)
            .map(|i| dir.join(format!("data_batch_{i}.bin")))
            .collect();
        Ok(Self {
            train: load_batches(&train, records)?,
            test: load_batches(&[dir.join("test_batch.bin")], records)?,
        })
    }
}

fn load_batches(paths: &[PathBuf], records: usize) -> Result<ImageSet, DataError> {
    let mut set = ImageSet {
        pixels: Vec::new(),
        labels: Vec::new(),
        channels: 3,
        height: 32,
        width: 32,
    };
    for path in paths {
        let bytes = std::fs::read(path).map_err(|source| DataError::Read {
            path: path.clone(),
            source,
            hint: HINT,
        })?;
        let corrupt = |reason: String| DataError::Corrupt {
            path: path.clone(),
            what: "CIFAR-10 binary batch",
            reason,
            hint: HINT,
        };
        if bytes.is_empty() || bytes.len() % RECORD != 0 {
            return Err(corrupt(format!(
                "{} bytes is not a whole number of {RECORD}-byte records",
                bytes.len()
            )));
        }
        if bytes.len() / RECORD != records {
            return Err(corrupt(format!(
                "{} records, expected {records} (a batch cut short?)",
                bytes.len() / RECORD
            )));
        }
        for (r, record) in bytes.chunks_exact(RECORD).enumerate() {
            if record[0] > 9 {
                return Err(corrupt(format!("record {r} has label {}", record[0])));
            }
            set.labels.push(record[0]);
            set.pixels.extend_from_slice(&record[1..]);
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: usize, seed: u8) -> Vec<u8> {
        (0..records)
            .flat_map(|r| {
                let label = (r as u8).wrapping_add(seed) % 10;
                std::iter::once(label).chain((0..RECORD - 1).map(move |p| (p as u8) ^ label))
            })
            .collect()
    }

    #[test]
    fn loads_generated_batches() {
        let root = std::env::temp_dir().join(format!("repro-cifar-{}", std::process::id()));
        let dir = root.join("cifar-10-batches-bin");
        std::fs::create_dir_all(&dir).unwrap();
        for i in 1..=5 {
            std::fs::write(dir.join(format!("data_batch_{i}.bin")), batch(3, i)).unwrap();
        }
        std::fs::write(dir.join("test_batch.bin"), batch(3, 0)).unwrap();
        let load = |root: &Path| Cifar10::load_batches_of(root, 3);
        let ds = load(&root).unwrap();
        assert_eq!((ds.train.len(), ds.test.len()), (15, 3));
        assert_eq!(ds.train.image_len(), 3072);
        assert_eq!(ds.train.labels[..3], [1, 2, 3]);
        assert_eq!(ds.train.image(1)[..3], [2, 3, 0]);
        // a truncated batch and a bad label are errors naming the file
        std::fs::write(dir.join("data_batch_3.bin"), &batch(3, 0)[..100]).unwrap();
        let err = load(&root).unwrap_err().to_string();
        assert!(
            err.contains("data_batch_3.bin") && err.contains("whole number"),
            "{err}"
        );
        // cut on a record boundary
        std::fs::write(dir.join("data_batch_3.bin"), batch(2, 0)).unwrap();
        let err = load(&root).unwrap_err().to_string();
        assert!(
            err.contains("data_batch_3.bin") && err.contains("2 records, expected 3"),
            "{err}"
        );
        // the real loader wants whole batches of 10,000
        let err = Cifar10::load(&root).unwrap_err().to_string();
        assert!(err.contains("expected 10000"), "{err}");
        let mut bad = batch(3, 0);
        bad[0] = 10;
        std::fs::write(dir.join("data_batch_3.bin"), bad).unwrap();
        let err = load(&root).unwrap_err().to_string();
        assert!(err.contains("label 10"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
        let err = Cifar10::load(&root).unwrap_err().to_string();
        assert!(err.contains("repro data fetch cifar10"), "{err}");
    }
}
