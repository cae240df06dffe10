"""The example programs run and do what they say."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_fit_sine_learns():
    fit_sine = runpy.run_path(str(EXAMPLES / "fit_sine.py"))
    final_mse = fit_sine["main"](steps=2000)
    assert final_mse < 0.01            # sin has variance 0.5: the network fits it


def test_fit_sine_runs_as_a_script():
    out = subprocess.run([sys.executable, str(EXAMPLES / "fit_sine.py"), "--steps", "50"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "mse" in out.stdout


def test_lstm_sine_learns():
    lstm_sine = runpy.run_path(str(EXAMPLES / "lstm_sine.py"))
    test_mse = lstm_sine["main"](steps=300, log=False)
    assert test_mse < 1e-3             # sin has variance 0.5: the LSTM predicts the next value


@pytest.mark.slow
def test_digits_cnn_reaches_98_5_percent():
    # The claim of examples/train_digits_cnn.py and docs/nn.md: the default run (10 epochs,
    # seed 0, ~3 s on 2 idle cores) scores >= 98.5 % on the 450 held-out images.
    cnn = runpy.run_path(str(EXAMPLES / "train_digits_cnn.py"))
    assert cnn["main"](log=False) >= 0.985


def test_char_gpt_learns_and_samples():
    char_gpt = runpy.run_path(str(EXAMPLES / "char_gpt.py"))
    text = char_gpt["zen_of_python"]()
    assert text.startswith("The Zen of Python, by Tim Peters") and len(text) > 800
    losses, sample = char_gpt["main"](steps=150, batch_size=8, sample=60, log=False)
    # ln(45 characters) = 3.81 at the start; the text's unigram entropy is 3.11 nats, so a
    # mean below 2.5 over the last 10 steps means the model uses the context (~2.2 here).
    assert losses[0] > 3.5
    assert sum(losses[-10:]) / 10 < 2.5
    assert len(sample) == 61 and set(sample) <= set(text)


def test_char_gpt_checkpointed_blocks_train_identically():
    char_gpt = runpy.run_path(str(EXAMPLES / "char_gpt.py"))
    plain, _ = char_gpt["main"](steps=15, batch_size=4, sample=0, log=False)
    ckpt, _ = char_gpt["main"](steps=15, batch_size=4, sample=0, log=False, checkpoint=True)
    assert ckpt == plain               # recomputed activations: the same numbers, bit for bit


def test_char_gpt_runs_as_a_script():
    out = subprocess.run([sys.executable, str(EXAMPLES / "char_gpt.py"), "--steps", "5",
                          "--checkpoint", "--sample", "20"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "loss" in out.stdout and "--- sample ---" in out.stdout
