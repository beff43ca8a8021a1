/* cb_hook: run the hook script for a phase. See include/cb_hook.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb_hook.h"
#include "cb_util.h"

static void set_env(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

/* In the child: environment, output into the pipe, exec. Never returns. */
static void exec_hook(int out_fd, const char *script, char *const argv[], const struct cb_hook_env *env)
{
	set_env("DUMPDIR", env ? env->dumpdir : NULL);
	set_env("STOREID", env ? env->storeid : NULL);
	set_env("VMTYPE", env ? env->vmtype : NULL);
	set_env("TARGET", env ? env->target : NULL);
	set_env("LOGFILE", env ? env->logfile : NULL);
	set_env("HOSTNAME", env ? env->hostname : NULL);
	dup2(out_fd, STDOUT_FILENO);
	dup2(out_fd, STDERR_FILENO);
	close(out_fd);
	int null = open("/dev/null", O_RDONLY);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	execv(script, argv);
	fprintf(stderr, "cannot execute hook script '%s': %s\n", script, strerror(errno));
	_exit(127);
}

static void log_output(int fd, struct cb_log *log)
{
	FILE *in = fdopen(fd, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!in) {
		close(fd);
		return;
	}
	while ((n = getline(&line, &cap, in)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		cb_info(log, "%s", line);
	}
	free(line);
	fclose(in);
}

int cb_hook_run(const char *script, const char *phase, const char *mode, const char *id,
		const struct cb_hook_env *env, struct cb_log *log)
{
	char *argv[] = { (char *)script, (char *)phase, (char *)mode, (char *)id, NULL };
	int pipefd[2], status;
	pid_t pid;

	if (!script)
		return 0;
	if (!mode)
		argv[2] = NULL;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return cb_error_errno("hook script '%s': cannot create pipe", script);
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return cb_error_errno("hook script '%s': cannot fork", script);
	}
	if (pid == 0)
		exec_hook(pipefd[1], script, argv, env);
	close(pipefd[1]);
	log_output(pipefd[0], log);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return cb_error_errno("hook script '%s': waitpid", script);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return cb_error("hook script '%s' failed at phase '%s': exit code %d", script, phase,
				WEXITSTATUS(status));
	return cb_error("hook script '%s' killed by signal %d at phase '%s'", script, WTERMSIG(status), phase);
}
