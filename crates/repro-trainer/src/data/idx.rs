//! Fashion-MNIST in the IDX format (the files the Debian package
//! `dataset-fashion-mnist` installs in `/usr/share/datasets/fashion-mnist`),
//! gzip-compressed or not.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{DataError, ImageSet};

const HINT: &str = "install it with `apt-get install dataset-fashion-mnist` \
    (files in /usr/share/datasets/fashion-mnist) or point `data.dir` at a directory holding the four IDX files";

/// The Debian package's location.
pub const DEFAULT_DIR: &str = repro_runlog::FASHION_MNIST_DIR;

/// Fashion-MNIST: 60k training and 10k test images of 28x28, 10 classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FashionMnist {
    pub train: ImageSet,
    pub test: ImageSet,
}

impl FashionMnist {
    /// Loads `train-*` and `t10k-*` images and labels from `dir` (each file
    /// either `NAME` or `NAME.gz`).
    /// The images must be 28x28 (what the models are built for) and the
    /// labels 0..=9; either failing is an error naming the file.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, DataError> {
        Self::load_shaped(dir, (28, 28))
    }

    fn load_shaped(dir: impl AsRef<Path>, shape: (usize, usize)) -> Result<Self, DataError> {
        let dir = dir.as_ref();
        Ok(Self {
            train: load_pair(dir, "train", shape)?,
            test: load_pair(dir, "t10k", shape)?,
        })
    }
}

/// Classes of Fashion-MNIST: labels are 0..=9.
const CLASSES: u8 = 10;

fn load_pair(dir: &Path, prefix: &str, shape: (usize, usize)) -> Result<ImageSet, DataError> {
    let (images_path, images) = read_maybe_gz(dir, &format!("{prefix}-images-idx3-ubyte"))?;
    let (labels_path, labels) = read_maybe_gz(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
    let (dims, pixels) = parse_idx(&images, 3).map_err(|reason| corrupt(&images_path, reason))?;
    let (ldims, labels) = parse_idx(&labels, 1).map_err(|reason| corrupt(&labels_path, reason))?;
    if dims[0] != ldims[0] {
        return Err(corrupt(
            &labels_path,
            format!("{} labels for {} images", ldims[0], dims[0]),
        ));
    }
    if (dims[1], dims[2]) != shape {
        return Err(corrupt(
            &images_path,
            format!(
                "images are {}x{}, expected {}x{}",
                dims[1], dims[2], shape.0, shape.1
            ),
        ));
    }
    if let Some((i, l)) = labels.iter().enumerate().find(|(_, l)| **l >= CLASSES) {
        return Err(corrupt(
            &labels_path,
            format!(
                "label {l} at item {i}; the {CLASSES} classes are 0..={}",
                CLASSES - 1
            ),
        ));
    }
    Ok(ImageSet {
        pixels: pixels.to_vec(),
        labels: labels.to_vec(),
        channels: 1,
        height: dims[1],
        width: dims[2],
    })
}

fn corrupt(path: &Path, reason: String) -> DataError {
    DataError::Corrupt {
        path: path.to_path_buf(),
        what: "IDX file",
        reason,
        hint: HINT,
    }
}

fn read_maybe_gz(dir: &Path, name: &str) -> Result<(PathBuf, Vec<u8>), DataError> {
    let plain = dir.join(name);
    let gz = dir.join(format!("{name}.gz"));
    let (path, compressed) = if plain.exists() {
        (plain, false)
    } else {
        (gz, true)
    };
    let read = |path: &Path| -> std::io::Result<Vec<u8>> {
        let file = std::fs::read(path)?;
        if compressed {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(file.as_slice()).read_to_end(&mut out)?;
            Ok(out)
        } else {
            Ok(file)
        }
    };
    match read(&path) {
        Ok(bytes) => Ok((path, bytes)),
        Err(source) => Err(DataError::Read {
            path,
            source,
            hint: HINT,
        }),
    }
}

/// Parses an IDX file of unsigned bytes with `rank` dimensions: returns the
/// dimensions and the data.
fn parse_idx(bytes: &[u8], rank: usize) -> Result<(Vec<usize>, &[u8]), String> {
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(format!(
            "{} bytes is shorter than the {header}-byte header",
            bytes.len()
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err("magic number does not start with two zero bytes".into());
    }
    if bytes[2] != 0x08 {
        return Err(format!(
            "element type {:#04x}, expected unsigned bytes (0x08)",
            bytes[2]
        ));
    }
    if usize::from(bytes[3]) != rank {
        return Err(format!("{} dimensions, expected {rank}", bytes[3]));
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| {
            u32::from_be_bytes([
                bytes[4 + 4 * i],
                bytes[5 + 4 * i],
                bytes[6 + 4 * i],
                bytes[7 + 4 * i],
            ]) as usize
        })
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or("dimensions overflow")?;
    let data = &bytes[header..];
    if data.len() != count {
        return Err(format!(
            "{} data bytes, the header announces {count}",
            data.len()
        ));
    }
    Ok((dims, data))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// Writes an IDX file of `dims` with the given data.
    pub(crate) fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(data);
        out
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn loads_plain_and_gzipped_files() {
        let dir = std::env::temp_dir().join(format!("repro-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pixels: Vec<u8> = (0..3 * 4 * 5).map(|i| i as u8).collect();
        std::fs::write(
            dir.join("train-images-idx3-ubyte"),
            idx(&[3, 4, 5], &pixels),
        )
        .unwrap();
        std::fs::write(
            dir.join("train-labels-idx1-ubyte.gz"),
            gz(&idx(&[3], &[7, 8, 9])),
        )
        .unwrap();
        std::fs::write(
            dir.join("t10k-images-idx3-ubyte.gz"),
            gz(&idx(&[1, 4, 5], &pixels[..20])),
        )
        .unwrap();
        std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx(&[1], &[2])).unwrap();
        let load = |dir: &Path| FashionMnist::load_shaped(dir, (4, 5));
        let ds = load(&dir).unwrap();
        assert_eq!(ds.train.len(), 3);
        assert_eq!((ds.train.height, ds.train.width), (4, 5));
        assert_eq!(ds.train.image(1), &pixels[20..40]);
        assert_eq!(ds.train.labels, vec![7, 8, 9]);
        assert_eq!(ds.test.labels, vec![2]);
        // images of another size than the models', and labels out of
        // range, are errors naming the file
        let err = FashionMnist::load(&dir).unwrap_err().to_string();
        assert!(
            err.contains("train-images-idx3-ubyte") && err.contains("4x5, expected 28x28"),
            "{err}"
        );
        std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx(&[1], &[10])).unwrap();
        let err = load(&dir).unwrap_err().to_string();
        assert!(
            err.contains("t10k-labels-idx1-ubyte") && err.contains("label 10 at item 0"),
            "{err}"
        );
        // a truncated file is an error naming the path and the fix
        std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx(&[2], &[2])).unwrap();
        let err = load(&dir).unwrap_err().to_string();
        assert!(
            err.contains("t10k-labels-idx1-ubyte")
                && err.contains("apt-get install dataset-fashion-mnist"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let err = load(&dir).unwrap_err().to_string();
        assert!(err.contains("could not read"), "{err}");
    }

    #[test]
    fn rejects_malformed_headers() {
        assert!(parse_idx(&[0, 0, 8], 1).is_err());
        assert!(parse_idx(&idx(&[2], &[1]), 1).is_err());
        assert!(parse_idx(&idx(&[1, 1], &[1]), 1).is_err());
        let mut bad = idx(&[1], &[1]);
        bad[2] = 0x0D;
        assert!(parse_idx(&bad, 1).unwrap_err().contains("element type"));
        assert!(parse_idx(&idx(&[u32::MAX, u32::MAX, u32::MAX], &[]), 3).is_err());
    }

    /// The real data set from the Debian package (`ci/setup.sh` installs it).
    #[test]
    fn real_fashion_mnist_from_the_debian_package() {
        let ds = FashionMnist::load(DEFAULT_DIR).unwrap();
        assert_eq!((ds.train.len(), ds.test.len()), (60_000, 10_000));
        assert_eq!((ds.train.height, ds.train.width), (28, 28));
        let mut counts = [0usize; 10];
        for &l in &ds.train.labels {
            counts[usize::from(l)] += 1;
        }
        assert_eq!(counts, [6000; 10]);
    }
}
