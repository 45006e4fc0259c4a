#pragma once
// Whether the study tests can run the figure scripts (scripts/plot_*.py) here.

#include <doctest/doctest.h>

#include "experiments/fixtures.hpp"  // sh

namespace hylens::test {

/// Whether Debian's python3 can import matplotlib, the figure scripts' one dependency
/// (scripts/install-deps.sh installs it). Where it cannot, says so in the test's output, so that
/// a run without it does not pass its figure checks silently.
inline bool figure_scripts_can_run() {
    if (sh("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0) return true;
    MESSAGE("matplotlib not installed: the figure script's checks are skipped");
    return false;
}

}  // namespace hylens::test
