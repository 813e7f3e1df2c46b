// SPDX-License-Identifier: GPL-2.0-only
//
// SDMA linear-copy encoding: counts for AI+ (bytes - 1) and pre-AI (bytes),
// splitting at the per-packet maximum, NOP padding to 8 dwords.
#include <criterion/criterion.h>

#include <vector>

#include "copy/sdma_packets.h"
#include "fakes.h"

using namespace amdcr;
using namespace amdcr::test;

Test(sdma_caps, per_family)
{
	const auto ai = SdmaCaps::for_family(141);
	cr_assert_eq(ai.max_bytes_per_packet, 0x400000u);
	cr_assert(ai.count_is_bytes_minus_one);
	const auto nv = SdmaCaps::for_family(143);
	cr_assert(nv.count_is_bytes_minus_one);
	const auto vi = SdmaCaps::for_family(130);
	cr_assert_eq(vi.max_bytes_per_packet, 0x1fffffu);
	cr_assert(!vi.count_is_bytes_minus_one);
}

Test(sdma_encode, ai_counts_are_bytes_minus_one_and_split_at_4_mib)
{
	const auto caps = SdmaCaps::for_family(141);
	std::vector<uint32_t> ib(64, 0xdeadbeef);
	const CopyRange r{0x1'2345'6000ull, 0xffff'8000'0000'1000ull, 2 * 0x400000ull + 5};
	const size_t dw = sdma_encode_copies(caps, std::span(&r, 1), ib);
	cr_assert_eq(dw, 24u); // 3 packets = 21 dwords, padded to 24
	cr_assert_eq(ib[0], 0x00000001u, "header: op 1, sub-op 0");
	cr_assert_eq(ib[1], 0x3fffffu);
	cr_assert_eq(ib[2], 0u);
	cr_assert_eq(ib[3], 0x23456000u);
	cr_assert_eq(ib[4], 0x1u);
	cr_assert_eq(ib[5], 0x00001000u);
	cr_assert_eq(ib[6], 0xffff8000u);
	std::vector<DecodedCopy> out;
	size_t nops = 0;
	cr_assert(decode_ib(caps, ib.data(), dw, out, &nops));
	cr_assert_eq(nops, 3u);
	cr_assert_eq(out.size(), 3u);
	cr_assert_eq(out[0].bytes, 0x400000u);
	cr_assert_eq(out[1].bytes, 0x400000u);
	cr_assert_eq(out[2].bytes, 5u);
	cr_assert_eq(ib[7 * 2 + 1], 4u, "5 bytes encode as 4");
	cr_assert_eq(out[1].src, r.src + 0x400000);
	cr_assert_eq(out[2].dst, r.dst + 0x800000);
	cr_assert_eq(ib[dw], 0xdeadbeefu, "nothing written past the IB length");
}

Test(sdma_encode, pre_ai_counts_are_bytes_and_split_below_2_mib)
{
	const auto caps = SdmaCaps::for_family(130);
	std::vector<uint32_t> ib(64);
	const CopyRange r{0x1000, 0x200000000ull, 0x1fffffull + 1};
	const size_t dw = sdma_encode_copies(caps, std::span(&r, 1), ib);
	cr_assert_eq(dw, 16u);
	cr_assert_eq(ib[1], 0x1fffffu);
	cr_assert_eq(ib[8], 1u);
	std::vector<DecodedCopy> out;
	cr_assert(decode_ib(caps, ib.data(), dw, out));
	cr_assert_eq(out.size(), 2u);
	cr_assert_eq(out[1].src, 0x1000u + 0x1fffff);
	cr_assert_eq(out[1].bytes, 1u);
}

Test(sdma_encode, several_ranges_one_ib_padded_to_8)
{
	const auto caps = SdmaCaps::for_family(141);
	std::vector<CopyRange> rs;
	for (uint64_t i = 0; i < 9; ++i)
		rs.push_back(CopyRange{0x10000 * i, 0x900000 + 0x1000 * i, 4096 + i});
	std::vector<uint32_t> ib(sdma_ib_dwords(9));
	const size_t dw = sdma_encode_copies(caps, rs, ib);
	cr_assert_eq(dw, 64u); // 63 dwords + 1 NOP
	cr_assert_eq(dw % 8, 0u);
	std::vector<DecodedCopy> out;
	cr_assert(decode_ib(caps, ib.data(), dw, out));
	cr_assert_eq(out.size(), 9u);
	for (size_t i = 0; i < 9; ++i) {
		cr_assert_eq(out[i].src, rs[i].src);
		cr_assert_eq(out[i].dst, rs[i].dst);
		cr_assert_eq(out[i].bytes, rs[i].bytes);
	}
}

Test(sdma_encode, refuses_what_does_not_fit)
{
	const auto caps = SdmaCaps::for_family(141);
	std::vector<uint32_t> ib(15);
	const CopyRange r{0, 0x100000, 3 * 0x400000ull}; // 3 packets = 24 dwords
	cr_assert_eq(sdma_encode_copies(caps, std::span(&r, 1), ib), 0u);
	std::vector<uint32_t> big(24);
	cr_assert_eq(sdma_encode_copies(caps, std::span(&r, 1), big), 24u);
	cr_assert_eq(sdma_encode_copies(caps, {}, big), 0u);
}

Test(sdma_sizes, ib_dwords_and_capacity)
{
	cr_assert_eq(sdma_ib_dwords(0), 0u);
	cr_assert_eq(sdma_ib_dwords(1), 8u);
	cr_assert_eq(sdma_ib_dwords(8), 56u);
	cr_assert_eq(sdma_ib_dwords(9), 64u);
	cr_assert_eq(sdma_max_packets(1024), 146u); // 146 * 7 = 1022 -> 1024
	cr_assert_leq(sdma_ib_dwords(sdma_max_packets(1000)), 1000u);
	cr_assert_eq(sdma_packets_for(SdmaCaps::for_family(141), 0x400001), 2u);
	cr_assert_eq(sdma_packets_for(SdmaCaps::for_family(141), 0), 0u);
}
