// The MUX's main thread shares its event loop between BGP (keepalives every keepaliveS, the peer's hold
// time 3 s in the lab), BFD, the policy client and the status endpoint: anything that holds the loop
// for seconds drops the BGP session. This watch makes such a hold visible: a timer every TICK_MS that
// fires late by STALL_MS or more logs `event_loop_stall` (how late, when it started), and GET /status
// carries the count, the longest and the loop delay's percentiles (perf_hooks.monitorEventLoopDelay).
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';
import { logWarn } from '../runtime/log.js';

const TICK_MS = 100;
/** A tick this late is logged: a third of the lab's 3 s hold time, far above a loaded machine's usual delay. */
export const STALL_MS = 1000;

export class LoopStallWatch {
  private timer: NodeJS.Timeout | null = null;
  private histogram: IntervalHistogram | null = null;
  private last = 0;
  stalls = 0;
  longestMs = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  start(): void {
    if (this.timer !== null) return;
    this.histogram = monitorEventLoopDelay({ resolution: 20 });
    this.histogram.enable();
    this.last = this.now();
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** One tick (the timer; tests call it): a delay of STALL_MS or more past the expected TICK_MS is a stall. */
  tick(): void {
    const t = this.now();
    const lateMs = t - this.last - TICK_MS;
    this.last = t;
    if (lateMs < STALL_MS) return;
    this.stalls++;
    this.longestMs = Math.max(this.longestMs, lateMs);
    logWarn('event_loop_stall', {
      lateMs: Math.round(lateMs),
      since: new Date(Date.now() - lateMs).toISOString(),
      effect: 'BGP keepalives, BFD and the status endpoint waited',
    });
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.histogram?.disable();
  }

  /** For GET /status: the loop's delay since the start (ms), the stalls logged and the longest. */
  status(): Record<string, number> {
    const h = this.histogram;
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    return {
      stalls: this.stalls,
      longestStallMs: Math.round(this.longestMs),
      ...(h !== null && h.count > 0 ? { delayP50Ms: ms(h.percentile(50)), delayP99Ms: ms(h.percentile(99)), delayMaxMs: ms(h.max) } : {}),
    };
  }
}
