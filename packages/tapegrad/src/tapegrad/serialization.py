"""tg.save / tg.load: tensors, arrays and nested containers of them (state dicts,
optimizer states) in a NumPy ``.npz`` file, loaded with ``allow_pickle=False``.

Loading a file never runs code from it: the arrays are plain numeric ``.npy`` entries and
the structure is a JSON manifest stored as bytes, so a file that carries a pickle (an
object array) is refused instead of executed.

Saving is atomic: the file is written next to its destination under a temporary name,
synced, then moved over it, so a save that fails midway (disk full) leaves the previous
file intact. Loading trusts nothing in the file: each array's declared shape is checked
against the bytes the archive really holds before anything is allocated, and the manifest's
nesting is bounded (see Note: [loading untrusted files]).
"""

import json
import math
import os
import secrets
import zipfile

import numpy as np

from ._engine import TensorBase, get_device, new_tensor

_MANIFEST = "__tapegrad_manifest__"
_FORMAT = "tapegrad-npz"
_VERSION = 1
# Containers nested deeper than this are refused by save and load (a state dict is a few
# levels deep; a crafted manifest thousands deep would exhaust the stack).
_MAX_DEPTH = 200


class _Writer:
    def __init__(self):
        self.arrays = {}

    def encode(self, obj, where, depth=0):
        if depth > _MAX_DEPTH:
            raise ValueError(f"tg.save: {where[:80]}... is nested more than {_MAX_DEPTH} "
                             f"containers deep; tg.load would refuse the file")
        if isinstance(obj, TensorBase):
            host = np.asarray(obj.device.to_numpy(obj._data))
            return {"t": "tensor", "a": self._add(host, where), "grad": bool(obj.requires_grad)}
        if isinstance(obj, np.ndarray):
            return {"t": "array", "a": self._add(obj, where)}
        if isinstance(obj, np.generic):
            return {"t": "array0", "a": self._add(np.asarray(obj), where)}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            if isinstance(obj, float) and not np.isfinite(obj):
                return {"t": "array0", "a": self._add(np.asarray(obj), where)}
            return {"t": "value", "v": obj}
        if isinstance(obj, (list, tuple)):
            return {"t": type(obj).__name__,
                    "items": [self.encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not isinstance(k, (str, int)) or isinstance(k, bool):
                    raise TypeError(f"tg.save: dict keys must be str or int, {where} has {k!r}")
                items.append([k, self.encode(v, f"{where}[{k!r}]", depth + 1)])
            return {"t": "dict", "items": items}
        raise TypeError(
            f"tg.save: cannot save {type(obj).__name__} at {where}: only tensors, arrays, "
            f"numbers, strings, None and lists/tuples/dicts of them are saved (no pickles)")

    def _add(self, arr, where):
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"tg.save: array at {where} has dtype {arr.dtype}; only numeric arrays are saved")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return key


def save(obj, path):
    """Save a tensor, array, or nested dict/list of them (a state dict) to `path` (.npz).

    >>> import os, tempfile, tapegrad as tg
    >>> path = os.path.join(tempfile.mkdtemp(), "w.npz")
    >>> tg.save({"w": tg.tensor([1.0, 2.0], requires_grad=True), "step": 3}, path)
    >>> tg.load(path)
    {'w': tensor([1., 2.], requires_grad=True), 'step': 3}
    """
    writer = _Writer()
    manifest = {"format": _FORMAT, "version": _VERSION, "root": writer.encode(obj, "obj")}
    blob = np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8)
    path = os.fspath(path)
    # NOTE: never open `path` itself for writing: truncating it first would destroy the
    # previous file if the write then fails (disk full, quota, interrupt). O_EXCL with a
    # random name cannot clobber anything; the mode is the usual 0o666 less the umask.
    # The real path: a symlink at `path` keeps pointing at the (new) file, as with open().
    folder, base = os.path.split(os.path.realpath(path))
    tmp = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{_MANIFEST: blob}, **writer.arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(folder, base))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX); best effort where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load(path, device=None):
    """Load what save() wrote; tensors are placed on `device` (default cpu).

    Raises ValueError naming the file if it is not a tapegrad file, is truncated or corrupt,
    carries pickled objects (which are never unpickled), declares arrays larger than the
    data it holds, or nests containers more than 200 deep. Memory used is bounded by the
    file's size: nothing it declares is allocated before being checked.
    """
    path = os.fspath(path)
    dev = get_device(device)
    try:
        zf = zipfile.ZipFile(path)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise                      # the path, not the file's content, is the problem
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        # NOTE: np.load would try to unpickle a file that is neither .npy nor zip and then
        # report "pickled data" for any text or random bytes; a tapegrad file is a zip.
        raise ValueError(f"tg.load: '{path}' is not a tapegrad file (or is corrupt or "
                         f"truncated): {type(exc).__name__}: {exc}") from exc
    try:
        with zf:
            reader = _Reader(zf, path)
            if _MANIFEST + ".npy" not in zf.namelist():
                raise ValueError(f"tg.load: '{path}' is not a file written by tg.save (no manifest)")
            try:
                manifest = json.loads(reader.array(_MANIFEST).tobytes().decode("utf-8"))
            except RecursionError:
                raise ValueError(f"tg.load: '{path}' has a manifest nested more than "
                                 f"{_MAX_DEPTH} containers deep; refused") from None
            meta = manifest if isinstance(manifest, dict) else {}
            if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
                raise ValueError(f"tg.load: '{path}' has an unknown format {meta.get('format')!r} "
                                 f"version {meta.get('version')!r}")
            return _decode(manifest["root"], reader, dev, path, 0)
    except ValueError as exc:
        if str(exc).startswith("tg.load"):
            raise
        raise ValueError(f"tg.load: '{path}' is corrupt or truncated: {exc}") from exc
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, UnicodeDecodeError,
            TypeError, AttributeError) as exc:
        raise ValueError(f"tg.load: '{path}' is corrupt or truncated "
                         f"({type(exc).__name__}: {exc})") from exc


# Note: [loading untrusted files]
# np.load trusts the .npy header: it allocates shape*itemsize bytes and only then reads, so
# a 100-byte header declaring 8 TiB is a MemoryError and one declaring 1 GiB over 1 MB of
# data really allocates 1 GiB. Here the header is read first and the bytes it promises are
# checked against the zip entry's size, and the entry's size against its stored size and
# the archive's length, before numpy reads anything. tg.save writes uncompressed entries;
# a compressed entry is refused because its declared size cannot be checked without
# inflating it (deflate reaches ~1000:1, so a 1 MB entry can be a real 1 GiB). Memory used
# by tg.load is therefore bounded by the size of the file.

class _Reader:
    """Reads the .npy entries of an open zip, checking declared sizes before allocating."""

    def __init__(self, zf, path):
        self.zf = zf
        self.path = path
        self.file_size = os.path.getsize(path)

    def array(self, key):
        path = self.path
        try:
            info = self.zf.getinfo(key + ".npy")
        except KeyError:
            raise ValueError(f"tg.load: '{path}' has no entry {key!r}: corrupt or truncated") from None
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(
                f"tg.load: '{path}' entry {key!r} is compressed; tg.save writes uncompressed "
                f"entries, and a compressed one is refused because its real size cannot be "
                f"checked before inflating it (see docs/decisions.md)")
        if info.file_size != info.compress_size or \
                info.header_offset + info.compress_size > self.file_size:
            raise ValueError(f"tg.load: '{path}' entry {key!r} declares {info.file_size} bytes "
                             f"but the archive holds {info.compress_size} of it: corrupt or crafted")
        with self.zf.open(info) as fp:
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
            else:
                raise ValueError(f"tg.load: '{path}' entry {key!r} has .npy version {version}; "
                                 f"tg.save writes 1.0 or 2.0")
            if dtype.hasobject:
                raise ValueError(
                    f"tg.load: '{path}' contains pickled Python objects; tapegrad never unpickles "
                    f"(it could run code from the file), so the file was refused")
            if dtype.kind not in "biufc":
                raise ValueError(f"tg.load: '{path}' entry {key} has dtype {dtype}; refused")
            declared = math.prod(shape) * dtype.itemsize
            if fp.tell() + declared != info.file_size:
                raise ValueError(
                    f"tg.load: '{path}' entry {key!r} declares shape {shape} of {dtype} "
                    f"({declared} bytes) but holds {info.file_size - fp.tell()} bytes of data: "
                    f"corrupt or crafted; nothing was allocated")
        with self.zf.open(info) as fp:
            return np.lib.format.read_array(fp, allow_pickle=False)


def _decode(node, reader, dev, path, depth):
    if depth > _MAX_DEPTH:
        raise ValueError(f"tg.load: '{path}' has a manifest nested more than {_MAX_DEPTH} "
                         f"containers deep; refused")
    kind = node["t"]
    if kind == "tensor":
        arr = reader.array(node["a"])
        return new_tensor(dev.asarray(arr), dev, node.get("grad", False))
    if kind == "array":
        return reader.array(node["a"])
    if kind == "array0":
        return reader.array(node["a"])[()]
    if kind == "value":
        return node["v"]
    if kind in ("list", "tuple"):
        items = [_decode(v, reader, dev, path, depth + 1) for v in node["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _decode(v, reader, dev, path, depth + 1) for k, v in node["items"]}
    raise ValueError(f"tg.load: '{path}' has an unknown entry type {kind!r}")
