/*
 * Zero system calls through the C ABI, from C: open the segment, enter a
 * seccomp filter allowing only read, write, exit and exit_group (anything
 * else kills the process with SIGSYS), then do N string and N index lookups
 * of entries written by tests/c_example.rs (peer "nodeNNN", transport
 * "rdma", every field derived from k = NNN), checking each answer, and the
 * ABI 1.1 lookups: peers "peerNNN" without entries answered from class
 * "@rack" (k = 500), each entry's extension (checked_unix_ns = k + 14, 8
 * latency sizes), the rdma per-transport record (5 outgoing penalties).
 * Exit 0: all answers right; 1: a wrong answer; 2/3: set-up failed.
 *
 *   seccomp_lookup SEGMENT ENTRIES N
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <netgauge.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "unsupported architecture"
#endif

static int check(const ng_params *p, double k, uint64_t s)
{
    double r = (double)(s / 1000);
    return p->eel_ns == k + 1 && p->L_ns == k + 2 && p->g_ns == k + 10 + r &&
           p->G_ns_per_byte == k + 20 + r && p->o_s_ns == k + 30 + r &&
           p->o_r_ns == k + 40 + r && p->range_from_bytes == (s / 1000) * 1000;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 3;
    int entries = atoi(argv[2]);
    long n = atol(argv[3]);
    if (entries <= 0 || entries > 100)
        return 3;
    ng_reader *r = ng_open(argv[1]);
    if (!r)
        return 2;
    ng_set_stale_after_ns(r, 3600ULL * 1000000000ULL);
    char names[100][16];
    char mapped[100][16];
    for (int i = 0; i < entries; i++) {
        snprintf(names[i], sizeof names[i], "node%03d", i);
        snprintf(mapped[i], sizeof mapped[i], "peer%03d", i);
    }

    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_read, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return 2;

    /* From here on: no system call but write and exit. */
    long bad = 0;
    ng_params p;
    ng_entry_ext x;
    ng_transport_ext t;
    ng_params_status st;
    for (long i = 0; i < n; i++) {
        int e = (int)(i % entries);
        uint64_t s = (uint64_t)((i * 7919) % 4000);
        if (ng_lookup(r, names[e], "rdma", s, &p) != 0 || !check(&p, e, s))
            bad++;
        int idx = ng_index(r, names[e], "rdma");
        if (ng_lookup_index(r, idx, s, &p) != 0 || !check(&p, e, s))
            bad++;
        /* one 1-byte message: o_s + L + o_r of range 0 */
        if (ng_predict_index_ns(r, idx, 1) != (double)(3 * e + 72))
            bad++;
        /* ABI 1.1 */
        if (ng_lookup_or_class(r, mapped[e], "rdma", s, &p) != 0 || !check(&p, 500, s) ||
            !(p.flags & NG_FLAG_CLASS))
            bad++;
        if (ng_lookup_status(r, mapped[e], "rdma", s, &p, &st) != 0 || !check(&p, 500, s) ||
            st.range_index != s / 1000 ||
            NG_IDENT_STATUS(st.range, NG_RFIELD_G_PER_BYTE) != NG_STATUS_IDENTIFIED)
            bad++;
        int cidx = ng_index_or_class(r, mapped[e], "rdma");
        if (ng_lookup_index(r, cidx, s, &p) != 0 || !check(&p, 500, s))
            bad++;
        if (ng_get_entry_ext_index(r, idx, &x) != 0 || x.checked_unix_ns != (uint64_t)e + 14 ||
            x.n_latency != 8 || !(x.present & NG_EXT_BANDWIDTH) ||
            x.bandwidth.sustained_G_ns_per_byte.value != e + 70.0 ||
            NG_IDENT_STATUS(x.ident.entry, NG_FIELD_G_SUSTAINED) != NG_STATUS_IDENTIFIED)
            bad++;
        if (ng_get_transport_ext(r, "rdma", &t) != 0 || t.n_k[NG_SCHEME_OUTGOING] != 5 ||
            t.penalty[NG_SCHEME_OUTGOING][1].value != 2.0)
            bad++;
    }
    if (bad != 0) {
        static const char msg[] = "seccomp_lookup: wrong answers\n";
        write(2, msg, sizeof msg - 1);
        _exit(1);
    }
    static const char ok[] = "seccomp_lookup: ok\n";
    write(1, ok, sizeof ok - 1);
    _exit(0);
}
