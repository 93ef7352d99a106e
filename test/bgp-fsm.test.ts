// The BGP session FSM (shared/bgp-fsm.ts) as a table: (state, event) -> next state, actions, reason.
import { describe, expect, it } from 'vitest';
import {
  BGP_OPEN_HOLD_TIME_MS,
  BGP_STATES,
  bgpKeepaliveMs,
  newBgpFsm,
  stepBgpFsm,
  type BgpAction,
  type BgpEvent,
  type BgpFsm,
  type BgpFsmConfig,
  type BgpState,
} from '../shared/bgp-fsm.js';
import {
  BGP_ERR_BAD_MESSAGE_LENGTH,
  BGP_ERR_BAD_PEER_AS,
  BGP_ERR_INVALID_NETWORK_FIELD,
  parseBgpShutdownData,
} from '../shared/bgp-message.js';

const CFG: BgpFsmConfig = {
  holdTimeS: 3,
  keepaliveS: 1,
  connectRetryMs: 2000,
  backoffMinMs: 500,
  backoffMaxMs: 8000,
  shutdownMessage: 'test stop',
};

function at(state: BgpState, over: Partial<BgpFsm> = {}): BgpFsm {
  const base = newBgpFsm(CFG);
  const est = state === 'OpenConfirm' || state === 'Established';
  return { ...base, state, stopped: false, holdTimeS: est ? 3 : 0, keepaliveMs: est ? 1000 : 0, ...over };
}

/** Compact action list: 'connect', 'drop', 'sendOpen', 'notify 6/2', 'start hold 3000', 'stop hold' ... */
function fmt(actions: readonly BgpAction[]): string[] {
  return actions.map((a) => {
    switch (a.type) {
      case 'sendNotification':
        return `notify ${a.code}/${a.subcode}`;
      case 'startTimer':
        return `start ${a.timer} ${a.ms}`;
      case 'stopTimer':
        return `stop ${a.timer}`;
      default:
        return a.type;
    }
  });
}
const STOP_ALL = ['stop connectRetry', 'stop hold', 'stop keepalive', 'stop idleHold'];
const E = (type: BgpEvent['type'], extra: Record<string, unknown> = {}) => ({ type, ...extra }) as BgpEvent;
const hdrErr = E('BgpHeaderErr', { error: BGP_ERR_BAD_MESSAGE_LENGTH, data: Uint8Array.of(0, 18) });
const openErr = E('BgpOpenMsgErr', { error: BGP_ERR_BAD_PEER_AS, data: new Uint8Array(0) });
const updErr = E('UpdateMsgErr', { error: BGP_ERR_INVALID_NETWORK_FIELD, data: new Uint8Array(0) });

// [from, event, to, actions, reason]
const TABLE: [BgpState, BgpEvent, BgpState, string[], string][] = [
  // Idle
  ['Idle', E('ManualStart'), 'Connect', ['stop idleHold', 'start connectRetry 2000', 'connect'], 'manual_start'],
  ['Idle', E('IdleHoldTimerExpires'), 'Connect', ['stop idleHold', 'start connectRetry 2000', 'connect'], 'idle_hold_timer_expired'],
  ['Idle', E('AutomaticStart'), 'Connect', ['stop idleHold', 'start connectRetry 2000', 'connect'], 'automatic_start'],
  ['Idle', E('KeepAliveMsg'), 'Idle', [], 'keepalive_received_ignored_in_idle'],
  ['Idle', E('TcpConnectionFails'), 'Idle', [], 'tcp_connection_failed_ignored_in_idle'],
  ['Idle', E('ManualStop'), 'Idle', STOP_ALL, 'manual_stop'],
  // Connect
  [
    'Connect',
    E('TcpConnectionAcked'),
    'OpenSent',
    ['stop connectRetry', 'sendOpen', `start hold ${BGP_OPEN_HOLD_TIME_MS}`],
    'tcp_connected',
  ],
  ['Connect', E('TcpConnectionFails'), 'Active', ['drop', 'start connectRetry 500'], 'tcp_connection_failed'],
  ['Connect', E('ConnectRetryTimerExpires'), 'Connect', ['drop', 'start connectRetry 2000', 'connect'], 'connect_retry_timer_expired'],
  ['Connect', E('ManualStop'), 'Idle', ['drop', ...STOP_ALL], 'manual_stop'],
  ['Connect', E('ManualStart'), 'Connect', [], 'manual_start_ignored'],
  [
    'Connect',
    E('BgpOpen', { peerHoldTimeS: 3 }),
    'Idle',
    ['drop', ...STOP_ALL, 'start idleHold 500'],
    'open_received_unexpected_in_connect',
  ],
  ['Connect', E('HoldTimerExpires'), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'hold_timer_expired_unexpected_in_connect'],
  // Active: waiting out the back-off before the next attempt
  ['Active', E('ConnectRetryTimerExpires'), 'Connect', ['start connectRetry 2000', 'connect'], 'connect_retry_timer_expired'],
  [
    'Active',
    E('TcpConnectionAcked'),
    'OpenSent',
    ['stop connectRetry', 'sendOpen', `start hold ${BGP_OPEN_HOLD_TIME_MS}`],
    'tcp_connected',
  ],
  ['Active', E('TcpConnectionFails'), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'tcp_connection_failed'],
  ['Active', E('ManualStop'), 'Idle', ['drop', ...STOP_ALL], 'manual_stop'],
  ['Active', E('KeepAliveMsg'), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'keepalive_received_unexpected_in_active'],
  // OpenSent
  [
    'OpenSent',
    E('BgpOpen', { peerHoldTimeS: 90 }),
    'OpenConfirm',
    ['stop connectRetry', 'sendKeepalive', 'start hold 3000', 'start keepalive 1000'],
    'open_received',
  ],
  ['OpenSent', E('BgpOpen', { peerHoldTimeS: 0 }), 'OpenConfirm', ['stop connectRetry', 'sendKeepalive', 'stop hold'], 'open_received'],
  ['OpenSent', E('TcpConnectionFails'), 'Active', ['drop', ...STOP_ALL, 'start connectRetry 500'], 'tcp_connection_failed'],
  ['OpenSent', E('HoldTimerExpires'), 'Idle', ['notify 4/0', 'drop', ...STOP_ALL, 'start idleHold 500'], 'hold_timer_expired'],
  ['OpenSent', hdrErr, 'Idle', ['notify 1/2', 'drop', ...STOP_ALL, 'start idleHold 500'], 'message_header_error'],
  ['OpenSent', openErr, 'Idle', ['notify 2/2', 'drop', ...STOP_ALL, 'start idleHold 500'], 'open_message_error'],
  ['OpenSent', E('NotifMsg', { code: 6, subcode: 5 }), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'notification_received'],
  [
    'OpenSent',
    E('KeepAliveMsg'),
    'Idle',
    ['notify 5/1', 'drop', ...STOP_ALL, 'start idleHold 500'],
    'keepalive_received_unexpected_in_opensent',
  ],
  ['OpenSent', E('UpdateMsg'), 'Idle', ['notify 5/1', 'drop', ...STOP_ALL, 'start idleHold 500'], 'update_received_unexpected_in_opensent'],
  ['OpenSent', E('ManualStop'), 'Idle', ['notify 6/2', 'drop', ...STOP_ALL], 'manual_stop'],
  // OpenConfirm
  ['OpenConfirm', E('KeepAliveMsg'), 'Established', ['start hold 3000', 'established'], 'keepalive_received'],
  ['OpenConfirm', E('KeepaliveTimerExpires'), 'OpenConfirm', ['sendKeepalive', 'start keepalive 1000'], 'keepalive_timer_expired'],
  ['OpenConfirm', E('HoldTimerExpires'), 'Idle', ['notify 4/0', 'drop', ...STOP_ALL, 'start idleHold 500'], 'hold_timer_expired'],
  ['OpenConfirm', E('TcpConnectionFails'), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'tcp_connection_failed'],
  ['OpenConfirm', E('NotifMsg', { code: 2, subcode: 2 }), 'Idle', ['drop', ...STOP_ALL, 'start idleHold 500'], 'notification_received'],
  [
    'OpenConfirm',
    E('BgpOpen', { peerHoldTimeS: 3 }),
    'Idle',
    ['notify 5/2', 'drop', ...STOP_ALL, 'start idleHold 500'],
    'open_received_unexpected_in_openconfirm',
  ],
  [
    'OpenConfirm',
    E('UpdateMsg'),
    'Idle',
    ['notify 5/2', 'drop', ...STOP_ALL, 'start idleHold 500'],
    'update_received_unexpected_in_openconfirm',
  ],
  ['OpenConfirm', hdrErr, 'Idle', ['notify 1/2', 'drop', ...STOP_ALL, 'start idleHold 500'], 'message_header_error'],
  ['OpenConfirm', E('ManualStop'), 'Idle', ['notify 6/2', 'drop', ...STOP_ALL], 'manual_stop'],
  // Established
  ['Established', E('KeepAliveMsg'), 'Established', ['start hold 3000'], 'keepalive_received'],
  ['Established', E('UpdateMsg'), 'Established', ['start hold 3000'], 'update_received'],
  ['Established', E('KeepaliveTimerExpires'), 'Established', ['sendKeepalive', 'start keepalive 1000'], 'keepalive_timer_expired'],
  ['Established', E('HoldTimerExpires'), 'Idle', ['notify 4/0', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'], 'hold_timer_expired'],
  ['Established', updErr, 'Idle', ['notify 3/10', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'], 'update_message_error'],
  ['Established', hdrErr, 'Idle', ['notify 1/2', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'], 'message_header_error'],
  ['Established', E('TcpConnectionFails'), 'Idle', ['drop', ...STOP_ALL, 'down', 'start idleHold 500'], 'tcp_connection_failed'],
  [
    'Established',
    E('NotifMsg', { code: 6, subcode: 2 }),
    'Idle',
    ['drop', ...STOP_ALL, 'down', 'start idleHold 500'],
    'notification_received',
  ],
  [
    'Established',
    E('BgpOpen', { peerHoldTimeS: 3 }),
    'Idle',
    ['notify 5/3', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'],
    'open_received_unexpected_in_established',
  ],
  [
    'Established',
    E('ConnectRetryTimerExpires'),
    'Idle',
    ['notify 5/3', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'],
    'connect_retry_timer_expired_unexpected_in_established',
  ],
  ['Established', E('ManualStart'), 'Established', [], 'manual_start_ignored'],
  ['Established', E('ManualStop'), 'Idle', ['notify 6/2', 'drop', ...STOP_ALL, 'down'], 'manual_stop'],
  // BFD down (RFC 5882): Cease / BFD Down (RFC 9384) on a connection that is up; nothing before
  ['Established', E('BfdDown'), 'Idle', ['notify 6/10', 'drop', ...STOP_ALL, 'down', 'start idleHold 500'], 'bfd_down'],
  ['OpenConfirm', E('BfdDown'), 'Idle', ['notify 6/10', 'drop', ...STOP_ALL, 'start idleHold 500'], 'bfd_down'],
  ['Connect', E('BfdDown'), 'Connect', [], 'bfd_down_ignored'],
  ['Idle', E('BfdDown'), 'Idle', [], 'bfd_down_ignored'],
];

describe('BGP FSM (RFC 4271 8) as a table', () => {
  it.each(TABLE)('%s + %o -> %s', (from, event, to, actions, reason) => {
    const step = stepBgpFsm(at(from), event);
    expect(step.next.state).toBe(to);
    expect(fmt(step.actions)).toEqual(actions);
    expect(step.reason).toBe(reason);
  });

  it('covers every state', () => {
    expect(new Set(TABLE.map((r) => r[0]))).toEqual(new Set(BGP_STATES));
  });

  it('never throws and always lands in a state, for every (state, event) pair', () => {
    const events: BgpEvent[] = [
      E('ManualStart'),
      E('ManualStop'),
      E('AutomaticStart'),
      E('ConnectRetryTimerExpires'),
      E('HoldTimerExpires'),
      E('KeepaliveTimerExpires'),
      E('IdleHoldTimerExpires'),
      E('TcpConnectionAcked'),
      E('TcpConnectionFails'),
      E('BgpOpen', { peerHoldTimeS: 3 }),
      hdrErr,
      openErr,
      E('NotifMsg', { code: 6, subcode: 2 }),
      E('KeepAliveMsg'),
      E('UpdateMsg'),
      updErr,
      E('BfdDown'),
    ];
    for (const s of BGP_STATES) {
      for (const e of events) {
        const r = stepBgpFsm(at(s), e);
        expect(BGP_STATES).toContain(r.next.state);
        expect(r.reason).toMatch(/^[a-z_]+$/);
        // the peer hears a NOTIFICATION only on a connection that is up
        if (fmt(r.actions).some((a) => a.startsWith('notify'))) expect(['OpenSent', 'OpenConfirm', 'Established']).toContain(s);
        // leaving Established always says 'down'; 'down' only then
        expect(r.actions.some((a) => a.type === 'down')).toBe(s === 'Established' && r.next.state !== 'Established');
      }
    }
  });

  it('ManualStop sends Cease / Administrative Shutdown with the shutdown communication, and stays stopped', () => {
    const r = stepBgpFsm(at('Established'), E('ManualStop'));
    const n = r.actions.find((a) => a.type === 'sendNotification');
    expect(n?.type === 'sendNotification' && parseBgpShutdownData(n.data)).toBe('test stop');
    expect(r.next.stopped).toBe(true);
    expect(stepBgpFsm(r.next, E('IdleHoldTimerExpires')).next.state).toBe('Idle');
    expect(stepBgpFsm(r.next, E('AutomaticStart')).next.state).toBe('Idle');
    expect(stepBgpFsm(r.next, E('ManualStart')).next.state).toBe('Connect');
  });

  it('reconnect back-off doubles from 0.5 s to at most 8 s and resets when Established', () => {
    let f = stepBgpFsm(newBgpFsm(CFG), E('ManualStart')).next;
    const waits: number[] = [];
    for (let i = 0; i < 7; i++) {
      const failed = stepBgpFsm(f, E('TcpConnectionFails'));
      expect(failed.next.state).toBe('Active');
      waits.push((failed.actions.find((a) => a.type === 'startTimer') as { ms: number }).ms);
      f = stepBgpFsm(failed.next, E('ConnectRetryTimerExpires')).next;
      expect(f.state).toBe('Connect');
    }
    expect(waits).toEqual([500, 1000, 2000, 4000, 8000, 8000, 8000]);
    expect(f.connectRetryCounter).toBe(7);
    for (const e of [E('TcpConnectionAcked'), E('BgpOpen', { peerHoldTimeS: 3 }), E('KeepAliveMsg')]) f = stepBgpFsm(f, e).next;
    expect(f.state).toBe('Established');
    const down = stepBgpFsm(f, E('HoldTimerExpires'));
    expect(fmt(down.actions)).toContain('start idleHold 500');
    expect(down.next.backoffMs).toBe(1000);
  });

  it('keepalive interval: the configured one, at most a third of the negotiated hold time; none with hold time 0', () => {
    expect(bgpKeepaliveMs(CFG, 3)).toBe(1000);
    expect(bgpKeepaliveMs({ ...CFG, keepaliveS: 30 }, 90)).toBe(30000);
    expect(bgpKeepaliveMs({ ...CFG, keepaliveS: 30 }, 9)).toBe(3000);
    expect(bgpKeepaliveMs(CFG, 0)).toBe(0);
    const f = stepBgpFsm(at('OpenSent'), E('BgpOpen', { peerHoldTimeS: 240 }));
    expect([f.next.holdTimeS, f.next.keepaliveMs]).toEqual([3, 1000]); // the smaller hold time wins (RFC 4271 4.2)
  });
});
