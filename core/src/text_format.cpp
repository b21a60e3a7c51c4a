// UTC timestamps and shortest round-trip floats for the files SparseLens writes.
#include "sparselens/core/text_format.h"

#include <charconv>

namespace sl {

std::string utc_iso8601(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string utc_now_iso8601() {
    return utc_iso8601(std::time(nullptr));
}

double float_shortest(float f) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, f);
    double d = 0;
    std::from_chars(buf, r.ptr, d);
    return d;
}

}  // namespace sl
