/* cb_hook: run the hook script for a phase. See include/cb_hook.h. */
#include <stdio.h>
#include <stdlib.h>

#include "cb_hook.h"
#include "cb_run.h"
#include "cb_util.h"

static void set_env(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

struct hook_call {
	const struct cb_hook_env *env;
	struct cb_log *log;
};

/* In the child, before exec: vzdump's environment variables. */
static void hook_env(void *arg)
{
	const struct cb_hook_env *env = ((struct hook_call *)arg)->env;

	set_env("DUMPDIR", env ? env->dumpdir : NULL);
	set_env("STOREID", env ? env->storeid : NULL);
	set_env("VMTYPE", env ? env->vmtype : NULL);
	set_env("TARGET", env ? env->target : NULL);
	set_env("LOGFILE", env ? env->logfile : NULL);
	set_env("HOSTNAME", env ? env->hostname : NULL);
}

static void hook_line(void *arg, const char *line)
{
	cb_info(((struct hook_call *)arg)->log, "%s", line);
}

int cb_hook_run(const char *script, const char *phase, const char *mode, const char *id,
		const struct cb_hook_env *env, struct cb_log *log)
{
	char *argv[] = { (char *)script, (char *)phase, (char *)mode, (char *)id, NULL };
	struct hook_call call = { env, log };
	struct cb_run run = {
		.timeout_ms = env ? env->timeout_ms : 0,
		.on_line = hook_line, .child_setup = hook_env, .arg = &call,
	};
	char what[512];

	if (!script)
		return 0;
	if (!mode)
		argv[2] = NULL;
	snprintf(what, sizeof(what), "hook script '%s' at phase '%s'", script, phase);
	run.what = what;
	return cb_run_argv(&run, argv);
}
