import { describe, expect, it } from 'vitest';
import { canonicalJson, payloadHash } from '../../shared/inbox/payload-hash';
import { poisonKey } from '../../shared/inbox/process-once';

describe('payload hash', () => {
  it('does not depend on key order at any depth', () => {
    const a = { id: 'e', data: { taskId: 't', version: 2, list: [{ x: 1, y: 2 }] } };
    const b = { data: { list: [{ y: 2, x: 1 }], version: 2, taskId: 't' }, id: 'e' };
    expect(canonicalJson(b)).toBe('{"data":{"list":[{"x":1,"y":2}],"taskId":"t","version":2},"id":"e"}');
    expect(payloadHash(a)).toBe(payloadHash(b));
  });

  it('changes with any value, and tells a missing key from a null one', () => {
    const base = { data: { title: 'A', assignee: null } };
    expect(payloadHash({ data: { title: 'B', assignee: null } })).not.toBe(payloadHash(base));
    expect(payloadHash({ data: { title: 'A' } })).not.toBe(payloadHash(base));
    expect(payloadHash([1, 2])).not.toBe(payloadHash([2, 1]));
  });

  it('poison keys are stable per payload and never equal an event id', () => {
    const hash = payloadHash({ a: 1 });
    expect(poisonKey('e-1', hash)).toBe(poisonKey('e-1', payloadHash({ a: 1 })));
    expect(poisonKey('e-1', hash)).not.toBe(poisonKey('e-1', payloadHash({ a: 2 })));
    expect(poisonKey('e-1', hash)).toMatch(/^e-1#poison#[0-9a-f]{16}$/);
  });
});
