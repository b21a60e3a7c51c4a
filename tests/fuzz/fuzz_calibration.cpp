// libFuzzer target: calibration files (calibration_deserialize), as read and with the checksum re-sealed.
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    (void)sl::calibration_deserialize({data, size}, "fuzz.slcal");
    std::vector<uint8_t> b(data, data + size);
    if (!sl::fuzz::reseal_calibration(b)) return 0;
    auto c = sl::calibration_deserialize(b, "fuzz.slcal");
    if (!c) return 0;
    // What loads must save and load again.
    const std::vector<uint8_t> again = sl::calibration_serialize(*c);
    if (!sl::calibration_deserialize(again, "again.slcal")) __builtin_trap();
    return 0;
}
