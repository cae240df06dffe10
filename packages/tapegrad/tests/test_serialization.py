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
