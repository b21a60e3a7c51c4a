// libFuzzer target: deployment configs (sparselens.deploy-config JSON), the device profiles they and
// sessions embed, and device profile files (--device FILE.json, with units such as "4GB"). A config that parses must export canonically: parse(export(c)) exports to the same text.
#include "fuzz_common.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/sim/device.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace sl::sim;
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (auto d = deploy_device_from_json(text, "fuzz-device.json")) {
        const std::string once = deploy_device_to_json(*d);
        auto again = deploy_device_from_json(once, "again.json");
        if (!again || deploy_device_to_json(*again) != once) __builtin_trap();
    }
    (void)device_load(sl::fuzz::scratch_file(data, size, ".json"));
    auto c = deploy_config_from_json(text, "fuzz.json");
    if (!c) return 0;
    const std::string once = deploy_config_to_json(*c);
    auto again = deploy_config_from_json(once, "again.json");
    if (!again || deploy_config_to_json(*again) != once) __builtin_trap();
    return 0;
}
