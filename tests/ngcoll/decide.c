/* decide.c: libngcoll's per-call selection, alone: its cost and its
 * system calls. Run under mpirun with libngcoll preloaded, 2 ranks or more.
 *
 * The selection is what every interposed collective does before it runs
 * an algorithm or the library's own: the communicator's state (an MPI
 * attribute), the datatype's size and layout, the operation, one table
 * lookup. ngcoll_decide() runs exactly that path (entry::decide) and
 * returns the decision.
 *
 *   time      ns per decision (this thread's CPU time, best of 7 runs of
 *             10^6) for allreduce / bcast / alltoall at several sizes, and
 *             for reference one PMPI_Comm_rank call.
 *   seccomp   a forked child enters a seccomp filter that allows only
 *             write, exit and exit_group (anything else kills it with
 *             SIGSYS), makes 10^6 decisions and exits 0 if every one
 *             equals its parent's. Exit status 159 = a system call.
 *
 * Usage: decide time|seccomp. Exit 1 on failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <mpi.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int64_t (*decide_fn)(uint32_t coll, int count, MPI_Datatype dt, MPI_Comm comm);

enum { BCAST = 0, ALLREDUCE = 1, ALLTOALL = 5 };

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define N 1000000

static int filter_on(void)
{
#if defined(__x86_64__)
    const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const unsigned arch = AUDIT_ARCH_AARCH64;
#endif
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog f = {.len = sizeof prog / sizeof prog[0], .filter = prog};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    decide_fn decide = (decide_fn)dlsym(RTLD_DEFAULT, "ngcoll_decide");
    const char *what = argc > 1 ? argv[1] : "time";
    int fail = 0;
    if (!decide) {
        if (!rank)
            fprintf(stderr, "decide: libngcoll is not loaded (LD_PRELOAD)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* The first decision sets the communicator up (collective). */
    int64_t first = decide(ALLREDUCE, 256, MPI_FLOAT, MPI_COMM_WORLD);
    if (!strcmp(what, "time")) {
        struct {
            uint32_t coll;
            int count;
            MPI_Datatype dt;
            const char *name;
        } cases[] = {
            {ALLREDUCE, 2, MPI_FLOAT, "allreduce 8 B"},
            {ALLREDUCE, 16384, MPI_FLOAT, "allreduce 64 KiB"},
            {BCAST, 1 << 20, MPI_CHAR, "bcast 1 MiB"},
            {ALLTOALL, 4096, MPI_DOUBLE, "alltoall 32 KiB"},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            double best = 1e30;
            int64_t sink = 0;
            for (int rep = 0; rep < 7; rep++) {
                double t = cpu_ns();
                for (int i = 0; i < N; i++)
                    sink += decide(cases[c].coll, cases[c].count + (i & 1), cases[c].dt, MPI_COMM_WORLD);
                t = (cpu_ns() - t) / N;
                if (t < best)
                    best = t;
            }
            if (!rank)
                printf("decide %-18s %6.1f ns per call (best of 7 x 10^6; decision %lld)\n", cases[c].name, best,
                       (long long)(sink / (7LL * N)));
        }
        double best = 1e30;
        int r = 0;
        for (int rep = 0; rep < 7; rep++) {
            double t = cpu_ns();
            for (int i = 0; i < N; i++)
                PMPI_Comm_rank(MPI_COMM_WORLD, &r);
            t = (cpu_ns() - t) / N;
            if (t < best)
                best = t;
        }
        if (!rank)
            printf("reference: PMPI_Comm_rank %6.1f ns per call\n", best);
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            if (!filter_on())
                _exit(100);
            long bad = 0;
            for (int i = 0; i < N; i++) {
                if (decide(ALLREDUCE, 256, MPI_FLOAT, MPI_COMM_WORLD) != first)
                    bad++;
                decide(BCAST, 1 + (i % 100000), MPI_CHAR, MPI_COMM_WORLD);
                decide(ALLTOALL, 1 + (i % 4096), MPI_INT, MPI_COMM_WORLD);
            }
            _exit(bad ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            printf("decide seccomp (rank %d): child killed by signal %d (status %d): a system call\n", rank,
                   WTERMSIG(status), 128 + WTERMSIG(status));
            fail = 1;
        } else if (WEXITSTATUS(status) != 0) {
            printf("decide seccomp (rank %d): child exited %d\n", rank, WEXITSTATUS(status));
            fail = 1;
        } else if (!rank) {
            printf("decide seccomp: 3 x 10^6 decisions under a filter allowing only write/exit: no system call "
                   "(decision %lld)\n",
                   (long long)first);
        }
        /* Negative control: the filter does kill a stray system call. */
        if (!rank) {
            pid = fork();
            if (pid == 0) {
                if (!filter_on())
                    _exit(100);
                getppid();
                _exit(0);
            }
            waitpid(pid, &status, 0);
            if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)) {
                printf("decide seccomp: the negative control was not killed (status %d)\n", status);
                fail = 1;
            }
        }
    }
    int any;
    PMPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
