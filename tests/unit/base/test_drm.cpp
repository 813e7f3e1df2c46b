// SPDX-License-Identifier: GPL-2.0-only
// The DRM uapi facts of src/base/drm.h that are computed.
#include <criterion/criterion.h>

#include "base/drm.h"

using namespace amdcr;

Test(drm_uapi, gem_va_flags_from_pte_keeps_access_and_prt)
{
	cr_assert_eq(gem_va_flags_from_pte(0), 0u);
	cr_assert_eq(gem_va_flags_from_pte(uapi::kPteReadable | uapi::kPteWriteable),
		     uapi::kVmPageReadable | uapi::kVmPageWriteable);
	cr_assert_eq(gem_va_flags_from_pte(uapi::kPteExecutable | uapi::kPteReadable | (1ull << 57)),
		     uapi::kVmPageExecutable | uapi::kVmPageReadable, "memory type bits dropped");
	cr_assert_eq(gem_va_flags_from_pte(uapi::kPtePrt), uapi::kVmPagePrt);
}

Test(drm_uapi, ioctl_numbers_are_the_kernels)
{
	// _IOWR('d', nr, size) as the kernel's uapi headers define them.
	cr_assert_eq(uapi::kIoctlGemChangeHandle, 0xC00864D2ul);
	cr_assert_eq(uapi::kIoctlAmdgpuGemOp, 0xC0186450ul);
	cr_assert_eq(uapi::kIoctlAmdgpuGemListHandles, 0xC0106459ul);
}
