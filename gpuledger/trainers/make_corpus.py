"""Synthetic corpora for the demo trainer, made deterministically from small grammars.

- `base_corpus`: simple story sentences (people, animals, things, places): what the base model is
  pretrained on.
- `shifted_corpus`: kitchen instructions (verbs first, quantities, times): a different
  distribution of words and sentence shapes over the same characters: what LoRA adapts to.

Both use only `CHARSET` (the model's vocabulary) and Python's `random.Random(seed)`, whose
sequence is the same on every platform, so the same seed gives the same text everywhere.

    python -m gpuledger.trainers.make_corpus --kind shifted --chars 2000 --seed 1   # print a sample
"""

from __future__ import annotations

import argparse
import random
import sys

#: The vocabulary of the demo model: one token per character (index = position in this string).
CHARSET = "\n !',-.:?abcdefghijklmnopqrstuvwxyz0123456789"

_BASE = {
    "S": ["the cat", "the dog", "a small bird", "the old man", "my sister", "the farmer", "a young girl",
          "the teacher", "our neighbour", "the baker", "a tired horse", "the king", "his brother",
          "the little fox", "her mother"],
    "V": ["sees", "likes", "finds", "carries", "watches", "helps", "calls", "follows", "paints", "feeds",
          "loves", "pulls", "wants", "keeps"],
    "O": ["the red ball", "a green apple", "the little house", "a tall tree", "the blue boat", "some bread",
          "the garden", "a wooden box", "the old map", "a bright star", "the dark forest", "a warm coat"],
    "P": ["in the park", "near the river", "at home", "by the window", "under the bridge", "on the hill",
          "in the village", "behind the barn"],
    "T": ["today", "every morning", "at night", "after lunch", "in the spring", "once", "on sunday"],
    "A": ["happy", "sad", "quiet", "busy", "hungry", "brave", "sleepy"],
}
_BASE_TEMPLATES = [
    "{S} {V} {O}.",
    "{S} {V} {O} {P}.",
    "{T}, {S} {V} {O}.",
    "{S} is {A} {P}.",
    "does {S} see {O}? yes, {S} does.",
    "{S} and {S} walk {P}.",
    "{T} {S} was {A}, so {S} {V} {O}.",
    "'look,' said {S}, 'there is {O}!'",
]

_SHIFTED = {
    "V": ["stir", "chop", "whisk", "simmer", "bake", "rinse", "slice", "season", "grate", "fold", "roast",
          "drain"],
    "I": ["onions", "garlic", "carrots", "the butter", "two eggs", "the flour", "tomatoes", "rice", "lemon zest",
          "the cream", "fresh herbs", "potatoes", "the dough", "mushrooms"],
    "N": ["2", "3", "4", "5", "8", "10", "12", "15", "20", "25", "30", "45"],
    "U": ["minutes", "grams", "cups", "spoons", "seconds"],
    "H": ["gently", "slowly", "well", "quickly", "until golden", "until soft", "over low heat"],
    "K": ["in a pan", "in the oven", "in a bowl", "on the board", "in cold water", "in a pot"],
}
_SHIFTED_TEMPLATES = [
    "{V} {I} {H}.",
    "{V} {I} {K} for {N} {U}.",
    "step {N}: {V} {I} {K}.",
    "{V} {I}, then {V} {I} {H}.",
    "add {N} {U} of {I} and {V} {H}.",
    "tip: {V} {I} {K} before you {V} {I}.",
    "{V} for {N} {U}, {V} {I} {H}.",
]


def _generate(words: dict[str, list[str]], templates: list[str], n_chars: int, seed: int,
              newline_every: int) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    count = 0
    while total < n_chars:
        template = rng.choice(templates)
        out = []
        i = 0
        while i < len(template):
            if template[i] == "{":
                j = template.index("}", i)
                out.append(rng.choice(words[template[i + 1:j]]))
                i = j + 1
            else:
                out.append(template[i])
                i += 1
        sentence = "".join(out)
        count += 1
        sep = "\n" if count % newline_every == 0 else " "
        parts.append(sentence + sep)
        total += len(sentence) + 1
    text = "".join(parts)[:n_chars]
    assert set(text) <= set(CHARSET), set(text) - set(CHARSET)
    return text


def base_corpus(n_chars: int, seed: int = 0) -> str:
    """Returns `n_chars` characters of story sentences (the pretraining distribution)."""
    return _generate(_BASE, _BASE_TEMPLATES, n_chars, seed, newline_every=5)


def shifted_corpus(n_chars: int, seed: int = 1) -> str:
    """Returns `n_chars` characters of kitchen instructions (the adaptation distribution)."""
    return _generate(_SHIFTED, _SHIFTED_TEMPLATES, n_chars, seed, newline_every=4)


_TABLE = bytes(CHARSET.index(chr(b)) if chr(b) in CHARSET else 255 for b in range(256))


def encode(text: str) -> bytes:
    """Returns the token ids of `text` (one per character) as bytes (ids < 256; `list()` gives ints)."""
    ids = text.encode("ascii").translate(_TABLE)
    if 255 in ids:
        raise ValueError("text has characters outside CHARSET")
    return ids


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["base", "shifted"], default="base")
    p.add_argument("--chars", type=int, default=1000)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    make = base_corpus if args.kind == "base" else shifted_corpus
    text = make(args.chars) if args.seed is None else make(args.chars, args.seed)
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
