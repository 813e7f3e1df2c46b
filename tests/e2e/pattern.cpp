// SPDX-License-Identifier: GPL-2.0-only
#include <cstdio>
#include <cstring>

#include "gpu_workload.h"

namespace e2e {
namespace {

inline uint64_t word(uint64_t seed, uint64_t index)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + index * 0xD6E8FEB86659FD93ull;
	x ^= x >> 32;
	x *= 0xD6E8FEB86659FD93ull;
	x ^= x >> 29;
	return x;
}

} // namespace

void fill_pattern(void *dst, uint64_t len, uint64_t seed)
{
	auto *p = static_cast<unsigned char *>(dst);
	const uint64_t words = len / 8;
	for (uint64_t i = 0; i < words; i++) {
		const uint64_t w = word(seed, i);
		std::memcpy(p + i * 8, &w, 8);
	}
	const uint64_t w = word(seed, words);
	std::memcpy(p + words * 8, &w, len % 8);
}

int64_t check_pattern(const void *src, uint64_t len, uint64_t seed)
{
	const auto *p = static_cast<const unsigned char *>(src);
	const uint64_t words = len / 8;
	for (uint64_t i = 0; i < words; i++) {
		const uint64_t w = word(seed, i);
		if (std::memcmp(p + i * 8, &w, 8) != 0) {
			for (uint64_t b = 0; b < 8; b++)
				if (p[i * 8 + b] != reinterpret_cast<const unsigned char *>(&w)[b])
					return static_cast<int64_t>(i * 8 + b);
		}
	}
	const uint64_t w = word(seed, words);
	for (uint64_t b = 0; b < len % 8; b++)
		if (p[words * 8 + b] != reinterpret_cast<const unsigned char *>(&w)[b])
			return static_cast<int64_t>(words * 8 + b);
	return -1;
}

bool write_manifest(const std::string &path, const Manifest &m)
{
	const std::string tmp = path + ".tmp";
	FILE *f = std::fopen(tmp.c_str(), "w");
	if (!f)
		return false;
	std::fprintf(f, "pid %d\n", m.pid);
	for (const auto &b : m.bos)
		std::fprintf(f, "bo %u %u %s %#llx %llu %llu %llu\n", b.node, b.render_minor,
			     b.gem ? "gem" : b.vram ? "vram" : "gtt",
			     static_cast<unsigned long long>(b.addr), static_cast<unsigned long long>(b.size),
			     static_cast<unsigned long long>(b.fill), static_cast<unsigned long long>(b.seed));
	const bool ok = std::fflush(f) == 0 && !std::ferror(f);
	std::fclose(f);
	return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
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
