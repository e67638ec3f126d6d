// quark-test-worker: quark-worker without the engine (only --test-mode runs), so the job-service tests need no
// LibTorch build. Same flags as quark-worker.
#include "worker/worker_main.h"

int main(int argc, char** argv) { return quark::worker::WorkerMain(argc, argv, {}); }
