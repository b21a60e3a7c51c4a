// The session schema of every version SparseLens has written, and the step-by-step migrations between them.
#pragma once

#include <cstdint>
#include <string>

#include "sqlite_util.h"

namespace sl::sessions::detail {

// Full DDL of schema `version` (1..schema_version_current), as that version created it.
const char* schema_ddl(int32_t version);

// Creates tables, meta rows and application_id of `version` on an empty database, in one transaction.
outcome schema_create(connection& c, int32_t version, const std::string& name);

// Migrates from the stored version to schema_version_current, one transaction per step (a failed step
// leaves the file at the previous version). Re-reads the version inside each step's transaction, so a
// concurrent opener that migrated first is harmless.
outcome schema_migrate(connection& c);

// meta.schema_version; an error when the table or row is missing or not a positive number.
result<int32_t> schema_version_of(const connection& c);

}  // namespace sl::sessions::detail
