/* plot.c: charts drawn by gnuplot run as a child process (plot.h). */
#include "plot.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

FILE *plot_data_file(char *path, size_t size)
{
    int n = snprintf(path, size, "%s/simstore-plot-XXXXXX", cli_scratch_dir());
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
    }
    return f;
}

/* s as a gnuplot single-quoted string into out: a quote is doubled. */
static int quote(const char *s, char *out, size_t size)
{
    size_t o = 0;
    if (size < 3)
        return -1;
    out[o++] = '\'';
    for (; *s; s++) {
        if (o + 3 >= size)
            return -1;
        if (*s == '\'')
            out[o++] = '\'';
        out[o++] = *s;
    }
    out[o++] = '\'';
    out[o] = '\0';
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int plot_png(const char *script, const char *data_path, const char *png_path, unsigned width,
             unsigned height, char *msg, size_t msg_size)
{
    char tmp[4096], qtmp[8300], qdata[8300], head[17000];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp%ld", png_path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp || quote(tmp, qtmp, sizeof qtmp) ||
        quote(data_path, qdata, sizeof qdata)) {
        snprintf(msg, msg_size, "%s: path too long", png_path);
        return -1;
    }
    n = snprintf(head, sizeof head,
                 "set terminal pngcairo size %u,%u noenhanced font 'sans,10'\n"
                 "set output %s\ndata = %s\n",
                 width, height, qtmp, qdata);
    if (n < 0 || (size_t)n >= sizeof head) {
        snprintf(msg, msg_size, "%s: path too long", png_path);
        return -1;
    }
    /* gnuplot reads the script on stdin; its messages go to our stderr. */
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(msg, msg_size, "cannot start gnuplot: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    char prog[] = "gnuplot", *argv[] = {prog, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    if (rc != 0) {
        close(in[1]);
        if (rc == ENOENT)
            snprintf(msg, msg_size, "gnuplot is not installed (Debian package gnuplot-nox)");
        else
            snprintf(msg, msg_size, "cannot start gnuplot: %s", strerror(rc));
        return -1;
    }
    /* A gnuplot that exits early must not kill us with SIGPIPE. */
    struct sigaction ign, old;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old);
    int wrote = write_all(in[1], head, strlen(head)) == 0 &&
                write_all(in[1], script, strlen(script)) == 0 &&
                write_all(in[1], "\nset output\n", 12) == 0;
    close(in[1]);
    sigaction(SIGPIPE, &old, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    struct stat st;
    if (!wrote || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(tmp, &st) != 0 ||
        st.st_size == 0) {
        unlink(tmp);
        snprintf(msg, msg_size, "gnuplot failed to draw %s%s", png_path,
                 WIFEXITED(status) && WEXITSTATUS(status) == 127
                     ? " (gnuplot is not installed: Debian package gnuplot-nox)"
                     : " (its message is above)");
        return -1;
    }
    /* Published as a store's files are: fsync, rename, fsync the folder. */
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    int synced = fd >= 0 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!synced || rename(tmp, png_path) != 0) {
        int e = errno;
        unlink(tmp);
        snprintf(msg, msg_size, "%s: %s", png_path, strerror(e));
        return -1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", png_path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    return 0;
}

int plot_quote(const char *s, char *out, size_t size)
{
    return quote(s, out, size);
}
