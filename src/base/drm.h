// SPDX-License-Identifier: GPL-2.0-only
//
// Facts of the DRM subsystem that several layers check against.
#pragma once

#include <cstdint>

namespace amdcr {

// DRM render node minors (renderD128 .. renderD255).
inline constexpr uint32_t kFirstRenderMinor = 128;
inline constexpr uint32_t kLastRenderMinor = 255;

} // namespace amdcr
