/*
 * Clock shim for the chaos suite: an LD_PRELOAD library that shifts a
 * process's wall clock (CLOCK_REALTIME through clock_gettime, gettimeofday
 * and time) by an offset read from a file, so that a Redis node's clock can
 * jump while it runs. Monotonic clocks are left alone, as a real NTP step
 * leaves them.
 *
 * Debian 12's libfaketime cannot start redis-server (it detects a recursive
 * clock_gettime call during start-up and gives up), so the suite compiles
 * this instead. The real time always comes from the raw system call, which
 * cannot recurse into this library.
 *
 * QUORUMLOCK_CLOCK_FILE names the file; it holds the offset in nanoseconds
 * as a decimal integer. The file is checked at most every 2 ms (one stat)
 * and re-read when its inode or modification time changed, so the suite
 * rewrites it (write a temporary file, rename) to jump the clock.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns;      /* accessed with __atomic builtins */
static long long last_check_ns;
static long long seen_ino, seen_mtime;

static int raw_gettime(clockid_t id, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static void refresh(long long now)
{
	long long last = __atomic_load_n(&last_check_ns, __ATOMIC_RELAXED);
	if (now - last < 2000000LL && now >= last)
		return;
	__atomic_store_n(&last_check_ns, now, __ATOMIC_RELAXED);
	const char *path = getenv("QUORUMLOCK_CLOCK_FILE");
	if (path == NULL)
		return;
	struct stat st;
	if (stat(path, &st) != 0)
		return;
	long long mt = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	if ((long long)st.st_ino == __atomic_load_n(&seen_ino, __ATOMIC_RELAXED) &&
	    mt == __atomic_load_n(&seen_mtime, __ATOMIC_RELAXED))
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[64];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	__atomic_store_n(&offset_ns, strtoll(buf, NULL, 10), __ATOMIC_RELAXED);
	__atomic_store_n(&seen_ino, (long long)st.st_ino, __ATOMIC_RELAXED);
	__atomic_store_n(&seen_mtime, mt, __ATOMIC_RELAXED);
}

static int shifted(clockid_t id, struct timespec *ts)
{
	int rc = raw_gettime(id, ts);
	if (rc != 0)
		return rc;
	long long now = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
	refresh(now);
	now += __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
	ts->tv_sec = now / 1000000000LL;
	ts->tv_nsec = now % 1000000000LL;
	return 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
		return shifted(id, ts);
	return raw_gettime(id, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	(void)tz;
	struct timespec ts;
	int rc = shifted(CLOCK_REALTIME, &ts);
	if (rc == 0) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return rc;
}

time_t time(time_t *out)
{
	struct timespec ts;
	if (shifted(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (out != NULL)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
