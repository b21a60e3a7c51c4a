// The GUI's side of the engine-thread session jobs (sparselens/sessions/jobs.h has the jobs themselves):
// recording a Tuning panel result and giving an imported config's device to the Tuning panel. Plain C++
// (no widgets, no signals): the EngineController calls these on the engine thread.
#pragma once

#include <cstdint>

#include "sparselens/core/result.h"
#include "sparselens/sessions/jobs.h"
#include "sparselens/sim/deploy_config.h"
#include "sparselens/views/engine_requests.h"
#include "sparselens/views/snapshots.h"

namespace sl::views {

// Records a Tuning panel result (sessions::record_evaluation). A partial result (fewer windows while a
// slider moves) is refused: it is not what the settings give. `p.setting` is the device the result's
// sim_* numbers were simulated on (nullopt: not simulated; they are then not recorded).
result<int64_t> record_tuning_result(sessions::session_store& s, const tuning_result& r, const sessions::run_inputs& in,
                                     const sessions::record_params& p);

// The Tuning panel's device fields for a config with a device; the config's own numbers win over the
// shipped profile of the same name (it may have changed since). Only meaningful when c.has_device().
device_settings device_settings_of(const sim::deploy_config& c);

}  // namespace sl::views
