// The ring tests' test bench: one network namespace holding a veth pair, `dut` (the port under test,
// 02:00:00:00:00:11) and `tester` (the side that sends and captures, 02:00:00:00:00:01), both up, with
// loopback up and IPv6 off (no router solicitations or DAD frames in what the tests count).
import { execFileSync } from 'node:child_process';

/** Creates namespace `ns` with the pair; `mtu` on both ends when given. Throws when `ip` fails (the caller deletes `ns`). */
export function makeVethNs(ns: string, mtu?: number): void {
  const ip = (...a: string[]) => execFileSync('ip', a, { stdio: 'pipe' });
  const m = mtu === undefined ? [] : ['mtu', String(mtu)];
  ip('netns', 'add', ns);
  execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1']);
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  ip(
    '-n',
    ns,
    'link',
    'add',
    'dut',
    'address',
    '02:00:00:00:00:11',
    ...m,
    'type',
    'veth',
    'peer',
    'name',
    'tester',
    'address',
    '02:00:00:00:00:01',
    ...m,
  );
  ip('-n', ns, 'link', 'set', 'dut', 'up');
  ip('-n', ns, 'link', 'set', 'tester', 'up');
}
