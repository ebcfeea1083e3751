// The pins one optimizer keeps in its pin directory (each map of the
// program by name, the guard) so that control planes reach them: made at
// load, checked and made again when someone removes them (an unlinked pin,
// a deleted directory), and removed at exit unless the data plane is to
// keep serving without Morpheus. A pin is the optimizer's while it holds
// the object the optimizer pinned: one that now holds another object is
// reported, never replaced.
#pragma once

#include "support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace morpheus::bpf {

class PinDirectory {
public:
  explicit PinDirectory(std::string directory) : directory(std::move(directory)) {}

  const std::string &path() const { return directory; }
  // Where `name` is pinned: bpffs refuses a '.' in a name, so each is a
  // '_' there, as libbpf pins them (a section's map `obj.data` as
  // `obj_data`); the names of the program's own maps have none.
  std::string pathOf(const std::string &name) const;

  // Creates the directory (and its parents).
  Error create() const;
  // The map pinned as `name` (an fd the caller closes), none when nothing
  // is; an error when the pin holds no map or cannot be opened.
  Expected<std::optional<int>> openMap(const std::string &name) const;
  // Pins `fd` as `name`, first removing what was there when `replace` (a
  // stale object from a crashed run); the pin is removed by removeMade.
  Error pin(const std::string &name, int fd, bool replace = false);

  // Of `objects` (name, fd), the names whose pins no longer hold them:
  // removed, replaced, or their bpffs unmounted.
  std::vector<std::string> unpinned(const std::vector<std::pair<std::string, int>> &objects) const;
  // Pins again each of `objects` whose pin disappeared; one line per pin
  // that needed attention (pinned again, cannot be, or now holds another
  // object and is left alone).
  std::vector<std::string> repair(const std::vector<std::pair<std::string, int>> &objects);

  // Removes the pins this made, then the directory if nothing else is in it.
  void removeMade();

private:
  std::string directory;
  std::vector<std::string> made;
};

// The kernel's id of the BPF object (map, program, link) behind `fd`; 0
// when it cannot be read.
uint32_t objectId(int fd);

} // namespace morpheus::bpf
