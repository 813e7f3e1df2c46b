// SPDX-License-Identifier: GPL-2.0-only
// Must NOT compile: compiled as part of the inspect layer (amdgpu-img), it
// includes its sibling, the plugin layer (tests/layers/check.sh).
#include "plugin/dump.h"
