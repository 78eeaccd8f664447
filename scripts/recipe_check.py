"""Chapter 14's recipe check over many seeds, for the bounds of its two recipe claims.

The chapter trains its six recipes (``attnlib.tasks.dates_transformer.recipes``: pre-LN, a
warm-up, lr 0.01 and 0.001, a wider feed-forward, the three helpful-looking changes together)
for one seed. This script trains them, and both baselines (Bahdanau's model and the Transformer
with Part II's recipe), for every seed asked for, at the chapter's budget: the CPU time of 240
Bahdanau steps on this machine, timed as section 5 of the chapter times it (``step_seconds``).
It prints and writes each run's test exact match and steps. Set a bound on fitting seeds under
one kernel set, then confirm it on held-out seeds under another:

    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2 \\
        python scripts/recipe_check.py --seeds 0-7 --out /tmp/recipes_fit.json
    ATEN_CPU_CAPABILITY=default MKL_CBWR=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \\
        python scripts/recipe_check.py --seeds 100-107 --out /tmp/recipes_held_out.json

Seeds 0-7 and 100-107 take about 10 minutes each on 2 cores (64 runs of about 16 CPU s).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from seed_spread import parse_seeds  # scripts/ is on the path of a script run

from attnlib.config import seed_everything
from attnlib.parallel import run_parallel
from attnlib.tasks.dates import DateTaskConfig, exact_match, predict_test_split, prepare
from attnlib.tasks.dates_transformer import (
    TRANSFORMER,
    TransformerSizes,
    new_date_model,
    recipes,
    step_seconds,
    train_budget_seed,
)

BUDGET_STEPS = 240  # the chapter's budget, in Bahdanau steps at this machine's cost
SIZES = TransformerSizes(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0)
BASELINES = ("bahdanau", TRANSFORMER)  # the other runs are the recipes


def runs(config: DateTaskConfig) -> dict[str, tuple]:
    """Each run's (kind, task configuration, sizes, warm-up steps): both baselines, then the
    recipes as chapter 14 builds them."""
    found = {
        "bahdanau": ("bahdanau", config, None, 0),
        TRANSFORMER: (TRANSFORMER, config, SIZES, 0),
    }
    for name, (run_config, sizes, warmup) in recipes(config, SIZES, BUDGET_STEPS // 10).items():
        found[name] = (TRANSFORMER, run_config, sizes, warmup)
    return found


def bahdanau_step_seconds(config: DateTaskConfig) -> float:
    """Section 5's timing: median CPU seconds of a Bahdanau step on the first batch, with the
    Transformer's steps in turn."""
    task = prepare(config)
    seed_everything(0, threads=1)
    models = {
        "bahdanau": new_date_model("bahdanau", task),
        TRANSFORMER: new_date_model(TRANSFORMER, task, SIZES),
    }
    return step_seconds(models, task, task.train_batches(0)[0])["bahdanau"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=parse_seeds, required=True, help="e.g. 0-7 or 0,3,5")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    config = DateTaskConfig.for_mode(n_test=1_000)
    budget = BUDGET_STEPS * bahdanau_step_seconds(config)
    print(f"budget {budget:.1f} CPU s a run", flush=True)
    recipes = runs(config)
    keys = [(seed, name) for seed in args.seeds for name in recipes]
    jobs = []
    for seed, name in keys:
        kind, run_config, sizes, warmup = recipes[name]
        jobs.append((kind, run_config, seed, budget, sizes, warmup))
    trained = run_parallel(train_budget_seed, jobs, description="runs")
    task = prepare(config)
    targets = [target for _, target in task.splits.test]
    results: dict[str, dict] = {}
    for (seed, name), run in zip(keys, trained, strict=True):
        score = exact_match(predict_test_split(run.model, task), targets)
        results.setdefault(str(seed), {})[name] = {"score": score, "steps": run.history.steps}
    args.out.write_text(json.dumps({"budget": budget, "results": results}, indent=1))
    # the two numbers the chapter's claims bound
    for seed, by_name in results.items():
        score = {name: run["score"] for name, run in by_name.items()}
        best = max(value for name, value in score.items() if name not in BASELINES)
        listed = ", ".join(
            f"{name} {run['score']:.3f} ({run['steps']} steps)" for name, run in by_name.items()
        )
        print(f"seed {seed}: {listed}")
        print(
            f"  Bahdanau minus the best recipe {score['bahdanau'] - best:.3f}, "
            f"lr 0.003 minus lr 0.001 {score['transformer'] - score['lr 0.001']:.3f}"
        )


if __name__ == "__main__":
    main()
