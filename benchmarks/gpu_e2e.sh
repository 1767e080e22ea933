#!/usr/bin/env bash
# The GPU check (not part of CI: CI has no GPU): on a host with NVIDIA GPUs and a Python that has CUDA PyTorch,
# run the ResNet-50 example through `cvmjob run` on the embedded emulator. The emulator maps the instance's GPUs
# (GT4.8XLARGE192: 2; GT4.4XLARGE96, one, on a host with one GPU) onto the host's devices, the agent's preflight
# checks CUDA, driver and torch, and torchrun trains with NCCL, one process per GPU, with AMP.
#
#   benchmarks/gpu_e2e.sh [STEPS]          # prints the run, then the job's status as JSON
#   benchmarks/gpu_e2e.sh --cpu [STEPS]    # the same path where no GPU is, to check the script
#
# --cpu: S5.MEDIUM4 (its emulated instance runs on the host's CPUs), 32 px, batch 2, fp32; no nvidia-smi and no
# wheels installed (they are for an offline GPU host; the interpreter already has what the tests need).
#
# Offline hosts: put cvmjob's dependencies as wheels in .whl/ (and crcmod's source, for its pure-Python module);
# they are installed into the interpreter that `python3` names (the emulator's "image" is that interpreter).
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=0
if [ "${1:-}" = --cpu ]; then CPU=1; shift; fi
STEPS="${1:-300}"
usage() { echo "usage: $0 [--cpu] [STEPS]${1:+ ($1)}" >&2; exit 2; }
[ $# -le 1 ] || usage
case "$STEPS" in ''|0*|*[!0-9]*) usage "STEPS: a positive integer, not '$STEPS'";; esac
OUT="${OUT:-$(mktemp -d)}"
if [ "$CPU" = 1 ]; then
  TYPE=(--set instance.type=S5.MEDIUM4) TRAIN="--batch-size 2 --image-size 32 --precision fp32 --log-every 1"
else
  TYPE=() TRAIN="--batch-size 128"
fi
if [ "$CPU" = 0 ] && [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ -d .whl/crcmod-1.7/python3/crcmod ] && cp -r .whl/crcmod-1.7/python3/crcmod "$site/"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" CVMJOB_HOME="$OUT/home" PYTHONUNBUFFERED=1
if [ "$CPU" = 0 ]; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  # The emulator lends an instance its GPUs only when the host has as many free; else the instance runs on the
  # CPUs (emulator/runtime/gpus.py), and GT4.8XLARGE192's two would train ResNet-50 there at ~40 s a step.
  if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then TYPE=(--set instance.type=GT4.4XLARGE96); fi
fi
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
# An emulator of our own (not the embedded one) so the job's logs can be read after the run.
python3 -m orchestrator.emulator serve --port 0 --state-dir "$OUT/emulator" --ready-file "$OUT/ready.json" \
  > "$OUT/emulator.log" 2>&1 &
emulator=$!
trap 'kill $emulator 2>/dev/null || true' EXIT
while [ ! -f "$OUT/ready.json" ]; do  # not forever: an emulator that died says why
  kill -0 "$emulator" 2>/dev/null || { cat "$OUT/emulator.log" >&2; exit 1; }
  sleep 0.2
done
export CVMJOB_ENDPOINT TENCENTCLOUD_SECRET_ID TENCENTCLOUD_SECRET_KEY
CVMJOB_ENDPOINT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$OUT/ready.json")
# Its keys: the id from its ready file, the SecretKey from the file only its user can read (never an argument).
TENCENTCLOUD_SECRET_ID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["secret_id"])' "$OUT/ready.json")
TENCENTCLOUD_SECRET_KEY=$(cat "$OUT/emulator/secret_key")
set +e
python3 -m orchestrator.cli.main run jobs/resnet50/job.yaml --set billing.mode=on-demand "${TYPE[@]}" \
  --set "train.command=python train.py --data synthetic --steps $STEPS $TRAIN" \
  --set checkpoints.interval_steps=100 2>&1 | tee "$OUT/run.log"
code=${PIPESTATUS[0]}
python3 -m orchestrator.cli.main status --output json > "$OUT/status.json"
job=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT/status.json")
python3 -m orchestrator.cli.main logs "$job" > "$OUT/train.log"
grep -E "preflight|world=|images/s" "$OUT/train.log" | tail -30
echo "cvmjob run exited $code"
exit "$code"
