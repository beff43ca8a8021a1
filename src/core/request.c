/*
 * What the command line asked (cb_request.h): the option overrides it
 * gave, and the names of the commands, which the job needs to tell a
 * mistyped command from a guest ID. The parser itself is the front end's
 * (src/cli/cli.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cb_request.h"
#include "cb_text.h"
#include "cb_util.h"

const char *const cb_command_names[] = { "backup", "restore", "ls", "index", "mount", "verify",
					 "list", "prune", "probe", "guests", "key", "help", NULL };

const char *cb_cli_get(const struct cb_cli *cli, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i + 1 < cli->kv.n; i += 2)
		if (!strcmp(cli->kv.v[i], key))
			v = cli->kv.v[i + 1];
	return v;
}

void cb_cli_release(struct cb_cli *cli)
{
	cb_strvec_clear(&cli->args);
	cb_strvec_clear(&cli->kv);
	cb_strvec_clear(&cli->exclude_ids);
	cb_strvec_clear(&cli->paths);
	free(cli->config_path);
	free(cli->cmdline);
	free(cli->map_ids);
	memset(cli, 0, sizeof(*cli));
}

int cb_cli_unknown_command(const char *name)
{
	size_t n = 0;
	const char *near;

	while (cb_command_names[n])
		n++;
	near = cb_closest_word(name, cb_command_names, n);
	if (near)
		return cb_error("unknown command '%s' (did you mean '%s'? see cbackup help)", name, near);
	return cb_error("unknown command '%s' (commands: backup, restore, ls, index, mount, verify, "
			"list, prune, probe, guests, help; see cbackup help)", name);
}
