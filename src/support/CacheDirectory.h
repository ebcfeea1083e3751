// Where Morpheus keeps what it measured or built for this machine across
// runs (the cost model's calibration, clang's bitcode): $MORPHEUS_CACHE_DIR,
// else $XDG_CACHE_HOME/morpheus, else ~/.cache/morpheus. Everything kept
// there is named by what decides it, so a stale file is never read as a
// current one: deleting the directory only costs time.
//
// Where Morpheus keeps what people read after it ran (refused candidates'
// reproducers): /var/lib/morpheus for root, else $XDG_STATE_HOME/morpheus,
// else ~/.local/state/morpheus.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace morpheus {

inline std::string cacheDirectory() {
  auto environment = [](const char *name) -> std::string {
    const char *value = std::getenv(name);
    return value ? value : "";
  };
  if (std::string dir = environment("MORPHEUS_CACHE_DIR"); !dir.empty())
    return dir;
  if (std::string dir = environment("XDG_CACHE_HOME"); !dir.empty())
    return dir + "/morpheus";
  std::string home = environment("HOME");
  return (home.empty() ? std::string("/root") : home) + "/.cache/morpheus";
}

inline std::string stateDirectory() {
  if (::geteuid() == 0)
    return "/var/lib/morpheus";
  if (const char *state = std::getenv("XDG_STATE_HOME"); state && *state)
    return std::string(state) + "/morpheus";
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/") + "/.local/state/morpheus";
}

} // namespace morpheus
