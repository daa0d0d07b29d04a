use std::io::BufRead;
use std::net::TcpListener;

use super::*;

/// The generated batches have CIFAR-10's layout (the official sizes,
/// labels 0-9 with every class present), and a class's images share
/// its pattern. The rehearsals (`rehearsal::table2_rehearses_at_paper_scale`
/// and one test per other paper scale) train on them through the
/// trainer's reader.
#[test]
fn generated_cifar10_has_the_official_layout() {
    let dir = std::env::temp_dir().join(format!("repro-cifar10-like-{}", std::process::id()));
    let path = fetch(Dataset::Cifar10Like, &dir, Source::default()).unwrap();
    assert_eq!(path, dir);
    let mut seen = [0usize; 10];
    for m in CIFAR_MEMBERS {
        let bytes = std::fs::read(dir.join(m)).unwrap();
        assert_eq!(bytes.len() as u64, CIFAR_BATCH_BYTES, "{m}");
        for record in bytes.chunks(CIFAR_RECORD) {
            seen[usize::from(record[0])] += 1;
        }
    }
    assert!(seen.iter().all(|&c| c > 5_000), "{seen:?}");
    let batch = std::fs::read(dir.join("test_batch.bin")).unwrap();
    let record = |i: usize| &batch[i * CIFAR_RECORD..(i + 1) * CIFAR_RECORD];
    let distance = |a: &[u8], b: &[u8]| -> u64 {
        a[1..]
            .iter()
            .zip(&b[1..])
            .map(|(&x, &y)| u64::from(x.abs_diff(y)))
            .sum()
    };
    let nth = |label: u8, skip: usize| {
        (0..10_000)
            .filter(|&i| record(i)[0] == label)
            .nth(skip)
            .unwrap()
    };
    let (a, b, c) = (nth(3, 0), nth(3, 1), nth(4, 0));
    assert!(distance(record(a), record(b)) < distance(record(a), record(c)));
    // kept when it is there and whole
    let again = fetch(Dataset::Cifar10Like, &dir, Source::default()).unwrap();
    assert_eq!(again, dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

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

fn mirror<'a>(url: &'a str, md5: Option<&'a str>) -> Source<'a> {
    Source {
        url: Some(url),
        md5,
        sha256: None,
    }
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
    let out = fetch(Dataset::Cifar10, &dir, mirror(&url, Some(&sum))).unwrap();
    assert_eq!(out, dir.join("cifar-10-batches-bin"));
    verify_cifar(&out).unwrap();
    assert!(!out.join("readme.html").exists());
    assert!(dir.join("cifar-10-binary.tar.gz").exists());
    // a second fetch finds it there and downloads nothing (the server is gone)
    fetch(Dataset::Cifar10, &dir, mirror(&url, Some(&sum))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_corrupt_download_is_an_error_and_leaves_nothing_behind() {
    let url = serve(b"not an archive".to_vec(), 1);
    let dir = tmp("bad");
    let err = fetch(Dataset::Cifar10, &dir, mirror(&url, None))
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
        fetch(Dataset::Cifar10, &dir, mirror(&url, None)).unwrap_err()
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
        sum: Sum::Md5("0".repeat(32)),
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

/// A LIBSVM file by URL and SHA-256: fetched, kept compressed, read by
/// the simulator's reader; a wrong checksum leaves nothing; epsilon's
/// pinned checksums refuse a mirror that serves something else.
#[test]
fn libsvm_files_are_fetched_by_sha256() {
    let text = "+1 1:0.5 2:-1\n-1 2:0.25\n";
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(text.as_bytes()).unwrap();
    let body = bz.finish().unwrap();
    let sum = hex(&Sha256::digest(&body));
    let url = serve(body.clone(), 1).replace("cifar-10-binary.tar.gz", "tiny.bz2");
    let dir = tmp("libsvm");
    let source = Source {
        url: Some(&url),
        md5: None,
        sha256: Some(&sum),
    };
    let path = fetch(Dataset::Libsvm, &dir, source).unwrap();
    assert_eq!(path, dir.join("tiny.bz2"));
    let ds = repro_algos::data::Dataset::read_libsvm(std::io::BufReader::new(
        bzip2::read::MultiBzDecoder::new(std::fs::File::open(&path).unwrap()),
    ))
    .unwrap();
    assert_eq!((ds.len(), ds.dim()), (2, 2));
    // there and verified: no second download (the server is gone)
    fetch(Dataset::Libsvm, &dir, source).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    let url = serve(body, 1).replace("cifar-10-binary.tar.gz", "tiny.bz2");
    let wrong = "ab".repeat(32);
    let err = format!(
        "{:#}",
        fetch(
            Dataset::Libsvm,
            &dir,
            Source {
                sha256: Some(&wrong),
                url: Some(&url),
                ..source
            }
        )
        .unwrap_err()
    );
    assert!(
        err.contains("corrupt: SHA-256") && err.contains(&sum),
        "{err}"
    );
    assert!(!dir.join("tiny.bz2").exists() && !dir.join("tiny.part").exists());
    let err = fetch(Dataset::Libsvm, &dir, Source::default()).unwrap_err();
    assert!(err.to_string().contains("--url and its --sha256"), "{err}");

    let url = serve(b"not epsilon".to_vec(), 1);
    let base = url.trim_end_matches("cifar-10-binary.tar.gz");
    let err = format!(
        "{:#}",
        fetch(
            Dataset::Epsilon,
            &dir,
            Source {
                url: Some(base),
                ..Source::default()
            }
        )
        .unwrap_err()
    );
    assert!(
        err.contains("epsilon_normalized.bz2 is corrupt") && err.contains(EPSILON_FILES[0].1),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The generated stand-in: written once as gzipped LIBSVM text of the
/// asked shape (unit rows, two labels), kept when whole, rewritten when
/// not.
#[test]
fn a_generated_set_is_written_once_and_checked() {
    let dir = tmp("generated");
    let path = dir.join("g.libsvm.gz");
    let g = Generated {
        samples: 30,
        dim: 12,
        noise: 0.5,
        seed: 1,
    };
    generate_epsilon_like(&path, &g).unwrap();
    let read = || {
        let mut ds = repro_algos::data::Dataset::read_libsvm(std::io::BufReader::new(
            flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap()),
        ))
        .unwrap();
        let labels = ds.binary_labels().unwrap();
        (ds, labels)
    };
    let (ds, labels) = read();
    assert_eq!((ds.len(), ds.dim(), labels), (30, 12, (-1.0, 1.0)));
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    generate_epsilon_like(&path, &g).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );
    // a truncated file is written again
    std::fs::write(&path, b"").unwrap();
    generate_epsilon_like(&path, &g).unwrap();
    assert_eq!(read().0, ds);
    assert!(matches!(
        known(Path::new("data/epsilon-like/epsilon_like.libsvm.gz")),
        Some(Known::Generated(EPSILON_LIKE))
    ));
    assert_eq!(
        known(Path::new("data/epsilon/epsilon_normalized.bz2")),
        Some(Known::Fetched(Dataset::Epsilon))
    );
    assert!(known(Path::new("elsewhere/epsilon_like.libsvm.gz")).is_none());
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
