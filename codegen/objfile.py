"""A structural check of ELF object code, run before LLVM's loader ever sees the bytes.

LLVM's runtime linker (RuntimeDyld, behind MCJIT's `add_object_file`) trusts its input: an
unknown relocation type, a section or relocation that points past the end of the file, or
an unresolvable symbol ends the process with `report_fatal_error` (SIGABRT) or a segfault,
never a Python exception. Object code read back from the disk cache therefore goes through
`check_object` first; see Note [What the object check covers].
"""
from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["BadObject", "check_object"]


class BadObject(ValueError):
    """Object code that LLVM must not be given: says which structure is wrong."""


# e_machine, and {relocation type: bytes it writes} of the relocations RuntimeDyldELF resolves
# (resolveX86_64Relocation / resolveAArch64Relocation; types it does not know abort).
_MACHINES = {
    "x86_64": (62, {0: 0, 1: 8, 2: 4, 4: 4, 10: 4, 11: 4, 24: 8}),
    "aarch64": (183, {0: 0, 257: 8, 258: 4, 259: 2, 260: 8, 261: 4, 262: 2, 264: 4, 266: 4,
                      268: 4, 269: 4, 273: 4, 274: 4, 275: 4, 277: 4, 278: 4, 279: 4, 280: 4,
                      282: 4, 283: 4, 284: 4, 285: 4, 286: 4, 299: 4, 314: 4}),
}
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = np.dtype([("offset", "<u8"), ("info", "<u8"), ("addend", "<i8")])
_NULL, _PROGBITS, _SYMTAB, _STRTAB, _RELA_T, _NOTE, _NOBITS = 0, 1, 2, 3, 4, 7, 8
_SECTION_TYPES = {_NULL, _PROGBITS, _SYMTAB, _STRTAB, _RELA_T, _NOTE, _NOBITS,
                  14, 15,           # init / fini arrays
                  0x6FFF4C03,       # LLVM address-significance table
                  0x70000001}       # x86-64 unwind tables (.eh_frame)
_SHF_ALLOC, _SHF_EXECINSTR = 0x2, 0x4
# write, alloc, execinstr, merge, strings, info link, link order, x86-64 large, aarch64
# pure code: no TLS (RuntimeDyld aborts on it), no compressed or group sections
_SHF_KNOWN = 0x1 | 0x2 | 0x4 | 0x10 | 0x20 | 0x40 | 0x80 | 0x10000000 | 0x20000000
_SHN_ABS = 0xFFF1
_STT_OK = {0, 1, 2, 3, 4}  # notype, object, func, section, file (no TLS, common, ifunc)
_MAX_SECTIONS, _MAX_ALIGN, _MAX_NOBITS = 4096, 4096, 1 << 28


def check_object(data: bytes, names: Iterable[str], arch: str,
                 resolvable: Callable[[str], bool]) -> None:
    """Raise BadObject unless `data` is a well-formed ELF64 relocatable object for `arch`
    (e.g. "x86_64") that defines every function in `names`, whose sections, symbols and
    relocations stay inside the file, whose relocations are of types LLVM resolves, and
    whose undefined symbols all satisfy `resolvable(name)`."""
    if arch not in _MACHINES or sys.byteorder != "little":
        raise BadObject(f"cached object code is not supported on {arch}/{sys.byteorder}")
    machine, relocs = _MACHINES[arch]
    sections = _sections(data, machine)
    shstr = _strtab(data, sections, _EHDR.unpack_from(data)[13])
    for sh in sections:
        _name(shstr, sh[0])
    symtabs = [i for i, sh in enumerate(sections) if sh[1] == _SYMTAB]
    if len(symtabs) != 1:
        raise BadObject(f"{len(symtabs)} symbol tables (expected one)")
    symbols = _symbols(data, sections, symtabs[0])
    for name, bind, typ, shndx, _ in symbols[1:]:
        if shndx == 0 and name and not resolvable(name):
            raise BadObject(f"undefined symbol {name!r} cannot be resolved in this process")
    defined = {}
    for name, bind, typ, shndx, _ in symbols:
        if bind == 1 and shndx not in (0, _SHN_ABS):
            if name in defined:
                raise BadObject(f"symbol {name!r} is defined twice")
            defined[name] = (typ, shndx)
    for name in names:
        typ, shndx = defined.get(name, (None, 0))
        if typ != 2 or not sections[shndx][2] & _SHF_EXECINSTR:
            raise BadObject(f"the object does not define the function {name!r}")
    for sh in sections:
        if sh[1] == _RELA_T:
            _check_relocations(data, sections, sh, symtabs[0], len(symbols), relocs)
        if _name(shstr, sh[0]) == ".eh_frame":
            _check_eh_frame(data[sh[4]:sh[4] + sh[5]])


def _sections(data: bytes, machine: int) -> list[tuple]:
    if len(data) < _EHDR.size:
        raise BadObject(f"{len(data)} bytes: too short for an ELF header")
    (ident, etype, emachine, version, _, _, shoff, _, ehsize, _, phnum, shentsize, shnum,
     shstrndx) = _EHDR.unpack_from(data)
    if ident[:7] != b"\x7fELF\x02\x01\x01":
        raise BadObject("not a little-endian ELF64 file (bad identification bytes)")
    if (etype, emachine, version) != (1, machine, 1):
        raise BadObject(f"ELF type {etype}, machine {emachine}, version {version}: expected a "
                        f"relocatable object (1) for machine {machine}, version 1")
    if (ehsize, phnum, shentsize) != (_EHDR.size, 0, _SHDR.size):
        raise BadObject("unexpected ELF header, program header or section header size")
    if not 1 <= shnum <= _MAX_SECTIONS or not shstrndx < shnum or shoff % 8:
        raise BadObject(f"{shnum} sections at {shoff}, section name table {shstrndx}")
    _within(data, shoff, shnum * _SHDR.size, "the section header table")
    sections = [_SHDR.unpack_from(data, shoff + i * _SHDR.size) for i in range(shnum)]
    nobits = 0
    for i, (_, typ, flags, _, offset, size, link, info, align, entsize) in enumerate(sections):
        if typ not in _SECTION_TYPES:
            raise BadObject(f"section {i} has unexpected type {typ:#x}")
        if align > _MAX_ALIGN or align & (align - 1) or flags & ~_SHF_KNOWN:
            raise BadObject(f"section {i} has alignment {align}, flags {flags:#x}")
        if typ == _NOBITS:
            nobits += size
        elif typ != _NULL:
            _within(data, offset, size, f"section {i}")
        if typ in (_SYMTAB, _RELA_T) and (entsize != 24 or size % 24 or offset % 8
                                          or link >= shnum):
            raise BadObject(f"section {i}: entry size {entsize}, size {size} at {offset}, "
                            f"link {link}")
        if typ == _RELA_T and not (0 < info < shnum and sections[info][2] & _SHF_ALLOC):
            raise BadObject(f"relocation section {i} applies to section {info}")
    if nobits > _MAX_NOBITS:
        raise BadObject(f"{nobits} bytes of zero-initialised sections")
    return sections


def _within(data: bytes, offset: int, size: int, what: str) -> None:
    if offset > len(data) or size > len(data) - offset:
        raise BadObject(f"{what} ({size} bytes at {offset}) extends past the end of the "
                        f"{len(data)}-byte object")


def _strtab(data: bytes, sections: list, index: int) -> bytes:
    _, typ, _, _, offset, size, *_ = sections[index]
    if typ != _STRTAB or size == 0 or data[offset + size - 1] != 0:
        raise BadObject(f"section {index} is not a NUL-terminated string table")
    return data[offset:offset + size]


def _name(table: bytes, offset: int) -> str:
    if offset >= len(table):
        raise BadObject(f"name offset {offset} outside its {len(table)}-byte string table")
    return table[offset:table.index(b"\0", offset)].decode("latin-1")


def _symbols(data: bytes, sections: list, index: int) -> list[tuple]:
    """(name, binding, type, section index, value) per symbol, each checked to lie in its
    section."""
    _, _, _, _, offset, size, link, first_global, *_ = sections[index]
    names = _strtab(data, sections, link)
    n = size // _SYM.size
    if n == 0 or first_global > n:
        raise BadObject(f"symbol table of {n} symbols, first global {first_global}")
    out = []
    for k, (name, info, _, shndx, value, sym_size) in enumerate(_SYM.iter_unpack(
            data[offset:offset + size])):
        bind, typ = info >> 4, info & 0xF
        if typ not in _STT_OK or bind > 2 or (shndx >= len(sections) and shndx != _SHN_ABS):
            raise BadObject(f"symbol {k}: type {typ}, binding {bind}, section {shndx}")
        if 0 < shndx < len(sections) and (value > sections[shndx][5]
                                          or sym_size > sections[shndx][5] - value):
            raise BadObject(f"symbol {k} ({sym_size} bytes at {value}) lies outside section "
                            f"{shndx}")
        out.append((_name(names, name), bind, typ, shndx, value))
    return out


def _check_relocations(data: bytes, sections: list, sh: tuple, symtab: int, n_symbols: int,
                       widths: dict) -> None:
    _, _, _, _, offset, size, link, target, *_ = sh
    if link != symtab:
        raise BadObject(f"relocations refer to section {link}, not the symbol table")
    rel = np.frombuffer(data, _RELA, size // _RELA.itemsize, offset)
    kind = rel["info"] & np.uint64(0xFFFFFFFF)
    table = np.full(max(widths) + 1, -1, np.int64)
    table[list(widths)] = list(widths.values())  # relocation type -> bytes written
    known = kind <= np.uint64(len(table) - 1)
    width = np.where(known, table[np.where(known, kind, 0).astype(np.int64)], -1)
    if (width < 0).any():
        raise BadObject(f"relocation type {int(kind[width < 0][0])} is not one LLVM resolves")
    if ((rel["info"] >> np.uint64(32)) >= np.uint64(n_symbols)).any():
        raise BadObject("a relocation refers to a symbol past the end of the symbol table")
    room = sections[target][5] - width  # the last offset where each relocation fits
    if (room < 0).any() or (rel["offset"] > np.uint64(1 << 62)).any() or \
            (rel["offset"].astype(np.int64) > room).any():
        raise BadObject(f"a relocation writes past the end of section {target}")


def _check_eh_frame(frame: bytes) -> None:
    """Records (CIEs and FDEs) tile the section, up to an optional zero terminator; each FDE
    points back at a CIE."""
    cies, pos = set(), 0
    while pos < len(frame):
        length = struct.unpack_from("<I", frame, pos)[0] if pos + 4 <= len(frame) else -1
        if length == 0:
            return
        if length < 4 or length == 0xFFFFFFFF or length > len(frame) - pos - 4:
            raise BadObject(f"bad .eh_frame record length {length} at {pos}")
        (cie_pointer,) = struct.unpack_from("<I", frame, pos + 4)
        if cie_pointer == 0:
            cies.add(pos)
        elif pos + 4 - cie_pointer not in cies:
            raise BadObject(f".eh_frame record at {pos} points at no CIE")
        pos += 4 + length


# Note [What the object check covers]
# A damaged cache entry must cost a recompile, never the process (issue 10, item 9). The
# entry's digest catches corruption on disk, but not an entry that is well formed on the
# outside and wrong inside (a bug, a foreign LLVM, a hand-made file with a recomputed
# digest), so `check_object` walks the structures RuntimeDyld reads without checking:
# - the ELF header: 64-bit little-endian relocatable object for the host machine, sane
#   header sizes, the section header table aligned and inside the file;
# - every section: a known type and flags (no TLS), a power-of-two alignment, contents
#   inside the file, symbol and relocation tables aligned with 24-byte entries, relocations
#   aimed at a loaded section. (LLVM does check some of this, but an error it reports
#   while loading is fatal too: MCJIT turns it into report_fatal_error);
# - string tables NUL-terminated, every name offset inside its table;
# - every symbol: a plain type (no TLS, common or ifunc), an existing section, and its bytes
#   inside that section; no global defined twice; every undefined symbol resolvable here (an
#   unresolved one is a fatal error at finalisation); the expected entry points defined as
#   functions in executable sections;
# - every relocation: a type from the table above (what RuntimeDyldELF resolves for the
#   host), a symbol index inside the table, and its bytes inside the target section;
# - .eh_frame (registered with the unwinder when loaded): records tile the section, FDEs
#   point at CIEs.
# What it cannot judge is the machine code itself: bytes flipped inside .text pass. That is
# what the digest is for (corruption), and the cache directory's ownership checks (malice:
# llgrad/cache.py, Note [Cache threat model]). Objects from other formats (Mach-O, COFF) or
# machines are refused, so on such hosts the disk cache never keeps object code.
