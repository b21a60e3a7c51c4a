// The sparsity methods: configuration, factory and per-method parameters (all training-free).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sparselens/core/model.h"
#include "sparselens/core/result.h"
#include "sparselens/core/sparsity.h"

namespace sl {

struct calibration;  // calibration.h

// One configuration for any method. `density` is the target fraction of MLP weights read per token
// (gate + up + down, equal sizes); each method maps it onto its own knobs, documented per method in
// docs/methods.md. Fields a method does not use are ignored.
struct method_config {
    std::string name = "dense";  // see method_names()
    float density = 1.0f;        // target MLP density in [0, 1]
    float d_in = -1.0f;          // DIP: gate/up input-column density (< 0: derived from density)
    float d_down = -1.0f;        // DIP: down-column density (< 0: derived from density)
    float gamma = 0.2f;          // DIP-CA: weight of non-cached units (1 = plain DIP)
    float attn_density = 1.0f;   // CHESS w/, TEAL: density of attention projection inputs (1: the paper's
                                 // rule: CHESS the MLP's keep, TEAL one budget over all seven projections)
    int32_t rank = 0;            // SparseLLM predictor rank (0: dim / 8)
    float pin_fraction = 0.0f;   // heavy-hitter pinning: share of neurons always active
    std::string ffsplit_mode = "svd";  // FFSplit compression of the light neurons: "svd" or "q4"
    float ffsplit_heavy = 0.1f;  // FFSplit: share of neurons kept exact

    bool operator==(const method_config&) const = default;
};

method_config method_default_config();

// Every method name the factory accepts, in display order.
const std::vector<std::string>& method_names();
// One-line description for help text and the GUI.
std::string method_description(const std::string& name);
// Whether the method needs a calibration (thresholds, expectations, heavy hitters).
bool method_needs_calibration(const std::string& name);
// Whether building `c` needs one: the method's own need, or heavy-hitter pinning (pin_fraction > 0),
// which takes the pinned neurons from the calibration. make_method refuses exactly these without one.
bool method_config_needs_calibration(const method_config& c);
// Which method_config knobs method `name` reads besides its density: the one table behind
// method_config_for, heavy-hitter pinning's check (build_pinned) and the GUI's enabled controls.
struct method_knob_use {
    bool d_split = false;  // d_in / d_down (dip, dip-ca)
    bool gamma = false;    // dip-ca
    bool pin = false;      // pin_fraction (dip, dip-ca, cats, chess, chess-attn)
    bool attn = false;     // attn_density (chess-attn, teal*)
    bool rank = false;     // sparsellm, ffsplit
    bool ffsplit = false;  // ffsplit_mode / ffsplit_heavy
};
method_knob_use method_knobs_read(const std::string& name);
// `knobs` (e.g. the Tuning panel's, or the CLI's --pin/--attn-density/...) applied to method `name`: the
// knobs the method does not read (method_knobs_read) are reset to their defaults, so a run of it records
// what ran and one set of knobs serves a sweep over methods that read different ones (pinning on TEAL
// would be refused).
method_config method_config_for(const method_config& knobs, const std::string& name);
// The knobs of `c` its method reads that differ from their defaults, for run lists and tooltips:
// "pin 10%, attention 50%" (empty when none). Density is not among them (runs show it on its own).
std::string method_knobs_text(const method_config& c);

// Builds a method for a model. `calib` is required when method_config_needs_calibration(cfg); errors name
// the method and the problem (unknown name, density out of range, missing or mismatched calibration).
// `progress` (optional) reports the build of methods whose construction takes long (FFSplit: one SVD
// set per layer) as the fraction done; returning false cancels (result::cancelled()).
result<std::unique_ptr<sparsity_method>> make_method(const method_config& cfg, const model& m,
                                                     const calibration* calib, const progress_fn& progress = {});

}  // namespace sl
