// Process metrics for GET /metrics, under the names Prometheus's client libraries use (process_*,
// nodejs_*), read at scrape time from Node and /proc/self.
import { readdirSync, readFileSync } from 'node:fs';
import type { PromWriter } from '../shared/prom-text.js';

const START_TIME_S = (Date.now() - performance.now()) / 1000;

/** Open file descriptors (entries of /proc/self/fd), or null where there is no /proc. */
function openFds(): number | null {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return null;
  }
}

/** The soft limit on open files (/proc/self/limits), or null. */
function maxFds(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

export function writeProcessMetrics(w: PromWriter): void {
  const cpu = process.cpuUsage();
  const mem = process.memoryUsage();
  w.add('process_cpu_user_seconds_total', 'counter', 'User CPU time spent, seconds.', {}, cpu.user / 1e6);
  w.add('process_cpu_system_seconds_total', 'counter', 'System CPU time spent, seconds.', {}, cpu.system / 1e6);
  w.add('process_cpu_seconds_total', 'counter', 'User and system CPU time spent, seconds.', {}, (cpu.user + cpu.system) / 1e6);
  w.add('process_resident_memory_bytes', 'gauge', 'Resident memory size, bytes.', {}, mem.rss);
  w.add(
    'process_start_time_seconds',
    'gauge',
    'Start time of the process since the Unix epoch, seconds.',
    {},
    Math.round(START_TIME_S * 1000) / 1000,
  );
  const fds = openFds();
  if (fds !== null) w.add('process_open_fds', 'gauge', 'Open file descriptors.', {}, fds);
  const max = maxFds();
  if (max !== null) w.add('process_max_fds', 'gauge', 'The limit on open file descriptors.', {}, max);
  w.add('nodejs_heap_size_used_bytes', 'gauge', 'V8 heap in use, bytes.', {}, mem.heapUsed);
  w.add('nodejs_heap_size_total_bytes', 'gauge', 'V8 heap allocated, bytes.', {}, mem.heapTotal);
  w.add('nodejs_external_memory_bytes', 'gauge', 'Memory of C++ objects bound to JavaScript (buffers included), bytes.', {}, mem.external);
  w.add('nodejs_version_info', 'gauge', 'The Node.js version (always 1).', { version: process.version }, 1);
}
