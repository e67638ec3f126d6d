// OpenMP's idle threads sleep instead of spinning, in the engine's own executables (`quark`, `quark-worker`) and its
// benchmarks (bench/: so that they measure what those run).
//
// Why: LibTorch's OpenMP team and OpenBLAS's thread pool each have as many threads as the engine's (QUARK_THREADS,
// the core count by default), and a pass alternates between them: an element-wise LibTorch op, a GEMM, another op.
// libgomp's idle threads spin for a while after every parallel region (GOMP_SPINCOUNT 300,000 unless told
// otherwise), on the cores OpenBLAS's threads then need. With OMP_WAIT_POLICY=PASSIVE they sleep at once: on a 2-core
// machine task scoring ran 1.8-2.9x faster, perplexity up to 1.6x, GPTAQ 1.25x, RTN 1.14x, GPTQ 1.08x, AWQ the same
// (bench/runtime/openmp_wait.sh; docs/results/engine.md, "OpenMP's idle threads sleep").
//
// libgomp reads the policy once, when it is loaded, before main: a process that finds neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT in its environment sets OMP_WAIT_POLICY=PASSIVE and re-executes itself (self_exec.h; about 0.6 s on
// the 2-core machine, where loading LibTorch dominates). An operator's own value of either wins: GOMP_SPINCOUNT=300000
// is libgomp's default again, OMP_WAIT_POLICY=ACTIVE spins always.
//
// One re-execution, not two: where the OpenBLAS core guard re-executes the process before main (blas_core.h; recent
// Xeons), it sets the policy for the next image too when the program is one that sleeps OpenMP's threads, so main's
// EnsurePassiveOpenMpWaits then finds it chosen. Which programs those are needs no list: the guard calls
// QuarkChoosePassiveOpenMpWaitsBeforeReexecution through a weak reference, and this file's object, which defines it,
// is linked into an executable only when the executable calls EnsurePassiveOpenMpWaits or OpenMpWaitPolicyChosen
// (a static library of its own, quark_openmp_wait): `quark`, `quark-worker` and the benchmarks, not the tests.
#pragma once

namespace quark {

/// Whether the environment names a wait policy or spin count (an operator's, or this function's before a re-execution).
bool OpenMpWaitPolicyChosen();

/// Returns at once when OpenMpWaitPolicyChosen(); otherwise sets OMP_WAIT_POLICY=PASSIVE
/// and re-executes this process, returning only when that fails (the process then runs with libgomp's default, and
/// its children with PASSIVE). Call first in main (engine/engine_process.h's StartEngineProcess does).
void EnsurePassiveOpenMpWaits();

}  // namespace quark

/// For a re-execution the process makes anyway (the OpenBLAS core guard's): sets OMP_WAIT_POLICY=PASSIVE unless
/// OpenMpWaitPolicyChosen(), and returns whether it did. C linkage and no namespace: blas_core.cc refers to it weakly.
extern "C" bool QuarkChoosePassiveOpenMpWaitsBeforeReexecution();
