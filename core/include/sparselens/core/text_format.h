// Text forms shared by the files SparseLens writes (calibrations, deployment configs, sessions), so they
// agree on timestamps and on how a float is written.
#pragma once

#include <ctime>
#include <string>

namespace sl {

// UTC ISO 8601, "2025-01-31T12:34:56Z".
std::string utc_iso8601(std::time_t t);
std::string utc_now_iso8601();

// A float as the double of its shortest decimal form (0.6f is written 0.6, not 0.60000002384...); narrowing
// that double back gives the same float.
double float_shortest(float f);

}  // namespace sl
