"""Byte-plane shuffle of a safetensors file's tensor data (all 4-byte floats), and its inverse.

    python3 safetensors_shuffle.py shuffle|unshuffle IN OUT

The four bytes of each float32 are regrouped into four planes (every first byte, then every
second, ...): the exponent bytes then sit together and xz compresses the all-MiniLM-L6-v2 weights
to 75 MB instead of 80. Used by scripts/bench/encoder-cuda-pack.sh to fit the GPU machine's
transfer limit; `unshuffle` restores the file byte for byte (checked by sha256 on the machine).
"""
import struct
import sys

import numpy as np


def main():
    mode, src, dst = sys.argv[1:4]
    b = open(src, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head, body = b[: 8 + n], np.frombuffer(b[8 + n :], dtype=np.uint8)
    if body.size % 4:
        raise SystemExit(f"{src}: tensor data of {body.size} bytes is not whole 4-byte words")
    if mode == "shuffle":
        out = body.reshape(-1, 4).T
    elif mode == "unshuffle":
        out = body.reshape(4, -1).T
    else:
        raise SystemExit("mode: shuffle or unshuffle")
    with open(dst, "wb") as f:
        f.write(head)
        f.write(np.ascontiguousarray(out).tobytes())


if __name__ == "__main__":
    main()
