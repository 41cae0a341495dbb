import { afterEach, describe, expect, it, vi } from 'vitest';
import { consumerEnv, consumerQueueEnv } from '../../shared/consumers/contract';
import { resourceEnvName } from '../../shared/consumers/resources';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { translate } from '../fixtures/consumers/translate/consumer';
import { topologyAdding } from '../support/topology-variants';

// The fixture consumer's handler.ts is what the CDK bundles for it: with the environment the
// construct gives it (its name, the inbox, a variable per declared table, topic and bucket, its
// queue, the database settings) it builds a handler; without its table's variable the cold start
// fails, naming the variable.

/** The fixture consumer's queue, as the construct names it in the function's environment. */
function stubQueueEnv(): void {
  // The inbox settings the stack writes from its topology (a variant with the fixture added).
  const t = topologyAdding(translate);
  vi.stubEnv(
    consumerEnv.inboxSettings,
    JSON.stringify({ ...inboxSettingsFor(t, translate.name), openIndexShards: t.inbox.openIndexShards }),
  );
  vi.stubEnv(consumerQueueEnv.url, 'https://sqs.eu-west-1.amazonaws.com/123456789012/translate');
  vi.stubEnv(consumerQueueEnv.arn, 'arn:aws:sqs:eu-west-1:123456789012:translate');
  vi.stubEnv(consumerQueueEnv.visibilityTimeoutSeconds, '360');
}

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

const handlerModule = () => import('../fixtures/consumers/translate/handler');

describe('the fixture consumer’s Lambda handler', () => {
  it('builds from the environment its declaration asks for', async () => {
    vi.stubEnv(consumerEnv.consumerName, translate.name);
    vi.stubEnv(consumerEnv.inboxTable, 'content-pipeline-inbox');
    vi.stubEnv(resourceEnvName('translations', 'table'), 'content-pipeline-translations');
    vi.stubEnv(resourceEnvName('translated', 'topic'), 'arn:aws:sns:eu-west-1:123456789012:translated');
    vi.stubEnv(resourceEnvName('renditions', 'bucket'), 'content-pipeline-renditions');
    // Its database resource: the function's database settings (the Data API on AWS).
    vi.stubEnv('DB_CLUSTER_ARN', 'arn:aws:rds:eu-west-1:123456789012:cluster:pipeline');
    vi.stubEnv('DB_SECRET_ARN', 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:translate');
    vi.stubEnv('DB_NAME', 'pipeline');
    stubQueueEnv();
    const { handler } = await handlerModule();
    expect(typeof handler).toBe('function');
  });

  it('fails its cold start without its table, naming the variable', async () => {
    vi.stubEnv(consumerEnv.consumerName, translate.name);
    vi.stubEnv(consumerEnv.inboxTable, 'content-pipeline-inbox');
    vi.stubEnv(resourceEnvName('translations', 'table'), '');
    vi.stubEnv(resourceEnvName('translated', 'topic'), 'arn:aws:sns:eu-west-1:123456789012:translated');
    vi.stubEnv(resourceEnvName('renditions', 'bucket'), 'content-pipeline-renditions');
    stubQueueEnv();
    await expect(handlerModule()).rejects.toThrow(/TRANSLATIONS_TABLE_NAME/);
  });
});
