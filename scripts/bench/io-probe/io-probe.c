/*
 * scripts/bench/io-probe/io-probe.c: the I/O layer alone, without Node or a data plane (issue 19, "the
 * per-core path"). Built by scripts/bench/io-probe/build.sh, run by scripts/bench/io-probe/run.sh;
 * docs/io-paths.md ("What was tried for the per-core path") records what it measured.
 *
 * `forward` receives every frame on one interface and sends it back out of the same interface with the two
 * MAC addresses swapped: the MUX's one-frame-in, one-frame-out, with nothing in between. Each frame is
 * copied once into a batch slot (what native/slbx_ring.c does to hand frames to JavaScript) and once from
 * the slot into the send path (what its send() does), so the methods differ only in how frames enter and
 * leave the kernel:
 *   --mode mmsg    a TPACKET_V2 receive ring, sends queued and sent with one sendmmsg(2) per batch, with
 *                  PACKET_QDISC_BYPASS and PACKET_IGNORE_OUTGOING: what native/slbx_ring.c does today
 *   --mode txring  the same receive ring; sends written into a PACKET_TX_RING (PACKET_MMAP TX) of the same
 *                  socket, one send(fd, NULL, 0) per batch to have the kernel take them
 *   --mode xdp     AF_XDP in copy mode (libxdp's xsk API and its default XDP program, queue 0): the RX
 *                  ring's frames are copied out of the UMEM, the replies copied into UMEM frames on the TX
 *                  ring, one sendto() kick per batch; --xdp-attach skb (generic XDP, default) or drv (veth's
 *                  native XDP)
 * --spin-us N: after the receive ring runs dry, keep looking at it for N µs before sleeping in poll()
 * (busy polling bounded in time; 0: sleep at once). On SIGINT/SIGTERM it prints one line of counters.
 *
 * `echo` (the client for the correctness test and the latency measurement): on a packet socket of an
 * interface, sends frames one at a time and waits for each one's echo (a received frame whose bytes after
 * the MAC addresses are the same; up to --timeout-ms).
 *   --frames FILE --out FILE   the frames, one hex line each; writes each echo as a hex line (or "-" when
 *                              none came back)
 *   --count N --interval-us U  a 64-byte UDP frame with a sequence number, N times, one every U µs; prints
 *                              the round-trip times' p50, p90, p99 and max in µs (CLOCK_MONOTONIC)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef IO_PROBE_XDP
#include <linux/if_link.h>
#include <xdp/xsk.h>
#endif

#define SLOT_BYTES 2048
#define MAX_BATCH 4096

static volatile sig_atomic_t stop_now = 0;
static void on_signal(int s) {
  (void)s;
  stop_now = 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "io-probe: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void swap_macs(uint8_t *f) {
  uint8_t t[6];
  memcpy(t, f, 6);
  memcpy(f, f + 6, 6);
  memcpy(f + 6, t, 6);
}

/* counters printed at exit */
static double c_rx, c_tx, c_tx_err, c_batches, c_spin_hits, c_ring_full, c_wakeups;

typedef struct {
  const char *iface;
  const char *mode;
  unsigned batch;
  unsigned spin_us;
  unsigned ring_bytes;
  const char *xdp_attach;
} opts_t;

/* ---- packet socket with a TPACKET_V2 RX ring (and a TX ring for --mode txring) -------------------- */

typedef struct {
  int fd;
  uint8_t *map;
  size_t map_len;
  uint8_t *rx, *tx;
  unsigned fs, bs, fpb, nr;
  unsigned rx_idx, tx_idx;
} pring_t;

static uint8_t *ring_frame(pring_t *r, uint8_t *base, unsigned i) {
  return base + (size_t)(i / r->fpb) * r->bs + (size_t)(i % r->fpb) * r->fs;
}

static void open_pring(pring_t *r, const char *iface, unsigned ring_bytes, int want_tx) {
  memset(r, 0, sizeof *r);
  unsigned ifindex = if_nametoindex(iface);
  if (ifindex == 0) die(iface);
  r->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (r->fd < 0) die("socket(AF_PACKET)");
  int v2 = TPACKET_V2, one = 1;
  if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) < 0) die("PACKET_VERSION");
  if (setsockopt(r->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) die("PACKET_IGNORE_OUTGOING");
  (void)setsockopt(r->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  int sndbuf = 4 << 20;
  (void)setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  /* the same geometry as native/slbx_ring.c: tpacket2 header + sockaddr_ll + frame, blocks of 32 frames */
  long page = sysconf(_SC_PAGESIZE);
  unsigned fs = TPACKET_ALIGN(TPACKET2_HDRLEN + 16 + SLOT_BYTES + 16);
  unsigned bs = (unsigned)page;
  while (bs < fs * 32u && bs < (1u << 22)) bs <<= 1;
  unsigned bn = ring_bytes / bs;
  if (bn < 1) bn = 1;
  struct tpacket_req req = {.tp_block_size = bs, .tp_block_nr = bn, .tp_frame_size = fs, .tp_frame_nr = bn * (bs / fs)};
  if (setsockopt(r->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0) die("PACKET_RX_RING");
  if (want_tx && setsockopt(r->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) die("PACKET_TX_RING");
  r->fs = fs;
  r->bs = bs;
  r->fpb = bs / fs;
  r->nr = req.tp_frame_nr;
  size_t one_ring = (size_t)bs * bn;
  r->map_len = one_ring * (want_tx ? 2 : 1);
  r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->map == MAP_FAILED) die("mmap");
  r->rx = r->map;
  r->tx = want_tx ? r->map + one_ring : NULL;
  struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)ifindex};
  if (bind(r->fd, (struct sockaddr *)&sll, sizeof sll) < 0) die("bind");
}

static int pring_ready(pring_t *r) {
  struct tpacket2_hdr *h = (struct tpacket2_hdr *)ring_frame(r, r->rx, r->rx_idx);
  return (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
}

/* copies up to `max` ready frames into slots; returns how many */
static unsigned pring_collect(pring_t *r, uint8_t *slots, uint32_t *lens, unsigned max) {
  unsigned n = 0;
  while (n < max) {
    struct tpacket2_hdr *h = (struct tpacket2_hdr *)ring_frame(r, r->rx, r->rx_idx);
    if ((__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) == 0) break;
    uint32_t len = h->tp_snaplen > SLOT_BYTES ? SLOT_BYTES : h->tp_snaplen;
    memcpy(slots + (size_t)n * SLOT_BYTES, (uint8_t *)h + h->tp_mac, len);
    lens[n] = len;
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    r->rx_idx = (r->rx_idx + 1) % r->nr;
    n++;
  }
  return n;
}

/* --mode mmsg: the send half of native/slbx_ring.c (queue_frame + flush_port) */
static void send_mmsg(int fd, uint8_t *txbuf, struct mmsghdr *msgs, struct iovec *iov, const uint8_t *slots, const uint32_t *lens,
                      unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    memcpy(txbuf + (size_t)i * SLOT_BYTES, slots + (size_t)i * SLOT_BYTES, lens[i]);
    iov[i].iov_len = lens[i];
  }
  unsigned i = 0;
  while (i < n) {
    int k = sendmmsg(fd, msgs + i, n - i, MSG_DONTWAIT);
    if (k > 0) {
      c_tx += k;
      i += (unsigned)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else {
      c_tx_err++;
      i++;
    }
  }
}

/* --mode txring: write into the PACKET_TX_RING, one send() per batch */
static void send_txring(pring_t *r, const uint8_t *slots, const uint32_t *lens, unsigned n) {
  unsigned queued = 0;
  for (unsigned i = 0; i < n; i++) {
    struct tpacket2_hdr *h = (struct tpacket2_hdr *)ring_frame(r, r->tx, r->tx_idx);
    uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
    if (st == TP_STATUS_WRONG_FORMAT) st = TP_STATUS_AVAILABLE;
    if (st != TP_STATUS_AVAILABLE) {
      /* the kernel still holds this frame (not yet sent or not yet freed): send what is queued, look again */
      if (queued > 0 && send(r->fd, NULL, 0, MSG_DONTWAIT) >= 0) queued = 0;
      st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
      if (st != TP_STATUS_AVAILABLE && st != TP_STATUS_WRONG_FORMAT) {
        c_ring_full++;
        c_tx_err++;
        continue;
      }
    }
    uint8_t *data = (uint8_t *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);
    memcpy(data, slots + (size_t)i * SLOT_BYTES, lens[i]);
    h->tp_len = lens[i];
    __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
    r->tx_idx = (r->tx_idx + 1) % r->nr;
    queued++;
    c_tx++;
  }
  while (queued > 0) {
    ssize_t k = send(r->fd, NULL, 0, MSG_DONTWAIT);
    if (k >= 0 || errno != EINTR) {
      if (k < 0) {
        c_tx_err++;
        c_tx--;
      }
      break;
    }
  }
}

static void run_packet(const opts_t *o, int txring) {
  pring_t r;
  open_pring(&r, o->iface, o->ring_bytes, txring);
  uint8_t *slots = aligned_alloc(64, (size_t)o->batch * SLOT_BYTES);
  uint32_t *lens = calloc(o->batch, sizeof *lens);
  uint8_t *txbuf = aligned_alloc(64, (size_t)o->batch * SLOT_BYTES);
  struct mmsghdr *msgs = calloc(o->batch, sizeof *msgs);
  struct iovec *iov = calloc(o->batch, sizeof *iov);
  if (!slots || !lens || !txbuf || !msgs || !iov) die("malloc");
  for (unsigned i = 0; i < o->batch; i++) {
    iov[i].iov_base = txbuf + (size_t)i * SLOT_BYTES;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  struct pollfd pfd = {.fd = r.fd, .events = POLLIN};
  printf("ready\n");
  fflush(stdout);
  while (!stop_now) {
    int pr = poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR) die("poll");
    c_wakeups++;
    for (;;) {
      unsigned n = pring_collect(&r, slots, lens, o->batch);
      if (n == 0) break;
      c_rx += n;
      c_batches++;
      for (unsigned i = 0; i < n; i++) swap_macs(slots + (size_t)i * SLOT_BYTES);
      if (txring) send_txring(&r, slots, lens, n);
      else send_mmsg(r.fd, txbuf, msgs, iov, slots, lens, n);
      if (n < o->batch) {
        if (o->spin_us == 0 || stop_now) break;
        uint64_t until = now_ns() + (uint64_t)o->spin_us * 1000u;
        int got = 0;
        while (!got && now_ns() < until) got = pring_ready(&r);
        if (!got) break;
        c_spin_hits++;
      }
    }
  }
}

/* ---- AF_XDP ------------------------------------------------------------------------------------- */

#ifdef IO_PROBE_XDP
#define UMEM_FRAMES 8192
#define XSK_RING 4096

static void run_xdp(const opts_t *o) {
  unsigned ifindex = if_nametoindex(o->iface);
  if (ifindex == 0) die(o->iface);
  size_t umem_len = (size_t)UMEM_FRAMES * XSK_UMEM__DEFAULT_FRAME_SIZE;
  void *area = mmap(NULL, umem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) die("mmap umem");
  struct xsk_ring_prod fill, tx;
  struct xsk_ring_cons comp, rx;
  struct xsk_umem *umem;
  struct xsk_umem_config ucfg = {.fill_size = XSK_RING,
                                 .comp_size = XSK_RING,
                                 .frame_size = XSK_UMEM__DEFAULT_FRAME_SIZE,
                                 .frame_headroom = 0,
                                 .flags = 0};
  int e = xsk_umem__create(&umem, area, umem_len, &fill, &comp, &ucfg);
  if (e) {
    errno = -e;
    die("xsk_umem__create");
  }
  struct xsk_socket *xsk;
  struct xsk_socket_config scfg = {.rx_size = XSK_RING, .tx_size = XSK_RING, .libxdp_flags = 0, .bind_flags = XDP_COPY};
  scfg.xdp_flags = strcmp(o->xdp_attach, "drv") == 0 ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
  e = xsk_socket__create(&xsk, o->iface, 0, umem, &rx, &tx, &scfg);
  if (e) {
    errno = -e;
    die("xsk_socket__create");
  }
  int fd = xsk_socket__fd(xsk);
  /* frames 0..XSK_RING-1 go to the fill ring, the rest are the send side's free list */
  uint32_t idx;
  if (xsk_ring_prod__reserve(&fill, XSK_RING, &idx) != XSK_RING) die("fill reserve");
  for (unsigned i = 0; i < XSK_RING; i++) *xsk_ring_prod__fill_addr(&fill, idx + i) = (uint64_t)i * XSK_UMEM__DEFAULT_FRAME_SIZE;
  xsk_ring_prod__submit(&fill, XSK_RING);
  uint64_t *free_tx = malloc(sizeof(uint64_t) * (UMEM_FRAMES - XSK_RING));
  unsigned nfree = 0;
  for (unsigned i = XSK_RING; i < UMEM_FRAMES; i++) free_tx[nfree++] = (uint64_t)i * XSK_UMEM__DEFAULT_FRAME_SIZE;
  unsigned outstanding = 0;
  uint8_t *slots = aligned_alloc(64, (size_t)o->batch * SLOT_BYTES);
  uint32_t *lens = calloc(o->batch, sizeof *lens);
  if (!slots || !lens || !free_tx) die("malloc");
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  printf("ready\n");
  fflush(stdout);
  while (!stop_now) {
    int pr = poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR) die("poll");
    c_wakeups++;
    for (;;) {
      uint32_t ridx;
      unsigned n = xsk_ring_cons__peek(&rx, o->batch, &ridx);
      if (n == 0) break;
      uint32_t fidx;
      while (xsk_ring_prod__reserve(&fill, n, &fidx) != n) { /* the fill ring has room for every RX frame */
      }
      for (unsigned i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, ridx + i);
        uint32_t len = d->len > SLOT_BYTES ? SLOT_BYTES : d->len;
        memcpy(slots + (size_t)i * SLOT_BYTES, xsk_umem__get_data(area, d->addr), len);
        lens[i] = len;
        *xsk_ring_prod__fill_addr(&fill, fidx + i) = xsk_umem__extract_addr(d->addr);
      }
      xsk_ring_cons__release(&rx, n);
      xsk_ring_prod__submit(&fill, n);
      c_rx += n;
      c_batches++;
      /* completed sends give their frames back */
      uint32_t cidx;
      unsigned done = xsk_ring_cons__peek(&comp, XSK_RING, &cidx);
      for (unsigned i = 0; i < done; i++) free_tx[nfree++] = *xsk_ring_cons__comp_addr(&comp, cidx + i);
      xsk_ring_cons__release(&comp, done);
      outstanding -= done;
      unsigned m = n < nfree ? n : nfree;
      c_ring_full += n - m;
      c_tx_err += n - m;
      uint32_t tidx;
      if (m > 0 && xsk_ring_prod__reserve(&tx, m, &tidx) == m) {
        for (unsigned i = 0; i < m; i++) {
          uint64_t a = free_tx[--nfree];
          uint8_t *slot = slots + (size_t)i * SLOT_BYTES;
          swap_macs(slot);
          memcpy(xsk_umem__get_data(area, a), slot, lens[i]);
          struct xdp_desc *td = xsk_ring_prod__tx_desc(&tx, tidx + i);
          td->addr = a;
          td->len = lens[i];
        }
        xsk_ring_prod__submit(&tx, m);
        outstanding += m;
        c_tx += m;
        /* copy mode sends in the kick, a bounded number of frames each time (EAGAIN: more to send) */
        for (int k = 0; k < 1000; k++) {
          if (sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0) break;
          if (errno != EAGAIN && errno != EBUSY && errno != EINTR && errno != ENOBUFS) {
            c_tx_err++;
            break;
          }
        }
      } else if (m > 0) {
        c_ring_full += m;
        c_tx_err += m;
      }
      if (n < o->batch) {
        if (o->spin_us == 0 || stop_now) break;
        uint64_t until = now_ns() + (uint64_t)o->spin_us * 1000u;
        int got = 0;
        while (!got && now_ns() < until) got = xsk_ring_cons__peek(&rx, 1, &ridx) > 0 ? (xsk_ring_cons__cancel(&rx, 1), 1) : 0;
        if (!got) break;
        c_spin_hits++;
      }
    }
  }
  /* frames still in flight are counted as sent (the kernel has them); what the completion ring never
     returned shows in tx - (frames seen at the peer) */
  (void)outstanding;
  xsk_socket__delete(xsk);
  xsk_umem__delete(umem);
}
#endif

/* ---- echo client -------------------------------------------------------------------------------- */

static int open_plain(const char *iface, unsigned *ifindex) {
  *ifindex = if_nametoindex(iface);
  if (*ifindex == 0) die(iface);
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) die("socket(AF_PACKET)");
  int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) die("PACKET_IGNORE_OUTGOING");
  struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)*ifindex};
  if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) die("bind");
  return fd;
}

/* waits for a frame whose bytes after the MACs equal want[12..len); returns its length, or -1 at timeout */
static int wait_echo(int fd, const uint8_t *want, size_t len, uint8_t *got, int timeout_ms) {
  uint64_t until = now_ns() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    int64_t left = (int64_t)(until - now_ns());
    if (left <= 0) return -1;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, (int)(left / 1000000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t k = recv(fd, got, SLOT_BYTES, MSG_DONTWAIT);
    if (k < 0) continue;
    if ((size_t)k == len && memcmp(got + 12, want + 12, len - 12) == 0) return (int)k;
  }
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int run_echo(const char *iface, const char *frames, const char *out, unsigned count, unsigned interval_us, int timeout_ms) {
  unsigned ifindex;
  int fd = open_plain(iface, &ifindex);
  uint8_t buf[SLOT_BYTES], got[SLOT_BYTES];
  if (frames != NULL) {
    FILE *in = fopen(frames, "r"), *o = fopen(out, "w");
    if (in == NULL || o == NULL) die("--frames/--out");
    char line[2 * SLOT_BYTES + 8];
    unsigned sent = 0, back = 0;
    while (fgets(line, sizeof line, in) != NULL) {
      size_t n = 0;
      for (char *p = line; p[0] && p[1] && hexval(p[0]) >= 0 && hexval(p[1]) >= 0 && n < SLOT_BYTES; p += 2)
        buf[n++] = (uint8_t)(hexval(p[0]) * 16 + hexval(p[1]));
      if (n < 14) continue;
      if (send(fd, buf, n, 0) < 0) die("send");
      sent++;
      int k = wait_echo(fd, buf, n, got, timeout_ms);
      if (k < 0) {
        fprintf(o, "-\n");
        continue;
      }
      back++;
      for (int i = 0; i < k; i++) fprintf(o, "%02x", got[i]);
      fprintf(o, "\n");
    }
    fclose(o);
    fclose(in);
    printf("sent %u echoed %u\n", sent, back);
    return 0;
  }
  /* latency: a 64-byte IPv4/UDP frame to 198.18.0.99 (no such host: the probe's namespace drops it) */
  memset(buf, 0, 64);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) die("SIOCGIFHWADDR");
  memset(buf, 0xff, 6);
  memcpy(buf + 6, ifr.ifr_hwaddr.sa_data, 6);
  buf[12] = 0x08;
  buf[13] = 0x00;
  static const uint8_t ip[20] = {0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 99};
  memcpy(buf + 14, ip, 20);
  uint8_t *udp = buf + 34;
  udp[0] = 0x30;
  udp[1] = 0x39;
  udp[2] = 0;
  udp[3] = 7;
  udp[4] = 0;
  udp[5] = 30;
  uint64_t *rtt = calloc(count, sizeof *rtt);
  unsigned ok = 0, lost = 0;
  for (unsigned i = 0; i < count && !stop_now; i++) {
    memcpy(buf + 42, &i, sizeof i);
    uint64_t t0 = now_ns();
    if (send(fd, buf, 64, 0) < 0) die("send");
    if (wait_echo(fd, buf, 64, got, timeout_ms) < 0) lost++;
    else rtt[ok++] = now_ns() - t0;
    uint64_t next = t0 + (uint64_t)interval_us * 1000u;
    while (now_ns() < next) {
      struct timespec ts = {0, (long)(next - now_ns())};
      nanosleep(&ts, NULL);
    }
  }
  if (ok == 0) {
    printf("rtt_us n 0 lost %u\n", lost);
    return 1;
  }
  qsort(rtt, ok, sizeof *rtt, cmp_u64);
  printf("rtt_us n %u lost %u p50 %.1f p90 %.1f p99 %.1f max %.1f\n", ok, lost, rtt[ok / 2] / 1e3, rtt[ok * 9 / 10] / 1e3,
         rtt[ok * 99 / 100] / 1e3, rtt[ok - 1] / 1e3);
  return 0;
}

/* ---- main --------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fputs("usage: io-probe forward --iface IF --mode mmsg|txring|xdp [--spin-us N] [--batch N] [--ring-bytes N]\n"
        "                        [--xdp-attach skb|drv]\n"
        "       io-probe echo --iface IF (--frames FILE --out FILE | --count N --interval-us U) [--timeout-ms N]\n"
        "forward: receives every frame on IF and sends it back out of IF with its MAC addresses swapped, until\n"
        "SIGINT/SIGTERM, then prints its counters (rx, tx, tx_errors, batches, wakeups, spin_hits, ring_full).\n"
        "echo: sends frames on IF one at a time and waits for each one's echo (the bytes after the MACs equal).\n"
        "See scripts/bench/io-probe/run.sh and docs/io-paths.md.\n",
        f);
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  opts_t o = {.iface = NULL, .mode = "mmsg", .batch = 256, .spin_us = 0, .ring_bytes = 4u << 20, .xdp_attach = "skb"};
  const char *frames = NULL, *out = NULL;
  unsigned count = 0, interval_us = 1000;
  int timeout_ms = 1000;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (v == NULL) {
      fprintf(stderr, "io-probe: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (strcmp(a, "--iface") == 0) o.iface = v;
    else if (strcmp(a, "--mode") == 0) o.mode = v;
    else if (strcmp(a, "--spin-us") == 0) o.spin_us = (unsigned)atoi(v);
    else if (strcmp(a, "--batch") == 0) o.batch = (unsigned)atoi(v);
    else if (strcmp(a, "--ring-bytes") == 0) o.ring_bytes = (unsigned)atoi(v);
    else if (strcmp(a, "--xdp-attach") == 0) o.xdp_attach = v;
    else if (strcmp(a, "--frames") == 0) frames = v;
    else if (strcmp(a, "--out") == 0) out = v;
    else if (strcmp(a, "--count") == 0) count = (unsigned)atoi(v);
    else if (strcmp(a, "--interval-us") == 0) interval_us = (unsigned)atoi(v);
    else if (strcmp(a, "--timeout-ms") == 0) timeout_ms = atoi(v);
    else {
      fprintf(stderr, "io-probe: unknown option %s (--help lists them)\n", a);
      return 2;
    }
  }
  if (o.iface == NULL) {
    fprintf(stderr, "io-probe: --iface IF is required\n");
    return 2;
  }
  if (o.batch < 1 || o.batch > MAX_BATCH || o.spin_us > 1000) {
    fprintf(stderr, "io-probe: --batch must be 1..%d and --spin-us 0..1000\n", MAX_BATCH);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (strcmp(argv[1], "echo") == 0) {
    if ((frames == NULL) == (count == 0) || (frames != NULL && out == NULL)) {
      fprintf(stderr, "io-probe echo: give either --frames FILE --out FILE or --count N\n");
      return 2;
    }
    return run_echo(o.iface, frames, out, count, interval_us, timeout_ms);
  }
  if (strcmp(argv[1], "forward") != 0) {
    fprintf(stderr, "io-probe: unknown command %s (forward or echo)\n", argv[1]);
    return 2;
  }
  if (strcmp(o.mode, "mmsg") == 0) run_packet(&o, 0);
  else if (strcmp(o.mode, "txring") == 0) run_packet(&o, 1);
  else if (strcmp(o.mode, "xdp") == 0) {
#ifdef IO_PROBE_XDP
    if (strcmp(o.xdp_attach, "skb") != 0 && strcmp(o.xdp_attach, "drv") != 0) {
      fprintf(stderr, "io-probe: --xdp-attach must be skb or drv\n");
      return 2;
    }
    run_xdp(&o);
#else
    fprintf(stderr, "io-probe: built without AF_XDP (build.sh found no libxdp-dev/libbpf-dev)\n");
    return 3;
#endif
  } else {
    fprintf(stderr, "io-probe: --mode must be mmsg, txring or xdp\n");
    return 2;
  }
  printf("rx %.0f tx %.0f tx_errors %.0f batches %.0f wakeups %.0f spin_hits %.0f ring_full %.0f\n", c_rx, c_tx, c_tx_err, c_batches,
         c_wakeups, c_spin_hits, c_ring_full);
  return 0;
}
