// The state behind session_store, shared by its translation units (open/create, records).
#pragma once

#include <string>

#include "sparselens/sessions/session_store.h"
#include "sqlite_util.h"

namespace sl::sessions {

struct session_store::impl {
    detail::connection db;
    bool read_only = false;

    // An error for writes on a read-only store; empty otherwise.
    outcome check_writable() const {
        if (read_only) return error{db.path() + ": session opened read-only"};
        return {};
    }
};

namespace detail {
// Counts and meta of an open session (tables missing in older schema versions count 0).
result<session_info> read_info(const connection& c);
}  // namespace detail

}  // namespace sl::sessions
