/*
 * scripts/bench/trafgen-sndbuf.c: an LD_PRELOAD library for trafgen, built and loaded by
 * scripts/bench/send-paths.sh (docs/io-paths.md, "The generator's send buffer").
 *
 * trafgen's packet socket keeps the default send buffer (net.core.wmem_default, 208 KB: the bench runs it
 * with --no-sock-mem so that it never changes that machine-wide setting). Every frame trafgen sends stays
 * charged to that buffer until the kernel frees it; a frame crossing a veth into another namespace keeps its
 * owner. With --rps the host's fabric interface queues the frames for the other CPU (up to
 * net.core.netdev_max_backlog = 1,000 of them, about 800 KB at 114 bytes), so the buffer fills whenever the
 * path under test is slower than the generator, the TX ring's non-blocking flush (sendto MSG_DONTWAIT) fails
 * with EAGAIN, and trafgen exits: "Flushing TX_RING failed: Resource temporarily unavailable!".
 *
 * This library gives each AF_PACKET socket trafgen opens a 16 MB send buffer (SO_SNDBUFFORCE, that socket
 * only), larger than the backlog can hold, so the generator runs at its own rate and the frames the path
 * cannot take are dropped at the backlog, as a NIC drops at a full ring. Should a flush still find the
 * buffer full, it waits for room (the same flush without MSG_DONTWAIT) instead of exiting, and counts it:
 * at exit it prints "trafgen-sndbuf: N flushes waited" on stderr when N > 0 (the generator was then held
 * back by the path: the row is not generator-limited).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define SNDBUF_BYTES (16 * 1024 * 1024)

static unsigned long waited_flushes;

static void report_waits(void) __attribute__((destructor));
static void report_waits(void) {
  if (waited_flushes > 0) fprintf(stderr, "trafgen-sndbuf: %lu flushes waited\n", waited_flushes);
}

int socket(int domain, int type, int protocol) {
  static int (*real_socket)(int, int, int);
  if (real_socket == NULL) real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  int fd = real_socket(domain, type, protocol);
  if (fd >= 0 && domain == AF_PACKET) {
    int bytes = SNDBUF_BYTES;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
      fprintf(stderr, "trafgen-sndbuf: SO_SNDBUFFORCE failed (errno %d)\n", errno);
  }
  return fd;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t alen) {
  static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
  if (real_sendto == NULL)
    real_sendto = (ssize_t(*)(int, const void *, size_t, int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "sendto");
  ssize_t r = real_sendto(fd, buf, len, flags, addr, alen);
  /* a TX ring flush (no buffer, no length) that found the send buffer full: wait for room */
  if (r < 0 && errno == EAGAIN && buf == NULL && len == 0 && (flags & MSG_DONTWAIT) != 0) {
    waited_flushes++;
    r = real_sendto(fd, buf, len, flags & ~MSG_DONTWAIT, addr, alen);
    /* interrupted by the stop signal: trafgen ignores ENOBUFS and checks its stop flag */
    if (r < 0 && errno == EINTR) errno = ENOBUFS;
  }
  return r;
}
