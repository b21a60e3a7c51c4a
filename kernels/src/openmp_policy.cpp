#include "sparselens/kernels/openmp_policy.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

namespace sl::kernels {

namespace {

// Jiffies of all CPUs from /proc/stat's first line: busy (user, nice, system, irq, softirq) and total
// (steal, time the hypervisor gave to other guests, is neither); false when it cannot be read.
bool cpu_jiffies(unsigned long long& busy, unsigned long long& total) {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return false;
    unsigned long long v[8] = {};
    const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                                &v[5], &v[6], &v[7]);
    std::fclose(f);
    if (got != 8) return false;
    busy = v[0] + v[1] + v[2] + v[5] + v[6];
    total = busy + v[3] + v[4];
    return true;
}

// CPU ticks this process has used (all its threads: utime + stime of /proc/self/stat); 0 when unreadable.
unsigned long long own_jiffies() {
    std::FILE* f = std::fopen("/proc/self/stat", "r");
    if (!f) return 0;
    char buf[1024];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
    unsigned long long utime = 0, stime = 0;
    if (!p || std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return 0;
    return utime + stime;
}

// With OMP_PROC_BIND or OMP_PLACES (or GOMP_CPU_AFFINITY) set, libgomp pins the initial thread to the first
// place while it loads, before main() runs, and execv keeps that one-CPU mask: the re-executed process
// then counted one CPU and ran everything on one thread (`OMP_PROC_BIND=true sparselens bench` reported
// threads 1 on a 2-CPU machine, half the prefill speed). The places libgomp built cover the CPUs the
// process was started with (or those the user's OMP_PLACES names): their union becomes the mask again
// before the exec. No places (no binding asked for): the mask was never touched.
void restore_affinity_of_places() {
    const int n_places = omp_get_num_places();
    if (n_places <= 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    int any = 0;
    std::vector<int> ids;
    for (int p = 0; p < n_places; ++p) {
        const int n = omp_get_place_num_procs(p);
        if (n <= 0) continue;
        ids.resize(static_cast<size_t>(n));
        omp_get_place_proc_ids(p, ids.data());
        for (const int id : ids) {
            if (id < 0 || id >= CPU_SETSIZE) continue;
            CPU_SET(id, &set);
            ++any;
        }
    }
    if (any > 0) sched_setaffinity(0, sizeof set, &set);  // on failure the exec'd process keeps one CPU
}

}  // namespace

bool cpus_idle_at_start() {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2) return false;
    // Busy CPU time over 50 ms (5 ticks of the usual 100 Hz clock per CPU) while this process sleeps:
    // idle when the rest of the machine kept less than half a CPU busy. Instantaneous run-queue counts
    // (/proc/loadavg) flicker with every short-lived process; the load averages still carry the
    // previous benchmark's run.
    // Ticks of this process's own threads are not counted: a library's thread pool (OpenBLAS) may be
    // spinning right after it started.
    unsigned long long b0, t0, b1, t1;
    const unsigned long long own0 = own_jiffies();
    if (!cpu_jiffies(b0, t0)) return false;
    usleep(50000);
    if (!cpu_jiffies(b1, t1) || t1 <= t0) return false;
    const unsigned long long own = own_jiffies() - own0, busy = b1 - b0;
    const double cpus_busy =
        static_cast<double>(busy - std::min(busy, own)) / static_cast<double>(t1 - t0) * static_cast<double>(cpus);
    return cpus_busy < 0.5;
}

void prefer_passive_openmp(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    if (std::getenv("GOMP_SPINCOUNT") == nullptr && cpus_idle_at_start())
        setenv("GOMP_SPINCOUNT", k_idle_spin_count, 1);
    restore_affinity_of_places();
    execv("/proc/self/exe", argv);  // only returns on failure: then carry on with the default policy
}

}  // namespace sl::kernels
