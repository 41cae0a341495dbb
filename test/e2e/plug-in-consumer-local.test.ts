import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { translate } from '../fixtures/consumers/translate/consumer';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { topologyAdding } from '../support/topology-variants';
import { waitFor } from '../support/wait-for';

/**
 * A consumer added to the registry alone runs end to end on the local runtime: the bus routes
 * what it subscribes to, its effect reads the task as its database role and writes its table,
 * topic and bucket, and the status page counts it by its declared counters.
 */
describe('the local runtime with a plug-in consumer added to the registry', () => {
  let runtime: Runtime;
  let dir: string;

  beforeAll(async () => {
    dir = tempDataDir('pipeline-plug-in-');
    runtime = await startRuntime({
      dataDir: dir,
      port: 0,
      topology: topologyAdding(translate),
    });
  }, 300_000);

  afterAll(async () => {
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'delivers an approval to it beside the project consumers, once, counted by its own counters',
    async () => {
      const client = pipelineClient(runtime.url);
      const [taskId] = await client.createAndApprove(1);
      const status = await waitFor(
        () => runtime.status(),
        (s) => s.effects !== null && s.effects.translationsDone === 1 && s.effects.archivedObjects === 1,
        { timeoutMs: deliveryBoundMs, intervalMs: 200, what: 'the approval through every consumer' },
      );
      expect(status.effects).toEqual({
        indexDocuments: 1,
        notificationsSent: 1,
        archivedObjects: 1,
        translationsDone: 1,
        translationsAnnounced: 1,
        renditionsStored: 1,
      });
      expect(await runtime.consumers.countEffects()).toEqual(status.effects);
      expect(await runtime.consumers.processedCount('translate')).toBe(1);
      // Its rendition holds the title its database role read.
      expect(readFileSync(join(dir, 'effects', 'renditions', String(taskId), 'v2.txt'), 'utf8')).toBe(
        '[fr] task 0',
      );
    },
    2 * deliveryBoundMs,
  );
});
