"""``DistributedDataParallel``: average the gradients of a module's parameters across the
ranks during ``backward()``, overlapping the communication with the rest of backward.

Note: [when the gradients are reduced]
tapegrad runs a leaf's hooks once per backward, when the leaf's gradient for that pass is
complete (summed over every use of the leaf), and adds the hook's result into ``.grad``
right after. DDP registers one such hook per parameter:

1. The hook copies the parameter's *accumulated* gradient, ``.grad`` (left by earlier
   backward passes under ``no_sync()``) + the new gradient, into its slot of a flat
   bucket, and returns the new gradient unchanged, so the engine accumulates ``.grad``
   locally as usual.
2. When the last slot of a bucket is filled, the bucket's ``Iallreduce`` starts (buckets
   start strictly in their index order, the same on every rank, as MPI requires of
   collectives) and backward goes on computing the gradients of earlier layers while it
   runs. Parameters are bucketed in reverse order of ``module.parameters()``, the order
   in which backward produces their gradients, so the last layers' bucket starts first.
   Every hook also polls the outstanding requests, which is what moves a non-blocking
   collective forward in an MPI library without a progress thread.
3. The hook of the **last** parameter to receive its gradient waits for every bucket (with
   the timeout of ``init``), divides by the world size, and writes the averages into every
   parameter's ``.grad``; for itself it sets ``.grad`` to None and returns the average, so
   the engine's accumulation that follows stores exactly the average. So when
   ``loss.backward()`` returns, every ``.grad`` holds the average over the ranks — no
   wrapper around ``backward()``, no callback the engine would need to offer.

Only a backward that accumulates into ``.grad`` reduces: under ``tg.grad`` (gradients
returned, ``.grad`` untouched) the hooks pass this rank's gradients through unchanged.

A reduction therefore completes when every parameter got its gradient. A parameter that
takes no part in the forward pass never does: ``find_unused_parameters=True`` walks the
graph of the output after each forward and counts such parameters as ready with a zero
gradient; without it, the next forward raises, naming them.

Gradients are copied into a fresh bucket buffer each step and ``.grad`` becomes a view of
it (no copy back), so a later step never writes into gradients a caller still holds.
"""

import contextlib
import numbers
import time
import weakref

import numpy as np
import tapegrad as tg
from tapegrad._engine import backward_accumulates as _backward_accumulates

# NOTE: the base class from tapegrad-nn itself, not tg.nn: this module is imported while
# tapegrad loads its plugins, possibly before tapegrad-nn has published tg.nn.
from tapegrad_nn.nn import Module

from .world import _mpi, _require, _sync_point, _wait

__all__ = ["DistributedDataParallel"]


class _Bucket:
    """Consecutive parameters of one dtype and device whose gradients are reduced by one
    Iallreduce of a flat buffer."""

    __slots__ = ("index", "params", "names", "offsets", "numel", "dtype", "device",
                 "buffer", "pending", "request", "started", "done", "ready", "unused")

    def __init__(self, index, dtype, device):
        self.index = index
        self.params = []          # the parameters, in the order they were added
        self.names = []           # their names in the module
        self.offsets = []         # start of each parameter's slot in the flat buffer
        self.numel = 0            # elements in the buffer
        self.dtype = dtype
        self.device = device      # the parameters' device
        self.buffer = None        # this step's flat buffer (host, or the device's if direct)
        self.pending = 0          # slots not yet filled in this step
        self.request = None       # the Iallreduce in flight
        self.started = False
        self.done = False
        self.ready = []           # per slot: filled in this step
        self.unused = []          # slots the forward found unused: filled at launch

    @property
    def nbytes(self):
        return self.numel * np.dtype(self.dtype).itemsize

    def reset(self):
        self.buffer = None
        self.pending = len(self.params)
        self.request = None
        self.started = self.done = False
        self.ready = [False] * len(self.params)
        self.unused = []


class CommStats:
    """What a ``DistributedDataParallel`` has communicated: ``steps`` (reductions
    completed), ``allreduces`` (bucket all-reduces started), ``bytes`` (gradient bytes
    all-reduced, the payload each rank contributes), ``bytes_per_step`` and
    ``wait_seconds`` (time spent at the end of backward waiting for buckets still in
    flight)."""

    def __init__(self, bytes_per_step):
        self.bytes_per_step = bytes_per_step
        self.steps = 0
        self.allreduces = 0
        self.bytes = 0
        self.wait_seconds = 0.0

    def __repr__(self):
        return (f"CommStats(steps={self.steps}, allreduces={self.allreduces}, "
                f"bytes={self.bytes}, bytes_per_step={self.bytes_per_step}, "
                f"wait_seconds={self.wait_seconds:.3g})")


def _is_real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


class DistributedDataParallel(Module):
    """Wrap `module` so that ``backward()`` leaves in every parameter's ``.grad`` the
    average of the gradients of all ranks: data-parallel training, each rank on its own
    share of every batch, the models kept identical by identical updates.

    At wrap time rank 0's parameters and buffers are copied to every rank (so the ranks
    start equal whatever their random seeds) after checking that every rank built the
    same model (names, shapes, dtypes). Calling the wrapper calls `module`; its
    parameters are the module's, named ``module.<name>``.

    Args:
        module: the ``tg.nn.Module`` to train.
        bucket_cap_mb: size of a gradient bucket in MiB (25 by default, as PyTorch). Each
            bucket is all-reduced as soon as all its gradients are computed, while backward
            goes on; smaller buckets start earlier, larger ones cost fewer messages.
        find_unused_parameters: walk the output's graph after each forward to find
            parameters that get no gradient from it, and count them as zero. Off by
            default (it costs a graph walk per step); without it such a parameter makes
            the next forward raise.
        broadcast_buffers: copy rank 0's buffers (running statistics) to every rank at
            the start of each forward.

    Use ``with ddp.no_sync():`` around the forward and backward of micro-batches whose
    gradients should only accumulate locally; the first backward outside it reduces
    everything accumulated. ``ddp.stats`` counts what was communicated.

    >>> import numpy as np, tapegrad as tg
    >>> world = tg.distributed.init()                    # run under mpiexec -n N
    >>> tg.manual_seed(0)
    >>> model = tg.distributed.DistributedDataParallel(tg.nn.Linear(4, 2))
    >>> x, y = tg.random.randn(8, 4), np.arange(8) % 2   # this rank's share of a batch
    >>> tg.cross_entropy(model(x), y).backward()
    >>> model.module.weight.grad.shape                   # averaged over the ranks
    (2, 4)
    >>> model.stats.steps, model.stats.bytes_per_step    # 10 float64 gradients per step
    (1, 80)
    """

    def __init__(self, module, bucket_cap_mb=25, find_unused_parameters=False,
                 broadcast_buffers=True):
        world = _require("DistributedDataParallel")
        if isinstance(module, DistributedDataParallel):
            raise TypeError("DistributedDataParallel: the module is already wrapped in "
                            "DistributedDataParallel; wrap the inner module once")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a tg.nn.Module, got "
                            f"{type(module).__name__}")
        if not _is_real(bucket_cap_mb):
            raise TypeError(f"DistributedDataParallel: bucket_cap_mb must be a number of MiB, "
                            f"got {bucket_cap_mb!r}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got "
                             f"{bucket_cap_mb}")
        super().__init__()
        self.module = module
        self.bucket_cap_mb = float(bucket_cap_mb)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.broadcast_buffers = bool(broadcast_buffers)
        self._world = world
        self._MPI = _mpi()
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("DistributedDataParallel: the module has no parameter that "
                             "requires grad: there is nothing to synchronize")
        self._named_buffers = [(n, b) for n, b in module.named_buffers() if b is not None]
        _check_same_model(world, named, self._named_buffers)
        _broadcast_from_root(world, [p for _, p in named] + [b for _, b in self._named_buffers],
                             "the parameters and buffers of rank 0 at wrap time")
        self._buckets = _make_buckets(named, int(self.bucket_cap_mb * 2 ** 20))
        self._n_params = len(named)
        self._require_sync = True
        self._n_ready = 0
        self._next_launch = 0
        self.stats = CommStats(sum(b.nbytes for b in self._buckets))
        self.trace = None
        """A list to record events in (``(time.perf_counter(), kind, what)`` with kind
        "grad_ready", "allreduce_start", "allreduce_done", "synced"), or None."""
        self._handles = []
        me = weakref.ref(self)
        for bucket in self._buckets:
            bucket.reset()
            for slot, p in enumerate(bucket.params):
                self._handles.append(p.register_hook(_make_hook(me, bucket, slot)))

    # -- public ---------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self._n_ready:
            missing = [n for b in self._buckets for n, r in zip(b.names, b.ready) if not r]
            raise RuntimeError(
                f"DistributedDataParallel: the previous backward did not produce gradients "
                f"for {len(missing)} parameter(s) ({', '.join(missing[:8])}"
                f"{', ...' if len(missing) > 8 else ''}), so their all-reduce never "
                f"started. If the model has parameters that some steps do not use, pass "
                f"find_unused_parameters=True; otherwise make every backward reach all of "
                f"them")
        if self.broadcast_buffers and self._named_buffers and self._world.size > 1:
            _broadcast_from_root(self._world, [b for _, b in self._named_buffers],
                                 "rank 0's buffers at the start of forward")
        out = self.module(*args, **kwargs)
        if self.find_unused_parameters and self._require_sync and tg.is_grad_enabled():
            reached = _leaves_reached(out)
            unused = [(b, slot) for b in self._buckets for slot, p in enumerate(b.params)
                      if id(p) not in reached]
            if len(unused) < self._n_params:     # else no backward will follow through it
                for bucket, slot in unused:
                    self._mark_unused(bucket, slot)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Within this block, backward only accumulates gradients locally; the first
        backward after it averages everything accumulated (gradient accumulation over
        micro-batches with one all-reduce).

        >>> import tapegrad as tg
        >>> world = tg.distributed.init()
        >>> model = tg.distributed.DistributedDataParallel(tg.nn.Linear(3, 1))
        >>> x = tg.ones((2, 3))
        >>> with model.no_sync():
        ...     model(x).sum().backward()            # local only
        >>> model(x).sum().backward()                # reduces both micro-batches
        >>> model.module.bias.grad, model.stats.steps
        (tensor([4.]), 1)
        """
        previous = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = previous

    def remove_hooks(self):
        """Stop synchronizing: unregister the gradient hooks from the parameters."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __repr__(self):
        return (f"DistributedDataParallel(rank {self._world.rank} of {self._world.size}, "
                f"{self._n_params} parameters in {len(self._buckets)} bucket(s) of at most "
                f"{self.bucket_cap_mb:g} MiB, {self.stats.bytes_per_step} bytes per step)"
                f"\n  {self.module!r}")

    # -- the hooks ------------------------------------------------------------------------
    def _event(self, kind, what):
        if self.trace is not None:
            self.trace.append((time.perf_counter(), kind, what))

    def _mark_unused(self, bucket, slot):
        """Count parameter `slot` of `bucket`, which this step's graph does not reach, as
        ready; its slot is filled (with its ``.grad``, or zeros) when the bucket starts,
        during backward, so a ``zero_grad()`` between forward and backward is seen."""
        if bucket.buffer is None:
            bucket.buffer = np.empty(bucket.numel, bucket.dtype)
        bucket.ready[slot] = True
        bucket.unused.append(slot)
        bucket.pending -= 1
        self._n_ready += 1

    def _on_grad(self, bucket, slot, g):
        """Put parameter `slot` of `bucket`'s accumulated gradient (``.grad`` + `g`) into
        the bucket; start buckets that are complete; finish the reduction when it was the
        last parameter. Returns what the engine should accumulate into ``.grad``."""
        if not self._require_sync:
            return g
        if bucket.ready[slot]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter '{bucket.names[slot]}' received a "
                f"second gradient before the parameters "
                f"{[n for b in self._buckets for n, r in zip(b.names, b.ready) if not r][:8]} "
                f"received their first: a backward did not reach every parameter (pass "
                f"find_unused_parameters=True if some are unused by design)")
        p = bucket.params[slot]
        self._event("grad_ready", bucket.names[slot])
        if bucket.buffer is None:
            bucket.buffer = np.empty(bucket.numel, bucket.dtype)
        start = bucket.offsets[slot]
        view = bucket.buffer[start:start + p.size]
        acc = p.grad
        if acc is None:
            view[...] = _host(g).reshape(-1)
        else:
            np.add(_host(acc).reshape(-1), _host(g).reshape(-1), out=view)
        bucket.ready[slot] = True
        bucket.pending -= 1
        self._n_ready += 1
        if bucket.pending == 0:
            self._launch_ready()
        self._progress()
        if self._n_ready == self._n_params:
            return self._finish(bucket, slot)
        return g

    def _launch_ready(self):
        MPI = self._MPI
        while self._next_launch < len(self._buckets):
            b = self._buckets[self._next_launch]
            if b.pending:
                return
            for slot in b.unused:
                p, start = b.params[slot], b.offsets[slot]
                view = b.buffer[start:start + p.size]
                if p.grad is None:
                    view[...] = 0
                else:
                    view[...] = _host(p.grad).reshape(-1)
            b.request = self._world.comm.Iallreduce(MPI.IN_PLACE, b.buffer, op=MPI.SUM)
            b.started = True
            self.stats.allreduces += 1
            self.stats.bytes += b.nbytes
            self._event("allreduce_start", b.index)
            self._next_launch += 1

    def _progress(self):
        for b in self._buckets[:self._next_launch]:
            if not b.done and b.request.Test():
                b.done = True
                self._event("allreduce_done", b.index)

    def _finish(self, last_bucket, last_slot):
        """Wait for every bucket, average, write ``.grad``; return the average for the
        parameter whose hook is running (the engine stores it), if any."""
        world = self._world
        t0 = time.perf_counter()
        for b in self._buckets:
            if not b.done:
                _wait(world, b.request, f"the gradient all-reduce of bucket {b.index} "
                      f"({', '.join(b.names[:4])}{', ...' if len(b.names) > 4 else ''})")
                b.done = True
                self._event("allreduce_done", b.index)
        self.stats.wait_seconds += time.perf_counter() - t0
        result = None
        for b in self._buckets:
            if world.size > 1:
                np.divide(b.buffer, world.size, out=b.buffer)
            for slot, (p, start) in enumerate(zip(b.params, b.offsets)):
                avg = b.buffer[start:start + p.size].reshape(p.shape)
                if b is last_bucket and slot == last_slot:
                    p.grad = None
                    result = _on_device(avg, p.device)
                else:
                    p.grad = _on_device(avg, p.device)
            b.reset()
        self._n_ready = 0
        self._next_launch = 0
        self.stats.steps += 1
        self._event("synced", self.stats.steps)
        return result


def _make_hook(ddp_ref, bucket, slot):
    def ddp_gradient_hook(g):
        ddp = ddp_ref()
        if ddp is None:                 # the wrapper is gone: plain local training
            return g
        if not _backward_accumulates():
            # NOTE: tg.grad returns gradients and leaves .grad alone: it gets this rank's
            # own gradients (as torch.autograd.grad under PyTorch's DDP), and the step's
            # reduction state is untouched. Reducing here would average only some
            # parameters and write the others' .grad.
            return g
        return ddp._on_grad(bucket, slot, g)
    return ddp_gradient_hook


def _host(t):
    """A tensor's data as a NumPy array (a view on cpu; a copy from other devices)."""
    if t.device.name == "cpu":
        return np.asarray(t)
    return np.asarray(t.detach().cpu())


def _on_device(arr, device):
    if device.name == "cpu":
        return tg.asarray(arr)
    return tg.asarray(arr, device=device)


def _make_buckets(named, cap_bytes):
    buckets = []
    current = {}                     # (dtype, device) -> the bucket being filled
    for name, p in reversed(named):
        key = (np.dtype(p.dtype), p.device.name)
        b = current.get(key)
        nbytes = p.size * key[0].itemsize
        if b is None or (b.params and b.nbytes + nbytes > cap_bytes):
            b = _Bucket(len(buckets), key[0], p.device)
            buckets.append(b)
            current[key] = b
        b.params.append(p)
        b.names.append(name)
        b.offsets.append(b.numel)
        b.numel += p.size
    return buckets


def _leaves_reached(out):
    """ids of the leaf tensors the graph behind `out` (tensors, possibly nested in tuples,
    lists and dicts) reaches; iterative, each node once."""
    stack, seen_nodes, leaves = [], set(), set()
    todo = [out]
    while todo:
        x = todo.pop()
        if isinstance(x, tg.Tensor):
            if x.grad_fn is not None:
                stack.append(x.grad_fn)
            elif x.requires_grad:
                leaves.add(id(x))
        elif isinstance(x, (tuple, list)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for nxt, _ in node.next_functions:
            if isinstance(nxt, tg.Tensor):
                leaves.add(id(nxt))
            elif nxt is not None:
                stack.append(nxt)
    return leaves


def _check_same_model(world, named, named_buffers):
    """Raise the same ValueError on every rank unless all ranks have the same parameters
    and buffers (names, shapes, dtypes), in the same order."""
    spec = [("parameter", n, tuple(p.shape), str(p.dtype)) for n, p in named]
    spec += [("buffer", n, tuple(b.shape), str(b.dtype)) for n, b in named_buffers]
    if world.size == 1:
        return
    _sync_point(world, "the other ranks to wrap their model in DistributedDataParallel")
    specs = world.comm.allgather(spec)
    ref = specs[0]
    for rank, other in enumerate(specs[1:], start=1):
        if other == ref:
            continue
        for i in range(max(len(ref), len(other))):
            a = ref[i] if i < len(ref) else None
            b = other[i] if i < len(other) else None
            if a != b:
                break
        describe = lambda s: "nothing" if s is None else f"{s[0]} '{s[1]}' of shape {s[2]} {s[3]}"
        raise ValueError(
            f"DistributedDataParallel: the ranks built different models: at position {i}, "
            f"rank 0 has {describe(a)} but rank {rank} has {describe(b)} (rank 0 has "
            f"{len(ref)} parameters and buffers, rank {rank} has {len(other)}); every rank "
            f"must build the same model")


def _broadcast_from_root(world, tensors, what):
    if world.size == 1 or not tensors:
        return
    bufs = [np.array(_host(t), copy=True, order="C") for t in tensors]
    requests = [world.comm.Ibcast(buf, root=0) for buf in bufs]
    for r in requests:
        _wait(world, r, what)
    if world.rank != 0:
        with tg.no_grad():
            for t, buf in zip(tensors, bufs):
                t[...] = _on_device(buf, t.device)
