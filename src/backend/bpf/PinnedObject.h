// Opening what Morpheus pinned, by path: a bpffs pin may hold a map, a
// program or a link, and bpf_obj_get opens any of them; reading a link's
// info as a map's would take the id of the program it runs for a key size.
// So a pin is opened as what it must be, and one that holds something else
// is an error that says what it holds.
#pragma once

#include "support/Error.h"

#include <string>

namespace morpheus::bpf {

enum class ObjectKind { Map, Program, Link, Other };

// What the BPF object behind `fd` is (the kernel's name of its file).
ObjectKind objectKind(int fd);

// The map pinned at `path` (an fd the caller closes), or an error naming
// the path: cannot be opened, or holds no map ("a pinned link, not a map:
// it attaches program 'router' (id 42)").
Expected<int> openPinnedMap(const std::string &path);

} // namespace morpheus::bpf
