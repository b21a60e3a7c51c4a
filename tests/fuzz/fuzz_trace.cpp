// libFuzzer target: simulator trace files (trace_decode), as read, and re-sealed so the CRCs pass.
#include "fuzz_common.h"
#include "sparselens/sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace sl::sim;
    (void)trace_decode(data, size, "fuzz.sltrace");
    std::vector<uint8_t> b(data, data + size);
    if (!sl::fuzz::reseal_trace(b)) return 0;
    auto t = trace_decode(b.data(), b.size(), "fuzz.sltrace");
    if (!t) return 0;
    // A trace that decodes must encode back to a trace that decodes to the same accesses.
    const std::vector<uint8_t> again = trace_encode(*t);
    auto u = trace_decode(again.data(), again.size(), "again.sltrace");
    if (!u || u->ids != t->ids || u->offsets != t->offsets) __builtin_trap();
    return 0;
}
