// The JSON summary (docs/json-schema.md): the document `kprof report --format json` writes, and
// the reading of it back into a RunDigest for `kprof diff` and `kprof check`. One module for
// both directions, so that what is written is what is read (the round trip is tested:
// tests/unit/output/summary_json_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/compare.h"
#include "kprof/hints.h"
#include "kprof/trace.h"

namespace kprof {

/// The schema's name and version (docs/json-schema.md). Bump the version on an incompatible
/// change.
inline constexpr std::string_view kSummarySchema = "kprof.summary";
inline constexpr int kJsonSchemaVersion = 1;

/// The JSON summary of an analysis (the same document WriteReport writes for Format::Json).
std::string ReportJson(const Run& run, const Analysis& analysis, const std::vector<Hint>& hints);

/// True when `text` is a kprof JSON summary ({"schema":"kprof.summary", ...}).
bool LooksLikeSummaryJson(std::string_view text);
/// The digest of a JSON summary (schema v1). Throws InputError("SOURCE: what is wrong").
RunDigest DigestFromSummaryJson(std::string_view text, const std::string& source);
/// The digest of `text` when it is a JSON summary; nothing when it is no JSON object naming a
/// schema (a Chrome trace, say: read it as one). Throws InputError for a summary that is
/// malformed or of another version.
std::optional<RunDigest> ReadSummaryJson(std::string_view text, const std::string& source);

}  // namespace kprof
