import { randomUUID } from 'node:crypto';
import { beforeEach, expect, it } from 'vitest';
import { DynamoContentIndex, type IndexEntry } from '../../functions/consumers/index/effect';
import { describeEachEngine } from '../support/dynamo';

describeEachEngine('content index (DynamoDB adapter)', (fixture) => {
  let index: DynamoContentIndex;
  let taskId: string;

  beforeEach(() => {
    index = new DynamoContentIndex(fixture().client, fixture().table('contentIndex'));
    taskId = randomUUID();
  });

  const approved = (version: number, title = `title v${version}`): IndexEntry => ({
    taskId,
    version,
    status: 'approved',
    title,
    assignee: 'ana',
    reviewer: 'rita',
    approvedAt: '2026-11-30T00:00:00.000Z',
    eventId: randomUUID(),
  });
  const withdrawn = (version: number): IndexEntry => ({
    taskId,
    version,
    status: 'withdrawn',
    withdrawnBy: 'wes',
    reason: null,
    withdrawnAt: '2026-11-30T01:00:00.000Z',
    eventId: randomUUID(),
  });

  it('indexes an approval and reads it back', async () => {
    const entry = approved(2);
    expect(await index.apply(entry)).toEqual({ outcome: 'applied', replaced: null });
    expect(await index.get(taskId)).toEqual(entry);
  });

  it('is idempotent: the same version again is a stale no-op', async () => {
    const entry = approved(2);
    await index.apply(entry);
    expect(await index.apply({ ...entry, title: 'replayed' } as IndexEntry)).toEqual({
      outcome: 'stale',
      replaced: null,
    });
    expect(await index.get(taskId)).toMatchObject({ title: 'title v2' });
  });

  it('a later version replaces an earlier one; an earlier one never replaces a later one', async () => {
    await index.apply(approved(2));
    expect(await index.apply(approved(4))).toEqual({ outcome: 'applied', replaced: 'approved' });
    expect((await index.apply(approved(3))).outcome).toBe('stale');
    expect(await index.get(taskId)).toMatchObject({ version: 4, title: 'title v4' });
  });

  it('withdraw leaves a tombstone without content that a late, older approve cannot resurrect', async () => {
    await index.apply(approved(2));
    // The write says what it replaced: the approved entry (a counter of approved entries follows it).
    expect(await index.apply(withdrawn(3))).toEqual({ outcome: 'applied', replaced: 'approved' });
    expect((await index.apply(approved(2))).outcome).toBe('stale');
    const entry = await index.get(taskId);
    expect(entry).toMatchObject({ status: 'withdrawn', version: 3 });
    expect(entry).not.toHaveProperty('title');
  });

  it('withdraw arriving before approve: the index ends withdrawn', async () => {
    expect(await index.apply(withdrawn(3))).toEqual({ outcome: 'applied', replaced: null });
    expect((await index.apply(approved(2))).outcome).toBe('stale');
    expect(await index.get(taskId)).toMatchObject({ status: 'withdrawn', version: 3 });
  });

  it('concurrent writes of different versions converge on the highest', async () => {
    const outcomes = await Promise.all([5, 2, 4, 3, 1].map((v) => index.apply(approved(v))));
    expect(outcomes.filter((o) => o.outcome === 'applied').length).toBeGreaterThanOrEqual(1);
    expect(await index.get(taskId)).toMatchObject({ version: 5 });
  });

  it('an unknown task reads as undefined', async () => {
    expect(await index.get(randomUUID())).toBeUndefined();
  });
});
