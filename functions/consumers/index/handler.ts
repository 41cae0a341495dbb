import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { buildConsumerDeps } from '../../../shared/consumers/consumer-deps';

// Module scope: a bad environment fails the cold start, and clients are built once per container.
const deps = buildConsumerDeps('index');

/** The index consumer Lambda: keeps the content-index table at each task's latest version. */
export const handler = createConsumerHandler(deps);
