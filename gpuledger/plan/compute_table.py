"""Each scoring key's model compute seconds on each accelerator (`KeyCompute`: a numpy matrix, keys ×
accelerators, NaN where `times` has no row): what `scoring` prices candidates with.

`times` (workload, accelerator, compute_s; one row per distinct (workload, accelerator), see
`estimates.TIMES_SCHEMA`) is matched to the keys by workload text. Two ways, the same matrix:
- `compute_in_row_order`: `estimates.compute_times` of estimates whose workloads are all distinct
  writes one block of rows per workload, in the estimates' order, each block naming the same
  accelerators in the same order; a block layout is checked (every row's workload and accelerator
  compared, no hashing of the strings) and read as a reshape of `compute_s`;
- `compute_matrix`: any layout, by a join of the distinct workloads (runs of equal workloads) and
  the accelerators' Enum codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass(frozen=True)
class KeyCompute:
    """Model compute seconds per key: `seconds[key, column[acc_id]]` (NaN: no time; `column[acc_id]` −1:
    no time on that accelerator for any key). The columns keep `times`' own accelerator order, so a
    block layout is read without a copy."""

    seconds: np.ndarray
    column: np.ndarray

    @property
    def n_keys(self) -> int:
        return self.seconds.shape[0]

    def at(self, keys: np.ndarray, acc_id: np.ndarray | int) -> np.ndarray:
        """Returns the seconds of `keys` on `acc_id` (one id, or one per key), NaN where none."""
        col = self.column[acc_id]
        if np.ndim(col) == 0:
            return self.seconds[keys, col] if col >= 0 else np.full(len(keys), np.nan)
        out = self.seconds[keys, np.maximum(col, 0)]
        return np.where(col >= 0, out, np.nan) if (col < 0).any() else out

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns (key, acc_id, seconds) of every (key, accelerator) with a time."""
        acc_of = np.full(self.seconds.shape[1], -1, dtype=np.int64)
        has = np.flatnonzero(self.column >= 0)
        acc_of[self.column[has]] = has
        key, col = np.nonzero(~np.isnan(self.seconds) & (acc_of >= 0))
        return key, acc_of[col], self.seconds[key, col]


def accelerator_ids(accel: pl.DataFrame) -> pl.DataFrame:
    """Returns accelerator → acc_id (the accelerator table's accelerators in order): the matrix's columns."""
    return accel.select("accelerator").unique(maintain_order=True).with_row_index("acc_id")


def _chunks(col: pl.Series):
    """Yields (offset, chunk) of `col`'s memory chunks: compared chunk by chunk, nothing is copied."""
    offset = 0
    for chunk in col.get_chunks():
        yield offset, chunk
        offset += chunk.len()


def _periodic(col: pl.Series, first: pl.Series) -> bool:
    """Returns whether col[i] == first[i mod len(first)] for every i (no nulls in `col`)."""
    names = first.to_list()
    p = len(names)
    for offset, chunk in _chunks(col):
        n, head = chunk.len(), min(p, chunk.len())
        if chunk.slice(0, head).to_list() != [names[(offset + i) % p] for i in range(head)]:
            return False
        if n > p and not (chunk.slice(p) == chunk.slice(0, n - p)).all():
            return False
    return True


def _in_blocks(col: pl.Series, heads: pl.Series) -> bool:
    """Returns whether col[i] == heads[i // p] for every i, p = len(col) / len(heads) (no nulls in `col`):
    each block's first row is its head, and every other row equals the row before it."""
    p = col.len() // heads.len()
    last = None
    for offset, chunk in _chunks(col):
        n, first = chunk.len(), (-offset) % p  # the chunk's first block start
        if first < n:
            starts = chunk.gather_every(p, offset=first)
            if not starts.equals(heads.slice((offset + first) // p, starts.len()), check_names=False, check_dtypes=False):
                return False
        if offset % p and chunk[0] != last:
            return False
        if n > 1:
            same = (chunk.slice(1) == chunk.slice(0, n - 1)).to_numpy()
            same[(-(offset + 1)) % p::p] = True  # row offset + 1 + j starts a block
            if not same.all():
                return False
        last = chunk[n - 1]
    return True


def compute_in_row_order(workloads: pl.Series, times: pl.DataFrame, acc_ids: pl.DataFrame) -> KeyCompute | None:
    """Returns the compute seconds of each row of `workloads` (key = row number) when `times` is laid out in blocks,
    one per row of `workloads` in the same order, each block naming the same accelerators in the same
    order (what `compute_times` writes for distinct workloads); else None (use `compute_matrix`)."""
    m, n = workloads.len(), times.height
    acc, work = times["accelerator"], times["workload"]
    if m == 0 or n == 0 or n % m or workloads.null_count() or acc.null_count() or work.null_count():
        return None
    p = n // m
    first = acc.head(p)
    if first.n_unique() != p or not _periodic(acc, first):  # every block names first's accelerators in order
        return None
    if not _in_blocks(work, workloads):  # every row of a block is its estimate row's workload
        return None
    block = times["compute_s"].cast(pl.Float64).to_numpy().reshape(m, p)
    col_of = {a: j for j, a in enumerate(first.to_list())}
    return KeyCompute(block, np.array([col_of.get(a, -1) for a in acc_ids["accelerator"].to_list()], dtype=np.int64))


def compute_matrix(keys: pl.DataFrame, times: pl.DataFrame, acc_ids: pl.DataFrame) -> KeyCompute:
    """Returns the compute seconds of `keys` (key, workload; rows 0..max key) from `times` in any row order.

    `compute_times` writes a workload's rows together, so `times` is matched to the keys per run of
    equal workloads (a run-length encoding), not per row: the same result for any row order, and a
    join of the distinct workloads instead of every (workload, accelerator) row when they come in runs.
    """
    n_keys = int(keys["key"].max()) + 1 if keys.height else 0
    n_acc = acc_ids.height
    out = np.full((n_keys, n_acc), np.nan)
    if not n_keys or times.is_empty():
        return KeyCompute(out, np.arange(n_acc))
    runs = times.select(pl.col("workload").rle()).unnest("workload").with_row_index("run")
    lens = runs["len"].to_numpy().astype(np.int64)
    pairs = runs.join(keys.select("key", pl.col("workload").alias("value")), on="value", how="inner")
    run, key = pairs["run"].to_numpy(), pairs["key"].to_numpy().astype(np.int64)
    acc = (times["accelerator"].cast(pl.Enum(acc_ids["accelerator"].to_list()), strict=False)
           .to_physical().cast(pl.Int64).fill_null(n_acc).to_numpy())  # Enum codes in acc_ids' order
    compute = times["compute_s"].to_numpy()
    if np.bincount(run, minlength=len(lens)).max(initial=0) <= 1:  # one key per workload at most
        key_of_run = np.full(len(lens), -1, dtype=np.int64)
        key_of_run[run] = key
        key_row = np.repeat(key_of_run, lens)
    else:  # a workload shared by several keys: each (run, key) pair takes its run's rows
        plen = lens[run]
        pair_of = np.repeat(np.arange(len(run)), plen)
        row = (np.cumsum(lens) - lens)[run][pair_of] + (np.arange(int(plen.sum())) - np.repeat(np.cumsum(plen) - plen, plen))
        key_row, acc, compute = key[pair_of], acc[row], compute[row]
    keep = (key_row >= 0) & (acc < n_acc)
    out[key_row[keep], acc[keep]] = compute[keep]
    return KeyCompute(out, np.arange(n_acc))
