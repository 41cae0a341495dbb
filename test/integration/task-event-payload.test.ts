import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSqlClient } from '../../shared/db/pg-client';
import type { SqlClient } from '../../shared/db/sql-client';
import { contentApprovedData, contentRejectedData, contentWithdrawnData } from '../../shared/events/schemas';
import { approveTask, createTask, rejectTask, withdrawTask } from '../../shared/tasks/commands';
import { taskTitle } from '../../shared/tasks/tasks-api';
import { createTestDatabase } from '../support/database';
import { nastyString } from '../support/hostile-input';
import { sqlAdapters } from '../support/sql-adapters';

// The approve and withdraw statements build their event's payload in SQL, from the row their
// UPDATE returned, so that the change and its event are one statement. Nothing parses that
// payload before it commits: this property is what stands in for the parse. Over generated
// tasks and people, the stored payload parses with the event contract's schema and says
// exactly what the committed task says.

const numRuns = Number(process.env.PROPERTY_RUNS ?? 60);

/** Text the API accepts for a field of at most `max` UTF-16 units (trimmed, not empty). */
const accepted = (max: number) =>
  fc
    .oneof(nastyString, fc.string({ unit: 'grapheme', minLength: 1, maxLength: max }))
    .map((s) => s.trim().slice(0, max))
    .filter((s) => taskTitle.safeParse(s).success && s.length <= max);
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
/** Instants with every millisecond, across years, as the clock of a command. */
const instant = fc.date({
  min: new Date('2000-01-01T00:00:00Z'),
  max: new Date('2099-12-31T23:59:59.999Z'),
  noInvalidDate: true,
});

describe.each(sqlAdapters)(
  'the events a task change writes, built in SQL, on the $name adapter',
  (adapter) => {
    let db: SqlClient;
    let truth: PgSqlClient;
    let close: () => Promise<void>;

    beforeAll(async () => {
      const database = await createTestDatabase();
      truth = new PgSqlClient({ connectionString: database.url });
      const opened = await adapter.open(database.urlAs('tasksApi'), 'tasksApi');
      db = opened.db;
      close = async () => {
        await opened.close();
        await truth.close();
        await database.drop();
      };
    });
    afterAll(() => close());

    const payloadOf = async (eventId: string) =>
      (
        await truth.query<{ payload: unknown }>('SELECT payload FROM outbox WHERE event_id = :id::uuid', {
          id: eventId,
        })
      ).rows[0]?.payload;

    it('content.approved parses with its schema and states the approved task', async () => {
      await fc.assert(
        fc.asyncProperty(
          accepted(500),
          maybe(accepted(200)),
          accepted(200),
          instant,
          async (title, assignee, reviewer, at) => {
            const created = await createTask({ title, assignee }, { db });

            const { task, eventId } = await approveTask(
              { taskId: created.taskId, approvedBy: reviewer },
              { db, clock: () => at },
            );

            const payload = contentApprovedData.parse(await payloadOf(eventId));
            expect(payload).toEqual({
              taskId: task.taskId,
              version: task.version,
              title: task.title,
              assignee: task.assignee,
              reviewer,
              approvedAt: at.toISOString(),
            });
            expect(task).toMatchObject({ title, assignee, reviewer, version: 2 });
          },
        ),
        { numRuns },
      );
    });

    it('content.withdrawn parses with its schema and states the withdrawn task', async () => {
      await fc.assert(
        fc.asyncProperty(
          accepted(500),
          accepted(200),
          maybe(accepted(2000)),
          fc.boolean(),
          instant,
          async (title, withdrawnBy, reason, approvedFirst, at) => {
            const created = await createTask({ title }, { db });
            if (approvedFirst) await approveTask({ taskId: created.taskId, approvedBy: 'rita' }, { db });

            const { task, eventId } = await withdrawTask(
              { taskId: created.taskId, withdrawnBy, reason },
              { db, clock: () => at },
            );

            const payload = contentWithdrawnData.parse(await payloadOf(eventId));
            expect(payload).toEqual({
              taskId: task.taskId,
              version: approvedFirst ? 3 : 2,
              title,
              withdrawnBy,
              reason,
              withdrawnAt: at.toISOString(),
            });
          },
        ),
        { numRuns },
      );
    });

    it('content.rejected parses with its schema and states the rejected task and why', async () => {
      await fc.assert(
        fc.asyncProperty(
          accepted(500),
          maybe(accepted(200)),
          accepted(200),
          accepted(1000),
          instant,
          async (title, assignee, rejectedBy, reason, at) => {
            const created = await createTask({ title, assignee }, { db });

            const { task, eventId } = await rejectTask(
              { taskId: created.taskId, rejectedBy, reason },
              { db, clock: () => at },
            );

            const payload = contentRejectedData.parse(await payloadOf(eventId));
            expect(payload).toEqual({
              taskId: task.taskId,
              version: 2,
              title,
              assignee,
              reviewer: rejectedBy,
              reason,
              rejectedAt: at.toISOString(),
            });
            expect(task).toMatchObject({ status: 'rejected', reviewer: rejectedBy, rejectReason: reason });
          },
        ),
        { numRuns },
      );
    });
  },
);
