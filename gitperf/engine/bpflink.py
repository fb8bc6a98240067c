"""uprobe_multi links through the raw bpf(2) system call.

bcc's Python API attaches one perf-event uprobe per function, which costs ~128 ms per probe to
detach on these machines (an RCU grace period each: ARCHITECTURE.md §6).  A BPF_LINK_TYPE_UPROBE_MULTI
link (kernel >= 6.6) attaches one program to many offsets in one call, with a per-offset cookie the
program reads back with bpf_get_attach_cookie(), and detaches them all with one close().
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), 321)
BPF_LINK_CREATE = 28
BPF_LINK_GET_NEXT_ID = 31
BPF_LINK_GET_FD_BY_ID = 30
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_TRACE_UPROBE_MULTI = 48  # enum bpf_attach_type
BPF_LINK_TYPE_UPROBE_MULTI = 12  # enum bpf_link_type
BPF_F_UPROBE_MULTI_RETURN = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    r = _libc.syscall(SYS_BPF, cmd, attr, len(attr))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


class UprobeMultiLink:
    """One link: `prog_fd` on `offsets` (file offsets) of `path`; closed on `close()` or GC."""

    def __init__(self, prog_fd: int, path: str, offsets: list[int], cookies: list[int], retprobe: bool):
        self.fd = -1  # __del__ runs even when the link was never created
        n = len(offsets)
        if n == 0 or n != len(cookies):
            raise ValueError("uprobe_multi needs as many cookies as offsets, and at least one")
        # keep the buffers alive while the kernel copies them
        self._path = ctypes.create_string_buffer(os.fsencode(path))
        self._offs = (ctypes.c_uint64 * n)(*offsets)
        self._cookies = (ctypes.c_uint64 * n)(*cookies)
        attr = ctypes.create_string_buffer(64)
        # union bpf_attr.link_create: prog_fd, target_fd, attach_type, flags, then uprobe_multi:
        # path, offsets, ref_ctr_offsets, cookies (u64 each), cnt, flags, pid (u32 each)
        struct.pack_into("IIII", attr, 0, prog_fd, 0, BPF_TRACE_UPROBE_MULTI, 0)
        struct.pack_into("QQQQIII", attr, 16, ctypes.addressof(self._path), ctypes.addressof(self._offs), 0,
                         ctypes.addressof(self._cookies), n, BPF_F_UPROBE_MULTI_RETURN if retprobe else 0, 0)
        self.fd = _bpf(BPF_LINK_CREATE, attr)

    def close(self) -> None:
        # clear the field first: a Ctrl-C between the close and the clearing would close the number
        # twice, and the second time it may already name another file
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self):
        self.close()


def kernel_supports_uprobe_multi() -> bool:
    """Kernel >= 6.6 has BPF_TRACE_UPROBE_MULTI; cheaper to ask the version than to probe."""
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 6)


def uprobe_multi_links() -> list[int]:
    """Ids of every uprobe_multi link on the system (for tests: nothing may leak)."""
    ids, cur = [], 0
    while True:
        attr = ctypes.create_string_buffer(16)
        struct.pack_into("I", attr, 0, cur)
        try:
            _bpf(BPF_LINK_GET_NEXT_ID, attr)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return ids
            raise
        cur = struct.unpack_from("II", attr, 0)[1]
        fa = ctypes.create_string_buffer(16)
        struct.pack_into("I", fa, 0, cur)
        try:
            fd = _bpf(BPF_LINK_GET_FD_BY_ID, fa)
        except OSError:
            continue  # gone meanwhile
        try:
            info = ctypes.create_string_buffer(256)
            ia = ctypes.create_string_buffer(16)
            struct.pack_into("IIQ", ia, 0, fd, len(info), ctypes.addressof(info))
            _bpf(BPF_OBJ_GET_INFO_BY_FD, ia)
            if struct.unpack_from("I", info, 0)[0] == BPF_LINK_TYPE_UPROBE_MULTI:
                ids.append(cur)
        finally:
            os.close(fd)
