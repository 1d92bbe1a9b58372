"""Stock `nbgrader autograde` vs this grader on the same batch, side by side in one run.

The batch: for each of the five assignments, N submissions (default 20, so 100 in all) made
from the released notebook: even ones fully solved, odd ones with one task left as released
(a different task each time), so scores are mixed. Both graders get identical copies of a
freshly released course; the script checks that their scores agree, then prints the wall
time of each, the throughput ratio, this grader's start-up time per call and its time per
submission.

    python bench/grading.py [--per-assignment N] [--workers W]

Both are measured as an instructor runs them: stock nbgrader as `nbgrader autograde <id>
--force` once per assignment (one kernel per submission, hidden checks inside the student's
kernel); this grader as one `python -m autograder grade <id> --force` process per assignment
(a fresh process: it computes the check data and starts its sandboxes every call; every
submission gets fresh state: a new process, a scrubbed /tmp and IPC namespace, a new cgroup
accounting).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ["ch1_pooling", "ch2_soft_hard", "ch3_seq2seq", "ch4_self_attention", "ch5_multihead"]


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def release_course(root: Path) -> Path:
    course = root / "course"
    course.mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "nbgrader_config.py", course)
    shutil.copytree(REPO / "autograder" / "source", course / "source")
    subprocess.run(
        [sys.executable, "-m", "autograder.release", "--course", str(course)],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    return course


def make_batch(course: Path, per_assignment: int) -> int:
    """Write the submissions; returns how many."""
    count = 0
    for assignment in ASSIGNMENTS:
        release = nbformat.read(
            course / "release" / assignment / f"{assignment}.ipynb", as_version=4
        )
        source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        answers = {
            _meta(c)["grade_id"]: "\n".join(
                line for line in c.source.split("\n") if " SOLUTION" not in line
            )
            for c in source.cells
            if _meta(c).get("solution") and c.cell_type == "code"
        }
        solution_ids = sorted(answers)
        for i in range(per_assignment):
            unsolved = None if i % 2 == 0 else solution_ids[(i // 2) % len(solution_ids)]
            notebook = nbformat.reads(nbformat.writes(release), as_version=4)
            for cell in notebook.cells:
                grade_id = _meta(cell).get("grade_id")
                if grade_id in answers and grade_id != unsolved:
                    cell.source = answers[grade_id]
            folder = course / "submitted" / f"student{i:02d}" / assignment
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, folder / f"{assignment}.ipynb")
            count += 1
    return count


def scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {
            (a, s.student.id): s.score for a in ASSIGNMENTS for s in gb.assignment_submissions(a)
        }


def run_stock(course: Path) -> float:
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    started = time.perf_counter()
    for assignment in ASSIGNMENTS:
        subprocess.run(
            [nbgrader, "autograde", assignment, "--force"],
            cwd=course,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return time.perf_counter() - started


def run_ours(course: Path, workers: int) -> tuple[float, list, list]:
    """(total seconds, [start-up seconds per call], [seconds per submission from the records])."""
    import json
    import re

    started = time.perf_counter()
    startups = []
    for assignment in ASSIGNMENTS:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "autograder",
                "--course",
                str(course),
                "grade",
                assignment,
                "--force",
                "--quiet",
                "--workers",
                str(workers),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        startups.append(float(re.search(r"start-up ([\d.]+) s", done.stdout).group(1)))
    elapsed = time.perf_counter() - started
    per_submission = [
        json.loads(p.read_text())["metadata"]["autograder"]["seconds"]
        for p in sorted((course / "autograded").glob("*/*/*.ipynb"))
    ]
    return elapsed, startups, per_submission


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-assignment", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        root = Path(tmp)
        print("releasing the five assignments into a temporary course...", flush=True)
        stock_course = release_course(root / "stock")
        ours_course = root / "ours" / "course"
        shutil.copytree(stock_course, ours_course)
        n = make_batch(stock_course, args.per_assignment)
        make_batch(ours_course, args.per_assignment)
        print(
            f"batch: {n} submissions ({args.per_assignment} per assignment, half fully solved)",
            flush=True,
        )

        stock_seconds = run_stock(stock_course)
        print(
            f"stock nbgrader autograde: {stock_seconds:7.1f} s  ({n / stock_seconds:.2f} submissions/s)",
            flush=True,
        )
        ours_seconds, startups, per_submission = run_ours(ours_course, args.workers)
        print(
            f"this grader ({args.workers} workers): {ours_seconds:7.1f} s  ({n / ours_seconds:.2f} submissions/s)",
            flush=True,
        )
        print(
            f"  start-up per `grade` call (check data + sandboxes): mean {sum(startups) / len(startups):.1f} s "
            f"(min {min(startups):.1f}, max {max(startups):.1f})"
        )
        print(
            f"  per submission (parse, sandboxed run, judge): mean {sum(per_submission) / len(per_submission):.2f} s "
            f"over {len(per_submission)}; wall time per submission {ours_seconds / n:.2f} s with {args.workers} workers"
        )

        stock_scores, ours_scores = scores(stock_course), scores(ours_course)
        disagreements = {
            k: (stock_scores.get(k), ours_scores.get(k))
            for k in stock_scores
            if stock_scores.get(k) != ours_scores.get(k)
        }
        print(
            f"scores agree on {len(stock_scores) - len(disagreements)} of {len(stock_scores)} submissions"
            + (f"; differ: {disagreements}" if disagreements else "")
        )
        print(
            f"throughput ratio (this grader / stock nbgrader): {stock_seconds / ours_seconds:.1f}x"
        )
        return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
