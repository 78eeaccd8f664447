#!/usr/bin/env bash
# Chapter 13 on a lent GPU: two device calls, back to back (an idle machine goes back after 30 s).
#
#   make gpu-bundle                     # here, once: .whl/ (the wheels) and data_cache/ (IMDB)
#   run(command="bash scripts/gpu_run.sh install", carry=[".whl"])
#   run(command="bash scripts/gpu_run.sh run", carry=["data_cache"], timeout_s=600)
#
# One call cannot carry both: the repository (24 MB), IMDB's cache (38 MB) and the wheels
# (11 MB) pass the 64 MiB a call may carry. `install` puts the wheels into .gpu_site/, which is
# ignored by git and so stays on the machine for the next call; `run` executes the chapter top
# to bottom (notebooks/next/'s version where there is one; it trains, since a GPU is there, and
# writes the shipped model), then copies the executed notebook, the model's four files and the
# log into $OUT: only files the run wrote, and whatever it wrote even if it stopped early.
# `bench` runs benchmarks/imdb.py in a call of its own. Locally (in a clone: `run` overwrites the
# chapter), OUT=<folder> makes `run` a CPU rehearsal: with no GPU the chapter loads the shipped
# model instead of training, and writes no model files.
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=.gpu_site
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD/$SITE:$PWD" PYTHONUNBUFFERED=1 MPLBACKEND=module://matplotlib_inline.backend_inline
export ATTNLIB_CACHE="$PWD/data_cache"
# The chapter's CPU-side numbers (the n-gram baselines, the shipped-model check) with CI's kernels.
export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2
NOTEBOOK=notebooks/13_imdb_encoder.ipynb
NEXT=notebooks/next/13_imdb_encoder.ipynb

case "${1:-}" in
install)
  ls .whl/*.whl >/dev/null
  rm -rf "$SITE"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
  "$PYTHON" -c "import attnlib, ipykernel, ipywidgets, nbclient, torch, zstandard; print('ready:', \
attnlib.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  ;;
run)
  : "${OUT:?OUT must name the folder for the results (the device tool sets it)}"
  [ -d "$SITE" ] || { echo "no $SITE: run 'scripts/gpu_run.sh install' first" >&2; exit 2; }
  ls data_cache/imdb-aclImdb_v1.cache >/dev/null
  # The chapter as it waits for this run (notebooks/next/) replaces the stored one here, on the
  # lent machine's throwaway copy; the executed notebook comes back in $OUT.
  if [ -f "$NEXT" ]; then cp "$NEXT" "$NOTEBOOK"; fi
  touch "$OUT/.started"
  status=0
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
    # Under the device's 600 s per call, so that the log and any saved model still come back.
    timeout "${RUN_LIMIT_S:-590}" "$PYTHON" scripts/execute_notebooks.py "$NOTEBOOK"; } 2>&1 \
    | tee "$OUT/run.log" || status=$?
  # Only files this run wrote: never the old model passed off as the new one.
  find "$NOTEBOOK" attnlib/assets/imdb -maxdepth 1 -type f -newer "$OUT/.started" \
    -exec cp {} "$OUT/" \;
  rm -f "$OUT/.started"
  ls -l "$OUT"
  exit "$status"
  ;;
bench)
  : "${OUT:?OUT must name the folder for the results}"
  "$PYTHON" benchmarks/imdb.py 2>&1 | tee "$OUT/bench.log"
  ;;
*)
  echo "usage: scripts/gpu_run.sh install|run|bench" >&2
  exit 2
  ;;
esac
