"""A small character-level GPT (decoder-only transformer) in tapegrad, trained on the Zen
of Python and then sampled.

The text ships with every Python: the stdlib module ``this`` holds it (ROT13-encoded in
``this.s``; read from the module's source here, since importing ``this`` prints it). It has
not changed since Python 2.2, so the example and its test need no download and see the same
857 characters everywhere.

The model: token + position ``tg.nn.Embedding``, ``--layers`` pre-norm blocks of causal
self-attention (``tg.nn.MultiheadAttention`` with a boolean causal ``attn_mask``) and a
GELU MLP, each with ``tg.nn.LayerNorm``; a final LayerNorm and a linear head. Trained with
``tg.optim.AdamW`` and a cosine schedule (``lr_scheduler.CosineAnnealingLR``), gradients
clipped with ``tg.nn.utils.clip_grad_norm_``. ``--checkpoint`` wraps each block in
``tg.checkpoint`` (activations recomputed during backward): the losses are the same.
Finally it samples text with ``tg.random.multinomial``.

    .venv/bin/python examples/char_gpt.py [--steps 300] [--checkpoint] [--sample 200]

The text's characters alone have an entropy of 3.1 nats (ln of its 45 distinct characters
is 3.8); the default run (300 steps, batch 16, ~30k parameters) reaches a training loss
of about 1.6 (a few seconds to a minute, depending on the machine's load).
"""

import argparse
import ast
import codecs
import importlib.util
import time

import numpy as np
import tapegrad as tg

nn = tg.nn
F = tg.nn.functional


def zen_of_python():
    """The Zen of Python, decoded from the stdlib module ``this`` without importing it."""
    path = importlib.util.find_spec("this").origin
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["s"]:
            return codecs.decode(ast.literal_eval(node.value), "rot13")
    raise RuntimeError(f"no string 's' in {path}")


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, causal_mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=causal_mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, vocab_size, block_size=32, n_embd=32, n_head=4, n_layer=2,
                 checkpoint=False):
        super().__init__()
        self.block_size = block_size
        self.checkpoint = checkpoint
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx):                                  # idx (batch, time) int64
        t = idx.shape[1]
        if t > self.block_size:
            raise ValueError(f"CharGPT: sequence length {t} > block_size {self.block_size}")
        x = self.tok(idx) + self.pos(tg.arange(t))
        # True above the diagonal = position j > i may not be attended (torch's bool mask)
        mask = tg.tensor(np.triu(np.ones((t, t), dtype=bool), k=1))
        for block in self.blocks:
            if self.checkpoint and tg.is_grad_enabled():
                x = tg.checkpoint(block, x, mask)
            else:
                x = block(x, mask)
        return self.head(self.ln_f(x))                       # (batch, time, vocab)


def get_batch(data, block_size, batch_size):
    """batch_size random windows of the text (offsets from tg.random.randint)."""
    starts = tg.random.randint(0, len(data) - block_size - 1, (batch_size,)).numpy()
    rows = starts[:, None] + np.arange(block_size + 1)
    chunk = data[rows]
    return tg.tensor(chunk[:, :-1]), tg.tensor(chunk[:, 1:])


def generate(model, idx, n_new, temperature=1.0):
    """Extend idx (1, t) by n_new characters drawn with tg.random.multinomial."""
    model.eval()
    with tg.no_grad():
        for _ in range(n_new):
            logits = model(idx[:, -model.block_size:])[:, -1, :] / temperature
            probs = F.softmax(logits, -1)
            nxt = tg.random.multinomial(probs, 1, replacement=True)   # (1, 1)
            idx = tg.concatenate([idx, nxt], axis=1)
    model.train()
    return idx


def main(steps=300, batch_size=16, block_size=32, n_embd=32, n_head=4, n_layer=2,
         lr=3e-3, seed=0, checkpoint=False, sample=200, log=True):
    """Train; returns the list of training losses (one per step) and the sampled text."""
    text = zen_of_python()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)

    tg.manual_seed(seed)
    model = CharGPT(len(chars), block_size, n_embd, n_head, n_layer, checkpoint=checkpoint)
    opt = tg.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = tg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr / 10)

    losses = []
    start = time.perf_counter()
    for step in range(steps):
        x, y = get_batch(data, block_size, batch_size)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log and (step % max(1, steps // 6) == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.3f}  lr {sched.get_last_lr()[0]:.2e}")
    if log:
        print(f"{steps} steps in {time.perf_counter() - start:.1f} s"
              f"{' (checkpointed blocks)' if checkpoint else ''}")

    out = ""
    if sample:
        start_idx = tg.tensor(np.array([[stoi["B"]]], dtype=np.int64))
        idx = generate(model, start_idx, sample, temperature=0.8)
        out = "".join(chars[i] for i in idx.numpy()[0])
        if log:
            print("--- sample ---")
            print(out)
    return losses, out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--checkpoint", action="store_true",
                        help="wrap each block in tg.checkpoint")
    parser.add_argument("--sample", type=int, default=200, help="characters to sample")
    args = parser.parse_args()
    main(steps=args.steps, n_layer=args.layers, checkpoint=args.checkpoint,
         sample=args.sample)
