// The probes section: http or tcp health checks, their path, interval, timeout and thresholds.
import { enumField, has, intField, itemObj, nameField, quoteHint, type Checker, type Path } from './check.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { ProbeProtocol } from './types.js';

const PROBE_KEYS = ['name', 'protocol', 'port', 'path', 'intervalMs', 'timeoutMs', 'upThreshold', 'downThreshold'] as const;

export interface ProbeP {
  name?: string;
  protocol?: ProbeProtocol;
  port?: number;
  path?: string | null;
  intervalMs?: number;
  timeoutMs?: number;
  upThreshold?: number;
  downThreshold?: number;
}

export function validateProbes(c: Checker, probeItems: readonly unknown[]): (ProbeP | undefined)[] {
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;
  const probes: (ProbeP | undefined)[] = probeItems.map((it, i) => {
    const at: Path = ['probes', i];
    const o = itemObj(c, it, at, PROBE_KEYS);
    if (o === undefined) return undefined;
    const p: ProbeP = {
      name: nameField(c, o, at),
      protocol: enumField(c, o, at, 'protocol', ['http', 'tcp'] as const, undefined),
      port: intField(c, o, at, 'port', L.port, undefined),
      intervalMs: intField(c, o, at, 'intervalMs', L.intervalMs, D.probe.intervalMs),
      upThreshold: intField(c, o, at, 'upThreshold', L.threshold, D.probe.upThreshold),
      downThreshold: intField(c, o, at, 'downThreshold', L.threshold, D.probe.downThreshold),
    };
    // path: http only
    const pathGiven = has(o, 'path') && o['path'] !== null;
    if (p.protocol === 'tcp') {
      if (pathGiven) c.add([...at, 'path'], o['path'], `only http probes have a path: remove it, or set protocol: http`);
      else p.path = null;
    } else if (!pathGiven) {
      p.path = D.probe.path;
    } else {
      const v = o['path'];
      const [minLen, maxLen] = L.probePathLength;
      if (typeof v !== 'string') c.add([...at, 'path'], v, `must be a string starting with '/'${quoteHint(v)}`);
      else if (!v.startsWith('/')) c.add([...at, 'path'], v, `must start with '/', like /health`);
      else if (v.length < minLen || v.length > maxLen || !/^[\x21-\x7e]+$/.test(v)) {
        c.add(
          [...at, 'path'],
          v,
          `must be ${minLen}..${maxLen} visible ASCII characters (no spaces or control characters; percent-encode others)`,
        );
      } else p.path = v;
    }
    // timeoutMs: 10..intervalMs, default min(2000, intervalMs)
    if (has(o, 'timeoutMs')) {
      const t = intField(c, o, at, 'timeoutMs', L.timeoutMs, undefined);
      if (t !== undefined && p.intervalMs !== undefined && t > p.intervalMs) {
        c.add([...at, 'timeoutMs'], t, `must be at most intervalMs (${p.intervalMs}): a probe must time out before the next one starts`);
      } else p.timeoutMs = t;
    } else if (p.intervalMs !== undefined) {
      p.timeoutMs = Math.min(D.probe.timeoutMs, p.intervalMs);
    }
    return p;
  });
  return probes;
}
