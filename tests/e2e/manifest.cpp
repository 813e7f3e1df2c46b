// SPDX-License-Identifier: GPL-2.0-only
#include <cstdio>
#include <cstring>

#include "gpu_workload.h"
#include "testcommon/marker.h"

namespace e2e {

bool write_manifest(const std::string &path, const Manifest &m)
{
	std::string text = "pid " + std::to_string(m.pid) + "\n";
	for (const auto &b : m.bos) {
		char line[200];
		std::snprintf(line, sizeof line, "bo %u %u %s %#llx %llu %llu %llu\n", b.node, b.render_minor,
			      b.gem ? "gem" : b.vram ? "vram" : "gtt", static_cast<unsigned long long>(b.addr),
			      static_cast<unsigned long long>(b.size), static_cast<unsigned long long>(b.fill),
			      static_cast<unsigned long long>(b.seed));
		text += line;
	}
	return testcommon::publish_file(path, text);
}

bool read_manifest(const std::string &path, Manifest *m)
{
	FILE *f = std::fopen(path.c_str(), "r");
	if (!f)
		return false;
	*m = {};
	char kind[8] = {};
	bool ok = std::fscanf(f, "pid %d\n", &m->pid) == 1;
	while (ok) {
		ManifestBo b;
		unsigned long long addr, size, fill, seed;
		const int n = std::fscanf(f, "bo %u %u %7s %llx %llu %llu %llu\n", &b.node, &b.render_minor, kind,
					  &addr, &size, &fill, &seed);
		if (n == EOF)
			break;
		if (n != 7) {
			ok = false;
			break;
		}
		b.gem = std::strcmp(kind, "gem") == 0;
		b.vram = b.gem || std::strcmp(kind, "vram") == 0;
		b.addr = addr;
		b.size = size;
		b.fill = fill;
		b.seed = seed;
		m->bos.push_back(b);
	}
	std::fclose(f);
	return ok;
}

} // namespace e2e
