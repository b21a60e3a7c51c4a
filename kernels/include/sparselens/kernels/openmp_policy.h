// How the executables make OpenMP's worker threads wait: sleeping after a short spin, never a long
// spin (see docs/development.md).
#pragma once

namespace sl::kernels {

// libgomp's default barrier spins ~3 ms; when the cores are shared (ctest -j, a GUI thread, a
// compiler) a spinning worker starves the thread it waits for, and small-model runs became 12x
// slower (measured). A sleeping worker instead costs a futex wake-up per parallel region, 10-90 us on
// a KVM guest whose idle vCPU halts: ~8% of a 1B model's decode (~65 regions per token). So the
// executables wait passively, after spinning k_idle_spin_count iterations when the CPUs were idle at
// start (cpus_idle_at_start), and at once otherwise (docs/results.md, stop 20: quiet +8% decode, one
// busy core -9%). Stop 22 measured what a count costs (a worker's CPU time per region with the master
// away 2 ms, Zen 4 KVM guest): 1000 spins ~33 us, 3000 ~105 us, 10000 ~455 us; the sparse methods leave
// the worker idle longer between regions than dense decode (masks, GLU, attention on the master), and
// 10000 decoded them 3-8% faster than 1000 on llama-1b Q4_0, dense unchanged. libgomp reads
// OMP_WAIT_POLICY / GOMP_SPINCOUNT before main() runs, so the only way
// to choose them from inside the program is to re-exec once with them set. Call first thing in main();
// an explicit user setting of either is always respected, and a failed exec carries on unchanged.
void prefer_passive_openmp(char** argv);

// The spin count set when the CPUs are idle at start (GOMP_SPINCOUNT syntax).
inline constexpr const char* k_idle_spin_count = "10000";

// True when the machine has at least 2 CPUs and kept less than half of one busy over 50 ms (/proc/stat).
bool cpus_idle_at_start();

}  // namespace sl::kernels
