// wake-probe: what it costs to wake a thread on another CPU (issue 19, the added latency across CPUs).
// Two threads ping-pong over two eventfds, one round trip every --interval-us: thread A on CPU --a
// writes, thread B on CPU --b reads (blocked) and writes back, A reads (blocked). With both on one CPU a
// round trip is two context switches; across CPUs each wake-up of a sleeping thread on an idle CPU is an
// inter-processor interrupt, and in a VM whose idle vCPU halts, the host must schedule that vCPU again.
// --spin makes B poll its eventfd without sleeping (its CPU never idles): what a busy-polling daemon saves.
// --awake keeps both CPUs from idling (see keep_awake).
// Prints: "rtt_us n N p50 A p90 B p99 C max D".
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0) {
    fprintf(stderr, "wake-probe: cannot pin to CPU %d\n", cpu);
    exit(2);
  }
}

static int ping, pong, spin, cpu_b;
static volatile int done;

// --awake: a SCHED_IDLE thread spinning on each CPU keeps it from ever going idle (and, in a VM, its vCPU
// from halting), yet yields at once to any normal thread that wakes there: what idle=poll does for the
// whole machine, here for this program's two CPUs only.
static void *keep_awake(void *arg) {
  pin((int)(intptr_t)arg);
  struct sched_param p = {0};
  if (sched_setscheduler(0, SCHED_IDLE, &p) != 0) {
    fprintf(stderr, "wake-probe: SCHED_IDLE refused\n");
    exit(2);
  }
  while (!done) __asm__ volatile("pause");
  return NULL;
}
static unsigned count;

static void *responder(void *arg) {
  (void)arg;
  pin(cpu_b);
  uint64_t v;
  for (unsigned i = 0; i < count; i++) {
    if (spin) {
      while (read(ping, &v, sizeof v) < 0) if (errno != EAGAIN) return NULL;
    } else if (read(ping, &v, sizeof v) != sizeof v) return NULL;
    v = 1;
    if (write(pong, &v, sizeof v) != sizeof v) return NULL;
  }
  return NULL;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int cpu_a = 0, interval = 1000, awake = 0;
  count = 2000;
  cpu_b = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--a") && i + 1 < argc) cpu_a = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--b") && i + 1 < argc) cpu_b = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interval-us") && i + 1 < argc) interval = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin")) spin = 1;
    else if (!strcmp(argv[i], "--awake")) awake = 1;
    else {
      fprintf(stderr, "usage: wake-probe [--a CPU] [--b CPU] [--count N] [--interval-us U] [--spin] [--awake]\n");
      return 2;
    }
  }
  if (count < 1) return 2;
  ping = eventfd(0, spin ? EFD_NONBLOCK : 0);
  pong = eventfd(0, 0);
  pthread_t t, w[2];
  if (awake) {
    pthread_create(&w[0], NULL, keep_awake, (void *)(intptr_t)cpu_a);
    if (cpu_b != cpu_a) pthread_create(&w[1], NULL, keep_awake, (void *)(intptr_t)cpu_b);
  }
  pin(cpu_a);
  pthread_create(&t, NULL, responder, NULL);
  double *rtt = calloc(count, sizeof *rtt);
  uint64_t v = 1;
  struct timespec gap = {interval / 1000000, (interval % 1000000) * 1000};
  for (unsigned i = 0; i < count; i++) {
    nanosleep(&gap, NULL);
    double t0 = now_us();
    if (write(ping, &v, sizeof v) != sizeof v || read(pong, &v, sizeof v) != sizeof v) return 1;
    rtt[i] = now_us() - t0;
  }
  pthread_join(t, NULL);
  done = 1;
  if (awake) {
    pthread_join(w[0], NULL);
    if (cpu_b != cpu_a) pthread_join(w[1], NULL);
  }
  qsort(rtt, count, sizeof *rtt, cmp);
  printf("rtt_us n %u p50 %.1f p90 %.1f p99 %.1f max %.1f\n", count, rtt[count / 2], rtt[count * 9 / 10], rtt[count * 99 / 100], rtt[count - 1]);
  return 0;
}
