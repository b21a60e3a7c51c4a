// Tuning panel results as session runs; an imported config's device as Tuning panel fields.
#include "session_jobs.h"

#include "sparselens/sim/cache.h"

namespace sl::views {

result<int64_t> record_tuning_result(sessions::session_store& s, const tuning_result& r, const sessions::run_inputs& in,
                                     const sessions::record_params& p) {
    if (r.partial)
        return error{s.path() + ": not recording a partial result (evaluated on fewer windows while a slider moved)"};
    sessions::evaluation e;
    e.config = r.config;
    e.eval = r.eval;
    e.seconds = r.seconds;
    if (p.setting && p.setting->device.name.empty()) {
        e.hit_rate = r.sim_hit_rate;  // DIP-CA's stand-in cache: a hit rate but no device throughput
    } else if (p.setting) {
        e.sim_tokens_per_s = r.sim_tokens_per_s;
        e.hit_rate = r.sim_hit_rate;
    }
    return sessions::record_evaluation(s, e, in, p);
}

device_settings device_settings_of(const sim::deploy_config& c) {
    device_settings d;
    d.device = c.device.name;
    d.dram_bytes = c.device.dram_bytes;
    d.dram_bandwidth = c.device.dram_bandwidth;
    d.flash_bandwidth = c.device.flash_bandwidth;
    d.flash_page_bytes = c.device.flash_page_bytes;
    d.bits = c.bits;
    d.policy = sim::cache_policy_name(c.policy);
    return d;
}

}  // namespace sl::views
