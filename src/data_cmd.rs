//! `repro data fetch <dataset>`: downloads a data set from its official
//! source, verifies it (MD5 of every download, then the files' sizes) and
//! unpacks what the trainer reads. Safe to rerun: what is already there and
//! verified is kept; a download goes to a `.part` file that is renamed into
//! place only after its checksum matched, so an interrupted or corrupt
//! download never looks like data.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use md5::{Digest, Md5};

/// Options of `repro data`.
#[derive(Debug, Args)]
pub struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(Debug, Subcommand)]
enum DataCommand {
    /// Download and verify a data set (needs internet; CIFAR-10 is 163 MB).
    Fetch(FetchArgs),
}

/// The data sets `repro data fetch` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Dataset {
    /// CIFAR-10, binary version (for the paper-scale experiments).
    Cifar10,
    /// Fashion-MNIST (the CPU-scale experiments; Debian also ships it as
    /// the package `dataset-fashion-mnist`).
    FashionMnist,
}

#[derive(Debug, Args)]
struct FetchArgs {
    dataset: Dataset,
    /// Where to put it (default: data/cifar10 or data/fashion-mnist); give
    /// the same directory as `data_dir` in a manifest.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A mirror instead of the official source: the archive's URL for
    /// CIFAR-10, the directory URL holding the four files for Fashion-MNIST.
    #[arg(long)]
    url: Option<String>,
    /// The mirror's MD5 when it differs from the official one (CIFAR-10
    /// only; the unpacked batches are still checked).
    #[arg(long, requires = "url")]
    md5: Option<String>,
}

/// One file to download: where from, its MD5, its name on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Download {
    pub url: String,
    pub md5: String,
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
pub struct Patience {
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
/// 10000 records of one label byte and 3x32x32 pixels.
const CIFAR_BATCH_BYTES: u64 = 10_000 * 3073;
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

/// `repro data ...`.
pub fn run(args: &DataArgs) -> Result<()> {
    match &args.command {
        DataCommand::Fetch(f) => {
            let dir = f.dir.clone().unwrap_or_else(|| match f.dataset {
                Dataset::Cifar10 => PathBuf::from("data/cifar10"),
                Dataset::FashionMnist => PathBuf::from("data/fashion-mnist"),
            });
            let path = fetch(f.dataset, &dir, f.url.as_deref(), f.md5.as_deref())?;
            println!("{}", path.display());
            eprintln!(
                "ready: set `data_dir: {}` (and `dataset: {}`) in a manifest's params or with --set",
                path.display(),
                match f.dataset {
                    Dataset::Cifar10 => "cifar10",
                    Dataset::FashionMnist => "fashion-mnist",
                }
            );
            Ok(())
        }
    }
}

/// Fetches `dataset` into `dir`; returns the directory the trainer reads.
pub fn fetch(
    dataset: Dataset,
    dir: &Path,
    url: Option<&str>,
    md5: Option<&str>,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    match dataset {
        Dataset::Cifar10 => {
            let out = dir.join("cifar-10-batches-bin");
            if verify_cifar(&out).is_ok() {
                eprintln!("CIFAR-10 is already in {} (sizes verified)", out.display());
                return Ok(out);
            }
            let d = Download {
                url: url.unwrap_or(CIFAR_URL).to_string(),
                md5: md5.unwrap_or(CIFAR_MD5).to_ascii_lowercase(),
                file: "cifar-10-binary.tar.gz".into(),
                // the archive is 170,498,071 bytes
                max_bytes: 200_000_000,
            };
            let archive = dir.join(&d.file);
            if file_md5(&archive).ok().as_deref() != Some(d.md5.as_str()) {
                download(&d, &archive, Patience::default())?;
            }
            extract_cifar(&archive, &out)?;
            verify_cifar(&out)?;
            Ok(out)
        }
        Dataset::FashionMnist => {
            let base = url.unwrap_or(FASHION_URL);
            let base = if base.ends_with('/') {
                base.to_string()
            } else {
                format!("{base}/")
            };
            for (file, sum) in FASHION_FILES {
                let path = dir.join(file);
                if file_md5(&path).ok().as_deref() == Some(sum) {
                    eprintln!("{} is already there (MD5 verified)", path.display());
                    continue;
                }
                download(
                    &Download {
                        url: format!("{base}{file}"),
                        md5: sum.to_string(),
                        file: file.to_string(),
                        // the largest file is 26,421,880 bytes
                        max_bytes: 32 << 20,
                    },
                    &path,
                    Patience::default(),
                )?;
            }
            Ok(dir.to_path_buf())
        }
    }
}

fn file_md5(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Downloads `d.url` to `dest` through `dest.part`, with a progress bar,
/// and checks its MD5 before renaming it into place.
pub fn download(d: &Download, dest: &Path, patience: Patience) -> Result<()> {
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
    let mut bar = crate::progress::bytes_bar(&format!("downloading {}", d.file), total);
    let mut reader = response.body_mut().as_reader();
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&part)
            .with_context(|| format!("could not create {}", part.display()))?,
    );
    let mut h = Md5::new();
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
    let got = hex(&h.finalize());
    if got != d.md5 {
        let _ = std::fs::remove_file(&part);
        bail!(
            "{} is corrupt: MD5 {got}, expected {} (removed; run the command again, or pass \
             --md5 for a mirror that repacked the file)",
            d.url,
            d.md5
        );
    }
    std::fs::rename(&part, dest).with_context(|| format!("could not write {}", dest.display()))
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
        let tmp = dest.with_extension("part");
        let mut w = std::fs::File::create(&tmp)
            .with_context(|| format!("could not create {}", tmp.display()))?;
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
fn verify_cifar(dir: &Path) -> Result<()> {
    for m in CIFAR_MEMBERS {
        let p = dir.join(m);
        let len = std::fs::metadata(&p)
            .with_context(|| format!("{} is missing", p.display()))?
            .len();
        if len != CIFAR_BATCH_BYTES {
            bail!(
                "{} has {len} bytes, expected {CIFAR_BATCH_BYTES} (10000 records of 3073 bytes)",
                p.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;
    use std::net::TcpListener;

    use super::*;

    /// Serves `body` over HTTP on loopback for each of `requests` requests.
    fn serve(body: Vec<u8>, requests: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(requests) {
                let mut stream = stream.unwrap();
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap() > 2 {
                    line.clear();
                }
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .unwrap();
                stream.write_all(&body).unwrap();
            }
        });
        format!("http://{addr}/cifar-10-binary.tar.gz")
    }

    /// A small archive shaped like the real one, with batches of the right
    /// size (zeros compress to almost nothing) and a stray member.
    fn archive() -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        let batch = vec![0u8; CIFAR_BATCH_BYTES as usize];
        for m in CIFAR_MEMBERS {
            let mut h = tar::Header::new_gnu();
            h.set_size(batch.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            tar.append_data(&mut h, format!("cifar-10-batches-bin/{m}"), &batch[..])
                .unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_cksum();
        tar.append_data(&mut h, "cifar-10-batches-bin/readme.html", &b"hi\n"[..])
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("repro-data-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn cifar_downloads_verifies_and_unpacks_only_the_batches() {
        let body = archive();
        let sum = hex(&Md5::digest(&body));
        let url = serve(body, 1);
        let dir = tmp("ok");
        let out = fetch(Dataset::Cifar10, &dir, Some(&url), Some(&sum)).unwrap();
        assert_eq!(out, dir.join("cifar-10-batches-bin"));
        verify_cifar(&out).unwrap();
        assert!(!out.join("readme.html").exists());
        assert!(dir.join("cifar-10-binary.tar.gz").exists());
        // a second fetch finds it there and downloads nothing (the server is gone)
        fetch(Dataset::Cifar10, &dir, Some(&url), Some(&sum)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_download_is_an_error_and_leaves_nothing_behind() {
        let url = serve(b"not an archive".to_vec(), 1);
        let dir = tmp("bad");
        let err = fetch(Dataset::Cifar10, &dir, Some(&url), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("corrupt") && err.contains(CIFAR_MD5), "{err}");
        assert!(!dir.join("cifar-10-binary.tar.gz").exists());
        assert!(!dir.join("cifar-10-binary.tar.part").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unreachable_source_names_the_url() {
        let dir = tmp("offline");
        // a port nothing listens on
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/x.tar.gz");
        let err = format!(
            "{:#}",
            fetch(Dataset::Cifar10, &dir, Some(&url), None).unwrap_err()
        );
        assert!(err.contains(&url) && err.contains("online"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A server that answers with `head` (status line and headers), sends
    /// `body`, then keeps the connection open without a word.
    fn serve_raw(head: String, body: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            stream.write_all(head.as_bytes()).unwrap();
            let _ = stream.write_all(&body);
            std::thread::sleep(std::time::Duration::from_secs(20));
        });
        format!("http://{addr}/f")
    }

    fn small(url: String, max_bytes: u64) -> Download {
        Download {
            url,
            md5: "0".repeat(32),
            file: "f".into(),
            max_bytes,
        }
    }

    const QUICK: Patience = Patience {
        connect: std::time::Duration::from_secs(5),
        response: std::time::Duration::from_secs(1),
        per_read: std::time::Duration::from_secs(1),
    };

    #[test]
    fn a_stalled_or_oversized_download_is_stopped_and_removed() {
        let dir = tmp("limits");
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("f.bin");
        let part = dest.with_extension("part");
        // announced too large: refused before a byte is read
        let url = serve_raw(
            "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n".into(),
            Vec::new(),
        );
        let err = format!(
            "{:#}",
            download(&small(url, 4096), &dest, QUICK).unwrap_err()
        );
        assert!(err.contains("5000 bytes, more than the 4096"), "{err}");
        // no length, more than the cap: cut off
        let url = serve_raw(
            "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".into(),
            vec![7u8; 10_000],
        );
        let err = format!(
            "{:#}",
            download(&small(url, 4096), &dest, QUICK).unwrap_err()
        );
        assert!(err.contains("more than the 4096 bytes"), "{err}");
        assert!(!part.exists() && !dest.exists());
        // headers, a little body, then silence: the read times out
        let url = serve_raw(
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".into(),
            vec![1u8; 10],
        );
        let err = format!(
            "{:#}",
            download(&small(url, 4096), &dest, QUICK).unwrap_err()
        );
        assert!(err.contains("timeout: per read"), "{err}");
        assert!(!part.exists() && !dest.exists());
        // no answer at all: the response times out
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/f", listener.local_addr().unwrap());
        let err = format!(
            "{:#}",
            download(&small(url, 4096), &dest, QUICK).unwrap_err()
        );
        assert!(err.contains("timeout: receive response"), "{err}");
        drop(listener);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_archive_member_of_the_wrong_size_is_refused_unwritten() {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        let big = vec![0u8; CIFAR_BATCH_BYTES as usize + 1];
        let mut h = tar::Header::new_gnu();
        h.set_size(big.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, "cifar-10-batches-bin/data_batch_1.bin", &big[..])
            .unwrap();
        let bytes = tar.into_inner().unwrap().finish().unwrap();
        let dir = tmp("bomb");
        std::fs::create_dir_all(&dir).unwrap();
        let archive = dir.join("a.tar.gz");
        std::fs::write(&archive, bytes).unwrap();
        let out = dir.join("out");
        let err = format!("{:#}", extract_cifar(&archive, &out).unwrap_err());
        assert!(err.contains("data_batch_1.bin has 30730001 bytes"), "{err}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_batch_fails_verification() {
        let dir = tmp("short");
        std::fs::create_dir_all(&dir).unwrap();
        for m in CIFAR_MEMBERS {
            std::fs::write(dir.join(m), b"x").unwrap();
        }
        let err = verify_cifar(&dir).unwrap_err().to_string();
        assert!(err.contains("expected 30730000"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
