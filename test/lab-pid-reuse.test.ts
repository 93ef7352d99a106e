// The lab's process records when a PID is reused (scripts/lab/pids.sh). A one-hour soak lost its
// flapping backend when the kernel's PIDs wrapped (pid_max 32768): the restarted HTTP server got the
// PID of a process stopped earlier, the records called it stopped, the next stop found "no running
// http backend", the server kept port 80, and every later start failed with EADDRINUSE.
//
// This reproduces it on purpose: the lab runs inside a PID namespace of its own (unshare --pid
// --fork --mount-proc), where writing /proc/sys/kernel/ns_last_pid right before the lab's spawn makes
// the restarted backend get exactly the PID of the one just stopped; that touches no other process's
// PIDs. Its namespaces live in that mount namespace only and go with it. Root and `ip netns` needed.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  if (spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' }).status !== 0)
    return '`unshare --pid --fork --mount-proc` fails here';
  return null;
}

// Every line the script prints for the test starts with "@ ".
const SCRIPT = String.raw`
set -u
source scripts/lab/lib.sh
eval "$(declare -f _lab_spawn | sed '1s/^_lab_spawn/_lab_spawn_unsteered/')"
# the next fork of this shell is the spawn's (ip netns exec ... &): it gets PID $REUSE
_lab_spawn() { [ -z "${'$'}{REUSE:-}" ] || echo $((REUSE - 1)) >/proc/sys/kernel/ns_last_pid; _lab_spawn_unsteered "$@"; }
name=$1
lab_up --name "$name" --no-daemons || { echo "@ lab_up failed"; exit 3; }
LAB_NAME=$name
for i in 1 2 3; do
  old=$(_lab_backend_pid h1vm1 http)
  lab_backend_stop h1vm1 http && echo "@ stop $i ok" || echo "@ stop $i failed"
  # its PID is free once this shell (its parent) reaped it, not when it died: until then the kernel
  # would skip it (seen on a loaded machine)
  for _ in $(seq 200); do [ -e "/proc/$old" ] || break; sleep 0.05; done
  REUSE=$old lab_backend_start h1vm1 http && echo "@ start $i ok" || echo "@ start $i failed"
  echo "@ round $i old ${'$'}{old:-none} new $LAB_SPAWNED_PID found $(_lab_backend_pid h1vm1 http)"
done
lab_down "$name" && echo "@ down ok"
exit 0
`;

const why = whyCannotRun();
describe.skipIf(unmet(why, 'the lab with a reused PID'))('the lab with a reused PID (scripts/lab/pids.sh)', () => {
  it('a restarted backend that gets the PID of the one stopped before is found, stopped and started again', () => {
    const name = `pidreuse-${process.pid}`;
    const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'bash', '-c', SCRIPT, 'bash', name], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 180_000,
    });
    const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    const lines = (r.stdout ?? '').split('\n').filter((l) => l.startsWith('@ '));
    const rounds = lines.filter((l) => l.startsWith('@ round ')).map((l) => l.split(' '));
    // each round: the restart really got the stopped backend's PID (else the test proves nothing), and
    // the records find the new process under it
    expect(rounds, out).toHaveLength(3);
    for (const f of rounds) {
      const [, , i, , old, , fresh, , found] = f;
      expect(fresh, `round ${i}: the restarted backend did not get the PID ${old}\n${out}`).toBe(old);
      expect(found, `round ${i}: the running backend (pid ${fresh}) is not found\n${out}`).toBe(fresh);
    }
    expect(
      lines.filter((l) => / (stop|start) \d failed$/.test(l)),
      out,
    ).toEqual([]);
    expect(lines, out).toContain('@ down ok');
    expect(r.status, out).toBe(0);
  }, 200_000);
});
