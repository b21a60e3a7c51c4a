// How the executables make OpenMP's worker threads wait: sleeping, not spinning (see docs/development.md).
#pragma once

namespace sl::kernels {

// libgomp's default barrier spins; when the cores are shared (ctest -j, a GUI thread, a compiler) a
// spinning worker starves the thread it waits for, and small-model runs became 12x slower (measured).
// Sleeping waiters cost ~1% of decode on a quiet machine. libgomp reads OMP_WAIT_POLICY before main()
// runs, so the only way to choose it from inside the program is to re-exec once with it set. Call first
// thing in main(); an explicit user setting is always respected, and a failed exec carries on unchanged.
void prefer_passive_openmp(char** argv);

}  // namespace sl::kernels
