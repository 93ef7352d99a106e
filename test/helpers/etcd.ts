// A real one-member etcd on loopback for the controller's store and election tests: its own data
// directory and free ports per run, stopped (by its PID) and removed by stop(). `etcdMissing()` says
// why it cannot run here (no etcd binary: scripts/lib/setup.sh installs Debian's etcd-server).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestEtcd {
  /** HOST:PORT of its client URL. */
  endpoint: string;
  /** Stops it (SIGKILL when `kill`, else SIGTERM) and waits for the exit. */
  stop(kill?: boolean): Promise<void>;
  /** Starts it again on the same ports and data (after stop). */
  restart(): Promise<void>;
  cleanup(): Promise<void>;
}

export function etcdMissing(): string | null {
  const r = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? null : 'no etcd binary (apt-get install etcd-server; scripts/lib/setup.sh installs it)';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function untilHealthy(endpoint: string, p: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (p.exitCode !== null) throw new Error(`etcd exited (${p.exitCode}): ${log()}`);
    try {
      const r = await fetch(`http://${endpoint}/health`);
      if (r.ok && ((await r.json()) as { health?: string }).health === 'true') return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`etcd on ${endpoint} not healthy within 30 s: ${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startEtcd(): Promise<TestEtcd> {
  const dir = mkdtempSync(join(tmpdir(), 'slbx-etcd-test-'));
  const [client, peer] = [await freePort(), await freePort()];
  const endpoint = `127.0.0.1:${client}`;
  let out = '';
  let p: ChildProcess;
  const run = async () => {
    out = '';
    p = spawn(
      'etcd',
      [
        '--name=t',
        `--data-dir=${join(dir, 'data')}`,
        `--listen-client-urls=http://${endpoint}`,
        `--advertise-client-urls=http://${endpoint}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=t=http://127.0.0.1:${peer}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    p.stderr?.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-2000)));
    await untilHealthy(endpoint, p, () => out);
  };
  await run();
  const stop = async (kill = false) => {
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill(kill ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };
  return {
    endpoint,
    stop,
    restart: run,
    async cleanup() {
      await stop(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
