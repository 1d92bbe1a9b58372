"""Train the models the pages read and ship them: ``make models`` runs this.

Each recipe of ``solutions.shipped.RECIPES`` is trained (seeded, one thread each, two
at a time: where a run happens changes nothing on one machine), its parameters and
training history written to ``solutions/weights/<name>.npz``, and the manifest
``solutions/weights/manifest.json`` rewritten with every file's sha256. The pages'
claims about these models are written against the shipped files: after retraining on
another machine, read the pages' asserted numbers again (``make book`` fails on any
that no longer holds) before committing new weights.

    .venv/bin/python tools/train_models.py                 # every recipe
    .venv/bin/python tools/train_models.py ch3_bahdanau    # some (the manifest keeps the rest)
    .venv/bin/python tools/train_models.py --check         # the files match the manifest
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solutions import shipped  # noqa: E402


def train_one(name: str) -> tuple[str, dict, float]:
    import torch

    torch.set_num_threads(1)
    started = time.process_time()
    model, history = shipped.RECIPES[name].train()
    entry = shipped.save(name, model, history)
    return name, entry, time.process_time() - started


def check() -> int:
    entries = shipped.read_manifest()
    problems = [
        f"{name}: recipe not in solutions.shipped.RECIPES"
        for name in entries
        if name not in shipped.RECIPES
    ] + [f"{name}: not in the manifest" for name in shipped.RECIPES if name not in entries]
    for name, entry in entries.items():
        path = shipped.WEIGHTS / entry["file"]
        if not path.is_file():
            problems.append(f"{name}: {path} is missing")
        elif shipped.sha256(path) != entry["sha256"]:
            problems.append(f"{name}: {path} does not match its sha256")
    for problem in problems:
        print(problem)
    print(f"{len(entries)} shipped models, {len(problems)} problems")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="recipes to train (default: all)")
    parser.add_argument("--check", action="store_true", help="only check the files")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.check:
        return check()
    unknown = sorted(set(args.names) - set(shipped.RECIPES))
    if unknown:
        parser.error(f"unknown recipes {unknown}; known: {sorted(shipped.RECIPES)}")
    names = args.names or list(shipped.RECIPES)
    entries = shipped.read_manifest() if shipped.MANIFEST.is_file() else {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        for name, entry, cpu in pool.map(train_one, names):
            entries[name] = entry
            print(f"{name}: {cpu:.0f} s of CPU, sha256 {entry['sha256'][:12]}", flush=True)
    entries = {name: entries[name] for name in shipped.RECIPES if name in entries}
    shipped.write_manifest(entries)
    print(f"wrote {shipped.MANIFEST.relative_to(ROOT)} ({len(entries)} models)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
