"""A tiny GPT-2 in numpy with hand-written backward passes and LoRA adapters.

The parameters have exactly GPT-2's layout and Hugging Face names (without the `transformer.`
prefix): `wte.weight` [V, d], `wpe.weight` [P, d]; per layer `h.{i}.ln_1.{weight,bias}` [d],
`h.{i}.attn.c_attn.{weight [d, 3d], bias [3d]}`, `h.{i}.attn.c_proj.{weight [d, d], bias [d]}`,
`h.{i}.ln_2.*` [d], `h.{i}.mlp.c_fc.{weight [d, 4d], bias [4d]}`,
`h.{i}.mlp.c_proj.{weight [4d, d], bias [d]}`; `ln_f.{weight,bias}` [d]; the LM head is tied to
`wte` (no separate parameter). Weights are stored [in, out] like GPT-2's Conv1D. The parameter
count is therefore GPT-2's formula:

    V·d + P·d + L·(12·d² + 13·d) + 2·d

LoRA (Hu et al. 2021) on the attention projections `c_attn` and `c_proj` of every layer:
`y = x·W + b + (alpha/r)·(x·A)·B` with A [d_in, r] random and B [r, d_out] zero at start, so the
adapted model starts equal to the base.

Everything works in the dtype of the arrays given (float32 for training, float64 for the
numerical gradient test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GELU_C = math.sqrt(2.0 / math.pi)  # GPT-2's tanh approximation of GELU (Hendrycks & Gimpel 2016)
LN_EPS = 1e-5  # GPT-2's layer_norm_epsilon
LORA_TARGETS = ("attn.c_attn", "attn.c_proj")


@dataclass(frozen=True)
class Config:
    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int

    @property
    def n_params(self) -> int:
        """GPT-2's parameter count with a tied LM head."""
        d, L = self.n_embd, self.n_layer
        return self.vocab_size * d + self.n_positions * d + L * (12 * d * d + 13 * d) + 2 * d

    def hf_config(self) -> dict:
        """Returns the Hugging Face GPT2Config dict of this model."""
        return {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "vocab_size": self.vocab_size,
            "n_positions": self.n_positions,
            "n_ctx": self.n_positions,
            "n_embd": self.n_embd,
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_inner": None,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": LN_EPS,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
        }


def param_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Returns name -> shape of every base parameter, in the canonical (serialisation) order."""
    d = cfg.n_embd
    shapes: dict[str, tuple[int, ...]] = {"wte.weight": (cfg.vocab_size, d), "wpe.weight": (cfg.n_positions, d)}
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": (d,), p + "ln_1.bias": (d,),
            p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
            p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
            p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
            p + "mlp.c_fc.weight": (d, 4 * d), p + "mlp.c_fc.bias": (4 * d,),
            p + "mlp.c_proj.weight": (4 * d, d), p + "mlp.c_proj.bias": (d,),
        })
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def init_params(cfg: Config, seed: int, dtype=np.float32) -> dict[str, np.ndarray]:
    """Returns GPT-2-initialised parameters (N(0, 0.02), residual projections / sqrt(2L))."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            arr = np.ones(shape)
        elif name.endswith(".bias"):
            arr = np.zeros(shape)
        else:
            std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith("c_proj.weight") else 0.02
            arr = rng.standard_normal(shape) * std
        params[name] = arr.astype(dtype)
    return params


def init_lora(cfg: Config, r: int, seed: int, dtype=np.float32) -> dict[str, np.ndarray]:
    """Returns LoRA adapters: A ~ U(±1/sqrt(d_in)) (PEFT's kaiming-uniform bound), B = 0."""
    rng = np.random.default_rng(seed)
    d = cfg.n_embd
    lora = {}
    for i in range(cfg.n_layer):
        for target, d_out in (("attn.c_attn", 3 * d), ("attn.c_proj", d)):
            bound = 1.0 / math.sqrt(d)
            lora[f"h.{i}.{target}.lora_A"] = rng.uniform(-bound, bound, (d, r)).astype(dtype)
            lora[f"h.{i}.{target}.lora_B"] = np.zeros((r, d_out), dtype=dtype)
    return lora


def flatten(params: dict[str, np.ndarray], cfg: Config) -> np.ndarray:
    """Returns one vector of all base parameters in canonical order (the cache format)."""
    return np.concatenate([params[n].ravel() for n in param_shapes(cfg)])


def unflatten(vec: np.ndarray, cfg: Config) -> dict[str, np.ndarray]:
    """Returns the parameter dict of a vector made by `flatten`."""
    out, pos = {}, 0
    for name, shape in param_shapes(cfg).items():
        size = int(np.prod(shape))
        out[name] = vec[pos:pos + size].reshape(shape)
        pos += size
    if pos != vec.size:
        raise ValueError(f"expected {pos} values, got {vec.size}")
    return out


# ---------------------------------------------------------------------------------------------
# layers (forward returns (y, cache); backward returns input grads and adds parameter grads)


def _ln_fwd(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + LN_EPS)
    xhat = xc * rstd
    return xhat * g + b, (xhat, rstd, g)


def _ln_bwd(dy, cache):
    xhat, rstd, g = cache
    dg = (dy * xhat).reshape(-1, xhat.shape[-1]).sum(0)
    db = dy.reshape(-1, xhat.shape[-1]).sum(0)
    dxhat = dy * g
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dg, db


def _gelu_fwd(x):
    t = x * x
    t *= 0.044715
    t += 1.0
    t *= x
    t *= GELU_C
    np.tanh(t, out=t)
    y = t + 1.0
    y *= x
    y *= 0.5
    return y, t


def _gelu_bwd(dy, x, t):
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))


class Model:
    """Forward/backward of the tiny GPT-2, optionally with LoRA adapters on c_attn and c_proj."""

    def __init__(self, cfg: Config, params: dict[str, np.ndarray], lora: dict[str, np.ndarray] | None = None,
                 lora_alpha: float = 16.0) -> None:
        self.cfg = cfg
        self.params = params
        self.lora = lora or {}
        r = next(iter(self.lora.values())).shape[1] if self.lora else 0
        self.lora_scale = lora_alpha / r if r else 0.0

    def _linear_fwd(self, x, name):
        """Returns (x·W + b [+ s·(x·A)·B], x·A or None)."""
        y = x @ self.params[name + ".weight"] + self.params[name + ".bias"]
        a = self.lora.get(name + ".lora_A")
        if a is None:
            return y, None
        xa = x @ a
        return y + self.lora_scale * (xa @ self.lora[name + ".lora_B"]), xa

    def _linear_bwd(self, dy, x, xa, name, grads, grad_base):
        d2 = dy.reshape(-1, dy.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        w = self.params[name + ".weight"]
        dx = dy @ w.T
        if grad_base:
            grads[name + ".weight"] = x2.T @ d2
            grads[name + ".bias"] = d2.sum(0)
        if xa is not None:
            a, b, s = self.lora[name + ".lora_A"], self.lora[name + ".lora_B"], self.lora_scale
            grads[name + ".lora_B"] = s * (xa.reshape(-1, xa.shape[-1]).T @ d2)
            dxa = s * (dy @ b.T)
            grads[name + ".lora_A"] = x2.T @ dxa.reshape(-1, dxa.shape[-1])
            dx = dx + dxa @ a.T
        return dx

    def forward(self, idx: np.ndarray, targets: np.ndarray, keep: bool = True):
        """Returns (mean cross-entropy loss, cache for `backward` or None)."""
        cfg, p = self.cfg, self.params
        B, T = idx.shape
        H, d = cfg.n_head, cfg.n_embd
        hd = d // H
        x = p["wte.weight"][idx] + p["wpe.weight"][:T]
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        scale = 1.0 / math.sqrt(hd)
        layers = []
        for i in range(cfg.n_layer):
            pre = f"h.{i}."
            h1, ln1 = _ln_fwd(x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
            qkv, xa_attn = self._linear_fwd(h1, pre + "attn.c_attn")
            q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(B, T, H, hd).transpose(0, 2, 1, 3) for j in range(3))
            s = (q @ k.transpose(0, 1, 3, 2)) * scale
            s[..., mask] = -np.inf
            s = s - s.max(-1, keepdims=True)
            att = np.exp(s)
            att /= att.sum(-1, keepdims=True)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
            o, xa_proj = self._linear_fwd(y, pre + "attn.c_proj")
            x_mid = x + o
            h2, ln2 = _ln_fwd(x_mid, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
            f_pre, _ = self._linear_fwd(h2, pre + "mlp.c_fc")
            f, t = _gelu_fwd(f_pre)
            m, _ = self._linear_fwd(f, pre + "mlp.c_proj")
            x = x_mid + m
            if keep:
                layers.append((ln1, h1, xa_attn, q, k, v, att, y, xa_proj, ln2, h2, f_pre, t, f))
        xf, lnf = _ln_fwd(x, p["ln_f.weight"], p["ln_f.bias"])
        logits = xf @ p["wte.weight"].T
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        n = B * T
        loss = -np.take_along_axis(logp.reshape(n, -1), targets.reshape(n, 1), 1).mean()
        cache = (idx, targets, layers, lnf, xf, logp) if keep else None
        return float(loss), cache

    def backward(self, cache, grad_base: bool = True) -> dict[str, np.ndarray]:
        """Returns d(loss)/d(parameter) for the adapters and, with `grad_base`, the base weights."""
        cfg, p = self.cfg, self.params
        idx, targets, layers, lnf, xf, logp = cache
        B, T = idx.shape
        H, d = cfg.n_head, cfg.n_embd
        hd = d // H
        scale = 1.0 / math.sqrt(hd)
        n = B * T
        grads: dict[str, np.ndarray] = {}
        dlogits = np.exp(logp)
        dlogits.reshape(n, -1)[np.arange(n), targets.reshape(n)] -= 1.0
        dlogits /= n
        dxf = dlogits @ p["wte.weight"]
        if grad_base:
            grads["wte.weight"] = dlogits.reshape(n, -1).T @ xf.reshape(n, -1)
        dx, dg, db = _ln_bwd(dxf, lnf)
        if grad_base:
            grads["ln_f.weight"], grads["ln_f.bias"] = dg, db
        for i in reversed(range(cfg.n_layer)):
            pre = f"h.{i}."
            ln1, h1, xa_attn, q, k, v, att, y, xa_proj, ln2, h2, f_pre, t, f = layers[i]
            # MLP block (x = x_mid + mlp(ln_2(x_mid)))
            df = self._linear_bwd(dx, f, None, pre + "mlp.c_proj", grads, grad_base)
            df_pre = _gelu_bwd(df, f_pre, t)
            dh2 = self._linear_bwd(df_pre, h2, None, pre + "mlp.c_fc", grads, grad_base)
            dln, dg, db = _ln_bwd(dh2, ln2)
            if grad_base:
                grads[pre + "ln_2.weight"], grads[pre + "ln_2.bias"] = dg, db
            dx_mid = dx + dln
            # attention block (x_mid = x + attn(ln_1(x)))
            dy = self._linear_bwd(dx_mid, y, xa_proj, pre + "attn.c_proj", grads, grad_base)
            dy = dy.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
            dv = att.transpose(0, 1, 3, 2) @ dy
            datt = dy @ v.transpose(0, 1, 3, 2)
            ds = att * (datt - (datt * att).sum(-1, keepdims=True)) * scale
            dq = ds @ k
            dk = ds.transpose(0, 1, 3, 2) @ q
            dqkv = np.concatenate([g.transpose(0, 2, 1, 3).reshape(B, T, d) for g in (dq, dk, dv)], axis=-1)
            dh1 = self._linear_bwd(dqkv, h1, xa_attn, pre + "attn.c_attn", grads, grad_base)
            dln, dg, db = _ln_bwd(dh1, ln1)
            if grad_base:
                grads[pre + "ln_1.weight"], grads[pre + "ln_1.bias"] = dg, db
            dx = dx_mid + dln
        if grad_base:
            dwte = grads["wte.weight"]
            np.add.at(dwte, idx.reshape(-1), dx.reshape(n, d))
            dwpe = np.zeros_like(p["wpe.weight"])
            dwpe[:T] = dx.sum(0)
            grads["wpe.weight"] = dwpe
        return grads


class AdamW:
    """AdamW (Loshchilov & Hutter 2019) with PyTorch's defaults: betas (0.9, 0.999), eps 1e-8."""

    def __init__(self, params: dict[str, np.ndarray], lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.params = params
        self.lr = lr
        self.wd = weight_decay
        self.b1, self.b2 = betas
        self.eps = eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads: dict[str, np.ndarray], lr: float | None = None) -> None:
        """Updates the parameters in place; returns nothing."""
        lr = self.lr if lr is None else lr
        self.t += 1
        c1 = 1.0 - self.b1**self.t
        c2 = 1.0 - self.b2**self.t
        for name, w in self.params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            m *= self.b1
            m += (1.0 - self.b1) * g
            v *= self.b2
            v += (1.0 - self.b2) * (g * g)
            if self.wd:
                w *= 1.0 - lr * self.wd
            w -= (lr / c1) * m / (np.sqrt(v / c2) + self.eps)


def clip_grads(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scales grads in place to a global L2 norm of at most `max_norm`; returns the norm before."""
    norm = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    if max_norm and norm > max_norm:
        for g in grads.values():
            g *= max_norm / (norm + 1e-6)
    return norm
