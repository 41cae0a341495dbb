import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { buildConsumerDeps } from '../../../shared/consumers/consumer-deps';

// Module scope: a bad environment fails the cold start; clients and the database pool are built once per container.
const deps = buildConsumerDeps('archive');

/** The archive consumer Lambda: stores a write-once S3 snapshot of each approved task version. */
export const handler = createConsumerHandler(deps);
