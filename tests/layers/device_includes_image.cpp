// SPDX-License-Identifier: GPL-2.0-only
// Must NOT compile: compiled as part of the device layer, it includes its
// sibling, the image layer (tests/layers/check.sh).
#include "image/kfd_image.h"
