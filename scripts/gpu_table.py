"""The README's table of chapter 13's GPU run, written from the run's own record.

    python scripts/gpu_table.py            # print the table for attnlib/assets/imdb/
    python scripts/gpu_table.py --write    # put it in README.md between its two markers

Every number in the table comes from the shipped `results.json` and `config.json`, so the README
cannot describe another run than the one that ships; `tests/test_gpu_run.py` checks that it
matches. `scripts/gpu_run.sh land` runs it with `--write`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from attnlib.config import peak_of

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "attnlib" / "assets" / "imdb"
README = ROOT / "README.md"
BEGIN = "<!-- chapter 13's GPU run: written by scripts/gpu_table.py from attnlib/assets/imdb/ -->"
END = "<!-- end of chapter 13's GPU run -->"


def peak_tflops(results: dict) -> float | None:
    """The device's dense bf16 peak in TFLOP/s: as recorded, else looked up by the device's name."""
    return results["pretraining"].get("peak_tflops") or peak_of(results["device"])


def throughput(tokens_per_second: float, flops_per_token: float, peak: float | None) -> str:
    """Tokens/s, TFLOP/s at the FLOPs per token and, where the peak is known, its share."""
    tflops = tokens_per_second * flops_per_token / 1e12
    text = (
        f"{tokens_per_second / 1e6:.1f} M tokens/s = {tflops:.0f} TFLOP/s "
        f"at {flops_per_token / 1e6:.1f} MFLOP/token"
    )
    return text + (f", {tflops / peak:.0%} of peak" if peak else "")


def shipped_run(results: dict) -> str:
    """The key of the shipped fine-tuning run: the first pretrained one (seed 0 runs first)."""
    return next(key for key in results["finetuning"] if key.startswith("pretrained"))


def pretraining_rows(results: dict, config: dict) -> list[tuple[str, str]]:
    """The device, and the masked-LM pretraining's length and throughput."""
    pre, peak = results["pretraining"], peak_tflops(results)
    per_token = pre["flops_per_token"]
    device = results["device"] + (f" ({peak:.0f} TFLOP/s dense bf16 peak)" if peak else "")
    blocks = f"{config['pretrain_batch']} × {config['max_len']} tokens"
    rows = [("device", device)]
    if "software" in results:  # recorded from the second run on
        rows.append(("software", results["software"]))
    rows += [
        (
            "masked-LM pretraining",
            f"{pre['steps']:,} steps of {blocks} in {pre['seconds'][-1]:.0f} s",
        ),
        ("pretraining throughput", throughput(pre["tokens_per_second"], per_token, peak)),
    ]
    if pre.get("steady_tokens_per_second"):
        steady = throughput(pre["steady_tokens_per_second"], per_token, peak)
        rows.append(("the same, after the first twentieth (compilation left out)", steady))
    return rows


def finetuning_rows(results: dict, config: dict) -> list[tuple[str, str]]:
    """The shipped run's fine-tuning time, and how long until 90% accuracy."""
    seconds = results["finetuning"][shipped_run(results)]["seconds"]
    epochs = f"{len(seconds)} epoch{'s' if len(seconds) > 1 else ''}"
    rows = [
        (
            "fine-tuning",
            f"{epochs} in {seconds[-1]:.0f} s ({seconds[-1] / len(seconds):.0f} s per epoch, "
            f"evaluation included; {config['n_valid']:,} training reviews held out for validation)",
        )
    ]
    if "seconds_to_90_valid" in results:
        to_90 = results["seconds_to_90_valid"]
        reached = "not reached" if to_90 is None else f"{to_90:.0f} s, pretraining included"
        rows.append(("time to 90% validation accuracy", reached))
    elif results.get("seconds_to_90") is not None:  # the first run scored the test set every epoch
        rows.append(
            ("time to 90% test accuracy", f"{results['seconds_to_90']:.0f} s, pretraining included")
        )
    return rows


def accuracy_rows(results: dict) -> list[tuple[str, str]]:
    """Test accuracies, the spread over fine-tuning seeds, and the paired test against NBSVM."""
    # "pretrained, seed 0" gives "seed 0"; the first record's key, "pretrained", gives "".
    seed = shipped_run(results).removeprefix("pretrained").lstrip(", ")
    which = f"{seed}; shipped" if seed else "shipped"
    baselines = "; ".join(f"{value:.2%} {name}" for name, value in results["baselines"].items())
    rows = [
        (
            f"test accuracy ({results['test_reviews']:,} reviews)",
            f"{results['test_accuracy']:.2%} pretrained and fine-tuned ({which}); "
            f"{results['scratch_test_accuracy']:.2%} from scratch; baselines: {baselines}",
        )
    ]
    seeds = list(results.get("seed_test_accuracies", {}).values())
    if len(seeds) > 1:
        each = ", ".join(f"{value:.2%}" for value in seeds)
        spread = f"{statistics.mean(seeds):.2%} ± {statistics.stdev(seeds):.2%} (mean ± sd; {each})"
        rows.append((f"over {len(seeds)} fine-tuning seeds", spread))
    if "mcnemar_nbsvm" in results:
        m = results["mcnemar_nbsvm"]
        p = "p < 0.0001" if m["p_value"] < 1e-4 else f"p = {m['p_value']:.2g}"
        rows.append(
            (
                "shipped encoder against NBSVM, review by review",
                f"only the encoder right on {m['encoder_only']:,}, only NBSVM on "
                f"{m['nbsvm_only']:,}, of {m['reviews']:,}; exact McNemar {p}",
            )
        )
    return rows


def table_rows(results: dict, config: dict) -> list[tuple[str, str]]:
    """(what, value) rows describing the run recorded in `results` with `config`."""
    return (
        pretraining_rows(results, config)
        + finetuning_rows(results, config)
        + accuracy_rows(results)
    )


def table(folder: Path = MODEL) -> str:
    """The markdown table, between its markers, for the run recorded in `folder`."""
    results = json.loads((folder / "results.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    lines = [BEGIN, "| measured in that run | value |", "| --- | --- |"]
    lines += [f"| {what} | {value} |" for what, value in table_rows(results, config)]
    return "\n".join([*lines, END])


def replace_table(readme: str, new_table: str) -> str:
    """`readme` with the text from BEGIN to END replaced by `new_table`."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no table between {BEGIN!r} and {END!r}")
    return readme[:start] + new_table + readme[end + len(END) :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=MODEL, help="holds results.json, config.json")
    parser.add_argument("--write", action="store_true", help="replace the table in README.md")
    args = parser.parse_args()
    new_table = table(args.model)
    if args.write:
        README.write_text(replace_table(README.read_text(), new_table))
    print(new_table)


if __name__ == "__main__":
    main()
