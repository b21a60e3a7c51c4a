// Copying a session file to a new path ("Save As"): a consistent snapshot taken while other
// connections (the engine's writer, the GUI's reader) keep the source open.
#pragma once

#include <string>

#include "sparselens/core/result.h"

namespace sl::sessions {

struct session_copy_params {
    bool overwrite = false;  // replace an existing file at the destination (a file dialog confirmed it)
    std::string name;        // the copy's session name; empty: keep the source's
};

// Validates `src` as a session, writes a compacted snapshot of it (SQLite VACUUM INTO, so committed
// writes of open connections are included and uncommitted ones are not) beside `dst` under a temporary
// name, switches the copy to WAL, validates it, and then moves it into place: `dst` appears complete or
// not at all. Refuses to copy a session onto itself. Errors name the file that failed.
outcome session_copy(const std::string& src, const std::string& dst, const session_copy_params& p = {});

}  // namespace sl::sessions
