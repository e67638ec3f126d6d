# Sourced by the *_accuracy.sh scripts: the build, the shared fixtures and the tinyllama-a train/held-out split they
# all measure on. Arguments: [BUILD_DIR] [SHARED_DIR]; SAMPLES (default ACCURACY_SAMPLES, else 128) and SEQ (256).
BUILD=${1:-build}
SHARED=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../shared" && pwd)}
MODEL=$SHARED/fixtures/tinyllama-a
CALIB=$SHARED/fixtures/eval/tinystories_train_split.txt
EVAL=$SHARED/fixtures/eval/tinystories_heldout_split.txt
SAMPLES=${SAMPLES:-${ACCURACY_SAMPLES:-128}}
SEQ=${SEQ:-256}
