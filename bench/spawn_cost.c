/*
 * spawn_cost.c — what starting a hook costs the daemon: fork()+execve() against
 * posix_spawn() from a parent with a large resident set (Fleet scale, item 5).
 *
 *   make bench-spawn                     64 MiB, 500 spawns of /bin/true each way
 *   bench/out.spawn_cost [-m MIB] [-n COUNT] [-w MIB] [PROGRAM]
 *
 * The parent first allocates and writes MIB of anonymous memory in 4 KiB pages
 * (transparent huge pages off for it, like a heap of small allocations), then
 * starts PROGRAM COUNT times each way and waits for it.  fork() copies the page
 * tables and marks every private page copy-on-write in the parent too, so with
 * -w the parent rewrites that many MiB after each spawn (as a daemon dirties its
 * heap between hooks) and pays the write faults that fork left behind.
 *
 * Printed per spawn: the parent's CPU time (getrusage(RUSAGE_SELF) user + sys:
 * the children's own CPU is theirs), the wall time of the spawn call alone, and
 * the wall time of spawn + waitpid.  Numbers from one loaded machine: compare the
 * two rows of one run, not runs on different machines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ULL +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static pid_t spawn_fork(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	return pid;
}

static pid_t spawn_posix(char *const argv[])
{
	pid_t pid;
	int r = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
	if (r != 0) {
		errno = r;
		return -1;
	}
	return pid;
}

static int run(const char *label, pid_t (*spawn)(char *const[]), char *const argv[], int count,
	       unsigned char *mem, size_t rewrite)
{
	uint64_t cpu0 = cpu_us(), t0 = now_ns(), in_spawn = 0;
	long flt0 = minflt();

	for (int i = 0; i < count; i++) {
		uint64_t s = now_ns();
		int status;
		pid_t pid = spawn(argv);
		in_spawn += now_ns() - s;
		if (pid < 0) {
			fprintf(stderr, "spawn_cost: %s '%s': %s\n", label, argv[0], strerror(errno));
			return -1;
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		for (size_t off = 0; off < rewrite; off += 4096)
			mem[off]++;
	}
	uint64_t cpu = cpu_us() - cpu0, wall = now_ns() - t0;
	printf("%-12s %10.1f %12.1f %14.1f %12.1f\n", label, (double)cpu / count,
	       (double)in_spawn / 1000.0 / count, (double)wall / 1000.0 / count,
	       (double)(minflt() - flt0) / count);
	return 0;
}

int main(int argc, char **argv)
{
	long mib = 64, count = 500, rewrite_mib = 0;
	int c;

	while ((c = getopt(argc, argv, "m:n:w:")) != -1) {
		switch (c) {
		case 'm': mib = atol(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'w': rewrite_mib = atol(optarg); break;
		default:
			fprintf(stderr, "usage: spawn_cost [-m MIB] [-n COUNT] [-w MIB] [PROGRAM]\n");
			return 2;
		}
	}
	char *prog = optind < argc ? argv[optind] : "/bin/true";
	char *child_argv[] = { prog, NULL };
	size_t size = (size_t)mib << 20;

	if (mib < 0 || count <= 0 || rewrite_mib < 0 || rewrite_mib > mib) {
		fprintf(stderr, "spawn_cost: need -m >= 0, -n > 0 and 0 <= -w <= -m\n");
		return 2;
	}
	unsigned char *mem = NULL;
	if (size > 0) {
		mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED) {
			perror("spawn_cost: mmap");
			return 1;
		}
		(void)madvise(mem, size, MADV_NOHUGEPAGE);
		memset(mem, 1, size);
	}

	printf("# %ld MiB resident (4 KiB pages), %ld MiB rewritten after each spawn, %ld spawns of %s\n",
	       mib, rewrite_mib, count, prog);
	printf("%-12s %10s %12s %14s %12s\n", "# method", "cpu_us", "spawn_us", "spawn+wait_us",
	       "minflt");
	/* Alternate, twice each, so neither method always runs on a warmer cache. */
	for (int round = 0; round < 2; round++) {
		if (run("fork+execve", spawn_fork, child_argv, (int)count, mem,
			(size_t)rewrite_mib << 20) < 0 ||
		    run("posix_spawn", spawn_posix, child_argv, (int)count, mem,
			(size_t)rewrite_mib << 20) < 0)
			return 1;
	}
	return 0;
}
