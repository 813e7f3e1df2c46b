/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CRIU's exported plugin registry `cr_plugin_ctl`, as one CRIU ABI has it:
 * one list head, then one list head per hook slot (HOOK_SLOTS: 12 in CRIU
 * 4.0/4.1, 13 in 4.2-4.2.1, 15 in criu-dev). Only its ELF symbol size
 * matters: a plugin may read it to learn how many hooks its loader knows.
 * criu-host loads one of these with RTLD_GLOBAL before any plugin (--hooks).
 */
#ifndef HOOK_SLOTS
#error "HOOK_SLOTS must be defined"
#endif

struct host_list_head {
	struct host_list_head *next, *prev;
};

struct host_plugin_ctl {
	struct host_list_head head;
	struct host_list_head hook_chain[HOOK_SLOTS];
};

__attribute__((visibility("default"))) struct host_plugin_ctl cr_plugin_ctl;
