"""The benchmarks still run (their figures are not asserted here: speed targets are read from
`make bench`'s own output, measured side by side in one run, never from a test's clock)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=800
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_grading_bench_runs_both_graders_on_one_batch_and_they_agree():
    """Two ch1 submissions (one fully solved, one with a task left blank): stock nbgrader and
    this grader give the same scores, and the bench prints its row and says it did not
    measure the target (it is on ch2 + ch5)."""
    out = _run("bench/grading.py", "--per-assignment", "2", "--assignments", "ch1_pooling")
    assert "scores agree on 2 of 2 submissions" in out, out
    row = next(line for line in out.splitlines() if line.startswith("ch1_pooling"))
    assert row.split()[3].endswith("x"), row  # stock, ours, ratio
    assert "target not measured: it is on ch2_soft_hard + ch5_multihead" in out, out


def test_attention_bench_reports_the_machine_and_every_target():
    out = _run("bench/attention.py", "--threads", "1", "--repeats", "1", "--sizes", "2048")
    for needed in ("CPU: ", "NumPy BLAS: ", "roofline: ", "with weights / fused SDPA = "):
        assert needed in out, (needed, out)
    # the floor of an unfused kernel, with its target for the thread count measured, on the
    # output-only call, the spread of its ratio over the rounds, what bounds it, and the
    # call returning the weights beside it
    assert "1 thread(s): fast, output only / its 2 BLAS products alone = " in out, out
    assert "(target <= 1.3, on the attention output: the weights array is not part" in out, out
    assert "over 1 rounds quartiles " in out, out
    assert "for torch exp2 + row sums (its kernel on this data)" in out, out
    assert "with the weights returned (the default): / its 2 BLAS products alone = " in out, out
    assert "peak memory at n=2048: online / plain attention" in out, out
