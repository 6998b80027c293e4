// ReplaceFile: how a fold worker writes the small files beside each
// partition store (DIR/p<k>.seq, .stale, .standby): whole or not at all.
//
// The text goes to "<path>.tmp", which is renamed over `path`, so a crash
// leaves the old file or the new one, never a torn one. With `sync` the
// file's bytes are synced before the rename and its directory after it, so
// that the new file also survives a power cut. The store layer's own syncs
// go through its leveldb::Env; these files are the worker's, beside the
// stores, and written with POSIX calls directly.
//
// Thread-safety: safe to call from many threads for different paths.

#ifndef EVENTFOLD_CLUSTER_MARKER_FILE_H_
#define EVENTFOLD_CLUSTER_MARKER_FILE_H_

#include <string>
#include <string_view>

#include "eventfold/status.h"

namespace eventfold::cluster {

// Replaces `path` with `text` as above. kIOError naming the file and the
// system's reason when a step fails; the old file is then intact (a
// "<path>.tmp" may be left, and is replaced by the next call).
[[nodiscard]] Status ReplaceFile(const std::string& path, std::string_view text, bool sync);

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_MARKER_FILE_H_
