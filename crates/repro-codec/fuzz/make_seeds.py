#!/usr/bin/env python3
"""Writes seed frames for the frame_decode fuzz target into corpus/frame_decode/.

The frames are built from the header layout documented in src/frame.rs, not
by the codec itself, so they double as an independent check of that layout.

    python3 make_seeds.py && cargo +nightly fuzz run frame_decode
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "frame_decode")


def frame(kind, bits, length, bucket, body, modulus=0.0, hash_=None, iteration=7, sender=2):
    flags = 1 if hash_ is not None else 0
    header = struct.pack(
        "<2sBBBBHIIQIIfQ",
        b"MQ", 1, kind, bits, flags, 0, length, bucket, iteration, sender, len(body), modulus, hash_ or 0,
    )
    assert len(header) == 44
    return header + body


def packed(n, bits):
    return bytes((i * 37 + 11) % 256 for i in range((n * bits + 7) // 8))


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "f32": frame(0, 32, 3, 0, struct.pack("<3f", 1.0, -2.5, 0.125)),
        "moniqua3": frame(1, 3, 10, 0, packed(10, 3), modulus=4.03, hash_=0x1234),
        "moniqua8": frame(1, 8, 70, 0, packed(70, 8), modulus=4.03),
        "stochastic5": frame(2, 5, 20, 7, struct.pack("<3f", 1.0, 0.5, 2.0) + packed(20, 5)),
        "stochastic1": frame(2, 1, 9, 1024, struct.pack("<f", 0.25) + packed(9, 1)),
        # QSGD with 32767 levels: 16-bit codes
        "norm16": frame(3, 16, 9, 7, struct.pack("<2f", 1.0, 0.5) + packed(9, 16), modulus=32767.0),
        # top-k of 10 values: indices 1, 4, 9 in 4 bits each, then 3 f32
        "sparse": frame(4, 4, 10, 3, bytes([0x41, 0x09]) + struct.pack("<3f", 1.0, -2.0, 0.5)),
        # the fixed-precision quantizer: 4-bit codes on a grid of step 0.5
        "fixed4": frame(5, 4, 11, 0, packed(11, 4), modulus=0.5),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
