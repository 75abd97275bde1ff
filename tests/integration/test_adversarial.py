"""Adversarial inputs of the spec side (issue #17): one test per attack, each reproducing it first.

Each attack is what a careful hostile user would try; each must be answered with one clear message,
in bounded time and memory, with nothing executed and no traceback. Attacks that could hang or eat
memory if they regressed run in a real subprocess with a memory limit and a timeout.
"""

from __future__ import annotations

import os
import resource
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.spec import SpecError, expand_trials, load_spec, parse_spec

REPO = Path(__file__).resolve().parents[2]
GPULEDGER = [sys.executable, "-m", "gpuledger.cli"]

GOOD = textwrap.dedent(
    """\
    kind: sweep
    name: adv
    project: p
    owner: o
    model: gpt2
    train: {seq_len: 128, tokens_per_trial: 1000}
    search:
      params:
        lr: [0.001, 0.01]
      objective: {metric: eval_loss}
    budget: {max_usd: 10}
    task:
      run: python train.py --lr {lr}
    """
)


def _limited(max_gib: float = 1.0):
    def apply():
        limit = int(max_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def _cli(*args: str, timeout: float = 60, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Runs `gpuledger ARGS` in a real subprocess under a 1.5 GiB address-space limit."""
    return subprocess.run([*GPULEDGER, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          preexec_fn=_limited(1.5), env={**os.environ, "PYTHONPATH": str(REPO)})


def _problems(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "adv.yaml")
    return str(info.value)


# ------------------------------------------------------------------------------------------------
# #17.2 the YAML loader is bounded


def test_alias_bomb_is_refused_at_once(tmp_path):
    """800 bytes of nested aliases expand to 9**9 = 387 million strings (gigabytes): PyYAML's
    safe loader never finishes. The bounded loader stops at 20,000 expanded values."""
    lol = '"lol-lol-lol-lol-lol-lol-lol-lol-lol-lol-lol"'
    lines = [f"a: &a [{', '.join([lol] * 9)}]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert 600 <= bomb.stat().st_size <= 900
    done = _cli("validate", str(bomb))
    assert done.returncode == 1, done
    assert "alias" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{bomb}:"), done.stderr


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: *a}\n", "a: &a [[x, [*a]]]\n"])
def test_a_recursive_alias_is_refused_not_a_recursion_error(text):
    """An alias inside the collection it names made the positions walk recurse until RecursionError."""
    assert "refused: an alias refers to a collection that contains it (a cycle)" in _problems(text)


def test_aliases_chained_past_the_depth_limit_are_refused():
    """Each anchor 60 deep holding an alias of the one before: 50 aliases nest 3,000 deep once expanded."""
    lines = ["x0: &x0 " + "[" * 60 + "1" + "]" * 60]
    lines += [f"x{i}: &x{i} " + "[" * 60 + f"*x{i - 1}" + "]" * 60 for i in range(1, 50)]
    assert "nested more than 64 levels deep (aliases expanded)" in _problems("\n".join(lines) + "\n")


def test_many_aliases_are_refused():
    text = "x: &x 1\ny: [" + ", ".join(["*x"] * 150) + "]\n"
    assert "more than 100 aliases" in _problems(text)


@pytest.mark.parametrize("shape", ["flow-list", "flow-map", "block-map"])
def test_deep_nesting_is_refused_not_a_recursion_error(shape):
    """5,000 nested collections overflow PyYAML's recursive composer (RecursionError)."""
    n = 5000
    if shape == "flow-list":
        text = "a: " + "[" * n + "]" * n + "\n"
    elif shape == "flow-map":
        text = "a: " + "{a: " * n + "1" + "}" * n + "\n"
    else:
        n = 600  # 5,000 indented levels would be 12 MiB, over the size limit
        text = "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "1\n"
    message = _problems(text)
    assert "nested more than 64 levels deep" in message and message.count("\n") == 0


@pytest.mark.parametrize("key,kind", [("1", "an integer"), ("null", "empty (null)"), ("~", "empty (null)"),
                                      ("off", "a boolean"), ("2.5", "a number")])
def test_non_text_keys_are_named_not_a_type_error(key, kind):
    """`1:` or `null:` as a grid parameter made the name check raise TypeError."""
    text = GOOD.replace("    lr: [0.001, 0.01]\n", f"    lr: [0.001, 0.01]\n    {key}: [a, b]\n")
    message = _problems(text)
    assert f"adv.yaml:10:5: search.params: key {key!r} is {kind}" in message
    assert "quote it" in message


def test_a_list_as_key_is_refused():
    text = GOOD.replace("    lr: [0.001, 0.01]\n", "    lr: [0.001, 0.01]\n    ? [a, b]\n    : [1]\n")
    assert "a key must be a name, not a list or mapping" in _problems(text)


def test_python_tags_construct_nothing(tmp_path):
    marker = tmp_path / "pwned"
    text = GOOD.replace("owner: o", f"owner: !!python/object/apply:os.system ['touch {marker}']")
    message = _problems(text)
    assert "adv.yaml:4:8: owner: YAML error" in message and "python/object/apply" in message
    assert not marker.exists()


def test_an_integer_of_5000_digits_is_one_line():
    text = GOOD.replace("max_usd: 10", "max_usd: " + "9" * 5000)
    message = _problems(text)
    assert "budget.max_usd: cannot read this value" in message and "Traceback" not in message


def test_an_oversized_text_is_refused_before_parsing():
    message = _problems("a: b\n" * 100_000)
    assert "at most 256 KiB" in message


# ------------------------------------------------------------------------------------------------
# #17.2 spec files: regular files of bounded size only


def test_dev_zero_is_refused_at_once():
    """Reading /dev/zero as a spec ran until MemoryError."""
    done = _cli("validate", "/dev/zero", timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip() == "/dev/zero:1:1: is a device, not a regular file; give the path of a YAML file"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """A FIFO with no writer blocked `validate` forever."""
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    done = _cli("validate", str(fifo), timeout=30)
    assert done.returncode == 1
    assert "is a FIFO (named pipe), not a regular file" in done.stderr


def test_an_empty_path_is_named():
    with pytest.raises(SpecError, match=r"^'':1:1: empty path: give the path of a file$"):
        load_spec("")


def test_a_directory_and_a_huge_file_are_refused(tmp_path):
    with pytest.raises(SpecError, match="is a directory, not a file"):
        load_spec(tmp_path)
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(10 * 2**30)  # 10 GiB, sparse: nothing is read
    with pytest.raises(SpecError, match=r"big.yaml:1:1: is 10485760 KiB; a file here may be at most 256 KiB"):
        load_spec(big)


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(GOOD.encode().replace(b"owner: o", b"owner: \xe9t\xe9"))
    with pytest.raises(SpecError, match=r"is not UTF-8 text \(byte \d+, line 4"):
        load_spec(bad)


def test_every_refusal_through_the_cli_is_one_line(tmp_path, capsys):
    (tmp_path / "deep.yaml").write_text("a: " + "[" * 5000 + "]" * 5000)
    code = main(["validate", str(tmp_path / "deep.yaml"), "/dev/null", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 3, err


def test_a_model_config_nested_100000_deep_is_one_line(tmp_path, capsys):
    """`estimate deep.json` (or a spec's `model:` naming it) raised RecursionError from json.loads."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["estimate", str(deep)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"gpuledger estimate: {deep}: nested too deep to be an HF config.json"


def test_a_huge_model_config_is_not_read(tmp_path, capsys):
    big = tmp_path / "config.json"
    with big.open("wb") as f:
        f.truncate(8 * 2**30)
    assert main(["estimate", str(big)]) == 1
    assert "is 8388608 KiB; a file here may be at most 4096 KiB" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# #17.3 placeholders: only where a shell-quoted value is safe, checked with a real bash

PAYLOADS = ["$(touch {m})", "`touch {m}`", "'; touch {m}; '", '"; touch {m}; "', "\\'$(touch {m})", "x\ntouch {m}"]


def _with_run(run: str, values: list[str]) -> str:
    block = "\n".join("        " + line for line in run.splitlines())
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return GOOD.replace("    lr: [0.001, 0.01]\n", f"    x: [{quoted}]\n").replace(
        "  run: python train.py --lr {lr}\n", f"  run: |\n{block}\n")


def _bash(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("run,line,why", [
    ('echo "{x}"', 1, "inside double quotes"),
    ("echo '{x}'", 1, "inside single quotes"),
    ("true\necho `echo {x}`", 2, "inside backticks"),
    ("echo ${{HOME:-{x}}}", 1, "inside ${...}"),
    ("echo \\{x}", 1, "right after a backslash"),
    ("echo ${x}", 1, "right after $"),
    ("cat <<EOF\n{x}\nEOF", 2, "inside a here-document"),
    ("echo $(( {x} + 1 ))", 1, "inside arithmetic"),
    ("echo $'{x}'", 1, "inside $'...'"),
    ('echo "$(printf %s "{x}")"', 1, "inside double quotes"),
])
def test_a_placeholder_in_an_unsafe_spot_is_refused_with_its_line(tmp_path, run, line, why):
    text = _with_run(run, [p.format(m=tmp_path / "pwned") for p in PAYLOADS])
    message = _problems(text)
    spec_line = text.splitlines().index("  run: |") + 1 + line  # the command's line 1 follows `run: |`
    assert f"adv.yaml:{spec_line}:" in message and "task.run: placeholder {x} sits " in message, message
    assert why in message


def test_in_a_folded_command_the_line_is_the_file_line_of_the_unsafe_placeholder():
    text = GOOD.replace("  run: python train.py --lr {lr}\n",
                        '  run: >-\n    python train.py\n    --a {lr} --b {lr}\n    --c "{lr}"\n')
    line = text.splitlines().index('    --c "{lr}"') + 1
    assert _problems(text).startswith(f"adv.yaml:{line}:1: task.run: placeholder {{lr}} sits inside double quotes")


def test_the_attack_is_real_without_the_check(tmp_path):
    """Reproduces #17.3: quoting the already-quoted value inside "..." runs the payload."""
    from gpuledger.spec.templates import _format_value

    marker = tmp_path / "pwned"
    value = f"$(touch {marker})"
    naive = 'echo "{x}"'.format_map({"x": shlex.quote(_format_value(value))})
    _bash(naive, tmp_path)
    assert marker.exists()


@pytest.mark.parametrize("run", [
    "echo {x}",
    "python -c 'import sys; print(sys.argv)' --x={x} {x}",
    "echo $(printf '%s' {x})",
    "echo \"$(printf '%s' {x})\"",
    "# a comment may mention \"{x}\"\necho {x}",
    "cat <<'EOF'\n{x}\nEOF",
    "(cd . && echo {x}) | cat",
    "X={x}; echo \"$X\"",
])
def test_safe_spots_execute_nothing_in_real_bash(tmp_path, run):
    marker = tmp_path / "pwned"
    values = [p.format(m=marker) for p in PAYLOADS]
    spec = parse_spec(_with_run(run, values), "adv.yaml")
    trials = expand_trials(spec)
    assert len(trials) == len(values)
    for trial in trials:
        done = _bash(trial.run, tmp_path)
        assert done.returncode == 0, (trial.run, done.stderr)
        assert not marker.exists(), trial.run


def test_render_refuses_an_unsafe_template_built_in_code():
    from gpuledger.errors import UserError
    from gpuledger.spec import render_command

    with pytest.raises(UserError, match="inside double quotes"):
        render_command('echo "{x}"', {"x": "$(id)"})


# ------------------------------------------------------------------------------------------------
# #17.6 grids have a size limit, checked before anything is expanded


def test_three_100_value_lists_are_refused_at_once(tmp_path):
    """Three 100-value lists made `validate` expand a million trials (killed after minutes)."""
    lists = "\n".join(f"    p{i}: [{', '.join(str(v) for v in range(100))}]" for i in range(3))
    spec = tmp_path / "million.yaml"
    spec.write_text(GOOD.replace("    lr: [0.001, 0.01]", lists).replace("{lr}", "{p0}"))
    done = _cli("validate", str(spec), timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"{spec}:8:3: search.params: the grid has 1,000,000 points (100 x 100 x 100); a sweep may have at most "
        "10,000 trials: use fewer values, or strategy: random with n_trials")


def test_a_grid_built_in_code_is_never_expanded_past_the_limit():
    from gpuledger.errors import UserError
    from gpuledger.spec import iter_trials

    spec = parse_spec(GOOD, "adv.yaml")
    huge = spec.model_copy(update={"search": spec.search.model_copy(
        update={"params": {f"p{i}": list(range(100)) for i in range(3)}})})
    with pytest.raises(UserError, match="1,000,000 points"):
        next(iter_trials(huge))


def test_random_n_trials_beyond_the_distinct_combinations_is_refused():
    text = GOOD.replace("  params:", "  strategy: random\n  n_trials: 50\n  params:")
    assert "n_trials (50) is more than the 2 distinct combinations" in _problems(text)


def test_n_trials_over_the_limit_is_refused():
    text = GOOD.replace("  params:", "  strategy: random\n  n_trials: 1000000\n  params:").replace(
        "lr: [0.001, 0.01]", "lr: {low: 0.001, high: 0.1}")
    assert "search.n_trials: must be <= 10000 (got 1000000)" in _problems(text)


# ------------------------------------------------------------------------------------------------
# #17.8 strict scalars where it matters


@pytest.mark.parametrize("line,expected", [
    ("resources: {max_parallel: true}", "resources.max_parallel: expected a number, not true"),
    ("resources: {max_parallel: false}", "resources.max_parallel: expected a number, not false"),
    ("resources: {deadline_confidence: true}", "resources.deadline_confidence: expected a number, not true"),
])
def test_booleans_are_not_numbers(line, expected):
    """`max_parallel: true` was accepted as 1."""
    assert expected in _problems(GOOD + line + "\n")


def test_an_infinite_target_is_refused():
    text = GOOD.replace("objective: {metric: eval_loss}", "objective: {metric: eval_loss, target: .inf}")
    assert "search.objective.target: must be a finite number (got inf)" in _problems(text)


@pytest.mark.parametrize("value", ["1", "0", "'yes'", "'on'"])
def test_a_true_false_field_takes_only_true_or_false(value):
    text = GOOD.replace("train: {seq_len: 128,", f"train: {{grad_checkpointing: {value}, seq_len: 128,")
    assert "train.grad_checkpointing: expected true or false" in _problems(text)


def test_whole_numbers_written_as_floats_still_work():
    spec = parse_spec(GOOD.replace("tokens_per_trial: 1000", "tokens_per_trial: 1e6") + "resources: {max_parallel: 2.0}\n")
    assert spec.train.tokens_per_trial == 1_000_000 and spec.resources.max_parallel == 2


# ------------------------------------------------------------------------------------------------
# fuzz: random YAML and random bytes never produce a traceback from `validate`

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                     st.sampled_from(["*a", "&a x", "!!python/none", "1e999", "~", "[", "{", "'", '"', "- ", ": ",
                                      "{x}", '"{x}"', "$(id)", ".nan", "-.inf", "0x1F", "2026-01-01"]))
_KEYS = st.one_of(st.sampled_from(["kind", "name", "project", "owner", "model", "search", "params", "task", "run",
                                   "budget", "max_usd", "resources", "max_parallel", "train", "seq_len", "objective",
                                   "metric", "strategy", "n_trials", "exclude", "local", "serve", "traffic", "slo",
                                   "measured", "1", "null", "on", "<<"]), st.text(max_size=8))
_TREES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=5)), max_leaves=25)


def _validate_text(tmp_path: Path, data: bytes, capsys) -> None:
    spec = tmp_path / "fuzz.yaml"
    spec.write_bytes(data)
    code = main(["validate", str(spec)])  # anything but a one-line-per-problem answer raises here
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err
    if code == 1:
        assert all(line.startswith(f"{spec}:") for line in err.splitlines()), err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_TREES)
def test_random_yaml_trees_never_traceback(tmp_path, capsys, tree):
    import yaml

    try:
        text = yaml.safe_dump(tree, allow_unicode=True)
    except yaml.YAMLError:
        return
    base = {"kind": "sweep", "name": "fz", "project": "p", "owner": "o", "model": "gpt2"}
    merged = {**base, **tree} if isinstance(tree, dict) else tree
    _validate_text(tmp_path, yaml.safe_dump(merged, allow_unicode=True).encode(), capsys)
    _validate_text(tmp_path, text.encode(), capsys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), cut=st.integers(0, len(GOOD)))
def test_random_bytes_and_cut_specs_never_traceback(tmp_path, capsys, data, cut):
    _validate_text(tmp_path, data, capsys)
    _validate_text(tmp_path, GOOD.encode()[:cut] + data, capsys)
