// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore_task_mappings.h"

#include <cstring>

#include "image/criu_images.h"

namespace amdcr {

std::optional<MappedGpuFile> MappedGpuFile::of_path(const char *path)
{
	if (!path)
		return std::nullopt;
	const size_t n = std::strlen(path);
	const bool kfd = n >= 4 && std::strcmp(path + n - 4, "/kfd") == 0;
	const uint32_t minor = render_minor_of_path(path);
	if (!kfd && minor == 0)
		return std::nullopt;
	return MappedGpuFile{kfd, minor};
}

const VmaMove *TaskMappings::find(const MappedGpuFile &file, uint64_t old_offset) const
{
	for (const VmaMove &m : moves_)
		if (m.old_offset == old_offset && m.kfd == file.kfd && (file.kfd || m.old_minor == file.minor))
			return &m;
	return nullptr;
}

} // namespace amdcr
