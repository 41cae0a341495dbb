import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { archiveKey } from '../../functions/consumers/archive/effect';
import { eventTypes } from '../../shared/topology';
import { perConsumer, subscriberNames } from '../support/topology-expectations';
import { checkGuarantees, type GuaranteeFacts, type OutboxFact, routedConsumers } from './invariants';

/** The consumers of each event type, as the registry declares them. */
const approvedBy = subscriberNames(eventTypes.approved);
const withdrawnBy = subscriberNames(eventTypes.withdrawn);

/** A run where everything went right: one approved task, one approved then withdrawn. */
function healthyRun() {
  const approved = { taskId: randomUUID(), eventId: randomUUID() };
  const withdrawn = { taskId: randomUUID(), approveId: randomUUID(), withdrawId: randomUUID() };
  const facts: GuaranteeFacts = {
    tasks: [
      { taskId: approved.taskId, status: 'approved', version: 2, approved: true },
      { taskId: withdrawn.taskId, status: 'withdrawn', version: 3, approved: true },
    ],
    outbox: [
      {
        eventId: approved.eventId,
        eventType: eventTypes.approved,
        aggregateId: approved.taskId,
        aggregateVersion: 2,
        status: 'delivered',
        attempts: 1,
      },
      {
        eventId: withdrawn.approveId,
        eventType: eventTypes.approved,
        aggregateId: withdrawn.taskId,
        aggregateVersion: 2,
        status: 'delivered',
        attempts: 2,
      },
      {
        eventId: withdrawn.withdrawId,
        eventType: eventTypes.withdrawn,
        aggregateId: withdrawn.taskId,
        aggregateVersion: 3,
        status: 'delivered',
        attempts: 1,
      },
    ],
    inbox: [
      ...approvedBy.flatMap((consumer) => [
        { consumer, eventId: approved.eventId, status: 'PROCESSED' as const },
        { consumer, eventId: withdrawn.approveId, status: 'PROCESSED' as const },
      ]),
      ...withdrawnBy.map((consumer) => ({
        consumer,
        eventId: withdrawn.withdrawId,
        status: 'PROCESSED' as const,
      })),
    ],
    index: [
      { taskId: approved.taskId, version: 2, status: 'approved' },
      { taskId: withdrawn.taskId, version: 3, status: 'withdrawn' },
    ],
    archiveKeys: [
      archiveKey(approved.taskId, 2, approved.eventId),
      archiveKey(withdrawn.taskId, 2, withdrawn.approveId),
    ],
    notifications: [approved.eventId, withdrawn.approveId],
    publishes: new Map([
      [approved.eventId, ['b1']],
      [withdrawn.approveId, ['b2', 'b3']],
      [withdrawn.withdrawId, ['b4']],
    ]),
    deliveries: [],
    busDeadLetters: 0,
  };
  return { facts, approved, withdrawn };
}

describe('the guarantee checker', () => {
  it('routes each event type to the consumers the topology names', () => {
    // The rules' patterns, as the bus matches them, against what each consumer declares.
    expect(approvedBy).toEqual(expect.arrayContaining(['archive', 'index', 'notify']));
    expect(routedConsumers(eventTypes.approved)).toEqual(approvedBy);
    expect(routedConsumers(eventTypes.withdrawn)).toEqual(withdrawnBy);
    expect(routedConsumers(eventTypes.rejected)).toEqual(subscriberNames(eventTypes.rejected));
    expect(routedConsumers('content.unknown')).toEqual([]);
  });

  it('passes a run that kept every promise, and counts its repeats', () => {
    const { facts } = healthyRun();
    const report = checkGuarantees(facts);
    expect(report.violations).toEqual([]);
    expect(report.figures).toMatchObject({
      approvedTasks: 2,
      withdrawnTasks: 1,
      events: { [eventTypes.approved]: 2, [eventTypes.withdrawn]: 1 },
      archiveObjects: 2,
      notifications: 2,
      duplicates: { publish: 1, delivery: 0, notification: 0 },
      maxPublishAttempts: 2,
    });
    // Two approvals for each consumer of content.approved, one withdrawal for each of content.withdrawn.
    expect(report.figures.processed).toEqual(
      perConsumer((c) => (approvedBy.includes(c) ? 2 : 0) + (withdrawnBy.includes(c) ? 1 : 0)),
    );
    expect(report.explained.publish).toMatch(/at least once/);
  });

  // Each broken promise, one at a time: the checker must name it.
  const breaks: [string, (f: ReturnType<typeof healthyRun>) => GuaranteeFacts, RegExp][] = [
    [
      'an approved task without its event',
      ({ facts, approved }) => ({
        ...facts,
        outbox: facts.outbox.filter((r) => r.eventId !== approved.eventId),
      }),
      /approved but has 0 content.approved outbox rows/,
    ],
    [
      'a second approved event for one task',
      ({ facts, approved }) => ({
        ...facts,
        outbox: [
          ...facts.outbox,
          { ...(facts.outbox[0] as OutboxFact), eventId: randomUUID(), aggregateId: approved.taskId },
        ],
      }),
      /approved but has 2 content.approved outbox rows/,
    ],
    [
      'a pending outbox row',
      ({ facts }) => ({
        ...facts,
        outbox: facts.outbox.map((r, i) => (i === 0 ? { ...r, status: 'pending' } : r)),
      }),
      /is pending after 1 attempts/,
    ],
    [
      'a dead outbox row',
      ({ facts }) => ({
        ...facts,
        outbox: facts.outbox.map((r, i) => (i === 0 ? { ...r, status: 'dead' } : r)),
      }),
      /is dead/,
    ],
    [
      'a consumer that never processed an event',
      ({ facts, approved }) => ({
        ...facts,
        inbox: facts.inbox.filter((r) => !(r.consumer === 'archive' && r.eventId === approved.eventId)),
      }),
      /archive has no inbox record of content.approved/,
    ],
    [
      'a record left FAILED',
      ({ facts, withdrawn }) => ({
        ...facts,
        inbox: facts.inbox.map((r) => (r.eventId === withdrawn.withdrawId ? { ...r, status: 'FAILED' } : r)),
      }),
      /index left content.withdrawn .* FAILED/,
    ],
    [
      'a poison record',
      ({ facts }) => ({
        ...facts,
        inbox: [
          ...facts.inbox,
          { consumer: 'notify', eventId: `${randomUUID()}#poison#abc`, status: 'DEAD' },
        ],
      }),
      /notify has an inbox record .*#poison#abc \(DEAD\) for no routed event/,
    ],
    [
      'an index behind the task',
      ({ facts, withdrawn }) => ({
        ...facts,
        index: facts.index.map((e) =>
          e.taskId === withdrawn.taskId ? { ...e, version: 2, status: 'approved' } : e,
        ),
      }),
      /the index holds task .* as approved v2, the task is withdrawn v3/,
    ],
    [
      'a task missing from the index',
      ({ facts, approved }) => ({ ...facts, index: facts.index.filter((e) => e.taskId !== approved.taskId) }),
      /is not in the index/,
    ],
    [
      'a missing archive object',
      ({ facts }) => ({ ...facts, archiveKeys: facts.archiveKeys.slice(1) }),
      /archive holds 0 objects at/,
    ],
    [
      'an archive object twice',
      ({ facts }) => ({ ...facts, archiveKeys: [...facts.archiveKeys, facts.archiveKeys[0] as string] }),
      /archive holds 2 objects at/,
    ],
    [
      'a stray archive object',
      ({ facts, approved }) => ({
        ...facts,
        archiveKeys: [...facts.archiveKeys, archiveKey(approved.taskId, 3, randomUUID())],
      }),
      /belongs to no approved event/,
    ],
    [
      'an approval nobody was told of',
      ({ facts, approved }) => ({
        ...facts,
        notifications: facts.notifications.filter((id) => id !== approved.eventId),
      }),
      /was never notified/,
    ],
    [
      'a repeated notification nothing explains',
      ({ facts, approved }) => ({ ...facts, notifications: [...facts.notifications, approved.eventId] }),
      /1 repeated notifications, but only 0 notify attempts acted without completing/,
    ],
    ['a dead letter on the bus', ({ facts }) => ({ ...facts, busDeadLetters: 1 }), /1 dead letters/],
  ];
  it.each(breaks)('reports %s', (_name, breakIt, expected) => {
    const report = checkGuarantees(breakIt(healthyRun()));
    expect(report.violations.join('\n')).toMatch(expected);
  });

  it('lets a repeated notification pass when a notify attempt acted and did not complete', () => {
    const run = healthyRun();
    const facts = { ...run.facts, notifications: [...run.facts.notifications, run.approved.eventId] };
    const report = checkGuarantees(facts, { notifyAttemptsThatActedWithoutCompleting: 1 });
    expect(report.violations).toEqual([]);
    expect(report.figures.duplicates.notification).toBe(1);
    expect(report.explained.notification).toMatch(
      /1 notify attempts sent and then did not record completion/,
    );
  });
});
