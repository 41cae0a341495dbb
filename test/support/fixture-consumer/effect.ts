import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { defineEffect } from '../../../shared/consumers/define-consumer';
import { translate } from './consumer';

/** A title that makes the effect fail permanently (a test asks for a DEAD record with it). */
export const untranslatableTitle = 'untranslatable';

/**
 * The fixture's effect, over the ports of its declared resources: reads the task's title from
 * the database, stores a rendition, records it in its table (`state: done`) and announces it.
 * Idempotent as an effect must be: the object is write-once, the item keyed by task, the
 * announcement keyed by event.
 */
export const effect = defineEffect(
  translate,
  ({ translations, translated, renditions, tasks }) =>
    async (event) => {
      const { taskId, version } = event.data;
      const { rows } = await tasks.query<{ title: string }>(
        'SELECT title FROM tasks WHERE task_id = :taskId',
        {
          taskId,
        },
      );
      const title = rows[0]?.title ?? event.data.title;
      if (title === untranslatableTitle) throw new Error(`no translation of "${title}"`);
      const stored = await renditions.put(`${taskId}/v${version}.txt`, `[fr] ${title}`);
      await translations.client.send(
        new PutItemCommand({
          TableName: translations.tableName,
          Item: {
            taskId: { S: taskId },
            version: { N: String(version) },
            state: { S: 'done' },
            title: { S: `[fr] ${title}` },
          },
        }),
      );
      const announced = await translated.publish({
        id: event.id,
        group: taskId,
        subject: `Translated: ${title}`,
        body: { eventId: event.id, taskId, version, title: `[fr] ${title}` },
        attributes: { taskId },
      });
      return { stored, announced };
    },
);
