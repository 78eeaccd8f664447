#!/usr/bin/env bash
# Chapter 13's stored run, made on a GPU machine without internet access: everything the run
# needs travels with a copy of the working tree, one command runs it there, and what it wrote
# comes back here to land. CONTRIBUTING.md ("Chapter 13's stored run") says the same, step by step.
#
#   make gpu-bundle                  # here: .whl/ (the wheels) and data_cache/ (IMDB's cache)
#   bash scripts/gpu_run.sh stage    # here, optional: the old weights leave what travels; prints its size
#   OUT=DIR bash scripts/gpu_run.sh all   # there, in a copy of the working tree with .whl/ and data_cache/
#   bash scripts/gpu_run.sh land DIR # here: DIR holds the files the run wrote to OUT, copied back
#   bash scripts/gpu_run.sh unstage  # here, instead of land, if the run brought no new weights
#
# Where the copy to the GPU machine is limited in size, `stage` helps: the repository (24 MB,
# 13 MB of it the shipped weights), the wheels (14 MB) and IMDB's cache (38 MB) come to more than
# CARRY_LIMIT (64 MiB), and without the weights they fit. The run trains new weights and never
# reads the old ones, so `stage` takes them out of git's index and the working tree until the new
# ones replace them (or `unstage` puts them back), and it refuses a copy larger than CARRY_LIMIT.
#
# `all` unpacks the wheels, then executes the chapter top to bottom (notebooks/next/'s version
# where there is one; it trains, since a GPU is there, and writes the shipped model) under what is
# left of RUN_LIMIT_S (590 s unless set: a bound that still leaves time to write the log and
# whatever the run saved), and copies the executed notebook, the model's four files and the log
# into $OUT: only files the run wrote, and whatever it wrote even if it stopped early. `install`
# and `run` are its two halves. Locally (in a clone, without `stage`: `run` overwrites the
# chapter), OUT=<folder> makes `run` or `all` a CPU rehearsal: with no GPU the chapter loads the
# shipped model instead of training, and writes no model files. `land` checks what came back (the
# notebook ran every cell without an error; the four model files), puts the notebook in place of
# the stored chapter and the model in attnlib/assets/imdb/, removes notebooks/next/ and stages
# it all in git, with the README's GPU table rewritten from the new record (scripts/gpu_table.py);
# the sentence above that table, the README's line for chapter 13 and the chapter's run-specific
# sentences are still to reread.
# `bench` runs benchmarks/imdb.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
NOTEBOOK=notebooks/13_imdb_encoder.ipynb
NEXT=notebooks/next/13_imdb_encoder.ipynb
MODEL=attnlib/assets/imdb
MODEL_FILES=(config.json model.safetensors tokenizer.json results.json)
WEIGHTS=$MODEL/model.safetensors
CARRIED=(.whl data_cache)
CARRY_LIMIT=$((64 * 1024 * 1024))

environment() {  # $1: where the wheels are (or will be) unpacked
  export PYTHONPATH="$1:$PWD" PYTHONUNBUFFERED=1 MPLBACKEND=module://matplotlib_inline.backend_inline
  export ATTNLIB_CACHE="$PWD/data_cache"
  # The chapter's CPU-side numbers (the n-gram baselines, the shipped-model check) with CI's
  # kernels: the Makefile's PINNED_KERNELS, their one place.
  local pinned
  pinned=$(sed -n 's/^PINNED_KERNELS := //p' Makefile)
  [ -n "$pinned" ] || { echo "the Makefile defines no PINNED_KERNELS" >&2; exit 2; }
  # shellcheck disable=SC2086,SC2163  # one word per VARIABLE=value, each exported
  export $pinned
}

install_wheels() {  # $1: the folder to unpack them into
  ls .whl/*.whl >/dev/null
  rm -rf "$1"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$1" .whl/*.whl
}

run_chapter() {  # $1: seconds the chapter may take
  : "${OUT:?OUT must name the folder for the results: OUT=<folder> bash scripts/gpu_run.sh ...}"
  "$PYTHON" -c "import nbclient, ipykernel, zstandard" || {
    echo "the notebook runner is missing: run 'scripts/gpu_run.sh install' first" >&2; exit 2; }
  ls data_cache/imdb-aclImdb_v1.cache >/dev/null
  # The chapter as it waits for this run (notebooks/next/) replaces the stored one here, in the
  # GPU machine's throwaway copy of the working tree; the executed notebook goes to $OUT.
  if [ -f "$NEXT" ]; then cp "$NEXT" "$NOTEBOOK"; fi
  touch "$OUT/.started"
  local status=0
  { echo "the chapter may take $1 s"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
    # The log shows every cell's time and last lines, and a run that fails or runs out of time
    # still brings back the cells it ran (`land` refuses such a notebook).
    timeout "$1" "$PYTHON" scripts/execute_notebooks.py --log-cells --keep-partial "$NOTEBOOK"; } 2>&1 \
    | tee "$OUT/run.log" || status=$?
  # Only files this run wrote: never the old model passed off as the new one.
  find "$NOTEBOOK" attnlib/assets/imdb -maxdepth 1 -type f -newer "$OUT/.started" \
    -exec cp {} "$OUT/" \;
  rm -f "$OUT/.started"
  ls -l "$OUT"
  return "$status"
}

travelling_bytes() {  # what a copy to the GPU machine holds: git's files (tracked, or untracked and not ignored), and the bundle
  { git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null || true
    find "${CARRIED[@]}" -type f -exec stat -c %s {} +; } | awk '{ total += $1 } END { print total + 0 }'
}

case "${1:-}" in
install)
  environment "$PWD/.gpu_site"
  install_wheels .gpu_site
  "$PYTHON" -c "import attnlib, ipykernel, ipywidgets, nbclient, torch, zstandard; print('ready:', \
attnlib.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  ;;
run)
  environment "$PWD/.gpu_site"
  # RUN_LIMIT_S bounds the run, so that the log and any saved model are written even by a run
  # that would overrun; raise it for a slower GPU.
  run_chapter "${RUN_LIMIT_S:-590}"
  ;;
all)
  environment /tmp/gpu_site
  install_wheels /tmp/gpu_site
  run_chapter $((${RUN_LIMIT_S:-590} - SECONDS))
  ;;
stage)
  ls .whl/*.whl data_cache/imdb-aclImdb_v1.cache >/dev/null || {
    echo "no bundle here: run 'make gpu-bundle' first" >&2; exit 2; }
  for carried in "${CARRIED[@]}"; do
    [ ! -L "$carried" ] || { echo "$carried is a link: a copy takes the link, not what it points to" >&2; exit 2; }
  done
  if git ls-files --error-unmatch "$WEIGHTS" >/dev/null 2>&1; then git rm -q "$WEIGHTS"; fi
  bytes=$(travelling_bytes)
  echo "the working tree with ${CARRIED[*]} comes to $((bytes / 1024 / 1024)) MiB ($bytes bytes; at most $CARRY_LIMIT)"
  [ "$bytes" -le "$CARRY_LIMIT" ] || { echo "too much to travel: ignore or remove something" >&2; exit 1; }
  ;;
land)
  from=${2:?usage: scripts/gpu_run.sh land FOLDER (the files the run wrote to OUT, copied back here)}
  for name in "$(basename "$NOTEBOOK")" "${MODEL_FILES[@]}"; do
    [ -f "$from/$name" ] || { echo "$from has no $name: nothing landed ('unstage' restores the weights)" >&2; exit 1; }
  done
  "$PYTHON" - "$from/$(basename "$NOTEBOOK")" <<'PY'
import json
import sys

cells = json.load(open(sys.argv[1], encoding="utf-8"))["cells"]
failed = [i for i, c in enumerate(cells) if any(o["output_type"] == "error" for o in c.get("outputs", []))]
unrun = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and "".join(c["source"]).strip() and c["execution_count"] is None]
if failed or unrun:
    sys.exit(f"the chapter that came back failed in cells {failed} and did not run cells {unrun}: nothing landed")
PY
  # The README's table is written from the new record: a record it cannot read lands nothing.
  "$PYTHON" scripts/gpu_table.py --model "$from" >/dev/null || {
    echo "scripts/gpu_table.py cannot read the record that came back: nothing landed" >&2; exit 1; }
  cp "$from/$(basename "$NOTEBOOK")" "$NOTEBOOK"
  mkdir -p "$MODEL"  # git rm of the weights removes it where they were alone
  for name in "${MODEL_FILES[@]}"; do install -m 644 "$from/$name" "$MODEL/$name"; done
  if [ -d "$(dirname "$NEXT")" ]; then git rm -r -q "$(dirname "$NEXT")"; fi
  "$PYTHON" scripts/gpu_table.py --write >/dev/null
  git add "$NOTEBOOK" "$MODEL" README.md
  git status --short
  echo "landed, the README's GPU table rewritten from the new record: now update the sentence above" \
    "it (torch, CUDA, minutes), the README's line for chapter 13 (tests/test_gpu_run.py checks its" \
    "numbers) and chapter 13's run-specific sentences"
  ;;
unstage)
  git reset -q HEAD -- "$WEIGHTS"
  git checkout -- "$WEIGHTS"
  git status --short -- "$WEIGHTS"
  ;;
bench)
  environment "$PWD/.gpu_site"
  : "${OUT:?OUT must name the folder for the results}"
  "$PYTHON" benchmarks/imdb.py 2>&1 | tee "$OUT/bench.log"
  ;;
*)
  echo "usage: scripts/gpu_run.sh all|install|run|stage|land DIR|unstage|bench" >&2
  exit 2
  ;;
esac
