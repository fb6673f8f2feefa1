"""How long `linkscope` takes to answer, against importing the third-party libraries it cannot start without.

Runs `linkscope predict train` (JSON) and `linkscope --help` as fresh processes, and the reference
`python -c "import numpy, pydantic, typer, rich, yaml"`, in interleaved rounds (so a busy machine slows all of them
alike); prints the median wall time of each and the ratio command / reference (target <= 1.6: the command line
costs little beyond its libraries). For scale it also times a bare typer app whose one command has as many options
as `predict train` and does nothing: what parsing such a command costs before any of linkscope runs (typer builds
a pydantic validator per option, which imports pydantic's machinery that `import pydantic` alone defers). Every
process may cache its bytecode, as an installed package's is cached (with PYTHONDONTWRITEBYTECODE set, linkscope
would compile its sources on each start while the libraries would not).

    python benchmarks/startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 1.6
REFERENCE = [sys.executable, "-c", "import numpy, pydantic, typer, rich, yaml"]
COMMANDS = {
    "predict train": [sys.executable, "-m", "linkscope", "predict", "train", "-s", "dgx-h100", "-m", "llama2-7b",
                      "--json"],
    "--help": [sys.executable, "-m", "linkscope", "--help"],
}
BARE_OPTIONS = 30
"""`predict train`'s options besides --json."""
_BARE_SIGNATURE = ", ".join(f"o{i}: Optional[str] = typer.Option(None)" for i in range(BARE_OPTIONS))
BARE_TYPER = [sys.executable, "-c", f"""
from typing import Optional
import numpy, pydantic, typer, rich, yaml
app, group = typer.Typer(), typer.Typer()
app.add_typer(group, name="predict")

@app.callback()
def root(version: bool = typer.Option(False, "--version")) -> None:
    pass

@group.command("train")
def train({_BARE_SIGNATURE}, as_json: bool = typer.Option(False, "--json")) -> None:
    print("{{}}")

app()
""", "predict", "train", "--json"]


def wall_s(argv: list[str]) -> float:
    """Wall time of one run of `argv`, which must succeed."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - began


def medians_s(runs: dict[str, list[str]], repeat: int) -> dict[str, float]:
    """Median wall time of each command over `repeat` rounds, each round running every command once (after one
    round that warms the file cache)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(repeat + 1):
        for name, argv in runs.items():
            took_s = wall_s(argv)
            if round_index:
                times[name].append(took_s)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11, help="Rounds (the median of each command is printed).")
    args = parser.parse_args()
    medians = medians_s({"reference": REFERENCE, "bare typer": BARE_TYPER, **COMMANDS}, args.repeat)
    reference_s = medians.pop("reference")
    bare_s = medians.pop("bare typer")
    print(f"{'import numpy, pydantic, typer, rich, yaml':<44} {reference_s:6.3f} s")
    print(f"{f'a bare typer command with {BARE_OPTIONS + 1} options':<44} {bare_s:6.3f} s  "
          f"{bare_s / reference_s:4.2f}x the imports (for scale)")
    worst = 0.0
    for name, took_s in medians.items():
        ratio = took_s / reference_s
        worst = max(worst, ratio)
        print(f"{'linkscope ' + name:<44} {took_s:6.3f} s  {ratio:4.2f}x the imports")
    verdict = "meets" if worst <= TARGET_RATIO else "misses"
    print(f"worst ratio {worst:.2f}x: {verdict} the target of {TARGET_RATIO}x")


if __name__ == "__main__":
    main()
