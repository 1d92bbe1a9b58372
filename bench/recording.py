"""The recording step of a notebook over an intake cap vs an honest one, side by side.

The recording step is what the trusted side does with a submission's bytes after it is
graded (`autograder.course.rendering.render_autograded`: parse under the caps, build the autograded
notebook, sanitise it, write it as JSON), here run in this process, once per notebook, on
ch1_pooling's solved notebook and on each notebook of `tests/hostile/corpus.over_the_caps`
(60,000 cells, 30,000 nested ``<div>`` in a raw and in a markdown cell, 5 MB of stored
output, metadata 100 deep, 500 attachments: what took 325 CPU s and 244 MiB before the
caps), and on the costliest notebook within the caps (`corpus.at_the_caps`, recorded in
full: the bound the caps give). Prints each one's CPU seconds and the size of what it
wrote, and the ratio of the worst hostile one to the honest one.

    python bench/recording.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
from hostile import corpus  # noqa: E402

from autograder.checking import notebook  # noqa: E402
from autograder.checking.assignment_spec import load_assignment  # noqa: E402
from autograder.course import rendering  # noqa: E402

A = "ch1_pooling"


def cpu_seconds(spec, data: bytes, runs: int) -> tuple[float, int]:
    """The fastest of ``runs`` recordings of ``data``: (CPU seconds, bytes written)."""
    best, size = float("inf"), 0
    for _ in range(runs):
        started = time.process_time()
        text = rendering.render_autograded(spec, data, {}, {}, {}, notebook.DEFAULT_CAPS)
        best = min(best, time.process_time() - started)
        size = len(text.encode())
    return best, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        course = corpus.released_course(Path(root) / "course")
        spec = load_assignment(course, A)
        base = json.loads(nbformat.writes(corpus.solved(course, A)))
        honest = json.dumps(base).encode()
        cpu_seconds(spec, honest, 1)  # imports (nbconvert's markdown renderer) paid here
        honest_s, honest_size = cpu_seconds(spec, honest, args.runs)
        print(
            f"honest: {honest_s * 1000:.1f} ms CPU, {len(honest) >> 10} KiB in, {honest_size >> 10} KiB written"
        )
        worst = ("", 0.0)
        for name, (text, _why) in corpus.over_the_caps(base).items():
            data = text.encode()
            seconds, size = cpu_seconds(spec, data, args.runs)
            worst = max(worst, (name, seconds), key=lambda w: w[1])
            print(
                f"{name}: {seconds * 1000:.1f} ms CPU, {len(data) >> 10} KiB in, {size >> 10} KiB written"
            )
        at_caps = corpus.at_the_caps(base).encode()
        seconds, size = cpu_seconds(spec, at_caps, args.runs)
        print(
            f"at the caps (2,000 cells of HTML 80 deep, recorded in full): {seconds * 1000:.1f} "
            f"ms CPU, {len(at_caps) >> 10} KiB in, {size >> 10} KiB written, "
            f"{seconds / honest_s:.0f}x honest"
        )
        print(
            f"recording: worst hostile ({worst[0]}) / honest = {worst[1] / honest_s:.1f}x "
            f"({worst[1] * 1000:.1f} ms vs {honest_s * 1000:.1f} ms CPU)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
