#pragma once
// The larger of two errors for the tests' worst-case loops, a NaN counting as the largest and
// staying: std::max(worst, NaN) returns worst (NaN compares false), so a kernel that wrote NaN
// would have passed a `worst <= tolerance` check.

#include <cmath>

namespace hylens::test {

inline double nan_max(double worst, double x) noexcept { return std::isnan(worst) || std::isnan(x) ? NAN : x > worst ? x : worst; }

}  // namespace hylens::test
