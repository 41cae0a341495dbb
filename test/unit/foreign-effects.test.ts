import { describe, expect, it } from 'vitest';
import { type EffectArrival, findForeignEffects } from '../../shared/audit/foreign-effects';
import type { InboxKey, InboxRecord } from '../../shared/inbox/inbox-store';

const now = Date.UTC(2026, 11, 5, 12);
const hour = 3_600_000;
const committedId = '0b6f2c1e-1d2a-4c4e-9a1b-2f3e4d5c6b7a';
const forgedId = '9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a';
const oldId = '11111111-2222-4333-8444-555555555555';
const taskId = '6f1f7c5e-8a8e-4a43-9a55-7d3b8f7e2a01';

const record = (k: InboxKey, receivedAt: number): InboxRecord =>
  ({
    ...k,
    status: 'PROCESSED',
    eventType: 'content.approved',
    subject: taskId,
    receivedAt,
  }) as InboxRecord;

function deps(records: Record<string, InboxRecord>) {
  const asked: string[][] = [];
  const gets: string[] = [];
  return {
    asked,
    gets,
    deps: {
      committed: async (ids: readonly string[]) => {
        asked.push([...ids]);
        return new Set(ids.filter((id) => id === committedId));
      },
      inbox: {
        get: async (k: InboxKey) => {
          gets.push(`${k.consumer}#${k.eventId}`);
          return records[`${k.consumer}#${k.eventId}`];
        },
      },
      now,
      retentionSeconds: 7 * 24 * 3_600,
    },
  };
}

describe('findForeignEffects', () => {
  it('reports only effects of events with no outbox row, reading the inbox for those alone', async () => {
    const arrivals: EffectArrival[] = [
      { consumer: 'index', eventId: committedId },
      { consumer: 'notify', eventId: forgedId },
      { consumer: 'notify', eventId: forgedId },
      { consumer: 'archive', eventId: 'not-a-uuid' },
    ];
    const {
      deps: d,
      asked,
      gets,
    } = deps({
      [`notify#${forgedId}`]: record({ consumer: 'notify', eventId: forgedId }, now - hour),
      'archive#not-a-uuid': record({ consumer: 'archive', eventId: 'not-a-uuid' }, now - hour),
    });

    const found = await findForeignEffects(arrivals, d);

    expect(asked).toEqual([[committedId, forgedId]]);
    expect(gets.sort()).toEqual(['archive#not-a-uuid', `notify#${forgedId}`]);
    expect(found.map((f) => [f.consumer, f.eventId, f.subject, f.status])).toEqual([
      ['notify', forgedId, taskId, 'PROCESSED'],
      ['archive', 'not-a-uuid', taskId, 'PROCESSED'],
    ]);
    expect(found[0]?.reason).toBe(
      `notify acted on event ${forgedId} (content.approved for ${taskId}), which has no outbox row: the pipeline never committed it, so it was put on the bus by something other than the relay (a forged PutEvents, or another pipeline's event)`,
    );
  });

  it('judges nothing it cannot tell: a record first received near or past the retention (its row may be purged), or one gone', async () => {
    const { deps: d } = deps({
      [`index#${oldId}`]: record({ consumer: 'index', eventId: oldId }, now - 7 * 24 * hour + 30 * 60_000),
    });
    const found = await findForeignEffects(
      [
        { consumer: 'index', eventId: oldId },
        { consumer: 'notify', eventId: forgedId },
      ],
      d,
    );
    expect(found).toEqual([]);
  });
});
