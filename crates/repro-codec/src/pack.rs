//! Dense bit packing: `b` bits per value, little-endian.
//!
//! Value `i` occupies bits `[i*b, (i+1)*b)` of the byte stream, where bit `j`
//! of the stream is bit `j % 8` of byte `j / 8`. Eight values make exactly `b`
//! bytes, so the packer works on groups of eight, and a stream of `n` values is
//! `ceil(n * b / 8)` bytes; unused high bits of the last byte are zero.
//!
//! Widths 1 to 8 carry the quantizers' codes and have fast paths; widths 9
//! to 32 (QSGD with more than 127 levels, a sparsifier's indices) go
//! through one bit accumulator with the same layout.

/// Bytes needed for `n` values of `bits` bits each.
pub fn packed_len(n: usize, bits: u32) -> usize {
    (n * bits as usize).div_ceil(8)
}

/// Values whose width divides 8: each byte holds `8 / B` whole values.
#[inline(always)]
fn pack_bytes<const B: usize>(codes: &[u32], out: &mut [u8]) {
    let per = 8 / B;
    let mask = (1u32 << B) - 1;
    for (dst, group) in out.iter_mut().zip(codes.chunks_exact(per)) {
        let mut byte = 0u32;
        for (t, &c) in group.iter().enumerate() {
            byte |= (c & mask) << (t * B);
        }
        *dst = byte as u8;
    }
}

#[inline(always)]
fn unpack_bytes<const B: usize>(bytes: &[u8], out: &mut [u32]) {
    let per = 8 / B;
    let mask = (1u32 << B) - 1;
    for (&src, group) in bytes.iter().zip(out.chunks_exact_mut(per)) {
        for (t, c) in group.iter_mut().enumerate() {
            *c = (u32::from(src) >> (t * B)) & mask;
        }
    }
}

/// Other widths: eight values make exactly `B` bytes.
#[inline(always)]
fn pack_groups<const B: usize>(codes: &[u32], out: &mut [u8]) {
    let mask = (1u64 << B) - 1;
    for (group, dst) in codes.chunks_exact(8).zip(out.chunks_exact_mut(B)) {
        let mut w = 0u64;
        for (t, &c) in group.iter().enumerate() {
            w |= (u64::from(c) & mask) << (t * B);
        }
        dst.copy_from_slice(&w.to_le_bytes()[..B]);
    }
}

#[inline(always)]
fn unpack_groups<const B: usize>(bytes: &[u8], out: &mut [u32]) {
    let mask = (1u64 << B) - 1;
    for (src, group) in bytes.chunks_exact(B).zip(out.chunks_exact_mut(8)) {
        let mut le = [0u8; 8];
        le[..B].copy_from_slice(src);
        let w = u64::from_le_bytes(le);
        for (t, c) in group.iter_mut().enumerate() {
            *c = ((w >> (t * B)) & mask) as u32;
        }
    }
}

/// Widths 1 and 2: the `32 / B` values of each little-endian 32-bit word at
/// once (a broadcast, a shift by the lane's offset and a mask: whole vector
/// registers, where a byte at a time writes the codes in pieces that the
/// next loop's full-width loads then wait for).
#[inline(always)]
fn unpack_words<const B: usize>(bytes: &[u8], out: &mut [u32]) {
    let mask = (1u32 << B) - 1;
    let mut groups = out.chunks_exact_mut(32 / B);
    let mut words = bytes.chunks_exact(4);
    for (group, w) in (&mut groups).zip(&mut words) {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        for (t, c) in group.iter_mut().enumerate() {
            *c = (w >> (t * B)) & mask;
        }
    }
    unpack_bytes::<B>(words.remainder(), groups.into_remainder());
}

/// Packs `codes` (a multiple of 8 values) at compile-time width `B`.
#[inline(always)]
pub(crate) fn pack_fixed<const B: usize>(codes: &[u32], out: &mut [u8]) {
    match B {
        1 | 2 | 4 => pack_bytes::<B>(codes, out),
        8 => {
            for (d, &c) in out.iter_mut().zip(codes) {
                *d = c as u8;
            }
        }
        _ => pack_groups::<B>(codes, out),
    }
}

/// Unpacks `out` (a multiple of 8 values) at compile-time width `B`.
#[inline(always)]
pub(crate) fn unpack_fixed<const B: usize>(bytes: &[u8], out: &mut [u32]) {
    match B {
        1 | 2 => unpack_words::<B>(bytes, out),
        4 => unpack_bytes::<B>(bytes, out),
        8 => {
            for (o, &b) in out.iter_mut().zip(bytes) {
                *o = u32::from(b);
            }
        }
        _ => unpack_groups::<B>(bytes, out),
    }
}

pub(crate) fn pack_tail(codes: &[u32], bits: u32, out: &mut [u8]) {
    let mask = (1u64 << bits) - 1;
    let mut w = 0u64;
    for (t, &c) in codes.iter().enumerate() {
        w |= (u64::from(c) & mask) << (t as u32 * bits);
    }
    let n = out.len();
    out.copy_from_slice(&w.to_le_bytes()[..n]);
}

pub(crate) fn unpack_tail(bytes: &[u8], bits: u32, out: &mut [u32]) {
    let mask = (1u64 << bits) - 1;
    let mut le = [0u8; 8];
    le[..bytes.len()].copy_from_slice(bytes);
    let w = u64::from_le_bytes(le);
    for (t, c) in out.iter_mut().enumerate() {
        *c = ((w >> (t as u32 * bits)) & mask) as u32;
    }
}

/// Widths 9 to 32: a 64-bit accumulator that never holds more than 39 bits.
fn pack_wide(codes: &[u32], bits: u32, out: &mut [u8]) {
    let mask = (1u64 << bits) - 1;
    let (mut acc, mut held, mut o) = (0u64, 0u32, 0usize);
    for &c in codes {
        acc |= (u64::from(c) & mask) << held;
        held += bits;
        while held >= 8 {
            out[o] = acc as u8;
            acc >>= 8;
            held -= 8;
            o += 1;
        }
    }
    if held > 0 {
        out[o] = acc as u8;
    }
}

fn unpack_wide(bytes: &[u8], bits: u32, out: &mut [u32]) {
    let mask = (1u64 << bits) - 1;
    let (mut acc, mut held, mut i) = (0u64, 0u32, 0usize);
    for c in out.iter_mut() {
        while held < bits {
            acc |= u64::from(bytes[i]) << held;
            held += 8;
            i += 1;
        }
        *c = (acc & mask) as u32;
        acc >>= bits;
        held -= bits;
    }
}

/// Packs the low `bits` bits of each code into `out`, which must be exactly
/// `packed_len(codes.len(), bits)` bytes. Higher bits of the codes are ignored.
///
/// # Panics
/// If `bits` is not in 1..=32 or `out` has the wrong length (caller bugs, not
/// input errors: frames are validated before they reach the unpacker).
#[inline(always)]
pub fn pack(codes: &[u32], bits: u32, out: &mut [u8]) {
    assert!((1..=32).contains(&bits), "bits must be in 1..=32");
    assert_eq!(
        out.len(),
        packed_len(codes.len(), bits),
        "packed buffer length"
    );
    if bits > 8 {
        return pack_wide(codes, bits, out);
    }
    let full = codes.len() / 8 * 8;
    let split = full / 8 * bits as usize;
    let (head, tail) = out.split_at_mut(split);
    let codes_head = &codes[..full];
    match bits {
        1 => pack_fixed::<1>(codes_head, head),
        2 => pack_fixed::<2>(codes_head, head),
        3 => pack_fixed::<3>(codes_head, head),
        4 => pack_fixed::<4>(codes_head, head),
        5 => pack_fixed::<5>(codes_head, head),
        6 => pack_fixed::<6>(codes_head, head),
        7 => pack_fixed::<7>(codes_head, head),
        _ => pack_fixed::<8>(codes_head, head),
    }
    if full < codes.len() {
        pack_tail(&codes[full..], bits, tail);
    }
}

/// Unpacks `out.len()` codes of `bits` bits from `bytes`, which must be
/// exactly `packed_len(out.len(), bits)` bytes.
///
/// # Panics
/// As [`pack`].
#[inline(always)]
pub fn unpack(bytes: &[u8], bits: u32, out: &mut [u32]) {
    assert!((1..=32).contains(&bits), "bits must be in 1..=32");
    assert_eq!(
        bytes.len(),
        packed_len(out.len(), bits),
        "packed buffer length"
    );
    if bits > 8 {
        return unpack_wide(bytes, bits, out);
    }
    let full = out.len() / 8 * 8;
    let split = full / 8 * bits as usize;
    let (head, tail) = bytes.split_at(split);
    let (out_head, out_tail) = out.split_at_mut(full);
    match bits {
        1 => unpack_fixed::<1>(head, out_head),
        2 => unpack_fixed::<2>(head, out_head),
        3 => unpack_fixed::<3>(head, out_head),
        4 => unpack_fixed::<4>(head, out_head),
        5 => unpack_fixed::<5>(head, out_head),
        6 => unpack_fixed::<6>(head, out_head),
        7 => unpack_fixed::<7>(head, out_head),
        _ => unpack_fixed::<8>(head, out_head),
    }
    if !out_tail.is_empty() {
        unpack_tail(tail, bits, out_tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_little_endian_dense() {
        // 3-bit values 1..=8 (8 wraps to 0): bits 001 010 011 100 101 110 111 000.
        let codes: Vec<u32> = (1..=8).collect();
        let mut out = vec![0u8; 3];
        pack(&codes, 3, &mut out);
        // stream (LSB first): 1,0,0, 0,1,0, 1,1,0, 0,0,1, 1,0,1, 0,1,1, 1,1,1, 0,0,0
        assert_eq!(out, vec![0b1101_0001, 0b0101_1000, 0b0001_1111]);
    }

    #[test]
    fn one_bit_matches_bit_order() {
        let codes = [1, 0, 0, 0, 0, 0, 0, 1, 1];
        let mut out = vec![0u8; 2];
        pack(&codes, 1, &mut out);
        assert_eq!(out, vec![0x81, 0x01]);
    }

    #[test]
    fn round_trip_every_width_and_odd_lengths() {
        for bits in 1..=32u32 {
            for n in [0usize, 1, 7, 8, 9, 15, 17, 1001] {
                let codes: Vec<u32> = (0..n as u32)
                    .map(|i| {
                        ((u64::from(i.wrapping_mul(2_654_435_761)) << 32) >> (64 - bits)) as u32
                    })
                    .collect();
                let mut bytes = vec![0u8; packed_len(n, bits)];
                pack(&codes, bits, &mut bytes);
                let mut back = vec![0u32; n];
                unpack(&bytes, bits, &mut back);
                assert_eq!(back, codes, "bits={bits} n={n}");
            }
        }
    }

    #[test]
    fn every_width_keeps_the_documented_bit_layout() {
        // bit j of the stream is bit j % 8 of byte j / 8, whatever path packs it
        for bits in 1..=32u32 {
            for n in [8usize, 32, 40, 64, 72, 1000] {
                let codes: Vec<u32> = (0..n as u32)
                    .map(|i| i.wrapping_mul(2_654_435_761))
                    .collect();
                let mut want = vec![0u8; packed_len(n, bits)];
                for (i, &c) in codes.iter().enumerate() {
                    for b in 0..bits as usize {
                        let j = i * bits as usize + b;
                        want[j / 8] |= (((c >> b) & 1) as u8) << (j % 8);
                    }
                }
                let mut got = vec![0u8; want.len()];
                pack(&codes, bits, &mut got);
                assert_eq!(got, want, "bits={bits} n={n}");
            }
        }
    }

    #[test]
    fn high_bits_are_ignored_and_padding_is_zero() {
        let codes = [0xFFFF_FFFFu32; 3];
        let mut out = vec![0u8; packed_len(3, 5)];
        pack(&codes, 5, &mut out);
        assert_eq!(out, vec![0xFF, 0x7F]);
    }
}
