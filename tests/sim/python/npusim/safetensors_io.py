"""safetensors files: 8-byte little-endian header length, JSON header
(name -> {dtype, shape, data_offsets}), then the data region. The writer
leaves the data region as a sparse hole so multi-GB fixtures cost no disk."""
import glob
import json
import os
import struct

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E5M2": 1, "F8_E4M3": 1,
               "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
MAX_HEADER = 100 * 1024 * 1024


def tensor_bytes(dtype, shape):
    n = DTYPE_BYTES[dtype]
    for d in shape:
        n *= d
    return n


def write_sparse(path, tensors, metadata=None):
    """tensors: list of (name, dtype, shape). Returns the file's total size."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape in tensors:
        n = tensor_bytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + off)
    return 8 + len(raw) + off


def read_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError("%s: too short for a safetensors header" % path)
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise ValueError("%s: header length %d is absurd" % (path, n))
        return json.loads(f.read(n))


def model_tensors(model_dir):
    """[(name, dtype, shape, bytes)] over every *.safetensors in model_dir."""
    out = []
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        for name, info in read_header(path).items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            out.append((name, info["dtype"], info["shape"], e - b))
    return out
