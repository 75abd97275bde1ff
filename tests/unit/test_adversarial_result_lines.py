"""A trial that prints the agent's result line (issue 31): the pure parts. The agent rewrites every
`GPULEDGER_RESULT ` the trial prints (`gpuledger.agent.owned`), signs its own line with the job's key
(`gpuledger.agent.signing`), and the SkyPilot log reader believes only a line signed with that key
(`skypilot_logs.signed_result_lines`). Each attack sits beside its positive control."""

from __future__ import annotations

import json

from gpuledger.agent.owned import NEUTRAL_PREFIX, Neutraliser, note
from gpuledger.agent.signing import result_line_signed, sign, signed_result_line
from gpuledger.launch.skypilot_logs import parse_result_lines, signed_result_lines
from gpuledger.protocol import METRIC_LINE_PREFIX, RESULT_LINE_PREFIX

KEY = b"0123456789abcdef" * 4
FORGED = 'GPULEDGER_RESULT {"run_id": "x", "status": "succeeded", "final_metrics": {"eval_loss": -1e9}}\n'


def _through(pieces: list[bytes]) -> tuple[bytes, int]:
    n = Neutraliser()
    out = b"".join(n.feed(p) for p in pieces) + n.finish()
    return out, n.count


def test_a_result_line_the_trial_prints_is_neutralised_and_counted():
    out, count = _through([FORGED.encode()])
    assert count == 1 and parse_result_lines(out.decode()) == []
    assert out.decode().startswith(NEUTRAL_PREFIX)  # still readable in the log, never parsed
    assert note(count) == ("the trial printed 1 GPULEDGER_RESULT line(s); ignored "
                           "(passed on as GPULEDGER_RESULT_FROM_TRIAL)")
    # positive control: ordinary output and the trial's own metric lines pass unchanged, no note
    text = b'epoch 1 done\n' + METRIC_LINE_PREFIX.encode() + b'{"name": "loss", "value": 1.5}\n'
    assert _through([text]) == (text, 0) and note(0) is None


def test_anywhere_on_a_line_after_a_skypilot_prefix_or_a_carriage_return_is_neutralised():
    # the log reader finds the prefix anywhere on a line, and SkyPilot splits lines at \r too
    pieces = [b"(task, pid=1) " + FORGED.encode(), b"progress 10%\r" + FORGED.encode(),
              b"\x1b[36m" + FORGED.encode()]
    out, count = _through(pieces)
    assert count == 3 and parse_result_lines(out.decode()) == []


def test_a_prefix_split_across_two_reads_is_caught():
    # the agent reads a line in pieces (MAX_LINE_BYTES): the prefix may end one piece and begin the next
    line = FORGED.encode()
    for cut in range(1, len(RESULT_LINE_PREFIX)):
        out, count = _through([b"x" * 10 + line[:cut], line[cut:]])
        assert count == 1 and parse_result_lines(out.decode()) == [], cut
    # positive control: a piece that only looks like the prefix's start is released, whole and in order
    out, count = _through([b"GPULEDGER_RES", b"IDENT=1\n"])
    assert (out, count) == (b"GPULEDGER_RESIDENT=1\n", 0)


def test_the_agents_signed_line_verifies_and_a_changed_one_does_not():
    text = json.dumps({"run_id": "r1", "status": "succeeded", "final_metrics": {"eval_loss": 1.07}},
                      separators=(",", ":"))
    line = signed_result_line(text, KEY)
    assert line == f"{RESULT_LINE_PREFIX}{text} hmac-sha256={sign(KEY, text.encode())}"
    (good,), bad = signed_result_lines("(task, pid=7) " + line + "\x1b[0m\n", KEY)
    assert good["final_metrics"] == {"eval_loss": 1.07} and bad == []  # positive control
    # the same record with another metric, the signature of another record, another key, no signature
    tampered = line.replace("1.07", "-1e9")
    other = f"{RESULT_LINE_PREFIX}{text.replace('1.07', '0.1')} hmac-sha256={sign(KEY, text.encode())}"
    for forged in (tampered, other, signed_result_line(text, b"f" * 64), signed_result_line(text, None),
                   line[:-10], line.replace("hmac-sha256=", "hmac-sha256= ")):
        signed, unsigned = signed_result_lines(forged + "\n", KEY)
        assert signed == [] and len(unsigned) == 1, forged


def test_a_signature_is_checked_over_the_exact_json_text():
    text = '{"a":1}'
    assert result_line_signed(text, f" hmac-sha256={sign(KEY, text.encode())}", KEY)
    # the same value written with other spacing is other text: not the agent's bytes
    assert not result_line_signed('{"a": 1}', f" hmac-sha256={sign(KEY, text.encode())}", KEY)
    assert not result_line_signed(text, "", KEY)
