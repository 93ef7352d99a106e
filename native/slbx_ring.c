// slbx_ring: the optional batched packet I/O of the slbx daemons (N-API, C, Linux only).
//
// Why: with libpcap through `cap`, every captured frame is one call from C into JavaScript (with the
// bookkeeping of an asynchronous callback) and every injected frame is one send(2). The JavaScript
// work per packet is a few hundred nanoseconds; those crossings are the rest (docs/performance.md).
// This addon keeps the kernel's interface (a packet socket with a memory-mapped receive ring, as
// libpcap uses) and changes only how frames cross into JavaScript and back:
//
//   receive  an AF_PACKET socket bound to one interface, with a classic BPF filter compiled by libpcap
//            (so a filter means exactly what it means for the pcap path), and a TPACKET_V2 receive
//            ring (per-frame status: a frame is handed over at once, no block timeout). On each
//            wake-up of the event loop every ready frame, up to `batch`, is copied into one shared
//            buffer (fixed-size slots) with its length in a shared table, and JavaScript is called
//            ONCE per batch. An 802.1Q tag the kernel took out of the frame is put back, as libpcap
//            does, so the data planes see the same bytes on both paths.
//   send     send(h, buf, len) copies the frame into the socket's send queue (a C buffer, so the
//            caller's buffer is free again at once, as with pcap_sendpacket). Frames queued while a
//            batch is being handled go out with ONE sendmmsg(2) per socket right after the batch
//            callback returns; outside a batch (timers) a frame goes out at once.
//   raw      the same queue over an IPPROTO_RAW socket (header included), every packet routed by one
//            fixed next hop: the host agent's direct server return.
//   burst    a paced traffic generator's inner loop for the benches: N copies of a template frame,
//            each with a new source port and address, in sendmmsg batches.
//
// Nothing here knows about slbx's packets: the data planes stay in TypeScript, unchanged.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <node_api.h>
#include <uv.h>

#define KIND_PACKET 1
#define KIND_RAW 2
#define MAX_BATCHES_PER_WAKEUP 64
#define VLAN_TAG_LEN 4
#define META_WORDS 2 /* per frame: length, flags */
#define FLAG_TRUNCATED 1u
#define FLAG_VLAN 2u

typedef struct port {
  int kind;
  int fd;
  napi_env env;
  /* receive (packet sockets) */
  uv_poll_t poll;
  int poll_started;
  int poll_initialized;
  int poll_closed; /* every libuv handle of the port (poll, retry) is closed (or was never made) */
  /* after a socket error: restarts the poll later instead of at once (see on_socket_error) */
  uv_timer_t retry;
  int retry_initialized;
  int handles_open; /* libuv handles made and not yet closed */
  unsigned rx_error_streak; /* socket errors since the last frame received */
  uint8_t *ring;
  size_t ring_len;
  unsigned frame_size;
  unsigned frame_nr;
  unsigned frames_per_block;
  unsigned block_size;
  unsigned rx_idx;
  uint8_t *rx_slots; /* JS-owned: batch * slot_bytes */
  unsigned slot_bytes;
  unsigned batch;
  unsigned spin_us; /* after the ring runs dry, keep looking this long before sleeping (0: never) */
  uint32_t *meta; /* JS-owned: batch * META_WORDS */
  napi_ref rx_ref, meta_ref, cb_ref, resource_ref;
  napi_async_context actx;
  int has_actx;
  /* send */
  uint8_t *tx_buf;
  unsigned tx_slots;
  unsigned tx_slot_bytes;
  unsigned tx_count;
  struct mmsghdr *msgs;
  struct iovec *iov;
  uint8_t *tx_counted; /* per queue slot: 1 when the caller counts the frame as sent (send()'s `counted`) */
  struct sockaddr_storage dst;
  socklen_t dst_len;
  struct port *next_pending;
  int pending;
  /* counters */
  double rx_packets, rx_batches, rx_truncated, rx_vlan, rx_kernel_packets, rx_kernel_drops, rx_max_batch, rx_spin_hits;
  double tx_packets, tx_batches, tx_errors, tx_oversize, rx_errors;
  /* frames sent with `counted` that the kernel took, and their bytes: the caller's tx, counted per batch */
  double tx_counted_packets, tx_counted_bytes;
  int tx_last_errno, rx_last_errno;
  /* lifetime */
  int closed;
  int finalized;
  int in_callback;
} port_t;

/* Per thread: each Node worker thread that loads the addon has its own event loop, its own ports and its
   own batches (--workers N), so the queue of ports to flush and the batch depth must not be shared. */
static __thread port_t *pending_head = NULL;
static __thread int batch_depth = 0;

/* ---- small N-API helpers ------------------------------------------------------------------------ */

#define CHECK(env, call)                                                  \
  do {                                                                    \
    if ((call) != napi_ok) {                                              \
      const napi_extended_error_info *ei = NULL;                          \
      napi_get_last_error_info((env), &ei);                               \
      napi_throw_error((env), NULL, ei && ei->error_message ? ei->error_message : #call); \
      return NULL;                                                        \
    }                                                                     \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, NULL, msg);
  return NULL;
}

static napi_value throw_msg(napi_env env, const char *msg) {
  napi_throw_error(env, NULL, msg);
  return NULL;
}

static int get_u32(napi_env env, napi_value v, uint32_t *out) {
  return napi_get_value_uint32(env, v, out) == napi_ok;
}

static int get_bytes(napi_env env, napi_value v, uint8_t **data, size_t *len) {
  bool is;
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type t;
    size_t n, off;
    void *d;
    napi_value ab;
    if (napi_get_typedarray_info(env, v, &t, &n, &d, &ab, &off) != napi_ok) return 0;
    size_t el = (t == napi_uint32_array || t == napi_int32_array || t == napi_float32_array) ? 4
              : (t == napi_uint16_array || t == napi_int16_array) ? 2
              : (t == napi_float64_array || t == napi_bigint64_array || t == napi_biguint64_array) ? 8 : 1;
    *data = (uint8_t *)d;
    *len = n * el;
    return 1;
  }
  return 0;
}

static port_t *get_port(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == NULL) {
    napi_throw_type_error(env, NULL, "not a slbx_ring handle");
    return NULL;
  }
  return (port_t *)p;
}

/* ---- send queue --------------------------------------------------------------------------------- */

static void unlink_pending(port_t *p) {
  if (!p->pending) return;
  port_t **pp = &pending_head;
  while (*pp != NULL && *pp != p) pp = &(*pp)->next_pending;
  if (*pp == p) *pp = p->next_pending;
  p->next_pending = NULL;
  p->pending = 0;
}

/* Sends everything queued on p with sendmmsg; a message the kernel refuses is counted and skipped. */
static void flush_port(port_t *p) {
  unsigned i = 0;
  unlink_pending(p);
  if (p->fd < 0) { p->tx_count = 0; return; }
  if (p->tx_count > 0) p->tx_batches++;
  while (i < p->tx_count) {
    int n = sendmmsg(p->fd, p->msgs + i, p->tx_count - i, MSG_DONTWAIT);
    if (n > 0) {
      p->tx_packets += n;
      for (unsigned k = i; k < i + (unsigned)n; k++) {
        if (p->tx_counted[k]) { p->tx_counted_packets++; p->tx_counted_bytes += (double)p->iov[k].iov_len; }
      }
      i += (unsigned)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      /* the first remaining message failed: count it and go on with the next one */
      p->tx_errors++;
      p->tx_last_errno = n < 0 ? errno : EIO;
      i++;
    }
  }
  p->tx_count = 0;
}

static void flush_pending(void) {
  while (pending_head != NULL) flush_port(pending_head);
}

/* Queues buf[0..len) on p; returns 0, or a negative errno when it cannot be sent at all. `counted`: once
   the kernel takes it, it counts in tx_counted_packets and tx_counted_bytes. */
static int queue_frame(port_t *p, const uint8_t *buf, size_t len, int counted) {
  if (p->fd < 0) return -EBADF;
  if (len > p->tx_slot_bytes) {
    /* larger than a queue slot: send it alone, now (after what is queued, to keep the order) */
    flush_port(p);
    ssize_t r = p->dst_len > 0 ? sendto(p->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&p->dst, p->dst_len)
                               : send(p->fd, buf, len, MSG_DONTWAIT);
    if (r < 0) {
      p->tx_errors++;
      p->tx_oversize++;
      p->tx_last_errno = errno;
      return -errno;
    }
    p->tx_packets++;
    p->tx_batches++;
    if (counted) { p->tx_counted_packets++; p->tx_counted_bytes += (double)len; }
    return 0;
  }
  if (p->tx_count == p->tx_slots) flush_port(p);
  unsigned i = p->tx_count++;
  memcpy(p->tx_buf + (size_t)i * p->tx_slot_bytes, buf, len);
  p->iov[i].iov_len = len;
  p->tx_counted[i] = (uint8_t)(counted != 0);
  if (batch_depth == 0) {
    flush_port(p);
  } else if (!p->pending) {
    p->pending = 1;
    p->next_pending = pending_head;
    pending_head = p;
  }
  return 0;
}

static int alloc_tx(port_t *p, unsigned slots, unsigned slot_bytes) {
  p->tx_slots = slots;
  p->tx_slot_bytes = slot_bytes;
  p->tx_buf = (uint8_t *)malloc((size_t)slots * slot_bytes);
  p->msgs = (struct mmsghdr *)calloc(slots, sizeof(struct mmsghdr));
  p->iov = (struct iovec *)calloc(slots, sizeof(struct iovec));
  p->tx_counted = (uint8_t *)calloc(slots, 1);
  if (p->tx_buf == NULL || p->msgs == NULL || p->iov == NULL || p->tx_counted == NULL) return -1;
  for (unsigned i = 0; i < slots; i++) {
    p->iov[i].iov_base = p->tx_buf + (size_t)i * slot_bytes;
    p->msgs[i].msg_hdr.msg_iov = &p->iov[i];
    p->msgs[i].msg_hdr.msg_iovlen = 1;
    if (p->dst_len > 0) {
      p->msgs[i].msg_hdr.msg_name = &p->dst;
      p->msgs[i].msg_hdr.msg_namelen = p->dst_len;
    }
  }
  return 0;
}

/* ---- lifetime ----------------------------------------------------------------------------------- */

static void free_port(port_t *p) {
  free(p->tx_buf);
  free(p->msgs);
  free(p->iov);
  free(p->tx_counted);
  free(p);
}

static void on_handle_closed(uv_handle_t *h) {
  port_t *p = (port_t *)h->data;
  if (--p->handles_open > 0) return;
  p->poll_closed = 1;
  if (p->finalized) free_port(p);
}

/* Releases what ties the port to JavaScript (references, async context) and closes the poll handle. */
static void release_js(port_t *p, napi_env env) {
  if (env != NULL) {
    if (p->rx_ref) { napi_delete_reference(env, p->rx_ref); p->rx_ref = NULL; }
    if (p->meta_ref) { napi_delete_reference(env, p->meta_ref); p->meta_ref = NULL; }
    if (p->cb_ref) { napi_delete_reference(env, p->cb_ref); p->cb_ref = NULL; }
    if (p->resource_ref) { napi_delete_reference(env, p->resource_ref); p->resource_ref = NULL; }
    if (p->has_actx) { napi_async_destroy(env, p->actx); p->has_actx = 0; }
  }
  p->rx_slots = NULL;
  p->meta = NULL;
  if (p->poll_initialized) {
    p->poll_initialized = 0;
    uv_close((uv_handle_t *)&p->poll, on_handle_closed);
  }
  if (p->retry_initialized) {
    p->retry_initialized = 0;
    uv_close((uv_handle_t *)&p->retry, on_handle_closed);
  }
  if (p->handles_open == 0) p->poll_closed = 1;
}

/* Stops everything and releases the kernel objects; the struct lives on until both its libuv handles are
   closed and the JS handle is finalized. Idempotent; safe from inside the port's own batch callback
   (the JS side is then released when the callback returns). */
static void close_port(port_t *p, napi_env env) {
  if (p->closed) return;
  if (p->fd >= 0 && p->tx_count > 0) flush_port(p);
  unlink_pending(p);
  p->closed = 1;
  if (p->poll_started) {
    uv_poll_stop(&p->poll);
    p->poll_started = 0;
  }
  if (p->retry_initialized) uv_timer_stop(&p->retry);
  if (p->ring != NULL) {
    munmap(p->ring, p->ring_len);
    p->ring = NULL;
  }
  if (p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
  if (!p->in_callback) release_js(p, env);
}

static void finalize_port(napi_env env, void *data, void *hint) {
  (void)hint;
  port_t *p = (port_t *)data;
  close_port(p, env);
  p->finalized = 1;
  if (p->poll_closed) free_port(p);
}

static port_t *new_port(int kind) {
  port_t *p = (port_t *)calloc(1, sizeof(port_t));
  if (p == NULL) return NULL;
  p->kind = kind;
  p->fd = -1;
  return p;
}

/* ---- receive ------------------------------------------------------------------------------------ */

/* Whether the next ring frame is ready (no copy). */
static int ring_ready(port_t *p) {
  if (p->ring == NULL) return 0;
  uint8_t *f = p->ring + (size_t)(p->rx_idx / p->frames_per_block) * p->block_size
             + (size_t)(p->rx_idx % p->frames_per_block) * p->frame_size;
  return (__atomic_load_n(&((struct tpacket2_hdr *)f)->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Copies ready ring frames into the JS slots (up to p->batch); returns how many. */
static unsigned collect(port_t *p) {
  unsigned n = 0;
  while (n < p->batch && p->ring != NULL) {
    uint8_t *f = p->ring + (size_t)(p->rx_idx / p->frames_per_block) * p->block_size
               + (size_t)(p->rx_idx % p->frames_per_block) * p->frame_size;
    struct tpacket2_hdr *h = (struct tpacket2_hdr *)f;
    uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
    if ((status & TP_STATUS_USER) == 0) break;
    const uint8_t *data = f + h->tp_mac;
    uint32_t caplen = h->tp_snaplen;
    uint32_t wire = h->tp_len;
    uint8_t *slot = p->rx_slots + (size_t)n * p->slot_bytes;
    uint32_t flags = 0;
    int vlan = (h->tp_vlan_tci != 0 || (status & TP_STATUS_VLAN_VALID)) && caplen >= 12;
    uint32_t out;
    if (vlan) {
      /* put the tag the kernel took out back after the two MAC addresses (libpcap does the same) */
      uint16_t tpid = (status & TP_STATUS_VLAN_TPID_VALID) ? h->tp_vlan_tpid : ETH_P_8021Q;
      uint32_t total = caplen + VLAN_TAG_LEN;
      if (total > p->slot_bytes) total = p->slot_bytes;
      memcpy(slot, data, 12);
      slot[12] = (uint8_t)(tpid >> 8);
      slot[13] = (uint8_t)tpid;
      slot[14] = (uint8_t)(h->tp_vlan_tci >> 8);
      slot[15] = (uint8_t)h->tp_vlan_tci;
      memcpy(slot + 16, data + 12, total - 16);
      out = total;
      wire += VLAN_TAG_LEN;
      flags |= FLAG_VLAN;
      p->rx_vlan++;
    } else {
      out = caplen > p->slot_bytes ? p->slot_bytes : caplen;
      memcpy(slot, data, out);
    }
    if (out < wire) {
      flags |= FLAG_TRUNCATED;
      p->rx_truncated++;
    }
    p->meta[n * META_WORDS] = out;
    p->meta[n * META_WORDS + 1] = flags;
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    p->rx_idx = (p->rx_idx + 1) % p->frame_nr;
    n++;
  }
  return n;
}

/* ---- socket errors ------------------------------------------------------------------------------ */

/* After this many socket errors in a row with no frame received between them, the poll restarts
   ERROR_RETRY_MS later instead of at once: an error that kept coming back would cost a wake-up per
   retry, never a busy CPU. */
#define ERROR_STREAK_MAX 8
#define ERROR_RETRY_MS 100
#define ERRQUEUE_DRAIN_MAX 64

static void on_readable(uv_poll_t *handle, int status, int events);

/* Reads and clears what makes a packet socket report POLLERR (datagram_poll): the pending error
   (SO_ERROR; reading it clears it) and the error queue. Each is counted in rx_errors. Returns whether
   there was anything to clear. */
static int clear_socket_error(port_t *p) {
  int cleared = 0, err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err != 0) {
    p->rx_errors++;
    p->rx_last_errno = err;
    cleared = 1;
  }
  /* only send timestamps (not asked for here) queue there on a packet socket; drained so that it cannot
     keep POLLERR up */
  for (int i = 0; i < ERRQUEUE_DRAIN_MAX; i++) {
    char buf[256], ctl[256];
    struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    if (recvmsg(p->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;
    p->rx_errors++;
    cleared = 1;
  }
  return cleared;
}

static void restart_poll(port_t *p);

static void on_retry(uv_timer_t *t) {
  restart_poll((port_t *)t->data);
}

/* Starts the poll again; when libuv refuses, counts it and tries again ERROR_RETRY_MS later. */
static void restart_poll(port_t *p) {
  if (p->closed || p->fd < 0 || !p->poll_initialized || p->poll_started) return;
  int r = uv_poll_start(&p->poll, UV_READABLE, on_readable);
  if (r == 0) {
    p->poll_started = 1;
    return;
  }
  p->rx_errors++;
  p->rx_last_errno = -r;
  if (p->retry_initialized) uv_timer_start(&p->retry, on_retry, ERROR_RETRY_MS, 0);
}

/* A socket error. On POLLERR (without POLLPRI) libuv STOPS the poll, then calls back with UV_EBADF
   (uv__poll_io), whatever the error was. A packet socket reports POLLERR when its sk_err is set, and
   af_packet sets ENETDOWN when the bound interface goes down (it hands the socket frames again once the
   interface is up) or away. Without a restart the port would never receive again, silently (seen on a
   veth pair: after `ip link set down; up` the kernel counted frames the port never read). So: clear the
   error (or the level-triggered poll would report it again at once, forever), count it, and start the
   poll again, unless the port is closed. Errors back to back without a frame between them, or one with
   nothing to clear, restart it ERROR_RETRY_MS later instead: never a busy loop. */
static void on_socket_error(port_t *p) {
  p->poll_started = 0; /* libuv stopped it */
  if (p->closed || p->fd < 0) return;
  int cleared = clear_socket_error(p);
  if (!cleared) p->rx_errors++; /* POLLERR with nothing to clear: still counted */
  p->rx_error_streak++;
  if ((!cleared || p->rx_error_streak >= ERROR_STREAK_MAX) && p->retry_initialized) {
    uv_timer_start(&p->retry, on_retry, ERROR_RETRY_MS, 0);
  } else {
    restart_poll(p);
  }
}

static void on_readable(uv_poll_t *handle, int status, int events) {
  port_t *p = (port_t *)handle->data;
  if (status < 0) {
    on_socket_error(p);
    return;
  }
  if (!(events & UV_READABLE) || p->closed) return;
  napi_env env = p->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, resource;
  napi_get_reference_value(env, p->cb_ref, &cb);
  napi_get_reference_value(env, p->resource_ref, &resource);
  p->in_callback = 1;
  for (int b = 0; b < MAX_BATCHES_PER_WAKEUP && !p->closed; b++) {
    unsigned n = collect(p);
    if (n == 0) {
      if (b == 0 && p->fd >= 0) {
        /* woken readable with nothing in the ring. Not how a socket error arrives (that is status < 0,
           on_socket_error), but a pending one is read and counted here too, which clears it. */
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err != 0) {
          p->rx_errors++;
          p->rx_last_errno = err;
        }
      }
      break;
    }
    p->rx_packets += n;
    p->rx_batches++;
    p->rx_error_streak = 0;
    if (n > p->rx_max_batch) p->rx_max_batch = n;
    napi_value argv[1], result;
    napi_create_uint32(env, n, &argv[0]);
    batch_depth++;
    napi_status st = napi_make_callback(env, p->actx, resource, cb, 1, argv, &result);
    batch_depth--;
    if (batch_depth == 0) flush_pending();
    if (st != napi_ok) {
      /* an exception in the handler: let Node report it (as for any callback) and stop this wake-up */
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) {
        napi_value e;
        napi_get_and_clear_last_exception(env, &e);
        napi_fatal_exception(env, e);
      }
      break;
    }
    if (n < p->batch) {
      /* drained. With spin_us, look at the ring a little longer before sleeping: under load the next
         frame is usually microseconds away, and picking it up here saves a wake-up (ours, and the
         sender CPU's work of waking us). */
      if (p->spin_us == 0 || p->closed) break;
      uint64_t until = now_ns() + (uint64_t)p->spin_us * 1000u;
      int got = 0;
      while (!got && now_ns() < until) got = ring_ready(p);
      if (!got) break;
      p->rx_spin_hits++;
    }
  }
  p->in_callback = 0;
  if (p->closed) release_js(p, env);
  napi_close_handle_scope(env, scope);
}

/* Compiles `filter` for `iface` with libpcap (activated on the interface, so that libpcap generates
   code for the Linux kernel's VLAN handling exactly as it does for the pcap path). */
static int compile_filter(const char *iface, const char *filter, struct bpf_program *prog, char *err, size_t errlen) {
  char ebuf[PCAP_ERRBUF_SIZE] = "";
  pcap_t *pc = pcap_create(iface, ebuf);
  if (pc == NULL) { snprintf(err, errlen, "%s", ebuf); return -1; }
  pcap_set_snaplen(pc, 262144);
  pcap_set_buffer_size(pc, 1 << 16);
  pcap_set_immediate_mode(pc, 1);
  int r = pcap_activate(pc);
  if (r < 0) {
    snprintf(err, errlen, "%s: %s", iface, pcap_geterr(pc)[0] ? pcap_geterr(pc) : pcap_statustostr(r));
    pcap_close(pc);
    return -1;
  }
  if (pcap_datalink(pc) != DLT_EN10MB) {
    snprintf(err, errlen, "%s: not an Ethernet interface", iface);
    pcap_close(pc);
    return -1;
  }
  if (pcap_compile(pc, prog, filter, 1, PCAP_NETMASK_UNKNOWN) != 0) {
    snprintf(err, errlen, "bad filter: %s", pcap_geterr(pc));
    pcap_close(pc);
    return -1;
  }
  pcap_close(pc);
  return 0;
}

/* openPacket(iface, filter, ringBytes, frameBytes, batch, txSlots, ignoreOutgoing, rx, meta, onBatch[, spinUs[, fanoutGroup[, qdiscBypass]]])
   fanoutGroup 1..65535: the socket joins that PACKET_FANOUT group in hash mode (the kernel's symmetric flow
   hash picks one socket of the group per frame, so every frame of one flow reaches the same socket);
   0: no group. Every socket of a group must use the same interface and filter.
   qdiscBypass (default true): PACKET_QDISC_BYPASS, the shortest send path; its frames skip the
   interface's taps, so a tcpdump on the interface does not see them (false: they go through the queue
   discipline and the taps see them, as with libpcap's sends).
   fanoutProgram (a Buffer of struct sock_filter, optional, with a fanoutGroup): the group is in
   PACKET_FANOUT_CBPF mode and this classic BPF program picks the socket (its value modulo the group's
   size; the host agent's workers steer both directions of a flow with it: host-agent/worker-steering.ts).
   Every member sets the same program (PACKET_FANOUT_DATA; the last one set is the group's). */
static napi_value open_packet(napi_env env, napi_callback_info info) {
  size_t argc = 14;
  napi_value argv[14];
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 10) return throw_msg(env, "openPacket: 10 arguments expected");
  char iface[IF_NAMESIZE + 1];
  size_t iflen;
  if (napi_get_value_string_utf8(env, argv[0], iface, sizeof iface, &iflen) != napi_ok || iflen == 0 || iflen >= IF_NAMESIZE)
    return throw_msg(env, "openPacket: bad interface name");
  size_t flen;
  CHECK(env, napi_get_value_string_utf8(env, argv[1], NULL, 0, &flen));
  char *filter = (char *)malloc(flen + 1);
  if (filter == NULL) return throw_msg(env, "out of memory");
  napi_get_value_string_utf8(env, argv[1], filter, flen + 1, &flen);
  uint32_t ring_bytes, frame_bytes, batch, tx_slots;
  bool ignore_out = false;
  uint32_t spin_us = 0;
  if (argc >= 11 && !get_u32(env, argv[10], &spin_us)) { free(filter); return throw_msg(env, "openPacket: spinUs must be a number"); }
  if (spin_us > 1000) spin_us = 1000;
  uint32_t fanout_group = 0;
  if (argc >= 12 && (!get_u32(env, argv[11], &fanout_group) || fanout_group > 65535)) {
    free(filter);
    return throw_msg(env, "openPacket: fanoutGroup must be 0 (none) or 1..65535");
  }
  bool bypass = true;
  if (argc >= 13 && napi_get_value_bool(env, argv[12], &bypass) != napi_ok) {
    free(filter);
    return throw_msg(env, "openPacket: qdiscBypass must be a boolean");
  }
  uint8_t *fanout_prog = NULL;
  size_t fanout_prog_len = 0;
  if (argc >= 14) {
    napi_valuetype pt;
    napi_typeof(env, argv[13], &pt);
    if (pt != napi_undefined && pt != napi_null
        && (!get_bytes(env, argv[13], &fanout_prog, &fanout_prog_len) || fanout_prog_len == 0 || fanout_prog_len % 8 != 0
            || fanout_prog_len / 8 > 4096 || fanout_group == 0)) {
      free(filter);
      return throw_msg(env, "openPacket: fanoutProgram must be 1..4096 struct sock_filter (8 bytes each), with a fanoutGroup");
    }
  }
  if (!get_u32(env, argv[2], &ring_bytes) || !get_u32(env, argv[3], &frame_bytes) || !get_u32(env, argv[4], &batch)
      || !get_u32(env, argv[5], &tx_slots) || napi_get_value_bool(env, argv[6], &ignore_out) != napi_ok) {
    free(filter);
    return throw_msg(env, "openPacket: ringBytes, frameBytes, batch, txSlots must be numbers, ignoreOutgoing a boolean");
  }
  if (frame_bytes < 64 || frame_bytes > 262144 || batch < 1 || batch > 65536 || tx_slots < 1 || tx_slots > 65536) {
    free(filter);
    return throw_msg(env, "openPacket: frameBytes 64..262144, batch and txSlots 1..65536");
  }
  uint8_t *rx, *meta;
  size_t rx_len, meta_len;
  if (!get_bytes(env, argv[7], &rx, &rx_len) || !get_bytes(env, argv[8], &meta, &meta_len)) {
    free(filter);
    return throw_msg(env, "openPacket: rx must be a Buffer, meta a Uint32Array");
  }
  unsigned slot_bytes = frame_bytes + VLAN_TAG_LEN;
  if (rx_len < (size_t)batch * slot_bytes || meta_len < (size_t)batch * META_WORDS * 4) {
    free(filter);
    return throw_msg(env, "openPacket: rx must hold batch * (frameBytes + 4) bytes, meta batch * 2 words");
  }
  napi_valuetype t;
  napi_typeof(env, argv[9], &t);
  if (t != napi_function) { free(filter); return throw_msg(env, "openPacket: onBatch must be a function"); }

  struct bpf_program prog;
  char err[PCAP_ERRBUF_SIZE + 64];
  if (compile_filter(iface, filter, &prog, err, sizeof err) != 0) {
    free(filter);
    return throw_msg(env, err);
  }
  free(filter);
  unsigned ifindex = if_nametoindex(iface);
  if (ifindex == 0) { pcap_freecode(&prog); return throw_errno(env, iface, errno); }

  port_t *p = new_port(KIND_PACKET);
  if (p == NULL) { pcap_freecode(&prog); return throw_msg(env, "out of memory"); }
  p->env = env;
  /* protocol 0: no frames until bind, so none arrive before the filter is in place */
  p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (p->fd < 0) { int e = errno; pcap_freecode(&prog); free_port(p); return throw_errno(env, "socket(AF_PACKET)", e); }
  int e = 0;
  const char *what = "";
  int v2 = TPACKET_V2, one = 1;
  struct sock_fprog fprog = { .len = (unsigned short)prog.bf_len, .filter = (struct sock_filter *)prog.bf_insns };
  if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) < 0) { e = errno; what = "PACKET_VERSION"; }
  else if (setsockopt(p->fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) < 0) { e = errno; what = "SO_ATTACH_FILTER"; }
  pcap_freecode(&prog);
  if (e == 0 && ignore_out && setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) { e = errno; what = "PACKET_IGNORE_OUTGOING"; }
  if (e == 0 && bypass) (void)setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one); /* best effort */
  if (e == 0) {
    int sndbuf = 4 << 20;
    (void)setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    long page = sysconf(_SC_PAGESIZE);
    /* frame: tpacket2 header + sockaddr_ll, aligned, then up to frame_bytes of frame (+ slack) */
    unsigned fs = TPACKET_ALIGN(TPACKET2_HDRLEN + 16 + frame_bytes + 16);
    unsigned bs = (unsigned)page;
    while (bs < fs * 32u && bs < (1u << 22)) bs <<= 1;
    if (bs < fs) bs = (fs + (unsigned)page - 1) / (unsigned)page * (unsigned)page;
    unsigned bn = ring_bytes / bs;
    if (bn < 1) bn = 1;
    struct tpacket_req req = { .tp_block_size = bs, .tp_block_nr = bn, .tp_frame_size = fs, .tp_frame_nr = bn * (bs / fs) };
    if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0) { e = errno; what = "PACKET_RX_RING"; }
    else {
      p->frame_size = fs;
      p->block_size = bs;
      p->frames_per_block = bs / fs;
      p->frame_nr = req.tp_frame_nr;
      p->ring_len = (size_t)bs * bn;
      p->ring = (uint8_t *)mmap(NULL, p->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
      if (p->ring == MAP_FAILED) { p->ring = NULL; e = errno; what = "mmap"; }
    }
  }
  if (e == 0) {
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int)ifindex;
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof sll) < 0) { e = errno; what = "bind"; }
  }
  if (e == 0 && fanout_group != 0) {
    /* after bind (the kernel wants a bound socket); the mode and flags must match the group's other members */
    unsigned mode = fanout_prog != NULL ? PACKET_FANOUT_CBPF : PACKET_FANOUT_HASH;
    int fanout = (int)(fanout_group | (mode << 16));
    if (setsockopt(p->fd, SOL_PACKET, PACKET_FANOUT, &fanout, sizeof fanout) < 0) { e = errno; what = "PACKET_FANOUT"; }
    else if (fanout_prog != NULL) {
      /* after joining (the kernel sets the program on the group); until the group's first program is in
         place (microseconds after its first member joined) the group hands every frame to its first socket */
      struct sock_fprog fp = { .len = (unsigned short)(fanout_prog_len / 8), .filter = (struct sock_filter *)fanout_prog };
      if (setsockopt(p->fd, SOL_PACKET, PACKET_FANOUT_DATA, &fp, sizeof fp) < 0) { e = errno; what = "PACKET_FANOUT_DATA"; }
    }
  }
  if (e == 0 && alloc_tx(p, tx_slots, frame_bytes) != 0) { e = ENOMEM; what = "send queue"; }
  if (e != 0) {
    char m[128];
    snprintf(m, sizeof m, "%s: %s", iface, what);
    close_port(p, NULL);
    free_port(p);
    return throw_errno(env, m, e);
  }
  p->rx_slots = rx;
  p->slot_bytes = slot_bytes;
  p->batch = batch;
  p->spin_us = spin_us;
  p->meta = (uint32_t *)meta;
  napi_value resource, name, ext;
  CHECK(env, napi_create_reference(env, argv[7], 1, &p->rx_ref));
  CHECK(env, napi_create_reference(env, argv[8], 1, &p->meta_ref));
  CHECK(env, napi_create_reference(env, argv[9], 1, &p->cb_ref));
  CHECK(env, napi_create_object(env, &resource));
  CHECK(env, napi_create_reference(env, resource, 1, &p->resource_ref));
  CHECK(env, napi_create_string_utf8(env, "slbx_ring", NAPI_AUTO_LENGTH, &name));
  CHECK(env, napi_async_init(env, resource, name, &p->actx));
  p->has_actx = 1;
  uv_loop_t *loop;
  CHECK(env, napi_get_uv_event_loop(env, &loop));
  if (uv_poll_init(loop, &p->poll, p->fd) != 0) { close_port(p, env); free_port(p); return throw_msg(env, "uv_poll_init failed"); }
  p->poll_initialized = 1;
  p->handles_open++;
  p->poll.data = p;
  if (uv_timer_init(loop, &p->retry) == 0) {
    p->retry_initialized = 1;
    p->handles_open++;
    p->retry.data = p;
  }
  int ps = uv_poll_start(&p->poll, UV_READABLE, on_readable);
  if (ps != 0) {
    p->finalized = 1; /* no JS handle: freed once its libuv handles are closed */
    close_port(p, env);
    char m[128];
    snprintf(m, sizeof m, "%s: uv_poll_start: %s", iface, uv_strerror(ps));
    return throw_msg(env, m);
  }
  p->poll_started = 1;
  CHECK(env, napi_create_external(env, p, finalize_port, NULL, &ext));
  return ext;
}

/* ---- raw IP sender ------------------------------------------------------------------------------ */

/* openRaw(family, via, txSlots, slotBytes): an IPPROTO_RAW socket; every packet is routed by `via`. */
static napi_value open_raw(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4], ext;
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint32_t family, slots, slot_bytes;
  char via[64];
  size_t vlen;
  if (argc < 4 || !get_u32(env, argv[0], &family) || napi_get_value_string_utf8(env, argv[1], via, sizeof via, &vlen) != napi_ok
      || !get_u32(env, argv[2], &slots) || !get_u32(env, argv[3], &slot_bytes) || (family != 4 && family != 6)
      || slots < 1 || slots > 65536 || slot_bytes < 64 || slot_bytes > 65536)
    return throw_msg(env, "openRaw(family 4|6, via, txSlots 1..65536, slotBytes 64..65536)");
  port_t *p = new_port(KIND_RAW);
  if (p == NULL) return throw_msg(env, "out of memory");
  p->env = env;
  if (family == 4) {
    struct sockaddr_in *s = (struct sockaddr_in *)&p->dst;
    s->sin_family = AF_INET;
    if (inet_pton(AF_INET, via, &s->sin_addr) != 1) { free_port(p); return throw_msg(env, "openRaw: via is not an IPv4 address"); }
    p->dst_len = sizeof *s;
  } else {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&p->dst;
    s->sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, via, &s->sin6_addr) != 1) { free_port(p); return throw_msg(env, "openRaw: via is not an IPv6 address"); }
    p->dst_len = sizeof *s;
  }
  p->fd = socket(family == 4 ? AF_INET : AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  if (p->fd < 0) { int e = errno; free_port(p); return throw_errno(env, "socket(IPPROTO_RAW)", e); }
  int sndbuf = 4 << 20;
  (void)setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  if (alloc_tx(p, slots, slot_bytes) != 0) { close(p->fd); free_port(p); return throw_msg(env, "out of memory"); }
  p->poll_closed = 1; /* never polled */
  CHECK(env, napi_create_external(env, p, finalize_port, NULL, &ext));
  return ext;
}

/* ---- common calls ------------------------------------------------------------------------------- */

/* send(h, buf, off, len[, counted]) -> 0 queued (or sent), negative errno when refused at once.
   counted: when the kernel takes the frame (at its batch's sendmmsg), it counts in txCounted*. */
static napi_value js_send(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5], r;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  port_t *p = get_port(env, argv[0]);
  if (p == NULL) return NULL;
  uint8_t *data;
  size_t blen;
  uint32_t off, len;
  if (!get_bytes(env, argv[1], &data, &blen) || !get_u32(env, argv[2], &off) || !get_u32(env, argv[3], &len))
    return throw_msg(env, "send(h, buf, off, len)");
  if ((size_t)off + len > blen) return throw_msg(env, "send: off + len beyond the buffer");
  bool counted = false;
  if (argc >= 5 && napi_get_value_bool(env, argv[4], &counted) != napi_ok) counted = false;
  int rc = queue_frame(p, data + off, len, counted ? 1 : 0);
  napi_create_int32(env, rc, &r);
  return r;
}

static napi_value js_flush(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  port_t *p = get_port(env, argv[0]);
  if (p == NULL) return NULL;
  flush_port(p);
  return NULL;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  port_t *p = get_port(env, argv[0]);
  if (p == NULL) return NULL;
  close_port(p, env);
  return NULL;
}

static void set_num(napi_env env, napi_value obj, const char *k, double v) {
  napi_value x;
  napi_create_double(env, v, &x);
  napi_set_named_property(env, obj, k, x);
}

static napi_value js_stats(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], o;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  port_t *p = get_port(env, argv[0]);
  if (p == NULL) return NULL;
  if (p->kind == KIND_PACKET && p->fd >= 0) {
    struct tpacket_stats st;
    socklen_t sl = sizeof st;
    if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0) { /* the kernel resets them on read */
      p->rx_kernel_packets += st.tp_packets;
      p->rx_kernel_drops += st.tp_drops;
    }
  }
  napi_create_object(env, &o);
  set_num(env, o, "rxPackets", p->rx_packets);
  set_num(env, o, "rxBatches", p->rx_batches);
  set_num(env, o, "rxMaxBatch", p->rx_max_batch);
  set_num(env, o, "rxSpinHits", p->rx_spin_hits);
  set_num(env, o, "rxTruncated", p->rx_truncated);
  set_num(env, o, "rxVlan", p->rx_vlan);
  set_num(env, o, "rxKernelPackets", p->rx_kernel_packets);
  set_num(env, o, "rxKernelDrops", p->rx_kernel_drops);
  set_num(env, o, "txPackets", p->tx_packets);
  set_num(env, o, "txBatches", p->tx_batches);
  set_num(env, o, "txErrors", p->tx_errors);
  set_num(env, o, "txCountedPackets", p->tx_counted_packets);
  set_num(env, o, "txCountedBytes", p->tx_counted_bytes);
  set_num(env, o, "txOversize", p->tx_oversize);
  set_num(env, o, "txQueued", p->tx_count);
  set_num(env, o, "ringFrames", p->frame_nr);
  set_num(env, o, "ringBytes", (double)p->ring_len);
  set_num(env, o, "rxErrors", p->rx_errors);
  napi_value re;
  if (p->rx_last_errno != 0) napi_create_string_utf8(env, strerror(p->rx_last_errno), NAPI_AUTO_LENGTH, &re);
  else napi_get_null(env, &re);
  napi_set_named_property(env, o, "rxLastError", re);
  napi_value le;
  if (p->tx_last_errno != 0) napi_create_string_utf8(env, strerror(p->tx_last_errno), NAPI_AUTO_LENGTH, &le);
  else napi_get_null(env, &le);
  napi_set_named_property(env, o, "txLastError", le);
  return o;
}

/* ---- bench generator ---------------------------------------------------------------------------- */

static uint16_t ipv4_checksum(const uint8_t *h, unsigned len) {
  uint32_t s = 0;
  for (unsigned i = 0; i + 1 < len; i += 2) s += (uint32_t)(h[i] << 8 | h[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return (uint16_t)~s;
}

/*
 * burst(h, template, len, count, seq, ipOff, ports, srcBase): sends `count` copies of template[0..len),
 * copy k carrying flow number seq + k: UDP/TCP source port 1024 + n % ports and IPv4 source address
 * srcBase + n / ports (the IPv4 header checksum recomputed; the UDP checksum must be zero in the
 * template). Returns how many the kernel took.
 */
static napi_value js_burst(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8], r;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  port_t *p = get_port(env, argv[0]);
  if (p == NULL) return NULL;
  uint8_t *tpl;
  size_t tlen;
  uint32_t len, count, ip_off, ports, src_base;
  double seqd;
  if (argc < 8 || !get_bytes(env, argv[1], &tpl, &tlen) || !get_u32(env, argv[2], &len) || !get_u32(env, argv[3], &count)
      || napi_get_value_double(env, argv[4], &seqd) != napi_ok || !get_u32(env, argv[5], &ip_off)
      || !get_u32(env, argv[6], &ports) || !get_u32(env, argv[7], &src_base) || len > tlen || len > p->tx_slot_bytes
      || ip_off + 24 > len || ports < 1 || ports > 64511)
    return throw_msg(env, "burst(h, template, len, count, seq, ipOff, ports, srcBase)");
  uint64_t seq = (uint64_t)seqd;
  unsigned ihl = (tpl[ip_off] & 0x0f) * 4;
  uint32_t sent = 0;
  flush_port(p);
  while (sent < count) {
    unsigned n = count - sent;
    if (n > p->tx_slots) n = p->tx_slots;
    for (unsigned i = 0; i < n; i++) {
      uint8_t *f = p->tx_buf + (size_t)i * p->tx_slot_bytes;
      uint64_t k = seq + sent + i;
      uint32_t port = 1024 + (uint32_t)(k % ports);
      uint32_t src = src_base + (uint32_t)(k / ports);
      memcpy(f, tpl, len);
      f[ip_off + 12] = (uint8_t)(src >> 24); f[ip_off + 13] = (uint8_t)(src >> 16);
      f[ip_off + 14] = (uint8_t)(src >> 8); f[ip_off + 15] = (uint8_t)src;
      f[ip_off + 10] = 0; f[ip_off + 11] = 0;
      uint16_t c = ipv4_checksum(f + ip_off, ihl);
      f[ip_off + 10] = (uint8_t)(c >> 8); f[ip_off + 11] = (uint8_t)c;
      f[ip_off + ihl] = (uint8_t)(port >> 8); f[ip_off + ihl + 1] = (uint8_t)port;
      p->iov[i].iov_len = len;
    }
    int m = sendmmsg(p->fd, p->msgs, n, 0);
    if (m <= 0) {
      if (m < 0 && errno == EINTR) continue;
      p->tx_errors++;
      p->tx_last_errno = m < 0 ? errno : EIO;
      break;
    }
    sent += (uint32_t)m;
    p->tx_packets += m;
    p->tx_batches++;
  }
  napi_create_uint32(env, sent, &r);
  return r;
}

/* ---- module ------------------------------------------------------------------------------------- */

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "openPacket", NULL, open_packet, NULL, NULL, NULL, napi_default, NULL },
    { "openRaw", NULL, open_raw, NULL, NULL, NULL, napi_default, NULL },
    { "send", NULL, js_send, NULL, NULL, NULL, napi_default, NULL },
    { "flush", NULL, js_flush, NULL, NULL, NULL, napi_default, NULL },
    { "stats", NULL, js_stats, NULL, NULL, NULL, napi_default, NULL },
    { "close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL },
    { "burst", NULL, js_burst, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
