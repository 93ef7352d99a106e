// The policy's outbound NAT ranges as the policy client hands them to a daemon (runtime/policy-client.ts
// policySnatRanges): the controller's list passed on, none as [], and a malformed one refused by index.
import { describe, expect, it } from 'vitest';
import { policySnatRanges } from '../runtime/policy-client.js';

describe('policySnatRanges', () => {
  it('passes the ranges on and reads a policy without any as none', () => {
    const r = [{ ip: '203.0.113.200', first: 1024, last: 1087, host: 'host1', nic: 'h1vm1' }];
    expect(policySnatRanges(r)).toEqual(r);
    expect(policySnatRanges(undefined)).toEqual([]);
  });
  it('refuses a malformed list, naming the entry', () => {
    expect(policySnatRanges({})).toMatch(/^snat must be a list/);
    expect(policySnatRanges([{ ip: '203.0.113.200', first: 1024, last: 1087, host: 'host1', nic: 'h1vm1' }, { ip: 1 }])).toMatch(
      /^snat\[1\] must be/,
    );
    expect(policySnatRanges([{ ip: '203.0.113.200', first: '1024', last: 1087, host: 'host1', nic: 'h1vm1' }])).toMatch(/^snat\[0\]/);
  });
});
