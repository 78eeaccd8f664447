#!/usr/bin/env bash
# Chapter 13 on a lent GPU, in one device call (a second call could find the machine gone: an idle
# one goes back after 30 s, and a session has 15 minutes of device time, a machine's start
# included).
#
#   make gpu-bundle                  # here: .whl/ (the wheels) and data_cache/ (IMDB's cache)
#   bash scripts/gpu_run.sh stage    # here: the old weights leave what travels; prints its size
#   run(command="bash scripts/gpu_run.sh all", carry=[".whl", "data_cache"], timeout_s=600)
#   bash scripts/gpu_run.sh unstage  # here, only if the run brought no new weights back
#
# A call carries at most 64 MiB. The repository (24 MB, 13 MB of it the shipped weights), the
# wheels (10 MB) and IMDB's cache (38 MB) pass it; without the weights they fit. The run trains
# new weights and never reads the old ones, so `stage` takes them out of git's index and the
# working tree until the new ones replace them (or `unstage` puts them back).
#
# `all` unpacks the wheels, then executes the chapter top to bottom (notebooks/next/'s version
# where there is one; it trains, since a GPU is there, and writes the shipped model) under what is
# left of 590 s, and copies the executed notebook, the model's four files and the log into $OUT:
# only files the run wrote, and whatever it wrote even if it stopped early. `install` and `run`
# are its two halves. Locally (in a clone, without `stage`: `run` overwrites the chapter),
# OUT=<folder> makes `run` or `all` a CPU rehearsal: with no GPU the chapter loads the shipped
# model instead of training, and writes no model files. `bench` runs benchmarks/imdb.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
NOTEBOOK=notebooks/13_imdb_encoder.ipynb
NEXT=notebooks/next/13_imdb_encoder.ipynb
WEIGHTS=attnlib/assets/imdb/model.safetensors
CARRIED=(.whl data_cache)
CARRY_LIMIT=$((64 * 1024 * 1024))

environment() {  # $1: where the wheels are (or will be) unpacked
  export PYTHONPATH="$1:$PWD" PYTHONUNBUFFERED=1 MPLBACKEND=module://matplotlib_inline.backend_inline
  export ATTNLIB_CACHE="$PWD/data_cache"
  # The chapter's CPU-side numbers (the n-gram baselines, the shipped-model check) with CI's kernels.
  export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2
}

install_wheels() {  # $1: the folder to unpack them into
  ls .whl/*.whl >/dev/null
  rm -rf "$1"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$1" .whl/*.whl
}

run_chapter() {  # $1: seconds the chapter may take
  : "${OUT:?OUT must name the folder for the results (the device tool sets it)}"
  "$PYTHON" -c "import nbclient, ipykernel, zstandard" || {
    echo "the notebook runner is missing: run 'scripts/gpu_run.sh install' first" >&2; exit 2; }
  ls data_cache/imdb-aclImdb_v1.cache >/dev/null
  # The chapter as it waits for this run (notebooks/next/) replaces the stored one here, on the
  # lent machine's throwaway copy; the executed notebook comes back in $OUT.
  if [ -f "$NEXT" ]; then cp "$NEXT" "$NOTEBOOK"; fi
  touch "$OUT/.started"
  local status=0
  { echo "the chapter may take $1 s"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
    timeout "$1" "$PYTHON" scripts/execute_notebooks.py "$NOTEBOOK"; } 2>&1 \
    | tee "$OUT/run.log" || status=$?
  # Only files this run wrote: never the old model passed off as the new one.
  find "$NOTEBOOK" attnlib/assets/imdb -maxdepth 1 -type f -newer "$OUT/.started" \
    -exec cp {} "$OUT/" \;
  rm -f "$OUT/.started"
  ls -l "$OUT"
  return "$status"
}

travelling_bytes() {  # what a device call sends: git's files (tracked, or untracked and not ignored), and the carried folders
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
  # Under the device's 600 s per call, so that the log and any saved model still come back.
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
  if git ls-files --error-unmatch "$WEIGHTS" >/dev/null 2>&1; then git rm -q "$WEIGHTS"; fi
  bytes=$(travelling_bytes)
  echo "a call carrying ${CARRIED[*]} sends $((bytes / 1024 / 1024)) MiB ($bytes bytes; at most $CARRY_LIMIT)"
  [ "$bytes" -le "$CARRY_LIMIT" ] || { echo "too much to travel: ignore or remove something" >&2; exit 1; }
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
  echo "usage: scripts/gpu_run.sh all|install|run|stage|unstage|bench" >&2
  exit 2
  ;;
esac
