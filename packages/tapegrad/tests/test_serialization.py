import pickle
import zipfile

import numpy as np
import pytest
import tapegrad as tg


def test_round_trip_of_a_state_dict(tmp_path):
    state = {
        "layer.weight": tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True),
        "layer.bias": tg.tensor(np.ones(2, np.float32)),
        "labels": np.array([1, 2, 3]),
        "optim": {"step": 7, "lr": 0.1, "betas": (0.9, 0.999), "state": {0: {"m": np.zeros(2)}},
                  "nothing": None, "name": "adam", "inf": float("inf")},
    }
    path = tmp_path / "state.npz"
    tg.save(state, path)
    back = tg.load(path)
    assert back.keys() == state.keys()
    assert back["layer.weight"].requires_grad and back["layer.weight"].tolist() == state["layer.weight"].tolist()
    assert back["layer.bias"].dtype == np.float32 and not back["layer.bias"].requires_grad
    assert back["labels"].tolist() == [1, 2, 3]
    assert back["optim"]["betas"] == (0.9, 0.999) and back["optim"]["step"] == 7
    assert back["optim"]["state"][0]["m"].tolist() == [0.0, 0.0]
    assert back["optim"]["nothing"] is None and back["optim"]["inf"] == float("inf")


def test_single_tensor(tmp_path):
    path = tmp_path / "t.npz"
    tg.save(tg.tensor([1.0, 2.0]), path)
    assert tg.load(path).tolist() == [1.0, 2.0]


def test_unsupported_objects_are_not_saved(tmp_path):
    with pytest.raises(TypeError, match="no pickles"):
        tg.save({"f": lambda: 1}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="dtype object"):
        tg.save({"o": np.array([{}], dtype=object)}, tmp_path / "x.npz")


class _Boom:
    def __reduce__(self):
        return (print, ("PICKLE CODE RAN",))


def test_a_file_carrying_a_pickle_is_refused_and_never_run(tmp_path, capsys):
    path = tmp_path / "evil.npz"
    np.savez(path, __tapegrad_manifest__=np.frombuffer(
        b'{"format": "tapegrad-npz", "version": 1, "root": {"t": "array", "a": "a0"}}',
        dtype=np.uint8), a0=np.array([_Boom()], dtype=object))
    with pytest.raises(ValueError, match="evil.npz.*pickled.*refused"):
        tg.load(path)
    assert "PICKLE CODE RAN" not in capsys.readouterr().out


def test_a_raw_pickle_file_is_refused(tmp_path):
    path = tmp_path / "model.npz"
    path.write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(ValueError, match="model.npz"):
        tg.load(path)


def test_truncated_and_corrupt_files_name_the_file(tmp_path):
    good = tmp_path / "good.npz"
    tg.save({"w": tg.ones((50, 50))}, good)
    data = good.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.npz.*corrupt or truncated"):
        tg.load(cut)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="junk.npz"):
        tg.load(junk)


def test_a_plain_npz_is_not_mistaken_for_a_tapegrad_file(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, w=np.ones(2))
    with pytest.raises(ValueError, match="plain.npz.*not a file written by tg.save"):
        tg.load(path)
    assert zipfile.is_zipfile(path)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "nope.npz")


def test_a_save_that_fails_midway_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    tg.save({"w": tg.tensor([1.0, 2.0])}, path)
    real_savez = np.savez

    def savez_then_disk_full(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")          # some bytes reach the file, then:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", savez_then_disk_full)
    with pytest.raises(OSError, match="No space left"):
        tg.save({"w": tg.tensor([9.0, 9.0, 9.0])}, path)
    monkeypatch.setattr(np, "savez", real_savez)
    assert tg.load(path)["w"].tolist() == [1.0, 2.0]        # the old file is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.npz"]   # no temp file left
    tg.save({"w": tg.tensor([3.0])}, path)                 # and a good save replaces it
    assert tg.load(path)["w"].tolist() == [3.0]


def _crafted(path, shape, payload=b"", deflate=False, descr="<f8"):
    """A tg.save-style file whose one array's .npy header declares `shape` but holds
    `payload` bytes of data."""
    import io
    manifest = b'{"format": "tapegrad-npz", "version": 1, "root": {"t": "array", "a": "a0"}}'
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.frombuffer(manifest, dtype=np.uint8))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": descr, "fortran_order": False, "shape": shape})
    kind = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__tapegrad_manifest__.npy", buf.getvalue())
        zf.writestr(zipfile.ZipInfo("a0.npy"), header.getvalue() + payload, compress_type=kind)
    return path


@pytest.mark.parametrize("shape, payload, deflate", [
    ((2 ** 40,), b"\0" * 64, False),                     # absurd: was a bare MemoryError
    ((10 ** 12, 10 ** 12), b"\0" * 64, False),          # beyond any size numpy allows
    ((2 ** 27,), b"\0" * 2 ** 20, True),                 # 1 GiB declared, 1 MB deflated
    ((2 ** 27,), b"\0" * 2 ** 20, False),                # 1 GiB declared, 1 MB stored
])
def test_a_declared_shape_larger_than_the_entry_is_refused_before_allocating(
        tmp_path, shape, payload, deflate):
    import tracemalloc
    path = _crafted(tmp_path / "crafted.npz", shape, payload, deflate)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="crafted.npz"):
            tg.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, f"tg.load allocated {peak} bytes for a crafted entry"


def test_a_manifest_nested_too_deep_is_a_value_error_naming_the_file(tmp_path):
    root = '{"t": "value", "v": 1}'
    for _ in range(3000):
        root = '{"t": "list", "items": [' + root + ']}'
    manifest = ('{"format": "tapegrad-npz", "version": 1, "root": ' + root + '}').encode()
    path = tmp_path / "deep.npz"
    np.savez(path, __tapegrad_manifest__=np.frombuffer(manifest, dtype=np.uint8))
    with pytest.raises(ValueError, match="deep.npz.*nested"):
        tg.load(path)
    with pytest.raises(ValueError, match="deep.npz.*nested"):   # below json's own limit too
        root = '{"t": "value", "v": 1}'
        for _ in range(300):
            root = '{"t": "list", "items": [' + root + ']}'
        buf = ('{"format": "tapegrad-npz", "version": 1, "root": ' + root + '}').encode()
        np.savez(path, __tapegrad_manifest__=np.frombuffer(buf, dtype=np.uint8))
        tg.load(path)


def test_saving_an_object_nested_too_deep_is_refused_with_the_limit(tmp_path):
    obj = 1
    for _ in range(3000):
        obj = [obj]
    with pytest.raises(ValueError, match="nested more than"):
        tg.save(obj, tmp_path / "deep.npz")
    assert not (tmp_path / "deep.npz").exists()
    ok = 1
    for _ in range(50):
        ok = [ok]
    tg.save(ok, tmp_path / "ok.npz")
    assert tg.load(tmp_path / "ok.npz") == ok


@pytest.mark.parametrize("content", [b"hello, this is a plain text file\n",
                                     bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8))])
def test_a_non_zip_file_is_not_a_tapegrad_file_not_a_pickle(tmp_path, content):
    path = tmp_path / "notes.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"notes.npz' is not a tapegrad file \(or is corrupt") as err:
        tg.load(path)
    assert "pickle" not in str(err.value)


def test_saving_through_a_symlink_replaces_its_target_not_the_link(tmp_path):
    target = tmp_path / "real.npz"
    tg.save(tg.tensor([1.0]), target)
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    tg.save(tg.tensor([2.0]), link)
    assert link.is_symlink() and tg.load(target).tolist() == [2.0]
