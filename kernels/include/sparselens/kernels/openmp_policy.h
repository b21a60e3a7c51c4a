// How the executables make OpenMP's worker threads wait: sleeping after a short spin, never a long
// spin (see docs/development.md).
#pragma once

namespace sl::kernels {

// libgomp's default barrier spins ~3 ms; when the cores are shared (ctest -j, a GUI thread, a
// compiler) a spinning worker starves the thread it waits for, and small-model runs became 12x
// slower (measured). A sleeping worker instead costs a futex wake-up per parallel region, 10-90 us on
// a KVM guest whose idle vCPU halts: ~8% of a 1B model's decode (~65 regions per token). So the
// executables wait passively, after spinning k_idle_spin_count iterations (~10 us) when the CPUs were
// idle at start (cpus_idle_at_start), and at once otherwise (docs/results.md, stop 20: quiet +8% decode, one
// busy core -9%). libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT before main() runs, so the only way
// to choose them from inside the program is to re-exec once with them set. Call first thing in main();
// an explicit user setting of either is always respected, and a failed exec carries on unchanged.
void prefer_passive_openmp(char** argv);

// The spin count set when the CPUs are idle at start (GOMP_SPINCOUNT syntax).
inline constexpr const char* k_idle_spin_count = "1000";

// True when the machine has at least 2 CPUs and kept less than half of one busy over 50 ms (/proc/stat).
bool cpus_idle_at_start();

}  // namespace sl::kernels
