// SPDX-License-Identifier: GPL-2.0-only
//
// kfdemu-shader-disasm --mcpu gfx908|gfx90a [--unimplemented] FILE
//
// Disassembles the .text of an AMDGPU ELF code object with the shader
// core's own decoder, one instruction a line: "<hex address>: <text>", the
// text as llvm-objdump-15 -d --mcpu=... prints it, so that the two can be
// compared line by line. An undecodable word prints as <unknown 0x...>.
// With --unimplemented it prints instead each distinct mnemonic of the
// file the executor would stop on (IllegalInstruction), one a line.
#include <elf.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "shader/exec.h"
#include "shader/isa.h"

using kfdemu::shader::Target;

namespace {

int usage()
{
	std::fprintf(stderr, "usage: kfdemu-shader-disasm --mcpu gfx908|gfx90a [--unimplemented] FILE\n");
	return 2;
}

// The .text section's bytes and address; empty with an error on bad input.
bool text_section(const std::vector<char> &elf, const char *path, uint64_t *addr,
		  std::vector<uint32_t> *words)
{
	Elf64_Ehdr eh;
	if (elf.size() < sizeof(eh) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0) {
		std::fprintf(stderr, "kfdemu-shader-disasm: %s: not an ELF file\n", path);
		return false;
	}
	std::memcpy(&eh, elf.data(), sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_AMDGPU ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) > elf.size() ||
	    eh.e_shstrndx >= eh.e_shnum) {
		std::fprintf(stderr, "kfdemu-shader-disasm: %s: not a 64-bit AMDGPU ELF with section headers\n", path);
		return false;
	}
	auto shdr = [&](unsigned i) {
		Elf64_Shdr sh;
		std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		return sh;
	};
	Elf64_Shdr strtab = shdr(eh.e_shstrndx);
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh = shdr(i);
		if (sh.sh_name >= strtab.sh_size || strtab.sh_offset + sh.sh_name >= elf.size())
			continue;
		const char *name = elf.data() + strtab.sh_offset + sh.sh_name;
		if (std::strncmp(name, ".text", strtab.sh_size - sh.sh_name) != 0 || sh.sh_type != SHT_PROGBITS)
			continue;
		if (sh.sh_offset + sh.sh_size > elf.size()) {
			std::fprintf(stderr, "kfdemu-shader-disasm: %s: .text runs past the end of the file\n", path);
			return false;
		}
		words->resize(sh.sh_size / 4);
		std::memcpy(words->data(), elf.data() + sh.sh_offset, words->size() * 4);
		*addr = sh.sh_addr;
		return true;
	}
	std::fprintf(stderr, "kfdemu-shader-disasm: %s: no .text section\n", path);
	return false;
}

}  // namespace

int main(int argc, char **argv)
{
	bool unimplemented = argc == 5 && !std::strcmp(argv[3], "--unimplemented");
	if ((argc != 4 && !unimplemented) || std::strcmp(argv[1], "--mcpu") != 0)
		return usage();
	const char *path = argv[argc - 1];
	Target t;
	if (!std::strcmp(argv[2], "gfx908"))
		t = Target::Gfx908;
	else if (!std::strcmp(argv[2], "gfx90a"))
		t = Target::Gfx90a;
	else
		return usage();
	std::ifstream f(path, std::ios::binary);
	if (!f) {
		std::fprintf(stderr, "kfdemu-shader-disasm: cannot open %s\n", path);
		return 1;
	}
	std::vector<char> elf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
	uint64_t addr = 0;
	std::vector<uint32_t> words;
	if (!text_section(elf, path, &addr, &words))
		return 1;
	std::set<std::string> missing;
	for (size_t i = 0; i < words.size();) {
		kfdemu::shader::Inst in = kfdemu::shader::decode(t, &words[i], words.size() - i);
		std::string text = kfdemu::shader::disassemble(in);
		if (!unimplemented)
			std::printf("%llx: %s\n", static_cast<unsigned long long>(addr + i * 4), text.c_str());
		else if (!kfdemu::shader::handler_for(in))
			missing.insert(text.substr(0, text.find(' ')));
		i += in.size / 4;
	}
	for (const std::string &m : missing)
		std::printf("%s\n", m.c_str());
	return 0;
}
