"""Deep graphs of elementwise ops: correct gradients, no recursion, linear cost."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tapegrad as tg


def test_2000_op_mixed_chain_matches_numpy():
    x0 = np.array([0.3])
    x = tg.tensor(x0, requires_grad=True)
    y, v, dv = x, x0.copy(), np.ones(1)
    for _ in range(500):
        y = tg.sin(y)
        dv, v = dv * np.cos(v), np.sin(v)
        y = y * 1.001
        dv, v = dv * 1.001, v * 1.001
        y = y + 0.01
        v = v + 0.01
        y = tg.tanh(y)
        dv, v = dv * (1 - np.tanh(v) ** 2), np.tanh(v)
    y.backward()
    assert np.allclose(y.numpy(), v, rtol=1e-12)
    assert np.allclose(x.grad.numpy(), dv, rtol=1e-10)


@pytest.mark.slow
def test_million_op_elementwise_chain():
    script = textwrap.dedent("""
        import time, numpy as np, tapegrad as tg

        def run(n):
            x = tg.tensor(np.ones(1), requires_grad=True)
            t0 = time.perf_counter()
            y = x
            for i in range(n // 2):
                y = y * 1.0000001
                y = y - 1e-7
            y.backward()
            dt = time.perf_counter() - t0
            expected = 1.0000001 ** (n // 2)
            assert abs(x.grad.item() - expected) < 1e-9 * expected, x.grad.item()
            return dt

        small = run(100_000)
        big = run(1_000_000)
        print(f"RATIO {big / small:.2f} SMALL {small:.2f}s BIG {big:.2f}s")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    ratio = float(out.stdout.split("RATIO")[1].split()[0])
    assert ratio < 20.0, out.stdout
