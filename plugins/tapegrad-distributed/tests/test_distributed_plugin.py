"""The plugin as a whole, in one process (a world of one): its entry point, the names it
publishes, bad inputs, and the examples in its docs."""

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_distributed
from tapegrad.testing import run_doctests
from tapegrad_distributed import ddp, plugin, sampler, world

README = Path(__file__).resolve().parents[1] / "README.md"


def _mpi_in_process_or_skip():
    try:
        from mpi4py import MPI  # noqa: F401
    except Exception as exc:    # no mpi4py, or no MPI library it can load
        pytest.skip(f"mpi4py cannot load an MPI library in this process: {exc}")


@pytest.fixture
def one_rank():
    _mpi_in_process_or_skip()
    return tg.distributed.init()


def test_entry_point_resolves_to_the_plugin_module():
    (ep,) = [e for e in metadata.entry_points(group="tapegrad") if e.name == "distributed"]
    assert ep.load() is plugin
    assert "tapegrad-distributed" in tg.registry().plugins
    assert "tapegrad-distributed" not in tg.registry().failed


def test_it_publishes_tg_distributed():
    assert tg.distributed is tapegrad_distributed
    assert tapegrad_distributed.API == ("distributed",)
    for name in tapegrad_distributed.__all__:
        assert getattr(tg.distributed, name) is not None
    assert issubclass(tg.distributed.DistributedDataParallel, tg.nn.Module)
    assert issubclass(tg.distributed.DistributedDataLoader, tg.data.DataLoader)


# -- before init -----------------------------------------------------------------------------
# NOTE: these run before any test that calls init() (pytest keeps file order); a fresh
# process state is simulated by clearing the module's world.

@pytest.fixture
def no_world(monkeypatch):
    monkeypatch.setattr(world, "_WORLD", None)


@pytest.mark.parametrize("call", [
    lambda: tg.distributed.DistributedDataParallel(tg.nn.Linear(2, 2)),
    lambda: tg.distributed.get_rank(),
    lambda: tg.distributed.get_world_size(),
    lambda: tg.distributed.barrier(),
    lambda: tg.distributed.all_reduce(1.0),
    lambda: tg.distributed.DistributedSampler(10),
], ids=["DDP", "get_rank", "get_world_size", "barrier", "all_reduce", "sampler"])
def test_using_it_before_init_says_to_call_init(no_world, call):
    with pytest.raises(RuntimeError, match=r"call tg.distributed.init\(\) first"):
        call()


def test_the_sampler_needs_no_world_when_told_its_rank(no_world):
    assert len(tg.distributed.DistributedSampler(10, num_replicas=4, rank=3)) == 3


def test_tg_data_dataloader_takes_the_sampler_as_in_pytorch(no_world):
    x = np.arange(10.0)
    shards = []
    for rank in range(3):
        s = tg.distributed.DistributedSampler(10, num_replicas=3, rank=rank, seed=4)
        loader = tg.data.DataLoader(x, batch_size=2, sampler=s)
        by_hand = tg.distributed.DistributedDataLoader(x, batch_size=2, num_replicas=3,
                                                       rank=rank, seed=4)
        epochs = []
        for epoch in range(2):
            loader.set_epoch(epoch)              # forwarded to the sampler
            epochs.append(np.concatenate([b.numpy() for (b,) in loader]))
            assert np.array_equal(epochs[-1], np.concatenate([b.numpy() for (b,) in by_hand]))
        assert len(loader) == 2 and not np.array_equal(*epochs)
        shards.append(epochs[0])
    # 10 rows over 3 ranks: 4 each, two rows repeated so the ranks take as many steps
    assert sorted(set(np.concatenate(shards).tolist())) == x.tolist()


# -- bad inputs ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    ({"timeout": "10"}, TypeError, "timeout must be a number"),
    ({"timeout": 0}, ValueError, "timeout must be positive"),
    ({"comm": 3}, TypeError, "comm must be an mpi4py communicator"),
])
def test_init_rejects_bad_arguments(no_world, kwargs, exc, match):
    _mpi_in_process_or_skip()
    with pytest.raises(exc, match=match):
        tg.distributed.init(**kwargs)


@pytest.mark.parametrize("args, kwargs, exc, match", [
    (("not a module",), {}, TypeError, "module must be a tg.nn.Module, got str"),
    ((lambda x: x,), {}, TypeError, "module must be a tg.nn.Module, got function"),
    ((tg.nn.ReLU(),), {}, ValueError, "no parameter that requires grad"),
    ((tg.nn.Linear(2, 2),), {"bucket_cap_mb": "25"}, TypeError, "bucket_cap_mb must be a number"),
    ((tg.nn.Linear(2, 2),), {"bucket_cap_mb": 0}, ValueError, "bucket_cap_mb must be positive"),
    ((tg.nn.Linear(2, 2),), {"bucket_cap_mb": True}, TypeError, "bucket_cap_mb"),
])
def test_ddp_rejects_bad_arguments(one_rank, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        tg.distributed.DistributedDataParallel(*args, **kwargs)


def test_ddp_refuses_to_wrap_twice(one_rank):
    inner = tg.distributed.DistributedDataParallel(tg.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="already wrapped"):
        tg.distributed.DistributedDataParallel(inner)


@pytest.mark.parametrize("args, kwargs, exc, match", [
    (("ten",), {"num_replicas": 2, "rank": 0}, TypeError, "number of rows or have a length"),
    ((10,), {"num_replicas": 0, "rank": 0}, ValueError, "num_replicas must be an int >= 1"),
    ((10,), {"num_replicas": 2, "rank": 2}, ValueError, r"rank must be in 0..1"),
    ((10,), {"num_replicas": 2, "rank": 1.0}, TypeError, "rank must be an int"),
    ((10,), {"num_replicas": 2, "rank": 0, "seed": -1}, ValueError, "seed must be an int >= 0"),
    ((1,), {"num_replicas": 2, "rank": 0, "drop_last": True}, ValueError, "cannot give each"),
])
def test_sampler_rejects_bad_arguments(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        tg.distributed.DistributedSampler(*args, **kwargs)


def test_loader_rejects_a_sampler_of_another_size():
    with pytest.raises(ValueError, match="the sampler is for 5 rows but the arrays have 4"):
        tg.distributed.DistributedDataLoader(
            np.zeros(4), sampler=tg.distributed.DistributedSampler(5, num_replicas=1, rank=0))
    with pytest.raises(TypeError, match="sampler must be a DistributedSampler"):
        tg.distributed.DistributedDataLoader(np.zeros(4), sampler=[0, 1], num_replicas=1, rank=0)


def test_collectives_reject_bad_arguments(one_rank):
    with pytest.raises(ValueError, match="op must be one of"):
        tg.distributed.all_reduce(1.0, op="prod")
    with pytest.raises(TypeError, match="expected a tensor, an ndarray or a number"):
        tg.distributed.all_reduce("1")
    with pytest.raises(ValueError, match="root must be a rank in 0..0"):
        tg.distributed.broadcast(1.0, root=1)


# -- in a world of one ---------------------------------------------------------------------

def test_in_a_world_of_one_ddp_gives_the_plain_gradients(one_rank):
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.Tanh(), tg.nn.Linear(7, 3))
    plain = tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.Tanh(), tg.nn.Linear(7, 3))
    plain.load_state_dict(net.state_dict())
    model = tg.distributed.DistributedDataParallel(net, bucket_cap_mb=1e-4)
    x, y = tg.random.randn(6, 5), np.arange(6) % 3
    for m in (model, plain):
        tg.cross_entropy(m(x), y).backward()
    assert len(model._buckets) > 1
    for p, q in zip(net.parameters(), plain.parameters()):
        assert np.array_equal(p.grad.numpy(), q.grad.numpy())
    assert list(model.state_dict()) == ["module." + k for k in plain.state_dict()]
    assert model.stats.steps == 1 and model.stats.allreduces == len(model._buckets)


def test_a_compiled_ddp_step_records_twice_then_runs_eagerly(one_rank):
    # DDP's hooks are Python a replay would skip, so the step runs eagerly; its per-step
    # bookkeeping (private attributes) must not make tg.compile record on every call.
    tg.manual_seed(0)
    model = tg.distributed.DistributedDataParallel(tg.nn.Linear(3, 2))
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x = tg.ones((4, 3))

    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = tg.compile(step)
    with pytest.warns(tg.CompileWarning, match="ddp_gradient_hook"):
        losses = [compiled(x).item() for _ in range(6)]
    assert compiled.cache_info().misses == 2 and compiled.cache_info().hits == 4
    assert losses[0] > losses[-1] and model.stats.steps == 6


def test_buckets_follow_reverse_parameter_order_and_the_cap(one_rank):
    net = tg.nn.Sequential(*[tg.nn.Linear(256, 256, dtype=np.float32) for _ in range(4)])
    model = tg.distributed.DistributedDataParallel(net, bucket_cap_mb=0.3)   # 256 KiB weights
    names = [b.names for b in model._buckets]
    assert names[0][0] == "3.bias" and names[-1][-1] == "0.weight"
    assert all(b.nbytes <= 0.3 * 2 ** 20 or len(b.params) == 1 for b in model._buckets)
    assert model.stats.bytes_per_step == 4 * sum(p.size for p in net.parameters())


def test_remove_hooks_stops_synchronizing(one_rank):
    model = tg.distributed.DistributedDataParallel(tg.nn.Linear(2, 1))
    model.remove_hooks()
    model(tg.ones((1, 2))).sum().backward()
    assert model.stats.steps == 0 and model.module.bias.grad is not None


@pytest.mark.parametrize("module", [tapegrad_distributed, world, ddp, sampler],
                         ids=lambda m: m.__name__)
def test_docstring_examples_run(one_rank, module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run(one_rank):
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0


def test_tg_grad_under_ddp_returns_local_gradients_and_leaves_grad_and_the_step_alone(one_rank):
    # It used to run the DDP hooks: one parameter got .grad + g (the "average"), the others
    # their local gradient, and every .grad was written.
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 2))
    model = tg.distributed.DistributedDataParallel(net)
    x = tg.random.randn(5, 3)
    params = list(net.parameters())
    model(x).sum().backward()                        # a reduced step: .grad is set
    before = [p.grad.numpy().copy() for p in params]
    steps = model.stats.steps
    grads = tg.grad(model(x).sum(), params)
    plain = tg.grad(net(x).sum(), params)            # the same computation without DDP
    for g, q, p, b in zip(grads, plain, params, before):
        assert np.array_equal(g.numpy(), q.numpy())
        assert np.array_equal(p.grad.numpy(), b)     # .grad untouched
    assert model.stats.steps == steps
    model(x).sum().backward()                        # the next backward still reduces
    assert model.stats.steps == steps + 1
    for p, b in zip(params, before):
        np.testing.assert_allclose(p.grad.numpy(), 2 * b, rtol=1e-12)


def test_all_reduce_mean_keeps_complex_values(one_rank):
    # (it cast a complex mean to float64, dropping the imaginary part)
    z = np.array([1.0 + 2.0j, -0.5j])
    out = tg.distributed.all_reduce(tg.tensor(z), op="mean")
    assert isinstance(out, tg.Tensor) and out.dtype == np.complex128
    np.testing.assert_array_equal(out.numpy(), z)
