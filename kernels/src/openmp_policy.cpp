#include "sparselens/kernels/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace sl::kernels {

void prefer_passive_openmp(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // only returns on failure: then carry on with the default policy
}

}  // namespace sl::kernels
