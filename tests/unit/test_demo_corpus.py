"""The demo trainer's adaptation corpus is made once and cached (issue 38 item 8: a trial's start-up),
byte for byte what `shifted_corpus` makes; a damaged cache file is made again."""

from __future__ import annotations

from gpuledger.trainers.demo_lora import CORPUS_VERSION, adapt_tokens
from gpuledger.trainers.make_corpus import encode, shifted_corpus


def test_cached_corpus_is_the_generated_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_CACHE_DIR", str(tmp_path))
    made = encode(shifted_corpus(5000, seed=3))
    assert adapt_tokens(5000, seed=3) == made
    cached = tmp_path / f"demo-corpus-shifted-5000-3-v{CORPUS_VERSION}.bin"
    assert cached.read_bytes() == made and not list(tmp_path.glob("*.tmp"))
    cached.write_bytes(made[:100])  # cut short (a full disk, a killed writer): made again
    assert adapt_tokens(5000, seed=3) == made and cached.read_bytes() == made
    assert adapt_tokens(5000, seed=4) != made  # another seed, another file
