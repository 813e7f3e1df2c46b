/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The CRIU 4.x plugin ABI, declared by this project.
 *
 * Debian's criu-plugin.h is CRIU 3.17's: it has hooks 0-9 only and the old
 * RESTORE_EXT_FILE signature. The layout, ids and signatures below are the
 * facts of CRIU 4.x (plugin version 0.2.0 = 512, 15 hook slots). This header
 * is C so that the CRIU-side test host and a C test plugin can use it too.
 */
#ifndef AMDGPU_PLUGIN_CRIU_PLUGIN_ABI_H
#define AMDGPU_PLUGIN_CRIU_PLUGIN_ABI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRIU_PLUGIN_GEN_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define CRIU_PLUGIN_VERSION_MAJOR 0
#define CRIU_PLUGIN_VERSION_MINOR 2
#define CRIU_PLUGIN_VERSION_SUBLEVEL 0
#define CRIU_PLUGIN_VERSION                                                    \
	CRIU_PLUGIN_GEN_VERSION(CRIU_PLUGIN_VERSION_MAJOR,                     \
				CRIU_PLUGIN_VERSION_MINOR,                     \
				CRIU_PLUGIN_VERSION_SUBLEVEL)

enum cr_plugin_stage {
	CR_PLUGIN_STAGE__DUMP = 0,
	CR_PLUGIN_STAGE__PRE_DUMP = 1,
	CR_PLUGIN_STAGE__RESTORE = 2,
	CR_PLUGIN_STAGE_MAX
};

enum cr_plugin_hook {
	CR_PLUGIN_HOOK__DUMP_UNIX_SK = 0,
	CR_PLUGIN_HOOK__RESTORE_UNIX_SK = 1,
	CR_PLUGIN_HOOK__DUMP_EXT_FILE = 2,
	CR_PLUGIN_HOOK__RESTORE_EXT_FILE = 3,
	CR_PLUGIN_HOOK__DUMP_EXT_MOUNT = 4,
	CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT = 5,
	CR_PLUGIN_HOOK__DUMP_EXT_LINK = 6,
	CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA = 7,
	CR_PLUGIN_HOOK__UPDATE_VMA_MAP = 8,
	CR_PLUGIN_HOOK__RESUME_DEVICES_LATE = 9,
	CR_PLUGIN_HOOK__PAUSE_DEVICES = 10,
	CR_PLUGIN_HOOK__CHECKPOINT_DEVICES = 11,
	CR_PLUGIN_HOOK__POST_FORKING = 12,
	CR_PLUGIN_HOOK__RESTORE_INIT = 13,
	CR_PLUGIN_HOOK__DUMP_DEVICES_LATE = 14,
	CR_PLUGIN_HOOK__MAX
};

/* Hook signatures, by id. */
typedef int(cr_plugin_dump_unix_sk_t)(int fd, int id);
typedef int(cr_plugin_restore_unix_sk_t)(int id);
typedef int(cr_plugin_dump_file_t)(int fd, int id);
typedef int(cr_plugin_restore_file_t)(int id, bool *retry_needed);
typedef int(cr_plugin_dump_ext_mount_t)(char *mountpoint, int id);
typedef int(cr_plugin_restore_ext_mount_t)(int id, char *mountpoint,
					   char *old_root, int *is_file);
typedef int(cr_plugin_dump_ext_link_t)(int index, int type, char *kind);
typedef int(cr_plugin_handle_device_vma_t)(int fd, const struct stat *st);
typedef int(cr_plugin_update_vma_map_t)(const char *path, const uint64_t addr,
					const uint64_t old_pgoff,
					uint64_t *new_pgoff, int *plugin_fd);
typedef int(cr_plugin_resume_devices_late_t)(int pid);
typedef int(cr_plugin_pause_devices_t)(int pid);
typedef int(cr_plugin_checkpoint_devices_t)(int pid);
typedef int(cr_plugin_post_forking_t)(void);
typedef int(cr_plugin_restore_init_t)(void);
typedef int(cr_plugin_dump_devices_late_t)(int id);

typedef struct {
	const char *name;
	int (*init)(int stage);
	void (*exit)(int stage, int ret);
	unsigned int version;
	unsigned int max_hooks;
	void *hooks[CR_PLUGIN_HOOK__MAX];
} cr_plugin_desc_t;

/* Log levels of print_on_level (criu-log.h). */
#define CRIU_LOG_MSG (-1)
#define CRIU_LOG_ERROR 1
#define CRIU_LOG_WARN 2
#define CRIU_LOG_INFO 3
#define CRIU_LOG_DEBUG 4

/*
 * The public plugin API the criu binary exports (it is linked -rdynamic).
 * A plugin must resolve these at run time: they are absent when the plugin
 * is loaded by anything other than CRIU.
 */
typedef int(criu_get_image_dir_t)(void);
typedef void(criu_print_on_level_t)(unsigned int loglevel, const char *format,
				     ...);

#ifdef __cplusplus
}
#endif

#endif /* AMDGPU_PLUGIN_CRIU_PLUGIN_ABI_H */
