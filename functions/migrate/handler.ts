import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { createSqlClient, parseConfig } from '../../shared/config';
import { migrate } from '../../shared/db/migrate';

const config = parseConfig();
const logger = new Logger({ serviceName: 'migrate' });
const db = createSqlClient(config);

/**
 * CDK custom resource (Provider framework `onEvent`): applies pending migrations on Create
 * and Update, does nothing on Delete (a stack deletion never drops data). The physical id is
 * fixed, so an update never makes CloudFormation delete the old resource; the schema version
 * is returned as `SchemaVersion` for stack outputs.
 */
export async function run(event: Pick<CloudFormationCustomResourceEvent, 'RequestType'>) {
  if (event.RequestType === 'Delete') return { PhysicalResourceId: 'content-pipeline-schema' };
  const result = await migrate(db);
  logger.info('migrations', { ...result });
  const version = Math.max(0, ...result.applied, ...result.alreadyApplied);
  return { PhysicalResourceId: 'content-pipeline-schema', Data: { SchemaVersion: String(version) } };
}

export const handler = middy(run).use(injectLambdaContext(logger));
