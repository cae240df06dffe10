import asyncio
import threading

import pytest
import tapegrad as tg


def _records():
    return (tg.tensor([1.0], requires_grad=True) + 1.0).requires_grad


def test_no_grad_context_and_restore():
    assert tg.is_grad_enabled()
    with tg.no_grad():
        assert not tg.is_grad_enabled() and not _records()
        with tg.enable_grad():
            assert tg.is_grad_enabled() and _records()
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled() and _records()


def test_decorators():
    @tg.no_grad()
    def f():
        return tg.is_grad_enabled()

    @tg.enable_grad()
    def g():
        return tg.is_grad_enabled()

    assert f() is False and tg.is_grad_enabled()
    with tg.no_grad():
        assert g() is True and not tg.is_grad_enabled()


def test_decorated_generator_keeps_the_mode_only_inside():
    @tg.no_grad()
    def gen():
        yield tg.is_grad_enabled()
        yield tg.is_grad_enabled()

    it = gen()
    assert next(it) is False
    assert tg.is_grad_enabled()
    assert next(it) is False


def test_set_grad_enabled_as_function_context_and_decorator():
    tg.set_grad_enabled(False)
    try:
        assert not tg.is_grad_enabled()
    finally:
        tg.set_grad_enabled(True)
    assert tg.is_grad_enabled()
    with tg.set_grad_enabled(False):
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()

    @tg.set_grad_enabled(False)
    def f():
        return tg.is_grad_enabled()

    assert tg.is_grad_enabled() and f() is False and tg.is_grad_enabled()


def test_inference_mode():
    with tg.inference_mode():
        assert not _records()
    with tg.inference_mode(False):
        assert _records()


def test_exception_inside_restores_mode():
    with pytest.raises(KeyError):
        with tg.no_grad():
            raise KeyError
    assert tg.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def worker():
        seen["start"] = tg.is_grad_enabled()
        with tg.no_grad():
            entered.set()
            release.wait(5)
            seen["inside"] = tg.is_grad_enabled()

    with tg.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        entered.wait(5)
        with tg.enable_grad():
            seen["main"] = tg.is_grad_enabled()
        release.set()
        t.join()
    assert seen == {"start": True, "inside": False, "main": True}


def test_grad_mode_is_per_asyncio_task():
    async def task_a(ev_a, ev_b):
        with tg.no_grad():
            ev_a.set()
            await ev_b.wait()
            return tg.is_grad_enabled()

    async def task_b(ev_a, ev_b):
        await ev_a.wait()
        state = tg.is_grad_enabled()
        ev_b.set()
        return state

    async def main():
        ev_a, ev_b = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task_a(ev_a, ev_b), task_b(ev_a, ev_b))

    assert asyncio.run(main()) == [False, True]


def test_detect_anomaly_switch():
    assert not tg.is_anomaly_enabled()
    with tg.detect_anomaly():
        assert tg.is_anomaly_enabled()
    assert not tg.is_anomaly_enabled()


def test_decorated_generator_forwards_throw_and_close_under_its_mode():
    # torch's _DecoratorContextManager wraps generators so that throw() and close() reach
    # the generator, and run inside the decorator's mode like send() does.
    seen = []

    @tg.no_grad()
    def gen():
        try:
            while True:
                try:
                    got = yield tg.is_grad_enabled()
                    seen.append(("sent", got, tg.is_grad_enabled()))
                except KeyError as exc:
                    seen.append(("thrown", exc.args[0], tg.is_grad_enabled()))
        finally:
            seen.append(("closed", tg.is_grad_enabled()))

    it = gen()
    assert next(it) is False and tg.is_grad_enabled()
    assert it.send(5) is False
    assert it.throw(KeyError("k")) is False      # handled inside: the generator goes on
    assert tg.is_grad_enabled()
    it.close()
    assert seen == [("sent", 5, False), ("thrown", "k", False), ("closed", False)]
    assert tg.is_grad_enabled()


def test_decorated_generator_unhandled_throw_propagates_and_return_value_is_kept():
    @tg.no_grad()
    def gen():
        yield 1
        return "done"

    it = gen()
    next(it)
    with pytest.raises(ValueError, match="boom"):
        it.throw(ValueError("boom"))
    assert tg.is_grad_enabled()
    it = gen()
    next(it)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == "done"
