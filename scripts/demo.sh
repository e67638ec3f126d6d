#!/usr/bin/env bash
# The README's main command: installs the Debian packages, builds only what it runs (quark, quarkd, quark-worker,
# quarkctl; not the tests and benchmarks), trains a small Llama for a minute or two on this project's own
# documentation, starts quarkd with its embedded defaults, submits a job that quantizes the model (4-bit weights,
# fp8 KV cache by default), follows the job's progress, and prints where the artifact landed and the perplexity
# on held-out text before and after quantization.
#
# Everything it needs is in the repository and Debian's packages: the text is the repository's Markdown, the
# tokenizer is trained on it here by SentencePiece's spm_train (Debian package `sentencepiece`).
# QUARK_DEMO_DIR (default out/demo), QUARK_DEMO_SCHEME (default uint4_wo_64) and QUARK_DEMO_STEPS (default 250)
# change it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target quark quarkd quark-worker quarkctl

build=$root/build
demo=${QUARK_DEMO_DIR:-$root/out/demo}
scheme=${QUARK_DEMO_SCHEME:-uint4_wo_64}
steps=${QUARK_DEMO_STEPS:-250}
rm -rf "$demo"
mkdir -p "$demo"

echo "== making the model"
# The text: this project's own documentation. Every 8th paragraph is held out for the perplexity; the rest trains
# the tokenizer and the model and calibrates the quantization.
cat README.md server/README.md docs/*.md docs/*/*.md bench/*/README.md bench/*/*/README.md 2>/dev/null > "$demo/text.txt" || true
awk -v train="$demo/train.txt" -v held="$demo/heldout.txt" 'BEGIN { RS = ""; ORS = "\n\n" }
  NR % 8 == 0 { print > held; next } { print > train }' "$demo/text.txt"
spm_train --input="$demo/train.txt" --model_prefix="$demo/tokenizer" --vocab_size=512 --model_type=bpe \
  --byte_fallback=true --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --hard_vocab_limit=false --minloglevel=2
# One intra-op thread: the model is small, and two OpenMP threads on a busy 2-core machine were 8x slower per step.
QUARK_THREADS=${QUARK_THREADS:-1} "$build/core/cli/quark" make-model --arch llama --shape tiny --dtype f32 --seed 1 \
  --hidden 192 --layers 3 --tokenizer "$demo/tokenizer.model" \
  --train "$demo/train.txt" --steps "$steps" --seq-len 128 --batch 16 --lr 6e-3 --out "$demo/model"

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

echo "== submitting: $scheme with an fp8 KV cache (perplexity on the held-out paragraphs)"
quarkctl=("$build/client/quarkctl" --server "$address")
"${quarkctl[@]}" submit --model "file://$demo/model" --scheme "$scheme" --kv-cache-dtype fp8 \
  --calib "file://$demo/train.txt" --num-calib-samples 16 --seq-len 256 \
  --eval "file://$demo/heldout.txt" --output "file://$demo/artifacts" --wait -o json | tee "$demo/job.jsonl"

echo "== result"
tail -n 1 "$demo/job.jsonl" > "$demo/job.json"
grep -o '"state": *"[^"]*"' "$demo/job.json" | head -n 1
grep -o '"manifestUri": *"[^"]*"\|"manifest_uri": *"[^"]*"' "$demo/job.json" | head -n 1
grep -o '"ppl_[a-z]*": *[0-9.e+-]*' "$demo/job.json"
grep -q '"JOB_STATE_SUCCEEDED"' "$demo/job.json"
echo "demo finished in $((SECONDS - start)) s"
