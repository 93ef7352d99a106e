// The host agent's /status reports its capture rings' kernel drops (ports[].kernelDrops,
// receive.kernelDrops) with --io ring, and null with libpcap's binding, which has no drop count
// (README limits): a number must never stand for "not counted".
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { kernelDropsOf } from '../host-agent/daemon.js';
import type { FramePort } from '../runtime/frame-port.js';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = `${ROOT}native/build/Release/slbx_ring.node`;
const isRoot = process.getuid?.() === 0;

describe('host agent: kernel drops of a port', () => {
  it('a port without a drop count (libpcap, or none): null', () => {
    expect(kernelDropsOf({ sendErrors: 0, isOpen: true } as unknown as FramePort)).toBeNull();
    expect(kernelDropsOf(null)).toBeNull();
  });

  it.skipIf(unmet(isRoot && existsSync(ADDON) ? null : 'needs root and the ring addon', 'a ring port on lo'))(
    "a real ring port (lo): its addon's rxKernelDrops, a number",
    async () => {
      const { loadRingAddon, RingPort } = await import('../runtime/ring-port.js');
      const r = loadRingAddon();
      if (!('addon' in r)) throw new Error(r.error);
      const port = new RingPort('lo', r.addon);
      expect(kernelDropsOf(port as unknown as FramePort)).toBeNull(); // not opened: no stats yet
      port.open('udp port 9', () => {});
      try {
        const drops = kernelDropsOf(port as unknown as FramePort);
        expect(drops).toBe(port.stats()!.rxKernelDrops);
        expect(typeof drops).toBe('number');
      } finally {
        port.close();
      }
    },
  );
});
