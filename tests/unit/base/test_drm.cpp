// SPDX-License-Identifier: GPL-2.0-only
// The DRM uapi facts of src/base/drm.h that are computed.
#include <criterion/criterion.h>

#include "base/drm.h"

using namespace amdcr;

Test(drm_uapi, gem_va_flags_to_restore_are_the_mappings_less_delay_update)
{
	const uint32_t rwx = uapi::kVmPageReadable | uapi::kVmPageWriteable | uapi::kVmPageExecutable;
	cr_assert_eq(gem_va_flags_to_restore(0), 0u);
	cr_assert_eq(gem_va_flags_to_restore(rwx), rwx);
	const uint32_t uc_readable = uapi::kVmPageReadable | (4u << 5); // AMDGPU_VM_MTYPE_UC
	cr_assert_eq(gem_va_flags_to_restore(uc_readable), uc_readable, "the memory type is kept");
	cr_assert_eq(gem_va_flags_to_restore(rwx | uapi::kVmDelayUpdate), rwx, "mapped at once");
	cr_assert_eq(gem_va_flags_to_restore(1u << 20), 1u << 20, "an unknown flag reaches the kernel");
}

Test(drm_uapi, gem_va_address_to_restore_sign_extends_above_the_hole)
{
	cr_assert_eq(gem_va_address_to_restore(0x100000000ull), 0x100000000ull);
	cr_assert_eq(gem_va_address_to_restore(0x7ffffffff000ull), 0x7ffffffff000ull, "below the hole");
	cr_assert_eq(gem_va_address_to_restore(0x800100000000ull), 0xffff800100000000ull, "reported masked");
	cr_assert_eq(gem_va_address_to_restore(0xffff800100000000ull), 0xffff800100000000ull, "already canonical");
}

Test(drm_uapi, ioctl_numbers_are_the_kernels)
{
	// _IOWR('d', nr, size) as the kernel's uapi headers define them.
	cr_assert_eq(uapi::kIoctlAmdgpuGemOp, 0xC0186450ul);
	cr_assert_eq(uapi::kIoctlAmdgpuGemListHandles, 0xC0106459ul);
}
