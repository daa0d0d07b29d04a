//! TensorBoard event files: a TensorBoard run per run
//! (`<experiment> (<scale>)/<run id> <grid point>/events.out.tfevents.*`),
//! its numbers as scalars `final/<metric>` (step 0), the figure's curve
//! as the scalar `curve/<y>` (step = iteration, wall time = start + the
//! run's own clock), and its parameters and tags as two Markdown tables
//! for the text plugin (`params`, `tags`).
//!
//! The format, written by hand (no TensorFlow): TFRecord framing (length,
//! masked CRC-32C of the length, the bytes, masked CRC-32C of the bytes)
//! around protobuf-encoded `Event` messages (tensorboard/compat/proto).

use std::path::Path;

use anyhow::{Context, Result};

use super::{Exported, ExportedRun};

/// CRC-32C (Castagnoli, reflected 0x82F63B78), the table built at compile
/// time.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

fn crc32c(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |c, &b| {
        CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// TFRecord's masked CRC.
fn masked(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord around `data`.
fn record(out: &mut Vec<u8>, data: &[u8]) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked(crc32c(&len)).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked(crc32c(data)).to_le_bytes());
}

/// Protobuf encoding, the few wire types an Event needs.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An `Event` (wall_time 1, step 2, file_version 3, summary 5).
fn event(wall_time: f64, step: i64, what: Option<&[u8]>, file_version: Option<&str>) -> Vec<u8> {
    let mut e = Vec::new();
    key(&mut e, 1, 1);
    e.extend_from_slice(&wall_time.to_le_bytes());
    if step != 0 {
        key(&mut e, 2, 0);
        varint(&mut e, step as u64);
    }
    if let Some(v) = file_version {
        bytes_field(&mut e, 3, v.as_bytes());
    }
    if let Some(summary) = what {
        bytes_field(&mut e, 5, summary);
    }
    e
}

/// A `Summary` of one scalar `Summary.Value` (tag 1, simple_value 2).
fn scalar(tag: &str, value: f32) -> Vec<u8> {
    let mut v = Vec::new();
    bytes_field(&mut v, 1, tag.as_bytes());
    key(&mut v, 2, 5);
    v.extend_from_slice(&value.to_le_bytes());
    let mut summary = Vec::new();
    bytes_field(&mut summary, 1, &v);
    summary
}

/// A `Summary` of one text `Summary.Value`: a scalar string tensor
/// (dtype 1 = DT_STRING 7, string_val 8) with the text plugin's
/// metadata (plugin_data 1: plugin_name 1 = "text").
fn text(tag: &str, markdown: &str) -> Vec<u8> {
    let mut plugin = Vec::new();
    bytes_field(&mut plugin, 1, b"text");
    let mut metadata = Vec::new();
    bytes_field(&mut metadata, 1, &plugin);
    let mut tensor = Vec::new();
    key(&mut tensor, 1, 0);
    varint(&mut tensor, 7);
    bytes_field(&mut tensor, 8, markdown.as_bytes());
    let mut v = Vec::new();
    bytes_field(&mut v, 1, tag.as_bytes());
    bytes_field(&mut v, 8, &tensor);
    bytes_field(&mut v, 9, &metadata);
    let mut summary = Vec::new();
    bytes_field(&mut summary, 1, &v);
    summary
}

/// Pairs as a two-column Markdown table (`|` escaped).
fn markdown_table(head: [&str; 2], pairs: &[(String, String)]) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace(['\n', '\r'], " ");
    let mut t = format!("| {} | {} |\n|---|---|\n", head[0], head[1]);
    for (k, v) in pairs {
        t.push_str(&format!("| {} | {} |\n", esc(k), esc(v)));
    }
    t
}

/// The directory name of `s`: `/` replaced, so a name is one directory.
fn dir_name(s: &str) -> String {
    s.replace(['/', '\\'], "_")
}

/// The event file of run `r` of `e`.
fn events(e: &Exported, r: &ExportedRun) -> Vec<u8> {
    let start = e.written_ms as f64 / 1000.0;
    let end = start + r.seconds();
    let mut out = Vec::new();
    record(&mut out, &event(start, 0, None, Some("brain.Event:2")));
    record(
        &mut out,
        &event(
            start,
            0,
            Some(&text(
                "params",
                &markdown_table(["parameter", "value"], &r.params),
            )),
            None,
        ),
    );
    record(
        &mut out,
        &event(
            start,
            0,
            Some(&text("tags", &markdown_table(["tag", "value"], &r.tags))),
            None,
        ),
    );
    if let Some((y, points)) = &r.curve {
        for p in points.iter().filter(|p| p.value.is_finite()) {
            let summary = scalar(&format!("curve/{y}"), p.value as f32);
            record(
                &mut out,
                &event(
                    start + p.wall_s.max(0.0),
                    p.iteration as i64,
                    Some(&summary),
                    None,
                ),
            );
        }
    }
    for (k, v) in &r.metrics {
        record(
            &mut out,
            &event(
                end,
                0,
                Some(&scalar(&format!("final/{k}"), *v as f32)),
                None,
            ),
        );
    }
    out
}

/// Writes `experiments` as TensorBoard event files under `dir`: one
/// directory per experiment, one per run inside it. An experiment's
/// directory already there is replaced whole.
pub(crate) fn write(dir: &Path, experiments: &[Exported]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    for e in experiments {
        let name = dir_name(&format!("{} ({})", e.name, e.scale));
        // written beside, then swapped in whole
        let target = dir.join(&name);
        let tmp = crate::util::atomic::working_dir(&target);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("could not create {}", tmp.display()))?;
        for r in &e.runs {
            let run = tmp.join(dir_name(&r.name));
            std::fs::create_dir_all(&run)
                .with_context(|| format!("could not create {}", run.display()))?;
            let file = run.join(format!("events.out.tfevents.{}.repro", e.written_ms / 1000));
            std::fs::write(&file, events(e, r))
                .with_context(|| format!("could not write {}", file.display()))?;
        }
        crate::util::atomic::replace_dir(&tmp, &target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_and_its_mask_match_the_published_values() {
        // RFC 3720's check value, and TFRecord's mask of it
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(masked(0), 0xa282_ead8);
    }

    #[test]
    fn varints_and_records_are_framed_as_protobuf_and_tfrecord_say() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xAC, 0x02]);
        let mut r = Vec::new();
        record(&mut r, b"abc");
        assert_eq!(&r[..8], &3u64.to_le_bytes());
        assert_eq!(&r[12..15], b"abc");
        assert_eq!(r.len(), 8 + 4 + 3 + 4);
        assert_eq!(
            u32::from_le_bytes(r[15..].try_into().unwrap()),
            masked(crc32c(b"abc"))
        );
    }

    #[test]
    fn a_run_is_one_event_file_of_text_curve_and_final_scalars() {
        let e = crate::report::export::sample();
        let bytes = events(&e, &e.runs[0]);
        // file version, params, tags, one finite curve point, two finals
        let mut n = 0;
        let mut at = 0;
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            at += 12 + len + 4;
            n += 1;
        }
        assert_eq!((n, at), (6, bytes.len()));
        let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
        assert!(has(b"brain.Event:2") && has(b"curve/train_loss") && has(b"final/bytes"));
        assert!(has(b"| lr | 0.1 |"));
    }
}
