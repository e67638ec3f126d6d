// The start of the engine's own executables (`quark`, `quark-worker`): OpenMP's idle threads set to sleep
// (base/openmp_wait_policy.h: a re-execution), then InitEngine().
#pragma once

namespace quark {

/// Re-executes this process with OpenMP's idle threads sleeping (EnsurePassiveOpenMpWaits) unless a device named by
/// --device or --devices in `argv` (or by the environment variable `devices_variable`, when given: a comma list) is
/// unusable here: the command then refuses it from this first start, within the second issue #27 asks for, rather
/// than after a second one (each start loads LibTorch: ~0.6 s on two cores). Then InitEngine(). Call first in main.
void StartEngineProcess(int argc, char** argv, const char* devices_variable = nullptr);

}  // namespace quark
