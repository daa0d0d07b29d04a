//! `repro data fetch <dataset>`: downloads a data set from its official
//! source, verifies it (MD5 or SHA-256 of every download, then the files'
//! sizes) and unpacks what the trainer reads. Safe to rerun: what is
//! already there and verified is kept; a download goes to a `.part` file
//! that is renamed into place only after its checksum matched, so an
//! interrupted or corrupt download never looks like data.
//!
//! The LIBSVM sets (`epsilon`, or any file with `libsvm --url --sha256`)
//! stay compressed: the simulator reads `.bz2` and `.gz` directly.
//! `epsilon-like` is no download: a generated set of epsilon's width,
//! written as LIBSVM text, that the CPU-scale convex benchmark reads
//! through the same path (`repro run` writes it when a manifest names it
//! and it is missing).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use md5::{Digest, Md5};
use sha2::Sha256;

use crate::experiment::data::{
    Dataset, EPSILON_LIKE, EPSILON_LIKE_FILE, EPSILON_TRAIN_FILE, Generated, Known, known,
};

/// A file's checksum, as a lowercase hex digest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sum {
    Md5(String),
    Sha256(String),
}

impl Sum {
    fn name(&self) -> &'static str {
        match self {
            Sum::Md5(_) => "MD5",
            Sum::Sha256(_) => "SHA-256",
        }
    }

    fn hex(&self) -> &str {
        match self {
            Sum::Md5(h) | Sum::Sha256(h) => h,
        }
    }

    fn hasher(&self) -> Hasher {
        match self {
            Sum::Md5(_) => Hasher::Md5(Md5::new()),
            Sum::Sha256(_) => Hasher::Sha256(Sha256::new()),
        }
    }

    /// Whether the file at `path` has this checksum.
    fn matches(&self, path: &Path) -> bool {
        file_sum(path, self).ok().as_deref() == Some(self.hex())
    }
}

enum Hasher {
    Md5(Md5),
    Sha256(Sha256),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Md5(h) => hex(&h.finalize()),
            Hasher::Sha256(h) => hex(&h.finalize()),
        }
    }
}

/// One file to download: where from, its checksum, its name on disk.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Download {
    pub url: String,
    pub sum: Sum,
    pub file: String,
    /// The most bytes the file may have: a larger answer is refused, and a
    /// body that goes past it is cut off (a wrong URL, or a hostile server,
    /// cannot fill the disk).
    pub max_bytes: u64,
}

/// How long a download may wait: to connect, for the response's headers,
/// and for each read of its body (a stalled server fails, a slow one that
/// keeps sending does not).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    pub connect: std::time::Duration,
    pub response: std::time::Duration,
    pub per_read: std::time::Duration,
}

impl Default for Patience {
    fn default() -> Self {
        let s = std::time::Duration::from_secs;
        Self {
            connect: s(30),
            response: s(60),
            per_read: s(60),
        }
    }
}

const CIFAR_URL: &str = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
const CIFAR_MD5: &str = "c32a1d4ab5d03f1284b67883e8d87530";
const CIFAR_MEMBERS: [&str; 6] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
    "test_batch.bin",
];
/// One record: a label byte and 3x32x32 pixels.
const CIFAR_RECORD: usize = 1 + 3 * 32 * 32;
/// 10000 records.
const CIFAR_BATCH_BYTES: u64 = 10_000 * CIFAR_RECORD as u64;
const FASHION_URL: &str = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
const FASHION_FILES: [(&str, &str); 4] = [
    (
        "train-images-idx3-ubyte.gz",
        "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    ),
    (
        "train-labels-idx1-ubyte.gz",
        "25c81989df183df01b3e8a0aad5dffbe",
    ),
    (
        "t10k-images-idx3-ubyte.gz",
        "bef4ecab320f06d8554ea6380940ec79",
    ),
    (
        "t10k-labels-idx1-ubyte.gz",
        "bb300cfdad3c16e7a12a480ee83cd310",
    ),
];

/// LIBSVM's binary data sets.
const LIBSVM_URL: &str = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/";
/// epsilon's two files and their SHA-256 (LIBSVM publishes none; these two
/// are the ones two independent benchmark suites pin, and agree on).
const EPSILON_FILES: [(&str, &str, u64); 2] = [
    (
        EPSILON_TRAIN_FILE,
        "aff916d4f97f18d286558ca088d2a9f7e1fcee9376539a5aa6ef5b7ef9dfa978",
        6_000_000_000,
    ),
    (
        "epsilon_normalized.t.bz2",
        "cb299295ad11e200696eaa3050f5d8cf700eaa9c65e6aa859bda959f8669458b",
        1_500_000_000,
    ),
];

/// A mirror or a file named on the command line.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Source<'a> {
    pub url: Option<&'a str>,
    pub md5: Option<&'a str>,
    pub sha256: Option<&'a str>,
}

/// Fetches `dataset` into `dir`; returns what a manifest names: the
/// directory the trainer reads, or the LIBSVM file the simulator reads.
pub(crate) fn fetch(dataset: Dataset, dir: &Path, source: Source<'_>) -> Result<PathBuf> {
    // under sudo the download is the invoking user's, written only where
    // they may write
    crate::util::sudo::as_invoker(|| fetch_as_is(dataset, dir, source))
}

/// [`fetch`] with this process's own rights.
fn fetch_as_is(dataset: Dataset, dir: &Path, source: Source<'_>) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    match dataset {
        Dataset::Cifar10 => fetch_cifar(dir, source),
        Dataset::FashionMnist => {
            let base = directory_url(source.url.unwrap_or(FASHION_URL));
            for (file, sum) in FASHION_FILES {
                let d = Download {
                    url: format!("{base}{file}"),
                    sum: Sum::Md5(sum.to_string()),
                    file: file.to_string(),
                    // the largest file is 26,421,880 bytes
                    max_bytes: 32 << 20,
                };
                fetch_file(&d, &dir.join(file))?;
            }
            Ok(dir.to_path_buf())
        }
        Dataset::Epsilon => {
            let base = directory_url(source.url.unwrap_or(LIBSVM_URL));
            for (file, sum, max_bytes) in EPSILON_FILES {
                let d = Download {
                    url: format!("{base}{file}"),
                    sum: Sum::Sha256(sum.to_string()),
                    file: file.to_string(),
                    max_bytes,
                };
                fetch_file(&d, &dir.join(file))?;
            }
            Ok(dir.join(EPSILON_FILES[0].0))
        }
        Dataset::EpsilonLike => {
            let path = dir.join(EPSILON_LIKE_FILE);
            generate_epsilon_like(&path, &EPSILON_LIKE)?;
            Ok(path)
        }
        Dataset::Cifar10Like => {
            if verify_cifar(dir).is_ok() {
                eprintln!(
                    "generated CIFAR-10 is already in {} (sizes verified)",
                    dir.display()
                );
            } else {
                generate_cifar10_like(dir, CIFAR10_LIKE_SEED)?;
            }
            Ok(dir.to_path_buf())
        }
        Dataset::Libsvm => fetch_libsvm(dir, source),
    }
}

/// CIFAR-10's archive (unless its batches are there), unpacked and
/// verified: the directory of the batches.
fn fetch_cifar(dir: &Path, source: Source<'_>) -> Result<PathBuf> {
    let out = dir.join("cifar-10-batches-bin");
    if verify_cifar(&out).is_ok() {
        eprintln!("CIFAR-10 is already in {} (sizes verified)", out.display());
        return Ok(out);
    }
    let d = Download {
        url: source.url.unwrap_or(CIFAR_URL).to_string(),
        sum: Sum::Md5(source.md5.unwrap_or(CIFAR_MD5).to_ascii_lowercase()),
        file: "cifar-10-binary.tar.gz".into(),
        // the archive is 170,498,071 bytes
        max_bytes: 200_000_000,
    };
    let archive = dir.join(&d.file);
    if !d.sum.matches(&archive) {
        download(&d, &archive, Patience::default())?;
    }
    extract_cifar(&archive, &out)?;
    verify_cifar(&out)?;
    Ok(out)
}

/// Any LIBSVM file, by its `--url` and `--sha256`: the file.
fn fetch_libsvm(dir: &Path, source: Source<'_>) -> Result<PathBuf> {
    let (Some(url), Some(sha256)) = (source.url, source.sha256) else {
        bail!(
            "`repro data fetch libsvm` fetches any LIBSVM file: give its --url and its --sha256 \
             (e.g. --url {LIBSVM_URL}rcv1_train.binary.bz2 --sha256 <64 hex digits>)"
        );
    };
    let sha256 = sha256.to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--sha256 `{sha256}` is not 64 hex digits");
    }
    let file = url
        .rsplit('/')
        .next()
        .filter(|f| !f.is_empty() && !f.starts_with('.'))
        .with_context(|| format!("{url} names no file"))?;
    let d = Download {
        url: url.to_string(),
        sum: Sum::Sha256(sha256),
        file: file.to_string(),
        max_bytes: 20_000_000_000,
    };
    let path = dir.join(file);
    fetch_file(&d, &path)?;
    Ok(path)
}

fn directory_url(base: &str) -> String {
    if base.ends_with('/') {
        base.to_string()
    } else {
        format!("{base}/")
    }
}

/// Downloads `d` to `path` unless a file with its checksum is there.
fn fetch_file(d: &Download, path: &Path) -> Result<()> {
    if d.sum.matches(path) {
        eprintln!(
            "{} is already there ({} verified)",
            path.display(),
            d.sum.name()
        );
        return Ok(());
    }
    download(d, path, Patience::default())
}

/// Writes every generated data set that `runs` read and that is missing
/// (`dry_run`: says which it would write).
pub(crate) fn prepare<'a>(
    runs: impl IntoIterator<Item = &'a crate::experiment::plan::PlannedRun>,
    dry_run: bool,
) -> Result<()> {
    // written as the invoking user under sudo, as a download is
    let runs: Vec<_> = runs.into_iter().collect();
    crate::util::sudo::as_invoker(|| prepare_as_is(runs, dry_run))
}

/// [`prepare`] with this process's own rights.
fn prepare_as_is(runs: Vec<&crate::experiment::plan::PlannedRun>, dry_run: bool) -> Result<()> {
    let mut done = std::collections::BTreeSet::new();
    for r in runs {
        let crate::experiment::plan::Params::Sim(p) = &r.params else {
            continue;
        };
        let Some(path) = p.data.as_deref().map(Path::new) else {
            continue;
        };
        if path.is_file() || !done.insert(path.to_path_buf()) {
            continue;
        }
        match known(path) {
            Some(Known::Generated(g)) if dry_run => println!(
                "would write {} first: {} generated samples x {} features",
                path.display(),
                g.samples,
                g.dim
            ),
            Some(Known::Generated(g)) => generate_epsilon_like(path, &g)?,
            Some(Known::Fetched(d)) => {
                let message = format!(
                    "{} is missing: run `repro data fetch {}` first",
                    path.display(),
                    d.name()
                );
                if dry_run {
                    println!("{message}");
                } else {
                    bail!("{message}");
                }
            }
            None => {}
        }
    }
    Ok(())
}

/// A run's data set and a checksum of the data it reads: the `dataset`
/// and `data_checksum` columns. Files are checksummed (xxh3-128 of every
/// regular file's name and bytes, in name order; each path once per
/// process); data generated from the run's parameters is `generated`, and
/// data that is not there yet is `missing`.
pub(crate) fn identity(params: &crate::experiment::plan::Params) -> (String, String) {
    use crate::experiment::plan::Params;
    let (dataset, path) = match params {
        Params::Train(c) => {
            let dir = match (c.dataset.as_str(), &c.data_dir) {
                (_, Some(d)) => Some(PathBuf::from(d)),
                ("fashion-mnist", None) => Some(PathBuf::from(repro_runlog::FASHION_MNIST_DIR)),
                _ => None,
            };
            (c.dataset.clone(), dir.filter(|_| c.dataset != "synthetic"))
        }
        Params::Sim(p) => match &p.data {
            Some(d) => (format!("{} on {d}", p.objective), Some(PathBuf::from(d))),
            None => (p.objective.clone(), None),
        },
    };
    let checksum = match path {
        None => "generated".to_string(),
        Some(p) => checksum(&p),
    };
    (dataset, checksum)
}

/// [`identity`]'s checksum of a file or a directory's files, cached.
fn checksum(path: &Path) -> String {
    static SEEN: std::sync::Mutex<std::collections::BTreeMap<PathBuf, String>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(c) = seen.get(path) {
        return c.clone();
    }
    let mut files: Vec<PathBuf> = if path.is_dir() {
        std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    } else {
        vec![path.to_path_buf()]
    };
    files.retain(|f| f.metadata().is_ok_and(|m| m.is_file()));
    files.sort();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut any = false;
    for f in &files {
        let Ok(mut file) = std::fs::File::open(f) else {
            continue;
        };
        h.update(f.file_name().map_or(&b""[..], |n| n.as_encoded_bytes()));
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = file.read(&mut buf) {
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        any = true;
    }
    let c = if any {
        format!("xxh3:{:032x}", h.digest128())
    } else {
        "missing".to_string()
    };
    seen.insert(path.to_path_buf(), c.clone());
    c
}

/// Writes `g`'s samples (Gaussian, then scaled to unit norm, as epsilon's
/// are) to `path` as gzipped LIBSVM text, through a temporary file, and
/// reads it back to check the shape. Kept when it is there and whole.
pub(crate) fn generate_epsilon_like(path: &Path, g: &Generated) -> Result<()> {
    let shape_ok = |p: &Path| -> Result<()> {
        let f = std::fs::File::open(p)?;
        let ds = repro_algos::data::Dataset::read_libsvm(std::io::BufReader::new(
            flate2::read::MultiGzDecoder::new(f),
        ))?;
        if ds.len() != g.samples || ds.dim() != g.dim {
            bail!(
                "{} has {} samples of {} features, expected {} of {}",
                p.display(),
                ds.len(),
                ds.dim(),
                g.samples,
                g.dim
            );
        }
        Ok(())
    };
    if path.is_file() && shape_ok(path).is_ok() {
        eprintln!("{} is already there (shape verified)", path.display());
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("could not create {}", parent.display()))?;
    }
    eprintln!(
        "writing {}: {} samples x {} features (generated; about {} MB)",
        path.display(),
        g.samples,
        g.dim,
        g.samples * g.dim * 11 / 1_000_000
    );
    let mut ds = repro_algos::data::Dataset::generate(g.samples, g.dim, g.noise, true, g.seed);
    ds.normalize_rows();
    let (f, part) = crate::util::atomic::create_temp(path)?;
    let result = (|| -> Result<()> {
        let mut gz =
            flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::fast());
        ds.write_libsvm(&mut gz)
            .with_context(|| format!("could not write {}", part.display()))?;
        gz.finish()?.flush()?;
        shape_ok(&part)?;
        std::fs::rename(&part, path).with_context(|| format!("could not write {}", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result
}

fn file_sum(path: &Path, sum: &Sum) -> Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = sum.hasher();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finish())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes a file when dropped, unless [`RemoveOnDrop::keep`] was called.
struct RemoveOnDrop<'p>(&'p Path);

impl RemoveOnDrop<'_> {
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// A new file at `path`, never opened through what is there: a planted
/// symlink is removed (not followed), and `create_new` refuses to follow
/// one.
fn fresh_file(path: &Path) -> Result<std::fs::File> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => bail!("{} is a directory; remove it", path.display()),
        Ok(_) => std::fs::remove_file(path)
            .with_context(|| format!("could not remove the old {}", path.display()))?,
        Err(_) => {}
    }
    crate::util::atomic::create_new(path)
}

/// The error of a download of `d` whose checksum came out `got`.
fn corrupt(d: &Download, got: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is corrupt: {} {got}, expected {} (removed; run the command again, or pass \
         --{} for a mirror that repacked the file)",
        d.url,
        d.sum.name(),
        d.sum.hex(),
        match d.sum {
            Sum::Md5(_) => "md5",
            Sum::Sha256(_) => "sha256",
        }
    )
}

/// Downloads `d.url` to `dest` through `dest.part`, with a progress bar,
/// and checks its MD5 before renaming it into place.
pub(crate) fn download(d: &Download, dest: &Path, patience: Patience) -> Result<()> {
    let part = dest.with_extension("part");
    let fail = || format!("could not download {} (is this machine online?)", d.url);
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_connect(Some(patience.connect))
            .timeout_recv_response(Some(patience.response))
            .timeout_per_read(Some(patience.per_read))
            .build(),
    );
    let mut response = agent.get(&d.url).call().with_context(fail)?;
    let total = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(n) = total.filter(|&n| n > d.max_bytes) {
        bail!(
            "{} is {n} bytes, more than the {} this file can be: refused (wrong URL?)",
            d.url,
            d.max_bytes
        );
    }
    let mut bar = crate::util::progress::bytes_bar(&format!("downloading {}", d.file), total);
    let mut reader = response.body_mut().as_reader();
    let file = fresh_file(&part)?;
    // whatever stops the download (a full disk included) removes the part
    let removed = RemoveOnDrop(&part);
    let mut out = std::io::BufWriter::new(file);
    let mut h = d.sum.hasher();
    let mut buf = vec![0u8; 1 << 16];
    let mut received = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e).with_context(fail);
            }
        };
        if n == 0 {
            break;
        }
        received += n as u64;
        if received > d.max_bytes {
            drop(out);
            let _ = std::fs::remove_file(&part);
            bail!(
                "{} sent more than the {} bytes this file can be: stopped and removed (wrong URL?)",
                d.url,
                d.max_bytes
            );
        }
        h.update(&buf[..n]);
        out.write_all(&buf[..n])
            .with_context(|| format!("could not write {}", part.display()))?;
        bar.inc(n as u64);
    }
    out.flush()
        .with_context(|| format!("could not write {}", part.display()))?;
    drop(out);
    bar.finish();
    let got = h.finish();
    if got != d.sum.hex() {
        let _ = std::fs::remove_file(&part);
        return Err(corrupt(d, &got));
    }
    std::fs::rename(&part, dest).with_context(|| format!("could not write {}", dest.display()))?;
    removed.keep();
    Ok(())
}

/// Unpacks the six batches (and nothing else: no other member, no path
/// outside `out`) from the archive.
fn extract_cifar(archive: &Path, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let f = std::fs::File::open(archive)
        .with_context(|| format!("could not open {}", archive.display()))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut found = 0;
    let bad = || format!("{} is not the CIFAR-10 binary archive", archive.display());
    for entry in tar.entries().with_context(bad)? {
        let mut entry = entry.with_context(bad)?;
        let path = entry.path().with_context(bad)?.into_owned();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !entry.header().entry_type().is_file() || !CIFAR_MEMBERS.contains(&name) {
            continue;
        }
        // a member of another size is not a batch: refused before a byte
        // is written (and never more than a batch is copied)
        let size = entry.header().size().with_context(bad)?;
        if size != CIFAR_BATCH_BYTES {
            bail!(
                "{}: member {name} has {size} bytes, expected {CIFAR_BATCH_BYTES}",
                bad()
            );
        }
        let dest = out.join(name);
        let (mut w, tmp) = crate::util::atomic::create_temp(&dest)?;
        let copied = std::io::copy(&mut (&mut entry).take(CIFAR_BATCH_BYTES), &mut w);
        if copied.as_ref().ok() != Some(&CIFAR_BATCH_BYTES) {
            let _ = std::fs::remove_file(&tmp);
            copied.with_context(bad)?;
            bail!("{}: member {name} is truncated", bad());
        }
        std::fs::rename(&tmp, &dest)
            .with_context(|| format!("could not write {}", dest.display()))?;
        found += 1;
    }
    if found < CIFAR_MEMBERS.len() {
        bail!(
            "{}: only {found} of the {} batches (data_batch_1..5.bin, test_batch.bin)",
            bad(),
            CIFAR_MEMBERS.len()
        );
    }
    Ok(())
}

/// The six batches are there with their exact sizes.
/// The seed of `repro data fetch cifar10-like`.
pub(crate) const CIFAR10_LIKE_SEED: u64 = 2020;

/// Writes CIFAR-10's six binary batches into `dir`, generated from `seed`:
/// each record a label drawn uniformly from 0-9 (batch `b` from stream
/// `b + 1`) and pixels its class's fixed random pattern plus uniform noise
/// in [-32, 31] (clamped to a byte), so a model can learn something. Each
/// batch goes to a temporary file renamed into place.
pub(crate) fn generate_cifar10_like(dir: &Path, seed: u64) -> Result<()> {
    use repro_algos::rng::Rng;
    const PIXELS: usize = CIFAR_RECORD - 1;
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let mut rng = Rng::new(seed, 0xc1fa);
    let patterns: Vec<Vec<u8>> = (0..10)
        .map(|_| (0..PIXELS).map(|_| (rng.next_u64() >> 56) as u8).collect())
        .collect();
    eprintln!(
        "writing generated CIFAR-10 batches to {} (6 x 10,000 records, 184 MB)",
        dir.display()
    );
    for (b, member) in CIFAR_MEMBERS.iter().enumerate() {
        let mut rng = Rng::new(seed, b as u64 + 1);
        let mut bytes = Vec::with_capacity(CIFAR_BATCH_BYTES as usize);
        for _ in 0..10_000 {
            let label = (rng.next_u64() % 10) as usize;
            bytes.push(label as u8);
            let pattern = &patterns[label];
            for chunk in pattern.chunks(8) {
                let noise = rng.next_u64().to_le_bytes();
                for (&p, &n) in chunk.iter().zip(&noise) {
                    // n / 4 - 32: uniform in [-32, 31]
                    let v = i16::from(p) + i16::from(n / 4) - 32;
                    bytes.push(v.clamp(0, 255) as u8);
                }
            }
        }
        crate::util::atomic::write(&dir.join(member), &bytes)?;
    }
    verify_cifar(dir)
}

/// Judges CIFAR-10's binary batches in `dir` before anything runs: each
/// batch has its official size (whole records), and every record's label
/// byte is a class, 0 to 9. A record is read by its label byte alone.
pub(crate) fn check_cifar(dir: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt as _;
    verify_cifar(dir)?;
    for m in CIFAR_MEMBERS {
        let p = dir.join(m);
        let f =
            std::fs::File::open(&p).with_context(|| format!("could not open {}", p.display()))?;
        let mut label = [0u8; 1];
        for k in 0..CIFAR_BATCH_BYTES / CIFAR_RECORD as u64 {
            let at = k * CIFAR_RECORD as u64;
            f.read_exact_at(&mut label, at)
                .with_context(|| format!("could not read {}", p.display()))?;
            if label[0] > 9 {
                bail!(
                    "{}: record {k} (byte {at}) has label {}; CIFAR-10's labels are 0 to 9 (a \
                     damaged or foreign file: fetch it again with `repro data fetch cifar10`)",
                    p.display(),
                    label[0]
                );
            }
        }
    }
    Ok(())
}

fn verify_cifar(dir: &Path) -> Result<()> {
    for m in CIFAR_MEMBERS {
        let p = dir.join(m);
        let len = std::fs::metadata(&p)
            .with_context(|| format!("{} is missing", p.display()))?
            .len();
        if len != CIFAR_BATCH_BYTES {
            bail!(
                "{} has {len} bytes, expected {CIFAR_BATCH_BYTES} (10000 records of {CIFAR_RECORD} bytes)",
                p.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
