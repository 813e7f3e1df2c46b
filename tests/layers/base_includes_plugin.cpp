// SPDX-License-Identifier: GPL-2.0-only
// Must NOT compile: compiled as part of the base layer, it includes the
// plugin layer above it (tests/layers/check.sh).
#include "plugin/dump.h"
