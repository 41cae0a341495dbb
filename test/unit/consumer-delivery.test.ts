import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { readDelivery } from '../../shared/consumers/delivery';
import { payloadHash } from '../../shared/inbox/payload-hash';
import type { ConsumerName } from '../../shared/topology';
import { approvedRow, busEvent, withdrawnRow } from '../support/dynamo-consumer-fixtures';

describe('reading a delivery', () => {
  it('accepts a pipeline event routed to the consumer, identified by the CloudEvent id', () => {
    const row = approvedRow();
    const event = busEvent(row);
    const delivery = readDelivery(event, 'notify', topology);
    expect(delivery).toMatchObject({
      valid: true,
      eventId: row.eventId,
      subject: row.aggregateId,
      busEventId: event.id,
      payloadHash: payloadHash(event.detail),
      cloudEvent: { type: 'content.approved', data: { version: 2 } },
    });
  });

  it('accepts a withdrawal for index, which its rule targets, and an EventBridge replay', () => {
    const event = { ...busEvent(withdrawnRow()), 'replay-name': 'replay-1' };
    expect(readDelivery(event, 'index', topology).valid).toBe(true);
  });

  const cases: [name: string, make: () => unknown, consumer: ConsumerName, reason: string][] = [
    [
      'a withdrawal sent to archive',
      () => busEvent(withdrawnRow()),
      'archive',
      'no rule routes content.withdrawn',
    ],
    [
      'no detail',
      () => ({ ...busEvent(approvedRow()), detail: undefined }),
      'index',
      'not an EventBridge event',
    ],
    ['a string', () => 'hello', 'index', 'not an EventBridge event'],
    [
      'a bad version',
      () => {
        const e = busEvent(approvedRow());
        (e.detail.data as Record<string, unknown>).version = 0;
        return e;
      },
      'index',
      'data.version',
    ],
    [
      'a wrong specversion',
      () => {
        const e = busEvent(approvedRow());
        e.detail.specversion = '0.3';
        return e;
      },
      'index',
      'specversion',
    ],
    [
      'a subject of another task',
      () => {
        const e = busEvent(approvedRow());
        e.detail.subject = randomUUID();
        return e;
      },
      'index',
      'disagrees with data.taskId',
    ],
    [
      // fast-check's counterexample: String() of this throws (its toString is no function).
      'a data.eventId no string can name',
      () => {
        const e = busEvent(approvedRow());
        (e.detail.data as Record<string, unknown>).eventId = { toString: 0 };
        return e;
      },
      'index',
      'disagrees with data.eventId {"toString":0}',
    ],
  ];

  it.each(cases)('rejects %s as poison with the reason', (_name, make, consumer, reason) => {
    const delivery = readDelivery(make(), consumer, topology);
    expect(delivery.valid).toBe(false);
    expect(!delivery.valid && delivery.reason).toContain(reason);
  });

  it('names poison by the CloudEvent id, else the EventBridge id, and hashes the CloudEvent', () => {
    const event = busEvent(approvedRow());
    event.detail.subject = 'not-a-uuid';
    const withId = readDelivery(event, 'index', topology);
    expect(withId).toMatchObject({
      valid: false,
      eventId: event.detail.id,
      payloadHash: payloadHash(event.detail),
    });
    const noId = readDelivery({ ...event, detail: { ...event.detail, id: 42 } }, 'index', topology);
    expect(noId).toMatchObject({ valid: false, eventId: event.id, cloudEventId: null });
  });
});
