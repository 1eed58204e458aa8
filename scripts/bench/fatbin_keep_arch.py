"""Zeroes every CUDA binary in a shared library's fat binary except those for one architecture.

    python3 scripts/bench/fatbin_keep_arch.py IN.so OUT.so 90

onnxruntime-gpu's libonnxruntime_providers_cuda.so (272 MB) carries machine code for sm_75, 80,
86, 89, 90 and 120 in its .nv_fatbin section (198 MB of it). A GPU of compute capability 9.0 (H100,
H200) loads only the sm_90 entries: machine code of another major version cannot run there, and
the library has no PTX to compile. Zeroing the other entries' bytes (their headers stay, so the
section's layout and every offset are unchanged) lets the file compress to about 50 MB, which fits
the GPU machine's transfer limit (scripts/bench/encoder-cuda-pack.sh). The output runs only on
that architecture.
"""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50


def section(elf, want):
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    hdr = lambda i: struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
    stroff = hdr(shstrndx)[4]
    for i in range(shnum):
        h = hdr(i)
        name = elf[stroff + h[0] : elf.index(b"\0", stroff + h[0])].decode()
        if name == want:
            return h[4], h[5]
    raise SystemExit(f"no {want} section")


def main():
    src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    elf = bytearray(open(src, "rb").read())
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise SystemExit(f"{src}: not a 64-bit ELF file")
    off, size = section(elf, ".nv_fatbin")
    end, p = off + size, off
    kept = zeroed = 0
    archs = {}
    while p < end - 16:
        magic, _ver, hsz, fsz = struct.unpack_from("<IHHQ", elf, p)
        if magic != FATBIN_MAGIC:
            p += 8  # fat binaries are 8-byte aligned, padding between them
            continue
        q, e = p + hsz, p + hsz + fsz
        while q < e:
            kind, _unk, ehsz, psz = struct.unpack_from("<HHIQ", elf, q)
            arch = struct.unpack_from("<I", elf, q + 28)[0]
            archs[(kind, arch)] = archs.get((kind, arch), 0) + psz
            if arch == keep:
                kept += psz
            else:
                if kind != 2:
                    raise SystemExit(f"entry of kind {kind} (not a cubin) for sm_{arch}: refusing to drop possible PTX")
                elf[q + ehsz : q + ehsz + psz] = bytes(psz)
                zeroed += psz
            q += ehsz + psz
        p = e
    if kept == 0:
        raise SystemExit(f"no sm_{keep} entries; found {sorted(archs)}")
    open(dst, "wb").write(elf)
    print(f"{dst}: kept {kept >> 20} MiB for sm_{keep}, zeroed {zeroed >> 20} MiB ({', '.join(f'sm_{a}' for (_k, a) in sorted(archs) if a != keep)})")


if __name__ == "__main__":
    main()
