import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { withInvocationDeadline } from '../../shared/aws/sdk-client';
import { createSqlClient, parseConfig } from '../../shared/config';
import { createRelayNudger } from '../../shared/tasks/relay-nudger';
import { createTasksApi } from '../../shared/tasks/tasks-api';

// Module scope: a bad environment fails the cold start, and the SQL and Lambda clients are
// built once per container rather than per request.
const config = parseConfig(process.env);
const logger = new Logger({ serviceName: 'tasks-api' });

/**
 * The tasks API Lambda (API Gateway REST proxy): only wiring. Routing, validation and the
 * middlewares live in `createTasksApi`, which the local runtime and the tests call directly.
 */
export const handler = withInvocationDeadline(
  createTasksApi({
    db: createSqlClient(config, 'tasksApi'),
    nudger: createRelayNudger(config.relayFunctionName),
    logger,
  }).use(injectLambdaContext(logger, { resetKeys: true })),
);
