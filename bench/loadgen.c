/* Closed-loop Kafka-frame load generator and a trivial fixed-answer server.
 *
 * Compiled at run time by bench/loadgen.py. C because one Python process costs about as
 * much per request as the Python server it drives; this one is ~10x cheaper, so on a
 * 2-core box the server, not the generator, is the bottleneck.
 *
 *   loadgen run HOST PORT FRAMES CONNS SECONDS WARMUP ERR_OFFSET [SERVER_PID]
 *     FRAMES: file of size-prefixed request frames; connection i sends frame i % nframes,
 *     one in flight, next sent as soon as the answer arrives. The correlation id (bytes
 *     8..11 of the frame) is bumped per request and checked in the answer. ERR_OFFSET: where
 *     an int16 error code sits in the response payload (-1: none). SERVER_PID: also report
 *     the CPU seconds that process used inside the measured window (its kernel CPU clock,
 *     all threads, ns resolution), so CPU per request has the same window as the count.
 *     Prints one JSON line.
 *   loadgen serve PORT RESPONSE LIFETIME
 *     answers every frame with RESPONSE (a payload whose first 4 bytes are overwritten with
 *     the request's correlation id); exits by itself after LIFETIME seconds.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 65536
#define FINE_US 100000   /* 1 us buckets below 100 ms */
#define COARSE_MS 60000  /* then 1 ms buckets up to 60 s */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds used so far by process `pid` (every thread, exited ones included); -1 if unknown */
static double proc_cpu_s(pid_t pid) {
    clockid_t clk;
    struct timespec ts;
    if (pid <= 0 || clock_getcpuclockid(pid, &clk) != 0 || clock_gettime(clk, &ts) != 0) return -1;
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void wr32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? n : 1);
    if (n > 0 && fread(buf, 1, n, f) != (size_t)n) die("fread");
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* ---- latency histogram: exact enough for p50/p99 without storing every sample ---- */
static uint64_t fine[FINE_US], coarse[COARSE_MS + 1];

static void record(double secs) {
    long us = (long)(secs * 1e6);
    if (us < FINE_US) fine[us]++;
    else coarse[us / 1000 < COARSE_MS ? us / 1000 : COARSE_MS]++;
}

static long quantile_us(uint64_t total, double q) {
    uint64_t want = (uint64_t)(q * total), seen = 0;
    if (want >= total) want = total ? total - 1 : 0;
    for (long i = 0; i < FINE_US; i++) if ((seen += fine[i]) > want) return i;
    for (long i = 0; i <= COARSE_MS; i++) if ((seen += coarse[i]) > want) return i * 1000;
    return -1;
}

/* ---- client ---- */
typedef struct {
    int fd;
    const unsigned char *frame; /* template; we send our own copy with a fresh correlation id */
    unsigned char *out;
    size_t out_len, out_off;
    unsigned char in[RBUF];
    size_t in_len;
    uint32_t corr;
    double sent_at;
} conn_t;

static int send_some(conn_t *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        c->out_off += (size_t)n;
    }
    return 1;
}

static int start_request(conn_t *c) {
    c->corr++;
    wr32(c->out + 8, c->corr);
    c->out_off = 0;
    c->sent_at = now_s();
    return send_some(c);
}

static int run_client(int argc, char **argv) {
    if (argc != 9 && argc != 10) {
        fprintf(stderr, "usage: loadgen run HOST PORT FRAMES CONNS SECONDS WARMUP ERR_OFFSET [SERVER_PID]\n");
        return 2;
    }
    pid_t server_pid = argc == 10 ? (pid_t)atoi(argv[9]) : 0;
    double scpu0 = -1, scpu1 = -1, gcpu0 = 0;
    const char *host = argv[2];
    int port = atoi(argv[3]);
    size_t flen;
    unsigned char *frames = read_file(argv[4], &flen);
    int nconn = atoi(argv[5]);
    double seconds = atof(argv[6]), warmup = atof(argv[7]);
    int err_off = atoi(argv[8]);

    /* index the frames file */
    size_t nframes = 0, cap = 1024;
    unsigned char **index = malloc(cap * sizeof *index);
    for (size_t off = 0; off + 4 <= flen;) {
        if (nframes == cap) index = realloc(index, (cap *= 2) * sizeof *index);
        index[nframes++] = frames + off;
        off += 4 + rd32(frames + off);
    }
    if (nframes == 0) { fprintf(stderr, "no frames\n"); return 2; }

    raise_nofile();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int ep = epoll_create1(0);
    conn_t *conns = calloc(nconn, sizeof *conns);
    double t_connect = now_s();
    for (int i = 0; i < nconn; i++) {
        conn_t *c = &conns[i];
        /* blocking connect: the kernel completes it from the listen backlog, one at a time,
           so 10k connections never overflow the server's accept queue */
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect");
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        c->frame = index[i % nframes];
        c->out_len = 4 + rd32(c->frame);
        c->out = malloc(c->out_len);
        memcpy(c->out, c->frame, c->out_len);
        c->corr = (uint32_t)i << 12; /* distinct per connection, easy to spot in a dump */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    t_connect = now_s() - t_connect;

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s(), t_measure = t0 + warmup, t_end = t_measure + seconds;
    for (int i = 0; i < nconn; i++) if (start_request(&conns[i]) < 0) die("write");

    uint64_t done = 0, errors = 0, bad_corr = 0, closed = 0;
    uint64_t err_codes[128] = {0};
    struct epoll_event evs[512];
    double t = t0;
    while ((t = now_s()) < t_end) {
        int n = epoll_wait(ep, evs, 512, 50);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        t = now_s();
        int measuring = t >= t_measure;
        if (measuring && scpu0 < 0 && server_pid > 0) {  /* the window opens: both clocks start */
            scpu0 = proc_cpu_s(server_pid);
            gcpu0 = proc_cpu_s(getpid());
            if (scpu0 < 0) server_pid = 0;
        }
        for (int k = 0; k < n; k++) {
            conn_t *c = evs[k].data.ptr;
            if (evs[k].events & EPOLLOUT) {
                int r = send_some(c);
                if (r > 0) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (!(evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            ssize_t r = read(c->fd, c->in + c->in_len, RBUF - c->in_len);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                closed++;
                continue;
            }
            c->in_len += (size_t)r;
            size_t off = 0;
            int answered = 0;
            while (c->in_len - off >= 4) {
                uint32_t sz = rd32(c->in + off);
                if (sz + 4 > RBUF) { fprintf(stderr, "response too large: %u\n", sz); return 2; }
                if (c->in_len - off < 4 + sz) break;
                const unsigned char *p = c->in + off + 4;
                if (sz < 4 || rd32(p) != c->corr) bad_corr++;
                if (measuring) {
                    record(t - c->sent_at);
                    done++;
                    if (err_off >= 0 && (size_t)err_off + 2 <= sz) {
                        int16_t code = (int16_t)((p[err_off] << 8) | p[err_off + 1]);
                        if (code) { errors++; err_codes[code & 127]++; }
                    }
                }
                off += 4 + sz;
                answered = 1;
            }
            memmove(c->in, c->in + off, c->in_len - off);
            c->in_len -= off;
            if (answered) {
                int w = start_request(c);
                if (w < 0) { epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL); closed++; }
                else if (w == 0) {
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
        }
    }
    double measured = t - t_measure;
    double gcpu = 0;
    if (server_pid > 0 && scpu0 >= 0) {
        scpu1 = proc_cpu_s(server_pid);
        gcpu = proc_cpu_s(getpid()) - gcpu0;
    }
    getrusage(RUSAGE_SELF, &ru1);
    /* the generator's own CPU share: well under 1.0 means it was waiting on the server */
    double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) * 1e-6
               + (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e-6;
    printf("{\"conns\": %d, \"connect_s\": %.4f, \"seconds\": %.4f, \"requests\": %lu, \"rps\": %.1f, "
           "\"p50_us\": %ld, \"p99_us\": %ld, \"p999_us\": %ld, \"errors\": %lu, \"bad_corr\": %lu, "
           "\"closed\": %lu, \"cpu\": %.3f, \"server_cpu_s\": %.6f, \"gen_cpu_s\": %.6f, \"error_codes\": {",
           nconn, t_connect, measured, (unsigned long)done, measured > 0 ? done / measured : 0.0,
           quantile_us(done, 0.5), quantile_us(done, 0.99), quantile_us(done, 0.999),
           (unsigned long)errors, (unsigned long)bad_corr, (unsigned long)closed, cpu / (t - t0),
           scpu1 >= 0 ? scpu1 - scpu0 : -1.0, scpu1 >= 0 ? gcpu : -1.0);
    int first = 1;
    for (int i = 0; i < 128; i++)
        if (err_codes[i]) { printf("%s\"%d\": %lu", first ? "" : ", ", i, (unsigned long)err_codes[i]); first = 0; }
    printf("}}\n");
    /* reset instead of FIN: 10k connections per run would otherwise sit in TIME_WAIT and
       repeated runs would run out of ephemeral ports */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    for (int i = 0; i < nconn; i++) {
        setsockopt(conns[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(conns[i].fd);
    }
    return 0;
}

/* ---- trivial server: the load generator's own capacity is measured against this ---- */
typedef struct {
    int fd;
    unsigned char in[RBUF];
    size_t in_len;
} sconn_t;

static int run_server(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: loadgen serve PORT RESPONSE LIFETIME\n"); return 2; }
    int port = atoi(argv[2]);
    size_t rlen;
    unsigned char *resp = read_file(argv[3], &rlen);
    double deadline = now_s() + atof(argv[4]);
    raise_nofile();

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
    if (listen(ls, 4096) < 0) die("listen");
    fcntl(ls, F_SETFL, O_NONBLOCK);
    printf("listening\n");
    fflush(stdout);

    int ep = epoll_create1(0);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev);
    struct epoll_event evs[512];
    unsigned char *out = malloc(RBUF * 4);
    while (now_s() < deadline) {
        int n = epoll_wait(ep, evs, 512, 100);
        for (int k = 0; k < n; k++) {
            sconn_t *c = evs[k].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    sconn_t *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            ssize_t r = read(c->fd, c->in + c->in_len, RBUF - c->in_len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                close(c->fd);
                free(c);
                continue;
            }
            c->in_len += (size_t)r;
            size_t off = 0, olen = 0;
            while (c->in_len - off >= 12) {
                uint32_t sz = rd32(c->in + off);
                if (c->in_len - off < 4 + sz) break;
                wr32(out + olen, (uint32_t)rlen);
                memcpy(out + olen + 4, resp, rlen);
                memcpy(out + olen + 4, c->in + off + 8, 4); /* correlation id */
                olen += 4 + rlen;
                off += 4 + sz;
            }
            memmove(c->in, c->in + off, c->in_len - off);
            c->in_len -= off;
            /* one request in flight per client, so the answer always fits the socket buffer */
            if (olen && write(c->fd, out, olen) < 0 && errno != EAGAIN) { close(c->fd); free(c); }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "run")) return run_client(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "serve")) return run_server(argc, argv);
    fprintf(stderr, "usage: loadgen run|serve ...\n");
    return 2;
}
