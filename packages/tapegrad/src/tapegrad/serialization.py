"""tg.save / tg.load: tensors, arrays and nested containers of them (state dicts,
optimizer states) in a NumPy ``.npz`` file, loaded with ``allow_pickle=False``.

Loading a file never runs code from it: the arrays are plain numeric ``.npy`` entries and
the structure is a JSON manifest stored as bytes, so a file that carries a pickle (an
object array) is refused instead of executed.
"""

import json
import os
import zipfile

import numpy as np

from ._engine import TensorBase, get_device, new_tensor

_MANIFEST = "__tapegrad_manifest__"
_FORMAT = "tapegrad-npz"
_VERSION = 1


class _Writer:
    def __init__(self):
        self.arrays = {}

    def encode(self, obj, where):
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
                    "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not isinstance(k, (str, int)) or isinstance(k, bool):
                    raise TypeError(f"tg.save: dict keys must be str or int, {where} has {k!r}")
                items.append([k, self.encode(v, f"{where}[{k!r}]")])
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
    with open(path, "wb") as f:
        np.savez(f, **{_MANIFEST: blob}, **writer.arrays)


def load(path, device=None):
    """Load what save() wrote; tensors are placed on `device` (default cpu).

    Raises ValueError naming the file if it is not a tapegrad file, is truncated or corrupt,
    or carries pickled objects (which are never unpickled).
    """
    path = os.fspath(path)
    dev = get_device(device)
    try:
        with np.load(path, allow_pickle=False) as npz:
            if _MANIFEST not in npz.files:
                raise ValueError(f"tg.load: '{path}' is not a file written by tg.save (no manifest)")
            manifest = json.loads(npz[_MANIFEST].tobytes().decode("utf-8"))
            if manifest.get("format") != _FORMAT or manifest.get("version") != _VERSION:
                raise ValueError(f"tg.load: '{path}' has an unknown format {manifest.get('format')!r} "
                                 f"version {manifest.get('version')!r}")
            return _decode(manifest["root"], npz, dev, path)
    except FileNotFoundError:
        raise
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise ValueError(
                f"tg.load: '{path}' contains pickled Python objects; tapegrad never unpickles "
                f"(it could run code from the file), so the file was refused") from exc
        if str(exc).startswith("tg.load"):
            raise
        raise ValueError(f"tg.load: '{path}' is corrupt or truncated: {exc}") from exc
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, UnicodeDecodeError,
            json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"tg.load: '{path}' is corrupt or truncated "
                         f"({type(exc).__name__}: {exc})") from exc


def _decode(node, npz, dev, path):
    kind = node["t"]
    if kind == "tensor":
        arr = _array(npz, node["a"], path)
        return new_tensor(dev.asarray(arr), dev, node.get("grad", False))
    if kind == "array":
        return _array(npz, node["a"], path)
    if kind == "array0":
        return _array(npz, node["a"], path)[()]
    if kind == "value":
        return node["v"]
    if kind in ("list", "tuple"):
        items = [_decode(v, npz, dev, path) for v in node["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _decode(v, npz, dev, path) for k, v in node["items"]}
    raise ValueError(f"tg.load: '{path}' has an unknown entry type {kind!r}")


def _array(npz, key, path):
    arr = npz[key]
    if arr.dtype.kind not in "biufc":
        raise ValueError(f"tg.load: '{path}' entry {key} has dtype {arr.dtype}; refused")
    return arr
