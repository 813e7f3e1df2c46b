// SPDX-License-Identifier: GPL-2.0-only
/*
 * The greedy plugin, for the negative control only: it claims PAUSE_DEVICES
 * (dump) and POST_FORKING (restore) by returning 0, which ends CRIU's call
 * chain, so a plugin loaded after it never receives them. Each time it
 * writes a warning to CRIU's log through print_on_level() (resolved at run
 * time, as amdgpu_plugin does), so the control also proves that the level
 * tap sees a plugin's warnings.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "criu_abi_facts.h"

typedef void print_on_level_fn(unsigned int level, const char *fmt, ...);

static void warn_swallowed(const char *hook)
{
	print_on_level_fn *p = (print_on_level_fn *)dlsym(RTLD_DEFAULT, "print_on_level");

	if (p)
		p(2, "realcriu_greedy: swallowed %s\n", hook);
}

static int pause_devices(int pid)
{
	(void)pid;
	warn_swallowed("PAUSE_DEVICES");
	return 0;
}

static int post_forking(void)
{
	warn_swallowed("POST_FORKING");
	return 0;
}

__attribute__((visibility("default"))) struct realcriu_plugin_desc CR_PLUGIN_DESC = {
	.name = "realcriu_greedy",
	.version = REALCRIU_PLUGIN_VERSION,
	.max_hooks = 13, /* every CRIU 4.x accepts 13 */
	.hooks = {
		[10] = (void *)pause_devices,
		[12] = (void *)post_forking,
	},
};
