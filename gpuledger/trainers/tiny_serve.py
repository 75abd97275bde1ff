"""A small CPU inference server for the demo model: continuous batching over the numpy GPT-2.

    python -m gpuledger.trainers.tiny_serve [--port 0] [--max-num-seqs 16] [--max-num-batched-tokens 256]

It serves `gpuledger/demo-char-gpt` (the architecture of `gpuledger/trainers/tinygpt.py`; weights are
GPT-2-initialised from `--seed`, like vLLM's `--load-format dummy`: serving speed does not depend on
what the weights are) on 127.0.0.1 only, and speaks enough of the OpenAI API for a benchmark client
(vLLM's `vllm bench serve --backend openai` or `gpuledger/trainers/loadgen.py`):

- `GET /health` -> 200 once the engine runs; `GET /v1/models` -> the one model;
- `POST /v1/completions` with `{"prompt": str, "max_tokens": int, "stream": bool, "ignore_eos": bool,
  "stream_options": {"include_usage": true}}`; streamed as server-sent events, one token per
  `data:` chunk, the usage chunk, then `data: [DONE]`.

The engine (one thread) is vLLM's scheduling in miniature: a request waits until a sequence slot
is free (`--max-num-seqs`) and the step's token budget allows its prompt (`--max-num-batched-tokens`:
one token per running sequence plus the admitted prompts); admitted prompts are prefilled (their
first token is the TTFT), then every running sequence advances by one token per engine step in one
batched forward pass over a per-slot KV cache. The character model has no end-of-sequence token, so
every request generates exactly `max_tokens` (as `ignore_eos` does on vLLM). Prompt + output must fit
the model's 64 positions.

With `--port 0` the OS picks a free port; the first stdout line is `tiny_serve listening on PORT`.
With `--exit-on-stdin-eof` the server exits when its stdin closes (so it never outlives the benchmark
that started it); it always exits on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG_PATH = HERE.parent / "models" / "configs" / "gpuledger__demo-char-gpt.json"
MODEL_NAME = "gpuledger/demo-char-gpt"
READY_PREFIX = "tiny_serve listening on "
MAX_BODY_BYTES = 1 << 20


class KVEngine:
    """The numpy GPT-2 with a KV cache of `slots` sequences (float32).

    `prefill(slot, tokens)` (or `prefill_batch` for prompts of one length) fills a slot's cache from a
    prompt and returns the logits after its last token; `decode(slots, tokens, positions)` appends one token to each given slot and returns their
    next-token logits [B, vocab]. Both compute exactly what a full causal forward over the same
    tokens computes (tests/integration/test_serve_bench.py checks it).
    """

    def __init__(self, hf: dict, slots: int, seed: int = 0) -> None:
        import numpy as np

        from gpuledger.trainers.tinygpt import Config, init_params

        self.np = np
        self.cfg = Config(vocab_size=hf["vocab_size"], n_positions=hf["n_positions"], n_embd=hf["n_embd"],
                          n_layer=hf["n_layer"], n_head=hf["n_head"])
        self.p = init_params(self.cfg, seed)
        c = self.cfg
        self.hd = c.n_embd // c.n_head
        shape = (slots, c.n_head, c.n_positions, self.hd)
        self.k = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self.v = [np.zeros(shape, np.float32) for _ in range(c.n_layer)]
        self.scale = 1.0 / math.sqrt(self.hd)

    def kv_cache_bytes(self) -> int:
        return sum(a.nbytes for a in self.k) + sum(a.nbytes for a in self.v)

    def _ln(self, x, name):
        np = self.np
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * self.p[name + ".weight"] + self.p[name + ".bias"]

    def _mlp(self, x, pre):
        np = self.np
        p = self.p
        f = x @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"]
        f = 0.5 * f * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * f ** 3)))
        return f @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]

    def _logits(self, x):
        return self._ln(x, "ln_f") @ self.p["wte.weight"].T

    def prefill(self, slot: int, tokens: list[int]):
        """Returns the logits [vocab] after `tokens`, having cached their keys and values in `slot`."""
        return self.prefill_batch([slot], [tokens])[0]

    def prefill_batch(self, slots: list[int], prompts: list[list[int]]):
        """Returns the logits [B, vocab] after each prompt (all of one length), having cached their
        keys and values in `slots` (one forward pass for the whole batch)."""
        np, p, c = self.np, self.p, self.cfg
        B, T, H, hd, d = len(prompts), len(prompts[0]), c.n_head, self.hd, c.n_embd
        slots = np.asarray(slots)
        x = p["wte.weight"][np.asarray(prompts)] + p["wpe.weight"][:T]  # [B, T, d]
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        for i in range(c.n_layer):
            pre = f"h.{i}."
            qkv = self._ln(x, pre + "ln_1") @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
            q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(B, T, H, hd).transpose(0, 2, 1, 3) for j in range(3))
            self.k[i][slots, :, :T] = k
            self.v[i][slots, :, :T] = v
            s = (q @ k.transpose(0, 1, 3, 2)) * self.scale
            s[..., mask] = -np.inf
            att = np.exp(s - s.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
            x = x + y @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
            x = x + self._mlp(self._ln(x, pre + "ln_2"), pre)
        return self._logits(x[:, -1])

    def decode(self, slots, tokens, positions):
        """Returns next-token logits [B, vocab] after appending `tokens[b]` at `positions[b]` of `slots[b]`."""
        np, p, c = self.np, self.p, self.cfg
        slots, tokens, positions = np.asarray(slots), np.asarray(tokens), np.asarray(positions)
        B, H, hd, d, P = len(slots), c.n_head, self.hd, c.n_embd, c.n_positions
        x = p["wte.weight"][tokens] + p["wpe.weight"][positions]
        # [B, 1, 1, P]: -inf on the keys not yet written (added to the scores of every layer)
        bias = np.where(np.arange(P)[None, :] > positions[:, None], -np.inf, 0.0).astype(np.float32)[:, None, None, :]
        for i in range(c.n_layer):
            pre = f"h.{i}."
            qkv = self._ln(x, pre + "ln_1") @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
            q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(B, H, hd) for j in range(3))
            self.k[i][slots, :, positions] = k
            self.v[i][slots, :, positions] = v
            keys, values = self.k[i][slots], self.v[i][slots]  # [B, H, P, hd]
            s = (q[:, :, None, :] @ keys.transpose(0, 1, 3, 2)) * self.scale + bias  # [B, H, 1, P]
            att = np.exp(s - s.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            y = (att @ values).reshape(B, d)
            x = x + y @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
            x = x + self._mlp(self._ln(x, pre + "ln_2"), pre)
        return self._logits(x)


class Request:
    """One completion request: its prompt tokens, how many to generate, and who hears each token."""

    def __init__(self, tokens: list[int], max_tokens: int, on_token, on_done) -> None:
        self.tokens = tokens
        self.max_tokens = max_tokens
        self.on_token = on_token  # called with each generated token id, in the engine's loop
        self.on_done = on_done  # called once after the last token
        self.generated = 0
        self.slot = -1
        self.pos = 0  # position the next decode writes
        self.last = 0  # last generated token


class Scheduler:
    """Continuous batching: admits waiting requests into free slots within the step token budget,
    prefills them, then decodes every running sequence one token per step."""

    def __init__(self, engine: KVEngine, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.engine = engine
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.free = list(range(max_num_seqs))
        self.steps = 0

    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def _emit(self, req: Request, logits) -> None:
        tok = int(logits.argmax())  # greedy: the benchmark measures speed, not text
        req.last = tok
        req.generated += 1
        req.on_token(tok)
        if req.generated >= req.max_tokens:
            self.free.append(req.slot)
            req.on_done()
        else:
            self.running.append(req)

    def step(self) -> bool:
        """Runs one engine step; returns False when there was nothing to do."""
        budget = self.max_num_batched_tokens - len(self.running)
        admitted = []
        while self.waiting and self.free and len(self.waiting[0].tokens) <= budget:
            req = self.waiting.pop(0)
            req.slot = self.free.pop()
            budget -= len(req.tokens)
            admitted.append(req)
        decoding, self.running = self.running, []
        if not admitted and not decoding:
            return False
        if decoding:
            logits = self.engine.decode([r.slot for r in decoding], [r.last for r in decoding],
                                        [r.pos for r in decoding])
            for r, row in zip(decoding, logits, strict=True):
                r.pos += 1
                self._emit(r, row)
        by_len: dict[int, list[Request]] = {}
        for req in admitted:  # prompts of one length are prefilled in one batched forward pass
            by_len.setdefault(len(req.tokens), []).append(req)
        for group in by_len.values():
            logits = self.engine.prefill_batch([r.slot for r in group], [r.tokens for r in group])
            for req, row in zip(group, logits, strict=True):
                req.pos = len(req.tokens)
                self._emit(req, row)
        self.steps += 1
        return True


def _sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def _response(status: str, obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


class Server:
    """HTTP/1.1 on asyncio, one connection per request; the engine steps in the same event loop, so
    tokens are written to the sockets as they are made, with no thread hand-offs."""

    def __init__(self, scheduler: Scheduler, charset: str, n_positions: int) -> None:
        self.scheduler = scheduler
        self.charset = charset
        self.index = {ch: i for i, ch in enumerate(charset)}
        self.n_positions = n_positions
        self.work = asyncio.Event()
        self.stopping = asyncio.Event()

    async def engine_loop(self) -> None:
        while not self.stopping.is_set():
            if not self.scheduler.busy():
                self.work.clear()
                await self.work.wait()
                continue
            self.scheduler.step()
            await asyncio.sleep(0)  # let the sockets send and new requests arrive between steps

    def _parse(self, body: bytes) -> tuple[list[int], int, bool, bool]:
        req = json.loads(body)
        if not isinstance(req, dict):
            raise ValueError("the body must be a JSON object")
        prompt = req.get("prompt", "")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt must be a non-empty string")
        tokens = [self.index.get(ch, self.index[" "]) for ch in prompt.lower()]
        max_tokens = int(req.get("max_tokens", 16))
        if max_tokens < 1 or len(tokens) + max_tokens > self.n_positions:
            raise ValueError(f"prompt ({len(tokens)} tokens) + max_tokens ({max_tokens}) must be at most the "
                             f"model's {self.n_positions} positions, max_tokens >= 1")
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        return tokens, max_tokens, bool(req.get("stream")), usage

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 30)
            headers = {}
            while (line := await asyncio.wait_for(reader.readline(), 30)) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            method, path = (request_line.decode("latin-1").split() + ["", ""])[:2]
            if method == "GET" and path == "/health":
                writer.write(_response("200 OK", {"status": "ok"}))
            elif method == "GET" and path == "/v1/models":
                writer.write(_response("200 OK", {"object": "list", "data": [
                    {"id": MODEL_NAME, "object": "model", "root": MODEL_NAME, "max_model_len": self.n_positions}]}))
            elif method == "POST" and path == "/v1/completions":
                await self._complete(reader, writer, headers)
            else:
                writer.write(_response("404 Not Found", {"error": {"message": f"no route {method} {path}"}}))
            await writer.drain()
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # the client went away or stalled; nothing to answer
        finally:
            writer.close()

    async def _complete(self, reader, writer, headers) -> None:
        try:
            length = int(headers.get("content-length") or 0)
            if not 0 < length <= MAX_BODY_BYTES:
                raise ValueError(f"a body of 1..{MAX_BODY_BYTES} bytes with Content-Length is needed")
            tokens, max_tokens, stream, usage = self._parse(await asyncio.wait_for(reader.readexactly(length), 30))
        except (ValueError, TypeError, AttributeError) as err:
            writer.write(_response("400 Bad Request", {"error": {"message": str(err), "type": "invalid_request_error"}}))
            return
        created = int(time.time())
        done = asyncio.Event()
        text: list[str] = []
        usage_obj = {"prompt_tokens": len(tokens), "completion_tokens": max_tokens,
                     "total_tokens": len(tokens) + max_tokens}
        if stream:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                         b"Connection: close\r\n\r\n")
            head = json.dumps({"object": "text_completion", "model": MODEL_NAME, "created": created})[:-1]

            def on_token(tok: int) -> None:
                if not writer.is_closing():
                    choice = json.dumps([{"index": 0, "text": self.charset[tok], "finish_reason": None}])
                    writer.write(_sse(f'{head}, "choices": {choice}}}'.encode()))
        else:
            def on_token(tok: int) -> None:
                text.append(self.charset[tok])

        self.scheduler.waiting.append(Request(tokens, max_tokens, on_token, done.set))
        self.work.set()
        await done.wait()
        if stream:
            if usage:
                writer.write(_sse({"object": "text_completion", "model": MODEL_NAME, "created": created,
                                   "choices": [], "usage": usage_obj}))
            writer.write(_sse(b"[DONE]"))
        else:
            writer.write(_response("200 OK", {"object": "text_completion", "model": MODEL_NAME, "created": created,
                                              "choices": [{"index": 0, "text": "".join(text), "finish_reason": "length"}],
                                              "usage": usage_obj}))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free port)")
    p.add_argument("--max-num-seqs", type=int, default=16, help="sequences decoded together (KV-cache slots)")
    p.add_argument("--max-num-batched-tokens", type=int, default=256,
                   help="tokens per engine step: running sequences + admitted prompts (>= 64, the model's context)")
    p.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads")
    p.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes (the parent went away)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        os.environ[var] = str(args.threads)
    hf = json.loads(CONFIG_PATH.read_text(encoding="utf-8"))
    if not 1 <= args.max_num_seqs <= 1024:
        print("tiny_serve: --max-num-seqs must be in 1..1024", file=sys.stderr)
        return 2
    if not hf["n_positions"] <= args.max_num_batched_tokens <= 1 << 20:
        print(f"tiny_serve: --max-num-batched-tokens must be at least the model's context ({hf['n_positions']})",
              file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("tiny_serve: --port must be in 0..65535", file=sys.stderr)
        return 2
    from gpuledger.trainers.make_corpus import CHARSET

    engine = KVEngine(hf, args.max_num_seqs, seed=args.seed)
    server = Server(Scheduler(engine, args.max_num_seqs, args.max_num_batched_tokens), CHARSET, hf["n_positions"])
    print(f"tiny_serve: {MODEL_NAME}, {engine.cfg.n_params:,} parameters, KV cache "
          f"{engine.kv_cache_bytes() / 2**20:.2f} MiB for {args.max_num_seqs} sequences", file=sys.stderr, flush=True)
    asyncio.run(serve(server, args.port, args.exit_on_stdin_eof))
    return 0


async def serve(server: Server, port: int, exit_on_stdin_eof: bool) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.stopping.set)
    if exit_on_stdin_eof:  # the parent closed our stdin (or died): stop
        def watch_stdin():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except (OSError, ValueError):
                pass
            loop.call_soon_threadsafe(server.stopping.set)

        threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()
    srv = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=1024)
    print(f"{READY_PREFIX}{srv.sockets[0].getsockname()[1]}", flush=True)
    engine = asyncio.create_task(server.engine_loop())
    async with srv:
        await server.stopping.wait()
    server.work.set()
    engine.cancel()


if __name__ == "__main__":
    sys.exit(main())
