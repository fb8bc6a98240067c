"""Field offsets of the running kernel's structures, from its BTF (/sys/kernel/btf/vmlinux).

bcc compiles the probes against the installed kernel headers, which need not be the running
kernel's (setup links the newest headers package to a kernel that has none): a structure's layout
read from them can be another kernel's.  The probe program reads the one field it needs from a
task (`task_struct.sched_info.run_delay`) at the offset this module finds in the kernel's own type
information, handed in as a constant.  The format is the kernel's (Documentation/bpf/btf.rst):
a header, then the types (a `btf_type` each and its kind's trailing records), then the names.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

VMLINUX = Path("/sys/kernel/btf/vmlinux")
MAGIC = 0xEB9F
STRUCT, UNION, TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG = 4, 5, 8, 9, 10, 11, 18
# bytes each kind's trailing data takes: fixed, and per `vlen` item
_FIXED = {1: 4, 3: 12, 14: 4, 17: 4}
_PER_ITEM = {4: 12, 5: 12, 6: 8, 13: 8, 15: 12, 19: 12}
_SAME = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)  # kinds that only name or qualify another type


class BtfError(Exception):
    """The kernel's type information is missing, or does not have the field asked for."""


def _types(data: bytes) -> tuple[list[tuple[int, int, int, int, int]], bytes]:
    """(name offset, kind, kind_flag, size-or-type, offset of its trailing data) per type id (id 0:
    void), and the string section."""
    magic, _version, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data)
    if magic != MAGIC:
        raise BtfError("not BTF (bad magic)")
    types_at, strings = hdr_len + type_off, data[hdr_len + str_off: hdr_len + str_off + str_len]
    out = [(0, 0, 0, 0, 0)]
    pos, end = types_at, types_at + type_len
    while pos < end:
        name, info, size_or_type = struct.unpack_from("<III", data, pos)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        out.append((name, kind, info >> 31, size_or_type, pos + 12))
        pos += 12 + _FIXED.get(kind, 0) + _PER_ITEM.get(kind, 0) * vlen
    return out, strings


def _name(strings: bytes, off: int) -> str:
    return strings[off: strings.index(b"\0", off)].decode()


@functools.cache
def field_offset(path: str, source: Path = VMLINUX) -> int:
    """The byte offset of `path` ("task_struct.sched_info.run_delay": a structure, then members
    through nested structures) in the running kernel."""
    try:
        data = source.read_bytes()
    except OSError as e:
        raise BtfError(f"cannot read the kernel's type information {source}: {e.strerror}") from None
    types, strings = _types(data)
    top, *members = path.split(".")
    tid = next((i for i, t in enumerate(types) if t[1] == STRUCT and _name(strings, t[0]) == top), None)
    if tid is None:
        raise BtfError(f"the kernel has no struct {top}")
    offset = 0
    for m in members:
        while types[tid][1] in _SAME:
            tid = types[tid][3]
        _n, kind, kind_flag, _size, at = types[tid]
        vlen = struct.unpack_from("<I", data, at - 8)[0] & 0xFFFF
        for k in range(vlen):
            name, mtype, moff = struct.unpack_from("<III", data, at + 12 * k)
            if _name(strings, name) == m:
                offset += (moff & 0xFFFFFF if kind_flag else moff) // 8
                tid = mtype
                break
        else:
            raise BtfError(f"the kernel's {path.rsplit('.', 1)[0]} has no member {m}")
    return offset
