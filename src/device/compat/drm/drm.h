// SPDX-License-Identifier: GPL-2.0-only
//
// <linux/kfd_ioctl.h> includes <drm/drm.h>, which the kernel's uAPI headers
// package does not ship here; libdrm installs the same uAPI header as
// <drm.h> (its include directory is on the path through PkgConfig::LIBDRM).
// Only kfd.cpp sees this directory.
#pragma once
#include <drm.h>
