#!/usr/bin/env bash
# The README's main command: installs and builds everything, starts quarkd with its embedded defaults, makes a
# model (a tokenizer trained on this project's own text, seeded random weights in a real Llama architecture),
# submits a job that quantizes it (fp8 weights and activations, fp8 KV cache), follows the job's progress, and
# prints where the artifact landed and the perplexity before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/install-deps.sh
bash scripts/build.sh

build=$root/build
demo=${QUARK_DEMO_DIR:-$root/out/demo}
scheme=${QUARK_DEMO_SCHEME:-fp8}
rm -rf "$demo"
mkdir -p "$demo"

echo "== making the model"
# Calibration and evaluation text, and the tokenizer's training text: this project's own documentation.
cat README.md server/README.md docs/*.md 2>/dev/null > "$demo/text.txt" || true
spm_train --input="$demo/text.txt" --model_prefix="$demo/tokenizer" --vocab_size=512 --model_type=bpe \
  --byte_fallback=true --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --hard_vocab_limit=false --minloglevel=2
"$build/core/cli/quark" make-model --arch llama --shape tiny --dtype f32 --seed 1 \
  --tokenizer "$demo/tokenizer.model" --out "$demo/model"

echo "== starting quarkd"
"$build/server/quarkd" --data-dir "$demo/quarkd" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --worker-binary "$build/worker/quark-worker" --allowed-roots "$demo" --ready-file "$demo/ready.json" \
  >"$demo/quarkd.log" 2>&1 &
quarkd_pid=$!
trap 'kill "$quarkd_pid" 2>/dev/null; wait "$quarkd_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  [ -s "$demo/ready.json" ] && break
  kill -0 "$quarkd_pid" 2>/dev/null || { cat "$demo/quarkd.log"; exit 1; }
  sleep 0.1
done
address=$(grep -o '"grpc": *"[^"]*"' "$demo/ready.json" | sed 's/.*"\([^"]*\)"$/\1/')
echo "quarkd is serving on $address (log: $demo/quarkd.log)"

echo "== submitting: $scheme with an fp8 KV cache"
quarkctl=("$build/client/quarkctl" --server "$address")
"${quarkctl[@]}" submit --model "file://$demo/model" --scheme "$scheme" --kv-cache-dtype fp8 \
  --calib "file://$demo/text.txt" --num-calib-samples 16 --seq-len 256 \
  --eval "file://$demo/text.txt" --output "file://$demo/artifacts" --wait -o json | tee "$demo/job.jsonl"

echo "== result"
tail -n 1 "$demo/job.jsonl" > "$demo/job.json"
grep -o '"state": *"[^"]*"' "$demo/job.json" | head -n 1
grep -o '"manifestUri": *"[^"]*"\|"manifest_uri": *"[^"]*"' "$demo/job.json" | head -n 1
grep -o '"ppl_[a-z]*": *[0-9.e+-]*' "$demo/job.json"
grep -q '"JOB_STATE_SUCCEEDED"' "$demo/job.json"
