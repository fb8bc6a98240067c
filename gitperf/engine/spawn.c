/* git perf's workload launcher (engine/launcher.py): what starting a run takes besides the fork, in a
 * small program of its own, so that the collector (a ~250 MB Python process: bcc, LLVM, angr) starts it
 * with vfork.  Its fork with this set-up in Python took ~20 ms of each run of a paired check.
 *
 *   gitperf-spawn CGROUP UID GID SIG PPID MASK READY -- COMMAND ARGS...
 *
 * CGROUP the run's cgroup v2 directory, or "-".  The command is started in it by clone3's
 *        CLONE_INTO_CGROUP and waited for, its end passed on as ours (an exit status, or the signal
 *        that ended it); writing its pid to cgroup.procs waits for an RCU grace period (7-14 ms a run
 *        here), which that clone does not.  Where the kernel has no clone3 (before 5.7), we join the
 *        cgroup ourselves and become the command.
 * UID, GID  the user the command runs as for good (groups dropped), or "-" to stay
 * SIG    the signal to get when our parent ends (prctl PR_SET_PDEATHSIG; for the command, when we
 *        end), asked for after the user changes (the kernel clears it then)
 * PPID   our parent's process: gone already, we exit at once
 * MASK   the signals to keep blocked, comma-separated (the collector's mask before it held SIGINT and
 *        SIGTERM back for the spawn), or "-"
 * READY  a pipe's write end, closed as COMMAND is executed: the collector starts the run's clock at its
 *        end of file
 * A failure says what failed on stderr and exits 127, as a shell does for a command it cannot run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail(const char *what, const char *arg) {
    fprintf(stderr, "git perf: cannot start the workload: %s %s: %s\n", what, arg, strerror(errno));
    _exit(127);
}

/* Become the command: its user, dying with `parent`, READY closed by the exec. */
static void run(char **argv, pid_t parent) {
    if (strcmp(argv[2], "-") != 0) {
        if (setgroups(0, NULL) != 0 || setgid((gid_t)atol(argv[3])) != 0 || setuid((uid_t)atol(argv[2])) != 0)
            fail("becoming user", argv[2]);
    }
    if (prctl(PR_SET_PDEATHSIG, atoi(argv[4]), 0, 0, 0) != 0)
        fail("asking to die with git perf", argv[4]);
    if (getppid() != parent)
        _exit(127);  /* whoever started us is gone already */
    fcntl(atoi(argv[7]), F_SETFD, FD_CLOEXEC);
    execvp(argv[9], argv + 9);
    fail("running", argv[9]);
}

/* Its end passed on as ours: the same exit status, or the same signal (without a core dump of ours). */
static int pass_on(pid_t child) {
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            fail("waiting for", "the workload");
    if (WIFSIGNALED(status)) {
        struct rlimit none = {0, 0};
        sigset_t all;
        setrlimit(RLIMIT_CORE, &none);
        signal(WTERMSIG(status), SIG_DFL);
        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, NULL);
        raise(WTERMSIG(status));
    }
    return WEXITSTATUS(status);
}

int main(int argc, char **argv) {
    if (argc < 10 || strcmp(argv[8], "--") != 0) {
        fprintf(stderr, "usage: gitperf-spawn CGROUP UID GID SIG PPID MASK READY -- COMMAND ARGS...\n");
        return 127;
    }
    sigset_t mask;
    sigemptyset(&mask);
    if (strcmp(argv[6], "-") != 0)
        for (char *s = strtok(argv[6], ","); s; s = strtok(NULL, ","))
            sigaddset(&mask, atoi(s));
    sigprocmask(SIG_SETMASK, &mask, NULL);
    if (prctl(PR_SET_PDEATHSIG, atoi(argv[4]), 0, 0, 0) != 0 || getppid() != (pid_t)atol(argv[5]))
        _exit(127);
    if (strcmp(argv[1], "-") == 0)
        run(argv, (pid_t)atol(argv[5]));
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        fail("opening the run's cgroup", argv[1]);
    struct clone_args args = {.flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (uint64_t)dir};
    pid_t me = getpid();
    long child = syscall(SYS_clone3, &args, sizeof(args));
    if (child == 0)
        run(argv, me);
    if (child > 0) {
        close(atoi(argv[7]));  /* (the command's exec alone closes READY) */
        return pass_on((pid_t)child);
    }
    /* no clone3 here: join the cgroup and become the command */
    char procs[4096];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", argv[1]);
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || dprintf(fd, "%d", (int)getpid()) < 0)
        fail("joining the run's cgroup", argv[1]);
    close(fd);
    run(argv, (pid_t)atol(argv[5]));
    return 127;
}
