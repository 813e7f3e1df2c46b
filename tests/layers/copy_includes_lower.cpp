// SPDX-License-Identifier: GPL-2.0-only
// Must compile: the copy layer may include itself and every layer below it
// (the control of tests/layers/check.sh).
#include "base/result.h"
#include "copy/transfer.h"
#include "device/kfd.h"
#include "image/pages_file.h"
