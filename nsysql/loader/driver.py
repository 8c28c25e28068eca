"""SQLite inside ADBC's SQLite driver, switched from its serialized threading mode to multi-thread mode.

The driver links its own SQLite, built serialized (SQLITE_THREADSAFE=1): every `sqlite3_column_*` call takes
and releases the connection's mutex, two calls per value read (the type, then the value), and every SQLite
allocation takes a global one for its memory statistics. nsysql gives each reader thread its own ADBC
connection, never shared by two threads at once, which is what SQLite's multi-thread mode asks
(https://sqlite.org/threadsafe.html) and what ADBC asks of every connection anyway. Reading the 1M API calls
and 500k kernels of a 500k-kernel export into DuckDB on one core: 1.06 -> 0.81 CPU s, median of 10
alternating runs (BENCHMARKS.md).

The driver exports no SQLite function, so `sqlite3_config` is found in the library's own symbol table (its
ELF `.symtab`; the wheels keep it) and called by address, before the driver opens its first database. Any
doubt (not Linux ELF, no symbol table, a symbol missing, SQLite already initialised) leaves the driver as it
is. This changes process-wide state of a library that others in the process may use, so only the CLI, which
owns its process, asks for it (`nsysql.cli`); `nsysql.load()` in someone else's program leaves it alone.
"""

from __future__ import annotations

import os
import struct

SQLITE_OK = 0
SQLITE_CONFIG_MULTITHREAD = 2
SQLITE_CONFIG_MEMSTATUS = 9

_ELF_MACHINE = {"x86_64": 62, "aarch64": 183}
_ANCHOR = "AdbcDriverInit"  # exported: its address gives the library's load address
_wanted = False
_done: bool | None = None  # None: not tried; True: switched; False: left as it is


def want_multithread() -> None:
    """Ask for multi-thread mode: the next load's readers switch the driver (see raw.Readers.start)."""
    global _wanted
    _wanted = True


def prepare() -> bool | None:
    """Switch the driver to multi-thread mode if asked (`want_multithread`) and not tried yet; True if it is."""
    global _done
    if _wanted and _done is None:
        try:
            _done = _multithread()
        except Exception:  # noqa: BLE001 - an optimisation: never a reason to fail a load
            _done = False
    return _done


def _multithread() -> bool:
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("adbc_driver_sqlite")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "libadbc_driver_sqlite.so")
    if not os.path.isfile(path):
        return False
    syms = elf_functions(path, (_ANCHOR, "sqlite3_config"))
    if len(syms) != 2:
        return False
    lib = ctypes.CDLL(path)  # the driver manager's dlopen of the same path later returns this same library
    base = ctypes.cast(getattr(lib, _ANCHOR), ctypes.c_void_p).value - syms[_ANCHOR]
    if base % 4096:
        return False  # not the file that was loaded, or not a shared object as expected
    config = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(base + syms["sqlite3_config"])
    if config(SQLITE_CONFIG_MULTITHREAD) != SQLITE_OK:
        return False  # SQLite is already initialised in this process: it stays as it is
    config_int = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int)(base + syms["sqlite3_config"])
    config_int(SQLITE_CONFIG_MEMSTATUS, 0)  # no memory statistics: no global mutex per allocation
    return True


def elf_functions(path: str, names) -> dict[str, int]:
    """name -> address (st_value) of the functions `names` defined in the `.symtab` of the 64-bit
    little-endian ELF shared object at `path`, for this machine's architecture; {} if it is anything else."""
    import mmap

    machine = _ELF_MACHINE.get(os.uname().machine)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:4] != b"\x7fELF" or m[4] != 2 or m[5] != 1:  # ELFCLASS64, little-endian
            return {}
        e_type, e_machine = struct.unpack_from("<HH", m, 16)
        if e_type != 3 or e_machine != machine:  # ET_DYN
            return {}
        shoff, = struct.unpack_from("<Q", m, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", m, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", m, shoff + i * shentsize) for i in range(shnum)]
        out: dict[str, int] = {}
        for sh in sections:
            if sh[1] != 2 or sh[9] != 24:  # SHT_SYMTAB, Elf64_Sym entries
                continue
            sym_off, sym_size = sh[4], sh[5]
            str_off, str_size = sections[sh[6]][4], sections[sh[6]][5]
            for name in names:
                key = name.encode() + b"\0"
                # every offset in the string table where the name is spelled (a longer name may end in it)
                at = m.find(key, str_off, str_off + str_size)
                while at != -1:
                    out.update(_symbol_at(m, sym_off, sym_size, at - str_off, name))
                    if name in out:
                        break
                    at = m.find(key, at + 1, str_off + str_size)
        return out


def _symbol_at(m, sym_off: int, sym_size: int, name_off: int, name: str) -> dict[str, int]:
    """The defined function whose st_name is `name_off`, if the symbol table has one."""
    key = struct.pack("<I", name_off)
    i = m.find(key, sym_off, sym_off + sym_size)
    while i != -1:
        if (i - sym_off) % 24 == 0:
            _, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", m, i)
            if info & 0xF == 2 and shndx != 0 and value:  # STT_FUNC, defined
                return {name: value}
        i = m.find(key, i + 1, sym_off + sym_size)
    return {}
