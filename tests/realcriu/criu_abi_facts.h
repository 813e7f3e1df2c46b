/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CRIU 4.x plugin ABI facts for the realcriu test plugins (witness, greedy).
 *
 * Deliberately independent of the plugin's own include/amdgpu_plugin header:
 * a witness that shared the plugin's declarations would share its mistakes.
 * Facts (CRIU's criu/include/criu-plugin.h, both versions): the descriptor
 * layout, the plugin version 0.2.0 (512), hook ids 0-12 in CRIU 4.0-4.2.1,
 * 13-14 added by criu-dev (15 slots).
 */
#ifndef REALCRIU_CRIU_ABI_FACTS_H
#define REALCRIU_CRIU_ABI_FACTS_H

#define REALCRIU_PLUGIN_VERSION 512u
#define REALCRIU_HOOK_SLOTS 15

struct realcriu_plugin_desc {
	const char *name;
	int (*init)(int stage);
	void (*exit)(int stage, int ret);
	unsigned int version;
	unsigned int max_hooks;
	void *hooks[REALCRIU_HOOK_SLOTS];
};

#endif
