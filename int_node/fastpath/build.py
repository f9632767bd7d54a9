"""Building the fast path's BPF object: the generated layout header, vmlinux.h from this
kernel's BTF, clang. Rebuilt when the source, the layout or the kernel changes; the object
lives in a cache directory (``INTCC_FASTPATH_BUILD``, default ~/.cache/intcc/fastpath).

    python -m int_node.fastpath.build        (make setup runs it)
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

from . import layout

BPF_DIR = os.path.join(os.path.dirname(__file__), "bpf")
SOURCE = os.path.join(BPF_DIR, "intcc_node.bpf.c")
BTF = "/sys/kernel/btf/vmlinux"
CFLAGS = ["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-D__TARGET_ARCH_x86", "-Wall", "-Werror"]


class BuildError(RuntimeError):
    """The fast path cannot be built here; the message says what is missing."""


def build_dir() -> str:
    return os.environ.get("INTCC_FASTPATH_BUILD") or os.path.expanduser("~/.cache/intcc/fastpath")


def _kernel_id() -> str:
    st = os.stat(BTF)
    return f"{os.uname().release}-{st.st_size}"


def build() -> str:
    """Path of an up-to-date object file, built if needed."""
    if not os.path.exists(BTF):
        raise BuildError(f"{BTF} is missing: the kernel has no BTF, so the fast path's programs cannot be built")
    for tool in ("clang", "bpftool"):
        if shutil.which(tool) is None:
            raise BuildError(f"'{tool}' is not installed (make setup installs it)")
    header = layout.header_text()
    source = b""
    for name in sorted(os.listdir(BPF_DIR)):        # the program and the headers it includes
        with open(os.path.join(BPF_DIR, name), "rb") as f:
            source += name.encode() + f.read()
    digest = hashlib.sha256(source + header.encode() + _kernel_id().encode()).hexdigest()[:16]
    out_dir = build_dir()
    obj = os.path.join(out_dir, f"intcc_node-{digest}.bpf.o")
    if os.path.exists(obj):
        return obj
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "intcc_int_layout.h"), "w") as f:
        f.write(header)
    vmlinux = os.path.join(out_dir, f"vmlinux-{_kernel_id()}.h")
    if not os.path.exists(vmlinux):
        res = subprocess.run(["bpftool", "btf", "dump", "file", BTF, "format", "c"], capture_output=True, text=True)
        if res.returncode:
            raise BuildError(f"bpftool could not dump the kernel's BTF: {res.stderr.strip()}")
        with open(vmlinux + ".tmp", "w") as f:
            f.write(res.stdout)
        os.replace(vmlinux + ".tmp", vmlinux)
    shutil.copyfile(vmlinux, os.path.join(out_dir, "vmlinux.h"))
    res = subprocess.run(["clang", *CFLAGS, "-I", out_dir, "-I", BPF_DIR, "-c", SOURCE, "-o", obj + ".tmp"],
                         capture_output=True, text=True)
    if res.returncode:
        raise BuildError(f"clang could not build {SOURCE}:\n{res.stderr.strip()}")
    os.replace(obj + ".tmp", obj)
    return obj


if __name__ == "__main__":
    print(build())
